package model

import (
	"math"
	"time"

	"github.com/retrystorm/retrystorm/scenario"
	"github.com/retrystorm/retrystorm/sim"
)

// Series is a model run tick by tick, in the simulator's units: counts
// per tick (fractional: the model follows flows, not requests).
type Series struct {
	Intents, Offered, FirstAttempts, Retries []float64
	Successes, FailedAttempts                []float64
	BreakerRefusals, ThrottleRefusals        []float64
	Queue                                    []float64 // requests waiting at the tick's end
}

// Result is what one run of the model says.
type Result struct {
	Series Series
	// Recovered and RecoveryTicks follow the simulator's rule (sim's
	// Summarize, on the model's series): the first tick after the
	// triggers from which the failure share stays within a percentage
	// point of the pre-trigger baseline, with ten ticks of run left.
	Recovered     bool
	RecoveryTicks int // -1 when not recovered
	// NeverHealthy is the simulator's rule too: the fleet failed more
	// than sim.UnhealthyBaseline of its calls before the triggers, so
	// there was nothing to recover to (Recovered is false).
	NeverHealthy bool
	// Queue is the backlog at the end of the run.
	Queue float64
}

// segment is the conditions from step at on.
type segment struct {
	at   int
	cond scenario.Conditions
}

// flows is one level's attempts: the fleet's (level 0) or a tier's calls
// to the next layer (level i+1 is tier i's client). Its cohorts (mass,
// total, left) are the attempts its server holds: the origin's backlog for
// the last level, the requests a tier has not answered yet for the others.
type flows struct {
	K     int       // attempt numbers
	mass  []float64 // cohort j's attempts by attempt number: mass[j*K+k]
	total []float64 // cohort j's attempts
	left  []float64 // share of cohort j not started (origin) or not answered (tier) yet
	succ  []float64 // successes due at step t, by attempt number
	ev    []float64 // failures due at step t: ev[(t*nKinds+kind)*K+k]
	due   []float64 // retries due at step t, by attempt number
	in    []float64 // a tier's calls starting at step t (levels past the fleet)
	head  int       // the oldest cohort with something left
}

// state is one run's buffers, reused across the runs of a map.
type state struct {
	lv      []flows   // by level: the fleet's, then each tier's calls
	scratch []float64 // failed attempts of the levels past the fleet, per tick: not the fleet's series
	dueCost []float64 // tokens paid for the retries due at step t
	thrReq  []float64 // throttle window, per step
	thrAcc  []float64
	reopen  []float64 // breakers whose cooldown ends at step t
	done    []float64 // concurrency model: requests whose service ends at step t
}

func grow(s []float64, l int) []float64 {
	if cap(s) < l {
		return make([]float64, l)
	}
	s = s[:l]
	clear(s)
	return s
}

func (st *state) reset(n, W int, Ks []int, ticks int) {
	if len(st.lv) != len(Ks) {
		st.lv = make([]flows, len(Ks))
	}
	for i, K := range Ks {
		f := &st.lv[i]
		f.K, f.head = K, 0
		f.mass = grow(f.mass, n*K)
		f.total = grow(f.total, n)
		f.left = grow(f.left, n)
		f.succ = grow(f.succ, n*K)
		f.ev = grow(f.ev, n*nKinds*K)
		f.due = grow(f.due, n*K)
		f.in = grow(f.in, n)
	}
	st.scratch = grow(st.scratch, ticks)
	st.dueCost = grow(st.dueCost, n)
	st.thrReq = grow(st.thrReq, W)
	st.thrAcc = grow(st.thrAcc, W)
	st.reopen = grow(st.reopen, n)
	st.done = grow(st.done, n)
}

// Run integrates the model over the scenario's duration.
func (m *Model) Run() Result {
	var st state
	return m.run(&st)
}

