package model

import (
	"github.com/retrystorm/retrystorm/resil/budget"
	"github.com/retrystorm/retrystorm/scenario"
)

// tierTimeouts is phase 0: a tier's requests whose caller's timeout ends
// at this step time out, what is not answered of them (the tier works on,
// for nobody).
func (r *fluidRun) tierTimeouts() {
	t := r.t
	for i := range r.last {
		p := &r.st.lv[i]
		if j := t - r.tos[i]; j >= 0 && p.left[j] > 0 {
			fa := r.failedAt(i)
			for k := range p.K {
				p.ev[(t*nKinds+kindTimeout)*p.K+k] += p.mass[j*p.K+k] * p.left[j]
			}
			fa[j/r.m.perTick] += p.total[j] * p.left[j]
		}
	}
}

// fleetSuccesses is phase 1's first half: the fleet's successes due at
// this step fund the budget and gRPC's throttle and count for the breaker
// and the throttle, unless an outage loses them (then they are failures,
// as the client hears them).
func (r *fluidRun) fleetSuccesses() {
	m, f0, K, t, tick := r.m, r.f0, r.K, r.t, r.tick
	// The figures this loop moves, in locals for the loop's sake.
	brkOK, thrA, tokens, grpcTokens := 0.0, r.thrA, r.tokens, r.grpcTokens
	for k := range K {
		x := f0.succ[t*K+k]
		if x == 0 {
			continue
		}
		if r.lost && r.last == 0 {
			// The origin served it, but a blackhole loses the answer
			// (the client times out) and a refusing outage fails it.
			// Counted in this tick: it was sent a service time ago.
			kind := kindTimeout
			if scenario.Refuses(r.cond.Mode) {
				kind = kindRefused
			}
			f0.ev[(t*nKinds+kind)*K+k] += x
			r.s.FailedAttempts[tick] += x
			continue
		}
		r.s.Successes[tick] += x
		brkOK += x
		thrA += x
		r.st.thrAcc[t%r.W] += x
		if m.budget && m.funding == budget.FundedBySuccess {
			tokens = min(r.maxTokens, tokens+m.ratio*x)
		}
		if m.grpc {
			grpcTokens = min(m.grpcMax, grpcTokens+m.grpcRatio*x/m.clients)
		}
	}
	r.brkOK, r.thrA, r.tokens, r.grpcTokens = brkOK, thrA, tokens, grpcTokens
}

// fleetRetries is phase 1's second half: the fleet's failures due at this
// step are retried, as far as the policy, the budget and gRPC's throttle
// allow, each retry due after its backoff.
func (r *fluidRun) fleetRetries() {
	m, f0, K, t, dueCost := r.m, r.f0, r.K, r.t, r.st.dueCost
	// The figures this loop moves, in locals for the loop's sake.
	brkFail, tokens, grpcTokens := 0.0, r.tokens, r.grpcTokens
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
				dueCost[at] += want * p.weight * c
			}
		}
	}
	r.brkFail, r.tokens, r.grpcTokens = brkFail, tokens, grpcTokens
}

// fleetSends is phase 2: what the clients send at this step, new intents
// (none in the drain) and the retries due, less what the throttle and the
// breaker refuse locally; a refused retry gives its budget charge back.
func (r *fluidRun) fleetSends() {
	m, f0, K, t, tick, s := r.m, r.f0, r.K, r.t, r.tick, &r.s
	send, open := &r.send, r.open
	pThr := 0.0
	if m.throttle {
		pThr = max(0, (r.thrR-m.thr.K*r.thrA)/(r.thrR+m.clients*m.thr.Padding))
		pThr = min(pThr, m.thr.MaxProbability)
	}
	in := r.cond.Rate * m.h
	if t >= r.n {
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
		r.tokens = min(r.maxTokens, r.tokens+m.ratio*send[0])
	}
	totalRefT, totalRefB := refT, refB
	sent := send[0]
	retries := 0.0
	dueAll := 0.0
	due := f0.due[t*K : (t+1)*K]
	for k := 1; k < K; k++ {
		dueAll += due[k]
	}
	for k := 1; k < K; k++ {
		x := due[k]
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
		r.tokens = min(r.maxTokens, r.tokens+r.st.dueCost[t]*refused/dueAll)
	}
	s.ThrottleRefusals[tick] += totalRefT
	s.BreakerRefusals[tick] += totalRefB
	s.Offered[tick] += sent
	s.FirstAttempts[tick] += send[0]
	s.Retries[tick] += retries
	r.thrR += sent + totalRefT
	r.st.thrReq[t%r.W] += sent + totalRefT
	r.sent = sent
}

// tierCalls is phase 4 for level i, tier i-1's calls: their outcomes due
// at this step (a call ends when it succeeds or fails for good, and
// answers its tier's oldest request waiting), their retries, and what
// they send, to the next tier or (the last level) to the origin.
func (r *fluidRun) tierCalls(i int) {
	m, t := r.m, r.t
	p := &r.st.lv[i]
	hop := &m.tiers[i-1]
	Kp := p.K
	won, failed := 0.0, 0.0
	for k := range Kp {
		x := p.succ[t*Kp+k]
		if x == 0 {
			continue
		}
		if r.lost && i == r.last {
			kind := kindTimeout
			if scenario.Refuses(r.cond.Mode) {
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
	send := &r.send
	send[0] = p.in[t]
	sentI := send[0]
	for k := 1; k < Kp; k++ {
		send[k] = p.due[t*Kp+k]
		sentI += send[k]
	}
	if i < r.last {
		m.toTier(r.st, i, t, r.work[i], send[:Kp], sentI)
	} else {
		r.sent = sentI // the origin's, in phase 5
	}
	m.answer(&r.st.lv[i-1], t, r.tos[i-1], won, failed, r.failedAt(i-1))
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
