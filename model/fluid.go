package model

import (
	"math"
	"time"

	"github.com/retrystorm/retrystorm/resil"
	"github.com/retrystorm/retrystorm/resil/budget"
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
func (m *Model) run(st *state) Result {
	if m.perTick <= 0 || m.steps <= 0 {
		return Result{RecoveryTicks: -1} // a Model New did not make: no run
	}
	n := m.steps
	h := m.h
	last := len(m.tiers) // the level the origin serves
	W := 1
	if m.throttle {
		// A window longer than the run never forgets: the run's steps.
		W = max(1, min(n+1, int(math.Round(m.thr.Window.Seconds()/h))))
	}
	// Buffers reach past the run by the longest delay so that nothing
	// due late needs a bound check; what falls after the end is dropped.
	// Every delay is clamped to the run's length: what falls due after
	// the end does not matter, and a delay of hours (an uncapped backoff,
	// a long cooldown or timeout) must not make the buffers that long.
	stepsOf := func(sec float64) int { return min(n+1, max(1, int(math.Round(sec/h)))) }
	timeoutSteps := stepsOf(m.timeout)
	tail := timeoutSteps + 2
	cooldown := 0
	if m.breaker {
		cooldown = stepsOf(m.brk.Cooldown.Seconds())
		tail = max(tail, cooldown+2)
	}
	for _, d := range m.delay {
		tail = max(tail, d[len(d)-1].steps+2)
	}
	// Per level: its attempt numbers, its timeout, and the steps its
	// server (a tier) works before it calls.
	Ks := []int{m.maxRetries + 1}
	tos := []int{timeoutSteps}
	tout := []float64{m.timeout}
	work := make([]int, last+1)
	for i, hop := range m.tiers {
		Ks = append(Ks, hop.maxRetries+1)
		tos = append(tos, stepsOf(hop.timeout))
		tout = append(tout, hop.timeout)
		work[i] = min(n+1, max(0, int(math.Round(hop.work/h))))
		tail = max(tail, tos[i+1]+2, work[i]+2)
		for _, d := range hop.delay {
			tail = max(tail, d[len(d)-1].steps+2)
		}
	}
	// With tiers the run goes on past its end, with no new intents, for
	// the fleet's timeout: the fleet's attempts still waiting then end in
	// the drain and are counted in the tick they were sent, as the
	// simulator's are. (Without tiers the origin's backlog says when an
	// attempt is lost before its timeout, and the run stops at its end.)
	drain := 0
	if last > 0 {
		drain = timeoutSteps + 1
	}
	size := n + drain + tail
	ticks := n / m.perTick
	allTicks := (n+drain)/m.perTick + 1
	st.reset(size, W, Ks, allTicks)
	var s Series
	series := []*[]float64{&s.Intents, &s.Offered, &s.FirstAttempts, &s.Retries, &s.Successes,
		&s.FailedAttempts, &s.BreakerRefusals, &s.ThrottleRefusals, &s.Queue}
	for _, p := range series {
		*p = make([]float64, allTicks)
	}
	failedAt := func(level int) []float64 { // where a level's failed attempts are counted
		if level == 0 {
			return s.FailedAttempts
		}
		return st.scratch
	}

	segs := m.schedule()
	seg := 0
	var cond scenario.Conditions
	tokens := m.minTok * m.clients
	maxTokens := m.maxTok * m.clients
	grpcTokens := m.grpcMax // gRPC's throttle: a client's tokens, on average
	open := 0.0             // breaker: share of clients whose breaker is open
	lastFail := 0.0         // breaker: the failure share of the last outcomes
	thrR, thrA := 0.0, 0.0
	arrived, started := 0.0, 0.0 // queue: cumulative attempts admitted and started
	service := m.service         // queue: the service time in force
	inflight := 0.0              // concurrency model: requests in flight
	var send [maxUnlimited + 1]float64
	f0 := &st.lv[0]
	K := f0.K
	o := &st.lv[last] // the level the origin serves

	for t := range n + drain {
		tick := t / m.perTick
		for seg < len(segs) && segs[seg].at <= t {
			cond = segs[seg].cond
			seg++
		}
		factor := cond.Factor[0]
		mu := cond.Capacity / factor // attempts per second the origin serves
		if !m.queue && !m.conc {
			mu = cond.Capacity // the capacity model has no latency factor
		}
		if cond.Capacity > 0 {
			// A worker holds a request workers/capacity as it stands,
			// times the factor; at zero capacity it keeps its last.
			service = m.workers / cond.Capacity * factor
		}
		errRate := cond.ErrorRate
		lost := cond.Outage && cond.Mode != scenario.OutageStall

		// 0. A tier's requests whose caller's timeout ends now: what is
		// not answered of them times out (the tier works on).
		for i := range last {
			p := &st.lv[i]
			if j := t - tos[i]; j >= 0 && p.left[j] > 0 {
				fa := failedAt(i)
				for k := range p.K {
					p.ev[(t*nKinds+kindTimeout)*p.K+k] += p.mass[j*p.K+k] * p.left[j]
				}
				fa[j/m.perTick] += p.total[j] * p.left[j]
			}
		}

		// 1. Outcomes due now: successes fund the budget; failures are
		// retried, as far as the policy and the budget allow.
		brkOK, brkFail := 0.0, 0.0
		for k := range K {
			x := f0.succ[t*K+k]
			if x == 0 {
				continue
			}
			if lost && last == 0 {
				// The origin served it, but a blackhole loses the answer
				// (the client times out) and a refusing outage fails it.
				// Counted in this tick: it was sent a service time ago.
				kind := kindTimeout
				if scenario.Refuses(cond.Mode) {
					kind = kindRefused
				}
				f0.ev[(t*nKinds+kind)*K+k] += x
				s.FailedAttempts[tick] += x
				continue
			}
			s.Successes[tick] += x
			brkOK += x
			thrA += x
			st.thrAcc[t%W] += x
			if m.budget && m.funding == budget.FundedBySuccess {
				tokens = min(maxTokens, tokens+m.ratio*x)
			}
			if m.grpc {
				grpcTokens = min(m.grpcMax, grpcTokens+m.grpcRatio*x/m.clients)
			}
		}
		for kind := range nKinds {
			base := (t*nKinds + kind) * K
			for k := range K {
				x := f0.ev[base+k]
				if x == 0 {
					continue
				}
				brkFail += x
				if m.grpc && m.grpcCounted[kind] {
					// resil's End records the failure before Retry asks.
					grpcTokens = max(0, grpcTokens-x/m.clients)
				}
				if k >= m.maxRetries || !m.retryOn[kind] {
					continue
				}
				want := x
				if k == 0 {
					// Whether an intent may be retried is decided once:
					// every retry's intent already was.
					want *= m.retryShare
				}
				c := 0.0
				if m.budget {
					c = m.cost
					if kind == kindTimeout {
						c = m.costTO
					}
					want = min(want, tokens/c)
					tokens -= want * c
				}
				if m.grpc && 2*grpcTokens <= m.grpcMax {
					want = 0 // gRPC's throttle: no retry at half the tokens or less
				}
				for _, p := range m.delay[k] {
					at := t + max(p.steps, 0)
					f0.due[at*K+k+1] += want * p.weight
					st.dueCost[at] += want * p.weight * c
				}
			}
		}

		// 2. What the clients send now: new intents and the retries due,
		// less what the throttle and the breaker refuse locally.
		pThr := 0.0
		if m.throttle {
			pThr = max(0, (thrR-m.thr.K*thrA)/(thrR+m.clients*m.thr.Padding))
			pThr = min(pThr, m.thr.MaxProbability)
		}
		in := cond.Rate * h
		if t >= n {
			in = 0 // the drain
		}
		s.Intents[tick] += in
		refT := in * pThr
		refB := 0.0
		if m.breaker && m.scopeAll {
			refB = (in - refT) * open
		}
		send[0] = in - refT - refB
		if m.budget && m.funding == budget.FundedByRequest {
			tokens = min(maxTokens, tokens+m.ratio*send[0])
		}
		totalRefT, totalRefB := refT, refB
		sent := send[0]
		retries := 0.0
		dueAll := 0.0
		for k := 1; k < K; k++ {
			dueAll += f0.due[t*K+k]
		}
		for k := 1; k < K; k++ {
			x := f0.due[t*K+k]
			rT := x * pThr
			rB := 0.0
			if m.breaker {
				rB = (x - rT) * open
			}
			send[k] = x - rT - rB
			totalRefT += rT
			totalRefB += rB
			retries += send[k]
			sent += send[k]
		}
		if m.budget && dueAll > 0 {
			// A refused retry gives its charge back.
			refused := dueAll - retries
			tokens = min(maxTokens, tokens+st.dueCost[t]*refused/dueAll)
		}
		s.ThrottleRefusals[tick] += totalRefT
		s.BreakerRefusals[tick] += totalRefB
		s.Offered[tick] += sent
		s.FirstAttempts[tick] += send[0]
		s.Retries[tick] += retries
		thrR += sent + totalRefT
		st.thrReq[t%W] += sent + totalRefT

		// 3. The fleet's server: tier 0, or the origin.
		if last > 0 {
			m.toTier(st, 0, t, work[0], send[:K], sent)
		}

		// 4. The tiers' calls, level by level inward: their outcomes (a
		// call ends when it succeeds or fails for good, and answers its
		// tier's oldest request waiting), and what they send.
		for i := 1; i <= last; i++ {
			p := &st.lv[i]
			hop := &m.tiers[i-1]
			Kp := p.K
			won, failed := 0.0, 0.0
			for k := range Kp {
				x := p.succ[t*Kp+k]
				if x == 0 {
					continue
				}
				if lost && i == last {
					kind := kindTimeout
					if scenario.Refuses(cond.Mode) {
						kind = kindRefused
					}
					p.ev[(t*nKinds+kind)*Kp+k] += x
					continue
				}
				won += x
			}
			for kind := range nKinds {
				base := (t*nKinds + kind) * Kp
				for k := range Kp {
					x := p.ev[base+k]
					if x == 0 {
						continue
					}
					if k >= hop.maxRetries || !hop.retryOn[kind] {
						failed += x
						continue
					}
					for _, d := range hop.delay[k] {
						p.due[(t+max(d.steps, 0))*Kp+k+1] += x * d.weight
					}
				}
			}
			send[0] = p.in[t]
			sentI := send[0]
			for k := 1; k < Kp; k++ {
				send[k] = p.due[t*Kp+k]
				sentI += send[k]
			}
			if i < last {
				m.toTier(st, i, t, work[i], send[:Kp], sentI)
			} else {
				sent = sentI // the origin's, below
			}
			m.answer(&st.lv[i-1], t, tos[i-1], won, failed, failedAt(i-1))
		}

		// 5. The origin, serving the last level's attempts.
		Ko := o.K
		oTimeout, oTimeoutSteps := tout[last], tos[last]
		fa := failedAt(last)
		serviceSteps := min(oTimeoutSteps, max(1, int(math.Round(service/h))))
		switch {
		// In a refusing or blackhole outage the origin never sees what is
		// sent, and goes on serving its queue (the answers are lost,
		// above), as the simulator's does.
		case cond.Outage && scenario.Refuses(cond.Mode):
			m.fail(o, t, t+1, kindRefused, send[:Ko], fa, tick)
		case cond.Outage && cond.Mode == scenario.OutageBlackhole:
			m.fail(o, t, t+oTimeoutSteps, kindTimeout, send[:Ko], fa, tick)
		case cond.Outage && !m.queue:
			// A stalled capacity model: held past the timeout.
			m.fail(o, t, t+oTimeoutSteps, kindTimeout, send[:Ko], fa, tick)
			mu = 0
		case cond.Outage: // stall: requests queue, nothing is served
			mu = 0
			fallthrough
		case m.queue:
			admit := sent
			if m.limit > 0 {
				admit = min(sent, max(0, m.limit-(arrived-started)+mu*h))
			}
			if admit < sent && sent > 0 {
				rej := 1 - admit/sent
				// A stall holds every answer to its end, the queue's
				// refusals too (as the simulator does): heard then, or
				// not at all by clients whose deadline comes first.
				kind, at := kindRejection, t+1
				if cond.Outage {
					end := n + drain
					if seg < len(segs) {
						end = segs[seg].at
					}
					if end-t >= oTimeoutSteps {
						kind, at = kindTimeout, t+oTimeoutSteps
					} else {
						at = max(end, t+1)
					}
				}
				for k := range Ko {
					x := send[k] * rej
					send[k] -= x
					o.ev[(at*nKinds+kind)*Ko+k] += x
				}
				fa[tick] += sent - admit
			}
			for k := range Ko {
				o.mass[t*Ko+k] = send[k]
			}
			o.total[t] = admit
			if admit > 0 {
				o.left[t] = 1
			}
			arrived += admit
		case m.conc:
			// Every request is taken; its latency is fixed on arrival by
			// the requests in flight then (half of this step's arrivals
			// counted), as origin.Concurrency does. One answered within
			// the timeout succeeds or errs then; a later one times out,
			// and the origin holds it to its end (or drops it when it
			// sheds by deadline).
			inflight -= st.done[t]
			lat := (m.base + m.perInflight*(inflight+sent/2)) * factor
			inflight += sent
			steps := max(1, int(math.Round(lat/h)))
			end := min(t+steps, size-1)
			if lat <= oTimeout {
				for k := range Ko {
					o.succ[end*Ko+k] += send[k] * (1 - errRate)
					o.ev[(end*nKinds+kindError)*Ko+k] += send[k] * errRate
				}
				fa[tick] += sent * errRate
			} else {
				m.fail(o, t, t+oTimeoutSteps, kindTimeout, send[:Ko], fa, tick)
				if m.drop {
					end = t + oTimeoutSteps
				}
			}
			st.done[end] += sent
		default: // capacity model: up to the capacity answered, the rest rejected at once
			admit := sent
			if sent > mu*h {
				if m.rejCost < 1 {
					admit = max(0, (mu*h-m.rejCost*sent)/(1-m.rejCost))
				} else {
					admit = 0
				}
			}
			lat := min(oTimeoutSteps, max(1, int(math.Round(m.latency/h))))
			okAt := t + lat
			if m.latency > oTimeout {
				okAt = -1
			}
			for k := range Ko {
				a := 0.0
				if sent > 0 {
					a = send[k] * admit / sent
				}
				o.ev[((t+1)*nKinds+kindRejection)*Ko+k] += send[k] - a
				if okAt < 0 {
					o.ev[((t+oTimeoutSteps)*nKinds+kindTimeout)*Ko+k] += a
					fa[tick] += a
					continue
				}
				o.succ[okAt*Ko+k] += a * (1 - errRate)
				o.ev[(okAt*nKinds+kindError)*Ko+k] += a * errRate
				fa[tick] += a * errRate
			}
			fa[tick] += sent - admit
		}

		if m.queue {
			// Serve the backlog first in, first out, mu×h attempts a step.
			// A cohort still in time (its clients wait, and it can start
			// by timeout - service, the service time as it stands, after
			// it was sent) is answered service later. One started later
			// is served for nobody: its clients time out. The origin that
			// drops expired requests skips it instead, at no cost (its
			// clients time out); the one that sheds by deadline refuses it
			// at once, a rejection, as soon as it would start too late.
			// What no worker reached by its clients' deadline times out
			// then, once (below); the origin may serve it later, for
			// nobody, or skip it.
			budget := mu * h
			lastOK := oTimeout - service
			for budget > 1e-12 && o.head <= t {
				head := o.head
				if o.left[head] <= 0 || o.total[head] <= 0 {
					o.left[head] = 0 // an empty cohort: nothing to serve
					o.head++
					continue
				}
				age := t - head
				gone := age >= oTimeoutSteps // its clients timed out: counted at the deadline
				late := float64(age)*h > lastOK+1e-9
				if m.shed {
					// Shedding decides at each start, within the step: a
					// request that would be late by the step's end is
					// refused before its clients' deadline.
					late = float64(age+1)*h > lastOK+1e-9
				}
				amt := o.total[head] * o.left[head]
				if (late || gone) && (m.drop || m.shed) {
					if !gone {
						kind, at := kindTimeout, head+oTimeoutSteps
						if m.shed {
							kind, at = kindRejection, t+1
						}
						for k := range Ko {
							o.ev[(at*nKinds+kind)*Ko+k] += o.mass[head*Ko+k] * o.left[head]
						}
						fa[head/m.perTick] += amt
					}
					started += amt
					o.left[head] = 0
					o.head++
					continue
				}
				take := min(amt, budget)
				budget -= take
				started += take
				frac := take / o.total[head]
				switch {
				case gone: // served for nobody, its timeout counted
				case late:
					// Served for nobody: its clients time out.
					at := head + oTimeoutSteps
					for k := range Ko {
						o.ev[(at*nKinds+kindTimeout)*Ko+k] += o.mass[head*Ko+k] * frac
					}
					fa[head/m.perTick] += take
				default:
					at := t + serviceSteps
					ht := head / m.perTick
					for k := range Ko {
						x := o.mass[head*Ko+k] * frac
						o.succ[at*Ko+k] += x * (1 - errRate)
						o.ev[(at*nKinds+kindError)*Ko+k] += x * errRate
						fa[ht] += x * errRate
					}
				}
				o.left[head] -= frac
				if o.left[head] <= 1e-12 {
					o.left[head] = 0
					o.head++
				}
			}
			// The cohort whose clients' deadline is the next step: what
			// no worker reached of it times out then, once.
			if j := t + 1 - oTimeoutSteps; j >= 0 && o.left[j] > 0 {
				for k := range Ko {
					o.ev[((t+1)*nKinds+kindTimeout)*Ko+k] += o.mass[j*Ko+k] * o.left[j]
				}
				fa[j/m.perTick] += o.total[j] * o.left[j]
			}
		}

		// 6. The breaker and the throttle learn.
		if m.breaker {
			if c := brkOK + brkFail; c > 0 {
				lastFail = brkFail / c
			}
			calls := (brkOK + brkFail) / h / m.clients
			// Breakers whose cooldown ends now let a trial call through:
			// those whose trial fails open for another cooldown.
			if c := st.reopen[t]; c > 0 {
				again := c * m.probeFails(arrived-started, inflight, mu, service, cond)
				open -= c - again
				st.reopen[t+cooldown] += again
			}
			trips := min(1-open, h*(1-open)*m.tripRate(lastFail, calls))
			if trips > 0 {
				open += trips
				st.reopen[t+cooldown] += trips
			}
			open = min(1, max(0, open))
		}
		if m.throttle {
			old := (t + 1) % W
			if t+1 >= W {
				thrR -= st.thrReq[old]
				thrA -= st.thrAcc[old]
			}
			st.thrReq[old], st.thrAcc[old] = 0, 0
		}
		if (t+1)%m.perTick == 0 {
			s.Queue[tick] = max(0, arrived-started)
			if m.conc {
				s.Queue[tick] = max(0, inflight)
			}
		}
	}
	for _, p := range series {
		*p = (*p)[:ticks]
	}
	r := Result{Series: s, RecoveryTicks: -1}
	if len(s.Queue) > 0 {
		r.Queue = s.Queue[len(s.Queue)-1]
	}
	r.Recovered, r.RecoveryTicks = m.recovery(&s)
	return r
}

// toTier hands what level i sends at step t to tier i: its requests wait
// there as a cohort for their answers, and its calls for them start after
// the tier's own work.
func (m *Model) toTier(st *state, i, t, work int, send []float64, sent float64) {
	p := &st.lv[i]
	copy(p.mass[t*p.K:(t+1)*p.K], send)
	p.total[t] = sent
	if sent > 0 {
		p.left[t] = 1
	}
	st.lv[i+1].in[t+work] += sent
}

// answer answers level p's oldest requests waiting at their tier with the
// calls that ended at step t, won of them successes and failed lost: first
// in, first out, each a success or an error in those shares, due the next
// step. A request its caller timed out on (tos steps after it was sent)
// takes its call's end to nobody. fa counts failed attempts by tick.
func (m *Model) answer(p *flows, t, tos int, won, failed float64, fa []float64) {
	amt := won + failed
	if amt <= 1e-12 {
		return
	}
	ok := won / amt
	K := p.K
	for amt > 1e-12 && p.head <= t {
		j := p.head
		if p.left[j] <= 0 || p.total[j] <= 0 {
			p.left[j] = 0
			p.head++
			continue
		}
		take := min(p.total[j]*p.left[j], amt)
		amt -= take
		frac := take / p.total[j]
		if t-j < tos {
			for k := range K {
				x := p.mass[j*K+k] * frac
				p.succ[(t+1)*K+k] += x * ok
				p.ev[((t+1)*nKinds+kindError)*K+k] += x * (1 - ok)
			}
			fa[j/m.perTick] += take * (1 - ok)
		}
		p.left[j] -= frac
		if p.left[j] <= 1e-12 {
			p.left[j] = 0
			p.head++
		}
	}
}

// fail ends what is sent at step t with a failure of kind at step at.
func (m *Model) fail(o *flows, t, at int, kind int, send []float64, fa []float64, tick int) {
	K := len(send)
	for k, x := range send {
		o.ev[(at*nKinds+kind)*K+k] += x
		fa[tick] += x
	}
	o.total[t], o.left[t] = 0, 0
}

// probeFails is the chance that a breaker's trial call now fails: the
// origin answers it in time when its backlog drains within the timeout.
func (m *Model) probeFails(backlog, inflight, mu, service float64, c scenario.Conditions) float64 {
	switch {
	case c.Outage:
		return 1
	case m.conc:
		if (m.base+m.perInflight*inflight)*c.Factor[0] > m.timeout {
			return 1
		}
		return c.ErrorRate
	case mu <= 0:
		return 1
	case m.queue && backlog/mu+service > m.timeout:
		return 1
	}
	return c.ErrorRate
}

// tripRate is the rate at which a closed breaker opens: the rate its
// rule fires at the observed failure share f and the client's call rate.
// Each client's breaker is followed as a share of clients (open or
// closed); an open one stays open for its cooldown exactly (a delay line,
// not an exponential: the cooldown is a fixed time) and then again for
// each trial call that fails.
func (m *Model) tripRate(f, calls float64) float64 {
	if f <= 0 || calls <= 0 {
		return 0
	}
	switch m.brk.Rule {
	case resil.ConsecutiveFailures:
		th := float64(m.brk.Threshold)
		// Expected calls until th failures in a row.
		e := th
		if f < 1 {
			ft := math.Pow(f, th)
			e = (1 - ft) / ((1 - f) * ft)
		}
		return calls / e
	default: // the window rules: open once the window's failure rate is reached
		if f >= m.brk.FailureRate {
			return calls / float64(max(m.brk.MinCalls, 1))
		}
	}
	return 0
}

// recovery applies the simulator's rule to the model's series: sim's
// Summarize on the counts scaled up a thousandfold, so that rounding to
// whole counts does not move the one-point tolerance.
func (m *Model) recovery(s *Series) (bool, int) {
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
		return false, -1
	}
	return true, *sum.RecoveryTicks
}
