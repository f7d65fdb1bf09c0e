package lab

import (
	"context"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/retrystorm/retrystorm/resil/resilgrpc"
	"github.com/retrystorm/retrystorm/scenario"
)

// The origin over gRPC: the same model, clock and faults as over HTTP
// (serve), behind grpc.testing.TestService/UnaryCall. Serve it with
// ListenGRPC(addr, origin); its /metrics and /admin/faults stay on its
// HTTP Handler.
//
//   - Overload rejections, the error share and a shutdown answer
//     UNAVAILABLE, the code a gRPC client retries; a call the origin never
//     answers (an outage, a client that left) ends with its context, as
//     CANCELLED or DEADLINE_EXCEEDED, which nobody receives.
//   - The propagated deadline is gRPC's own (grpc-timeout); with
//     drop_expired the model reads it as over HTTP, and resilgrpc's server
//     interceptor (resilgrpc.Server) refuses, before the handler runs, a
//     call whose deadline leaves less than one service time: it cannot be
//     answered in time however soon it is served. Its refusals are
//     counted as the model's drops are.
//   - The attempt's kind, the intent and the idempotency key come as
//     metadata: AttemptHeader, IntentHeader, IdempotentHeader and
//     resilgrpc.DefaultKeyHeader.

// ServerOptions are the origin's gRPC interceptors: its OpenTelemetry
// metrics (rpc.server.call.duration), outermost, and with drop_expired
// resilgrpc's deadline shedding.
func (o *Origin) ServerOptions() []grpc.ServerOption {
	chain := []grpc.UnaryServerInterceptor{o.otel.interceptor()}
	if o.shed != nil {
		chain = append(chain, o.shed.UnaryInterceptor())
	}
	return []grpc.ServerOption{grpc.ChainUnaryInterceptor(chain...)}
}

// Register registers the origin's service, grpc.testing.TestService: its
// UnaryCall is work; its other methods are unimplemented.
func (o *Origin) Register(s *grpc.Server) {
	testgrpc.RegisterTestServiceServer(s, grpcOrigin{o: o})
}

// newShedder returns the deadline shedding of a drop_expired origin's gRPC
// edge, nil for others: a call needs one service time (workers over
// capacity, as the model serves). Its refusals reached the origin: they
// are offered load, and drops.
func (o *Origin) newShedder() (*resilgrpc.Server, error) {
	m := &o.cfg.Origin
	if !m.DropExpired || m.Model != scenario.ModelQueue || m.Capacity <= 0 {
		return nil, nil
	}
	return resilgrpc.NewServer(resilgrpc.ServerSettings{
		MinTime: time.Duration(float64(m.Workers) / m.Capacity * float64(time.Second)),
		OnShed: func(string, time.Duration) {
			o.tally.addNow(cOffered, time.Now())
			o.dropped.Add(1)
			o.tally.inc(tDropped)
			o.m.requests.WithLabelValues(resultNames[resShed]).Inc()
		},
	})
}

// grpcOrigin is the origin's TestService.
type grpcOrigin struct {
	testgrpc.UnimplementedTestServiceServer
	o *Origin
}

// UnaryCall is one request over gRPC.
func (g grpcOrigin) UnaryCall(ctx context.Context, _ *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	now := time.Now()
	md, _ := metadata.FromIncomingContext(ctx)
	a := arrival{
		intent: first(md, IntentHeader),
		kind:   first(md, AttemptHeader),
		effect: first(md, IdempotentHeader) == "false",
		gone:   ctx.Done(),
	}
	if dl, ok := ctx.Deadline(); ok {
		a.timeout = dl.Sub(now)
	}
	if a.effect {
		a.key = first(md, resilgrpc.DefaultKeyHeader)
	}
	switch g.o.serve(now, a) {
	case resOK:
		return &testgrpc.SimpleResponse{}, nil
	case resError:
		return nil, errFailed
	case resRejected:
		return nil, errOverloaded
	case resStopped:
		return nil, errStopping
	case resRefused:
		return nil, errRefused
	}
	// Nobody waits for the answer: the client left, or an outage holds the
	// call until it does.
	return nil, status.FromContextError(ctx.Err()).Err()
}

var (
	errFailed     = status.Error(codes.Unavailable, "origin: failed")
	errOverloaded = status.Error(codes.Unavailable, "origin: overloaded")
	errStopping   = status.Error(codes.Unavailable, "origin: shutting down")
	errRefused    = status.Error(codes.Unavailable, "origin: refused (outage)")
)

// first returns the first value of metadata key k, or "".
func first(md metadata.MD, k string) string {
	if v := md.Get(k); len(v) > 0 {
		return v[0]
	}
	return ""
}
