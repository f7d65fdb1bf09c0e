package sim

import (
	"time"

	"github.com/retrystorm/retrystorm/giveup"
	"github.com/retrystorm/retrystorm/origin"
	"github.com/retrystorm/retrystorm/resil"
	"github.com/retrystorm/retrystorm/scenario"
)

// rejectDelay is how long an overload rejection takes to reach its client:
// "at once", but not in zero time, so a client that retries without backoff
// still lets virtual time move.
const rejectDelay = int64(time.Millisecond)

// request is one attempt as the origin sees it, from its arrival until
// the origin is done with it: what the origin serves, and what its answer
// needs (the draws of its outcome, the tick it counts in). A collapsed
// queue holds millions of them, most for clients that left long ago, so it
// is small, and its slots come in chunks that never move.
type request struct {
	id       uint64 // the intent's number, for the draws
	deadline int64  // the attempt's, which it propagates: a shedding origin reads it
	n        int32  // the attempt's number within its intent, for the draws
	tick     int32  // the tick it was sent in, -1 after the run
	att      int32  // the attempt waiting for it, or -1 once its client stopped waiting
	replica  int32
	gen      uint32
	broken   bool // its key is in the broken share
	serving  bool // a worker holds it
	blind    bool // sent by a tier that does not propagate deadlines: the origin does not know its deadline
}

// requestChunk is how many requests a chunk of the table holds.
const requestChunk = 1 << 12

// requests is the table of requests: chunks of slots, allocated as the
// table grows and kept for the next run, and a list of free slots. A
// chunked table never copies itself to grow, so its peak is its size.
type requests struct {
	chunks []*[requestChunk]request
	made   int32 // slots handed out at least once
	free   []int32
}

// reset makes every slot free, keeping the memory.
func (t *requests) reset() {
	t.made, t.free = 0, t.free[:0]
}

// at returns request i.
func (t *requests) at(i int32) *request {
	return &t.chunks[uint32(i)/requestChunk][uint32(i)%requestChunk]
}

// take returns a free slot: the caller sets every field but gen.
func (t *requests) take() (int32, *request) {
	if n := len(t.free); n > 0 {
		i := t.free[n-1]
		t.free = t.free[:n-1]
		return i, t.at(i)
	}
	i := t.made
	if int(i/requestChunk) == len(t.chunks) {
		t.chunks = append(t.chunks, new([requestChunk]request))
	}
	t.made++
	return i, t.at(i)
}

// release frees slot i: the origin is done with it.
func (t *requests) release(i int32) {
	t.at(i).gen++
	t.free = append(t.free, i)
}

// request takes a request for the origin's side of attempt ai, the n-th
// of intent in, and returns its slot.
func (f *fleet) request(ai int32, in *intent, n int32) int32 {
	a := &f.atts[ai]
	ri, x := f.reqs.take()
	// Field by field, not a composite: see event.set.
	x.id, x.deadline, x.n, x.tick, x.att, x.replica = in.id, a.deadline, n, a.tick, ai, int32(a.replica)
	x.broken, x.serving, x.blind = in.broken, false, false
	a.req = ri
	return ri
}

// The outcomes an evAnswer carries in aux: an error answer is 0.
const (
	answerOK        = 1
	answerThrottled = 2 // an overload rejection: resil.OutcomeThrottled
	answerRefused   = 3 // a refused connection (an outage's mode: refuse): outcomeRefused
	answerGateway   = 4 // a tier's 502 or 504 (package giveup): outcomeGateway
	answerNoHost    = 5 // the caller's picker found no replica: outcomeNoHost
)

// The failure kinds of the simulator past resil's outcomes. The policy
// sees each as resil does an answer of its kind; the fleet retries each
// only if its retry.on says so.
const (
	// outcomeRefused is a refused connection: the policy sees
	// resil.OutcomeThrottled, as for any rejection it hears at once.
	outcomeRefused = resil.OutcomeThrottled + 1 + iota
	// outcomeGateway is a tier's give-up answer by which it says a layer
	// below failed (a 502, a 504): an OutcomeFailure to the policy.
	outcomeGateway
	// outcomeNoHost is the caller's own picker finding no replica (every
	// one ejected, no panic mode): a refused connection to the policy,
	// which Envoy's router never retries (router.cc, doRetry: "no healthy
	// upstream").
	outcomeNoHost
	nKinds // the size of a table by failure kind
)

