package budget

import (
	"sync/atomic"
	"time"

	"github.com/retrystorm/retrystorm/resil"
)

// ConcurrencySettings configures a [Concurrency] budget. The zero value is
// invalid: a budget that allows no retry at all is better written as
// MaxRetries 0. A plain value: copying it is safe.
// [ConcurrencySettings.Validate] checks the settings as NewConcurrency
// will.
type ConcurrencySettings struct {
	// Percent is the share of the attempts in flight that retries may
	// hold, in percent: in [0, 100]. Envoy's retry_budget.budget_percent.
	// No default here (Envoy's is 20, which the importers apply).
	Percent float64
	// MinConcurrency is the floor: this many retries may be active
	// whatever the traffic. Envoy's retry_budget.min_retry_concurrency
	// (Envoy's default is 3), and with Percent 0 it is Envoy's plain
	// circuit breaker max_retries. Zero means no floor.
	MinConcurrency int
}

// Concurrency is Envoy's retry budget (and failsafe-go's): the
// retries active at once may be at most Percent of the requests active,
// and never fewer than MinConcurrency. A retry is refused when
//
//	active retries >= max(floor(Percent/100 × active requests), MinConcurrency)
//
// computed as Envoy's ResourceManagerImpl does, in double precision and
// truncated (so 29% of 100 active requests allows 28, not 29).
//
// Active requests are the attempts in flight: first attempts, retries and
// hedges that were sent and have not ended (Envoy counts its upstream
// requests and pending requests; a retry waiting in backoff is neither).
// A retry is active from the moment it is scheduled (Withdraw, before its
// backoff) until the retry attempt ends or is abandoned, as Envoy takes
// the retry resource in RetryStateImpl::shouldRetry and releases it at the
// next retry decision or when the request ends. The attempt whose failure
// asks for the retry has ended by then: resil records an attempt's end
// before it asks for a retry.
//
// Unlike a token bucket it saves nothing up and owes nothing: the
// allowance follows the concurrency of the moment, so a burst of failures
// against a fleet with many requests in flight may retry many at once, and
// a slow dependency (more requests in flight) raises the allowance.
//
// It implements [InFlight]: a driver that uses it without a [resil.Policy]
// must call Sent when a retry or a hedge is sent.
//
// Make one with [NewConcurrency]. A Concurrency budget it did not make
// (the zero value, or the nil pointer a failed constructor returns) fails
// closed: it grants no retry, and [resil.Policy.Validate] refuses it with
// [resil.ErrNotBuilt]. It is safe for concurrent use and reads no clock;
// like Envoy's counters, the check and the increment are not one atomic
// step, so concurrent callers may exceed the limit by a few for a moment.
type Concurrency struct {
	active  atomic.Int64 // attempts in flight
	retries atomic.Int64 // retries and hedges holding a slot
	percent float64
	min     int64
}

// NewConcurrency returns a budget, or an error naming the invalid field.
func NewConcurrency(s ConcurrencySettings) (*Concurrency, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return &Concurrency{percent: s.Percent, min: int64(s.MinConcurrency)}, nil
}

// Validate reports the first field of s that NewConcurrency would refuse,
// as a [*resil.SettingError], or nil. Nothing has a default.
func (s ConcurrencySettings) Validate() error {
	const p = "ConcurrencySettings."
	if !finite(s.Percent) || s.Percent < 0 || s.Percent > 100 {
		return badSetting(p+"Percent", s.Percent, "must be in [0, 100]")
	}
	if s.MinConcurrency < 0 || s.MinConcurrency > 1_000_000 {
		return badSetting(p+"MinConcurrency", s.MinConcurrency, "must be in [0, 1e6]")
	}
	if s.Percent == 0 && s.MinConcurrency == 0 {
		return badSetting(p+"Percent", nil, "Percent and MinConcurrency are both 0: the budget would allow no retry")
	}
	return nil
}

func (b *Concurrency) built() bool { return b != nil && (b.percent > 0 || b.min > 0) }

// Built names the constructor, and reports whether it made b.
func (b *Concurrency) Built() (constructor string, ok bool) {
	return "budget.NewConcurrency", b.built()
}

// limit is the most retries that may be active now.
func (b *Concurrency) limit() int64 {
	a := max(b.active.Load(), 0)
	// Envoy: std::max<uint64_t>(budget_percent / 100.0 * current_active,
	// min_retry_concurrency). Go does not fuse a division and a
	// multiplication, so this is the same double on every platform.
	return max(int64(b.percent/100*float64(a)), b.min)
}

// Begin counts a first attempt in flight.
func (b *Concurrency) Begin(time.Time) {
	if b.built() {
		b.active.Add(1)
	}
}

// Sent counts a retry or a hedge in flight.
func (b *Concurrency) Sent(time.Time, resil.Kind) {
	if b.built() {
		b.active.Add(1)
	}
}

// Record counts an attempt's end, and frees a retry's slot (paid > 0).
func (b *Concurrency) Record(now time.Time, o resil.Outcome, paid float64) {
	if !b.built() {
		return
	}
	decPositive(&b.active)
	if paid > 0 {
		decPositive(&b.retries)
	}
}

// Withdraw takes a retry slot if fewer than the limit are active. The
// charge is 1: the slot.
func (b *Concurrency) Withdraw(now time.Time, after resil.Outcome) (float64, bool) {
	if !b.built() {
		return 0, false
	}
	for {
		c := b.retries.Load()
		if c >= b.limit() {
			return 0, false
		}
		if b.retries.CompareAndSwap(c, c+1) {
			return 1, true
		}
	}
}

// Refund frees the slot of a retry that was never sent.
func (b *Concurrency) Refund(now time.Time, cost float64) {
	if b.built() && cost > 0 {
		decPositive(&b.retries)
	}
}

// UsesTime returns false: the budget counts, it does not age.
func (b *Concurrency) UsesTime() bool { return false }

// Tokens returns how many more retries may start now.
func (b *Concurrency) Tokens(time.Time) float64 {
	if !b.built() {
		return 0
	}
	return float64(max(b.limit()-b.retries.Load(), 0))
}

// Active returns the attempts in flight and the retries holding a slot.
func (b *Concurrency) Active() (requests, retries int64) {
	if b == nil {
		return 0, 0
	}
	return b.active.Load(), b.retries.Load()
}

// decPositive decrements x unless it is zero, so that a driver which ends
// more attempts than it started cannot drive a count below zero.
func decPositive(x *atomic.Int64) {
	for {
		v := x.Load()
		if v <= 0 || x.CompareAndSwap(v, v-1) {
			return
		}
	}
}
