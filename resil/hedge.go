package resil

import (
	"context"
	"time"
)

// flight is one attempt of a hedged round, as the round's goroutine sees it.
type flight struct {
	t       Ticket
	a       Attempt
	start   time.Time
	ctx     context.Context
	release func()
	running bool
}

// race sends the attempt t admitted on a goroutine of its own and hedges it
// while the policy allows and nothing has answered. It returns the answer
// that counts: the first success or final failure, or else the last
// retryable failure once every attempt has failed. The other attempts are
// cancelled and waited for, so no goroutine outlives the round; a cancelled
// attempt counts as OutcomeIgnored unless it succeeded anyway.
func (c *call[T]) race(ctx context.Context, t Ticket, start time.Time, a Attempt) result[T] {
	g := c.g
	fn, do := c.fn, c.do
	n := 1 + max(g.p.Hedge.Max, 1)
	ch := make(chan result[T], n) // buffered: an attempt never blocks on send
	fl := make([]flight, 0, n)
	launch := func(t Ticket, a Attempt, start time.Time) {
		var actx context.Context
		var release func()
		if g.s.AttemptTimeout > 0 {
			actx, release = g.attemptContext(ctx)
		} else {
			var cancel context.CancelFunc
			actx, cancel = context.WithCancel(ctx)
			release = cancel
		}
		fl = append(fl, flight{t: t, a: a, start: start, ctx: actx, release: release, running: true})
		go runAttempt(actx, len(fl)-1, a, fn, do, ch)
	}
	launch(t, a, start)
	inflight := 1

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

	var win, last result[T]
	haveWin, haveLast := false, false
	done := ctx.Done()
	for inflight > 0 && !haveWin {
		select {
		case r := <-ch:
			inflight--
			f := &fl[r.idx]
			f.running = false
			now := g.Now()
			inst := at(now)
			r.release = f.release
			if r.didPanic {
				g.p.end(&inst, &c.in, f.t, OutcomeIgnored, now.Sub(f.start))
				win, haveWin = r, true
				break
			}
			c.judge(ctx, f.ctx, &r)
			c.end(&inst, f.t, f.a, &r, now.Sub(f.start))
			if r.o == OutcomeSuccess || !r.retry {
				win, haveWin = r, true
				break
			}
			if haveLast {
				c.discard(last)
			}
			last, haveLast = r, true
		case <-fire:
			now := g.Now()
			ht, err := g.p.StartHedge(now, &c.in)
			if err != nil {
				if err == ErrBudgetExhausted {
					c.denied(now, c.next(KindHedge), nil)
				} else if err != ErrRetriesExhausted {
					g.st.refusals.Add(1)
					if g.observed() {
						c.emit(Event{Kind: EventBreakerRefused, At: now, Attempt: c.next(KindHedge), Err: err})
					}
				}
				timer, fire = nil, nil
				break
			}
			g.st.hedges.Add(1)
			ha := Attempt{Number: c.in.Attempts(), Kind: KindHedge, Key: c.in.Key}
			if g.observed() {
				c.emit(Event{Kind: EventHedge, At: now, Attempt: ha})
			}
			launch(ht, ha, now)
			inflight++
			arm()
		case <-done:
			// The caller gave up: every attempt's context is a child of
			// ctx and is cancelled already; their answers come back as
			// OutcomeIgnored (or OutcomeTimeout, past a deadline). Stop hedging.
			done = nil
			if timer != nil {
				timer.Stop()
			}
			timer, fire = nil, nil
		}
	}
	if timer != nil {
		timer.Stop()
	}

	// The losers: cancel them, wait for them, record them.
	for i := range fl {
		if fl[i].running {
			fl[i].release()
		}
	}
	var panicked any
	didPanic := win.didPanic
	if didPanic {
		panicked = win.panicked
	}
	for ; inflight > 0; inflight-- {
		r := <-ch
		f := &fl[r.idx]
		f.running = false
		r.release = f.release
		now := g.Now()
		o := OutcomeIgnored
		if r.err == nil && !r.didPanic {
			o = OutcomeSuccess // it answered after all: the dependency did the work
		}
		r.o = o
		inst := at(now)
		c.end(&inst, f.t, f.a, &r, now.Sub(f.start))
		if r.didPanic && !didPanic {
			panicked, didPanic = r.panicked, true
		}
		c.discard(r)
	}
	if didPanic {
		if haveLast {
			c.discard(last)
		}
		if win.didPanic && win.release != nil {
			win.release()
		}
		panic(panicked)
	}
	if haveWin {
		if haveLast {
			c.discard(last)
		}
		return win
	}
	return last
}

// runAttempt runs one hedged-round attempt on its own goroutine and sends
// its answer, or its panic, to ch.
func runAttempt[T any](ctx context.Context, idx int, a Attempt, fn func(context.Context, Attempt) (T, error), do func(context.Context) error, ch chan<- result[T]) {
	r := result[T]{idx: idx}
	defer func() {
		if p := recover(); p != nil {
			r.panicked, r.didPanic = p, true
		}
		ch <- r
	}()
	if do != nil {
		r.err = do(ctx)
	} else {
		r.v, r.err = fn(ctx, a)
	}
}

func (g *Guard) newTimer(d time.Duration) Timer {
	if g.real {
		return realTimer{time.NewTimer(d)}
	}
	return g.clock.NewTimer(d)
}