// policyOutcome is what the policy sees of the failure kind o.
func policyOutcome(o resil.Outcome) resil.Outcome {
	switch o {
	case outcomeRefused, outcomeNoHost:
		return resil.OutcomeThrottled
	case outcomeGateway:
		return resil.OutcomeFailure
	}
	return o
}

// kindOfAnswer is the failure kind of an answer's aux.
func kindOfAnswer(aux uint8) resil.Outcome {
	switch aux {
	case answerOK:
		return resil.OutcomeSuccess
	case answerThrottled:
		return resil.OutcomeThrottled
	case answerRefused:
		return outcomeRefused
	case answerGateway:
		return outcomeGateway
	case answerNoHost:
		return outcomeNoHost
	}
	return resil.OutcomeFailure
}

// retryTable is which failure kinds a policy with retry rule r, at a layer
// running product, retries.
func retryTable(r *scenario.Retry, product string) [nKinds]bool {
	var t [nKinds]bool
	t[resil.OutcomeFailure] = r.Retries(scenario.RetryOnError)
	t[resil.OutcomeThrottled] = r.Retries(scenario.RetryOnRejection)
	t[resil.OutcomeTimeout] = r.Retries(scenario.RetryOnTimeout)
	t[outcomeRefused] = r.Retries(scenario.RetryOnRefused)
	t[outcomeGateway] = r.Retries(scenario.RetryOnGateway)
	// Only an application retries a call its picker found no host for:
	// Envoy's router does not (doRetry: "no healthy upstream"), nginx
	// answers "no live upstreams" without passing the request on (the
	// NGX_HTTP_UPSTREAM_FT_NOLIVE failure is in no proxy_next_upstream
	// mask), HAProxy answers 503 with no server to retry on.
	p := giveup.Product(product)
	t[outcomeNoHost] = t[outcomeRefused] && (p == "" || p == giveup.App)
	return t
}

// kindWords are the failure kinds in giveup's (and retry.on's) words; a
// kind without one (a success: nothing answered) is "".
var kindWords = [nKinds]string{
	resil.OutcomeFailure: giveup.Error, resil.OutcomeThrottled: giveup.Rejection, resil.OutcomeTimeout: giveup.Timeout,
	outcomeRefused: giveup.Refused, outcomeGateway: giveup.Gateway,
}

// answerOf is the aux of an answer of giveup kind k.
func answerOf(k string) uint8 {
	switch k {
	case giveup.Rejection:
		return answerThrottled
	case giveup.Gateway:
		return answerGateway
	}
	return 0 // an error answer
}

// answer is the origin's answer to request r reaching its client at now;
// aux says what it is (answerOK, answerThrottled, or 0 for an error). A
// success counts in its tick whether or not anybody still waits for it,
// and an answer nobody waits for is wasted work.
func (f *fleet) answer(r int32, now int64, aux uint8) {
	x := f.reqs.at(r)
	if aux == answerOK && ((f.env.outage && scenario.Refuses(f.env.mode)) || (f.env.repOut != nil && scenario.Refuses(f.env.repOut[x.replica]))) {
		aux = 0 // the answer fails, as a reset connection does
	}
	if aux == answerOK && x.tick >= 0 {
		f.oticks[x.tick].successes++
	}
	a, counted := x.att, x.tick >= 0
	x.att = -1 // answered: its client no longer waits for it (a model may still ask, Done)
	f.reqs.release(r)
	if a < 0 {
		// Work for nobody counts as the attempt it served does: only for
		// an attempt sent during the run.
		if counted {
			f.osum.WastedWork++
		}
		return
	}
	f.receive(a, now, aux)
}

// served is the end of request r's service at now: the answer first, then
// the model frees its server for what waits.
func (f *fleet) served(r int32, now int64) {
	x := f.reqs.at(r)
	x.serving = false
	m := f.origin[x.replica]
	f.answer(r, now, f.outcome(x))
	m.Done(time.Duration(now), origin.Request(r))
}

// outcome draws the origin's answer to request x: answerOK, an error (0),
// or, while a rejection trigger is in force, answerThrottled.
func (f *fleet) outcome(x *request) uint8 {
	rate := f.env.errRate
	if f.env.repErr != nil {
		rate = f.env.repErr[x.replica]
	}
	if x.broken {
		return 0
	}
	if rate <= 0 && f.env.rejRate <= 0 {
		return answerOK
	}
	d := draw(f.seed, x.id, int(x.n), drawError)
	switch {
	case rate > 0 && d < rate:
		return 0
	case f.env.rejRate > 0 && d < 1-(1-rate)*(1-f.env.rejRate):
		return answerThrottled
	}
	return answerOK
}

