package sim

import (
	"fmt"
	"time"

	"github.com/retrystorm/retrystorm/giveup"
	"github.com/retrystorm/retrystorm/origin"
	"github.com/retrystorm/retrystorm/resil"
	"github.com/retrystorm/retrystorm/scenario"
)

// A chain of tiers (scenario.Tier) between a fleet and its origin. Layers
// are numbered from the fleet: layer l < last is tier l's server, layer
// last the origin. Hop h is the calls into layer h: the fleet's intents for
// hop 0, tier h-1's calls otherwise. An intent's hop says whose it is and
// where its attempts go. An attempt sent to a tier becomes a tier request
// (treq): the tier's server model holds it for the tier's own work, then
// the tier calls the next layer for it (a new intent of hop l+1, under one
// of the tier's policies), still holding its worker; the call's end answers
// the request. The origin's side is unchanged: requests in f.reqs.
//
// Without tiers f.chain is nil, every intent's hop is 0 and last is 0: the
// code below is not reached, and the one-hop run pays a predicted branch
// here and there.

// chain is a run's tiers: their servers, their requests, and what each hop
// counts.
type chain struct {
	hops   []hopState       // by hop; hops[0] is unused (the fleet's are f's own)
	layers [][]origin.Model // the tiers' servers, by layer and replica
	reqs   []treq
	free   []int32
	// rs is, by hop past the first, the calling tier's picker and
	// detector over the layer it calls, and that layer's ground truth per
	// replica (reps nil when kept for none); kept says whether any hop,
	// the fleet's included, keeps one. Apart from hops, and behind one
	// flag, so that a chain without replicas pays a branch per attempt.
	rs   []replicaState
	kept bool
}

// hopState is one hop past the first: who calls (a tier's client: its
// policies in f.policies from base, one per replica of the tier) and what
// it counted.
type hopState struct {
	base      int32 // the first of its policies in f.policies
	timeout   int64
	deadline  int64 // per call, from the call's start; 0 = none
	idemOnly  bool
	hedging   bool
	propagate bool // the calling tier propagates its callers' deadlines
	retryOn   [nKinds]bool
	// answers is the aux the calling tier answers its own caller with
	// when its call fails, by the call's last failure kind (a success:
	// no attempt answered), as its product does (package giveup).
	answers [nKinds]uint8
	// The calling tier's own answers: its error share and broken keys.
	errRate, broken float64

	ticks []tickCounts
	sum   Summary
	s     Series
}

// treq is an attempt as a tier's server sees it, from its arrival to the
// tier's answer (or to the end of its work for nobody).
type treq struct {
	root     uint64 // the fleet's intent it serves, for the draws of its facts
	deadline int64  // its caller's deadline
	att      int32  // the attempt waiting for it, or -1 once its caller stopped waiting
	call     int32  // the call the tier makes for it, while calling
	cgen     uint32 // that call's generation
	gen      uint32
	n        int32 // the attempt's number, for the draws
	tick     int32 // the tick it was sent in, -1 after the run
	replica  uint16
	layer    uint8
	serving  bool // a worker holds it (queue and concurrency models)
	calling  bool // the tier's call for it is out
	uncalled bool // that call was cancelled: the tier answers nobody
	blind    bool // its caller does not propagate deadlines: the tier does not know its deadline
	broken   bool // its key is broken at the origin
}

// Events of a chain's tiers.
const (
	evTierWork     eventKind = iota + evSend + 1 // a tier's own work for a request is over: its call begins
	evTierReply                                  // a tier's reply reaches its caller (aux: answerOK, answerThrottled or 0)
	evChainTimeout                               // evTimeout in a chain: its own kind keeps the chain's branch off the one-hop timeout
)

