package resil

import (
	"errors"
	"fmt"
	"math"
	"strings"
)

// Sentinel errors. Test for them with errors.Is: the errors returned by
// [Guard.Do] and [Policy] wrap them.
var (
	// ErrBudgetExhausted: the retry budget refused a retry or a hedge.
	ErrBudgetExhausted = errors.New("resil: retry budget exhausted")
	// ErrBreakerOpen: the circuit breaker is open and refused the call.
	ErrBreakerOpen = errors.New("resil: circuit breaker open")
	// ErrTooManyProbes: the breaker is half-open and all its probe slots
	// are taken. errors.Is(ErrTooManyProbes, ErrBreakerOpen) is true: to a
	// caller both mean the breaker refused.
	ErrTooManyProbes = fmt.Errorf("%w: half-open probe limit reached", ErrBreakerOpen)
	// ErrNotIdempotent: the call is not idempotent and carries no
	// idempotency key, so it is never retried.
	ErrNotIdempotent = errors.New("resil: not idempotent and no idempotency key")
	// ErrRetriesExhausted: the call used all of MaxRetries.
	ErrRetriesExhausted = errors.New("resil: retries exhausted")
	// ErrNoTimeLeft: the retry could not start (or finish) before the
	// caller's deadline.
	ErrNoTimeLeft = errors.New("resil: no time left before the deadline")
	// ErrPushback: the server asked the client not to retry.
	ErrPushback = errors.New("resil: server pushback said do not retry")
	// ErrNotRetryable: the classifier said the error is permanent.
	ErrNotRetryable = errors.New("resil: error not retryable")
	// ErrPanicked: the guarded function panicked. It is never returned
	// (the panic goes on); EventDone carries it.
	ErrPanicked = errors.New("resil: the guarded function panicked")
	// ErrNotBuilt: a value was used that its constructor did not make (a
	// zero value, or the nil pointer a failed constructor returns). It
	// fails closed: a budget grants no retry, a breaker refuses every
	// call, a Guard runs nothing. errors.Is(ErrNotBuilt, ErrBreakerOpen)
	// is true, so a breaker's refusal is handled as one.
	ErrNotBuilt = fmt.Errorf("resil: not made by its constructor (a zero value or a nil pointer): %w", ErrBreakerOpen)
	// ErrThrottled: the adaptive throttle ([Throttler]) refused the
	// attempt locally. It is not ErrBreakerOpen: the throttle sheds a share
	// of the attempts, the breaker all of them, and they are counted apart.
	ErrThrottled = errors.New("resil: adaptive throttle refused the attempt")
	// ErrRateLimited: the policy's Pacer had no token for the attempt and
	// is set to fail rather than wait.
	ErrRateLimited = errors.New("resil: client-side rate limit")
	// ErrAttemptTimeout: an attempt's own timeout
	// (GuardSettings.AttemptTimeout) expired. It is the cause of the
	// attempt's context, and is wrapped in the error of such an attempt.
	// errors.Is(ErrAttemptTimeout, context.DeadlineExceeded) is true, and
	// it reports Timeout() true.
	ErrAttemptTimeout error = attemptTimeout{}
)

// SettingError reports an invalid setting. Field names the setting as it
// is spelled in the Go struct (for example "BreakerSettings.Threshold").
// The zero value is an empty report. A SettingError is not changed once
// returned, so it may be shared between goroutines.
type SettingError struct {
	// Field is the setting, as "Struct.Field".
	Field string
	// Value is the value given, or nil when it says nothing.
	Value any
	// Reason says what a valid value is.
	Reason string
	// Err, if set, is a sentinel the error wraps (ErrNotBuilt).
	Err error
}

// Unwrap returns Err.
func (e *SettingError) Unwrap() error { return e.Err }

// Error returns "resil: Field = Value: Reason".
func (e *SettingError) Error() string {
	var b strings.Builder
	b.WriteString("resil: ")
	b.WriteString(e.Field)
	if e.Value != nil {
		fmt.Fprintf(&b, " = %v", e.Value)
	}
	b.WriteString(": ")
	b.WriteString(e.Reason)
	return b.String()
}

// finite reports whether f is a number: no setting takes NaN or an
// infinity.
func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

func badSetting(field string, value any, reason string) error {
	return &SettingError{Field: field, Value: value, Reason: reason}
}
