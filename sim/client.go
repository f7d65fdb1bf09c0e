package sim

import (
	"time"

	"github.com/retrystorm/retrystorm/origin"
	"github.com/retrystorm/retrystorm/resil"
	"github.com/retrystorm/retrystorm/scenario"
)

// The clients' side of a run: intents arrive, their attempts are sent,
// answered or timed out, and resil's policy decides what follows.

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
	if f.nextClient++; f.nextClient == f.clients {
		f.nextClient = 0 // round robin, without a division per intent
	}
	if f.deadline > 0 {
		in.latest = now + f.deadline
	}
	in.in = resil.Intent{Idempotent: true}
	// A draw is in [0, 1): with every intent idempotent it decides nothing.
	if f.idemOnly && f.sc.Traffic.Idempotent < 1 && draw(f.seed, id, 0, drawIdempotent) >= f.sc.Traffic.Idempotent {
		in.in.Idempotent = false
		if f.sc.Traffic.Keys > 0 && draw(f.seed, id, 0, drawKey) < f.sc.Traffic.Keys {
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
		f.refuse(i, now, err)
		return
	}
	f.send(i, now, t, -1)
}

// refuse counts the attempt of intent i the policy refused (err) and ends
// the intent. The callers send when it was not refused themselves: a
// function between them and send would cost a call per attempt.
func (f *fleet) refuse(i int32, now int64, err error) {
	r := resil.ReasonOf(err)
	f.refused(i, now, r)
	f.lose(i, now, r)
}

// paced asks the policy's pacer (the AWS adaptive mode's rate limiter)
// whether intent i may send an attempt now. When it may not, paced
// schedules kind (evSend, evRetry) again after the pacer's wait, or ends
// the intent when the pacer refuses or the wait would pass its deadline,
// and reports true.
func (f *fleet) paced(i int32, now int64, kind eventKind) bool {
	in := &f.ints[i]
	pol := &f.policies[in.client]
	var latest time.Time
	if in.latest > 0 {
		latest = f.vt(in.latest)
	}
	d, err := pol.PaceBefore(f.vt(now), latest)
	if err == nil && d == 0 {
		return false
	}
	if err != nil {
		pol.Abandon(f.vt(now), &in.in)
		in.failed = true
		f.lose(i, now, resil.ReasonOf(err))
		return true
	}
	f.q.push(mkEvent(now+int64(d), i, in.gen, kind, 0), laneHeap)
	return true
}

// send puts one attempt of intent i on the wire. A hedge goes to another
// replica than the attempt it runs beside (avoid), as a load balancer sends
// a hedge elsewhere; other attempts pick a replica at random. chainSend
// (chain.go) is its copy for a chain's hops, kept apart for the one-hop
// run's speed: a change to one belongs in the other.
func (f *fleet) send(i int32, now int64, t resil.Ticket, avoid int32) {
	if f.chain != nil {
		f.chainSend(i, now, t, avoid)
		return
	}
	ai, a := f.newAttempt()
	in := &f.ints[i]
	n := in.sent
	in.sent++
	deadline := now + f.timeout
	if in.latest > 0 {
		deadline = min(deadline, in.latest)
	}
	// Field by field, not a composite: see event.set.
	a.sent, a.deadline, a.ticket, a.intent, a.next = now, deadline, t, i, in.head
	a.req, a.tick, a.replica, a.known, a.flags = -1, -1, 0, false, 0
	in.head = ai
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
	}
	out, mode, noHost := f.env.outage, f.env.mode, false
	if f.replicaState.bal {
		// No healthy replica and no panic mode: refused at once, as
		// Envoy's "no healthy upstream".
		noHost = !f.replicaState.pick(f, a, now, avoid)
	} else if f.replicas > 1 {
		u := draw(f.seed, in.id, int(n), drawReplica)
		if avoid >= 0 {
			a.replica = uint16((avoid + 1 + int32(u*float64(f.replicas-1))) % int32(f.replicas))
		} else {
			a.replica = uint16(u * float64(f.replicas))
		}
	}
	if f.reps != nil {
		f.replicaState.sentTo(a)
		if m := f.env.repOut; m != nil && !out && m[a.replica] != "" {
			out, mode = true, m[a.replica]
		}
	}
	switch {
	case noHost:
		f.rejectAs(f.request(ai, in, n), now, answerNoHost)
	case !out || mode == scenario.OutageStall:
		// A stalled origin takes the attempt into its queue.
		ri := f.request(ai, in, n)
		f.origin[a.replica].Arrive(time.Duration(now), origin.Request(ri))
	case mode == scenario.OutageRefuse && f.inbound.on:
		f.refuseBehind(f.request(ai, in, n), now) // the replica's proxy retries, then answers
	case scenario.Refuses(mode):
		f.refuseConn(f.request(ai, in, n), now) // refused at once: the origin never sees it
	default:
		// A blackhole: nothing answers, the origin never sees it.
	}
	if !a.known {
		f.q.push(mkEvent(a.deadline+1, ai, a.gen, evTimeout, 0), laneTimeout)
	}
	if !f.hedging {
		return
	}
	if d := f.policies[in.client].HedgeDelay(&in.in); d > 0 && now+int64(d) < a.deadline {
		f.q.push(mkEvent(now+int64(d), ai, a.gen, evHedge, 0), laneHedge)
	}
}

