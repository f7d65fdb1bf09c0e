package admission

import (
	"time"
)

// Discipline is the order in which a [WaitQueue] serves its waiters. The
// zero value is FIFO. A plain value, safe to copy and share.
type Discipline uint8

const (
	// FIFO serves the oldest waiter first.
	FIFO Discipline = iota
	// LIFO serves the newest waiter first: under overload the newest
	// request is the one most likely to be answered in time, and the
	// oldest ones time out in the queue instead of being served late.
	LIFO
	// AdaptiveLIFO serves FIFO while the queue drains, and LIFO while it
	// is overloaded (it has not been empty for QueueSettings.MaxWait), as
	// Facebook's servers do (Wangle; "Fail at Scale", ACM Queue 2015):
	// fairness when the queue is a buffer, freshness when it is a backlog.
	AdaptiveLIFO
)

var disciplineNames = [...]string{"fifo", "lifo", "adaptive_lifo"}

// String returns "fifo", "lifo" or "adaptive_lifo".
func (d Discipline) String() string {
	return enumString("Discipline", disciplineNames[:], uint8(d))
}

// QueueSettings configures a [WaitQueue]. The zero value is a queue of
// length zero: nothing may wait. A plain value, safe to copy.
type QueueSettings struct {
	// MaxLen is how many may wait at once. Zero means none may. In [0,
	// 1e6]; the queue allocates room for MaxLen entries up front.
	MaxLen int
	// Discipline is the order of service. The zero value is FIFO.
	Discipline Discipline
	// MaxWait is how long an entry may wait. Required when MaxLen > 0, in
	// [1µs, 24h]: how long is too long depends on the service (Facebook's
	// CoDel uses 100ms for its RPC servers). It is also CoDel's interval:
	// a queue that has not been empty for MaxWait is overloaded.
	MaxWait time.Duration
	// OverloadWait is how long an entry may wait while the queue is
	// overloaded: CoDel's target, short, so that a standing queue drains
	// (Facebook uses 5ms). Zero means MaxWait. In [0, MaxWait].
	OverloadWait time.Duration
}

// validate reports the first invalid field; p prefixes the field names
// ("QueueSettings.").
func (s QueueSettings) validate(p string) error {
	if s.MaxLen < 0 || s.MaxLen > 1_000_000 {
		return badSetting(p+"MaxLen", s.MaxLen, "must be in [0, 1e6]")
	}
	if s.Discipline > AdaptiveLIFO {
		return badSetting(p+"Discipline", s.Discipline, "unknown discipline")
	}
	if s.MaxLen == 0 {
		if s.MaxWait != 0 || s.OverloadWait != 0 || s.Discipline != FIFO {
			return badSetting(p+"MaxLen", s.MaxLen, "required when the other queue settings are set")
		}
		return nil
	}
	if s.MaxWait < time.Microsecond || s.MaxWait > 24*time.Hour {
		return badSetting(p+"MaxWait", s.MaxWait, "required when MaxLen > 0, in [1µs, 24h]")
	}
	if s.OverloadWait < 0 || s.OverloadWait > s.MaxWait {
		return badSetting(p+"OverloadWait", s.OverloadWait, "must be in [0, MaxWait]")
	}
	return nil
}

type queued[T any] struct {
	v  T
	at time.Time
}

// WaitQueue is a bounded queue of waiters, with its discipline, its maximum
// wait and CoDel's overload detection: the queueing decisions of a server,
// kept apart from the waiting itself. [Shedder] queues its blocked requests
// in one; a simulator's origin queues its simulated requests in another, and
// both follow the same rules.
//
// Push adds an entry, or refuses it when the queue is full; Next returns the
// entry to serve, or first, one that waited too long (to be refused, with
// ShedQueueTimeout). Time is an argument: the queue reads no clock, and
// allocates nothing after NewWaitQueue.
//
// Make one with [NewWaitQueue]. The zero WaitQueue has no room: every Push
// is refused. A WaitQueue is not safe for concurrent use: its owner locks.
type WaitQueue[T comparable] struct {
	s       QueueSettings
	buf     []queued[T]
	head, n int
	emptyAt time.Time // when the queue was last empty
}