// newChain builds the tiers' callers and servers, and adds their policies
// to f.policies (after the fleet's clients'), for fleet idx. The origin
// must be built.
func (f *fleet) newChain(idx int) error {
	sc := f.sc
	n := len(sc.Tiers)
	c := &chain{hops: make([]hopState, n+1), layers: make([][]origin.Model, n), rs: make([]replicaState, n+1), kept: f.reps != nil}
	f.chain, f.last = c, uint8(n)
	for l := range sc.Tiers {
		t := &sc.Tiers[l]
		replicas := max(t.Server.Replicas, 1)
		h := &c.hops[l+1]
		h.base = int32(len(f.policies))
		for range replicas {
			p, err := t.NewPolicy()
			if err != nil {
				return err
			}
			f.policies = append(f.policies, p)
		}
		cl := &t.Client
		h.timeout, h.deadline = int64(cl.Timeout), int64(cl.Deadline)
		h.idemOnly, h.hedging, h.propagate = cl.Retry.IdempotentOnly, cl.Hedge.Delay > 0, cl.PropagateDeadline
		h.retryOn = retryTable(&cl.Retry, cl.Product)
		caller := f.cfg.Calls // the tier's callers: the fleet, or the tier above
		if l > 0 {
			caller = sc.Tiers[l-1].Client.Calls
		}
		for k := range h.answers {
			h.answers[k] = answerOf(giveup.Of(giveup.Product(cl.Product), kindWords[k], caller.GRPC()).Kind)
		}
		if l+1 == n {
			f.inbound = newInbound(cl.Calls)
		}
		h.errRate, h.broken = t.Server.ErrorRate, t.Server.Broken
		h.ticks = make([]tickCounts, f.nTicks)
		h.s = newSeries(f.nTicks)
		d := &tierDriver{f: f, layer: uint8(l)}
		ms := make([]origin.Model, replicas)
		for r := range ms {
			m, err := origin.NewWith(&t.Server, r, replicas, d, origin.Options{Rand: serviceRand(f.seed, &t.Server, l+1, r)})
			if err != nil {
				return err
			}
			ms[r] = m
		}
		c.layers[l] = ms
		// The tier picks among the next layer's replicas with its own
		// picker and detector, if it has them; the origin's ground truth
		// is kept when a replica is named, as in a one-hop run.
		if cl.Balancer.Use != "" || cl.OutlierDetection.Detects() || (l+1 == n && sc.NamesReplicas()) {
			next := f.replicas
			if l+1 < n {
				next = max(sc.Tiers[l+1].Server.Replicas, 1)
			}
			if err := c.rs[l+1].init(f, next, replicas, h.base, &cl.Balancer, &cl.OutlierDetection, uint64(idx)|uint64(l+1)<<24); err != nil {
				return fmt.Errorf("tier %q: %w", t.Name, err)
			}
			c.kept = true
		}
	}
	// The origin's answers count in the last hop.
	f.oticks, f.osum = c.hops[n].ticks, &c.hops[n].sum
	return nil
}

// hopReplicas returns hop h's picker, detector and ground truth per
// replica (the fleet's own for hop 0), or nil when it keeps none.
func (f *fleet) hopReplicas(h uint8) *replicaState {
	rs := &f.replicaState
	if h > 0 {
		rs = &f.chain.rs[h]
	}
	if rs.reps == nil {
		return nil
	}
	return rs
}

// counts returns what hop h counts in: the fleet's own for hop 0.
func (f *fleet) counts(h uint8) ([]tickCounts, *Summary) {
	if h == 0 {
		return f.ticks, &f.sum
	}
	s := &f.chain.hops[h]
	return s.ticks, &s.sum
}

// at returns tier request r.
func (c *chain) at(r int32) *treq { return &c.reqs[r] }

// take returns a free tier request slot: the caller sets every field but
// gen.
func (c *chain) take() (int32, *treq) {
	if n := len(c.free); n > 0 {
		r := c.free[n-1]
		c.free = c.free[:n-1]
		return r, &c.reqs[r]
	}
	c.reqs = append(c.reqs, treq{gen: 1})
	r := int32(len(c.reqs) - 1)
	return r, &c.reqs[r]
}

// release frees tier request r: the tier is done with it.
func (c *chain) release(r int32) {
	c.reqs[r].gen++
	c.free = append(c.free, r)
}

// sendTier puts attempt ai of intent i, of number n, on a tier's server at
// now: the tier of layer i's hop, at the replica chosen (a.replica). With
// noHost the caller's picker found no replica: refused at once, as
// Envoy's "no healthy upstream", and the server never sees it.
func (f *fleet) sendTier(i, ai int32, n int32, now int64, noHost bool) {
	c := f.chain
	in := &f.ints[i]
	l := in.hop
	servers := c.layers[l]
	a := &f.atts[ai]
	root := in.id
	if l > 0 {
		root = c.at(in.parent).root
	}
	r, x := c.take()
	*x = treq{
		root: root, deadline: a.deadline, att: ai, gen: x.gen, n: n, tick: a.tick,
		replica: a.replica, layer: l, blind: l > 0 && !c.hops[l].propagate, broken: in.broken,
	}
	a.req = r
	if noHost {
		f.q.push(mkEvent(now+rejectDelay, r, x.gen, evTierReply, answerNoHost), laneReject)
		return
	}
	servers[a.replica].Arrive(time.Duration(now), origin.Request(r))
}

