package model

import (
	"math"
	"time"

	"github.com/retrystorm/retrystorm/resil"
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

// state is one run's buffers, reused across the runs of a map.
type state struct {
	mass    []float64 // cohort j's attempts by attempt number: mass[j*K+k]
	total   []float64 // cohort j's attempts
	left    []float64 // share of cohort j not started yet
	succ    []float64 // successes due at step t, by attempt number
	ev      []float64 // failures due at step t: ev[(t*nKinds+kind)*K+k]
	due     []float64 // retries due at step t, by attempt number
	dueCost []float64 // tokens paid for the retries due at step t
	thrReq  []float64 // throttle window, per step
	thrAcc  []float64
	reopen  []float64 // breakers whose cooldown ends at step t
	done    []float64 // concurrency model: requests whose service ends at step t
}

func (st *state) reset(n, K, W int) {
	grow := func(s []float64, l int) []float64 {
		if cap(s) < l {
			return make([]float64, l)
		}
		s = s[:l]
		clear(s)
		return s
	}
	st.mass = grow(st.mass, n*K)
	st.total = grow(st.total, n)
	st.left = grow(st.left, n)
	st.succ = grow(st.succ, n*K)
	st.ev = grow(st.ev, n*nKinds*K)
	st.due = grow(st.due, n*K)
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
func (m *Model) run(st *state) Result {
	if m.perTick <= 0 || m.steps <= 0 {
		return Result{RecoveryTicks: -1} // a Model New did not make: no run
	}
	n := m.steps
	K := m.maxRetries + 1
	h := m.h
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
	timeoutSteps := min(n+1, max(1, int(math.Round(m.timeout/h))))
	tail := timeoutSteps + 2
	cooldown := 0
	if m.breaker {
		cooldown = min(n+1, max(1, int(math.Round(m.brk.Cooldown.Seconds()/h))))
		tail = max(tail, cooldown+2)
	}
	for _, d := range m.delay {
		tail = max(tail, d[len(d)-1].steps+2)
	}
	size := n + tail
	st.reset(size, K, W)
	ticks := n / m.perTick
	var s Series
	for _, p := range []*[]float64{&s.Intents, &s.Offered, &s.FirstAttempts, &s.Retries, &s.Successes,
		&s.FailedAttempts, &s.BreakerRefusals, &s.ThrottleRefusals, &s.Queue} {
		*p = make([]float64, ticks)
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
	inflight := 0.0              // concurrency model: requests in flight
	head := 0
	var send [maxUnlimited + 1]float64

	for t := range n {
		tick := t / m.perTick
		for seg < len(segs) && segs[seg].at <= t {
			cond = segs[seg].cond
			seg++
		}
		factor := cond.Factor[0]
		mu := cond.Capacity / factor // attempts per second the origin serves
		service := m.service * factor
		serviceSteps := min(timeoutSteps, max(1, int(math.Round(service/h))))
		errRate := cond.ErrorRate

		// 1. Outcomes due now: successes fund the budget; failures are
		// retried, as far as the policy and the budget allow.
		brkOK, brkFail := 0.0, 0.0
		lost := cond.Outage && cond.Mode != scenario.OutageStall
		for k := range K {
			x := st.succ[t*K+k]
			if x == 0 {
				continue
			}
			if lost {
				// The origin served it, but a blackhole loses the answer
				// (the client times out) and a refusing outage fails it.
				// Counted in this tick: it was sent a service time ago.
				kind := kindTimeout
				if cond.Mode == scenario.OutageRefuse {
					kind = kindRefused
				}
				st.ev[(t*nKinds+kind)*K+k] += x
				s.FailedAttempts[tick] += x
				continue
			}
			s.Successes[tick] += x
			brkOK += x
			thrA += x
			st.thrAcc[t%W] += x
			if m.budget && m.funding == resil.FundedBySuccess {
				tokens = min(maxTokens, tokens+m.ratio*x)
			}
			if m.grpc {
				grpcTokens = min(m.grpcMax, grpcTokens+m.grpcRatio*x/m.clients)
			}
		}
		for kind := range nKinds {
			base := (t*nKinds + kind) * K
			for k := range K {
				x := st.ev[base+k]
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
				want := x * m.retryShare
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
					st.due[at*K+k+1] += want * p.weight
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
		s.Intents[tick] += in
		refT := in * pThr
		refB := 0.0
		if m.breaker && m.scopeAll {
			refB = (in - refT) * open
		}
		send[0] = in - refT - refB
		if m.budget && m.funding == resil.FundedByRequest {
			tokens = min(maxTokens, tokens+m.ratio*send[0])
		}
		totalRefT, totalRefB := refT, refB
		sent := send[0]
		retries := 0.0
		dueAll := 0.0
		for k := 1; k < K; k++ {
			dueAll += st.due[t*K+k]
		}
		for k := 1; k < K; k++ {
			x := st.due[t*K+k]
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

		// 3. The origin.
		switch {
		// In a refusing or blackhole outage the origin never sees what is
		// sent, and goes on serving its queue (the answers are lost,
		// above), as the simulator's does.
		case cond.Outage && cond.Mode == scenario.OutageRefuse:
			m.fail(st, t, t+1, kindRefused, send[:K], &s, tick)
		case cond.Outage && cond.Mode == scenario.OutageBlackhole:
			m.fail(st, t, t+timeoutSteps, kindTimeout, send[:K], &s, tick)
		case cond.Outage && !m.queue:
			// A stalled capacity model: held past the timeout.
			m.fail(st, t, t+timeoutSteps, kindTimeout, send[:K], &s, tick)
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
				for k := range K {
					x := send[k] * rej
					send[k] -= x
					st.ev[((t+1)*nKinds+kindRejection)*K+k] += x
				}
				s.FailedAttempts[tick] += sent - admit
			}
			for k := range K {
				st.mass[t*K+k] = send[k]
			}
			st.total[t] = admit
			if admit > 0 {
				st.left[t] = 1
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
			if lat <= m.timeout {
				for k := range K {
					st.succ[end*K+k] += send[k] * (1 - errRate)
					st.ev[(end*nKinds+kindError)*K+k] += send[k] * errRate
				}
				s.FailedAttempts[tick] += sent * errRate
			} else {
				m.fail(st, t, t+timeoutSteps, kindTimeout, send[:K], &s, tick)
				if m.drop {
					end = t + timeoutSteps
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
			lat := min(timeoutSteps, max(1, int(math.Round(m.latency/h))))
			okAt := t + lat
			if m.latency > m.timeout {
				okAt = -1
			}
			for k := range K {
				a := 0.0
				if sent > 0 {
					a = send[k] * admit / sent
				}
				st.ev[((t+1)*nKinds+kindRejection)*K+k] += send[k] - a
				if okAt < 0 {
					st.ev[((t+timeoutSteps)*nKinds+kindTimeout)*K+k] += a
					s.FailedAttempts[tick] += a
					continue
				}
				st.succ[okAt*K+k] += a * (1 - errRate)
				st.ev[(okAt*nKinds+kindError)*K+k] += a * errRate
				s.FailedAttempts[tick] += a * errRate
			}
			s.FailedAttempts[tick] += sent - admit
		}

		if m.queue {
			// Serve the backlog first in, first out, mu×h attempts a step.
			// A cohort still in time (its clients wait: it can start by
			// timeout - service after it was sent) is answered service
			// later; one past that is served for nobody, or skipped free
			// when the origin drops expired requests.
			budget := mu * h
			lastOK := m.timeout - service
			for budget > 1e-12 && head <= t {
				if st.left[head] <= 0 || st.total[head] <= 0 {
					st.left[head] = 0 // an empty cohort: nothing to serve
					head++
					continue
				}
				late := float64(t-head)*h > lastOK+1e-9
				amt := st.total[head] * st.left[head]
				if late && m.drop {
					started += amt
					st.left[head] = 0
					head++
					continue
				}
				take := min(amt, budget)
				budget -= take
				started += take
				frac := take / st.total[head]
				if !late {
					at := t + serviceSteps
					ht := head / m.perTick
					for k := range K {
						x := st.mass[head*K+k] * frac
						st.succ[at*K+k] += x * (1 - errRate)
						st.ev[(at*nKinds+kindError)*K+k] += x * errRate
						s.FailedAttempts[ht] += x * errRate
					}
				}
				st.left[head] -= frac
				if st.left[head] <= 1e-12 {
					st.left[head] = 0
					head++
				}
			}
			// 4. The cohort whose last chance to start was this step: what
			// is left of it times out, timeout after it was sent.
			if j := t - int(math.Floor((lastOK+1e-9)/h)); j >= 0 && j <= t && st.left[j] > 0 {
				at := j + timeoutSteps
				at = max(at, t+1)
				for k := range K {
					st.ev[(at*nKinds+kindTimeout)*K+k] += st.mass[j*K+k] * st.left[j]
				}
				s.FailedAttempts[j/m.perTick] += st.total[j] * st.left[j]
			}
		}

		// 5. The breaker and the throttle learn.
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
	r := Result{Series: s, RecoveryTicks: -1}
	if len(s.Queue) > 0 {
		r.Queue = s.Queue[len(s.Queue)-1]
	}
	r.Recovered, r.RecoveryTicks = m.recovery(&s)
	return r
}

// fail ends what is sent at step t with a failure of kind at step at.
func (m *Model) fail(st *state, t, at int, kind int, send []float64, s *Series, tick int) {
	K := len(send)
	for k, x := range send {
		st.ev[(at*nKinds+kind)*K+k] += x
		s.FailedAttempts[tick] += x
	}
	st.total[t], st.left[t] = 0, 0
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
