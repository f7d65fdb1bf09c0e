package budget

import (
	"math"
	"sync"
	"time"

	"github.com/retrystorm/retrystorm/resil"
)

// ClientRateLimiterSettings configures a [ClientRateLimiter]. The zero
// value gives the AWS SDKs' adaptive retry mode, with the constants of its
// specification (botocore's retries/adaptive.py and throttling.py,
// aws-sdk-go-v2's aws/retry/adaptive_ratelimit.go). A plain value: copying
// it is safe. [ClientRateLimiterSettings.WithDefaults] fills in the
// defaults and [ClientRateLimiterSettings.Validate] checks the settings as
// NewClientRateLimiter will.
type ClientRateLimiterSettings struct {
	// Beta is the share of the measured rate the limiter drops to on a
	// throttle. Zero means 0.7. In (0, 1).
	Beta float64
	// ScaleConstant is CUBIC's C: how fast the rate grows back after a
	// throttle. Zero means 0.4. In (0, 1e3].
	ScaleConstant float64
	// Smoothing weighs the newest measurement in the send-rate average.
	// Zero means 0.8. In (0, 1].
	Smoothing float64
	// MinFillRate is the least rate, in attempts per second, the bucket
	// refills at. Zero means 0.5.
	MinFillRate float64
	// RequestCost is what one attempt takes from the bucket. Zero means 1.
	RequestCost float64
	// FailOnNoTokens refuses an attempt (resil.ErrRateLimited) when the bucket
	// is short, instead of telling the caller how long to wait. The AWS
	// SDK's FailOnNoAttemptTokens; false, as there, by default.
	FailOnNoTokens bool
}

// ClientRateLimiter is the AWS SDKs' adaptive retry mode: a client-side
// rate limiter on every attempt, first attempts included. It stays off
// until a response says the client is throttled; from then on every
// attempt takes a token from a bucket that refills at a rate that CUBIC
// (RFC 8312) sets: on a throttle the rate drops to Beta times the rate
// measured (or the fill rate, if lower), and after it grows back along
//
//	rate(t) = ScaleConstant × (t − K)³ + Wmax,  K = ∛(Wmax × (1 − Beta) / ScaleConstant)
//
// where Wmax is the rate at the last throttle and t the seconds since.
// The new rate is never more than twice the send rate measured over
// half-second buckets (smoothed by Smoothing); the bucket holds at most
// one second of it (at least one token), and refills at no less than
// MinFillRate.
//
// It does not fit [resil.Budget]: it paces first attempts as well as
// retries, and it delays rather than refuses. It is a [resil.Pacer]: a
// [resil.Policy] holds it as Pacer, and with the AWS standard mode's retry
// quota ([AWSQuota]) as the budget it makes the AWS adaptive mode.
//
// Make one with [NewClientRateLimiter]. One it did not make (the zero
// value, or the nil pointer a failed constructor returns) fails closed:
// [resil.Policy.Validate] refuses it, Pace refuses every attempt with
// resil.ErrNotBuilt, and Acquire never grants a token. It is safe for
// concurrent use. It reads no clock: time is an argument, and the first
// call's time starts its rate measurement, as the SDK's construction does.
type ClientRateLimiter struct {
	mu sync.Mutex

	beta, scale, smooth, minFill, cost float64
	failFast                           bool

	started bool
	enabled bool // a throttle was seen: the bucket applies

	// the bucket
	tokens, capacity, fillRate float64
	lastRefill                 time.Time
	refilled                   bool

	// the send-rate measurement
	measured   float64
	lastBucket float64 // seconds
	count      float64

	// CUBIC
	wMax         float64
	k            float64
	lastThrottle time.Time
}

// NewClientRateLimiter returns a limiter, or an error naming the invalid
// field.
func NewClientRateLimiter(s ClientRateLimiterSettings) (*ClientRateLimiter, error) {
	s = s.WithDefaults()
	if err := s.validate(); err != nil {
		return nil, err
	}
	return &ClientRateLimiter{beta: s.Beta, scale: s.ScaleConstant, smooth: s.Smoothing,
		minFill: s.MinFillRate, cost: s.RequestCost, failFast: s.FailOnNoTokens}, nil
}

// WithDefaults returns s with the AWS SDKs' constants in its zero fields:
// Beta 0.7, ScaleConstant 0.4, Smoothing 0.8, MinFillRate 0.5,
// RequestCost 1.
func (s ClientRateLimiterSettings) WithDefaults() ClientRateLimiterSettings {
	def(&s.Beta, 0.7)
	def(&s.ScaleConstant, 0.4)
	def(&s.Smoothing, 0.8)
	def(&s.MinFillRate, 0.5)
	def(&s.RequestCost, 1)
	return s
}

// Validate reports the first field of s that NewClientRateLimiter would
// refuse (its zero fields taken as their defaults), as a
// [*resil.SettingError], or nil.
func (s ClientRateLimiterSettings) Validate() error { return s.WithDefaults().validate() }

func (s ClientRateLimiterSettings) validate() error {
	const p = "ClientRateLimiterSettings."
	switch {
	case !finite(s.Beta) || s.Beta <= 0 || s.Beta >= 1:
		return badSetting(p+"Beta", s.Beta, "must be in (0, 1)")
	case !finite(s.ScaleConstant) || s.ScaleConstant <= 0 || s.ScaleConstant > 1e3:
		return badSetting(p+"ScaleConstant", s.ScaleConstant, "must be in (0, 1e3]")
	case !finite(s.Smoothing) || s.Smoothing <= 0 || s.Smoothing > 1:
		return badSetting(p+"Smoothing", s.Smoothing, "must be in (0, 1]")
	case !finite(s.MinFillRate) || s.MinFillRate <= 0 || s.MinFillRate > 1e9:
		return badSetting(p+"MinFillRate", s.MinFillRate, "must be in (0, 1e9]")
	case !finite(s.RequestCost) || s.RequestCost <= 0 || s.RequestCost > 1e6:
		return badSetting(p+"RequestCost", s.RequestCost, "must be in (0, 1e6]")
	}
	return nil
}