// NewWaitQueue returns a queue with the given settings, or an error naming
// the invalid field.
func NewWaitQueue[T comparable](s QueueSettings) (*WaitQueue[T], error) {
	if err := s.validate("QueueSettings."); err != nil {
		return nil, err
	}
	return &WaitQueue[T]{s: s, buf: make([]queued[T], s.MaxLen)}, nil
}

// Settings returns the queue's settings.
func (q *WaitQueue[T]) Settings() QueueSettings { return q.s }

// Len returns how many entries wait.
func (q *WaitQueue[T]) Len() int { return q.n }

// Push adds v, waiting since now, and reports whether it was queued: false
// when the queue is full (the caller refuses v with ShedQueueFull).
func (q *WaitQueue[T]) Push(now time.Time, v T) bool {
	if q.n == len(q.buf) {
		return false
	}
	if q.n == 0 {
		q.emptyAt = now
	}
	q.buf[(q.head+q.n)%len(q.buf)] = queued[T]{v: v, at: now}
	q.n++
	return true
}

// Overloaded reports whether the queue has not been empty for MaxWait at
// now: a standing queue, not a burst being absorbed.
func (q *WaitQueue[T]) Overloaded(now time.Time) bool {
	return q.n > 0 && now.Sub(q.emptyAt) >= q.s.MaxWait
}

// MaxWait returns how long an entry may wait at now: OverloadWait while the
// queue is overloaded, MaxWait otherwise.
func (q *WaitQueue[T]) MaxWait(now time.Time) time.Duration {
	if q.s.OverloadWait > 0 && q.Overloaded(now) {
		return q.s.OverloadWait
	}
	return q.s.MaxWait
}

// Next removes and returns the next entry at now, and how long it waited.
// When the oldest entry has waited longer than MaxWait(now), it is that
// one, with ShedQueueTimeout: the caller refuses it and calls Next again.
// Otherwise it is the entry the discipline serves, with ShedNone. ok is
// false when the queue is empty.
func (q *WaitQueue[T]) Next(now time.Time) (v T, waited time.Duration, r ShedReason, ok bool) {
	if q.n == 0 {
		return v, 0, ShedNone, false
	}
	overloaded := q.Overloaded(now)
	limit := q.s.MaxWait
	if overloaded && q.s.OverloadWait > 0 {
		limit = q.s.OverloadWait
	}
	i := q.head
	r = ShedNone
	switch {
	case now.Sub(q.buf[q.head].at) > limit:
		r = ShedQueueTimeout
	case q.s.Discipline == LIFO, q.s.Discipline == AdaptiveLIFO && overloaded:
		i = (q.head + q.n - 1) % len(q.buf)
	}
	e := q.buf[i]
	q.buf[i] = queued[T]{}
	if i == q.head {
		q.head = (q.head + 1) % len(q.buf)
	}
	q.n--
	if q.n == 0 {
		q.head, q.emptyAt = 0, now
	}
	return e.v, now.Sub(e.at), r, true
}

// Remove takes v out of the queue, wherever it is, at now (its waiter
// gave up), and reports whether it was there. It costs a pass over the
// queue.
func (q *WaitQueue[T]) Remove(now time.Time, v T) bool {
	for k := range q.n {
		i := (q.head + k) % len(q.buf)
		if q.buf[i].v != v {
			continue
		}
		for ; k < q.n-1; k++ {
			a, b := (q.head+k)%len(q.buf), (q.head+k+1)%len(q.buf)
			q.buf[a] = q.buf[b]
		}
		q.buf[(q.head+q.n-1)%len(q.buf)] = queued[T]{}
		q.n--
		if q.n == 0 {
			q.head, q.emptyAt = 0, now
		}
		return true
	}
	return false
}
