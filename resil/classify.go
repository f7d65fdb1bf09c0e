package resil

import (
	"context"
	"errors"
	"strings"
	"time"
)

// Classifier decides how an attempt's error counts for the breaker and the
// budget, and whether the attempt may be retried. It is called only for a
// non-nil error from an attempt the [Guard] did not end itself: the caller
// giving up, a per-attempt timeout and a lost hedge are judged by the Guard
// before any Classifier, so a cancelled caller is never a failure.
//
// A nil Classifier in Settings means [DefaultClassifier]. A Classifier is
// called concurrently by the calls of a Guard and must be safe for that.
type Classifier func(err error) (o Outcome, retryable bool)

// DefaultClassifier is the classifier a [Guard] uses when GuardSettings.Classify
// is nil and neither RetryOn nor NoRetryOn is set: an error marked with
// [Permanent] is an OutcomeFailure not to retry; one marked with [Neutral] is
// an OutcomeIgnored not to retry; an error that reports a timeout
// (context.DeadlineExceeded, or any error in the chain with a Timeout() bool
// method returning true, such as net.Error) is an OutcomeTimeout to retry; every
// other error is an OutcomeFailure to retry.
func DefaultClassifier(err error) (Outcome, bool) {
	if err == nil {
		return OutcomeSuccess, false
	}
	if isPermanent(err) {
		return OutcomeFailure, false
	}
	if _, ok := errors.AsType[*neutralError](err); ok {
		return OutcomeIgnored, false
	}
	if isTimeout(err) {
		return OutcomeTimeout, true
	}
	return OutcomeFailure, true
}

func isTimeout(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	// errors.AsType, unlike errors.As, does not make its target escape:
	// classifying a failure allocates nothing.
	t, ok := errors.AsType[interface {
		error
		Timeout() bool
	}](err)
	return ok && t.Timeout()
}

// Permanent marks err as not worth retrying: the default classification
// counts it as an OutcomeFailure and never retries it. errors.Is and errors.As see
// through the mark. Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err}
}

type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// Neutral marks err as an answer that says nothing about the dependency's
// health, such as a gRPC INVALID_ARGUMENT or NOT_FOUND: the default
// classification counts it as OutcomeIgnored (neither success nor failure,
// for the breaker and the budget) and never retries it. gRFC A6's throttle
// counts such answers so. errors.Is and errors.As see through the mark.
// Neutral(nil) is nil.
func Neutral(err error) error {
	if err == nil {
		return nil
	}
	return &neutralError{err}
}

type neutralError struct{ err error }

func (e *neutralError) Error() string { return e.err.Error() }
func (e *neutralError) Unwrap() error { return e.err }

func isPermanent(err error) bool {
	_, ok := errors.AsType[*permanentError](err)
	return ok
}

// Pushback is implemented by errors that carry a server's request about the
// next retry: Retry-After, gRPC's retry pushback. A positive duration
// replaces the backoff (clamped by Policy.MaxPushback, still paid from the
// budget); a negative one asks for no retry at all ([ErrPushback]); zero
// says nothing. [RetryAfter] makes one; resilhttp's status errors are one.
//
// Implementations are usually immutable errors, safe to share.
type Pushback interface {
	// RetryAfter returns the wait the server asked for.
	RetryAfter() time.Duration
}

// RetryAfter wraps err with the wait the server asked for before the next
// retry; see [Pushback]. A negative d asks for no retry. RetryAfter(nil, d)
// is nil.
func RetryAfter(err error, d time.Duration) error {
	if err == nil {
		return nil
	}
	return &pushbackError{err: err, d: d}
}

type pushbackError struct {
	err error
	d   time.Duration
}

func (e *pushbackError) Error() string             { return e.err.Error() }
func (e *pushbackError) Unwrap() error             { return e.err }
func (e *pushbackError) RetryAfter() time.Duration { return e.d }

// PushbackOf returns the wait asked for by the first error in err's chain
// that implements [Pushback].
func PushbackOf(err error) (time.Duration, bool) {
	if err == nil {
		return 0, false
	}
	p, ok := errors.AsType[interface {
		error
		Pushback
	}](err)
	if !ok {
		return 0, false
	}
	return p.RetryAfter(), true
}

// attemptTimeout is ErrAttemptTimeout's type: a timeout, and a
// context.DeadlineExceeded.
type attemptTimeout struct{}

func (attemptTimeout) Error() string        { return "resil: attempt timed out" }
func (attemptTimeout) Timeout() bool        { return true }
func (attemptTimeout) Is(target error) bool { return target == context.DeadlineExceeded }

// timedOut is the error of an attempt whose own timeout expired: it says so
// and keeps what the attempt returned.
type timedOut struct{ err error }

func (e *timedOut) Error() string   { return "resil: attempt timed out: " + e.err.Error() }
func (e *timedOut) Unwrap() []error { return []error{ErrAttemptTimeout, e.err} }

