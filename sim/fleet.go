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

// clientState is what the client knows of an attempt.
type clientState uint8

const (
	waiting   clientState = iota // sent, no answer yet
	answered                     // the answer came in time
	gaveUp                       // the attempt timed out
	cancelled                    // the intent ended elsewhere (a hedge won)
)

// attempt is one send to the origin. Its slot is reused once both the
// client and the origin are done with it; gen tells the uses apart.
type attempt struct {
	id       uint64 // the intent's number, for draws
	sent     int64
	deadline int64 // an answer at the deadline is in time; the client gives up 1ns later
	ticket   resil.Ticket
	intent   int32 // slot of the intent, valid while state == waiting
	next     int32 // next attempt of the same intent in flight, or -1
	n        int32 // attempt number within the intent, for draws
	tick     int32 // the tick it was sent in
	replica  int32
	gen      uint32
	state    clientState
	broken   bool // its key is in the broken share
	done     bool // the origin is done with it
	known    bool // an answer is scheduled in time: no timeout event needed
	serving  bool // a queue worker holds it
	free     bool
}

// intent is one logical call, from arrival to success or loss.
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
	retryOn  [resil.OutcomeThrottled + 1]bool // by outcome: may it be retried?

	policies []resil.Policy
	jitter   rand.Source
	arrivals *rand.Rand
	lastNs   int64
	lastT    time.Time

	q      eventQueue
	atts   []attempt
	freeA  []int32
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
	atts  []attempt
	freeA []int32
	ints  []intent
	freeI []int32
	heap  []event
	lanes [nLanes][]event
	ticks []tickCounts
	lat   histogram
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// take gives f the pooled memory, emptied.
func (f *fleet) take() {
	sc := scratchPool.Get().(*scratch)
	f.scr = sc
	f.atts, f.freeA, f.ints, f.freeI = sc.atts[:0], sc.freeA[:0], sc.ints[:0], sc.freeI[:0]
	f.q.heap = sc.heap[:0]
	for i := range f.q.lanes {
		f.q.lanes[i] = ring{buf: sc.lanes[i]}
	}
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
	sc.heap = f.q.heap[:0]
	for i := range f.q.lanes {
		sc.lanes[i] = f.q.lanes[i].buf
	}
	sc.ticks = f.ticks[:0]
	f.scr, f.lat, f.atts, f.ints, f.ticks = nil, nil, nil, nil, nil
	scratchPool.Put(sc)
}

// throttleStream marks the random streams of the clients' throttles,
// apart from the arrivals' and the jitter's.
const throttleStream = 0x7417 << 48

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
		arrivals: rand.New(rand.NewPCG(sc.Seed, 0xa77)),
		jitter:   rand.NewPCG(sc.Seed, 0x1000+uint64(idx)),
		lastT:    time.Unix(0, 0),
		sched:    buildSchedule(sc, replicas),
		q:        eventQueue{best: unknown},
		boundary: int64(tick),
	}
	f.retryOn[resil.OutcomeFailure] = cfg.Retry.Retries(scenario.RetryOnError)
	f.retryOn[resil.OutcomeThrottled] = cfg.Retry.Retries(scenario.RetryOnRejection)
	f.retryOn[resil.OutcomeTimeout] = cfg.Retry.Retries(scenario.RetryOnTimeout)
	if _, end, ok := triggerWindow(sc); ok {
		f.clearAt, f.hasClear = int64(end), true
	}
	clients := max(sc.Traffic.Clients, 1)
	f.policies = make([]resil.Policy, clients)
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
	f.env = &f.sched.envs[0]
	if err := f.newOrigin(&sc.Origin, replicas); err != nil {
		f.give()
		return nil, err
	}
	f.setConditions(0)
	f.s = newSeries(f.nTicks)
	f.nextArrival = f.firstArrival(0)
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
	g := 1e9 / r
	if f.poisson {
		g = f.arrivals.ExpFloat64() / r * 1e9
	}
	// A gap beyond int64 (a tiny rate) is no next arrival: converting it
	// would give garbage (the most negative int64, on amd64).
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
	const (
		none = iota
		doEnv
		doArrival
		doEvent
	)
	limit := satAdd(f.end, drainLimit)
	for steps := 1; ; steps++ {
		now, what := int64(math.MaxInt64), none
		if f.nextArrival < f.end {
			now, what = f.nextArrival, doArrival
		}
		if f.envAt+1 < len(f.sched.at) && f.sched.at[f.envAt+1] <= now {
			now, what = f.sched.at[f.envAt+1], doEnv
		}
		if f.q.len() > 0 && f.q.peek().at < now {
			now, what = f.q.peek().at, doEvent
		}
		// Once arrivals stopped and every intent ended, what is left is
		// the origin working for nobody: it changes no result.
		if what == none || now > limit || (now >= f.end && f.live == 0) {
			break
		}
		if now >= f.boundary {
			f.sampleUpTo(int(min(now/f.tickNs, int64(f.nTicks))))
		}
		switch what {
		case doEnv:
			f.switchEnv(now)
		case doArrival:
			f.arrive(now)
			f.nextArrival = satAdd(now, f.gap())
		case doEvent:
			f.handle(f.q.pop())
		}
		if steps&0xffff == 0 && stop != nil && stop() {
			f.give()
			return FleetResult{}, errStopped
		}
	}
	f.sampleUpTo(f.nTicks)
	f.finishUnfinished()
	sum := f.summarize()
	f.give()
	return FleetResult{Name: f.cfg.Name, Summary: sum, Series: f.s}, nil
}

