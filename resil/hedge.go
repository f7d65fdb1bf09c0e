package resil

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// A hedged round runs its attempts on goroutines of their own and returns
// to the caller as soon as it has an answer that counts (a success, a
// failure not to retry, every attempt failed) or the caller's context is
// done. Attempts still running then are losers: their contexts are
// cancelled, and each finishes on its own goroutine, where it is recorded
// with the policy (freeing its breaker permit), told to the observers and
// discarded. The Guard starts no goroutine to wait for them, and
// [Guard.Wait] waits until they have all ended.

// flight is one attempt of a hedged round.
type flight struct {
	t       Ticket
	a       Attempt
	start   time.Time
	ctx     context.Context
	release func()
	running bool // the round's goroutine has not seen its answer
}

// hedged is a round's state shared by the caller's goroutine and the
// attempts' goroutines. It holds copies of what a loser needs after the
// call returned, never the call itself, which lives on the caller's stack.
type hedged[T any] struct {
	g       *Guard
	ctx     context.Context
	fn      func(context.Context, Attempt) (T, error)
	do      func(context.Context) error
	discard func(T)

	// ch carries answers to the round's goroutine until the round is
	// decided. It is buffered for every attempt the round may send, and
	// written under mu, so a send never blocks and none comes after the
	// round drained it.
	ch      chan result[T]
	mu      sync.Mutex
	decided bool
	// abandoned: the caller gave up, so the losers are judged as any
	// attempt would be (a caller's deadline makes them timeouts); after a
	// winner they were cancelled by the round and count as ignored.
	abandoned bool
	settleMu  sync.Mutex // serialises the losers' Discard calls

	fl []flight // the round's goroutine's alone
}

// decision is how a round ended.
type decision[T any] struct {
	win, last         result[T]
	haveWin, haveLast bool
}

// race sends the attempt t admitted on a goroutine of its own and hedges it
// while the policy allows and nothing has answered. It returns the answer
// that counts: the first success or final failure, the last retryable
// failure once every attempt has failed, or, when the caller's context is
// done first, an answer with no value (OutcomeIgnored) that run turns
// into the context's error.
func (c *call[T]) race(ctx context.Context, t Ticket, start time.Time, a Attempt) result[T] {
	h := c.hedge(ctx)
	h.launch(t, a, start)
	d := c.collect(h)
	return c.decide(h, d)
}

// hedge makes the round's shared state.
func (c *call[T]) hedge(ctx context.Context) *hedged[T] {
	n := 1 + max(c.g.p.Hedge.Max, 1)
	h := &hedged[T]{g: c.g, ctx: ctx, fn: c.fn, do: c.do, ch: make(chan result[T], n), fl: make([]flight, 0, n)}
	if c.o != nil {
		h.discard = c.o.Discard
	}
	return h
}

// launch starts one attempt on a goroutine of its own, under a context the
// round can cancel.
func (h *hedged[T]) launch(t Ticket, a Attempt, start time.Time) {
	var actx context.Context
	var release func()
	if h.g.s.AttemptTimeout > 0 {
		actx, release = h.g.attemptContext(h.ctx)
	} else {
		var cancel context.CancelFunc
		actx, cancel = context.WithCancel(h.ctx)
		release = cancel
	}
	f := flight{t: t, a: a, start: start, ctx: actx, release: release, running: true}
	h.fl = append(h.fl, f)
	h.g.background.add()
	go h.run(len(h.fl)-1, f)
}

// run is one attempt's goroutine: it calls the function and hands the
// answer (or the panic) to the round, or settles it itself if the round
// is already decided.
func (h *hedged[T]) run(idx int, f flight) {
	defer h.g.background.done()
	r := result[T]{idx: idx}
	func() {
		defer func() {
			if p := recover(); p != nil {
				r.panicked, r.didPanic = p, true
			}
		}()
		if h.do != nil {
			r.err = h.do(f.ctx)
		} else {
			r.v, r.err = h.fn(f.ctx, f.a)
		}
	}()
	h.mu.Lock()
	if !h.decided {
		h.ch <- r // never blocks: buffered for every attempt
		h.mu.Unlock()
		return
	}
	h.mu.Unlock()
	h.settle(&f, r)
}

// settle records a loser with the policy, tells the observers and
// discards its value.
func (h *hedged[T]) settle(f *flight, r result[T]) {
	g := h.g
	now := g.Now()
	r.release = f.release
	switch {
	case r.didPanic:
		// The caller has gone, so the panic has nobody to go to (and
		// crashing the program for a hedge that lost would be worse):
		// it is counted and reported with the attempt instead.
		g.st.panics.Add(1)
		r.o, r.err = OutcomeIgnored, fmt.Errorf("%w: %v", ErrPanicked, r.panicked)
	case h.abandoned:
		judge(g, h.ctx, f.ctx, &r)
	case r.err == nil:
		r.o = OutcomeSuccess // it answered after all: the dependency did the work
	default:
		r.o = OutcomeIgnored // the round cancelled it
	}
	inst := at(now)
	g.endAttempt(h.ctx, &inst, f.t, f.a, r.o, r.err, now.Sub(f.start))
	h.settleMu.Lock()
	defer h.settleMu.Unlock()
	if h.discard != nil {
		h.discard(r.v)
	}
	if r.release != nil {
		r.release()
	}
}

