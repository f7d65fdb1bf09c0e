package resil

import (
	"context"
	"encoding"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// textEnum is an enum whose words come from one table.
type textEnum interface {
	fmt.Stringer
	encoding.TextMarshaler
}

// TestEnumText: every value of every enum marshals to its String, reads
// back as itself, and the first value past the table has no name; an
// unknown word is refused with the list of words.
func TestEnumText(t *testing.T) {
	check := func(name string, n int, value func(i int) textEnum, parse func([]byte) (textEnum, error)) {
		t.Run(name, func(t *testing.T) {
			for i := range n {
				v := value(i)
				b, err := v.MarshalText()
				if err != nil || string(b) != v.String() {
					t.Fatalf("%s(%d): MarshalText %q, %v; String %q", name, i, b, err, v.String())
				}
				back, err := parse(b)
				if err != nil || back != v {
					t.Fatalf("%s(%d): %q reads back as %v, %v", name, i, b, back, err)
				}
			}
			if b, err := value(n).MarshalText(); err == nil {
				t.Fatalf("%s(%d): MarshalText %q, want an error", name, n, b)
			}
			_, err := parse([]byte("Nope"))
			if err == nil || !strings.Contains(err.Error(), `resil: `+name+` = Nope: want one of `+value(0).String()) {
				t.Fatalf("%s: unknown word: %v", name, err)
			}
		})
	}
	check("Schedule", 3, func(i int) textEnum { return Schedule(i) }, func(b []byte) (textEnum, error) { var v Schedule; err := v.UnmarshalText(b); return v, err })
	check("Jitter", 5, func(i int) textEnum { return Jitter(i) }, func(b []byte) (textEnum, error) { var v Jitter; err := v.UnmarshalText(b); return v, err })
	check("Scope", 2, func(i int) textEnum { return Scope(i) }, func(b []byte) (textEnum, error) { var v Scope; err := v.UnmarshalText(b); return v, err })
	check("TripRule", 3, func(i int) textEnum { return TripRule(i) }, func(b []byte) (textEnum, error) { var v TripRule; err := v.UnmarshalText(b); return v, err })
	check("State", 3, func(i int) textEnum { return State(i) }, func(b []byte) (textEnum, error) { var v State; err := v.UnmarshalText(b); return v, err })
	check("Kind", 3, func(i int) textEnum { return Kind(i) }, func(b []byte) (textEnum, error) { var v Kind; err := v.UnmarshalText(b); return v, err })
	check("Outcome", 5, func(i int) textEnum { return Outcome(i) }, func(b []byte) (textEnum, error) { var v Outcome; err := v.UnmarshalText(b); return v, err })
	check("Idempotency", 3, func(i int) textEnum { return Idempotency(i) }, func(b []byte) (textEnum, error) { var v Idempotency; err := v.UnmarshalText(b); return v, err })
	check("StopReason", 10, func(i int) textEnum { return StopReason(i) }, func(b []byte) (textEnum, error) { var v StopReason; err := v.UnmarshalText(b); return v, err })
	// EventKind's String says "unknown" past its table, as metrics label
	// it; its text form is strict.
	for i := range 8 {
		b, err := EventKind(i).MarshalText()
		var back EventKind
		if err != nil || string(b) != EventKind(i).String() || back.UnmarshalText(b) != nil || back != EventKind(i) {
			t.Fatalf("EventKind(%d): %q, %v", i, b, err)
		}
	}
	if _, err := EventKind(8).MarshalText(); err == nil {
		t.Fatal("EventKind(8) has a name")
	}
}

// TestUnmarshalTextKeepsValueOnError: a word that is refused leaves the
// value as it was.
func TestUnmarshalTextKeepsValueOnError(t *testing.T) {
	j := EqualJitter
	if err := j.UnmarshalText([]byte("ful")); err == nil || j != EqualJitter {
		t.Fatalf("%v, %v", j, err)
	}
}

// TestReasonOf maps each way a call stops to its reason, wrapped in a
// StopError or not.
func TestReasonOf(t *testing.T) {
	last := errors.New("503")
	for _, c := range []struct {
		err  error
		want StopReason
	}{
		{nil, StopNone},
		{last, StopNone},
		{ErrBreakerOpen, StopBreaker},
		{ErrTooManyProbes, StopBreaker},
		{fmt.Errorf("fallback: %w", ErrBreakerOpen), StopBreaker},
		{ErrBudgetExhausted, StopBudget},
		{&StopError{Reason: ErrRetriesExhausted, Last: last}, StopRetriesExhausted},
		{&StopError{Reason: ErrBudgetExhausted, Last: last}, StopBudget},
		{&StopError{Reason: ErrBreakerOpen, Last: last}, StopBreaker},
		{&StopError{Reason: ErrNotIdempotent, Last: last}, StopNotIdempotent},
		{&StopError{Reason: ErrNotRetryable, Last: last}, StopNotRetryable},
		{&StopError{Reason: ErrPushback, Last: last}, StopPushback},
		{&StopError{Reason: ErrNoTimeLeft, Last: last}, StopDeadline},
		{&StopError{Reason: context.DeadlineExceeded, Last: last}, StopDeadline},
		{&StopError{Reason: context.Canceled, Last: last}, StopCanceled},
		// The last attempt's timeout is not the call's reason.
		{&StopError{Reason: ErrRetriesExhausted, Last: ErrAttemptTimeout}, StopRetriesExhausted},
		{fmt.Errorf("proxy: %w", &StopError{Reason: ErrBudgetExhausted, Last: ErrAttemptTimeout}), StopBudget},
		{context.Canceled, StopCanceled},
		{ErrThrottled, StopThrottled},
		{&StopError{Reason: ErrThrottled, Last: last}, StopThrottled},
		{errThrottlerNotBuilt, StopThrottled},
	} {
		if got := ReasonOf(c.err); got != c.want {
			t.Errorf("ReasonOf(%v) = %v, want %v", c.err, got, c.want)
		}
	}
	// A bare sentinel (the fast path) gets the reason it gets wrapped
	// (the chain of errors.Is).
	for _, s := range []error{ErrBudgetExhausted, ErrBreakerOpen, ErrTooManyProbes, ErrNotBuilt, ErrNotIdempotent,
		ErrRetriesExhausted, ErrNoTimeLeft, ErrPushback, ErrNotRetryable, ErrPanicked, ErrThrottled, ErrRateLimited} {
		if got, want := ReasonOf(s), ReasonOf(fmt.Errorf("wrapped: %w", s)); got != want {
			t.Errorf("ReasonOf(%v) = %v, wrapped %v", s, got, want)
		}
	}
}

// TestEnumNames pins the words of resil's enums, which configuration
// files, metric labels and logs spell.
func TestEnumNames(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{OutcomeSuccess.String(), "success"}, {OutcomeFailure.String(), "failure"}, {OutcomeTimeout.String(), "timeout"}, {OutcomeIgnored.String(), "ignored"},
		{Outcome(9).String(), "Outcome(9)"},
		{StateClosed.String(), "closed"}, {StateOpen.String(), "open"}, {StateHalfOpen.String(), "half-open"}, {State(7).String(), "State(7)"},
		{ConsecutiveFailures.String(), "consecutive"}, {CountWindow.String(), "count_window"}, {TimeWindow.String(), "time_window"},
		{NoDelay.String(), "none"}, {Fixed.String(), "fixed"}, {Exponential.String(), "exponential"},
		{FullJitter.String(), "full"}, {DecorrelatedJitter.String(), "decorrelated"}, {Jitter(9).String(), "Jitter(9)"},
		{KindFirst.String(), "first"}, {KindRetry.String(), "retry"}, {KindHedge.String(), "hedge"},
		{GuardAll.String(), "all"}, {GuardRetries.String(), "retries"},
		{EventAttempt.String(), "attempt"}, {EventDone.String(), "done"}, {EventKind(99).String(), "unknown"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}