// timedOut is attempt a's client giving up on it at now, in a one-hop run
// (a chain's timeouts are evChainTimeout events). The origin keeps its
// request (a queue serves it for nobody) unless it drops expired work.
func (f *fleet) timedOut(a int32, now int64) {
	ri, serving, rep := f.atts[a].req, f.atts[a].flags&attServing != 0, f.atts[a].replica
	f.finish(a, now, resil.OutcomeTimeout)
	if ri < 0 {
		return
	}
	f.reqs.at(ri).att = -1 // a store: no wait for the cold record
	if serving {
		f.origin[rep].Left(time.Duration(now), origin.Request(ri))
	}
}

// receive is the origin's answer to attempt a reaching its client at now;
// aux says what it is (answerOK, answerThrottled, or 0 for an error).
func (f *fleet) receive(ai int32, now int64, aux uint8) {
	a := &f.atts[ai]
	a.req = -1
	if aux != answerNoHost && ((f.env.outage && f.env.mode == scenario.OutageBlackhole) || (f.env.repOut != nil && f.env.repOut[a.replica] == scenario.OutageBlackhole)) {
		// The answer is lost: the client will time out.
		if a.known {
			a.known = false
			f.q.push(mkEvent(max(now, a.deadline+1), ai, a.gen, f.timeoutKind(), 0), laneTimeout)
		}
		return
	}
	o := kindOfAnswer(aux)
	if o == resil.OutcomeSuccess && a.tick >= 0 {
		f.oticks[a.tick].goodput++
	}
	if f.chain != nil {
		f.chainFinish(ai, now, o)
		return
	}
	f.finish(ai, now, o)
}

// finish ends attempt ai on the client's side with outcome o (or
// outcomeRefused), frees it, and decides what the intent does next. A
// chain's attempts go to chainFinish instead, its copy for every hop (see
// chain.go: a change to one belongs in the other): the callers choose, so
// that a one-hop attempt pays one branch for the chain on its way here,
// not two.
func (f *fleet) finish(ai int32, now int64, kind resil.Outcome) {
	o := policyOutcome(kind)
	a := &f.atts[ai]
	i, tick := a.intent, a.tick
	in := &f.ints[i]
	f.unlink(in, ai)
	if f.reps != nil {
		f.replicaState.ended(f, a, now, kind)
	}
	pol := &f.policies[in.client]
	pol.End(f.vt(now), &in.in, a.ticket, o, time.Duration(now-a.sent))
	f.freeAttempt(ai)
	if o == resil.OutcomeSuccess {
		f.lat.add(now - in.arrival)
		f.cancelOthers(in, f.ownReplicas(), pol, now) // the other attempts lost the race
		f.endIntent(i)
		return
	}
	if tick >= 0 {
		f.ticks[tick].failed++
		if o == resil.OutcomeTimeout {
			f.sum.Timeouts++
		}
	}
	in.failed = true
	if in.inflight > 0 {
		if f.retryOn[kind] || kind == resil.OutcomeTimeout {
			return // a hedge is still out: it may yet succeed
		}
		// A failure not to retry ends the intent and cancels the hedges
		// still out, as resil's hedging round does (and gRFC A6 for a
		// fatal status); the Guard's own timeout never does.
		f.cancelOthers(in, f.ownReplicas(), pol, now)
	}
	if !f.retryOn[kind] {
		// Not a failure the fleet retries: the classifier's call, made
		// before the policy is asked, as in resil's Guard (counted with
		// retries exhausted, as LostBy counts a stop it has no column for).
		f.lose(i, now, resil.StopNotRetryable)
		return
	}
	var latest time.Time
	if in.latest > 0 {
		latest = f.vt(in.latest)
	}
	d, err := pol.Retry(f.vt(now), &in.in, o, 0, latest, f.jitter)
	if err != nil {
		r := resil.ReasonOf(err)
		if r == resil.StopBudget {
			f.sum.BudgetDenials++
		}
		f.lose(i, now, r)
		return
	}
	f.q.push(mkEvent(now+int64(d), i, in.gen, evRetry, 0), retryLane(in.sent))
}

