package lab

import (
	"context"
	"sync"
	"time"

	"github.com/retrystorm/retrystorm/origin"
)

// The origin's model on the wall clock. The model (package origin) is the
// simulator's own and takes the time as an argument; here each request's
// handler hands its request to the model and waits on a channel, and a
// clock answers requests and ends their service when they fall due, each
// at the time it was due, so that a late timer costs the model no
// capacity. Every call to the model, and every decision it reports, happens
// under the origin's lock, in time order: what fell due before now happens
// before an arrival at now.
// Run drives the origin's clock and its fault schedule until ctx is done;
// then it refuses new work and lets the requests still waiting go. Call it
// once.
func (o *Origin) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { o.clock(ctx) })
	o.schedule(ctx)
	wg.Wait()
	o.mu.Lock()
	o.stopped = true
	close(o.stop)
	o.mu.Unlock()
}

// schedule applies the faults at their boundaries until ctx is done.
func (o *Origin) schedule(ctx context.Context) {
	every(ctx, o.kick, func() time.Duration {
		now := time.Now()
		t := now.Sub(o.start)
		o.mu.Lock()
		faults := o.applyFaults(now)
		o.mu.Unlock()
		// Wake at the next boundary, or now and then to stay honest
		// about the clock; a kick from the admin endpoint comes sooner.
		wait := time.Minute
		if next, ok := nextChange(faults, t); ok {
			wait = min(wait, next-t)
		}
		return wait
	})
}

// clock brings the model up to the present whenever something falls due
// (an answer, an end of service), until ctx is done. It sleeps until the
// earliest due time; scheduling an earlier one wakes it.
func (o *Origin) clock(ctx context.Context) {
	every(ctx, o.wake, func() time.Duration {
		o.mu.Lock()
		defer o.mu.Unlock()
		t := o.since(time.Now())
		o.advance(t)
		o.armed = t + time.Minute
		if e, ok := o.due.peek(); ok {
			o.armed = e.at
		}
		return o.armed - t
	})
}

// every runs step at once, then whenever the wait it returned is over or
// wake receives, until ctx is done.
func every(ctx context.Context, wake <-chan struct{}, step func() time.Duration) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-wake:
		}
		timer.Reset(step())
	}
}

// since is t as the model's time: from the origin's start.
func (o *Origin) since(t time.Time) time.Duration { return t.Sub(o.start) }

// setEnv puts e in force at now, once what fell due before now has
// happened. The lock is held.
func (o *Origin) setEnv(e env, now time.Time) {
	t := o.since(now)
	o.advance(t)
	o.env = e
	o.model.SetConditions(t, origin.Conditions{Capacity: e.capacity, Factor: e.factor})
}

// advance answers the requests and ends the services that fell due by t,
// in time order, each at the time it was due. The lock is held.
func (o *Origin) advance(t time.Duration) {
	for {
		e, ok := o.due.peek()
		if !ok || e.at > t {
			return
		}
		o.due.pop()
		q := &o.reqs[e.r]
		if q.gen != e.gen {
			continue // dropped mid-service: its end went stale
		}
		o.finish(e.r)
		if e.service {
			o.model.Done(e.at, e.r)
		}
		o.release(e.r)
	}
}

// request is one request the model holds or decides on, from arrival to
// its last decision. Its slot is reused afterwards; gen tells the uses
// apart, for the handler and the due times that still name it.
type request struct {
	gen      uint32
	serving  bool          // in service (Serve), not answered yet
	tick     int           // the tick it arrived in, for the successes it earns
	broken   bool          // its intent's key is in the broken share: it always fails
	deadline time.Duration // when its client gives up, from start, if it said; 0: unknown
	exec     *execution    // set for non-idempotent requests: their side effect is counted
	answer   chan result   // the handler waits on it (buffered); nil once the client left
}

// due is an answer or an end of service to come.
type due struct {
	at      time.Duration
	seq     uint64
	r       origin.Request
	gen     uint32
	service bool // an end of service (Serve), not an answer (Answer)
}

// dueQueue is a binary min-heap of due times, on (at, seq): ties in the
// order they were scheduled.
type dueQueue struct {
	h   []due
	seq uint64
}

func (q *dueQueue) before(i, j int) bool {
	a, b := &q.h[i], &q.h[j]
	return a.at < b.at || (a.at == b.at && a.seq < b.seq)
}

func (q *dueQueue) peek() (due, bool) {
	if len(q.h) == 0 {
		return due{}, false
	}
	return q.h[0], true
}

