package resilgrpc

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/balancer/base"
	"google.golang.org/grpc/balancer/endpointsharding"
	"google.golang.org/grpc/balancer/pickfirst"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/resolver"

	"github.com/retrystorm/retrystorm/resil"
	"github.com/retrystorm/retrystorm/resil/balance"
	"github.com/retrystorm/retrystorm/resil/outlier"
)

// The pickers a [BalancerSettings] may name, as resil/balance makes them.
const (
	PickRoundRobin   = "round_robin"
	PickRandom       = "random"
	PickP2C          = "p2c"
	PickLeastRequest = "least_request"
	PickPeakEWMA     = "peak_ewma"
)

// BalancerSettings configures a grpc-go load-balancing policy whose
// picker is one of resil/balance's and whose outlier detection is
// resil/outlier's. The zero value is invalid: Name and Picker are required.
type BalancerSettings struct {
	// Name is the policy's name, as a service config's loadBalancingConfig
	// names it ("resil_p2c"). Required.
	Name string
	// Picker names the picker: PickRoundRobin, PickRandom, PickP2C,
	// PickLeastRequest or PickPeakEWMA. Required.
	Picker string
	// Balance holds the picker's own settings: Rand, Decay, DefaultRTT.
	// Hosts, Detector and PanicThreshold are the policy's: leave them
	// zero.
	Balance balance.Settings
	// Outlier, if set, turns outlier detection on with these settings, for
	// the endpoints of each resolver update (Hosts is set to their number:
	// leave it zero). Flavor outlier.GRPC is what grpc-go's
	// outlier_detection policy does; outlier.Envoy adds the consecutive
	// rules, which eject at the end of an RPC. Nil means none.
	Outlier *outlier.Settings
	// Clock times the RPCs, for PeakEWMA and the detector, and runs the
	// detector's interval timer. Nil means resil.RealClock().
	Clock resil.Clock
}

// NewBalancerBuilder returns a balancer.Builder for s, to register with
// balancer.Register (in an init function, as grpc-go asks) and to name in a
// service config:
//
//	b, err := resilgrpc.NewBalancerBuilder(resilgrpc.BalancerSettings{
//		Name: "resil_p2c", Picker: resilgrpc.PickP2C, Outlier: &od})
//	balancer.Register(b)
//	conn, err := grpc.NewClient(target, grpc.WithDefaultServiceConfig(
//		`{"loadBalancingConfig": [{"resil_p2c": {}}]}`))
//
// The policy is built as grpc-go v1.85.0 builds its own round_robin and
// least_request (balancer/roundrobin/roundrobin.go,
// balancer/leastrequest/leastrequest.go): an endpointsharding balancer
// with a pick_first child per endpoint, whose state updates it intercepts
// to build its picker over the endpoints that are READY. Outlier
// detection is folded in the way grpc-go's outlier_detection policy
// (internal/xds/balancer/outlierdetection/balancer.go) does it from above:
// every RPC's end is counted for its endpoint (OK a success, any other
// status a failure: incrementCounter), a timer runs the evaluation every
// Interval (intervalTimerAlgorithm), and an ejected endpoint leaves the
// picker as an ejected SubConn leaves its child's, by no longer counting as
// READY. With every READY endpoint ejected, RPCs fail with UNAVAILABLE:
// gRPC has no panic threshold, and the detector's max ejection percent is
// what keeps that from happening.
//
// Approximations: the detector is made anew, with no ejection and no
// counts, when the resolver's endpoint list changes (grpc-go keeps each
// endpoint's state by address); the in-flight counts of P2C and
// LeastRequest and PeakEWMA's estimates start again at each new picker (a
// READY change or an ejection), where grpc-go's least_request keeps its
// counts by endpoint; and the policy takes no JSON config: its settings are
// these, fixed at registration.
func NewBalancerBuilder(s BalancerSettings) (balancer.Builder, error) {
	bad := func(field string, v any, reason string) error {
		return &resil.SettingError{Field: "resilgrpc.BalancerSettings." + field, Value: v, Reason: reason}
	}
	if s.Name == "" {
		return nil, bad("Name", s.Name, "required: the policy's name in service configs")
	}
	if s.Balance.Hosts != 0 || s.Balance.Detector != nil || s.Balance.PanicThreshold != 0 {
		return nil, bad("Balance", nil, "Hosts, Detector and PanicThreshold are the policy's: leave them zero")
	}
	if s.Outlier != nil && s.Outlier.Hosts != 0 {
		return nil, bad("Outlier.Hosts", s.Outlier.Hosts, "is the number of endpoints: leave it zero")
	}
	bb := &builder{s: s, clock: s.Clock}
	if bb.clock == nil {
		bb.clock = resil.RealClock()
	}
	if s.Balance.Rand != nil {
		// One builder serves every channel: their pickers draw their
		// seeds from one source, which need not be safe for that.
		bb.s.Balance.Rand = &lockedSource{src: s.Balance.Rand}
	}
	if s.Outlier != nil {
		o := *s.Outlier
		if o.Rand != nil {
			o.Rand = &lockedSource{src: o.Rand}
		}
		bb.s.Outlier = &o
	}
	// Build a picker and a detector once, so that bad settings fail here,
	// by name, rather than on the first resolver update.
	p := bb.s.Balance
	p.Hosts, p.PanicThreshold = 1, balance.NoPanic
	if _, err := newPicker(s.Picker, p); err != nil {
		if errors.Is(err, balance.ErrUnknownKind) {
			return nil, bad("Picker", s.Picker, "must be round_robin, random, p2c, least_request or peak_ewma")
		}
		return nil, err
	}
	if bb.s.Outlier != nil {
		o := *bb.s.Outlier
		o.Hosts = 1
		if _, err := outlier.New(o); err != nil {
			return nil, err
		}
	}
	return bb, nil
}

