package resil

import (
	"math"
	"sync/atomic"
	"time"
)

// Budget decides whether a retry (or a hedge) may be sent. It sees every
// intent start and every attempt end, and is asked before each retry.
//
// The implementations in this package are [*TokenBucket] (the retry budget),
// [*WindowBudget] (its time-window form), [*GRPCThrottle] (gRFC A6),
// [*AWSQuota] (the AWS SDK retry quota), [*ConcurrencyBudget] (Envoy's
// retry budget, which also implements [InFlightBudget]) and [NoBudget]
// (the control). A nil Budget in a [Policy] means no budget: only
// MaxRetries limits retries. The AWS SDKs' adaptive mode paces first
// attempts too, so it is not a Budget: see [ClientRateLimiter].
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

// UsesTime is an optional interface of a [Budget]. A Budget whose methods
// never look at the time they are passed (it counts; it does not age)
// implements it to return false, and a [Guard] then never reads its clock
// for the budget: on the success path of a guarded call, reading the clock
// can cost more than everything else. A Budget that does not implement it
// is handed the time, read when first needed. So a new kind of budget
// needs nothing from [Policy] but its methods.
type UsesTime interface {
	UsesTime() bool
}

// budgetUsesTime reports whether b must be handed the time.
func budgetUsesTime(b Budget) bool {
	if u, ok := b.(UsesTime); ok {
		return u.UsesTime()
	}
	return b != nil
}

// Funding says which traffic pays into a budget. Its zero value,
// FundingUnset, is invalid in every budget's settings. A Funding is a plain
// value, safe to copy and share.
//
// Pick FundedBySuccess unless retries must go on through a total outage:
// it stops paying when nothing works (in `retrystorm outage`, FINDINGS.md, a
// success-funded bucket of ratio 0.1 permitted only its floor, 10 retries,
// over 1,000 calls that all failed, against 3,000 for a count of 3), while
// FundedByRequest keeps paying Ratio per intent into a dependency that is
// down.
type Funding uint8

const (
	// FundingUnset is the zero value and is invalid: the choice changes
	// what the ratio means, so it has to be made explicitly.
	FundingUnset Funding = iota
	// FundedBySuccess deposits on every successful attempt, as gRPC's
	// throttling and the AWS SDK do. Retries are then capped at a share of
	// what works: in a total outage nothing funds them but the floor.
	FundedBySuccess
	// FundedByRequest deposits on every intent started, as Finagle does.
	// Retries are capped at a share of demand, whatever fails.
	FundedByRequest
	// FundedByAnswer deposits on every attempt that ends without being
	// retried: a success, or a failure the caller does not retry
	// ([WindowBudgetSettings].Retried); a failure that is retried, or
	// that the budget refuses to retry, deposits nothing. This is
	// Linkerd's rule for ServiceProfile retries (linkerd2-proxy,
	// linkerd/app/outbound/src/http/retry.rs). Only a [WindowBudget]
	// takes it. In a total outage nothing funds retries but the floor.
	FundedByAnswer
)

var fundingNames = [...]string{"unset", "success", "request", "answer"}

// String returns "unset", "success" or "request".
func (f Funding) String() string { return enumString("Funding", fundingNames[:], uint8(f)) }

// Token amounts are kept in fixed point, as grpc-go does for its throttle,
// so that ten deposits of 0.1 make exactly one token on every platform and
// the simulator's runs are byte-identical.
const tokenScale = 1_000_000

type fixed = int64

// maxFixed bounds every amount converted to fixed point: 1e12 tokens, far
// beyond any valid setting (1e9 at most) and far from int64's overflow,
// so that sums of two amounts cannot wrap either.
const maxFixed fixed = 1e12 * tokenScale

// toFixed converts f to fixed point, clamped to [-maxFixed, maxFixed]; NaN
// is zero. Converting a float64 beyond int64's range is undefined in Go
// (on amd64 it gives the most negative int64), so the clamp comes first.
func toFixed(f float64) fixed {
	switch {
	case f != f:
		return 0
	case f >= float64(maxFixed)/tokenScale:
		return maxFixed
	case f <= -float64(maxFixed)/tokenScale:
		return -maxFixed
	}
	return fixed(math.Round(f * tokenScale))
}

