package grpcconfig

import (
	"math"
	"time"

	"github.com/retrystorm/retrystorm/resil"
	"github.com/retrystorm/retrystorm/resil/budget"
)

// maxPushback is the longest pushback gRFC A6 can express: a signed 32-bit
// count of milliseconds. grpc-go honours any pushback; so does the Policy
// built here, up to the caller's deadline.
const maxPushback = math.MaxInt32 * time.Millisecond

// Settings returns the settings of the [budget.GRPCThrottle] that
// retryThrottling describes. A tokenRatio above 1000 becomes 1000: with
// maxTokens at most 1000, both refill the bucket on any success.
func (t *Throttling) Settings() budget.GRPCThrottleSettings {
	return budget.GRPCThrottleSettings{MaxTokens: t.MaxTokens, TokenRatio: min(t.TokenRatio, 1000)}
}

// NewThrottle returns a new budget for the config's retryThrottling, a
// *budget.GRPCThrottle, or nil (no budget) when the config has none. gRPC
// keeps one per channel (per server name): share it between the policies of
// every method called through one connection.
func (c *Config) NewThrottle() (resil.Budget, error) {
	if c == nil || c.Throttling == nil {
		return nil, nil
	}
	t, err := budget.NewGRPCThrottle(c.Throttling.Settings())
	if err != nil {
		return nil, err
	}
	return t, nil
}

// Backoff returns the retry policy's backoff as a [resil.Backoff] whose
// delays are grpc-go's, draw for draw: Exponential from InitialBackoff by
// BackoffMultiplier, capped at MaxBackoff, then FactorJitter 0.2 past the
// cap (UncappedJitter). An InitialBackoff above MaxBackoff starts at
// MaxBackoff, as min() does in grpc-go.
func (p *RetryPolicy) Backoff() resil.Backoff {
	return resil.Backoff{
		Schedule:       resil.Exponential,
		Base:           min(p.InitialBackoff, p.MaxBackoff),
		Cap:            p.MaxBackoff,
		Multiplier:     p.BackoffMultiplier,
		Jitter:         resil.FactorJitter,
		Factor:         0.2,
		UncappedJitter: true,
	}
}

// Policy returns the [resil.Policy] that means what the entry means, paid
// from budget (the config's throttle, from NewThrottle, or any resil budget;
// nil for none):
//
//   - a retryPolicy: MaxRetries = maxAttempts − 1, [RetryPolicy.Backoff],
//     a pushback restarts the backoff (gRFC A6) and is honoured in full;
//   - a hedgingPolicy: no retry, Hedge.Max = maxAttempts − 1 every
//     hedgingDelay (a hedgingDelay of zero, all at once, becomes one
//     nanosecond apart, since resil's zero means no hedging);
//   - neither, or a nil entry: one attempt.
//
// The status codes are not in the Policy: resilgrpc reads them with
// [Method.Codes]. The Policy has no breaker; add one as you like.
func (m *Method) Policy(budget resil.Budget) resil.Policy {
	p := resil.Policy{Budget: budget}
	switch {
	case m == nil:
	case m.Retry != nil:
		p.MaxRetries = m.Retry.MaxAttempts - 1
		p.Backoff = m.Retry.Backoff()
		p.PushbackRestarts = true
		p.MaxPushback = maxPushback
	case m.Hedging != nil:
		p.Hedge = resil.HedgeSettings{Delay: max(m.Hedging.HedgingDelay, time.Nanosecond), Max: m.Hedging.MaxAttempts - 1}
	}
	return p
}