func newPicker(kind string, s balance.Settings) (balance.Picker, error) {
	return balance.New(balance.Kind(kind), s)
}

type lockedSource struct {
	mu  sync.Mutex
	src rand.Source
}

func (l *lockedSource) Uint64() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.src.Uint64()
}

type builder struct {
	s     BalancerSettings
	clock resil.Clock
}

func (bb *builder) Name() string { return bb.s.Name }

func (bb *builder) Build(cc balancer.ClientConn, opts balancer.BuildOptions) balancer.Balancer {
	b := &resilBalancer{ClientConn: cc, bb: bb}
	b.child = endpointsharding.NewBalancer(b, opts, balancer.Get(pickfirst.Name).Build, endpointsharding.Options{})
	return b
}

// resilBalancer is one channel's policy. It embeds the channel's
// ClientConn to intercept the child's UpdateState, as grpc-go's
// least_request does.
type resilBalancer struct {
	balancer.ClientConn
	bb    *builder
	child balancer.Balancer

	mu      sync.Mutex
	closed  bool
	index   *resolver.EndpointMap[int] // endpoint → host of det
	det     *outlier.Detector          // nil without outlier detection
	timer   resil.Timer
	last    balancer.State // the child's last
	current *picker        // the picker last sent, nil for the child's own
}

func (b *resilBalancer) UpdateClientConnState(ccs balancer.ClientConnState) error {
	b.mu.Lock()
	eps := ccs.ResolverState.Endpoints
	if b.index == nil || !sameEndpoints(b.index, eps) {
		b.index = resolver.NewEndpointMap[int]()
		for i, e := range eps {
			b.index.Set(e, i)
		}
		b.det = nil
		if b.bb.s.Outlier != nil && len(eps) > 0 {
			o := *b.bb.s.Outlier
			o.Hosts = len(eps)
			b.det, _ = outlier.New(o) // checked by NewBalancerBuilder
			if b.timer == nil && b.det != nil {
				b.timer = b.bb.clock.AfterFunc(b.det.Settings().Interval, b.tick)
			}
		}
	}
	b.mu.Unlock()
	// Outside the lock: the child calls UpdateState from within.
	return b.child.UpdateClientConnState(balancer.ClientConnState{
		ResolverState: pickfirst.EnableHealthListener(ccs.ResolverState),
	})
}

func sameEndpoints(m *resolver.EndpointMap[int], eps []resolver.Endpoint) bool {
	if m.Len() != len(eps) {
		return false
	}
	for i, e := range eps {
		if j, ok := m.Get(e); !ok || j != i {
			return false
		}
	}
	return true
}

// tick is the detector's interval timer: one evaluation, a new picker if
// it ejected or returned an endpoint, and the next tick. Without a
// detector (no endpoints) it stops, and the next detector starts it again.
func (b *resilBalancer) tick() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed || b.det == nil {
		b.timer = nil
		return
	}
	_ = b.det.Evaluate(b.bb.clock.Now())
	if b.ejectionsChanged() {
		b.updateLocked()
	}
	b.timer = b.bb.clock.AfterFunc(b.det.Settings().Interval, b.tick)
}

// ejectionsChanged reports whether the current picker's endpoints are no
// longer those the detector leaves in.
func (b *resilBalancer) ejectionsChanged() bool {
	if b.current == nil {
		// The child's state or every READY endpoint ejected: a tick is
		// rare enough to look again each time, and an endpoint back
		// must end the failure.
		return true
	}
	if b.current.det != b.det {
		return true
	}
	for _, h := range b.current.hosts {
		if b.det.Ejected(h) {
			return true
		}
	}
	// An endpoint came back when fewer are ejected than the picker left
	// out.
	return b.det.EjectedCount() < b.current.ejected
}

func (b *resilBalancer) UpdateState(s balancer.State) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	b.last = s
	b.updateLocked()
}

