package resilgrpc_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/retrystorm/retrystorm/resil"
	"github.com/retrystorm/retrystorm/resil/budget"
	"github.com/retrystorm/retrystorm/resil/resilgrpc"
	"github.com/retrystorm/retrystorm/resil/resilgrpc/grpcconfig"
)

// flaky answers UNAVAILABLE to its first failures calls, then OK.
type flaky struct {
	testpb.UnimplementedTestServiceServer
	failures int32
	calls    atomic.Int32
}

func (f *flaky) UnaryCall(ctx context.Context, _ *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	if f.calls.Add(1) <= f.failures {
		return nil, status.Error(codes.Unavailable, "warming up")
	}
	return &testpb.SimpleResponse{ServerId: "replica-1"}, nil
}

// serve starts srv on 127.0.0.1 and returns its address and a stop
// function.
func serve(srv testpb.TestServiceServer, opts ...grpc.ServerOption) (string, func()) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	s := grpc.NewServer(opts...)
	testpb.RegisterTestServiceServer(s, srv)
	go s.Serve(lis)
	return lis.Addr().String(), s.Stop
}

// connect connects conn and waits, up to 10 s, until it is ready, so that
// an example's short deadline is its call's, not the handshake's.
func connect(conn *grpc.ClientConn) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn.Connect()
	for st := conn.GetState(); st != connectivity.Ready && conn.WaitForStateChange(ctx, st); st = conn.GetState() {
	}
}

// Guard every call of a channel: retries of UNAVAILABLE paid from a retry
// budget, behind a circuit breaker.
func ExampleNewClient() {
	addr, stop := serve(&flaky{failures: 2})
	defer stop()

	budget, _ := budget.NewTokenBucket(budget.TokenBucketSettings{Ratio: 0.1, Funding: budget.FundedByRequest, MinTokens: 10})
	breaker, _ := resil.NewBreaker(resil.BreakerSettings{Threshold: 5})
	guard, _ := resil.NewGuard(resil.GuardSettings{
		Idempotency:    resil.Idempotent,
		AttemptTimeout: time.Second,
		Policy: resil.Policy{MaxRetries: 3, Budget: budget, Breaker: breaker,
			Backoff: resil.Backoff{Schedule: resil.Exponential, Base: 10 * time.Millisecond, Cap: time.Second, Jitter: resil.FullJitter}},
	})
	client, err := resilgrpc.NewClient(resilgrpc.ClientSettings{Default: resilgrpc.Method{Guard: guard}})
	if err != nil {
		fmt.Println(err)
		return
	}
	conn, _ := grpc.NewClient(addr, append(client.DialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	defer conn.Close()

	reply, err := testpb.NewTestServiceClient(conn).UnaryCall(context.Background(), &testpb.SimpleRequest{})
	st := guard.Stats()
	fmt.Println(reply.GetServerId(), err)
	fmt.Printf("attempts %d, retries %d, retries/requests %.0f\n", st.Attempts, st.Retries, st.RetriesPerRequest)
	// Output:
	// replica-1 <nil>
	// attempts 3, retries 2, retries/requests 2
}

// Move a channel from grpc-go's built-in retries to resil without changing
// what its service config means; then add a budget.
func ExampleFromServiceConfig() {
	addr, stop := serve(&flaky{failures: 1})
	defer stop()

	cfg, err := grpcconfig.Parse([]byte(`{
	  "methodConfig": [{"name": [{"service": "grpc.testing.TestService"}],
	    "retryPolicy": {"maxAttempts": 4, "initialBackoff": "0.01s", "maxBackoff": "0.1s",
	                    "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]}}],
	  "retryThrottling": {"maxTokens": 10, "tokenRatio": 0.1}}`), grpcconfig.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	settings, err := resilgrpc.FromServiceConfig(cfg, resilgrpc.ConfigOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	client, _ := resilgrpc.NewClient(settings)
	conn, _ := grpc.NewClient(addr, append(client.DialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	defer conn.Close()

	_, err = testpb.NewTestServiceClient(conn).UnaryCall(context.Background(), &testpb.SimpleRequest{})
	guard := settings.Methods["/grpc.testing.TestService/"].Guard
	st := guard.Stats()
	fmt.Println("err:", err, "retries:", st.Retries, "throttle tokens:", st.BudgetTokens)
	// Output:
	// err: <nil> retries: 1 throttle tokens: 9.1
}

// A call that is not idempotent is retried only with an idempotency key,
// which every attempt carries for the server to deduplicate by.
func ExampleWithKey() {
	addr, stop := serve(&flaky{failures: 1})
	defer stop()

	guard, _ := resil.NewGuard(resil.GuardSettings{Idempotency: resil.NotIdempotent, Policy: resil.Policy{MaxRetries: 2}})
	client, _ := resilgrpc.NewClient(resilgrpc.ClientSettings{Default: resilgrpc.Method{Guard: guard}})
	conn, _ := grpc.NewClient(addr, append(client.DialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	defer conn.Close()
	tc := testpb.NewTestServiceClient(conn)

	_, err := tc.UnaryCall(context.Background(), &testpb.SimpleRequest{})
	fmt.Println("without a key:", status.Code(err), errors.Is(err, resil.ErrNotIdempotent))
	_, err = tc.UnaryCall(context.Background(), &testpb.SimpleRequest{}, resilgrpc.WithKey("order-42"))
	fmt.Println("with a key:", err)
	// Output:
	// without a key: Unavailable true
	// with a key: <nil>
}

// A server sheds calls whose deadline leaves too little time, before the
// handler runs; its pushback stops the client's retries.
func ExampleNewServer() {
	shed, _ := resilgrpc.NewServer(resilgrpc.ServerSettings{MinTime: 100 * time.Millisecond})
	addr, stop := serve(&flaky{}, shed.ServerOptions()...)
	defer stop()

	guard, _ := resil.NewGuard(resil.GuardSettings{Idempotency: resil.Idempotent, Policy: resil.Policy{MaxRetries: 3}})
	client, _ := resilgrpc.NewClient(resilgrpc.ClientSettings{Default: resilgrpc.Method{Guard: guard}})
	conn, _ := grpc.NewClient(addr, append(client.DialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	defer conn.Close()
	connect(conn) // the 20 ms below are the call's, not the handshake's

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err := testpb.NewTestServiceClient(conn).UnaryCall(ctx, &testpb.SimpleRequest{})
	fmt.Println(status.Code(err), errors.Is(err, resil.ErrPushback), "shed:", shed.Shed())
	// Output:
	// Unavailable true shed: 1
}

// The idempotency a method declares in its .proto file (option
// idempotency_level) can set its Method's.
func ExampleProtoIdempotency() {
	i, ok := resilgrpc.ProtoIdempotency("/grpc.testing.TestService/UnaryCall")
	fmt.Println(i, ok)
	// Output:
	// not_idempotent true
}