// schedule returns the conditions in force, segment by segment, as the
// simulator's schedule does (scenario.At at every trigger boundary).
func (m *Model) schedule() []segment {
	base := m.sc.Base(1)
	at := []time.Duration{0}
	for _, t := range m.sc.Triggers {
		at = append(at, t.At, t.End())
	}
	var segs []segment
	for _, a := range at {
		step := int(math.Round(a.Seconds() / m.h))
		segs = append(segs, segment{at: step, cond: scenario.At(base, m.sc.Triggers, a)})
	}
	// Sort by step (few segments: insertion sort), latest wins on ties.
	for i := 1; i < len(segs); i++ {
		for j := i; j > 0 && segs[j-1].at > segs[j].at; j-- {
			segs[j-1], segs[j] = segs[j], segs[j-1]
		}
	}
	return segs
}

// run integrates the model with st's buffers.
//
// With tiers the model follows a level per hop: the fleet's attempts
// (level 0) go to tier 0, whose calls (level 1) go to tier 1, and so on to
// the last level's, which the origin serves. Every level is the same flows
// as the fleet's (attempts by number, retries due by backoff), the tiers'
// with their own retries, backoff and timeout. A tier answers its callers'
// attempts in the order they came (its cohorts, first in, first out) as its
// calls end: each call that ends, won or lost, answers the oldest request
// waiting, a success or an error. A request its caller has timed out on
// keeps its place (the tier works on for nobody) and takes its call's end
// to nobody.
// run integrates the model with st's buffers.
//
// With tiers the model follows a level per hop: the fleet's attempts
// (level 0) go to tier 0, whose calls (level 1) go to tier 1, and so on to
// the last level's, which the origin serves. Every level is the same flows
// as the fleet's (attempts by number, retries due by backoff), the tiers'
// with their own retries, backoff and timeout. A tier answers its callers'
// attempts in the order they came (its cohorts, first in, first out) as its
// calls end: each call that ends, won or lost, answers the oldest request
// waiting, a success or an error. A request its caller has timed out on
// keeps its place (the tier works on for nobody) and takes its call's end
// to nobody.
func (m *Model) run(st *state) Result {
	if m.perTick <= 0 || m.steps <= 0 {
		return Result{RecoveryTicks: -1} // a Model New did not make: no run
	}
	r := m.newRun(st)
	for t := range r.n + r.drain {
		r.step(t)
	}
	return r.result()
}

// fluidRun is one integration of a Model: the run's constants worked out
// once (delays in steps, buffer sizes), the state carried from step to
// step (the budget's tokens, the breakers' open share, the throttle's
// window, the origin's queue) and the step's own figures. Its phases are
// methods that step calls in order; each reads what the one before left,
// as the single loop they were cut from did.
type fluidRun struct {
	m  *Model
	st *state
	s  Series

	// The run's constants.
	n, drain, size int
	ticks          int       // the ticks the result keeps (the drain's are dropped)
	W              int       // the throttle's window, in steps
	last           int       // the level the origin serves
	tos            []int     // per level: its timeout, in steps
	tout           []float64 // per level: its timeout, in seconds
	work           []int     // per tier: the steps its server works before it calls
	cooldown       int       // the breaker's cooldown, in steps
	segs           []segment
	f0, o          *flows  // the fleet's level and the one the origin serves
	K              int     // the fleet's attempt numbers
	maxTokens      float64 // the budget's most tokens, the fleet's

	// Carried from step to step.
	seg              int
	cond             scenario.Conditions
	tokens           float64 // the budget's tokens, the fleet's
	grpcTokens       float64 // gRPC's throttle: a client's tokens, on average
	open             float64 // breaker: share of clients whose breaker is open
	lastFail         float64 // breaker: the failure share of the last outcomes
	thrR, thrA       float64 // throttle: requests and accepts in the window
	arrived, started float64 // queue: cumulative attempts admitted and started
	service          float64 // queue: the service time in force
	inflight         float64 // concurrency model: requests in flight
	// send is what a level sends this step, by attempt number: each
	// level's in turn.
	send [maxUnlimited + 1]float64

	// The step's.
	t, tick        int
	factor, mu     float64 // the latency factor; attempts per second the origin serves
	errRate        float64
	lost           bool    // an outage that loses or refuses what the origin answers
	brkOK, brkFail float64 // the fleet's outcomes the breaker counts
	sent           float64 // what the level the origin serves sends
}

