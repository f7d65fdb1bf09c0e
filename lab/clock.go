package lab

import (
	"context"
	"sync"
	"time"

	"github.com/retrystorm/retrystorm/origin"
	"github.com/retrystorm/retrystorm/scenario"
)

// An origin model on the wall clock. The model (package origin) is the
// simulator's own and takes the time as an argument; a server that runs one
// (wallServer: the Origin, the fault proxy, a tier) hands each request to
// the model and its handler waits on a channel, and a clock does what the
// model scheduled (answers, ends of service, calls to the next tier) when
// it falls due, each at the time it was due, so that a late timer costs
// the model no capacity. Every call to the model, and every decision it
// reports, happens under the server's lock, in time order: what fell due
// before now happens before an arrival at now.

// clock is the part of such a server that keeps time: the due times to
// come, one timer for the earliest, and the stall during which nothing
// falls due. The server's lock guards it; run takes the lock itself.
type clock struct {
	start time.Time
	due   dueQueue
	armed time.Duration // when the loop wakes next, from start
	wake  chan struct{} // wakes the loop: something falls due sooner
	fire  func(e due, at time.Duration)
	// held is a stall (an outage in mode stall): nothing falls due until
	// release, and what fell due meanwhile happens at the stall's end,
	// floor.
	held  bool
	floor time.Duration
}

// newClock returns a clock whose time 0 is start; fire does an entry that
// fell due, at the time given (its own, or a stall's end), with the
// server's lock held.
func newClock(start time.Time, fire func(e due, at time.Duration)) clock {
	return clock{start: start, fire: fire, wake: make(chan struct{}, 1)}
}

// since is t as the model's time: from the clock's start.
func (c *clock) since(t time.Time) time.Duration { return t.Sub(c.start) }

// run does what falls due, whenever it does, until ctx is done. It sleeps
// until the earliest due time; scheduling an earlier one wakes it. mu is
// the server's lock.
func (c *clock) run(ctx context.Context, mu *sync.Mutex) {
	every(ctx, c.wake, func() time.Duration {
		mu.Lock()
		defer mu.Unlock()
		t := c.since(time.Now())
		c.advance(t)
		c.armed = t + time.Minute
		if e, ok := c.due.peek(); ok && !c.held {
			c.armed = max(e.at, t)
		}
		return c.armed - t
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

// advance does what fell due by t, in time order, each at the time it was
// due (or at the end of the stall it fell due in); nothing during a stall.
// The lock is held.
func (c *clock) advance(t time.Duration) {
	for !c.held {
		e, ok := c.due.peek()
		if !ok || e.at > t {
			return
		}
		c.due.pop()
		c.fire(e, max(e.at, c.floor))
	}
}

// at schedules e, and wakes the loop if e falls due before it would wake.
// The lock is held.
func (c *clock) at(e due) {
	c.due.push(e)
	if e.at < c.armed && !c.held {
		c.armed = e.at
		c.poke()
	}
}

func (c *clock) poke() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// stall holds everything that falls due from now until release. The lock
// is held.
func (c *clock) stall() { c.held = true }

// release ends a stall at t: what fell due during it happens now, in the
// order it fell due. The lock is held.
func (c *clock) release(t time.Duration) {
	if !c.held {
		return
	}
	c.held, c.floor = false, t
	c.advance(t)
	c.armed = t
	c.poke()
}

// scheduleFaults applies faults at their boundaries until ctx is done:
// apply puts in force the faults of now, and returns them all; kick wakes
// it to look again, when the faults changed.
func scheduleFaults(ctx context.Context, kick <-chan struct{}, start time.Time, apply func(now time.Time) []scenario.Trigger) {
	every(ctx, kick, func() time.Duration {
		now := time.Now()
		t := now.Sub(start)
		faults := apply(now)
		// Wake at the next boundary, or now and then to stay honest
		// about the clock; a kick comes sooner.
		wait := time.Minute
		if next, ok := nextChange(faults, t); ok {
			wait = min(wait, next-t)
		}
		return wait
	})
}

// apply puts e in force in model at t, once what fell due before t has
// happened (advance, with the server's env already e): its conditions,
// and the start or end of a stall. The lock is held.
func (c *clock) apply(model origin.Model, e env, t time.Duration) {
	model.SetConditions(t, origin.Conditions{Capacity: e.capacity, Factor: e.factor})
	if e.stalled() {
		c.stall()
	} else {
		c.release(t)
	}
}

// due is something to do for a request at a time: what, the server says.
type due struct {
	at   time.Duration
	seq  uint64
	r    origin.Request
	gen  uint32
	kind dueKind
}

// dueKind is what a due entry does.
type dueKind uint8

// Due entries every server schedules (a service may add its own: the
// fault proxy does; a tier's two both begin its call).
const (
	dueAnswer  dueKind = iota // an answer known on arrival (Answer)
	dueService                // an end of service (Serve)
	dueReject                 // a rejection a stall put off (the server's own: see wallDriver.Reject)
)

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
