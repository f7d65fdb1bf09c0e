package admission

import (
	"github.com/retrystorm/retrystorm/resil"

	"errors"
	"math"
	"sync/atomic"
	"time"
)

// ShedReason says why a server refused (shed) a request, or ShedNone when
// it admitted it. The zero value is ShedNone. A plain value, safe to copy
// and share.
type ShedReason uint8

const (
	// ShedNone: the request was admitted.
	ShedNone ShedReason = iota
	// ShedExpired: the caller's deadline had passed before the work
	// started.
	ShedExpired
	// ShedTooLate: the caller's deadline was too near for the work to
	// finish in time, by the estimate of its service time.
	ShedTooLate
	// ShedCallerLeft: the caller went away (cancelled, disconnected) while
	// the request waited.
	ShedCallerLeft
	// ShedLimit: the concurrency limit was reached and there is no wait
	// queue.
	ShedLimit
	// ShedQueueFull: the concurrency limit was reached and the wait queue
	// was full.
	ShedQueueFull
	// ShedQueueTimeout: the request waited in the queue as long as it
	// may.
	ShedQueueTimeout

	// NumShedReasons is the number of ShedReason values, ShedNone
	// included: arrays indexed by reason have this length.
	NumShedReasons = iota
)

var shedNames = [...]string{"none", "expired", "too_late", "caller_left", "limit", "queue_full", "queue_timeout"}

// String returns the reason's snake_case name, as metrics label it.
func (r ShedReason) String() string {
	return enumString("ShedReason", shedNames[:], uint8(r))
}

// Overload reports whether the reason is the server's own overload (the
// limit or its queue), as opposed to the caller's deadline: only then may
// a retry after a while succeed.
func (r ShedReason) Overload() bool {
	return r == ShedLimit || r == ShedQueueFull || r == ShedQueueTimeout
}

// ErrShed is matched (errors.Is) by every [*ShedError]: a server refused
// the request before doing its work.
var ErrShed = errors.New("resil: request shed")

// ShedError is the refusal of a request by a [Shedder]. It matches ErrShed
// with errors.Is and implements [Pushback] with RetryAfter, so that an
// in-process client's Guard waits as asked. The zero value is a refusal
// without a reason. A Shedder hands out shared, immutable ShedErrors (one
// per reason), so a refusal allocates nothing; do not modify them.
type ShedError struct {
	// Reason says why.
	Reason ShedReason
	// Wait is how long the caller should wait before retrying: set for
	// overload reasons when ShedderSettings.RetryAfter is, zero otherwise.
	Wait time.Duration

	notBuilt bool // the refusal of a Shedder NewShedder did not make
}

// Error returns "resil: request shed: reason".
func (e *ShedError) Error() string { return "resil: request shed: " + e.Reason.String() }

// Is reports whether target is ErrShed, or ErrNotBuilt for the refusals
// of a Shedder that was never built.
func (e *ShedError) Is(target error) bool {
	return target == ErrShed || (e.notBuilt && target == resil.ErrNotBuilt)
}

// RetryAfter returns Wait, for resil's pushback.
func (e *ShedError) RetryAfter() time.Duration { return e.Wait }

// DeadlineSettings configures a [DeadlineShedder]. The zero value is valid:
// it refuses only requests whose deadline has passed. A plain value, safe to
// copy.
type DeadlineSettings struct {
	// ServiceTime is the least time a request needs once started: a request
	// with less time left is refused (ShedTooLate). Zero means none, unless
	// Learn is set. In [0, 24h].
	ServiceTime time.Duration
	// Learn makes the estimate follow the service times reported with
	// [DeadlineShedder.Observe]: the estimate is then the larger of
	// ServiceTime and a moving average of them (weight 1/8 per
	// observation, as TCP's smoothed RTT in RFC 6298).
	Learn bool
	// Reserve is the time kept for the answer's way back: a request must
	// finish Reserve before its caller's deadline, and the deadline a
	// server's handler sees is the caller's less Reserve. Zero means none.
	// In [0, 1h].
	Reserve time.Duration
}