// tierDriver is the fleet as the driver of one tier's servers: an
// origin.Request is a tier request's slot.
type tierDriver struct {
	f     *fleet
	layer uint8
}

// Answer: a capacity model admitted the request, and its latency is the
// tier's own work; then the tier calls.
func (d *tierDriver) Answer(r origin.Request, at time.Duration) {
	x := d.f.chain.at(int32(r))
	d.f.q.push(mkEvent(int64(at), int32(r), x.gen, evTierWork, 0), laneAnswer)
}

// Serve: a worker holds the request for the tier's own work until end, and
// then for its call.
func (d *tierDriver) Serve(r origin.Request, _, end time.Duration) {
	x := d.f.chain.at(int32(r))
	x.serving = true
	d.f.q.push(mkEvent(int64(end), int32(r), x.gen, evTierWork, 0), laneComplete)
}

// Reject answers the request with an overload rejection, as the origin
// does.
func (d *tierDriver) Reject(r origin.Request, now time.Duration) {
	x := d.f.chain.at(int32(r))
	d.f.q.push(mkEvent(int64(now)+rejectDelay, int32(r), x.gen, evTierReply, answerThrottled), laneReject)
}

// Drop is a drop_expired tier letting the request go, skipped in its queue
// or stopped in service: its call, if out, is cancelled, and no answer
// comes.
func (d *tierDriver) Drop(r origin.Request, now time.Duration) {
	f := d.f
	c := f.chain
	x := c.at(int32(r))
	x.serving = false
	if x.calling && !x.uncalled {
		x.uncalled = true
		call, cgen := x.call, x.cgen
		f.cancelCall(call, cgen, int64(now))
		x = c.at(int32(r))
	}
	if _, sum := f.counts(x.layer); x.tick >= 0 {
		sum.Dropped++
	}
	if x.att >= 0 {
		f.atts[x.att].req = -1 // its client will time out
	}
	c.release(int32(r))
}

// Deadline is the request's deadline, if its caller propagated it (the
// fleet always does, a tier when it propagates deadlines); its caller is
// gone once it no longer waits.
func (d *tierDriver) Deadline(r origin.Request) (time.Duration, bool, bool) {
	x := d.f.chain.at(int32(r))
	return time.Duration(x.deadline), !x.blind, x.att < 0
}

// tierEvent handles the events of a chain's tiers.
func (f *fleet) tierEvent(e *event) {
	if e.kind() == evChainTimeout {
		if f.atts[e.ref()].gen == e.gen() {
			f.chainTimedOut(e.ref(), e.at)
		}
		return
	}
	if f.chain.at(e.ref()).gen != e.gen() {
		return
	}
	switch e.kind() {
	case evTierWork:
		f.tierWork(e.ref(), e.at)
	case evTierReply:
		f.tierReply(e.ref(), e.at, e.aux())
	}
}

// tierWork begins the call the tier makes for request r, its own work
// being over; or, when r's caller has left and the tier propagates
// deadlines, ends its service: there is nobody to call for.
func (f *fleet) tierWork(r int32, now int64) {
	c := f.chain
	x := c.at(r)
	l := x.layer
	h := &c.hops[l+1]
	if x.att < 0 && h.propagate {
		f.endService(r, now)
		return
	}
	j := f.newIntent()
	x = c.at(r)
	in := &f.ints[j]
	in.hop, in.parent = l+1, r
	// The call's own draws (replicas, errors) are its own; the facts of
	// the fleet's intent (its key's idempotency, brokenness) carry over.
	in.id = mix(x.root ^ uint64(l+1)<<56 ^ uint64(uint32(x.n))<<24 ^ uint64(r))
	in.arrival = now
	in.client = h.base + int32(x.replica)
	if h.deadline > 0 {
		in.latest = now + h.deadline
	}
	if h.propagate && !x.blind && (in.latest == 0 || x.deadline < in.latest) {
		in.latest = x.deadline
	}
	in.in = resil.Intent{Idempotent: true}
	if h.idemOnly && f.sc.Traffic.Idempotent < 1 && draw(f.seed, x.root, 0, drawIdempotent) >= f.sc.Traffic.Idempotent {
		in.in.Idempotent = false
		if f.sc.Traffic.Keys > 0 && draw(f.seed, x.root, 0, drawKey) < f.sc.Traffic.Keys {
			in.in.Key = "key"
		}
	}
	in.broken = x.broken
	in.afterClear = f.hasClear && now >= f.clearAt
	if k := f.tickOf(now); k >= 0 {
		h.ticks[k].intents++
	} else {
		in.late = true
	}
	x.calling, x.call, x.cgen = true, j, in.gen
	f.start(j, now)
}

