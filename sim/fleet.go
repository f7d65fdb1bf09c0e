package sim

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/retrystorm/retrystorm/origin"
	"github.com/retrystorm/retrystorm/resil"
	"github.com/retrystorm/retrystorm/scenario"
)

// A run keeps two tables of what is in flight: the client's side of each
// send (an attempt: its ticket, its deadline, its intent) and the origin's
// (a request: what the origin serves and what its answer needs). An
// attempt lives until its client is done with it: answered, timed out, or
// cancelled when another attempt of its intent won. A request lives until
// the origin is done with it: answered, rejected, dropped, or served for
// nobody after its client gave up. So a collapsed queue, whose backlog is
// mostly requests whose clients left long ago, holds a small request for
// each (see request), not the client's state.

// attempt is one send of an intent, as its client sees it. Its slot is
// reused as soon as the client is done with it; gen tells the uses apart.
type attempt struct {
	sent     int64
	deadline int64 // an answer at the deadline is in time; the client gives up 1ns later
	ticket   resil.Ticket
	intent   int32 // slot of the intent
	next     int32 // next attempt of the same intent in flight, or -1
	req      int32 // its request at the origin, or -1 once the origin is done with it (or never saw it)
	tick     int32 // the tick it was sent in, -1 after the run
	gen      uint32
	replica  uint16 // replicas number at most 10,000
	known    bool   // an answer is scheduled in time: no timeout event needed
	flags    uint8  // attPicked, attServing (one byte: the attempt fills a cache line)
}

// An attempt's flags.
const (
	// attPicked: the fleet's picker chose its replica, and it owes the
	// picker a Done.
	attPicked = 1 << iota
	// attServing: a worker of a one-hop run's origin holds its request.
	// The attempt knows it so that its timeout need not read the request,
	// a record a collapsed queue took in long ago and the cache no longer
	// holds, only to learn that the origin need not hear of it.
	attServing
)

// intent is one logical call, from arrival to success or loss. It fills
// two cache lines, and the run's table of them is aligned to them.
type intent struct {
	in         resil.Intent
	id         uint64
	arrival    int64
	latest     int64 // the caller's deadline; 0 = none
	client     int32
	head       int32 // first attempt in flight, or -1
	inflight   int32
	sent       int32 // attempts numbered so far, sent or refused
	gen        uint32
	afterClear bool
	failed     bool
	broken     bool
	free       bool
	// late marks a tier's call begun after the run: the run follows it,
	// for the fleet's intents that still wait on it, but counts nothing of
	// it, as it counts no attempt sent after the run (see Summary).
	late bool
	// In a chain: 0 for a fleet's intent, h for a call of tier h-1 (to
	// the layer h), made to serve its tier request parent.
	hop uint8
	// last is the failure kind its last failed attempt met (a tier's
	// call answers by it when it fails): resil.OutcomeSuccess for none.
	last   resil.Outcome
	parent int32
}

// fleet runs one fleet of a scenario: its clients, its copy of the origin,
// and the accounting.
type fleet struct {
	sc   *scenario.Scenario
	cfg  *scenario.Fleet
	seed uint64

	tickNs   int64
	nTicks   int
	end      int64 // arrivals stop here
	clearAt  int64 // the triggers' end; valid when hasClear
	hasClear bool
	timeout  int64
	deadline int64
	idemOnly bool
	poisson  bool
	hedging  bool
	replicas int
	retryOn  [nKinds]bool // by failure kind: may it be retried?

	policies []resil.Policy
	jitter   rand.Source
	arrivals *rand.Rand
	ahead    aheadGap // the next Poisson gap (see gap)
	lastNs   int64
	lastT    time.Time

	q      *eventQueue
	atts   []attempt
	freeA  []int32
	reqs   *requests
	ints   []intent
	freeI  []int32
	live   int // intents not yet ended
	sched  schedule
	envAt  int // index of the env in force
	env    *env
	origin []origin.Model // one per replica

	nextArrival int64
	count       uint64 // intents so far
	nextClient  int32  // the client of the next intent
	nextSample  int    // next tick to sample
	boundary    int64  // the end of tick nextSample

	ticks []tickCounts // during the run; copied into s at the end
	s     Series
	sum   Summary
	lat   *histogram
	scr   *scratch

	progress func(ticks int) // told of every tick sampled; nil: nobody asks

	// A chain of tiers, or nil; last is the origin's layer (0 without
	// tiers). oticks and osum are what the origin's answers count in: the
	// last hop's, the fleet's own without tiers. (Last in the struct: the
	// one-hop run's fields keep their places.)
	chain    *chain
	last     uint8
	draining bool // the run is over: a tier's call that ends answers nobody
	oticks   []tickCounts
	osum     *Summary
	clients  int32 // the fleet's clients: the first policies (a chain's tiers' follow)
	// inbound is the proxy beside each of the origin's replicas, as the
	// hop that calls the origin has it (the fleet's, or the last tier's).
	inbound inbound
	// sharedReplicas (Options.sharedReplicas) gives every client instance
	// of a hop the same picker and detector.
	sharedReplicas bool

	// Replicas: the fleet's picker and outlier detector (nil for none),
	// and the ground truth per replica, counted only when the scenario
	// balances, detects or names a replica (reps nil otherwise).
	replicaState

	// early is the state of Options.EarlyExit's rules; nil when the run
	// plays to its end (see early.go).
	early *early
	// arrivalsSrc is the source behind arrivals, which a fork copies.
	arrivalsSrc *rand.PCG
}

