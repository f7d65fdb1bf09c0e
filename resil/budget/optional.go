package budget

import (
	"math"
	"time"

	"github.com/retrystorm/retrystorm/resil"
)

// The optional interfaces of a budget. A [resil.Policy] and a
// [resil.Guard] look for each of these methods on the [resil.Budget] they
// hold, by a type assertion, as io.Copy looks for WriterTo: each is one
// method for one purpose, which a budget has only when it means something
// to it (a count-only budget has no clock and no share). The budgets of
// this package implement those that apply to them. resil, which this
// package imports, cannot name these types; it asserts the same method
// sets (see the doc of resil.Budget), and this package's tests check that
// a Policy and a Guard hear each.

// UsesTime is an optional interface of a [resil.Budget]. A budget whose
// methods never look at the time they are passed (it counts; it does not
// age) implements it to return false, and a [resil.Guard] then never reads
// its clock for the budget: on the success path of a guarded call, reading
// the clock can cost more than everything else. A budget that does not
// implement it is handed the time, read when first needed.
type UsesTime interface {
	UsesTime() bool
}

// InFlight is implemented by budgets that count the attempts in flight,
// such as [*Concurrency]. [resil.Budget] alone tells a budget when a first
// attempt is sent (Begin) and when any attempt ends (Record), but not when
// a retry leaves its backoff and is sent: Sent fills that gap. A
// [resil.Policy] calls it from Resume and StartHedge, once the breaker has
// admitted the attempt; a driver that uses a budget without a Policy must
// call it too. Implementations must be safe for concurrent use.
type InFlight interface {
	resil.Budget
	// Sent records that a retry or a hedge, withdrawn before, is sent now.
	Sent(now time.Time, k resil.Kind)
}

// RetryShare is implemented by budgets that cap retries at a share of the
// traffic that funds them, in steady state and floor aside:
// [resil.Policy.Ceiling] reads it. [None] reports +Inf: it caps nothing.
// Implementations must be safe for concurrent use; the budgets of this
// package are.
type RetryShare interface {
	// RetryShare returns the steady-state share of retries per funding
	// deposit.
	RetryShare() float64
}

// TokenReporter is implemented by budgets that can report their balance:
// [*TokenBucket], [*Window], [*GRPCThrottle], [*AWSQuota] and
// [*Concurrency]. A [resil.Guard] reports it in its Stats (BudgetTokens).
// Implementations must be safe for concurrent use.
type TokenReporter interface {
	// Tokens returns the balance at now.
	Tokens(now time.Time) float64
}

// Built is implemented by a [resil.Budget] (or a [resil.Pacer]) whose zero
// value or nil pointer must not be used: it names the constructor that
// makes it and reports whether that constructor made this one. It must
// answer on a nil pointer. [resil.Policy.Validate] (so [resil.NewGuard])
// refuses a budget or a pacer that says false, with a [*resil.SettingError]
// that names the type and the constructor and wraps [resil.ErrNotBuilt]:
// a value that was never built grants nothing, and an ignored constructor
// error would otherwise turn retries off without a word. Every budget of
// this package but [None] (whose zero value is ready), and
// [*ClientRateLimiter], implement it.
type Built interface {
	Built() (constructor string, ok bool)
}

// badSetting is the error of an invalid setting, as resil reports its own.
func badSetting(field string, value any, reason string) error {
	return &resil.SettingError{Field: field, Value: value, Reason: reason}
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// def sets *v to d when it is zero: a setting's default.
func def[T int | float64 | time.Duration](v *T, d T) {
	if *v == 0 {
		*v = d
	}
}
