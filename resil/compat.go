package resil

import (
	"sync"
	"time"
)

// GRPCThrottleSettings configures a [GRPCThrottle] with the two numbers of
// a gRPC service config's retryThrottling. The zero value is invalid: both
// are required. A plain value: copying it is safe.
type GRPCThrottleSettings struct {
	// MaxTokens is the bucket size: 0 < MaxTokens <= 1000. Required.
	MaxTokens float64
	// TokenRatio is what a success adds: 0 < TokenRatio, at most three
	// decimal places count. Required.
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
	Uncounted []Outcome
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
// panic on nothing, and [Policy.Validate] refuses them with [ErrNotBuilt].
// It is safe for concurrent use and reads no clock.
type GRPCThrottle struct {
	mu        sync.Mutex
	tokens    int64 // thousandths, as in the spec's fixed-point arithmetic
	max       int64
	ratio     int64
	uncounted [OutcomeThrottled + 1]bool // by outcome: failures that take no token
}

// NewGRPCThrottle returns a throttle, or an error naming the invalid field.
func NewGRPCThrottle(s GRPCThrottleSettings) (*GRPCThrottle, error) {
	if !finite(s.MaxTokens) || s.MaxTokens <= 0 || s.MaxTokens > 1000 {
		return nil, badSetting("GRPCThrottleSettings.MaxTokens", s.MaxTokens, "required, in (0, 1000]")
	}
	r := int64(s.TokenRatio*1000 + 0.5)
	if !finite(s.TokenRatio) || s.TokenRatio <= 0 || r == 0 || s.TokenRatio > 1000 {
		return nil, badSetting("GRPCThrottleSettings.TokenRatio", s.TokenRatio, "required, in (0, 1000] with at least 0.001")
	}
	m := int64(s.MaxTokens*1000 + 0.5)
	g := &GRPCThrottle{tokens: m, max: m, ratio: r}
	for _, o := range s.Uncounted {
		if !o.failed() {
			return nil, badSetting("GRPCThrottleSettings.Uncounted", o, "lists failures only: failure, timeout or throttled")
		}
		g.uncounted[o] = true
	}
	return g, nil
}

// built reports whether NewGRPCThrottle made g: MaxTokens is required.
func (g *GRPCThrottle) built() bool { return g != nil && g.max > 0 }

// Begin does nothing: gRPC's throttle is funded by successes.
func (g *GRPCThrottle) Begin(time.Time) {}

// Record takes a token for a failure or a timeout (unless its outcome is
// one of the settings' Uncounted) and adds TokenRatio for a success.
func (g *GRPCThrottle) Record(now time.Time, o Outcome, paid float64) {
	if !g.built() {
		return
	}
	g.mu.Lock()
	switch {
	case o == OutcomeSuccess:
		g.tokens = min(g.max, g.tokens+g.ratio)
	case o.failed() && !g.uncounted[o]:
		g.tokens = max(0, g.tokens-1000)
	}
	g.mu.Unlock()
}

// Withdraw allows a retry while the balance is above MaxTokens/2. It
// charges nothing.
func (g *GRPCThrottle) Withdraw(time.Time, Outcome) (float64, bool) {
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
// and [Policy.Validate] refuses them with [ErrNotBuilt]. (The zero
// AWSQuotaSettings, unlike the zero AWSQuota, are the SDKs' standard
// mode.) It is safe for concurrent use and reads no clock.
type AWSQuota struct {
	mu                                    sync.Mutex
	tokens, capacity, cost, timeout, incr int
}

// NewAWSQuota returns a quota, or an error naming the invalid field.
func NewAWSQuota(s AWSQuotaSettings) (*AWSQuota, error) {
	def := func(v, d int) int {
		if v == 0 {
			return d
		}
		return v
	}
	q := &AWSQuota{
		capacity: def(s.Capacity, 500),
		cost:     def(s.RetryCost, 5),
		timeout:  def(s.TimeoutCost, 10),
		incr:     def(s.NoRetryIncrement, 1),
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"Capacity", q.capacity}, {"RetryCost", q.cost}, {"TimeoutCost", q.timeout}, {"NoRetryIncrement", q.incr}} {
		if f.v < 0 || f.v > 1_000_000 {
			return nil, badSetting("AWSQuotaSettings."+f.name, f.v, "must be in [0, 1e6]")
		}
	}
	if s.NoIncrement {
		q.incr = 0
	}
	q.tokens = q.capacity
	return q, nil
}

// built reports whether NewAWSQuota made q: its capacity is never zero.
func (q *AWSQuota) built() bool { return q != nil && q.capacity > 0 }

// Begin does nothing: the quota is funded by successes.
func (q *AWSQuota) Begin(time.Time) {}

// Record adds NoRetryIncrement for an attempt that succeeded, and gives a
// successful retry its cost back too.
func (q *AWSQuota) Record(now time.Time, o Outcome, paid float64) {
	if o != OutcomeSuccess || !q.built() {
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
func (q *AWSQuota) Withdraw(now time.Time, after Outcome) (float64, bool) {
	if !q.built() {
		return 0, false
	}
	c := q.cost
	if after == OutcomeTimeout {
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