var errStopped = errors.New("sim: stopped")

// switchEnv moves to the next trigger boundary's env, at time at.
func (f *fleet) switchEnv(at int64) {
	f.envAt++
	old := f.env
	f.env = &f.sched.envs[f.envAt]
	f.setConditions(at)
	if f.env.rate != old.rate {
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
		f.s.Queue[t] = f.queued()
		end := f.vt(int64(t+1) * f.tickNs)
		open := 0
		for i := range f.policies {
			if f.policies[i].Breaker.State(end) == resil.StateOpen {
				open++
			}
		}
		f.s.BreakerOpen[t] = float64(open) / float64(len(f.policies))
	}
	f.boundary = int64(f.nextSample+1) * f.tickNs
}

func (f *fleet) handle(e event) {
	switch e.kind {
	case evRetry:
		in := &f.ints[e.ref]
		if in.gen != e.gen || in.free {
			return
		}
		f.resume(e.ref, e.at)
	case evTimeout:
		a := &f.atts[e.ref]
		if a.gen != e.gen || a.free || a.state != waiting {
			return
		}
		a.state = gaveUp
		f.finish(e.ref, e.at, resil.OutcomeTimeout)
		if a.serving {
			f.origin[a.replica].Left(time.Duration(e.at), origin.Request(e.ref))
		}
		f.release(e.ref)
	case evAnswer:
		if f.stalled(e) {
			return
		}
		if f.atts[e.ref].gen == e.gen {
			f.answer(e.ref, e.at, e.aux)
		}
	case evComplete:
		if f.stalled(e) {
			return
		}
		// The answer first, then the model frees the server for what
		// waits.
		if a := &f.atts[e.ref]; a.gen == e.gen {
			a.serving = false
			m := f.origin[a.replica]
			f.deliver(e.ref, e.at, f.outcome(e.ref))
			m.Done(time.Duration(e.at), origin.Request(e.ref))
		}
	case evHedge:
		a := &f.atts[e.ref]
		if a.gen != e.gen || a.free || a.state != waiting {
			return
		}
		f.hedge(e.ref, e.at)
	case evSend:
		in := &f.ints[e.ref]
		if in.gen != e.gen || in.free {
			return
		}
		f.start(e.ref, e.at)
	}
}

// stalled puts off e, an answer or an end of service, to the next
// trigger boundary when a stall is in force, and reports whether it did:
// a stalled origin sends nothing, and what fell due meanwhile happens when
// the stall ends, in the order it fell due.
func (f *fleet) stalled(e event) bool {
	if !f.env.outage || f.env.mode != scenario.OutageStall || f.envAt+1 >= len(f.sched.at) {
		return false
	}
	e.at = f.sched.at[f.envAt+1]
	f.q.push(e, laneHeap)
	if x := &f.atts[e.ref]; x.gen == e.gen && x.known && e.at > x.deadline {
		// The answer was due in time, so no timeout was scheduled: now it
		// will be late.
		x.known = false
		f.q.push(event{at: x.deadline + 1, ref: e.ref, gen: x.gen, kind: evTimeout}, laneTimeout)
	}
	return true
}

