package budget

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/retrystorm/retrystorm/resil"
)

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
	// ([WindowSettings].Retried); a failure that is retried, or
	// that the budget refuses to retry, deposits nothing. This is
	// Linkerd's rule for ServiceProfile retries (linkerd2-proxy,
	// linkerd/app/outbound/src/http/retry.rs). Only a [Window]
	// takes it. In a total outage nothing funds retries but the floor.
	FundedByAnswer
)

var fundingNames = [...]string{"unset", "success", "request", "answer"}

// String returns "unset", "success", "request" or "answer".
func (f Funding) String() string {
	if int(f) < len(fundingNames) {
		return fundingNames[f]
	}
	return fmt.Sprintf("Funding(%d)", uint8(f))
}

// MarshalText returns the funding's name, as String does, or an error for
// a value that has none.
func (f Funding) MarshalText() ([]byte, error) {
	if int(f) < len(fundingNames) {
		return []byte(fundingNames[f]), nil
	}
	return nil, badSetting("Funding", f, "unknown value")
}

// UnmarshalText sets f to the funding text names. "unset" reads as
// FundingUnset, which every budget's settings refuse. On error f is left
// as it was.
func (f *Funding) UnmarshalText(text []byte) error {
	i := slices.Index(fundingNames[:], string(text))
	if i < 0 {
		return badSetting("Funding", string(text), "want one of "+strings.Join(fundingNames[:], ", "))
	}
	*f = Funding(i)
	return nil
}

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
// [TokenBucketSettings.WithDefaults] fills in the defaults and
// [TokenBucketSettings.Validate] checks the settings as NewTokenBucket
// will, so that a program that reads settings from a file keeps neither.
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
// every deposit and refund; nothing panics, and [resil.Policy.Validate]
// (so [resil.NewGuard]) refuses them with [resil.ErrNotBuilt]. A
// TokenBucket is safe for concurrent use. It reads no clock: the time
// arguments exist so that every [resil.Budget] has the same shape.
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
	s = s.WithDefaults()
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

// WithDefaults returns s with the defaults in its zero fields: MaxTokens
// 100, RetryCost 1, TimeoutCost RetryCost.
func (s TokenBucketSettings) WithDefaults() TokenBucketSettings {
	def(&s.MaxTokens, 100)
	def(&s.RetryCost, 1)
	def(&s.TimeoutCost, s.RetryCost)
	return s
}

// Validate reports the first field of s that NewTokenBucket would refuse
// (its zero fields taken as their defaults), as a [*resil.SettingError],
// or nil.
func (s TokenBucketSettings) Validate() error { return s.WithDefaults().validate() }

func (s TokenBucketSettings) validate() error {
	const p = "TokenBucketSettings."
	if err := checkRatio(p+"Ratio", s.Ratio); err != nil {
		return err
	}
	if err := checkFunding(p+"Funding", s.Funding, FundedBySuccess, FundedByRequest); err != nil {
		return err
	}
	if !finite(s.MaxTokens) || s.MaxTokens <= 0 || s.MaxTokens > 1e9 {
		return badSetting(p+"MaxTokens", s.MaxTokens, "must be in (0, 1e9]")
	}
	if !finite(s.MinTokens) || s.MinTokens < 0 || s.MinTokens > s.MaxTokens {
		return badSetting(p+"MinTokens", s.MinTokens, fmt.Sprintf("must be in [0, %v]: at most MaxTokens", s.MaxTokens))
	}
	for _, c := range []struct {
		name string
		v    float64
	}{{"RetryCost", s.RetryCost}, {"TimeoutCost", s.TimeoutCost}} {
		if !finite(c.v) || c.v <= 0 || c.v > s.MaxTokens {
			return badSetting(p+c.name, c.v, fmt.Sprintf("must be in (0, %v]: a retry must be affordable, at most MaxTokens", s.MaxTokens))
		}
	}
	return nil
}

func checkRatio(field string, r float64) error {
	if !finite(r) || r <= 0 || r > 1 {
		return badSetting(field, r, "must be in (0, 1]; it has no default")
	}
	if toFixed(r) == 0 {
		return badSetting(field, r, "below the budget's precision of 1e-6")
	}
	return nil
}

// checkFunding refuses a funding other than those given.
func checkFunding(field string, f Funding, take ...Funding) error {
	if !slices.Contains(take, f) {
		words := make([]string, len(take))
		for i, t := range take {
			words[i] = t.String()
		}
		return badSetting(field, f, "must be "+strings.Join(words[:len(words)-1], ", ")+" or "+words[len(words)-1])
	}
	return nil
}

// built reports whether NewTokenBucket made b: it never leaves Funding
// unset.
func (b *TokenBucket) built() bool { return b != nil && b.funding != FundingUnset }

// Fork returns a copy of b in its present state that shares nothing with
// it: for a simulator that plays one history on in several ways from a
// shared start. A bucket NewTokenBucket did not make forks into one that
// grants no retry either.
func (b *TokenBucket) Fork() resil.Budget {
	if b == nil {
		return b
	}
	c := &TokenBucket{ratio: b.ratio, max: b.max, cost: b.cost, timeout: b.timeout, funding: b.funding}
	c.tokens.Store(b.tokens.Load())
	return c
}

// Built names the constructor, and reports whether it made b.
func (b *TokenBucket) Built() (constructor string, ok bool) {
	return "budget.NewTokenBucket", b.built()
}

// Begin deposits Ratio when the bucket is funded by requests.
func (b *TokenBucket) Begin(now time.Time) {
	if b.built() && b.funding == FundedByRequest {
		b.deposit(b.ratio)
	}
}

// Record deposits Ratio for a success when the bucket is funded by successes.
func (b *TokenBucket) Record(now time.Time, o resil.Outcome, paid float64) {
	if o == resil.OutcomeSuccess && b.built() && b.funding == FundedBySuccess {
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
func (b *TokenBucket) Withdraw(now time.Time, after resil.Outcome) (float64, bool) {
	if !b.built() {
		return 0, false
	}
	c := b.cost
	if after == resil.OutcomeTimeout {
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

// RetryShare returns Ratio / RetryCost, or 0 for a bucket NewTokenBucket
// did not make.
func (b *TokenBucket) RetryShare() float64 {
	if !b.built() {
		return 0
	}
	return fromFixed(b.ratio) / fromFixed(b.cost)
}

// None is the control: it allows every retry and counts nothing. With
// MaxRetries it makes the count-only policy (a fixed number of retries per
// call, whatever the fleet does). Its zero value is ready and it is safe for
// concurrent use.
type None struct{}

// Begin does nothing.
func (None) Begin(time.Time) {}

// Record does nothing.
func (None) Record(time.Time, resil.Outcome, float64) {}

// Withdraw always allows, at no charge.
func (None) Withdraw(time.Time, resil.Outcome) (float64, bool) { return 0, true }

// Refund does nothing.
func (None) Refund(time.Time, float64) {}

// UsesTime returns false.
func (None) UsesTime() bool { return false }

// RetryShare returns +Inf: None caps nothing, so a Policy with Unlimited
// retries and None as its budget needs a backoff (see resil.NewGuard).
func (None) RetryShare() float64 { return math.Inf(1) }