// DeadlineShedder decides whether a server should start a request, from
// the deadline its caller propagated and an estimate of the service time:
// admit it (ShedNone), refuse it because the deadline has passed
// (ShedExpired), or because it cannot finish in time (ShedTooLate). Work
// nobody waits for is never started, so an overloaded server spends its
// capacity on requests that can still be answered in time.
//
// [DeadlineShedder.Decide] is a pure function of its arguments and the
// estimate: it reads no clock, so a simulator calls it on virtual time, and
// [Shedder], the HTTP middleware and the gRPC interceptors call it on the
// wall clock.
//
// Make one with [NewDeadlineShedder]. The zero DeadlineShedder, and a nil
// one, refuse only expired requests. A DeadlineShedder is safe for
// concurrent use.
type DeadlineShedder struct {
	service time.Duration
	reserve time.Duration
	learn   bool
	avg     atomic.Uint64 // float64 bits: the moving average, nanoseconds; 0 until the first
}

// NewDeadlineShedder returns a deadline shedder with the given settings, or
// an error naming the invalid field.
func NewDeadlineShedder(s DeadlineSettings) (*DeadlineShedder, error) {
	if err := s.validate("DeadlineSettings."); err != nil {
		return nil, err
	}
	return &DeadlineShedder{service: s.ServiceTime, reserve: s.Reserve, learn: s.Learn}, nil
}

// validate reports the first invalid field; p prefixes the field names
// ("DeadlineSettings.").
func (s DeadlineSettings) validate(p string) error {
	if s.ServiceTime < 0 || s.ServiceTime > 24*time.Hour {
		return badSetting(p+"ServiceTime", s.ServiceTime, "must be in [0, 24h]")
	}
	if s.Reserve < 0 || s.Reserve > time.Hour {
		return badSetting(p+"Reserve", s.Reserve, "must be in [0, 1h]")
	}
	return nil
}

// Decide says whether a request whose caller's deadline is deadline may
// start at now. The zero deadline means the caller sent none: the request
// is admitted.
func (d *DeadlineShedder) Decide(now, deadline time.Time) ShedReason {
	if deadline.IsZero() {
		return ShedNone
	}
	left := deadline.Sub(now)
	if d != nil {
		left -= d.reserve
	}
	if left <= 0 {
		return ShedExpired
	}
	if left < d.Estimate() {
		return ShedTooLate
	}
	return ShedNone
}

// Latest returns the last moment at which a request with the given
// deadline may start, by the current estimate: Decide refuses it from then
// on. It is the zero Time for the zero deadline.
func (d *DeadlineShedder) Latest(deadline time.Time) time.Time {
	if deadline.IsZero() {
		return deadline
	}
	if d == nil {
		return deadline
	}
	return deadline.Add(-d.reserve - d.Estimate())
}

// Deadline returns the deadline a handler should work to: the caller's,
// less the time reserved for the answer's way back.
func (d *DeadlineShedder) Deadline(deadline time.Time) time.Time {
	if deadline.IsZero() || d == nil {
		return deadline
	}
	return deadline.Add(-d.reserve)
}

// Observe reports the service time of a request that completed. It moves
// the estimate only when the DeadlineShedder learns.
func (d *DeadlineShedder) Observe(took time.Duration) {
	if d == nil || !d.learn || took <= 0 {
		return
	}
	x := float64(took)
	for {
		old := d.avg.Load()
		v := x
		if old != 0 {
			a := math.Float64frombits(old)
			v = a + (x-a)/8
		}
		if d.avg.CompareAndSwap(old, math.Float64bits(v)) {
			return
		}
	}
}

// Estimate returns the service time the decisions assume: ServiceTime, or
// the learned average when it is larger.
func (d *DeadlineShedder) Estimate() time.Duration {
	if d == nil {
		return 0
	}
	est := d.service
	if d.learn {
		if bits := d.avg.Load(); bits != 0 {
			est = max(est, time.Duration(math.Float64frombits(bits)))
		}
	}
	return est
}