// arrive starts a new intent.
func (f *fleet) arrive(now int64) {
	id := f.count
	f.count++
	if k := f.tickOf(now); k >= 0 {
		f.ticks[k].intents++
	}
	i := f.newIntent()
	in := &f.ints[i]
	in.id, in.arrival = id, now
	in.client = f.nextClient
	if f.nextClient++; int(f.nextClient) == len(f.policies) {
		f.nextClient = 0 // round robin, without a division per intent
	}
	if f.deadline > 0 {
		in.latest = now + f.deadline
	}
	in.in = resil.Intent{Idempotent: true}
	if f.idemOnly && draw(f.seed, id, 0, drawIdempotent) >= f.sc.Traffic.Idempotent {
		in.in.Idempotent = false
		if draw(f.seed, id, 0, drawKey) < f.sc.Traffic.Keys {
			in.in.Key = "key"
		}
	}
	in.broken = f.sc.Origin.Broken > 0 && draw(f.seed, id, 0, drawBroken) < f.sc.Origin.Broken
	in.afterClear = f.hasClear && now >= f.clearAt
	f.start(i, now)
}

// start sends intent i's first attempt, once the policy's pacer allows.
func (f *fleet) start(i int32, now int64) {
	pol := &f.policies[f.ints[i].client]
	if pol.Pacer != nil && f.paced(i, now, evSend) {
		return
	}
	t, err := pol.Begin(f.vt(now), &f.ints[i].in)
	if err != nil {
		r := resil.ReasonOf(err)
		f.refused(i, now, r)
		f.lose(i, r)
		return
	}
	f.send(i, now, t, -1)
}

// paced asks the policy's pacer (the AWS adaptive mode's rate limiter)
// whether intent i may send an attempt now. When it may not, paced
// schedules kind (evSend, evRetry) again after the pacer's wait, or ends
// the intent when the pacer refuses or the wait would pass its deadline,
// and reports true.
func (f *fleet) paced(i int32, now int64, kind eventKind) bool {
	in := &f.ints[i]
	pol := &f.policies[in.client]
	d, err := pol.Pace(f.vt(now))
	if err == nil && d == 0 {
		return false
	}
	if err == nil && in.latest > 0 && now+int64(d) > in.latest {
		err = resil.ErrNoTimeLeft
	}
	if err != nil {
		pol.Abandon(f.vt(now), &in.in)
		in.failed = true
		f.lose(i, resil.ReasonOf(err))
		return true
	}
	f.q.push(event{at: now + int64(d), ref: i, gen: in.gen, kind: kind}, laneHeap)
	return true
}

// send puts one attempt of intent i on the wire. A hedge goes to another
// replica than the attempt it runs beside (avoid), as a load balancer sends
// a hedge elsewhere; other attempts pick a replica at random.
func (f *fleet) send(i int32, now int64, t resil.Ticket, avoid int32) {
	ai := f.newAttempt()
	in := &f.ints[i]
	a := &f.atts[ai]
	a.id, a.intent, a.n = in.id, i, in.sent
	in.sent++
	a.sent, a.deadline = now, now+f.timeout
	if in.latest > 0 {
		a.deadline = min(a.deadline, in.latest)
	}
	a.ticket, a.state, a.broken = t, waiting, in.broken
	a.next, in.head = in.head, ai
	in.inflight++
	if k := f.tickOf(now); k >= 0 {
		a.tick = k
		c := &f.ticks[k]
		c.offered++
		switch t.Kind() {
		case resil.KindFirst:
			c.first++
		case resil.KindRetry:
			c.retries++
		case resil.KindHedge:
			c.hedges++
		}
	} else {
		a.tick = -1
	}
	if f.replicas > 1 {
		u := draw(f.seed, in.id, int(a.n), drawReplica)
		if avoid >= 0 {
			a.replica = (avoid + 1 + int32(u*float64(f.replicas-1))) % int32(f.replicas)
		} else {
			a.replica = int32(u * float64(f.replicas))
		}
	}
	switch {
	case !f.env.outage || f.env.mode == scenario.OutageStall:
		// A stalled origin takes the attempt into its queue.
		f.origin[a.replica].Arrive(time.Duration(now), origin.Request(ai))
	case f.env.mode == scenario.OutageRefuse:
		f.reject(ai, now) // refused at once: the origin never sees it
	default:
		a.done = true // blackhole: nothing answers; it is never seen
	}
	a = &f.atts[ai]
	if !a.known {
		f.q.push(event{at: a.deadline + 1, ref: ai, gen: a.gen, kind: evTimeout}, laneTimeout)
	}
	if !f.hedging {
		return
	}
	if d := f.policies[in.client].HedgeDelay(&in.in); d > 0 && now+int64(d) < a.deadline {
		f.q.push(event{at: now + int64(d), ref: ai, gen: a.gen, kind: evHedge}, laneHedge)
	}
}

// outcome draws whether the origin's answer to attempt a is a success.
func (f *fleet) outcome(a int32) bool {
	at := &f.atts[a]
	return !at.broken && !(f.env.errRate > 0 && draw(f.seed, at.id, int(at.n), drawError) < f.env.errRate)
}

