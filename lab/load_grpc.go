package lab

import (
	"context"
	"errors"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"

	"github.com/retrystorm/retrystorm/resil"
	"github.com/retrystorm/retrystorm/resil/resilgrpc"
)

// grpcSender sends intents as calls of grpc.testing.TestService/UnaryCall,
// all on one connection, with grpc-go's own retries off: the gateway
// decides retries, and an intent is one call.
type grpcSender struct {
	cc *grpc.ClientConn
	tc testgrpc.TestServiceClient
}

func newGRPCSender(cfg LoadConfig) (*grpcSender, error) {
	cc, err := grpc.NewClient("passthrough:///"+cfg.Target.Host,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDisableRetry())
	if err != nil {
		return nil, err
	}
	return &grpcSender{cc: cc, tc: testgrpc.NewTestServiceClient(cc)}, nil
}

func (s *grpcSender) close() { _ = s.cc.Close() }

// warm connects before the first intent is due, waiting at most five
// seconds; a gateway it cannot reach shows in the intents.
func (s *grpcSender) warm(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s.cc.Connect()
	for st := s.cc.GetState(); st != connectivity.Ready && st != connectivity.TransientFailure; st = s.cc.GetState() {
		if !s.cc.WaitForStateChange(ctx, st) {
			return
		}
	}
}

func (s *grpcSender) send(ctx context.Context, in call) answer {
	md := metadata.Pairs(IntentHeader, strconv.FormatUint(in.id, 10), ClientHeader, strconv.FormatUint(in.client, 10))
	if !in.idempotent {
		md.Set(IdempotentHeader, "false")
		if in.key != "" {
			md.Set(resilgrpc.DefaultKeyHeader, in.key)
		}
	}
	// The deadline travels as gRPC's own (grpc-timeout).
	var trailer metadata.MD
	_, err := s.tc.UnaryCall(metadata.NewOutgoingContext(ctx, md), &testgrpc.SimpleRequest{}, grpc.Trailer(&trailer))
	a := answer{fallback: first(trailer, FallbackHeader) != ""}
	a.failed, _ = strconv.Atoi(first(trailer, FailedHeader))
	if err == nil {
		a.ok = !a.fallback
		return a
	}
	if w := first(trailer, StopHeader); w != "" {
		// The gateway's word for why it stopped, as over HTTP.
		_ = a.why.reason.UnmarshalText([]byte(w))
		return a
	}
	// No word from the gateway: the intent's deadline passed, or the run
	// was stopped.
	return answer{failed: 1, why: loss{reason: resil.StopDeadline, unfinished: errors.Is(ctx.Err(), context.Canceled)}}
}