// updateLocked sends the channel a picker over the READY endpoints the
// detector leaves in, or the child's own state when none is READY.
func (b *resilBalancer) updateLocked() {
	var (
		children []endpointsharding.ChildState
		hosts    []int
		ejected  int
	)
	for _, c := range endpointsharding.ChildStatesFromPicker(b.last.Picker) {
		if c.State.ConnectivityState != connectivity.Ready {
			continue
		}
		h, ok := b.index.Get(c.Endpoint)
		if !ok {
			continue
		}
		if b.det != nil && b.det.Ejected(h) {
			ejected++
			continue
		}
		children, hosts = append(children, c), append(hosts, h)
	}
	if len(children) == 0 {
		b.current = nil
		if ejected > 0 {
			b.ClientConn.UpdateState(balancer.State{
				ConnectivityState: connectivity.TransientFailure,
				Picker:            base.NewErrPicker(balancer.TransientFailureError(errAllEjected)),
			})
			return
		}
		// None READY: the child's own picker queues or fails the RPCs,
		// as grpc-go's least_request defers to it.
		b.ClientConn.UpdateState(b.last)
		return
	}
	ps := b.bb.s.Balance
	ps.Hosts, ps.PanicThreshold = len(children), balance.NoPanic
	bp, err := newPicker(b.bb.s.Picker, ps)
	if err != nil { // checked by NewBalancerBuilder
		b.ClientConn.UpdateState(balancer.State{ConnectivityState: connectivity.TransientFailure, Picker: base.NewErrPicker(err)})
		return
	}
	p := &picker{b: b, bp: bp, children: children, hosts: hosts, det: b.det, ejected: ejected, clock: b.bb.clock,
		timed: b.bb.s.Picker == PickPeakEWMA}
	if b.det != nil {
		p.ejected = b.det.EjectedCount()
	}
	p.done = make([]func(balancer.DoneInfo), len(children))
	for k := range p.done {
		p.done[k] = func(di balancer.DoneInfo) { p.finish(k, time.Time{}, di) }
	}
	b.current = p
	b.ClientConn.UpdateState(balancer.State{ConnectivityState: connectivity.Ready, Picker: p})
}

var errAllEjected = errors.New("resilgrpc: every ready endpoint is ejected by outlier detection")

func (b *resilBalancer) ResolverError(err error) { b.child.ResolverError(err) }

func (b *resilBalancer) UpdateSubConnState(sc balancer.SubConn, s balancer.SubConnState) {
	// The children's SubConns report to their own listeners.
}

func (b *resilBalancer) ExitIdle() { b.child.ExitIdle() }

func (b *resilBalancer) Close() {
	b.mu.Lock()
	b.closed = true
	if b.timer != nil {
		b.timer.Stop()
	}
	b.mu.Unlock()
	b.child.Close()
}

// picker is one snapshot of the READY endpoints left in: host k of bp is
// children[k], which is host hosts[k] of det.
type picker struct {
	b        *resilBalancer
	bp       balance.Picker
	children []endpointsharding.ChildState
	hosts    []int
	det      *outlier.Detector
	ejected  int  // det's ejections when the picker was made
	timed    bool // PeakEWMA: picks and answers need the time
	done     []func(balancer.DoneInfo)
	clock    resil.Clock
}

func (p *picker) Pick(info balancer.PickInfo) (balancer.PickResult, error) {
	// The clock is read only where the time is used: a clock read costs
	// more than the rest of a pick on some machines (250ns under a
	// sandbox's clock), and only PeakEWMA's costs and latencies, and an
	// ejection's start, need one.
	var start time.Time
	if p.timed {
		start = p.clock.Now()
	}
	k, err := p.bp.Pick(start)
	if err != nil {
		return balancer.PickResult{}, balancer.TransientFailureError(fmt.Errorf("resilgrpc: %w", err))
	}
	r, err := p.children[k].State.Picker.Pick(info)
	if err != nil {
		p.bp.Done(start, k, 0, resil.OutcomeIgnored)
		return r, err
	}
	if !p.timed && r.Done == nil {
		r.Done = p.done[k] // made with the picker: a pick allocates nothing
		return r, nil
	}
	inner := r.Done
	r.Done = func(di balancer.DoneInfo) {
		p.finish(k, start, di)
		if inner != nil {
			inner(di)
		}
	}
	return r, nil
}

// finish is the end of an RPC picked on host k at start (the zero time
// unless p.timed).
func (p *picker) finish(k int, start time.Time, di balancer.DoneInfo) {
	failed := di.Err != nil
	var end time.Time
	if p.timed || failed && p.det != nil {
		end = p.clock.Now()
	}
	o := resil.OutcomeSuccess
	if failed {
		o = resil.OutcomeFailure
	}
	p.bp.Done(end, k, end.Sub(start), o)
	if p.det != nil {
		// grpc-go's incrementCounter: an RPC that ended without an
		// error is a success, any other a failure.
		res := outlier.Success
		if failed {
			res = outlier.Error5xx
		}
		h := p.hosts[k]
		_ = p.det.Record(end, h, res)
		if failed && p.det.Ejected(h) {
			p.b.ejectedByRecord()
		}
	}
}

// ejectedByRecord builds a new picker when a consecutive rule (Envoy)
// ejected an endpoint at the end of an RPC and the current picker still
// sends to it. The RPC may have been picked by an older picker: one the
// child's state replaced while the RPC was out (an endpoint came READY),
// with a picker made before the ejection, which sent the ejected endpoint
// a call more until the detector's next interval when only the RPC's own
// picker was replaced.
func (b *resilBalancer) ejectedByRecord() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.closed && b.current != nil && b.ejectionsChanged() {
		b.updateLocked()
	}
}
