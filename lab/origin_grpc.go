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
//   - The propagated deadline is gRPC's own (grpc-timeout). An origin that
//     sheds (deadline shedding, a concurrency limit, drop_expired) admits
//     each call through resilgrpc's server interceptor over the same resil
//     Shedder as the HTTP edge's resilhttp.Shed: it refuses, before the
//     handler runs, what has expired, cannot finish in time or is over the
//     limit, and the handler runs under the deadline less the reserve,
//     which the model reads as over HTTP. Its refusals are counted as the
//     HTTP edge's are (result "shed").
//   - The attempt's kind, the intent and the idempotency key come as
//     metadata: AttemptHeader, IntentHeader, IdempotentHeader and
//     resilgrpc.DefaultKeyHeader.

// ServerOptions are the origin's gRPC interceptors: its OpenTelemetry
// metrics (rpc.server.call.duration), outermost; the count of every call
// that arrives, shed or not; and, when the origin sheds, its admission
// (resilgrpc.Server over the origin's Shedder).
func (o *Origin) ServerOptions() []grpc.ServerOption {
	chain := []grpc.UnaryServerInterceptor{o.otel.interceptor(), o.arriveGRPC}
	if o.shed != nil {
		chain = append(chain, o.shed.UnaryInterceptor())
	}
	return []grpc.ServerOption{grpc.ChainUnaryInterceptor(chain...)}
}

// arriveGRPC counts a call reaching the origin's gRPC edge, shed or not,
// as arrive does over HTTP.
func (o *Origin) arriveGRPC(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	now := time.Now()
	c := o.arrived(ctx, now, first(md, AttemptHeader))
	c.tick = o.tally.sentTick(first(md, TickHeader), now)
	defer o.ended(c)
	return handler(context.WithValue(ctx, callKey{}, c), req)
}

// Register registers the origin's service, grpc.testing.TestService: its
// UnaryCall is work; its other methods are unimplemented.
func (o *Origin) Register(s *grpc.Server) {
	testgrpc.RegisterTestServiceServer(s, grpcOrigin{o: o})
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
	c, deadline := g.o.admitted(ctx)
	a := arrival{
		intent:   first(md, IntentHeader),
		tick:     c.tick,
		deadline: deadline,
		effect:   first(md, IdempotentHeader) == "false",
		gone:     c.conn.Done(),
	}
	if a.effect {
		a.key = first(md, resilgrpc.DefaultKeyHeader)
	}
	c.res = g.o.serve(now, a)
	switch c.res {
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
	err := c.conn.Err()
	if err == nil {
		err = context.Canceled
	}
	return nil, status.FromContextError(err).Err()
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
