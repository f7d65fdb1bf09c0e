package lab

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/retrystorm/retrystorm/scenario"
)

// A fleet's rig: its servers on loopback, from a spec (rigSpec), built
// for its protocol, and the refusals of what the lab cannot play.

// errTargetGRPC is why the lab refuses a target over gRPC: the fault
// proxy is an HTTP reverse proxy.
var errTargetGRPC = errors.New("lab: a target is played over HTTP only")

// errChainGRPC is why the lab refuses a chain of tiers over gRPC: its tiers
// are HTTP servers calling the next through resilhttp.
var errChainGRPC = errors.New("lab: a chain of tiers runs over HTTP only; drop --protocol grpc or the scenario's tiers")

// errChainTarget is why the lab refuses a chain of tiers against a target:
// its tiers call the lab's own origin.
var errChainTarget = errors.New("lab: a chain of tiers runs against the lab's own origin; drop --target or the scenario's tiers")

// errReplicasGRPC is why the lab refuses replicas over gRPC: its gRPC
// gateway calls one origin (resilgrpc's balancer is not wired in yet).
var errReplicasGRPC = errors.New("lab: origin.replicas, a replica's faults, a balancer or outlier_detection run over HTTP only; drop --protocol grpc or run it in the simulator")

// errReplicasTarget is why the lab refuses replicas against a target: the
// fault proxy stands for the whole service, one server.
var errReplicasTarget = errors.New("lab: origin.replicas, a replica's faults, a balancer or outlier_detection run against the lab's own origin; drop --target or those keys")

// rig is one fleet's servers: the origin (the lab's, or a fault proxy in
// front of a target), the tiers of a chain in front of it, and the
// gateway in front of them. Over HTTP each is one server; over gRPC (no
// tiers) the origin and the gateway have a gRPC server besides, the HTTP
// one serving /metrics (and the origin's /admin/faults).
type rig struct {
	origin       server
	tiers        []*Tier
	gw           fleetGateway
	osrv, gsrv   *Server
	reps         *originSet // the origin's replicas, when it has several (osrv is replica 0's)
	rsrv         []*Server  // their servers, in replica order
	tsrv         []*Server
	ogrpc, ggrpc *GRPCServer        // over gRPC
	target       *url.URL           // where the load generator sends
	clocks       context.Context    // the origin's and the tiers' clocks run until it is done
	stop         context.CancelFunc // stops them
	running      sync.WaitGroup
	closed       bool
}

// server is what the gateway sends attempts to: the lab's Origin, or a
// FaultProxy in front of a target.
type server interface {
	Handler() http.Handler
	Run(ctx context.Context)
	Queued() int
	WouldAnswer(timeout time.Duration) bool
	Counts() OriginCounts
}

// fleetGateway is what a run reads of its gateway, HTTP or gRPC.
type fleetGateway interface {
	OpenShare(now time.Time) float64
	Counts() GatewayCounts
	Close()
}

// rigSpec is what one fleet's servers are made of: the scenario scaled to
// the wall clock and the fleet, and what the run gives them.
type rigSpec struct {
	wall    *scenario.Scenario // scaled (see Scale)
	fleet   int                // the index of the fleet in wall.Fleets
	seed    uint64
	tallies []*Tally // tallies[l] is the hop into layer l; the origin's is the last
	start   time.Time
	clearAt time.Duration // when the triggers end, from start; negative: none
	token   string        // the origin's /admin/faults secret
	// protocol is what the origin, the gateway and the load generator
	// speak; a target is played over HTTP, and a chain of tiers runs over
	// HTTP against the lab's own origin (see refuse).
	protocol Protocol
	target   *Target // nil: the lab's own origin
}

// refuse reports why the lab cannot play sc over protocol against target
// (nil: its own origin), or nil. Every entry point asks it before it runs
// anything: Measure, runFleets, and each fleet's startRig.
func refuse(sc *scenario.Scenario, protocol Protocol, target *Target) error {
	grpc := protocol == ProtocolGRPC
	switch {
	case target != nil && grpc:
		return errTargetGRPC
	case len(sc.Tiers) > 0 && grpc:
		return errChainGRPC
	case len(sc.Tiers) > 0 && target != nil:
		return errChainTarget
	case balanced(sc) && grpc:
		return errReplicasGRPC
	case balanced(sc) && target != nil:
		return errReplicasTarget
	}
	return refuseReplicas(sc)
}

// Refuse reports why the lab cannot play sc over p against target (nil:
// its own origin), or nil: a command asks it before it runs anything, to
// answer a usage error (Measure asks it too).
func Refuse(sc *scenario.Scenario, p Protocol, target *Target) error { return refuse(sc, p, target) }

