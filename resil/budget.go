package resil

import (
	"fmt"
	"math"
	"reflect"
	"time"
)

// Budget decides whether a retry (or a hedge) may be sent. It sees every
// intent start and every attempt end, and is asked before each retry.
//
// The budgets are in package resil/budget: the token bucket (the retry
// budget), its time-window form, gRPC's retry throttling (gRFC A6), the
// AWS SDKs' retry quota, Envoy's concurrency budget, and None (the
// control). A nil Budget in a [Policy] means no budget: only MaxRetries
// limits retries. The AWS SDKs' adaptive mode paces first attempts too, so
// it is not a Budget but a [Pacer].
//
// A Budget may have more methods, each for one purpose, which a Policy and
// a [Guard] find by a type assertion (as io.Copy finds WriterTo):
// UsesTime() bool (false: the budget never looks at the time, so a Guard
// need not read its clock for it), Sent(now time.Time, k Kind) (a retry or
// a hedge withdrawn before is sent now: for budgets that count attempts in
// flight), RetryShare() float64 (the share of retries it allows in steady
// state: [Policy.Ceiling]), Tokens(now time.Time) float64 (its balance:
// [Stats].BudgetTokens) and Built() (constructor string, ok bool) (whether
// its constructor made it: [Policy.Validate]). Package resil/budget names
// each of them as an interface (budget.UsesTime, budget.InFlight,
// budget.RetryShare, budget.TokenReporter, budget.Built) and documents it;
// its budgets implement them.
//
// Implementations must be safe for concurrent use. The zero Budget (nil) is
// not callable; a Policy takes it to mean no budget.
type Budget interface {
	// Begin records that an intent starts: its first attempt is about to
	// be sent. Request-funded budgets deposit here.
	Begin(now time.Time)
	// Record records how an attempt ended. paid is what Withdraw charged
	// for that attempt: zero for a first attempt.
	Record(now time.Time, o Outcome, paid float64)
	// Withdraw asks to schedule one retry (or hedge) after an attempt that
	// ended with after (OutcomeFailure or OutcomeTimeout). The charge is taken now, when
	// the retry is scheduled and before its backoff wait, so retries
	// waiting in backoff count against the budget. It returns the charge
	// and whether the retry may go ahead; on false nothing is charged.
	Withdraw(now time.Time, after Outcome) (cost float64, ok bool)
	// Refund gives back the charge of a retry that was withdrawn but never
	// sent (its caller gave up, or the breaker refused it).
	Refund(now time.Time, cost float64)
}

// The optional methods of a Budget (and, for built, of a Pacer), as
// Budget's doc lists them. resil/budget declares the same method sets as
// exported interfaces; its tests check that a Policy and a Guard hear each.
type (
	timeUser      interface{ UsesTime() bool }
	inFlight      interface{ Sent(now time.Time, k Kind) }
	retryShare    interface{ RetryShare() float64 }
	tokenReporter interface{ Tokens(now time.Time) float64 }
	builtReporter interface {
		Built() (constructor string, ok bool)
	}
)

// budgetUsesTime reports whether b must be handed the time: a Budget that
// does not say it never reads it is handed it, read when first needed.
func budgetUsesTime(b Budget) bool {
	if u, ok := b.(timeUser); ok {
		return u.UsesTime()
	}
	return b != nil
}

// unbounded reports whether b allows any number of retries (its retry
// share is +Inf, as the control budget's is): it then bounds nothing.
func unbounded(b Budget) bool {
	s, ok := b.(retryShare)
	return ok && math.IsInf(s.RetryShare(), 1)
}

// checkBuilt refuses a part that holds a nil pointer, or one that says its
// constructor did not make it (Built): a nil part means none, but a
// non-nil one that grants nothing is a mistake (often an ignored
// constructor error) that would silently turn retries off.
func checkBuilt(field string, v any) error {
	if v == nil {
		return nil
	}
	if b, ok := v.(builtReporter); ok {
		if constructor, ok := b.Built(); !ok {
			return notBuilt(field, fmt.Sprintf("%T", v), constructor)
		}
		return nil
	}
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.Pointer && rv.IsNil() {
		return notBuilt(field, fmt.Sprintf("%T", v), "its constructor")
	}
	return nil
}

// notBuilt is the SettingError for a part its constructor did not make;
// it wraps ErrNotBuilt.
func notBuilt(field, typ, constructor string) error {
	return &SettingError{Field: field, Value: typ,
		Reason: "a zero value or nil pointer, not made by " + constructor + " (was its error ignored?)", Err: ErrNotBuilt}
}
