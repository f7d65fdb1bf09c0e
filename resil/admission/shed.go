package admission

import (
	"github.com/retrystorm/retrystorm/resil"

	"context"
	"sync"
	"sync/atomic"
	"time"
)

// ShedderSettings configures a [Shedder]. The zero value is valid: a
// Shedder that refuses only requests whose deadline has passed. NewShedder
// copies the settings; the Limiter is shared.
type ShedderSettings struct {
	// Deadline configures the deadline checks: the service-time estimate
	// and the time reserved for the way back. The zero value refuses only
	// expired requests.
	Deadline DeadlineSettings
	// Limiter caps the requests in flight. Nil means no limit (and then
	// Queue must be zero). Share one Limiter between the Shedders of
	// several transports (HTTP and gRPC) of one server to cap them
	// together.
	Limiter *Limiter
	// Queue lets requests over the limit wait for a slot, in this order,
	// this long. The zero value means none waits: a request over the
	// limit is refused at once (ShedLimit). It needs a Limiter.
	Queue QueueSettings
	// RetryAfter is the wait suggested to the callers of requests refused
	// for overload (limit, queue full, queue timeout): an HTTP server sends
	// it as Retry-After. Zero means none is suggested. In [0, 1h].
	RetryAfter time.Duration
	// Clock reads the time and makes the queue's timers. Nil means
	// [RealClock]. Deadlines are compared with Clock.Now.
	Clock resil.Clock
}

// ShedTicket is a [Shedder]'s admission of one request, returned by
// [Shedder.Admit] and handed back to [Shedder.Done] or [Shedder.Ignore]. The
// zero ShedTicket admits nothing. A plain value, safe to copy and to hand
// to another goroutine; end each one once.
type ShedTicket struct {
	permit LimitPermit
	start  time.Time
	ok     bool
}

// Admitted reports whether the ticket admits a request.
func (t ShedTicket) Admitted() bool { return t.ok }

// Shedder is a server's admission control, the blocking driver of the
// decisions of a [DeadlineShedder], a [Limiter] and a [WaitQueue]: before
// a request's work starts, it refuses the request if its caller's deadline
// has passed or is too near, or if the concurrency limit is reached and
// the request cannot wait for a slot; a request that waits is dropped as
// soon as its caller leaves, its deadline becomes too near or it has
// waited its time. Every refusal is immediate and cheap: a shared
// [*ShedError] with the reason, which a transport turns into a 503 or a
// gRPC status. Refusals are counted by reason.
//
// It is transport-neutral: resilhttp's middleware reads the deadline from
// a header, a gRPC interceptor from the context, and both call the same
// Admit and Done.
//
// Admitting a request that need not wait takes no lock and allocates
// nothing; ending it locks only an adaptive limit's state. Both read the
// clock only when a decision needs the time (a deadline, an adaptive limit,
// a learned estimate). Waiting allocates a little and starts a timer, never
// a goroutine.
//
// Make one with [NewShedder]. The zero Shedder, and a nil one, refuse
// every request (ShedLimit, with an error that matches ErrNotBuilt too):
// they were never built. A Shedder is safe for concurrent use.
type Shedder struct {
	dl    *DeadlineShedder
	lim   *Limiter
	clock resil.Clock
	real  bool
	timed bool // Done needs the time: an adaptive limit or a learned estimate
	errs  [NumShedReasons]*ShedError

	mu      sync.Mutex
	q       *WaitQueue[*waiter] // nil: no waiting
	waiting atomic.Int64        // q.Len(), readable without mu

	admitted, ended, dropped atomic.Uint64
	shed                     [NumShedReasons]atomic.Uint64
}

// waiter is one request waiting in the queue. decided is guarded by the
// Shedder's mu; the grant is sent once, on a buffered channel.
type waiter struct {
	ch      chan grant
	decided bool
}

type grant struct {
	p LimitPermit
	r ShedReason
}

var unbuilt = &ShedError{Reason: ShedLimit, notBuilt: true}

// NewShedder returns a Shedder with the given settings, or an error naming
// the invalid field.
func NewShedder(s ShedderSettings) (*Shedder, error) {
	const p = "ShedderSettings."
	if err := s.Deadline.validate(p + "Deadline."); err != nil {
		return nil, err
	}
	if err := s.Queue.validate(p + "Queue."); err != nil {
		return nil, err
	}
	if s.Queue.MaxLen > 0 && s.Limiter == nil {
		return nil, badSetting(p+"Queue.MaxLen", s.Queue.MaxLen, "a queue needs a Limiter")
	}
	if s.RetryAfter < 0 || s.RetryAfter > time.Hour {
		return nil, badSetting(p+"RetryAfter", s.RetryAfter, "must be in [0, 1h]")
	}
	dl, _ := NewDeadlineShedder(s.Deadline) // validated above
	sh := &Shedder{dl: dl, lim: s.Limiter, clock: s.Clock}
	if sh.clock == nil {
		sh.clock, sh.real = resil.RealClock(), true
	} else if sh.clock == resil.RealClock() {
		sh.real = true
	}
	sh.timed = s.Deadline.Learn || (s.Limiter != nil && s.Limiter.s.Algorithm != LimitFixed)
	if s.Queue.MaxLen > 0 {
		sh.q, _ = NewWaitQueue[*waiter](s.Queue) // validated above
	}
	for r := range sh.errs {
		e := &ShedError{Reason: ShedReason(r)}
		if e.Reason.Overload() {
			e.Wait = s.RetryAfter
		}
		sh.errs[r] = e
	}
	return sh, nil
}

