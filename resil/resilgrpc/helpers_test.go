package resilgrpc

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"

	"github.com/retrystorm/retrystorm/resil"
)

// TestMain fails the package if a test leaves a goroutine running: no
// attempt, hedge or stream driver may outlive its call.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// arrival is one attempt as the test server saw it.
type arrival struct {
	method   string
	previous string // grpc-previous-rpc-attempts
	key      string // idempotency-key
	body     string // the request payload
	at       time.Time
}

// server is a real gRPC server on 127.0.0.1 whose answers come from
// scripts, given the arrival's index (from 0) and its context.
type server struct {
	testpb.UnimplementedTestServiceServer
	addr string

	mu       sync.Mutex
	arrivals []arrival

	unary  func(ctx context.Context, n int, req *testpb.SimpleRequest) (*testpb.SimpleResponse, error)
	output func(n int, req *testpb.StreamingOutputCallRequest, s grpc.ServerStreamingServer[testpb.StreamingOutputCallResponse]) error
	duplex func(n int, s grpc.BidiStreamingServer[testpb.StreamingOutputCallRequest, testpb.StreamingOutputCallResponse]) error
}

// startServer serves s on a loopback port until the test ends.
func startServer(t testing.TB, s *server, opts ...grpc.ServerOption) *server {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(opts...)
	testpb.RegisterTestServiceServer(gs, s)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = gs.Serve(lis)
	}()
	t.Cleanup(func() {
		gs.Stop()
		<-done
	})
	s.addr = lis.Addr().String()
	return s
}

func (s *server) arrive(ctx context.Context, method, body string) int {
	md, _ := metadata.FromIncomingContext(ctx)
	a := arrival{method: method, body: body, at: time.Now()}
	if v := md.Get(PreviousAttemptsHeader); len(v) > 0 {
		a.previous = v[0]
	}
	if v := md.Get(DefaultKeyHeader); len(v) > 0 {
		a.key = v[0]
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.arrivals = append(s.arrivals, a)
	return len(s.arrivals) - 1
}

func (s *server) seen() []arrival {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]arrival(nil), s.arrivals...)
}

// EmptyCall answers at once, unrecorded: a method no script governs.
func (s *server) EmptyCall(context.Context, *testpb.Empty) (*testpb.Empty, error) {
	return &testpb.Empty{}, nil
}

func (s *server) UnaryCall(ctx context.Context, req *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	n := s.arrive(ctx, "UnaryCall", string(req.GetPayload().GetBody()))
	return s.unary(ctx, n, req)
}

func (s *server) StreamingOutputCall(req *testpb.StreamingOutputCallRequest, st grpc.ServerStreamingServer[testpb.StreamingOutputCallResponse]) error {
	n := s.arrive(st.Context(), "StreamingOutputCall", string(req.GetPayload().GetBody()))
	return s.output(n, req, st)
}

func (s *server) FullDuplexCall(st grpc.BidiStreamingServer[testpb.StreamingOutputCallRequest, testpb.StreamingOutputCallResponse]) error {
	n := s.arrive(st.Context(), "FullDuplexCall", "")
	return s.duplex(n, st)
}

// dial connects to s through the client's interceptors.
func dial(t testing.TB, s *server, c *Client, extra ...grpc.DialOption) testpb.TestServiceClient {
	t.Helper()
	opts := append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, extra...)
	if c != nil {
		opts = append(opts, c.DialOptions()...)
	}
	cc, err := grpc.NewClient(s.addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	if err := ready(cc); err != nil {
		t.Fatal(err)
	}
	return testpb.NewTestServiceClient(cc)
}

// ready connects cc and waits until it is ready. grpc.NewClient connects
// on the first call, which then carries the handshake: on a busy machine
// under the race detector that outlasted the tests' short deadlines,
// cancels and hedge delays, which are about the call.
func ready(cc *grpc.ClientConn) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cc.Connect()
	for st := cc.GetState(); st != connectivity.Ready; st = cc.GetState() {
		if !cc.WaitForStateChange(ctx, st) {
			return fmt.Errorf("the connection to %s is not ready within 10 s (%v)", cc.Target(), st)
		}
	}
	return nil
}

func mustGuard(t testing.TB, s resil.GuardSettings) *resil.Guard {
	t.Helper()
	g, err := resil.NewGuard(s)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func mustClient(t testing.TB, s ClientSettings) *Client {
	t.Helper()
	c, err := NewClient(s)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func req(body string) *testpb.SimpleRequest {
	return &testpb.SimpleRequest{Payload: &testpb.Payload{Body: []byte(body)}}
}

func resp(id string) *testpb.SimpleResponse { return &testpb.SimpleResponse{ServerId: id} }

// waitClock is the real clock but for the Guard's waits (backoff,
// pushback), which it records and skips.
type waitClock struct {
	mu    sync.Mutex
	waits []time.Duration
}

func (c *waitClock) Now() time.Time { return time.Now() }

func (c *waitClock) NewTimer(d time.Duration) resil.Timer {
	c.mu.Lock()
	c.waits = append(c.waits, d)
	c.mu.Unlock()
	ch := make(chan time.Time, 1)
	ch <- time.Now()
	return firedTimer(ch)
}

func (c *waitClock) AfterFunc(d time.Duration, f func()) resil.Timer {
	return resil.RealClock().AfterFunc(d, f)
}

func (c *waitClock) Waits() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.waits...)
}

// planClock is the real clock, which also records every wait the Guard
// plans (backoff, pushback), exactly as the policy decided it.
type planClock struct {
	waitClock
}

func (c *planClock) NewTimer(d time.Duration) resil.Timer {
	c.mu.Lock()
	c.waits = append(c.waits, d)
	c.mu.Unlock()
	return resil.RealClock().NewTimer(d)
}

type firedTimer chan time.Time

func (t firedTimer) C() <-chan time.Time { return t }
func (t firedTimer) Stop() bool          { return false }

// events collects a Guard's events.
type events struct {
	mu sync.Mutex
	ev []resil.Event
}

func watch(g *resil.Guard) *events {
	e := &events{}
	g.Observe(func(x resil.Event) {
		e.mu.Lock()
		e.ev = append(e.ev, x)
		e.mu.Unlock()
	})
	return e
}

// outcomes returns the outcomes of the attempts, in order.
func (e *events) outcomes() []resil.Outcome {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []resil.Outcome
	for _, x := range e.ev {
		if x.Kind == resil.EventAttempt {
			out = append(out, x.Outcome)
		}
	}
	return out
}