// collect waits for the answers, hedging on schedule, until one counts,
// every attempt has failed, or the caller's context is done.
func (c *call[T]) collect(h *hedged[T]) decision[T] {
	g := c.g
	var timer Timer
	var fire <-chan time.Time
	arm := func() {
		if d := g.p.HedgeDelay(&c.in); d > 0 {
			timer = g.newTimer(d)
			fire = timer.C()
		} else {
			timer, fire = nil, nil
		}
	}
	arm()
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	var d decision[T]
	inflight := 1
	for inflight > 0 {
		select {
		case r := <-h.ch:
			inflight--
			if c.answer(h, r, &d) {
				return d
			}
		case <-fire:
			if timer != nil {
				timer.Stop()
			}
			timer, fire = nil, nil
			if c.startHedge(h) {
				inflight++
				arm()
			}
		case <-h.ctx.Done():
			// The caller gave up: return now, whatever the attempts do
			// with their cancelled contexts.
			h.abandoned = true
			return d
		}
	}
	return d
}

// answer judges one attempt's answer and reports whether it decides the
// round.
func (c *call[T]) answer(h *hedged[T], r result[T], d *decision[T]) bool {
	g := c.g
	f := &h.fl[r.idx]
	f.running = false
	now := g.Now()
	inst := at(now)
	r.release = f.release
	if r.didPanic {
		g.p.end(&inst, f.t, OutcomeIgnored, now.Sub(f.start))
		d.win, d.haveWin = r, true
		return true
	}
	judge(g, h.ctx, f.ctx, &r)
	c.end(&inst, f.t, f.a, &r, now.Sub(f.start))
	if r.o == OutcomeSuccess || !r.retry {
		d.win, d.haveWin = r, true
		return true
	}
	if d.haveLast {
		c.discard(d.last)
	}
	d.last, d.haveLast = r, true
	return false
}

// startHedge asks the policy for a hedge and launches it, or reports why
// not.
func (c *call[T]) startHedge(h *hedged[T]) bool {
	g := c.g
	now := g.Now()
	ht, err := g.p.StartHedge(now, &c.in)
	if err != nil {
		if err == ErrBudgetExhausted {
			c.denied(now, c.next(KindHedge), nil)
		} else if err != ErrRetriesExhausted {
			c.refusedLocally(now, c.next(KindHedge), err, nil)
		}
		return false
	}
	g.st.hedges.Add(1)
	ha := Attempt{Number: c.in.Attempts(), Kind: KindHedge, Key: c.in.Key}
	if g.observed() {
		c.emit(Event{Kind: EventHedge, At: now, Attempt: ha})
	}
	h.launch(ht, ha, now)
	return true
}

// decide ends the round: from now on the attempts still running settle
// themselves. Answers that came in meanwhile are settled here; the losers
// are cancelled; a panic is passed on to the caller.
func (c *call[T]) decide(h *hedged[T], d decision[T]) result[T] {
	h.mu.Lock()
	h.decided = true
	var late []result[T]
	for len(h.ch) > 0 {
		late = append(late, <-h.ch)
	}
	h.mu.Unlock()
	for _, r := range late {
		h.fl[r.idx].running = false
	}
	for i := range h.fl {
		if h.fl[i].running {
			h.fl[i].release()
		}
	}
	panicked, didPanic := d.win.panicked, d.win.didPanic
	for _, r := range late {
		f := h.fl[r.idx]
		h.settle(&f, r)
		if r.didPanic && !didPanic {
			panicked, didPanic = r.panicked, true
		}
	}
	// From here on losers may settle on their goroutines: this call's
	// Discard calls take their turn with theirs.
	discardLast := func() {
		if d.haveLast {
			h.settleMu.Lock()
			defer h.settleMu.Unlock()
			c.discard(d.last)
		}
	}
	if didPanic {
		discardLast()
		if d.win.didPanic && d.win.release != nil {
			d.win.release()
		}
		panic(panicked)
	}
	switch {
	case d.haveWin:
		discardLast()
		return d.win
	case d.haveLast:
		// Every attempt failed, or the caller gave up after one did: run
		// reports this failure as the last attempt's error.
		return d.last
	}
	// The caller gave up before any answer: run reports its context's
	// error, with no last attempt's error.
	return result[T]{o: OutcomeIgnored}
}

func (g *Guard) newTimer(d time.Duration) Timer {
	if g.real {
		return realTimer{time.NewTimer(d)}
	}
	return g.clock.NewTimer(d)
}

// detached counts the attempts running on goroutines of their own, so that
// Guard.Wait can wait for the losers of hedged rounds.
type detached struct {
	mu   sync.Mutex
	n    int
	idle chan struct{} // closed while n == 0; nil means closed
}

func (d *detached) add() {
	d.mu.Lock()
	if d.n == 0 {
		d.idle = make(chan struct{})
	}
	d.n++
	d.mu.Unlock()
}

func (d *detached) done() {
	d.mu.Lock()
	d.n--
	if d.n == 0 {
		close(d.idle)
	}
	d.mu.Unlock()
}

// wait returns a channel closed when no attempt runs.
func (d *detached) wait() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.n == 0 {
		return closedChan
	}
	return d.idle
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()