func fromFixed(x fixed) float64 { return float64(x) / tokenScale }

// TokenBucketSettings configures a [TokenBucket]. The zero value is invalid
// (Ratio and Funding have no default). A plain value: copying it is safe.
type TokenBucketSettings struct {
	// Ratio is the share of funding traffic that may be retried: each
	// deposit adds Ratio tokens and a retry costs RetryCost (1). It has no
	// default: 0 < Ratio <= 1, with a precision of 1e-6.
	Ratio float64
	// Funding chooses who pays: FundedBySuccess or FundedByRequest.
	// Required.
	Funding Funding
	// MinTokens is the floor: the balance the bucket starts with, so that
	// this many retries are allowed whatever the traffic. It is the
	// deliberate hole in the scheme: in a total outage from a cold start it
	// is the only thing that funds retries. Zero means no floor.
	MinTokens float64
	// MaxTokens caps the balance, and so the burst of retries a healthy
	// period can save up for. Zero means 100.
	MaxTokens float64
	// RetryCost is what a retry after a failure costs. Zero means 1.
	RetryCost float64
	// TimeoutCost is what a retry after a timeout costs: a timeout often
	// means the dependency is overloaded, so it may be charged more.
	// Zero means RetryCost.
	TimeoutCost float64
}

// TokenBucket is a retry budget: a token bucket funded by a share of the
// traffic, with a floor.
//
// Each deposit (an intent started, or a successful attempt, per Funding)
// adds Ratio tokens up to MaxTokens; each retry withdraws RetryCost (or
// TimeoutCost) and is refused when the balance is short. Over any sequence
// of calls, retries <= Ratio × deposits + MinTokens (for unit costs), so the
// retries/requests ratio of a fleet stays near Ratio however many clients
// share the dependency. The bucket starts at MinTokens.
//
// Make one with [NewTokenBucket]. A bucket it did not make fails closed:
// the zero TokenBucket, and the nil *TokenBucket a failed NewTokenBucket
// returns, grant no retry (Withdraw refuses), hold no tokens, and ignore
// every deposit and refund; nothing panics, and [Policy.Validate] (so
// [NewGuard]) refuses them with [ErrNotBuilt]. A TokenBucket is safe for
// concurrent use. It reads no clock: the time arguments exist so that
// every [Budget] has the same shape.
type TokenBucket struct {
	// tokens changes by compare-and-swap: a healthy bucket sits at max,
	// where a deposit is a single load.
	tokens  atomic.Int64
	ratio   fixed
	max     fixed
	cost    fixed
	timeout fixed
	funding Funding
}

// NewTokenBucket returns a bucket with the given settings, or an error
// naming the invalid field.
func NewTokenBucket(s TokenBucketSettings) (*TokenBucket, error) {
	s = s.withDefaults()
	if err := s.validate(); err != nil {
		return nil, err
	}
	b := &TokenBucket{
		ratio:   toFixed(s.Ratio),
		max:     toFixed(s.MaxTokens),
		cost:    toFixed(s.RetryCost),
		timeout: toFixed(s.TimeoutCost),
		funding: s.Funding,
	}
	b.tokens.Store(toFixed(s.MinTokens))
	return b, nil
}

func (s TokenBucketSettings) withDefaults() TokenBucketSettings {
	if s.MaxTokens == 0 {
		s.MaxTokens = 100
	}
	if s.RetryCost == 0 {
		s.RetryCost = 1
	}
	if s.TimeoutCost == 0 {
		s.TimeoutCost = s.RetryCost
	}
	return s
}

