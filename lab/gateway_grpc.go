package lab

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/retrystorm/retrystorm/resil"
	"github.com/retrystorm/retrystorm/resil/resilgrpc"
)

// GRPCGateway is the gateway over gRPC: a proxy that forwards every call
// it receives, of any method, to the origin under the Guard of the client
// it comes from, through resilgrpc's client interceptors. Each client has a
// connection of its own to the origin (as a client instance has its
// channel), installed with resilgrpc.Client.DialOptions, and a Guard made
// as the HTTP gateway's are (Fleet.NewPolicy): UNAVAILABLE is retried, the
// fleet's timeout is each attempt's. When a client's breaker is open the
// gateway answers with a fallback (OK, an empty message and the trailer
// FallbackHeader: breaker-open).
//
// Messages are forwarded as they are, undecoded (a codec of raw frames),
// so a real service could sit behind the gateway. Calls are unary: a call
// that sends a second message is refused with UNIMPLEMENTED, since resil's
// whole policy (hedging included) applies to unary calls and the lab's
// intents are unary.
//
// It forwards IntentHeader and IdempotentHeader, tells the origin why it
// sent each attempt (AttemptHeader, from resilgrpc.AttemptOf) and its
// caller how the intent went, as trailers (AttemptsHeader, FailedHeader,
// StopHeader in resil.StopReason's words, from resil.ReasonOf). The
// caller's deadline bounds the Guard, and gRPC propagates each attempt's
// to the origin. Its metrics are Prometheus's, on a registry of its own,
// served by Handler.
//
// Make one with NewGRPCGateway, serve it with ListenGRPC, and Close it.
// It is safe for concurrent use.
type GRPCGateway struct {
	cfg      GatewayConfig
	conns    []*grpc.ClientConn
	guards   guardSet
	retryAll bool // the fleet retries every intent, side effects or not
	reg      *prometheus.Registry
	m        gatewayMetrics
	next     atomic.Uint64 // round robin when the caller names no client
}

// NewGRPCGateway returns a gateway over gRPC to the origin at
// cfg.Origin.Host (its scheme is ignored; cfg.Base is not used), or an
// error naming an invalid setting. It connects to nothing until the first
// call (or Warm).
func NewGRPCGateway(cfg GatewayConfig) (*GRPCGateway, error) {
	if cfg.Origin == nil || cfg.Origin.Host == "" {
		return nil, errors.New("lab: GatewayConfig.Origin is required: the origin's host:port")
	}
	g := &GRPCGateway{cfg: cfg, reg: prometheus.NewRegistry(), retryAll: !cfg.Fleet.Retry.IdempotentOnly}
	for k := range max(cfg.Clients, 1) {
		guard, err := clientGuard(cfg, k, g.reg)
		if err != nil {
			g.Close()
			return nil, err
		}
		c, err := resilgrpc.NewClient(resilgrpc.ClientSettings{Default: resilgrpc.Method{Guard: guard}})
		if err != nil {
			g.Close()
			return nil, err
		}
		opts := append([]grpc.DialOption{
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.ForceCodecV2(frameCodec{})),
		}, c.DialOptions()...)
		// After resilgrpc's: the inner interceptor sees every attempt.
		opts = append(opts, grpc.WithChainUnaryInterceptor(g.lastHop))
		cc, err := grpc.NewClient("passthrough:///"+cfg.Origin.Host, opts...)
		if err != nil {
			g.Close()
			return nil, err
		}
		g.conns = append(g.conns, cc)
		g.guards = append(g.guards, guard)
	}
	var err error
	if g.m, err = registerGateway(g.reg, g.guards); err != nil {
		g.Close()
		return nil, err
	}
	return g, nil
}

// ServerOptions are the gateway's gRPC server's: every call goes to the
// proxy, its messages undecoded.
func (g *GRPCGateway) ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.UnknownServiceHandler(g.proxy),
		grpc.ForceServerCodecV2(frameCodec{}),
	}
}

// Register registers nothing: every method is the proxy's.
func (g *GRPCGateway) Register(*grpc.Server) {}

// Handler serves the gateway's /metrics over HTTP.
func (g *GRPCGateway) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(g.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc(healthPath, serveHealth)
	return mux
}

// Registry returns the registry the gateway's metrics are on.
func (g *GRPCGateway) Registry() *prometheus.Registry { return g.reg }

// Guards returns the clients' Guards, in client order.
func (g *GRPCGateway) Guards() []*resil.Guard { return g.guards }

// OpenShare returns the share of clients whose breaker is open.
func (g *GRPCGateway) OpenShare(now time.Time) float64 { return g.guards.openShare(now) }

// Counts sums the clients' Guard stats.
func (g *GRPCGateway) Counts() GatewayCounts { return g.guards.counts() }