// resume sends intent i's retry at the end of its backoff.
func (f *fleet) resume(i int32, now int64) {
	in := &f.ints[i]
	if f.policies[in.client].Pacer != nil && f.paced(i, now, evRetry) {
		return
	}
	t, err := f.policies[in.client].Resume(f.vt(now), &in.in)
	if err != nil {
		f.refuse(i, now, err)
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
		if resil.ReasonOf(err) == resil.StopBudget && !in.late {
			_, sum := f.counts(in.hop)
			sum.BudgetDenials++
		}
		return // a refused hedge is no loss: the attempt is still out
	}
	f.send(i, now, t, int32(f.atts[a].replica))
}

// refused counts an attempt the breaker, or the adaptive throttle
// (resil.StopThrottled), refused, and draws its ground truth: would it
// have succeeded had it been sent? The draw changes nothing in the origin.
func (f *fleet) refused(i int32, now int64, why resil.StopReason) {
	in := &f.ints[i]
	n := int(in.sent)
	in.sent++
	in.failed = true
	ticks, sum := f.counts(in.hop)
	k := f.tickOf(now)
	switch {
	case k < 0:
		return
	case why == resil.StopThrottled:
		ticks[k].throttled++
		sum.ThrottleRefusals++
	default:
		ticks[k].refused++
		sum.BreakerRefusals++
	}
	if f.env.outage || in.broken {
		return
	}
	if f.env.errRate > 0 && draw(f.seed, in.id, n, drawError) < f.env.errRate {
		return
	}
	if f.env.rejRate > 0 && draw(f.seed, in.id, n, drawError) < 1-(1-f.env.errRate)*(1-f.env.rejRate) {
		return
	}
	timeout := f.timeout
	if in.hop > 0 {
		timeout = f.chain.hops[in.hop].timeout
	}
	if in.latest > 0 {
		timeout = min(timeout, in.latest-now)
	}
	if in.hop != f.last {
		// Every tier from the one refused down would serve in time, each
		// within its caller's timeout, and then the origin.
		ok, left := f.tierTruth(in.hop, in.id, n, now, timeout)
		if !ok {
			return
		}
		timeout = left
	}
	r := 0
	if f.replicas > 1 {
		r = int(draw(f.seed, in.id, n, drawReplica) * float64(f.replicas))
	}
	if f.env.repOut != nil && (f.env.repOut[r] != "" || (f.env.repErr[r] > 0 && draw(f.seed, in.id, n, drawError) < f.env.repErr[r])) {
		return // the replica it would have reached is down or failing
	}
	if f.origin[r].WouldAnswer(time.Duration(now), time.Duration(timeout)) {
		sum.AnswersThrownAway++
	}
}

// lose ends intent i at now without success: resil stopped it for reason
// r. A tier's call tells the request it serves.
func (f *fleet) lose(i int32, now int64, r resil.StopReason) {
	in := &f.ints[i]
	if in.hop > 0 {
		f.loseCall(in, now, r)
	} else {
		f.sum.IntentsLost++
		f.sum.LostBy.Add(r)
	}
	f.endIntent(i)
}

// endIntent ends intent i, won or lost. A tier's call must have told the
// request it serves first (see callEnded).
func (f *fleet) endIntent(i int32) {
	in := &f.ints[i]
	if in.failed && in.afterClear && in.hop == 0 {
		f.sum.Victims++
	}
	in.free = true
	in.gen++
	f.freeI = append(f.freeI, i)
	f.live--
}

// finishUnfinished ends the intents still open when the drain limit hit.
func (f *fleet) finishUnfinished() {
	f.draining = true // nothing answers after the run
	for i := range f.ints {
		if in := &f.ints[i]; !in.free {
			if _, sum := f.counts(in.hop); !in.late {
				sum.IntentsLost++
				sum.LostBy.Unfinished++
			}
			if in.hop > 0 {
				f.callEnded(in, false, 0) // counts it; nobody is answered
			}
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

// newAttempt returns a free attempt slot: the caller sets every field but
// gen.
func (f *fleet) newAttempt() (int32, *attempt) {
	if n := len(f.freeA); n > 0 {
		a := f.freeA[n-1]
		f.freeA = f.freeA[:n-1]
		return a, &f.atts[a]
	}
	f.atts = append(f.atts, attempt{gen: 1})
	a := int32(len(f.atts) - 1)
	return a, &f.atts[a]
}

// freeAttempt frees attempt a's slot: its client is done with it. Its
// fields stay readable until the slot is taken again.
func (f *fleet) freeAttempt(a int32) {
	f.atts[a].gen++
	f.freeA = append(f.freeA, a)
}
