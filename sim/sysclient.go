package sim

import (
	"time"

	"github.com/retrystorm/retrystorm/resil"
)

// The callers' side of the system engine: intents (a fleet's, or a
// layer's call to the next), their attempts, and resil's policy deciding
// what follows each. It is client.go's logic for every caller group, less
// hedging, which the system engine does not simulate (scenario refuses it).

// sintent is one intent: a fleet's, or a call a tier or a cache makes to
// the next layer for one of its requests (parent).
type sintent struct {
	in       resil.Intent
	id       uint64 // its own draws (replica, errors)
	root     uint64 // the fleet's intent it serves: its key, idempotency and broken share
	arrival  int64
	latest   int64 // the caller's deadline; 0 = none
	policy   int32
	group    int32
	head     int32 // its attempt in flight, or -1
	sent     int32 // attempts numbered so far, sent or refused
	parent   int32 // the tier request or the cache fill it serves; -1 for a fleet's
	client   int32 // a fleet's: its client
	gen      uint32
	failed   bool
	after    bool // arrived after the triggers ended
	late     bool // a call begun after the run: followed, counted nowhere
	free     bool
	broken   bool
	fromFill bool // a cache's fill (parent is a fill), not a tier's call
}

// Where an attempt waits.
const (
	atNone    uint8 = iota // nowhere: blackholed, or answered
	atPool                 // for a connection of its caller's pool
	atServer               // at a tier's or the origin's server (req)
	atCache                // for a cache's fill (fill)
	atRefused              // for its full pool's refusal
)

// sattempt is one attempt of an intent, as its caller sees it.
type sattempt struct {
	sent     int64
	deadline int64
	ticket   resil.Ticket
	intent   int32
	req      int32 // its server request (atServer) or fill (atCache), or -1
	tick     int32 // the tick it was sent in, -1 after the run
	n        int32 // its number within its intent, for the draws
	gen      uint32
	replica  uint16
	where    uint8
	conn     bool // it holds a connection of its caller's pool
	picked   bool // its group's picker chose its replica, and is owed a Done
	poolWait bool // it waited for a connection
}

// start sends intent i's first attempt, once the policy's pacer allows.
func (s *system) start(i int32, now int64) {
	pol := &s.policies[s.ints[i].policy]
	if pol.Pacer != nil && s.paced(i, now, sysSend) {
		return
	}
	t, err := pol.Begin(s.vt(now), &s.ints[i].in)
	if err != nil {
		s.refuse(i, now, err)
		return
	}
	s.send(i, now, t)
}

// resume sends intent i's retry at the end of its backoff.
func (s *system) resume(i int32, now int64) {
	pol := &s.policies[s.ints[i].policy]
	if pol.Pacer != nil && s.paced(i, now, sysRetry) {
		return
	}
	t, err := pol.Resume(s.vt(now), &s.ints[i].in)
	if err != nil {
		s.refuse(i, now, err)
		return
	}
	s.send(i, now, t)
}

// paced asks the policy's pacer whether intent i may send now; when not,
// it schedules kind again after the wait, or ends the intent, and reports
// true.
func (s *system) paced(i int32, now int64, kind eventKind) bool {
	in := &s.ints[i]
	pol := &s.policies[in.policy]
	var latest time.Time
	if in.latest > 0 {
		latest = s.vt(in.latest)
	}
	d, err := pol.PaceBefore(s.vt(now), latest)
	switch {
	case err == nil && d == 0:
		return false
	case err != nil:
		pol.Abandon(s.vt(now), &in.in)
		in.failed = true
		s.lose(i, now, resil.ReasonOf(err))
	default:
		s.q.push(mkEvent(now+int64(d), i, in.gen, kind, 0), laneHeap)
	}
	return true
}

// refuse counts the attempt of intent i the policy refused (err), draws
// its ground truth, and ends the intent.
func (s *system) refuse(i int32, now int64, err error) {
	r := resil.ReasonOf(err)
	in := &s.ints[i]
	n := in.sent
	in.sent++
	in.failed = true
	g := &s.groups[in.group]
	if k := s.tickOf(now); k >= 0 {
		if r == resil.StopThrottled {
			g.ticks[k].throttled++
			g.sum.ThrottleRefusals++
		} else {
			g.ticks[k].refused++
			g.sum.BreakerRefusals++
		}
		if s.wouldAnswer(in, n, now) {
			g.sum.AnswersThrownAway++
		}
	}
	s.lose(i, now, r)
}

