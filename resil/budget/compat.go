package budget

import (
	"fmt"
	"sync"
	"time"

	"github.com/retrystorm/retrystorm/resil"
)

// GRPCThrottleSettings configures a [GRPCThrottle] with the two numbers of
// a gRPC service config's retryThrottling. The zero value is invalid: both
// are required. A plain value: copying it is safe, though the copies share
// Uncounted. [GRPCThrottleSettings.Validate] checks the settings as
// NewGRPCThrottle will.
type GRPCThrottleSettings struct {
	// MaxTokens is the bucket size: 0 < MaxTokens <= 1000. Required.
	MaxTokens float64
	// TokenRatio is what a success adds: 0.001 <= TokenRatio <= 1000, at
	// most three decimal places count. Required.
	TokenRatio float64
	// Uncounted lists the failed outcomes that take no token. grpc-go
	// takes a token only for an attempt whose status the method's
	// retryPolicy lists as retryable (or that carried pushback): a
	// failure whose status is not retryable, and the end of the caller's
	// own deadline, leave the bucket alone (grpc-go stream.go,
	// csAttempt.shouldRetry). A caller that reports every failure,
	// retryable or not, lists here the outcomes its policy does not retry.
	// Nil: every failure takes a token, for callers that already report
	// only retryable statuses as failures (resilgrpc's Guards do).
	Uncounted []resil.Outcome
}

// GRPCThrottle is gRPC's client-side retry throttling, as gRFC A6 specifies
// it: the bucket starts full at MaxTokens; every failed attempt takes one
// token (except those of GRPCThrottleSettings.Uncounted) and every success
// adds TokenRatio (never beyond MaxTokens); retries
// and hedges are allowed only while the balance is above MaxTokens/2.
// Unlike [TokenBucket], a retry itself costs nothing: failures pay.
//
// Make one with [NewGRPCThrottle]. A throttle it did not make fails
// closed: the zero GRPCThrottle and a nil *GRPCThrottle grant no retry and
// panic on nothing, and [resil.Policy.Validate] refuses them with
// [resil.ErrNotBuilt]. It is safe for concurrent use and reads no clock.
type GRPCThrottle struct {
	mu        sync.Mutex
	tokens    int64 // thousandths, as in the spec's fixed-point arithmetic
	max       int64
	ratio     int64
	uncounted [resil.OutcomeThrottled + 1]bool // by outcome: failures that take no token
}

// NewGRPCThrottle returns a throttle, or an error naming the invalid field.
func NewGRPCThrottle(s GRPCThrottleSettings) (*GRPCThrottle, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	m := int64(s.MaxTokens*1000 + 0.5)
	g := &GRPCThrottle{tokens: m, max: m, ratio: int64(s.TokenRatio*1000 + 0.5)}
	for _, o := range s.Uncounted {
		g.uncounted[o] = true
	}
	return g, nil
}

// Validate reports the first field of s that NewGRPCThrottle would
// refuse, as a [*resil.SettingError], or nil. Nothing has a default.
func (s GRPCThrottleSettings) Validate() error {
	if !finite(s.MaxTokens) || s.MaxTokens <= 0 || s.MaxTokens > 1000 {
		return badSetting("GRPCThrottleSettings.MaxTokens", s.MaxTokens, "must be in (0, 1000]")
	}
	if !finite(s.TokenRatio) || s.TokenRatio < 0.001 || s.TokenRatio > 1000 {
		return badSetting("GRPCThrottleSettings.TokenRatio", s.TokenRatio, "must be in [0.001, 1000]")
	}
	for _, o := range s.Uncounted {
		if !o.Failed() {
			return badSetting("GRPCThrottleSettings.Uncounted", o, "lists failures only: failure, timeout or throttled")
		}
	}
	return nil
}

// built reports whether NewGRPCThrottle made g: MaxTokens is required.
func (g *GRPCThrottle) built() bool { return g != nil && g.max > 0 }