// callEnded is tier call in ending at now, won (ok) or lost: the request
// it serves is answered when the event comes, in time order (after the
// run, nobody is). The tier's own error share and broken keys may fail a
// call that succeeded.
func (f *fleet) callEnded(in *intent, ok bool, now int64) {
	c := f.chain
	h := &c.hops[in.hop]
	if in.failed && in.afterClear && !in.late {
		h.sum.Victims++
	}
	if f.draining {
		return
	}
	x := c.at(in.parent)
	x.calling = false
	aux := uint8(answerOK)
	switch {
	case !ok:
		// The tier gives up and answers as its product does, by the
		// last failure its call met (package giveup).
		aux = h.answers[in.last]
	case h.broken > 0 && draw(f.seed, x.root, int(in.hop), drawBroken) < h.broken,
		h.errRate > 0 && draw(f.seed, x.root, int(x.n)+int(in.hop)<<20, drawError) < h.errRate:
		aux = 0 // the call succeeded; the tier's own work failed: an error answer
	}
	f.q.push(mkEvent(now, in.parent, x.gen, evTierReply, aux), laneAnswer)
}

// tierReply is tier request r's answer reaching its caller at now (aux:
// answerOK, or a failure's: see kindOfAnswer), then its worker is free. A
// request whose call was cancelled answers nobody.
func (f *fleet) tierReply(r int32, now int64, aux uint8) {
	c := f.chain
	x := c.at(r)
	if x.uncalled {
		f.endService(r, now)
		return
	}
	ticks, sum := f.counts(x.layer)
	if aux == answerOK && x.tick >= 0 {
		ticks[x.tick].successes++
	}
	serving, l, rep, ai, counted := x.serving, x.layer, x.replica, x.att, x.tick >= 0
	x.serving = false
	c.release(r)
	if ai < 0 {
		if counted {
			sum.WastedWork++
		}
	} else {
		a := &f.atts[ai]
		a.req = -1
		o := kindOfAnswer(aux)
		if o == resil.OutcomeSuccess && a.tick >= 0 {
			ticks[a.tick].goodput++
		}
		f.chainFinish(ai, now, o)
	}
	if serving {
		c.layers[l][rep].Done(time.Duration(now), origin.Request(r))
	}
}

// endService ends request r's service at its tier without an answer: its
// caller has left and the work stopped with it.
func (f *fleet) endService(r int32, now int64) {
	c := f.chain
	x := c.at(r)
	l, rep, serving := x.layer, x.replica, x.serving
	x.serving = false
	c.release(r)
	if serving {
		c.layers[l][rep].Done(time.Duration(now), origin.Request(r))
	}
}

// tierLeft is the caller of tier request r giving up on it at now (timed
// out, or another attempt won). A tier that propagates deadlines stops: its
// server hears it (a drop_expired queue drops it) and its call is
// cancelled. One that does not works on for nobody.
func (f *fleet) tierLeft(r int32, now int64) {
	c := f.chain
	x := c.at(r)
	x.att = -1
	if !c.hops[x.layer+1].propagate {
		return
	}
	gen := x.gen
	if x.serving {
		c.layers[x.layer][x.replica].Left(time.Duration(now), origin.Request(r))
		x = c.at(r)
	}
	if x.gen != gen || !x.calling || x.uncalled {
		return
	}
	x.uncalled = true
	f.cancelCall(x.call, x.cgen, now)
}