// send puts one attempt of intent i on its way: through its caller's
// pool, if it has one, to the layer its group calls.
func (s *system) send(i int32, now int64, t resil.Ticket) {
	ai := s.newAttempt()
	a := &s.atts[ai]
	in := &s.ints[i]
	g := &s.groups[in.group]
	deadline := now + g.timeout
	if in.latest > 0 {
		deadline = min(deadline, in.latest)
	}
	a.sent, a.deadline, a.ticket, a.intent, a.req, a.tick = now, deadline, t, i, -1, -1
	a.replica, a.where, a.conn, a.picked, a.poolWait = 0, atNone, false, false, false
	in.head = ai
	a.n = in.sent
	in.sent++
	if k := s.tickOf(now); k >= 0 {
		a.tick = k
		c := &g.ticks[k]
		c.offered++
		if t.Kind() == resil.KindRetry {
			c.retries++
		} else {
			c.first++
		}
	}
	s.q.push(mkEvent(deadline+1, ai, a.gen, sysTimeout, 0), laneTimeout)
	if g.pool.On() {
		s.acquire(ai, now)
		return
	}
	s.deliver(ai, a.n, now)
}

// deliver takes attempt ai (the n-th of its intent) to the layer its
// group calls, unless the link is cut: then it vanishes, and its client
// will time out.
func (s *system) deliver(ai int32, n int32, now int64) {
	a := &s.atts[ai]
	in := &s.ints[a.intent]
	g := &s.groups[in.group]
	if s.partitioned(int(in.group), now) {
		return
	}
	l := &s.layers[g.to]
	if l.cache != nil {
		s.lookup(l, ai, now)
		return
	}
	if !s.pickReplica(g, a, in, n, now) {
		s.answerAt(ai, now+rejectDelay, answerRefused) // no healthy upstream
		return
	}
	s.arrive(l, ai, n, now)
}

// answerAt answers attempt ai at at with aux, as a cache or a pool does.
func (s *system) answerAt(ai int32, at int64, aux uint8) {
	a := &s.atts[ai]
	s.q.push(mkEvent(at, ai, a.gen, sysDeliver, aux), laneReject)
}

// delivered is an answer that is not a server's reaching attempt ai: a
// success counts where it reaches its caller.
func (s *system) delivered(ai int32, now int64, aux uint8) {
	a := &s.atts[ai]
	if aux == answerOK && a.tick >= 0 {
		s.groups[s.ints[a.intent].group].ticks[a.tick].successes++
	}
	if aux == answerLocal {
		s.refused(ai)
	}
	s.receive(ai, now, aux)
}

// receive is an answer aux reaching attempt ai at now, unless its link is
// cut: then it is lost, and the client will time out.
func (s *system) receive(ai int32, now int64, aux uint8) {
	a := &s.atts[ai]
	in := &s.ints[a.intent]
	a.where, a.req = atNone, -1
	if aux != answerLocal && s.partitioned(int(in.group), now) {
		return
	}
	o := resil.OutcomeFailure
	switch aux {
	case answerThrottled, answerLocal:
		o = resil.OutcomeThrottled
	case answerRefused:
		o = outcomeRefused
	case answerOK:
		o = resil.OutcomeSuccess
		if a.tick >= 0 {
			s.groups[in.group].ticks[a.tick].goodput++
		}
	}
	s.finish(ai, now, o)
}

// timedOut is attempt ai's client giving up on it at now.
func (s *system) timedOut(ai int32, now int64) {
	s.leave(ai, now)
	s.finish(ai, now, resil.OutcomeTimeout)
}

// leave tells whoever holds attempt ai that its client no longer waits.
func (s *system) leave(ai int32, now int64) {
	a := &s.atts[ai]
	switch a.where {
	case atPool, atRefused:
		s.abandonWait(ai)
	case atServer:
		s.left(a.req, now)
	case atCache:
		s.unwait(ai)
	}
	a.where, a.req = atNone, -1
}

