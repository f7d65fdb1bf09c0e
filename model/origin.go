package model

import (
	"math"

	"github.com/retrystorm/retrystorm/resil"
	"github.com/retrystorm/retrystorm/scenario"
)

// outage is phase 5 in an outage: the origin in a refusing or blackhole
// outage never sees what is sent, and goes on serving its queue (the
// answers are lost, in phase 1 or 4), as the simulator's does; a stall
// serves nothing, and the queue model's queues what is sent. Out of an
// outage, step hands what is sent to the origin's model: enqueue,
// concurrent or capacity.
func (r *fluidRun) outage() {
	m, o, t, tick := r.m, r.o, r.t, r.tick
	send := r.send[:o.K]
	fa := r.failedAt(r.last)
	oTimeoutSteps := r.tos[r.last]
	switch {
	case scenario.Refuses(r.cond.Mode):
		m.fail(o, t, t+1, kindRefused, send, fa, tick)
	case r.cond.Mode == scenario.OutageBlackhole:
		m.fail(o, t, t+oTimeoutSteps, kindTimeout, send, fa, tick)
	case !m.queue:
		// A stalled capacity model: held past the timeout.
		m.fail(o, t, t+oTimeoutSteps, kindTimeout, send, fa, tick)
		r.mu = 0
	default: // stall: requests queue, nothing is served
		r.mu = 0
		r.enqueue()
	}
}