// newRun sizes st for m's run and returns the run at its first step.
// Buffers reach past the run by the longest delay so that nothing due late
// needs a bound check; what falls after the end is dropped. Every delay is
// clamped to the run's length: what falls due after the end does not
// matter, and a delay of hours (an uncapped backoff, a long cooldown or
// timeout) must not make the buffers that long.
func (m *Model) newRun(st *state) *fluidRun {
	n := m.steps
	h := m.h
	r := &fluidRun{m: m, st: st, n: n, last: len(m.tiers), W: 1}
	if m.throttle {
		// A window longer than the run never forgets: the run's steps.
		r.W = max(1, min(n+1, int(math.Round(m.thr.Window.Seconds()/h))))
	}
	stepsOf := func(sec float64) int { return min(n+1, max(1, int(math.Round(sec/h)))) }
	timeoutSteps := stepsOf(m.timeout)
	tail := timeoutSteps + 2
	if m.breaker {
		r.cooldown = stepsOf(m.brk.Cooldown.Seconds())
		tail = max(tail, r.cooldown+2)
	}
	for _, d := range m.delay {
		tail = max(tail, d[len(d)-1].steps+2)
	}
	// Per level: its attempt numbers, its timeout, and the steps its
	// server (a tier) works before it calls.
	Ks := []int{m.maxRetries + 1}
	r.tos = []int{timeoutSteps}
	r.tout = []float64{m.timeout}
	r.work = make([]int, r.last+1)
	for i, hop := range m.tiers {
		Ks = append(Ks, hop.maxRetries+1)
		r.tos = append(r.tos, stepsOf(hop.timeout))
		r.tout = append(r.tout, hop.timeout)
		r.work[i] = min(n+1, max(0, int(math.Round(hop.work/h))))
		tail = max(tail, r.tos[i+1]+2, r.work[i]+2)
		for _, d := range hop.delay {
			tail = max(tail, d[len(d)-1].steps+2)
		}
	}
	// With tiers the run goes on past its end, with no new intents, for
	// the fleet's timeout: the fleet's attempts still waiting then end in
	// the drain and are counted in the tick they were sent, as the
	// simulator's are. (Without tiers the origin's backlog says when an
	// attempt is lost before its timeout, and the run stops at its end.)
	if r.last > 0 {
		r.drain = timeoutSteps + 1
	}
	r.size = n + r.drain + tail
	r.ticks = n / m.perTick
	allTicks := (n+r.drain)/m.perTick + 1
	st.reset(r.size, r.W, Ks, allTicks)
	for _, p := range r.s.all() {
		*p = make([]float64, allTicks)
	}
	r.segs = m.schedule()
	r.tokens = m.minTok * m.clients
	r.maxTokens = m.maxTok * m.clients
	r.grpcTokens = m.grpcMax
	r.service = m.service
	r.f0 = &st.lv[0]
	r.K = r.f0.K
	r.o = &st.lv[r.last]
	return r
}

// all is the series, in a fixed order, for what is done to each alike.
func (s *Series) all() []*[]float64 {
	return []*[]float64{&s.Intents, &s.Offered, &s.FirstAttempts, &s.Retries, &s.Successes,
		&s.FailedAttempts, &s.BreakerRefusals, &s.ThrottleRefusals, &s.Queue}
}