// cancelCall ends tier call j (of generation gen) because the request it
// serves was given up: its attempts in flight are abandoned (their servers
// see their client leave), it retries no more, and it is lost, cancelled.
func (f *fleet) cancelCall(j int32, gen uint32, now int64) {
	in := &f.ints[j]
	if in.gen != gen || in.free {
		return
	}
	pol := &f.policies[in.client]
	var rs *replicaState
	if f.chain.kept {
		rs = f.hopReplicas(in.hop)
	}
	for in.head >= 0 {
		h := in.head
		f.unlink(in, h)
		a := &f.atts[h]
		if rs != nil {
			rs.ended(f, a, now, resil.OutcomeIgnored)
		}
		pol.End(f.vt(now), &in.in, a.ticket, resil.OutcomeIgnored, time.Duration(now-a.sent))
		ri := a.req
		f.freeAttempt(h)
		if ri >= 0 {
			f.abandon(in.hop, ri, now)
		}
	}
	f.lose(j, now, resil.StopCanceled)
}

// abandon tells the server of request ri, sent by an intent of hop h, that
// its client stopped waiting at now.
func (f *fleet) abandon(h uint8, ri int32, now int64) {
	if h != f.last {
		f.tierLeft(ri, now)
		return
	}
	x := f.reqs.at(ri)
	x.att = -1
	if x.serving {
		f.origin[x.replica].Left(time.Duration(now), origin.Request(ri))
	}
}

// tierTruth reports whether the tiers from layer l down would each serve a
// request arriving now within the time its caller allows (timeout, then
// each tier's), and returns the time left for the origin.
func (f *fleet) tierTruth(l uint8, id uint64, n int, now, timeout int64) (bool, int64) {
	c := f.chain
	for ; l < f.last; l++ {
		servers := c.layers[l]
		r := 0
		if len(servers) > 1 {
			r = int(draw(f.seed, id, n+int(l)<<20, drawReplica) * float64(len(servers)))
		}
		if !servers[r].WouldAnswer(time.Duration(now), time.Duration(timeout)) {
			return false, 0
		}
		timeout = min(timeout, c.hops[l+1].timeout)
	}
	return true, timeout
}

// layerReplicas is how many replicas layer l has.
func (f *fleet) layerReplicas(l uint8) int {
	if l == f.last {
		return f.replicas
	}
	return len(f.chain.layers[l])
}

// layerQueued is layer l's queue: the sum over its replicas.
func (f *fleet) layerQueued(l int) int64 {
	if f.chain == nil || l == int(f.last) {
		return f.queued()
	}
	n := 0
	for _, m := range f.chain.layers[l] {
		n += m.Queued()
	}
	return int64(n)
}

// sampleHops records the end-of-tick samples of the hops past the first:
// the queue of the layer each goes into, the share of its callers'
// breakers that are open.
func (f *fleet) sampleHops(t int, end time.Time) {
	c := f.chain
	for l := 1; l < len(c.hops); l++ {
		h := &c.hops[l]
		h.s.Queue[t] = f.layerQueued(l)
		pols := f.policies[h.base:f.hopEnd(l)]
		open := 0
		for i := range pols {
			if pols[i].Breaker.State(end) == resil.StateOpen {
				open++
			}
		}
		h.s.BreakerOpen[t] = float64(open) / float64(len(pols))
		if rs := &c.rs[l]; rs.det {
			rs.sampleEjected(f, t, int64(t+1)*f.tickNs)
		}
	}
}

// hopEnd is the end of hop l's policies in f.policies.
func (f *fleet) hopEnd(l int) int32 {
	if l+1 < len(f.chain.hops) {
		return f.chain.hops[l+1].base
	}
	return int32(len(f.policies))
}

// summarizeHops returns every layer's result, the first's being the
// fleet's own (its summary sum and its series), with the amplification:
// the attempts that reached the layer per intent of the fleet. (The
// fleet's summary comes by value: run taking the address of its result
// cost the one-hop run a fifth of its speed, in measurements.)
func (f *fleet) summarizeHops(sum Summary) []TierResult {
	c := f.chain
	out := make([]TierResult, len(c.hops))
	start, end := f.triggerTicks()
	for l := range c.hops {
		out[l].Name = "origin"
		if l < len(f.sc.Tiers) {
			out[l].Name = f.sc.Tiers[l].Name
		}
		if l == 0 {
			out[l].Summary, out[l].Series = sum, f.s
			out[l].Replicas, out[l].NoHealthyReplica = f.replicaState.results()
		} else {
			out[l].Replicas, out[l].NoHealthyReplica = c.rs[l].results()
			h := &c.hops[l]
			s := &h.s
			for k, t := range h.ticks {
				s.Intents[k], s.Offered[k], s.FirstAttempts[k], s.Retries[k], s.Hedges[k] = t.intents, t.offered, t.first, t.retries, t.hedges
				s.Successes[k], s.Goodput[k], s.FailedAttempts[k], s.BreakerRefusals[k] = t.successes, t.goodput, t.failed, t.refused
				s.ThrottleRefusals[k] = t.throttled
			}
			hs := h.sum
			Summarize(s, &hs, start, end)
			for _, p := range f.policies[h.base:f.hopEnd(l)] {
				hs.BreakerTrips += int64(p.Breaker.Trips())
			}
			out[l].Summary, out[l].Series = hs, *s
		}
		out[l].Amplification = ratio(out[l].Summary.Attempts+out[l].Summary.InboundRetries, sum.Intents)
	}
	return out
}