// Fork returns a copy of g in its present state that shares nothing with
// it: for a simulator that plays one history on in several ways from a
// shared start. A throttle NewGRPCThrottle did not make forks into one
// that grants no retry either.
func (g *GRPCThrottle) Fork() resil.Budget {
	if g == nil {
		return g
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return &GRPCThrottle{tokens: g.tokens, max: g.max, ratio: g.ratio, uncounted: g.uncounted}
}

// Built names the constructor, and reports whether it made g.
func (g *GRPCThrottle) Built() (constructor string, ok bool) {
	return "budget.NewGRPCThrottle", g.built()
}

// Begin does nothing: gRPC's throttle is funded by successes.
func (g *GRPCThrottle) Begin(time.Time) {}

// Record takes a token for a failure or a timeout (unless its outcome is
// one of the settings' Uncounted) and adds TokenRatio for a success.
func (g *GRPCThrottle) Record(now time.Time, o resil.Outcome, paid float64) {
	if !g.built() {
		return
	}
	g.mu.Lock()
	switch {
	case o == resil.OutcomeSuccess:
		g.tokens = min(g.max, g.tokens+g.ratio)
	case o.Failed() && !g.uncounted[o]:
		g.tokens = max(0, g.tokens-1000)
	}
	g.mu.Unlock()
}

// Withdraw allows a retry while the balance is above MaxTokens/2. It
// charges nothing.
func (g *GRPCThrottle) Withdraw(time.Time, resil.Outcome) (float64, bool) {
	if !g.built() {
		return 0, false
	}
	g.mu.Lock()
	ok := g.tokens*2 > g.max
	g.mu.Unlock()
	return 0, ok
}

// Refund does nothing: nothing was charged.
func (g *GRPCThrottle) Refund(time.Time, float64) {}

// UsesTime returns false: the throttle counts, it does not age.
func (g *GRPCThrottle) UsesTime() bool { return false }

// Tokens returns the balance.
func (g *GRPCThrottle) Tokens(time.Time) float64 {
	if !g.built() {
		return 0
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return float64(g.tokens) / 1000
}

// AWSQuotaSettings configures an [AWSQuota]. The zero value gives the AWS
// SDKs' standard retry mode. A plain value: copying it is safe.
// [AWSQuotaSettings.WithDefaults] fills in the defaults and
// [AWSQuotaSettings.Validate] checks the settings as NewAWSQuota will.
type AWSQuotaSettings struct {
	// Capacity is the bucket size, which it starts at. Zero means 500.
	Capacity int
	// RetryCost is charged for a retry. Zero means 5.
	RetryCost int
	// TimeoutCost is charged for a retry after a timeout. Zero means 10.
	TimeoutCost int
	// NoRetryIncrement is added when an attempt succeeds, a retry as well
	// as a first attempt (a retry also gets its own cost back). Zero means
	// 1.
	NoRetryIncrement int
	// NoIncrement makes an attempt that succeeds add nothing, so
	// that only a retry that succeeds gives back (its own cost): the quota
	// of aws-sdk-go-v2's adaptive mode as it ships, whose attempt token
	// never reaches the standard retryer's increment (aws/retry/adaptive.go,
	// AdaptiveMode.GetAttemptToken and GetInitialToken; aws-sdk-go-v2
	// issue 3550). A client then stops retrying for good once its net
	// retries have spent the capacity.
	NoIncrement bool
}

// AWSQuota is the AWS SDKs' retry quota (standard retry mode): a bucket of
// 500 that starts full; a retry costs 5, or 10 after a timeout; a retried
// attempt that succeeds gives its cost back, and every attempt that
// succeeds, retries included, adds 1: aws-sdk-go-v2 takes an attempt token
// for each attempt, whose release on success adds NoRetryIncrement
// (aws/retry/middleware.go, handleAttempt: GetAttemptToken, then
// releaseRetryToken and releaseAttemptToken; standard.go,
// GetInitialToken). When the balance is short, no retry.
//
// Make one with [NewAWSQuota]. A quota it did not make fails closed: the
// zero AWSQuota and a nil *AWSQuota grant no retry and panic on nothing,
// and [resil.Policy.Validate] refuses them with [resil.ErrNotBuilt]. (The zero
// AWSQuotaSettings, unlike the zero AWSQuota, are the SDKs' standard
// mode.) It is safe for concurrent use and reads no clock.
type AWSQuota struct {
	mu                                    sync.Mutex
	tokens, capacity, cost, timeout, incr int
}

// NewAWSQuota returns a quota, or an error naming the invalid field.
func NewAWSQuota(s AWSQuotaSettings) (*AWSQuota, error) {
	s = s.WithDefaults()
	if err := s.validate(); err != nil {
		return nil, err
	}
	q := &AWSQuota{tokens: s.Capacity, capacity: s.Capacity, cost: s.RetryCost, timeout: s.TimeoutCost, incr: s.NoRetryIncrement}
	if s.NoIncrement {
		q.incr = 0
	}
	return q, nil
}

// WithDefaults returns s with the AWS SDKs' standard mode in its zero
// fields: Capacity 500, RetryCost 5, TimeoutCost 10, NoRetryIncrement 1.
func (s AWSQuotaSettings) WithDefaults() AWSQuotaSettings {
	def(&s.Capacity, 500)
	def(&s.RetryCost, 5)
	def(&s.TimeoutCost, 10)
	def(&s.NoRetryIncrement, 1)
	return s
}

// Validate reports the first field of s that NewAWSQuota would refuse (its
// zero fields taken as their defaults), as a [*resil.SettingError], or
// nil.
func (s AWSQuotaSettings) Validate() error { return s.WithDefaults().validate() }

func (s AWSQuotaSettings) validate() error {
	const p = "AWSQuotaSettings."
	if s.Capacity < 1 || s.Capacity > 1_000_000 {
		return badSetting(p+"Capacity", s.Capacity, "must be in [1, 1e6]")
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"RetryCost", s.RetryCost}, {"TimeoutCost", s.TimeoutCost}} {
		if f.v < 1 || f.v > s.Capacity {
			return badSetting(p+f.name, f.v, fmt.Sprintf("must be in [1, %d]: a retry must be affordable, at most Capacity", s.Capacity))
		}
	}
	if s.NoRetryIncrement < 0 || s.NoRetryIncrement > 1_000_000 {
		return badSetting(p+"NoRetryIncrement", s.NoRetryIncrement, "must be in [0, 1e6]")
	}
	return nil
}

// built reports whether NewAWSQuota made q: its capacity is never zero.
func (q *AWSQuota) built() bool { return q != nil && q.capacity > 0 }

// Built names the constructor, and reports whether it made q.
func (q *AWSQuota) Built() (constructor string, ok bool) { return "budget.NewAWSQuota", q.built() }

// Begin does nothing: the quota is funded by successes.
func (q *AWSQuota) Begin(time.Time) {}

// Record adds NoRetryIncrement for an attempt that succeeded, and gives a
// successful retry its cost back too.
func (q *AWSQuota) Record(now time.Time, o resil.Outcome, paid float64) {
	if o != resil.OutcomeSuccess || !q.built() {
		return
	}
	add := q.incr
	if paid > 0 {
		add += q.units(paid)
	}
	q.mu.Lock()
	q.tokens = min(q.capacity, q.tokens+add)
	q.mu.Unlock()
}

// units rounds a positive charge to whole tokens, at most the capacity: a
// float beyond int's range converts to garbage in Go, so it is clamped
// first.
func (q *AWSQuota) units(cost float64) int {
	if cost >= float64(q.capacity) {
		return q.capacity
	}
	return int(cost + 0.5)
}

// Withdraw takes RetryCost (TimeoutCost after an OutcomeTimeout) if the balance
// covers it.
func (q *AWSQuota) Withdraw(now time.Time, after resil.Outcome) (float64, bool) {
	if !q.built() {
		return 0, false
	}
	c := q.cost
	if after == resil.OutcomeTimeout {
		c = q.timeout
	}
	q.mu.Lock()
	ok := q.tokens >= c
	if ok {
		q.tokens -= c
	}
	q.mu.Unlock()
	if !ok {
		return 0, false
	}
	return float64(c), true
}

// UsesTime returns false: the quota counts, it does not age.
func (q *AWSQuota) UsesTime() bool { return false }

// Refund gives back a withdrawn charge.
func (q *AWSQuota) Refund(now time.Time, cost float64) {
	if !(cost > 0) || !q.built() {
		return
	}
	add := q.units(cost)
	q.mu.Lock()
	q.tokens = min(q.capacity, q.tokens+add)
	q.mu.Unlock()
}

// Tokens returns the balance.
func (q *AWSQuota) Tokens(time.Time) float64 {
	if !q.built() {
		return 0
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	return float64(q.tokens)
}

// RetryShare returns TokenRatio: in sustained failure, failed attempts (and
// so retries) cannot outrun TokenRatio per success for long. It is 0 for a
// throttle NewGRPCThrottle did not make.
func (g *GRPCThrottle) RetryShare() float64 {
	if !g.built() {
		return 0
	}
	return float64(g.ratio) / 1000
}

// RetryShare returns NoRetryIncrement / RetryCost, or 0 for a quota
// NewAWSQuota did not make.
func (q *AWSQuota) RetryShare() float64 {
	if !q.built() {
		return 0
	}
	return float64(q.incr) / float64(q.cost)
}