// known notes, for the attempt waiting for request x (if any), whether its
// answer at at comes in time: then it needs no timeout event.
func (f *fleet) known(x *request, at int64) {
	if x.att >= 0 {
		a := &f.atts[x.att]
		a.known = at <= a.deadline
	}
}

// originDriver is the fleet as the driver of its origin's models (package
// origin): what a model decides about a request becomes an event on the
// fleet's queue. An origin.Request is a request's slot.
type originDriver fleet

// newOrigin returns the fleet's origin: one model per replica, each
// reporting to the fleet, with the memory of the last run's models.
func (f *fleet) newOrigin(o *scenario.Origin, replicas int) error {
	old := f.scr.models
	f.scr.models = nil
	f.origin = make([]origin.Model, replicas)
	for r := range f.origin {
		var prev origin.Model
		if r < len(old) {
			prev = old[r]
		}
		m, err := origin.RenewWith(prev, o, r, replicas, (*originDriver)(f), origin.Options{Rand: serviceRand(f.seed, o, 0, r)})
		if err != nil {
			return err
		}
		f.origin[r] = m
	}
	return nil
}

// Answer is an answer known on arrival: its outcome is drawn now.
func (d *originDriver) Answer(r origin.Request, at time.Duration) {
	f := (*fleet)(d)
	x := f.reqs.at(int32(r))
	f.known(x, int64(at))
	f.q.push(mkEvent(int64(at), int32(r), x.gen, evAnswer, f.outcome(x)), laneAnswer)
}

// Serve schedules the end of the request's service.
func (d *originDriver) Serve(r origin.Request, _, end time.Duration) {
	f := (*fleet)(d)
	x := f.reqs.at(int32(r))
	x.serving = true
	if x.att >= 0 {
		a := &f.atts[x.att]
		a.known = int64(end) <= a.deadline
		a.flags |= attServing
	}
	f.q.push(mkEvent(int64(end), int32(r), x.gen, evComplete, 0), laneComplete)
}

// Reject answers the request with an overload rejection.
func (d *originDriver) Reject(r origin.Request, now time.Duration) {
	(*fleet)(d).reject(int32(r), int64(now))
}

// reject answers request r with the origin's overload rejection,
// rejectDelay after now.
func (f *fleet) reject(r int32, now int64) { f.rejectAs(r, now, answerThrottled) }

// refuse answers request r with a refused connection (an outage with mode:
// refuse), rejectDelay after now.
func (f *fleet) refuseConn(r int32, now int64) { f.rejectAs(r, now, answerRefused) }

func (f *fleet) rejectAs(r int32, now int64, aux uint8) {
	x := f.reqs.at(r)
	at := now + rejectDelay
	f.known(x, at)
	f.q.push(mkEvent(at, r, x.gen, evAnswer, aux), laneReject)
}

// Drop is a shedding origin skipping the request, unanswered.
func (d *originDriver) Drop(r origin.Request, _ time.Duration) {
	f := (*fleet)(d)
	x := f.reqs.at(int32(r))
	if x.tick >= 0 {
		f.osum.Dropped++
	}
	if x.att >= 0 {
		f.atts[x.att].req = -1 // its client will time out
	}
	f.reqs.release(int32(r))
}

// Deadline is the request's deadline, which every attempt propagates: an
// answer at it is in time. Its client is gone once it no longer waits.
func (d *originDriver) Deadline(r origin.Request) (time.Duration, bool, bool) {
	x := (*fleet)(d).reqs.at(int32(r))
	return time.Duration(x.deadline), !x.blind, x.att < 0
}

// setConditions puts the env in force at the origin's replicas from now:
// each holds an equal share of the capacity.
func (f *fleet) setConditions(now int64) {
	share := f.env.capacity / float64(len(f.origin))
	for r, m := range f.origin {
		m.SetConditions(time.Duration(now), origin.Conditions{Capacity: share, Factor: f.env.factor[r]})
	}
}

// queued is the origin's queue series: the sum over its replicas.
func (f *fleet) queued() int64 {
	n := 0
	for _, m := range f.origin {
		n += m.Queued()
	}
	return int64(n)
}