// Now returns the time on the Shedder's clock. Transports use it to turn a
// propagated timeout into a deadline.
func (s *Shedder) Now() time.Time {
	if s == nil || s.real {
		return time.Now()
	}
	return s.clock.Now()
}

// Deadline returns the Shedder's deadline decisions, for a handler's
// deadline (less the reserve) and for drivers that decide at dequeue time.
// It is nil for the zero Shedder.
func (s *Shedder) Deadline() *DeadlineShedder {
	if s == nil {
		return nil
	}
	return s.dl
}

// Limiter returns the concurrency limiter, or nil when there is none.
func (s *Shedder) Limiter() *Limiter {
	if s == nil {
		return nil
	}
	return s.lim
}

// Admit decides whether a request may start, and waits for a slot when
// the limit is reached and the queue has room. deadline is the caller's
// propagated deadline (the zero Time when none came); when ctx has an
// earlier deadline, that one counts. ctx ending while the request waits
// (its caller left) drops it.
//
// It returns a ticket to end with Done or Ignore, or a [*ShedError] that
// says why the request was refused (errors.Is(err, ErrShed)).
func (s *Shedder) Admit(ctx context.Context, deadline time.Time) (ShedTicket, error) {
	if s == nil || s.dl == nil {
		return ShedTicket{}, unbuilt
	}
	if dl, ok := ctx.Deadline(); ok && (deadline.IsZero() || dl.Before(deadline)) {
		deadline = dl
	}
	var now time.Time
	if !deadline.IsZero() || s.timed {
		now = s.Now()
	}
	if r := s.dl.Decide(now, deadline); r != ShedNone {
		return s.refuse(r)
	}
	if s.lim == nil {
		s.admitted.Add(1)
		return ShedTicket{start: now, ok: true}, nil
	}
	// Nobody waits: take a slot if there is one. When some wait, a
	// newcomer queues behind them rather than jump ahead.
	if s.waiting.Load() == 0 {
		if p, ok := s.lim.Acquire(now); ok {
			s.admitted.Add(1)
			return ShedTicket{permit: p, start: now, ok: true}, nil
		}
	}
	if s.q == nil {
		return s.refuse(ShedLimit)
	}
	return s.wait(ctx, deadline)
}

func (s *Shedder) refuse(r ShedReason) (ShedTicket, error) {
	s.shed[r].Add(1)
	return ShedTicket{}, s.errs[r]
}

// wait queues the request until a slot is handed to it, it has waited its
// time, its deadline is too near, or its caller leaves.
func (s *Shedder) wait(ctx context.Context, deadline time.Time) (ShedTicket, error) {
	if ctx.Err() != nil {
		return s.refuse(ShedCallerLeft)
	}
	w := &waiter{ch: make(chan grant, 1)}
	now := s.Now()
	s.mu.Lock()
	if !s.q.Push(now, w) {
		s.mu.Unlock()
		return s.refuse(ShedQueueFull)
	}
	s.waiting.Store(int64(s.q.Len()))
	d, why := s.q.MaxWait(now), ShedQueueTimeout
	// A slot freed between the Acquire that failed and the push would
	// otherwise be handed to nobody: Done reads waiting after it frees the
	// slot, and this reads the slots after it sets waiting.
	s.grantLocked(now)
	s.mu.Unlock()

	if latest := s.dl.Latest(deadline); !latest.IsZero() {
		if until := latest.Sub(now); until < d {
			d, why = max(until, 0), ShedTooLate
		}
	}
	var g grant
	select {
	case g = <-w.ch: // granted at once
	default:
		t := s.newTimer(d)
		select {
		case g = <-w.ch:
		case <-ctx.Done():
			g = s.leave(w, ShedCallerLeft)
		case <-t.C():
			g = s.leave(w, why)
		}
		t.Stop()
	}
	if g.r != ShedNone {
		return s.refuse(g.r)
	}
	// The caller may have left as the slot came, and the wait may have
	// made the request too late: then the slot goes to the next waiter.
	now = s.Now()
	r := s.dl.Decide(now, deadline)
	if r == ShedNone && ctx.Err() != nil {
		r = ShedCallerLeft
	}
	if r != ShedNone {
		s.lim.Ignore(g.p)
		s.handOff(now)
		return s.refuse(r)
	}
	s.admitted.Add(1)
	return ShedTicket{permit: g.p, start: now, ok: true}, nil
}