// Warm connects every client to the origin, and waits until each is ready
// or ctx is done.
func (g *GRPCGateway) Warm(ctx context.Context) error {
	for _, cc := range g.conns {
		cc.Connect()
		for s := cc.GetState(); s != connectivity.Ready; s = cc.GetState() {
			if !cc.WaitForStateChange(ctx, s) {
				return errors.New("lab: the gateway cannot reach the origin: " + s.String())
			}
		}
	}
	return nil
}

// Close lets the hedges that lost settle for a moment, then closes the
// connections to the origin.
func (g *GRPCGateway) Close() {
	g.guards.settle()
	for _, cc := range g.conns {
		_ = cc.Close()
	}
}

// proxy forwards one call to the origin under its client's Guard.
func (g *GRPCGateway) proxy(_ any, ss grpc.ServerStream) error {
	start := time.Now()
	g.m.inflight.Inc()
	defer g.m.inflight.Dec()
	err := g.forward(ss)
	g.m.requests.WithLabelValues(codeName(status.Code(err))).Inc()
	g.m.latency.Observe(time.Since(start).Seconds())
	return err
}

func (g *GRPCGateway) forward(ss grpc.ServerStream) error {
	ctx := ss.Context()
	method, _ := grpc.MethodFromServerStream(ss)
	var in rawFrame
	if err := ss.RecvMsg(&in); err != nil {
		return err
	}
	// A unary call's client has sent all it sends.
	if err := ss.RecvMsg(new(rawFrame)); err != io.EOF {
		if err == nil {
			return status.Error(codes.Unimplemented, "gateway: only unary calls are proxied")
		}
		return err
	}
	md, _ := metadata.FromIncomingContext(ctx)
	n := uint64(len(g.conns))
	k := g.next.Add(1) % n
	if v, err := strconv.ParseUint(first(md, ClientHeader), 10, 64); err == nil {
		k = v % n
	}
	tr := &trace{client: int(k)}
	out := metadata.MD{}
	for _, h := range [...]string{IntentHeader, IdempotentHeader} {
		if v := md.Get(h); len(v) > 0 {
			out.Set(h, v[0])
		}
	}
	octx := metadata.NewOutgoingContext(context.WithValue(ctx, traceKey{}, tr), out)

	// How the call may be retried: every intent when the fleet retries
	// blindly (the simulator's naive client); else as the caller declared
	// it, and a call with a side effect only with its key.
	var opts []grpc.CallOption
	if g.retryAll || first(md, IdempotentHeader) != "false" {
		opts = append(opts, resilgrpc.Idempotent())
	} else {
		opts = append(opts, resilgrpc.NotIdempotent())
	}
	if key := first(md, resilgrpc.DefaultKeyHeader); key != "" {
		opts = append(opts, resilgrpc.WithKey(key))
	}
	var reply rawFrame
	err := g.conns[k].Invoke(octx, method, &in, &reply, opts...)

	trailer := metadata.Pairs(
		AttemptsHeader, strconv.Itoa(int(tr.sent.Load())),
		FailedHeader, strconv.Itoa(int(tr.failed.Load())))
	if err == nil {
		ss.SetTrailer(trailer)
		return ss.SendMsg(&reply)
	}
	why := resil.ReasonOf(err)
	trailer.Set(StopHeader, why.String())
	if why == resil.StopBreaker {
		g.cfg.refused(cRefused, octx, time.Now())
		g.m.fallbacks.Inc()
		trailer.Set(FallbackHeader, "breaker-open")
		ss.SetTrailer(trailer)
		return ss.SendMsg(new(rawFrame)) // an empty message: every field unset
	}
	ss.SetTrailer(trailer)
	if why == resil.StopThrottled {
		// Refused locally (counted by the Guard's observer): the
		// overload code, as the HTTP gateway's 503.
		return status.Error(codes.Unavailable, "gateway: "+err.Error())
	}
	return status.Convert(err).Err() // the status the caller should see
}

// lastHop is the gateway's last hop, inside resilgrpc's interceptor: it
// sees every attempt the Guard sends, with its kind (resilgrpc.AttemptOf),
// tells the origin why the attempt was sent, and counts the attempt and
// its fate for the tick it was sent in.
func (g *GRPCGateway) lastHop(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	tr := traceOf(ctx)
	if tr == nil {
		tr = &trace{}
	}
	tally := g.cfg.Tally
	k := tally.tickOf(time.Now())
	a, _ := resilgrpc.AttemptOf(ctx)
	tr.sent.Add(1)
	tally.add(kindCounts[a.Kind], k)
	err := invoker(metadata.AppendToOutgoingContext(ctx, AttemptHeader, a.Kind.String(), TickHeader, strconv.Itoa(k)), method, req, reply, cc, opts...)
	switch {
	case err == nil:
		tally.add(cGoodput, k)
	case lostRace(ctx):
		// A hedge or a first attempt that lost the race: cancelled, not
		// failed.
	default:
		tr.failed.Add(1)
		tally.add(cFailed, k)
		if status.Code(err) == codes.DeadlineExceeded && k >= 0 {
			tally.inc(tTimeouts)
		}
	}
	return err
}