// startRig starts the servers of s's fleet on loopback, from the origin
// out, with the builder of s's protocol, and opens each one's connection
// to the next before the first tick, so that the first intents do not pay
// for it. On error it leaves nothing running.
func startRig(ctx context.Context, s rigSpec) (*rig, error) {
	if err := refuse(s.wall, s.protocol, s.target); err != nil {
		return nil, err
	}
	r := &rig{}
	r.clocks, r.stop = context.WithCancel(context.Background())
	var err error
	switch s.protocol {
	case "", ProtocolHTTP:
		err = r.startHTTP(ctx, &s)
	case ProtocolGRPC:
		err = r.startGRPC(ctx, &s)
	default:
		err = fmt.Errorf("lab: protocol %q: want http or grpc", s.protocol)
	}
	if err != nil {
		r.close()
		return nil, err
	}
	return r, nil
}

// startHTTP builds an HTTP rig: the lab's origin (or a fault proxy in
// front of the target), the tiers of a chain, and the gateway.
func (r *rig) startHTTP(ctx context.Context, s *rigSpec) error {
	var truth func(time.Duration) bool // nil: unknown, for a target as it is
	if s.target == nil && balanced(s.wall) {
		set, err := newOriginSet(s.originConfig())
		if err != nil {
			return err
		}
		r.reps, r.origin, truth = set, set, set.WouldAnswer
	} else if s.target == nil {
		o, err := s.labOrigin()
		if err != nil {
			return err
		}
		r.origin, truth = o, o.WouldAnswer
	} else {
		p, err := s.faultProxy()
		if err != nil {
			return err
		}
		r.origin = p
		if s.target.Impose {
			truth = p.WouldAnswer
		}
	}
	if err := r.serveOrigin(); err != nil {
		return err
	}
	next, truth, err := r.startTiers(ctx, s, r.osrv.url, truth)
	if err != nil {
		return err
	}
	gc := s.gateway(next, truth)
	for _, srv := range r.rsrv {
		gc.Endpoints = append(gc.Endpoints, srv.url)
	}
	gw, err := NewGateway(gc)
	if err != nil {
		return err
	}
	r.gw = gw
	if r.gsrv, err = Listen("127.0.0.1:0", gw.Handler()); err != nil {
		return err
	}
	r.target = r.gsrv.url
	return warm(ctx, gw)
}

// startGRPC builds a gRPC rig: the lab's origin and the gateway, each with
// a gRPC server for the work and an HTTP one for /metrics (and the
// origin's /admin/faults).
func (r *rig) startGRPC(ctx context.Context, s *rigSpec) error {
	o, err := s.labOrigin()
	if err != nil {
		return err
	}
	r.origin = o
	if err := r.serveOrigin(); err != nil {
		return err
	}
	if r.ogrpc, err = ListenGRPC("127.0.0.1:0", o); err != nil {
		return err
	}
	gw, err := NewGRPCGateway(s.gateway(&url.URL{Scheme: "grpc", Host: r.ogrpc.Addr()}, o.WouldAnswer))
	if err != nil {
		return err
	}
	r.gw = gw
	if r.ggrpc, err = ListenGRPC("127.0.0.1:0", gw); err != nil {
		return err
	}
	if r.gsrv, err = Listen("127.0.0.1:0", gw.Handler()); err != nil {
		return err
	}
	r.target = &url.URL{Scheme: "grpc", Host: r.ggrpc.Addr()}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return gw.Warm(wctx)
}

// labOrigin is the lab's own origin for s. Its callers, whose deadlines
// it keeps a tenth of for the way back, are the fleet's clients or the
// last tier's.
func (s *rigSpec) labOrigin() (*Origin, error) { return NewOrigin(s.originConfig()) }

// originConfig is the configuration of s's origin (of each replica, with
// its Replica set).
func (s *rigSpec) originConfig() OriginConfig {
	reserve := s.wall.Fleets[s.fleet].Timeout / deadlineMargin
	if n := len(s.wall.Tiers); n > 0 {
		reserve = s.wall.Tiers[n-1].Client.Timeout / deadlineMargin
	}
	return OriginConfig{
		Origin: s.wall.Origin, Triggers: s.wall.Triggers, Start: s.start, Seed: s.seed,
		Tally: s.tallies[len(s.tallies)-1], AdminToken: s.token, WireReserve: reserve,
	}
}

// faultProxy is the fault proxy in front of s's target.
func (s *rigSpec) faultProxy() (*FaultProxy, error) {
	t := s.target
	return NewFaultProxy(ProxyConfig{
		Target: t.URL, Origin: s.wall.Origin, Impose: t.Impose, Triggers: s.wall.Triggers,
		Start: s.start, Seed: s.seed, Tally: s.tallies[len(s.tallies)-1], Transport: t.Transport,
		Cutoff: wallCutoff(s.wall, s.fleet), // as the load's: never past the scenario's end
	})
}