// answerAt schedules the origin's answer to attempt a at time at.
func (f *fleet) answerAt(a int32, at int64, ok bool) {
	x := &f.atts[a]
	x.known = at <= x.deadline
	var aux uint8
	if ok {
		aux = answerOK
	}
	f.q.push(event{at: at, ref: a, gen: x.gen, kind: evAnswer, aux: aux}, laneAnswer)
}

// reject answers attempt a with an overload rejection.
func (f *fleet) reject(a int32, now int64) {
	x := &f.atts[a]
	x.known = now+rejectDelay <= x.deadline
	f.q.push(event{at: now + rejectDelay, ref: a, gen: x.gen, kind: evAnswer, aux: answerThrottled}, laneReject)
}

// The outcomes an evAnswer carries in aux: an error answer is 0.
const (
	answerOK        = 1
	answerThrottled = 2 // an overload rejection: resil.OutcomeThrottled
)

// complete schedules the end of attempt a's service.
func (f *fleet) complete(a int32, at int64) {
	x := &f.atts[a]
	x.known = at <= x.deadline
	f.q.push(event{at: at, ref: a, gen: x.gen, kind: evComplete}, laneComplete)
}

// drop is a shedding origin skipping attempt a, unanswered.
func (f *fleet) drop(a int32) {
	f.sum.Dropped++
	f.atts[a].done = true
	f.release(a)
}

// deliver is the origin's answer to attempt a reaching its client: a
// success or an error.
func (f *fleet) deliver(a int32, now int64, ok bool) {
	var aux uint8
	if ok {
		aux = answerOK
	}
	f.answer(a, now, aux)
}

// answer is an answer to attempt a reaching its client; aux says what it
// is (answerOK, answerThrottled, or 0 for an error).
func (f *fleet) answer(a int32, now int64, aux uint8) {
	ok := aux == answerOK
	x := &f.atts[a]
	x.done = true
	if f.env.outage && f.env.mode == scenario.OutageRefuse {
		ok = false // the answer fails, as a reset connection does
	}
	if ok && x.tick >= 0 {
		f.ticks[x.tick].successes++
	}
	switch {
	case x.state != waiting:
		f.sum.WastedWork++
	case f.env.outage && f.env.mode == scenario.OutageBlackhole:
		// The answer is lost: the client will time out.
		if x.known {
			x.known = false
			f.q.push(event{at: max(now, x.deadline+1), ref: a, gen: x.gen, kind: evTimeout}, laneTimeout)
		}
		return
	default:
		x.state = answered
		o := resil.OutcomeFailure
		if aux == answerThrottled {
			o = resil.OutcomeThrottled
		}
		if ok {
			o = resil.OutcomeSuccess
			if x.tick >= 0 {
				f.ticks[x.tick].goodput++
			}
		}
		f.finish(a, now, o)
	}
	f.release(a)
}

// finish ends attempt a on the client's side with outcome o and decides
// what the intent does next.
func (f *fleet) finish(ai int32, now int64, o resil.Outcome) {
	a := &f.atts[ai]
	i := a.intent
	in := &f.ints[i]
	f.unlink(in, ai)
	pol := &f.policies[in.client]
	pol.End(f.vt(now), &in.in, a.ticket, o, time.Duration(now-a.sent))
	if o == resil.OutcomeSuccess {
		f.lat.add(now - in.arrival)
		for in.head >= 0 { // the other attempts lost the race
			h := in.head
			f.unlink(in, h)
			pol.End(f.vt(now), &in.in, f.atts[h].ticket, resil.OutcomeIgnored, time.Duration(now-f.atts[h].sent))
			f.atts[h].state = cancelled
			f.release(h)
		}
		f.endIntent(i)
		return
	}
	if a.tick >= 0 {
		f.ticks[a.tick].failed++
		if o == resil.OutcomeTimeout {
			f.sum.Timeouts++
		}
	}
	in.failed = true
	if in.inflight > 0 {
		return // a hedge is still out: it may yet succeed
	}
	if !f.retryOn[o] {
		// Not a failure the fleet retries: the classifier's call, made
		// before the policy is asked, as in resil's Guard (counted with
		// retries exhausted, as LostBy counts a stop it has no column for).
		f.lose(i, resil.StopNotRetryable)
		return
	}
	var latest time.Time
	if in.latest > 0 {
		latest = f.vt(in.latest)
	}
	d, err := pol.Retry(f.vt(now), &in.in, o, 0, latest, f.jitter)
	if err != nil {
		r := resil.ReasonOf(err)
		f.lose(i, r)
		if r == resil.StopBudget {
			f.sum.BudgetDenials++
		}
		return
	}
	f.q.push(event{at: now + int64(d), ref: i, gen: in.gen, kind: evRetry}, laneHeap)
}