// tierPolicies is how many policies sc's tiers hold: one per replica.
func tierPolicies(sc *scenario.Scenario) int {
	n := 0
	for l := range sc.Tiers {
		n += max(sc.Tiers[l].Server.Replicas, 1)
	}
	return n
}

// The chain's versions of the hottest functions of the clients' side:
// chainSend, chainTimedOut and chainFinish are send, timedOut and finish
// of client.go for every hop of a chain. There are two copies on purpose
// (issue 28 reviewed them): a one-hop run, every experiment's but
// layers' and most users', never calls these, and pays one branch per attempt for them
// where the two meet (send, receive; a chain's timeouts are events of
// their own kind), whereas a shared version, choosing the hop's counters
// and timeout per attempt, cost it a few percent more instructions per
// attempt. A change to one belongs in the other; the experiments' golden
// files hold both kinds of run (layers' chains, the others' one hop).

// chainSend is send in a chain: it puts one attempt of intent i on the
// wire, to a tier's server or the origin. A hedge goes to another replica
// than the attempt it runs beside (avoid); other attempts pick a replica at
// random.
func (f *fleet) chainSend(i int32, now int64, t resil.Ticket, avoid int32) {
	ai, a := f.newAttempt()
	in := &f.ints[i]
	n := in.sent
	in.sent++
	timeout, ticks, hedging := f.timeout, f.ticks, f.hedging
	if in.hop > 0 {
		h := &f.chain.hops[in.hop]
		timeout, ticks, hedging = h.timeout, h.ticks, h.hedging
	}
	deadline := now + timeout
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
		c := &ticks[k]
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
	// The replica: the caller's picker's, or one at random (a hedge
	// elsewhere than its attempt).
	var rs *replicaState
	if f.chain.kept {
		rs = f.hopReplicas(in.hop)
	}
	noHost := false
	if rs != nil && rs.bal {
		noHost = !rs.pick(f, a, now, avoid)
	} else if k := f.layerReplicas(in.hop); k > 1 {
		u := draw(f.seed, in.id, int(n), drawReplica)
		if avoid >= 0 {
			a.replica = uint16((avoid + 1 + int32(u*float64(k-1))) % int32(k))
		} else {
			a.replica = uint16(u * float64(k))
		}
	}
	if rs != nil {
		rs.sentTo(a)
	}
	if in.hop != f.last {
		f.sendTier(i, ai, n, now, noHost) // a tier's server
	} else {
		out, mode := f.env.outage, f.env.mode
		if m := f.env.repOut; m != nil && !out && !noHost && m[a.replica] != "" {
			out, mode = true, m[a.replica]
		}
		blind := in.hop > 0 && !f.chain.hops[in.hop].propagate
		switch {
		case noHost:
			f.rejectAs(f.request(ai, in, n), now, answerNoHost) // no healthy upstream
		case !out || mode == scenario.OutageStall:
			// A stalled origin takes the attempt into its queue.
			ri := f.request(ai, in, n)
			f.reqs.at(ri).blind = blind
			f.origin[a.replica].Arrive(time.Duration(now), origin.Request(ri))
		case mode == scenario.OutageRefuse && f.inbound.on:
			f.refuseBehind(f.request(ai, in, n), now) // the replica's proxy retries, then answers
		case scenario.Refuses(mode):
			f.refuseConn(f.request(ai, in, n), now) // refused at once: the origin never sees it
		default:
			// A blackhole: nothing answers, the origin never sees it.
		}
	}
	if !a.known {
		f.q.push(mkEvent(a.deadline+1, ai, a.gen, evChainTimeout, 0), laneTimeout)
	}
	if !hedging {
		return
	}
	if d := f.policies[in.client].HedgeDelay(&in.in); d > 0 && now+int64(d) < a.deadline {
		f.q.push(mkEvent(now+int64(d), ai, a.gen, evHedge, 0), laneHedge)
	}
}