// finish ends attempt ai on its client's side with outcome kind, frees it
// and its connection, and decides what its intent does next.
func (s *system) finish(ai int32, now int64, kind resil.Outcome) {
	o := policyOutcome(kind)
	a := &s.atts[ai]
	i, tick := a.intent, a.tick
	in := &s.ints[i]
	g := &s.groups[in.group]
	in.head = -1
	if a.picked {
		g.picker.done(s, a, now, kind)
	}
	pol := &s.policies[in.policy]
	pol.End(s.vt(now), &in.in, a.ticket, o, time.Duration(now-a.sent))
	s.release(ai, now)
	s.freeAttempt(ai)
	if o == resil.OutcomeSuccess {
		if g.lat != nil {
			g.lat.add(now - in.arrival)
		}
		s.won(i, now)
		return
	}
	if tick >= 0 {
		g.ticks[tick].failed++
		if o == resil.OutcomeTimeout {
			g.sum.Timeouts++
		}
	}
	in.failed = true
	if !g.retryOn[kind] {
		s.lose(i, now, resil.StopNotRetryable)
		return
	}
	var latest time.Time
	if in.latest > 0 {
		latest = s.vt(in.latest)
	}
	d, err := pol.Retry(s.vt(now), &in.in, o, 0, latest, g.jitter)
	if err != nil {
		r := resil.ReasonOf(err)
		if r == resil.StopBudget && !in.late {
			g.sum.BudgetDenials++
		}
		s.lose(i, now, r)
		return
	}
	s.q.push(mkEvent(now+int64(d), i, in.gen, sysRetry, 0), retryLane(in.sent))
}

// won ends intent i with success at now.
func (s *system) won(i int32, now int64) {
	if in := &s.ints[i]; in.parent >= 0 {
		s.callEnded(in, true, now)
	}
	s.endIntent(i, now)
}

// lose ends intent i at now without success: resil stopped it for r.
func (s *system) lose(i int32, now int64, r resil.StopReason) {
	in := &s.ints[i]
	if !in.late {
		sum := &s.groups[in.group].sum
		sum.IntentsLost++
		sum.LostBy.Add(r)
	}
	if in.parent >= 0 {
		s.callEnded(in, false, now)
	}
	s.endIntent(i, now)
}

// endIntent frees intent i, won or lost; a closed-loop client thinks and
// comes back.
func (s *system) endIntent(i int32, now int64) {
	in := &s.ints[i]
	g := &s.groups[in.group]
	if in.failed && in.after && !in.late {
		g.sum.Victims++
	}
	if in.parent < 0 && !s.draining {
		s.fleets[in.group].ended(s, in.client, now)
	}
	in.free = true
	in.gen++
	s.freeI = append(s.freeI, i)
	s.live--
}

// cancel ends intent j (of generation gen), a call whose request was
// given up: its attempt in flight is abandoned, and it is lost, cancelled.
func (s *system) cancel(j int32, gen uint32, now int64) {
	in := &s.ints[j]
	if in.gen != gen || in.free {
		return
	}
	if ai := in.head; ai >= 0 {
		a := &s.atts[ai]
		if a.picked {
			s.groups[in.group].picker.done(s, a, now, resil.OutcomeIgnored)
		}
		s.policies[in.policy].End(s.vt(now), &in.in, a.ticket, resil.OutcomeIgnored, time.Duration(now-a.sent))
		s.leave(ai, now)
		s.release(ai, now)
		s.freeAttempt(ai)
		in.head = -1
	}
	s.lose(j, now, resil.StopCanceled)
}

// finishUnfinished ends what is still open when the drain ends: nothing
// answers any more.
func (s *system) finishUnfinished() {
	s.draining = true
	for i := range s.ints {
		in := &s.ints[i]
		if in.free {
			continue
		}
		if !in.late {
			sum := &s.groups[in.group].sum
			sum.IntentsLost++
			sum.LostBy.Unfinished++
		}
		if ai := in.head; ai >= 0 {
			s.leave(ai, s.end)
		}
		s.endIntent(int32(i), s.end)
	}
}

func (s *system) newIntent() int32 {
	s.live++
	i := slot(&s.ints, &s.freeI, sintent{gen: 1})
	s.ints[i] = sintent{gen: s.ints[i].gen, head: -1, parent: -1}
	return i
}

func (s *system) newAttempt() int32 { return slot(&s.atts, &s.freeA, sattempt{gen: 1}) }

// freeAttempt frees attempt a's slot: its fields stay readable until the
// slot is taken again.
func (s *system) freeAttempt(a int32) {
	s.atts[a].gen++
	s.freeA = append(s.freeA, a)
}