// tickCounts are one tick's counters, kept together while the run
// counts them: the hot path touches one or two cache lines per tick rather
// than one per series.
type tickCounts struct {
	intents, offered, first, retries, hedges int64
	successes, goodput, failed, refused      int64
	throttled                                int64
}

// scratch is the memory a run works in and gives back when it ends:
// pooled, so that a sweep's thousands of runs do not each allocate and
// grow it again.
type scratch struct {
	atts   []attempt
	freeA  []int32
	reqs   requests
	ints   []intent
	freeI  []int32
	q      eventQueue
	ticks  []tickCounts
	lat    histogram
	models []origin.Model // the last run's, whose memory the next takes
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// take gives f the pooled memory, emptied.
func (f *fleet) take() {
	sc := scratchPool.Get().(*scratch)
	f.scr = sc
	f.atts, f.freeA, f.ints, f.freeI = sc.atts[:0], sc.freeA[:0], sc.ints[:0], sc.freeI[:0]
	f.q = &sc.q
	f.q.reset()
	f.q.atts = &f.atts
	f.reqs = &sc.reqs
	f.reqs.reset()
	if cap(sc.ticks) < f.nTicks {
		sc.ticks = make([]tickCounts, f.nTicks)
	}
	f.ticks = sc.ticks[:f.nTicks]
	clear(f.ticks)
	sc.lat = histogram{}
	f.lat = &sc.lat
}

// give returns f's memory to the pool; f must not run again.
func (f *fleet) give() {
	sc := f.scr
	if sc == nil {
		return
	}
	sc.atts, sc.freeA, sc.ints, sc.freeI = f.atts[:0], f.freeA[:0], f.ints[:0], f.freeI[:0]
	sc.ticks = f.ticks[:0]
	if f.origin != nil {
		sc.models = f.origin
	}
	f.q.atts = nil
	f.scr, f.lat, f.atts, f.ints, f.ticks, f.q, f.reqs = nil, nil, nil, nil, nil, nil, nil
	f.oticks, f.osum, f.chain = nil, nil, nil
	scratchPool.Put(sc)
}

// throttleStream marks the random streams of the clients' throttles,
// apart from the arrivals' and the jitter's.
const throttleStream = 0x7417 << 48

// serviceStream marks the random streams of the servers' service times:
// one per server, by layer (0 the origin, l for tier l) and replica, and
// not by fleet, so that fleets whose servers see the same requests draw
// the same times (common random numbers).
const serviceStream = 0x5e7 << 48

// serviceRand returns the source server replica of layer l draws its
// service times from, or nil when o's are fixed (nothing to draw).
func serviceRand(seed uint64, o *scenario.Origin, l, replica int) *rand.Rand {
	if o.ServiceTime.IsFixed() {
		return nil
	}
	return rand.New(rand.NewPCG(seed, serviceStream|uint64(l)<<24|uint64(replica)))
}

// drainLimit bounds how long intents that arrived during the run are
// followed after it: long enough for any sane retry chain, short enough
// that an unlimited policy without a deadline cannot run forever.
const drainLimit = int64(time.Hour)

func newFleet(sc *scenario.Scenario, idx int, o *Options) (*fleet, error) {
	cfg := &sc.Fleets[idx]
	replicas := max(sc.Origin.Replicas, 1)
	tick := sc.Tick
	if tick <= 0 {
		return nil, fmt.Errorf("sim: tick must be positive")
	}
	arrivals := rand.NewPCG(sc.Seed, 0xa77)
	f := &fleet{
		sc:       sc,
		cfg:      cfg,
		seed:     sc.Seed,
		tickNs:   int64(tick),
		nTicks:   int((sc.Duration + tick - 1) / tick),
		end:      int64(sc.Duration),
		timeout:  int64(cfg.Timeout),
		deadline: int64(cfg.Deadline),
		idemOnly: cfg.Retry.IdempotentOnly,
		poisson:  sc.Traffic.Arrivals == "poisson",
		hedging:  cfg.Hedge.Delay > 0,
		replicas: replicas,
		// Streams: the arrival stream is shared by every fleet (same
		// traffic); the jitter stream is the fleet's own.
		arrivals: rand.New(arrivals), arrivalsSrc: arrivals,
		jitter:   rand.NewPCG(sc.Seed, 0x1000+uint64(idx)),
		lastT:    time.Unix(0, 0),
		sched:    buildSchedule(sc, replicas),
		boundary: int64(tick),
	}
	f.retryOn = retryTable(&cfg.Retry, cfg.Product)
	f.sharedReplicas = o.sharedReplicas
	f.inbound = newInbound(cfg.Calls)
	if _, end, ok := triggerWindow(sc); ok {
		f.clearAt, f.hasClear = int64(end), true
	}
	clients := max(sc.Traffic.Clients, 1)
	f.clients = int32(clients)
	f.policies = make([]resil.Policy, clients, clients+tierPolicies(sc))
	for i := range f.policies {
		var src rand.Source
		if cfg.Throttle.Use == scenario.ThrottleAdaptive {
			// Each client's throttle draws from a stream of its own.
			src = rand.NewPCG(sc.Seed, throttleStream|uint64(idx)<<24|uint64(i))
		}
		p, err := cfg.NewPolicyRand(src)
		if err != nil {
			return nil, err
		}
		if o.WrapBudget != nil {
			p.Budget = o.WrapBudget(idx, i, p.Budget)
		}
		f.policies[i] = p
	}
	f.take()
	f.oticks, f.osum = f.ticks, &f.sum
	f.env = &f.sched.envs[0]
	if err := f.newOrigin(&sc.Origin, replicas); err != nil {
		f.give()
		return nil, err
	}
	if err := f.newReplicaState(idx); err != nil {
		f.give()
		return nil, err
	}
	if len(sc.Tiers) > 0 {
		if err := f.newChain(idx); err != nil {
			f.give()
			return nil, err
		}
	}
	f.setConditions(0)
	f.s = newSeries(f.nTicks)
	f.nextArrival = f.firstArrival(0)
	f.early = newEarly(f, o.EarlyExit, arrivals)
	return f, nil
}

// vt is virtual time ns as a time.Time for resil. Several calls in a row
// ask for the same instant, so the last one is kept.
func (f *fleet) vt(ns int64) time.Time {
	if ns != f.lastNs {
		// time.Unix is twice as fast as adding to an epoch; the
		// location it sets is never looked at.
		f.lastNs, f.lastT = ns, time.Unix(0, ns)
	}
	return f.lastT
}

// tickOf is the tick of ns, or -1 after the run. Events come in time
// order, so the present's tick is the next one to sample: no division on
// the hot path.
func (f *fleet) tickOf(ns int64) int32 {
	if ns >= f.boundary-f.tickNs && ns < f.boundary && f.nextSample < f.nTicks {
		return int32(f.nextSample)
	}
	k := ns / f.tickNs
	if k >= int64(f.nTicks) {
		return -1
	}
	return int32(k)
}

// gap is the time to the next arrival at the rate in force.
func (f *fleet) gap() int64 {
	r := f.env.rate
	if r <= 0 {
		return math.MaxInt64
	}
	if !f.poisson {
		return toGap(1e9 / r)
	}
	// A Poisson gap is drawn a call ahead, and converted at the rate then
	// in force: the division is done long before its gap is needed, not
	// on the way to the next arrival's time. The draws are the same, in
	// the same order; a gap drawn at another rate is converted again.
	if !f.ahead.ok {
		f.ahead = aheadGap{ok: true, e: f.arrivals.ExpFloat64()}
	}
	g := f.ahead.gap
	if f.ahead.rate != r {
		g = toGap(f.ahead.e / r * 1e9)
	}
	e := f.arrivals.ExpFloat64()
	f.ahead = aheadGap{ok: true, e: e, rate: r, gap: toGap(e / r * 1e9)}
	return g
}

// aheadGap is the next Poisson gap, drawn (e, in units of the mean) and
// converted at rate (gap).
type aheadGap struct {
	ok   bool
	e    float64
	rate float64
	gap  int64
}

// toGap converts a gap g in nanoseconds to an int64: a gap beyond int64 (a
// tiny rate) is no next arrival, where converting it would give garbage
// (the most negative int64, on amd64).
func toGap(g float64) int64 {
	if !(g < math.MaxInt64) {
		return math.MaxInt64
	}
	return max(1, int64(g))
}

// firstArrival is the first arrival at or after from, at the rate in force.
func (f *fleet) firstArrival(from int64) int64 {
	if f.env.rate <= 0 {
		return math.MaxInt64
	}
	if f.poisson {
		return satAdd(from, f.gap())
	}
	return from
}

func satAdd(a, b int64) int64 {
	if b > math.MaxInt64-a {
		return math.MaxInt64
	}
	return a + b
}

// run plays the fleet to the end and returns its result. Events are taken
// in time order: trigger boundaries first, then arrivals, then scheduled
// events, ties in the order they were scheduled.
func (f *fleet) run(stop func() bool) (FleetResult, error) {
	ended, _, err := f.play(stop, math.MaxInt64)
	if err != nil {
		return FleetResult{}, err
	}
	return f.result(&ended), nil
}

// play plays the fleet on until its end, or until the next thing to
// happen is at pause or later (paused: nothing at pause has happened, not
// even the checks before it, so that play can go on from there, in this
// fleet or in a fork of it). On an error (stopped) the fleet's memory is
// given back.
func (f *fleet) play(stop func() bool, pause int64) (ended EarlyEnd, paused bool, err error) {
	const (
		none = iota
		doEnv
		doArrival
		doEvent
	)
	limit := satAdd(f.end, drainLimit)
	var e event // the event in hand: popped into, handled by reference (see eventQueue.pop)
	for steps := 1; ; steps++ {
		nextEnv := int64(math.MaxInt64)
		if f.envAt+1 < len(f.sched.at) {
			nextEnv = f.sched.at[f.envAt+1]
		}
		// The arrivals and events before anything else happens (a
		// trigger boundary, the end of the tick, the end of the
		// arrivals) need none of the checks below: take them in a tight
		// loop, in the same order, an arrival before an event at its
		// time.
		for horizon := min(nextEnv, f.boundary, f.end, pause); ; steps++ {
			if t, a := f.q.next(), f.nextArrival; a <= t && a < horizon {
				f.arrive(a)
				f.nextArrival = satAdd(a, f.gap())
			} else if t < horizon {
				f.q.pop(&e)
				f.handle(&e)
			} else {
				break
			}
			if steps&0xffff == 0 && stop != nil && stop() {
				f.give()
				return ended, false, errStopped
			}
		}
		now, what := int64(math.MaxInt64), none
		if f.nextArrival < f.end {
			now, what = f.nextArrival, doArrival
		}
		if nextEnv <= now {
			now, what = nextEnv, doEnv
		}
		if t := f.q.next(); t < now {
			now, what = t, doEvent
		}
		if now >= pause {
			return ended, true, nil
		}
		// Once arrivals stopped and every intent ended, what is left is
		// the origin working for nobody: it changes no result.
		if what == none || now > limit || (now >= f.end && f.live == 0) {
			break
		}
		if now >= f.boundary {
			f.sampleUpTo(int(min(now/f.tickNs, int64(f.nTicks))))
		}
		if f.early != nil && f.checkEarly(now, &ended) {
			break
		}
		switch what {
		case doEnv:
			f.switchEnv(now)
		case doArrival:
			f.arrive(now)
			f.nextArrival = satAdd(now, f.gap())
		case doEvent:
			f.q.pop(&e)
			f.handle(&e)
		}
		if steps&0xffff == 0 && stop != nil && stop() {
			f.give()
			return ended, false, errStopped
		}
	}
	return ended, false, nil
}

// result makes the result of a fleet played to its end (or stopped early,
// as ended says) and gives its memory back.
func (f *fleet) result(ended *EarlyEnd) FleetResult {
	f.endSamples(ended)
	f.finishUnfinished()
	sum := f.summarize()
	var tiers []TierResult
	if f.chain != nil {
		tiers = f.summarizeHops(sum)
	}
	reps, noHost := f.replicaState.results()
	f.give()
	r := FleetResult{Name: f.cfg.Name, Summary: sum, Series: f.s, Tiers: tiers, Replicas: reps, NoHealthyReplica: noHost}
	if ended.Rule != "" {
		e := *ended
		r.Ended = &e
		truncate(&r)
	}
	return r
}

var errStopped = errors.New("sim: stopped")

// switchEnv moves to the next trigger boundary's env, at time at.
func (f *fleet) switchEnv(at int64) {
	f.envAt++
	old := f.env
	f.env = &f.sched.envs[f.envAt]
	f.setConditions(at)
	switch {
	case f.env.rate == old.rate:
	case f.env.smooth && !f.poisson && old.rate > 0 && f.env.rate > 0 && f.nextArrival < math.MaxInt64:
		// A rate series changes the rate every tick: constant arrivals
		// keep their phase, the share of the gap still to go, so that
		// each tick gets its rate's arrivals and not one more.
		left := float64(f.nextArrival-at) * old.rate / f.env.rate
		f.nextArrival = satAdd(at, int64(min(left, math.MaxInt64/2)))
	default:
		// Restart arrivals at the new rate; Poisson arrivals are
		// memoryless, so this is exact for them.
		f.nextArrival = f.firstArrival(at)
	}
}

// sampleUpTo records the end-of-tick samples of every tick before k.
func (f *fleet) sampleUpTo(k int) {
	if f.nextSample >= k {
		return
	}
	if f.progress != nil {
		f.progress(k - f.nextSample)
	}
	for ; f.nextSample < k; f.nextSample++ {
		t := f.nextSample
		f.s.Queue[t] = f.layerQueued(0)
		end := f.vt(int64(t+1) * f.tickNs)
		open := 0
		for i := range f.policies[:f.clients] {
			if f.policies[i].Breaker.State(end) == resil.StateOpen {
				open++
			}
		}
		f.s.BreakerOpen[t] = float64(open) / float64(f.clients)
		if f.replicaState.det {
			f.replicaState.sampleEjected(f, t, int64(t+1)*f.tickNs)
		}
		if f.chain != nil {
			f.sampleHops(t, end)
		}
	}
	f.boundary = int64(f.nextSample+1) * f.tickNs
}

func (f *fleet) handle(e *event) {
	switch e.kind() {
	case evRetry:
		in := &f.ints[e.ref()]
		if in.gen != e.gen() || in.free {
			return
		}
		f.resume(e.ref(), e.at)
	case evTimeout:
		if f.atts[e.ref()].gen == e.gen() {
			f.timedOut(e.ref(), e.at)
		}
	case evAnswer:
		if x := f.reqs.at(e.ref()); x.gen == e.gen() && !(f.env.outage && f.stalled(e, x)) {
			f.answer(e.ref(), e.at, e.aux())
		}
	case evComplete:
		if x := f.reqs.at(e.ref()); x.gen == e.gen() && !(f.env.outage && f.stalled(e, x)) {
			f.served(e.ref(), e.at)
		}
	case evHedge:
		if f.atts[e.ref()].gen == e.gen() {
			f.hedge(e.ref(), e.at)
		}
	case evSend:
		in := &f.ints[e.ref()]
		if in.gen != e.gen() || in.free {
			return
		}
		f.start(e.ref(), e.at)
	default: // a chain's: a case each would make the switch a jump table, slower on one hop
		f.tierEvent(e)
	}
}

// stalled puts off e, an answer or an end of service of request x, to the
// next trigger boundary when a stall is in force, and reports whether it
// did: a stalled origin sends nothing, and what fell due meanwhile happens
// when the stall ends, in the order it fell due. (The callers test
// f.env.outage first, inline: most runs have no outage.)
func (f *fleet) stalled(e *event, x *request) bool {
	if !f.env.outage || f.env.mode != scenario.OutageStall || f.envAt+1 >= len(f.sched.at) {
		return false
	}
	later := *e
	later.at = f.sched.at[f.envAt+1]
	f.q.push(later, laneHeap)
	if x.att >= 0 {
		if a := &f.atts[x.att]; a.known && later.at > a.deadline {
			// The answer was due in time, so no timeout was scheduled:
			// now it will be late.
			a.known = false
			f.q.push(mkEvent(a.deadline+1, x.att, a.gen, f.timeoutKind(), 0), laneTimeout)
		}
	}
	return true
}