// step integrates step t, its phases in order: the conditions in force,
// the tiers' requests timed out (0), the fleet's outcomes and the retries
// they start (1), what the fleet sends (2) to tier 0 (3), the tiers'
// calls level by level (4), the origin (5) and its queue, and what the
// breaker and the throttle learn (6). The phases a run does not have are
// not called: a step is a few hundred nanoseconds, and a call costs.
func (r *fluidRun) step(t int) {
	m := r.m
	r.t, r.tick = t, t/m.perTick
	r.nextSegment()
	r.conditions()
	if r.last > 0 {
		r.tierTimeouts()
	}
	r.fleetSuccesses()
	r.fleetRetries()
	r.fleetSends()
	if r.last > 0 {
		m.toTier(r.st, 0, t, r.work[0], r.send[:r.K], r.sent)
		for i := 1; i <= r.last; i++ {
			r.tierCalls(i)
		}
	}
	switch {
	case r.cond.Outage:
		r.outage()
	case m.queue:
		r.enqueue()
	case m.conc:
		r.concurrent()
	default:
		r.capacity()
	}
	if m.queue {
		r.serveQueue()
	}
	r.learn()
}

// nextSegment moves to the last segment that starts by step t.
func (r *fluidRun) nextSegment() {
	for r.seg < len(r.segs) && r.segs[r.seg].at <= r.t {
		r.cond = r.segs[r.seg].cond
		r.seg++
	}
}

// conditions works out what the segment in force sets at this step: the
// origin's rate of service, its service time, the error rate and whether
// an outage loses the origin's answers.
func (r *fluidRun) conditions() {
	m, cond := r.m, &r.cond
	r.factor = cond.Factor[0]
	r.mu = cond.Capacity / r.factor // attempts per second the origin serves
	if !m.queue && !m.conc {
		r.mu = cond.Capacity // the capacity model has no latency factor
	}
	if cond.Capacity > 0 {
		// A worker holds a request workers/capacity as it stands,
		// times the factor; at zero capacity it keeps its last.
		r.service = m.workers / cond.Capacity * r.factor
	}
	r.errRate = cond.ErrorRate
	r.lost = cond.Outage && cond.Mode != scenario.OutageStall
}

// failedAt is where a level's failed attempts are counted: the fleet's in
// its series, the tiers' calls' in scratch.
func (r *fluidRun) failedAt(level int) []float64 {
	if level == 0 {
		return r.s.FailedAttempts
	}
	return r.st.scratch
}

// result trims the series to the run's ticks (the drain's are dropped)
// and applies the simulator's recovery rule.
func (r *fluidRun) result() Result {
	s := r.s
	for _, p := range s.all() {
		*p = (*p)[:r.ticks]
	}
	res := Result{Series: s, RecoveryTicks: -1}
	if len(s.Queue) > 0 {
		res.Queue = s.Queue[len(s.Queue)-1]
	}
	res.Recovered, res.RecoveryTicks, res.NeverHealthy = r.m.recovery(&s)
	return res
}

// recovery applies the simulator's rule to the model's series: sim's
// Summarize on the counts scaled up a thousandfold, so that rounding to
// whole counts does not move the one-point tolerance.
func (m *Model) recovery(s *Series) (recovered bool, ticks int, neverHealthy bool) {
	n := len(s.Intents)
	ser := sim.NewSeries(n)
	var sum sim.Summary
	const scale = 1000
	r := func(x float64) int64 { return int64(math.Round(x * scale)) }
	ser.ThrottleRefusals = make([]int64, n)
	for k := range n {
		ser.Intents[k], ser.Offered[k], ser.FirstAttempts[k], ser.Retries[k] = r(s.Intents[k]), r(s.Offered[k]), r(s.FirstAttempts[k]), r(s.Retries[k])
		ser.Successes[k], ser.Goodput[k], ser.FailedAttempts[k] = r(s.Successes[k]), r(s.Successes[k]), r(s.FailedAttempts[k])
		ser.BreakerRefusals[k], ser.ThrottleRefusals[k] = r(s.BreakerRefusals[k]), r(s.ThrottleRefusals[k])
		sum.BreakerRefusals += ser.BreakerRefusals[k]
		sum.ThrottleRefusals += ser.ThrottleRefusals[k]
	}
	start, end := sim.TriggerTicks(&m.sc)
	sim.Summarize(&ser, &sum, start, end)
	if !sum.Recovered {
		return false, -1, sum.NeverHealthy
	}
	return true, *sum.RecoveryTicks, false
}