// resume sends intent i's retry at the end of its backoff.
func (f *fleet) resume(i int32, now int64) {
	in := &f.ints[i]
	if f.policies[in.client].Pacer != nil && f.paced(i, now, evRetry) {
		return
	}
	t, err := f.policies[in.client].Resume(f.vt(now), &in.in)
	if err != nil {
		r := resil.ReasonOf(err)
		f.refused(i, now, r)
		f.lose(i, r)
		return
	}
	f.send(i, now, t, -1)
}

// hedge sends a hedge beside attempt a if the policy and the budget allow.
func (f *fleet) hedge(a int32, now int64) {
	i := f.atts[a].intent
	in := &f.ints[i]
	t, err := f.policies[in.client].StartHedge(f.vt(now), &in.in)
	if err != nil {
		if resil.ReasonOf(err) == resil.StopBudget {
			f.sum.BudgetDenials++
		}
		return // a refused hedge is no loss: the attempt is still out
	}
	f.send(i, now, t, f.atts[a].replica)
}

// refused counts an attempt the breaker, or the adaptive throttle
// (resil.StopThrottled), refused, and draws its ground truth: would it
// have succeeded had it been sent? The draw changes nothing in the origin.
func (f *fleet) refused(i int32, now int64, why resil.StopReason) {
	in := &f.ints[i]
	n := int(in.sent)
	in.sent++
	in.failed = true
	k := f.tickOf(now)
	switch {
	case k < 0:
		return
	case why == resil.StopThrottled:
		f.ticks[k].throttled++
		f.sum.ThrottleRefusals++
	default:
		f.ticks[k].refused++
		f.sum.BreakerRefusals++
	}
	if f.env.outage || in.broken {
		return
	}
	if f.env.errRate > 0 && draw(f.seed, in.id, n, drawError) < f.env.errRate {
		return
	}
	r := 0
	if f.replicas > 1 {
		r = int(draw(f.seed, in.id, n, drawReplica) * float64(f.replicas))
	}
	timeout := f.timeout
	if in.latest > 0 {
		timeout = min(timeout, in.latest-now)
	}
	if f.origin[r].WouldAnswer(time.Duration(now), time.Duration(timeout)) {
		f.sum.AnswersThrownAway++
	}
}

// lose ends intent i without success: resil stopped it for reason r.
func (f *fleet) lose(i int32, r resil.StopReason) {
	f.sum.IntentsLost++
	f.sum.LostBy.Add(r)
	f.endIntent(i)
}

// endIntent ends intent i, won or lost.
func (f *fleet) endIntent(i int32) {
	in := &f.ints[i]
	if in.failed && in.afterClear {
		f.sum.Victims++
	}
	in.free = true
	in.gen++
	f.freeI = append(f.freeI, i)
	f.live--
}

// finishUnfinished ends the intents still open when the drain limit hit.
func (f *fleet) finishUnfinished() {
	for i := range f.ints {
		if !f.ints[i].free {
			f.sum.IntentsLost++
			f.sum.LostBy.Unfinished++
			f.endIntent(int32(i))
		}
	}
}

func (f *fleet) unlink(in *intent, a int32) {
	p := &in.head
	for *p >= 0 {
		if *p == a {
			*p = f.atts[a].next
			in.inflight--
			return
		}
		p = &f.atts[*p].next
	}
}

func (f *fleet) newIntent() int32 {
	f.live++
	if n := len(f.freeI); n > 0 {
		i := f.freeI[n-1]
		f.freeI = f.freeI[:n-1]
		in := &f.ints[i]
		gen := in.gen
		*in = intent{gen: gen, head: -1}
		return i
	}
	f.ints = append(f.ints, intent{gen: 1, head: -1})
	return int32(len(f.ints) - 1)
}

func (f *fleet) newAttempt() int32 {
	if n := len(f.freeA); n > 0 {
		a := f.freeA[n-1]
		f.freeA = f.freeA[:n-1]
		x := &f.atts[a]
		gen := x.gen
		*x = attempt{gen: gen, next: -1}
		return a
	}
	f.atts = append(f.atts, attempt{gen: 1, next: -1})
	return int32(len(f.atts) - 1)
}

// release frees attempt a's slot once both sides are done with it.
func (f *fleet) release(a int32) {
	x := &f.atts[a]
	if x.free || x.state == waiting || !x.done {
		return
	}
	x.free = true
	x.gen++
	f.freeA = append(f.freeA, a)
}