// cancelOthers cancels intent in's attempts still out at now, in any
// run: a failure it does not retry decided it (rs is its hop's replica
// state, or nil), or another attempt's success. Their servers hear their
// client leave.
func (f *fleet) cancelOthers(in *intent, rs *replicaState, pol *resil.Policy, now int64) {
	for in.head >= 0 {
		h := in.head
		f.unlink(in, h)
		if rs != nil {
			rs.ended(f, &f.atts[h], now, resil.OutcomeIgnored)
		}
		pol.End(f.vt(now), &in.in, f.atts[h].ticket, resil.OutcomeIgnored, time.Duration(now-f.atts[h].sent))
		switch ri := f.atts[h].req; {
		case ri < 0:
		case in.hop == f.last:
			f.reqs.at(ri).att = -1 // the origin serves it for nobody
		default:
			f.tierLeft(ri, now) // the tier may stop
		}
		f.freeAttempt(h)
	}
}

// timeoutKind is the kind of an attempt's timeout event in this run.
func (f *fleet) timeoutKind() eventKind {
	if f.chain != nil {
		return evChainTimeout
	}
	return evTimeout
}

// loseCall is lose for a tier's call in: it counts at its hop and tells
// the request the call serves.
func (f *fleet) loseCall(in *intent, now int64, r resil.StopReason) {
	if !in.late {
		sum := &f.chain.hops[in.hop].sum
		sum.IntentsLost++
		sum.LostBy.Add(r)
	}
	f.callEnded(in, false, now)
}

// chainTimedOut is timedOut in a chain: attempt a's client gives up on it
// at now, and a tier hears it (see tierLeft). The origin keeps its request
// (a queue serves it for nobody) unless it drops expired work.
func (f *fleet) chainTimedOut(a int32, now int64) {
	ri := f.atts[a].req
	hop := f.ints[f.atts[a].intent].hop
	f.chainFinish(a, now, resil.OutcomeTimeout)
	if ri >= 0 {
		f.abandon(hop, ri, now)
	}
}

// chainFinish is finish in a chain: it ends attempt ai on the client's
// side with outcome o, frees it, and decides what the intent does next: a
// tier's call that ends tells the request it serves.
func (f *fleet) chainFinish(ai int32, now int64, kind resil.Outcome) {
	o := policyOutcome(kind)
	a := &f.atts[ai]
	i, tick := a.intent, a.tick
	in := &f.ints[i]
	f.unlink(in, ai)
	var rs *replicaState
	if f.chain.kept {
		rs = f.hopReplicas(in.hop)
		if rs != nil {
			rs.ended(f, a, now, kind)
		}
	}
	pol := &f.policies[in.client]
	pol.End(f.vt(now), &in.in, a.ticket, o, time.Duration(now-a.sent))
	f.freeAttempt(ai)
	if o == resil.OutcomeSuccess {
		if in.hop == 0 {
			f.lat.add(now - in.arrival)
		}
		f.cancelOthers(in, rs, pol, now) // the other attempts lost the race
		if in.hop > 0 {
			f.callEnded(in, true, now)
		}
		f.endIntent(i)
		return
	}
	ticks, sum, retryOn := f.ticks, &f.sum, &f.retryOn
	if in.hop > 0 {
		h := &f.chain.hops[in.hop]
		ticks, sum, retryOn = h.ticks, &h.sum, &h.retryOn
	}
	if tick >= 0 {
		ticks[tick].failed++
		if o == resil.OutcomeTimeout {
			sum.Timeouts++
		}
	}
	in.failed, in.last = true, kind
	if in.inflight > 0 {
		if retryOn[kind] || kind == resil.OutcomeTimeout {
			return // a hedge is still out: it may yet succeed
		}
		// A failure not to retry ends the call and cancels the hedges
		// still out, as resil's hedging round does (and gRFC A6 for a
		// fatal status).
		f.cancelOthers(in, rs, pol, now)
	}
	if !retryOn[kind] {
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
		if r == resil.StopBudget && !in.late {
			sum.BudgetDenials++
		}
		f.lose(i, now, r)
		return
	}
	f.q.push(mkEvent(now+int64(d), i, in.gen, evRetry, 0), retryLane(in.sent))
}