func (l *ClientRateLimiter) built() bool { return l != nil && l.beta > 0 }

// Built names the constructor, and reports whether it made l.
func (l *ClientRateLimiter) Built() (constructor string, ok bool) {
	return "budget.NewClientRateLimiter", l.built()
}

// Pace asks to send one attempt at now, for a [resil.Policy]: it returns
// zero when the attempt may go (its token is taken), or the wait after
// which to ask again; with FailOnNoTokens it returns resil.ErrRateLimited
// instead of a wait, and for a limiter NewClientRateLimiter did not make,
// resil.ErrNotBuilt.
func (l *ClientRateLimiter) Pace(now time.Time) (time.Duration, error) {
	if !l.built() {
		return 0, resil.ErrNotBuilt
	}
	d, ok := l.Acquire(now)
	switch {
	case ok:
		return 0, nil
	case l.failFast:
		return 0, resil.ErrRateLimited
	}
	return d, nil
}

// seconds is the SDK's time scale: Unix seconds as a float.
func seconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// start begins the measurement at the first call's time. Called with mu
// held.
func (l *ClientRateLimiter) start(now time.Time) {
	if !l.started {
		l.started = true
		l.lastBucket = math.Floor(seconds(now))
		l.lastThrottle = now
	}
}

// Acquire asks to send one attempt at now. It returns (0, true) and takes
// the attempt's token when it may go; otherwise (wait, false), where wait
// is how long until the bucket holds the token, and the caller asks again
// then. With FailOnNoTokens the caller gives up instead. Before the first
// throttle every attempt goes.
func (l *ClientRateLimiter) Acquire(now time.Time) (wait time.Duration, ok bool) {
	if !l.built() {
		return time.Hour, false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.start(now)
	if !l.enabled {
		return 0, true
	}
	l.refill(now)
	if l.cost > l.tokens {
		// Rounded up, and at least 1ns, so that a caller who waits this
		// long finds time has moved and the bucket has grown.
		w := math.Ceil((l.cost - l.tokens) / l.fillRate * 1e9)
		return time.Duration(max(1, min(w, float64(time.Hour)))), false
	}
	l.tokens -= l.cost
	return 0, true
}

// Update records the response to an attempt: throttled says the server
// throttled it (HTTP 429, AWS's Throttling error codes;
// resil.OutcomeThrottled). Every response is recorded, as the SDK does: it
// measures the send rate.
func (l *ClientRateLimiter) Update(now time.Time, throttled bool) {
	if !l.built() {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.start(now)
	l.measure(now)
	var rate float64
	if throttled {
		use := l.measured
		if l.enabled {
			use = math.Min(l.measured, l.fillRate)
		}
		l.wMax = use
		l.k = l.zeroPoint()
		l.lastThrottle = now
		rate = use * l.beta
		l.enabled = true
	} else {
		// K depends on Wmax alone, which only a throttle changes: the
		// SDKs recompute the same value here on every response.
		d := now.Sub(l.lastThrottle).Seconds() - l.k
		rate = l.scale*d*d*d + l.wMax
	}
	rate = math.Min(rate, 2*l.measured)
	l.refill(now)
	l.fillRate = math.Max(rate, l.minFill)
	l.capacity = math.Max(rate, 1)
	l.tokens = math.Min(l.tokens, l.capacity)
}

// zeroPoint is CUBIC's K: the seconds after a throttle at which the rate
// is back at Wmax.
func (l *ClientRateLimiter) zeroPoint() float64 {
	return math.Pow(l.wMax*(1-l.beta)/l.scale, 1./3.)
}

// measure counts one response in the send-rate measurement: half-second
// buckets, smoothed.
func (l *ClientRateLimiter) measure(now time.Time) {
	bucket := math.Floor(seconds(now)*2) / 2
	l.count++
	if bucket > l.lastBucket {
		current := l.count / (bucket - l.lastBucket)
		l.measured = current*l.smooth + l.measured*(1-l.smooth)
		l.count = 0
		l.lastBucket = bucket
	}
}

// refill adds the tokens the fill rate made since the last refill, up to
// the capacity. A now earlier than the last refill adds nothing.
func (l *ClientRateLimiter) refill(now time.Time) {
	if !l.refilled {
		l.lastRefill, l.refilled = now, true
		return
	}
	if dt := now.Sub(l.lastRefill); dt > 0 {
		l.tokens = math.Min(l.tokens+dt.Seconds()*l.fillRate, l.capacity)
		l.lastRefill = now
	}
}

// RateLimiterState is a snapshot of a [ClientRateLimiter], for tests,
// metrics and reports. A plain value.
type RateLimiterState struct {
	// Enabled reports whether a throttle was seen and the bucket applies.
	Enabled bool
	// FillRate is the bucket's refill rate, attempts per second.
	FillRate float64
	// Capacity is the bucket's size.
	Capacity float64
	// Tokens is the bucket's balance (as of the last refill).
	Tokens float64
	// Measured is the smoothed send rate, attempts per second.
	Measured float64
}

// State returns a snapshot of the limiter.
func (l *ClientRateLimiter) State() RateLimiterState {
	if !l.built() {
		return RateLimiterState{}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return RateLimiterState{Enabled: l.enabled, FillRate: l.fillRate, Capacity: l.capacity, Tokens: l.tokens, Measured: l.measured}
}