// leave takes a waiter out of the queue for reason r, unless a slot or a
// refusal was handed to it first: then that one counts.
func (s *Shedder) leave(w *waiter, r ShedReason) grant {
	now := s.Now()
	s.mu.Lock()
	if !w.decided {
		w.decided = true
		s.q.Remove(now, w)
		s.waiting.Store(int64(s.q.Len()))
		s.mu.Unlock()
		return grant{r: r}
	}
	s.mu.Unlock()
	return <-w.ch
}

// grantLocked hands free slots to the waiters the queue serves next, and
// refuses those that waited too long. Called with mu held.
func (s *Shedder) grantLocked(now time.Time) {
	for s.q.Len() > 0 {
		p, ok := s.lim.Acquire(now)
		if !ok {
			break
		}
		w, _, r, _ := s.q.Next(now)
		w.decided = true
		if r != ShedNone {
			s.lim.Ignore(p)
			w.ch <- grant{r: r}
			continue
		}
		w.ch <- grant{p: p}
	}
	s.waiting.Store(int64(s.q.Len()))
}

// handOff gives the slots freed at now to waiters, if any wait.
func (s *Shedder) handOff(now time.Time) {
	if s.q == nil || s.waiting.Load() == 0 {
		return
	}
	if now.IsZero() {
		now = s.Now()
	}
	s.mu.Lock()
	s.grantLocked(now)
	s.mu.Unlock()
}

// Done ends the request t admitted. dropped says it did not complete
// normally for a reason that tells of overload (its deadline passed while
// it ran, it was cancelled by the server to shed load): the limiter takes
// it as congestion. Otherwise its duration is a latency sample for the
// limiter and a service time for the estimate. A freed slot goes to the
// next waiter.
func (s *Shedder) Done(t ShedTicket, dropped bool) {
	if s == nil || !t.ok {
		return
	}
	s.ended.Add(1)
	var now time.Time
	if s.timed {
		now = s.Now()
	}
	if dropped {
		s.dropped.Add(1)
	} else if s.dl.learn {
		s.dl.Observe(now.Sub(t.start))
	}
	s.lim.Release(now, t.permit, dropped)
	s.handOff(now)
}

// Ignore ends the request t admitted without a sample: its end says
// nothing about the load (its caller cancelled).
func (s *Shedder) Ignore(t ShedTicket) {
	if s == nil || !t.ok {
		return
	}
	s.ended.Add(1)
	s.lim.Ignore(t.permit)
	s.handOff(time.Time{})
}

func (s *Shedder) newTimer(d time.Duration) resil.Timer {
	if s.real {
		return resil.RealClock().NewTimer(d)
	}
	return s.clock.NewTimer(d)
}

// ShedStats is a snapshot of a [Shedder]'s counters and state. Counters are
// read one by one without a lock, so a snapshot taken while requests run
// may be off by those in flight. The zero ShedStats is a Shedder that has
// done nothing. A plain value, safe to copy and share.
type ShedStats struct {
	// Admitted is the requests admitted.
	Admitted uint64
	// Shed is the requests refused, by reason: Shed[ShedTooLate], ...
	// Shed[ShedNone] is always zero.
	Shed [NumShedReasons]uint64
	// Dropped is the admitted requests that ended dropped (Done with
	// dropped true).
	Dropped uint64
	// InFlight is the requests admitted and not yet ended.
	InFlight int
	// Queued is the requests waiting for a slot.
	Queued int
	// Limit is the concurrency limit now, when HasLimit.
	Limit int
	// HasLimit reports whether the Shedder has a Limiter.
	HasLimit bool
	// ServiceTime is the service-time estimate the deadline checks use.
	ServiceTime time.Duration
}

// Refused returns the requests refused, all reasons together.
func (st ShedStats) Refused() uint64 {
	var n uint64
	for _, v := range st.Shed {
		n += v
	}
	return n
}

// Stats returns a snapshot of the counters and the state.
func (s *Shedder) Stats() ShedStats {
	if s == nil {
		return ShedStats{}
	}
	st := ShedStats{
		Admitted:    s.admitted.Load(),
		Dropped:     s.dropped.Load(),
		Queued:      int(s.waiting.Load()),
		ServiceTime: s.dl.Estimate(),
	}
	for r := range s.shed {
		st.Shed[r] = s.shed[r].Load()
	}
	ended := s.ended.Load()
	st.InFlight = int(st.Admitted - min(st.Admitted, ended))
	if s.lim != nil {
		st.Limit, st.HasLimit = s.lim.Limit(), true
	}
	return st
}