func (s TokenBucketSettings) validate() error {
	const p = "TokenBucketSettings."
	if err := checkRatio(p+"Ratio", s.Ratio); err != nil {
		return err
	}
	if err := checkFunding(p+"Funding", s.Funding); err != nil {
		return err
	}
	if !finite(s.MaxTokens) || s.MaxTokens <= 0 || s.MaxTokens > 1e9 {
		return badSetting(p+"MaxTokens", s.MaxTokens, "must be in (0, 1e9]")
	}
	if !finite(s.MinTokens) || s.MinTokens < 0 || s.MinTokens > s.MaxTokens {
		return badSetting(p+"MinTokens", s.MinTokens, "must be in [0, MaxTokens]")
	}
	for _, c := range []struct {
		name string
		v    float64
	}{{"RetryCost", s.RetryCost}, {"TimeoutCost", s.TimeoutCost}} {
		if !finite(c.v) || c.v <= 0 || c.v > s.MaxTokens {
			return badSetting(p+c.name, c.v, "must be in (0, MaxTokens]: a retry must be affordable")
		}
	}
	return nil
}

func checkRatio(field string, r float64) error {
	if !finite(r) || r <= 0 || r > 1 {
		return badSetting(field, r, "required, in (0, 1]; it has no default")
	}
	if toFixed(r) == 0 {
		return badSetting(field, r, "below the precision of 1e-6")
	}
	return nil
}

func checkFunding(field string, f Funding) error {
	if f != FundedBySuccess && f != FundedByRequest {
		return badSetting(field, f, "required: FundedBySuccess or FundedByRequest")
	}
	return nil
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// built reports whether NewTokenBucket made b: it never leaves Funding
// unset.
func (b *TokenBucket) built() bool { return b != nil && b.funding != FundingUnset }

// Begin deposits Ratio when the bucket is funded by requests.
func (b *TokenBucket) Begin(now time.Time) {
	if b.built() && b.funding == FundedByRequest {
		b.deposit(b.ratio)
	}
}

// Record deposits Ratio for a success when the bucket is funded by successes.
func (b *TokenBucket) Record(now time.Time, o Outcome, paid float64) {
	if o == OutcomeSuccess && b.built() && b.funding == FundedBySuccess {
		b.deposit(b.ratio)
	}
}

// deposit adds x (in (0, maxFixed]) up to max. The balance stays in [0,
// max], so t+x cannot overflow.
func (b *TokenBucket) deposit(x fixed) {
	for {
		t := b.tokens.Load()
		if t >= b.max {
			return
		}
		if b.tokens.CompareAndSwap(t, min(b.max, t+x)) {
			return
		}
	}
}

// Withdraw takes RetryCost (TimeoutCost after an OutcomeTimeout) if the balance
// covers it.
func (b *TokenBucket) Withdraw(now time.Time, after Outcome) (float64, bool) {
	if !b.built() {
		return 0, false
	}
	c := b.cost
	if after == OutcomeTimeout {
		c = b.timeout
	}
	for {
		t := b.tokens.Load()
		if t < c {
			return 0, false
		}
		if b.tokens.CompareAndSwap(t, t-c) {
			return fromFixed(c), true
		}
	}
}

// UsesTime returns false: a token bucket counts, it does not age.
func (b *TokenBucket) UsesTime() bool { return false }

// Refund gives back a withdrawn charge, up to MaxTokens. A charge that is
// not a positive number (NaN, negative) gives back nothing, and one beyond
// MaxTokens gives back MaxTokens.
func (b *TokenBucket) Refund(now time.Time, cost float64) {
	if cost > 0 && b.built() {
		b.deposit(toFixed(cost))
	}
}

// Tokens returns the balance.
func (b *TokenBucket) Tokens(now time.Time) float64 {
	if !b.built() {
		return 0
	}
	return fromFixed(b.tokens.Load())
}

// NoBudget is the control: it allows every retry and counts nothing. With
// MaxRetries it makes the count-only policy (a fixed number of retries per
// call, whatever the fleet does). Its zero value is ready and it is safe for
// concurrent use.
type NoBudget struct{}

// Begin does nothing.
func (NoBudget) Begin(time.Time) {}

// Record does nothing.
func (NoBudget) Record(time.Time, Outcome, float64) {}

// Withdraw always allows, at no charge.
func (NoBudget) Withdraw(time.Time, Outcome) (float64, bool) { return 0, true }

// Refund does nothing.
func (NoBudget) Refund(time.Time, float64) {}

// UsesTime returns false.
func (NoBudget) UsesTime() bool { return false }
