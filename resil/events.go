package resil

import (
	"context"
	"sync/atomic"
	"time"
)

// EventKind says what an [Event] reports. The zero value is EventAttempt.
// A plain value, safe to copy and share.
type EventKind uint8

const (
	// EventAttempt: an attempt ended. Attempt, Outcome, Took and Err are set.
	EventAttempt EventKind = iota
	// EventRetry: a retry was scheduled and paid for; Wait is its backoff
	// (or pushback) and Err the failure it follows. Attempt is the retry to
	// come.
	EventRetry
	// EventHedge: a hedge was sent. Attempt is the hedge.
	EventHedge
	// EventBudgetDenied: the budget refused a retry or a hedge.
	EventBudgetDenied
	// EventBreakerRefused: the breaker refused an attempt; Err says how.
	EventBreakerRefused
	// EventFallback: a fallback answered for a refused call.
	EventFallback
	// EventDone: the intent ended; Took is its whole duration and Err its
	// error (nil on success; one that wraps ErrPanicked when the function
	// panicked, just before the panic goes on).
	EventDone
	// EventThrottled: the adaptive throttle refused an attempt locally;
	// Err wraps ErrThrottled.
	EventThrottled
)

var eventNames = [...]string{"attempt", "retry", "hedge", "budget_denied", "breaker_refused", "fallback", "done", "throttled"}

// String returns the kind's snake_case name, as metrics label it.
func (k EventKind) String() string {
	if int(k) < len(eventNames) {
		return eventNames[k]
	}
	return "unknown"
}

// Event is one thing a [Guard] did, passed by value to GuardSettings.OnEvent and
// to the functions added with [Guard.Observe]. Adapters (metrics, logs,
// traces) are built on it. The zero Event reports nothing. An Event is a
// plain value: observers may keep it and hand it to other goroutines.
type Event struct {
	// Kind says what happened.
	Kind EventKind
	// At is when it happened, on the Guard's clock.
	At time.Time
	// Attempt is the attempt concerned (zero for EventDone and refusals of
	// a first attempt).
	Attempt Attempt
	// Outcome is how the attempt ended (EventAttempt).
	Outcome Outcome
	// Took is the attempt's duration (EventAttempt) or the intent's
	// (EventDone).
	Took time.Duration
	// Wait is the delay before the retry (EventRetry).
	Wait time.Duration
	// Err is the attempt's error, the refusal, or the intent's error.
	Err error
	// Context is the context the call was made with (the caller's), so
	// that an observer can find the call's trace span in it. Nil for an
	// Event not made by a Guard.
	Context context.Context
}

// Stats is a snapshot of a [Guard]'s counters since it was made. Counters
// are read one by one without a lock, so a snapshot taken while calls run
// may be off by the calls in flight. The zero Stats is a guard that has done
// nothing. A plain value, safe to copy and share.
type Stats struct {
	// Intents is the calls started (Do, Call, CallWith).
	Intents uint64
	// Attempts is the attempts sent: first attempts, retries and hedges.
	Attempts uint64
	// Retries is the retries sent.
	Retries uint64
	// Hedges is the hedges sent.
	Hedges uint64
	// Failures is the intents that ended with an error (fallbacks aside).
	Failures uint64
	// BudgetDenials is the retries and hedges the budget refused.
	BudgetDenials uint64
	// BreakerRefusals is the attempts the breaker refused.
	BreakerRefusals uint64
	// ThrottleRefusals is the attempts the adaptive throttle refused,
	// counted apart from the breaker's refusals.
	ThrottleRefusals uint64
	// Fallbacks is the refused intents a fallback answered.
	Fallbacks uint64
	// Panics is the attempts whose function panicked. The panic is passed
	// on once everything is released; an intent that ended so counts in
	// Failures too.
	Panics uint64
	// BreakerState is the breaker's state now (StateClosed without a breaker).
	BreakerState State
	// ThrottleProbability is the adaptive throttle's refusal probability
	// now: zero without a throttler.
	ThrottleProbability float64
	// BudgetTokens is the budget's balance now, when HasBudgetTokens.
	BudgetTokens float64
	// HasBudgetTokens reports whether the budget reports its balance (a
	// Tokens method: see [Budget]), and so whether BudgetTokens means
	// anything.
	HasBudgetTokens bool
	// RetriesPerRequest is Retries / Intents: the early-warning signal. A
	// budget of ratio r keeps it near r (floor aside). Zero before the
	// first intent.
	RetriesPerRequest float64
}

// counters are the Guard's statistics. Each is bumped once per event, with
// no lock. intents is written by every call: the padding keeps its cache
// line from the read-mostly fields around it, so that concurrent calls do
// not slow down each other's reads.
type counters struct {
	_       [64]byte
	intents atomic.Uint64
	_       [56]byte

	retries, hedges, failures    atomic.Uint64
	denials, refusals, fallbacks atomic.Uint64
	firstRefusals                atomic.Uint64 // first attempts the breaker or the throttle refused
	panics                       atomic.Uint64
	throttled                    atomic.Uint64
}

// hooks is the copy-on-write list of observers added with Guard.Observe.
type hooks struct {
	fns []hook
}

type hook struct {
	id uint64
	fn func(Event)
}