func (q *dueQueue) push(e due) {
	q.seq++
	e.seq = q.seq
	q.h = append(q.h, e)
	for i := len(q.h) - 1; i > 0; {
		p := (i - 1) / 2
		if !q.before(i, p) {
			break
		}
		q.h[i], q.h[p] = q.h[p], q.h[i]
		i = p
	}
}

func (q *dueQueue) pop() {
	n := len(q.h) - 1
	q.h[0] = q.h[n]
	q.h = q.h[:n]
	for i := 0; ; {
		m, l, r := i, 2*i+1, 2*i+2
		if l < n && q.before(l, m) {
			m = l
		}
		if r < n && q.before(r, m) {
			m = r
		}
		if m == i {
			return
		}
		q.h[i], q.h[m] = q.h[m], q.h[i]
		i = m
	}
}

// originDriver is the Origin as its model's driver: what the model decides
// is scheduled on the due queue or told to the request's handler. The
// lock is held in every method, as in every call to the model.
type originDriver Origin

func (d *originDriver) Answer(r origin.Request, at time.Duration) {
	(*Origin)(d).at(due{at: at, r: r, gen: d.reqs[r].gen})
}

func (d *originDriver) Serve(r origin.Request, _, end time.Duration) {
	d.reqs[r].serving = true
	(*Origin)(d).at(due{at: end, r: r, gen: d.reqs[r].gen, service: true})
}

func (d *originDriver) Reject(r origin.Request, _ time.Duration) {
	o := (*Origin)(d)
	o.releaseKey(&o.reqs[r], false)
	o.tell(r, resRejected)
	o.release(r)
}

// Drop skips a request (drop_expired): it is not answered, and its client
// will time out.
func (d *originDriver) Drop(r origin.Request, _ time.Duration) {
	o := (*Origin)(d)
	o.dropped.Add(1)
	o.tally.inc(tDropped)
	o.releaseKey(&o.reqs[r], false)
	o.release(r)
}

func (d *originDriver) Expired(r origin.Request, at time.Duration) bool {
	q := &d.reqs[r]
	return q.answer == nil || (q.deadline != 0 && at > q.deadline)
}

// at adds e to the due queue, and wakes the clock if e falls due before
// it would wake. The lock is held.
func (o *Origin) at(e due) {
	o.due.push(e)
	if e.at < o.armed {
		o.armed = e.at
		select {
		case o.wake <- struct{}{}:
		default:
		}
	}
}

// newRequest takes a slot for j. The lock is held.
func (o *Origin) newRequest(j *job) origin.Request {
	var r origin.Request
	if n := len(o.free); n > 0 {
		r = o.free[n-1]
		o.free = o.free[:n-1]
	} else {
		o.reqs = append(o.reqs, request{})
		r = origin.Request(len(o.reqs) - 1)
	}
	q := &o.reqs[r]
	*q = request{gen: q.gen + 1, tick: j.tick, broken: j.broken, deadline: j.deadline, exec: j.exec, answer: make(chan result, 1)}
	return r
}

// release frees r's slot: the model is done with it. The lock is held.
func (o *Origin) release(r origin.Request) {
	q := &o.reqs[r]
	*q = request{gen: q.gen + 1}
	o.free = append(o.free, r)
}

// tell hands res to r's handler, if it still waits. The lock is held.
func (o *Origin) tell(r origin.Request, res result) {
	if ch := o.reqs[r].answer; ch != nil {
		ch <- res
		o.reqs[r].answer = nil
	}
}

// finish settles request r after its service (or its admission, for an
// answer known on arrival): its success counts for the tick it arrived
// in, its side effect is booked, and it is wasted work when nobody waits
// for it. The lock is held.
func (o *Origin) finish(r origin.Request) {
	q := &o.reqs[r]
	ok := !q.broken && !(o.env.errRate > 0 && o.rng.Float64() < o.env.errRate)
	if ok {
		o.tally.add(cSuccesses, q.tick)
	}
	if x := q.exec; x != nil {
		if ok && o.book.executed(x.intent) {
			o.m.duplicates.Inc()
		}
		if ok {
			o.m.executions.Inc()
		}
		o.releaseKey(q, ok)
	}
	switch {
	case q.answer == nil:
		o.waste()
	case o.env.outage:
		// The answer is lost; the handler waits for its client to leave.
	case ok:
		o.tell(r, resOK)
	default:
		o.tell(r, resError)
	}
}

// releaseKey frees the idempotency key q holds, if any: executed says
// whether its effect happened. The origin's lock may be held (the
// ledger's comes after it).
func (o *Origin) releaseKey(q *request, executed bool) {
	if q.exec != nil {
		o.releaseExec(q.exec, executed)
	}
}