// gateway is the configuration of s's gateway, sending to next, whose
// ground truth is truth.
func (s *rigSpec) gateway(next *url.URL, truth func(time.Duration) bool) GatewayConfig {
	return GatewayConfig{
		Fleet: s.wall.Fleets[s.fleet], Clients: s.wall.Traffic.Clients, Origin: next,
		Seed: s.seed, Tally: s.tallies[0], Truth: truth, Start: s.start,
	}
}

// serveOrigin runs r's origin until the rig closes, and serves it over
// HTTP.
func (r *rig) serveOrigin() error {
	r.running.Go(func() { r.origin.Run(r.clocks) })
	if r.reps == nil {
		var err error
		r.osrv, err = Listen("127.0.0.1:0", r.origin.Handler())
		return err
	}
	for _, o := range r.reps.reps {
		srv, err := Listen("127.0.0.1:0", o.Handler())
		if err != nil {
			return err
		}
		r.rsrv = append(r.rsrv, srv)
	}
	r.osrv = r.rsrv[0]
	return nil
}

// startTiers starts s's tiers from the innermost out, the innermost
// calling next (whose ground truth is truth), and returns where the
// gateway sends and its ground truth: the outermost tier's, or next's
// when there is no chain.
func (r *rig) startTiers(ctx context.Context, s *rigSpec, next *url.URL, truth func(time.Duration) bool) (*url.URL, func(time.Duration) bool, error) {
	r.tiers = make([]*Tier, len(s.wall.Tiers))
	r.tsrv = make([]*Server, len(s.wall.Tiers))
	for l := len(s.wall.Tiers) - 1; l >= 0; l-- {
		t, err := NewTier(TierConfig{
			Tier: s.wall.Tiers[l], Next: next, Start: s.start, ClearAt: s.clearAt,
			Seed: s.seed ^ uint64(l+1)*0x9e3779b97f4a7c15, In: s.tallies[l], Out: s.tallies[l+1], Truth: truth,
		})
		if err != nil {
			return nil, nil, err
		}
		r.tiers[l] = t
		r.running.Go(func() { t.Run(r.clocks) })
		if r.tsrv[l], err = Listen("127.0.0.1:0", t.Handler()); err != nil {
			return nil, nil, err
		}
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err = t.warm(wctx)
		cancel()
		if err != nil {
			return nil, nil, err
		}
		next, truth = r.tsrv[l].url, chainTruth(t, s.wall.Tiers[l].Client.Timeout, truth)
	}
	return next, truth, nil
}

// chainTruth is the ground truth of a call to tier t: its own service
// would be done within the caller's timeout, and the layers below would
// answer t's call within t's timeout.
func chainTruth(t *Tier, timeout time.Duration, below func(time.Duration) bool) func(time.Duration) bool {
	return func(d time.Duration) bool { return t.WouldAnswer(d) && below(min(d, timeout)) }
}

// close shuts the rig down, front to back: the gateway's servers, its
// connections, the tiers' servers, the clocks, the origin's servers.
// Calling it again does nothing.
func (r *rig) close() {
	if r.closed {
		return
	}
	r.closed = true
	if r.ggrpc != nil {
		r.ggrpc.Close()
	}
	if r.gsrv != nil {
		r.gsrv.Close()
	}
	if r.gw != nil {
		r.gw.Close()
	}
	for l, s := range r.tsrv {
		if s != nil {
			s.Close()
		}
		if t := r.tiers[l]; t != nil {
			t.Close()
		}
	}
	r.stop()
	if r.ogrpc != nil {
		r.ogrpc.Close()
	}
	if r.reps == nil && r.osrv != nil {
		r.osrv.Close()
	}
	for _, srv := range r.rsrv {
		srv.Close()
	}
	r.running.Wait()
}

// gauge is what the sampler reads of one hop at the end of a tick: the
// queue of the layer it goes into, and the share of its callers' breakers
// that are open.
type gauge struct {
	t     *Tally
	queue func() int
	open  func(time.Time) float64
	// ejected, if set, counts the tick for each replica ejected at its end.
	ejected func(time.Time)
}

// gauges returns the sampler's gauges, one per hop, the fleet's first.
func (r *rig) gauges(tallies []*Tally) []gauge {
	gs := make([]gauge, len(tallies))
	for l := range gs {
		gs[l].t = tallies[l]
		if l < len(r.tiers) {
			gs[l].queue = r.tiers[l].Queued
		} else {
			gs[l].queue = r.origin.Queued
		}
		if l == 0 {
			gs[l].open = r.gw.OpenShare
			if g, ok := r.gw.(*Gateway); ok && g.reps != nil {
				gs[l].ejected = g.reps.sampleEjected
			}
		} else {
			gs[l].open = r.tiers[l-1].OpenShare
		}
	}
	return gs
}