// enqueue is the queue model's admission: what is sent joins the backlog
// as this step's cohort, up to the queue's limit; the rest is rejected.
func (r *fluidRun) enqueue() {
	m, o, t, tick, h := r.m, r.o, r.t, r.tick, r.m.h
	Ko, sent, send := o.K, r.sent, &r.send
	oTimeoutSteps := r.tos[r.last]
	fa := r.failedAt(r.last)
	admit := sent
	if m.limit > 0 {
		admit = min(sent, max(0, m.limit-(r.arrived-r.started)+r.mu*h))
	}
	if admit < sent && sent > 0 {
		rej := 1 - admit/sent
		// A stall holds every answer to its end, the queue's
		// refusals too (as the simulator does): heard then, or
		// not at all by clients whose deadline comes first.
		kind, at := kindRejection, t+1
		if r.cond.Outage {
			end := r.n + r.drain
			if r.seg < len(r.segs) {
				end = r.segs[r.seg].at
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
	r.arrived += admit
}

// concurrent is the concurrency model: every request is taken; its
// latency is fixed on arrival by the requests in flight then (half of this
// step's arrivals counted), as origin.Concurrency does. One answered
// within the timeout succeeds or errs then; a later one times out, and the
// origin holds it to its end (or drops it when it sheds by deadline).
func (r *fluidRun) concurrent() {
	m, o, t, tick, h := r.m, r.o, r.t, r.tick, r.m.h
	Ko, sent, send, errRate := o.K, r.sent, &r.send, r.errRate
	oTimeout, oTimeoutSteps := r.tout[r.last], r.tos[r.last]
	fa := r.failedAt(r.last)
	r.inflight -= r.st.done[t]
	lat := (m.base + m.perInflight*(r.inflight+sent/2)) * r.factor
	r.inflight += sent
	steps := max(1, int(math.Round(lat/h)))
	end := min(t+steps, r.size-1)
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
	r.st.done[end] += sent
}

// capacity is the capacity model: up to the capacity answered, after the
// model's latency, the rest rejected at once (a rejection costing a share
// of an answer's work).
func (r *fluidRun) capacity() {
	m, o, t, tick, h := r.m, r.o, r.t, r.tick, r.m.h
	Ko, sent, send, errRate := o.K, r.sent, &r.send, r.errRate
	oTimeout, oTimeoutSteps := r.tout[r.last], r.tos[r.last]
	fa := r.failedAt(r.last)
	admit := sent
	if sent > r.mu*h {
		if m.rejCost < 1 {
			admit = max(0, (r.mu*h-m.rejCost*sent)/(1-m.rejCost))
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

// serveQueue serves the queue model's backlog first in, first out, mu×h
// attempts a step. A cohort still in time (its clients wait, and it can
// start by timeout - service, the service time as it stands, after it was
// sent) is answered service later. One started later is served for
// nobody: its clients time out. The origin that drops expired requests
// skips it instead, at no cost (its clients time out); the one that sheds
// by deadline refuses it at once, a rejection, as soon as it would start
// too late. What no worker reached by its clients' deadline times out
// then, once; the origin may serve it later, for nobody, or skip it.
func (r *fluidRun) serveQueue() {
	m, o, t, h, errRate := r.m, r.o, r.t, r.m.h, r.errRate
	Ko, fa := o.K, r.failedAt(r.last)
	oTimeout, oTimeoutSteps := r.tout[r.last], r.tos[r.last]
	serviceSteps := min(oTimeoutSteps, max(1, int(math.Round(r.service/h))))
	budget := r.mu * h
	lastOK := oTimeout - r.service
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
			r.skip(head, gone, amt)
			continue
		}
		take := min(amt, budget)
		budget -= take
		r.started += take
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
	// The cohort whose clients' deadline is the next step: what no
	// worker reached of it times out then, once.
	if j := t + 1 - oTimeoutSteps; j >= 0 && o.left[j] > 0 {
		for k := range Ko {
			o.ev[((t+1)*nKinds+kindTimeout)*Ko+k] += o.mass[j*Ko+k] * o.left[j]
		}
		fa[j/m.perTick] += o.total[j] * o.left[j]
	}
}

// skip is serveQueue's drop or shed of the oldest cohort, head, amt
// attempts: the one that drops times it out at its clients' deadline, the
// one that sheds refuses it now; one already gone was counted then.
func (r *fluidRun) skip(head int, gone bool, amt float64) {
	m, o := r.m, r.o
	Ko := o.K
	if !gone {
		kind, at := kindTimeout, head+r.tos[r.last]
		if m.shed {
			kind, at = kindRejection, r.t+1
		}
		for k := range Ko {
			o.ev[(at*nKinds+kind)*Ko+k] += o.mass[head*Ko+k] * o.left[head]
		}
		r.failedAt(r.last)[head/m.perTick] += amt
	}
	r.started += amt
	o.left[head] = 0
	o.head++
}

// learn is phase 6: the breakers learn from the fleet's outcomes at this
// step (they trip, and those whose cooldown ends try a call), the
// throttle's window moves on, and at a tick's end the queue is sampled.
func (r *fluidRun) learn() {
	m, t, h := r.m, r.t, r.m.h
	if m.breaker {
		if c := r.brkOK + r.brkFail; c > 0 {
			r.lastFail = r.brkFail / c
		}
		calls := (r.brkOK + r.brkFail) / h / m.clients
		// Breakers whose cooldown ends now let a trial call through:
		// those whose trial fails open for another cooldown.
		if c := r.st.reopen[t]; c > 0 {
			again := c * m.probeFails(r.arrived-r.started, r.inflight, r.mu, r.service, r.cond)
			r.open -= c - again
			r.st.reopen[t+r.cooldown] += again
		}
		trips := min(1-r.open, h*(1-r.open)*m.tripRate(r.lastFail, calls))
		if trips > 0 {
			r.open += trips
			r.st.reopen[t+r.cooldown] += trips
		}
		r.open = min(1, max(0, r.open))
	}
	if m.throttle {
		old := (t + 1) % r.W
		if t+1 >= r.W {
			r.thrR -= r.st.thrReq[old]
			r.thrA -= r.st.thrAcc[old]
		}
		r.st.thrReq[old], r.st.thrAcc[old] = 0, 0
	}
	if (t+1)%m.perTick == 0 {
		r.s.Queue[r.tick] = max(0, r.arrived-r.started)
		if m.conc {
			r.s.Queue[r.tick] = max(0, r.inflight)
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