// StopError is the error of a guarded call that stopped without success
// after sending at least one attempt: Reason says why it stopped
// ([ErrRetriesExhausted], [ErrBudgetExhausted], [ErrNotIdempotent],
// [ErrNotRetryable], [ErrNoTimeLeft], [ErrPushback], [ErrBreakerOpen],
// [ErrThrottled], or the caller's context error), and Last is the last attempt's error.
// errors.Is and errors.As match both.
//
// The zero value is not meaningful; the Guard returns a *StopError that is
// not changed afterwards, so it may be shared between goroutines.
type StopError struct {
	// Reason is why the call stopped.
	Reason error
	// Last is the last attempt's error (nil when none was sent).
	Last error
	// Attempts is how many attempts were sent, hedges included.
	Attempts int
}

// Error returns the reason followed by the last attempt's error.
func (e *StopError) Error() string {
	var b strings.Builder
	b.WriteString(e.Reason.Error())
	if e.Last != nil {
		b.WriteString(": last attempt: ")
		b.WriteString(e.Last.Error())
	}
	return b.String()
}

// Unwrap returns Reason and Last, so errors.Is matches either.
func (e *StopError) Unwrap() []error {
	if e.Last == nil {
		return []error{e.Reason}
	}
	return []error{e.Reason, e.Last}
}

// StopReason is why a guarded call stopped without success, as a value:
// one per reason resil stops for, so that a caller can count the reasons,
// label a metric with them, or send one in a header and read it back
// (MarshalText and UnmarshalText use the names String returns).
// [ReasonOf] finds it in an error. The zero value is StopNone. A plain
// value, safe to copy and share.
type StopReason uint8

const (
	// StopNone: no stop, or an error resil did not stop with.
	StopNone StopReason = iota
	// StopRetriesExhausted: [ErrRetriesExhausted].
	StopRetriesExhausted
	// StopBudget: [ErrBudgetExhausted], or [ErrRateLimited] (a Pacer set
	// to fail rather than wait).
	StopBudget
	// StopBreaker: [ErrBreakerOpen], or [ErrTooManyProbes].
	StopBreaker
	// StopNotIdempotent: [ErrNotIdempotent].
	StopNotIdempotent
	// StopNotRetryable: [ErrNotRetryable].
	StopNotRetryable
	// StopPushback: [ErrPushback].
	StopPushback
	// StopDeadline: [ErrNoTimeLeft], or the caller's context deadline
	// passed.
	StopDeadline
	// StopCanceled: the caller's context was canceled.
	StopCanceled
	// StopThrottled: [ErrThrottled], the adaptive throttle's refusal.
	StopThrottled
)

var stopNames = [...]string{"none", "retries_exhausted", "budget", "breaker", "not_idempotent", "not_retryable", "pushback", "deadline", "canceled", "throttled"}

// String returns the reason's snake_case name: "retries_exhausted",
// "budget", "breaker", "not_idempotent", "not_retryable", "pushback",
// "deadline", "canceled", "throttled", or "none".
func (r StopReason) String() string { return enumString("StopReason", stopNames[:], uint8(r)) }

// ReasonOf returns why err stopped a guarded call: the Reason of the
// [*StopError] in err's chain or, for the errors a call returns without
// one (a breaker that refused the first attempt, a caller's context that
// was already done) and the sentinel errors [Policy] returns, err itself.
// It returns StopNone for nil and for errors resil does not stop with.
//
// This is the one mapping from resil's errors to reasons: the simulator,
// the lab and any caller that counts losses use it rather than testing the
// sentinels themselves.
func ReasonOf(err error) StopReason {
	// The sentinels as Policy returns them, first: a simulator asks this
	// for every intent it loses, and the chain below costs a hundred
	// instructions where a comparison costs one.
	switch err {
	case nil:
		return StopNone
	case ErrThrottled:
		return StopThrottled
	case ErrBreakerOpen, ErrTooManyProbes, ErrNotBuilt:
		return StopBreaker
	case ErrBudgetExhausted, ErrRateLimited:
		return StopBudget
	case ErrRetriesExhausted:
		return StopRetriesExhausted
	case ErrNotIdempotent:
		return StopNotIdempotent
	case ErrNotRetryable:
		return StopNotRetryable
	case ErrPushback:
		return StopPushback
	case ErrNoTimeLeft:
		return StopDeadline
	}
	if se, ok := errors.AsType[*StopError](err); ok {
		err = se.Reason
	}
	switch {
	case err == nil:
		return StopNone
	case errors.Is(err, ErrThrottled): // before the breaker: a throttler never built is refused as both
		return StopThrottled
	case errors.Is(err, ErrBreakerOpen): // ErrTooManyProbes too
		return StopBreaker
	case errors.Is(err, ErrBudgetExhausted), errors.Is(err, ErrRateLimited):
		return StopBudget
	case errors.Is(err, ErrRetriesExhausted):
		return StopRetriesExhausted
	case errors.Is(err, ErrNotIdempotent):
		return StopNotIdempotent
	case errors.Is(err, ErrNotRetryable):
		return StopNotRetryable
	case errors.Is(err, ErrPushback):
		return StopPushback
	case errors.Is(err, ErrNoTimeLeft), errors.Is(err, context.DeadlineExceeded):
		return StopDeadline
	case errors.Is(err, context.Canceled):
		return StopCanceled
	}
	return StopNone
}
