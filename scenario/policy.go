package scenario

import (
	"fmt"

	"github.com/retrystorm/retrystorm/resil"
)

// NewPolicy builds the resil.Policy one client of the fleet runs. Every
// call makes a new budget and a new breaker, because every client owns its
// own: call it once per client. The zero value of a kind ("") is read as
// "none". It fails only for a fleet that does not pass Validate.
func (f Fleet) NewPolicy() (resil.Policy, error) {
	p := resil.Policy{
		MaxRetries: f.Retry.MaxRetries,
		Hedge:      resil.HedgeSettings{Delay: f.Hedge.Delay, Max: f.Hedge.Max},
	}
	var err error
	if p.Backoff, err = f.Retry.Backoff.resil(); err != nil {
		return resil.Policy{}, f.wrap(err)
	}
	if p.Budget, err = f.Budget.resil(); err != nil {
		return resil.Policy{}, f.wrap(err)
	}
	if p.Breaker, p.BreakerScope, err = f.Breaker.resil(f.Name); err != nil {
		return resil.Policy{}, f.wrap(err)
	}
	if err := p.Validate(); err != nil {
		return resil.Policy{}, f.wrap(err)
	}
	return p, nil
}

func (f Fleet) wrap(err error) error { return fmt.Errorf("fleet %q: %w", f.Name, err) }

var (
	resilSchedules = map[string]resil.Schedule{
		"": resil.NoDelay, "none": resil.NoDelay, "fixed": resil.Fixed, "exponential": resil.Exponential,
	}
	resilJitters = map[string]resil.Jitter{
		"": resil.NoJitter, "none": resil.NoJitter, "full": resil.FullJitter, "equal": resil.EqualJitter,
		"decorrelated": resil.DecorrelatedJitter, "factor": resil.FactorJitter,
	}
	resilFundings = map[string]resil.Funding{"success": resil.FundedBySuccess, "request": resil.FundedByRequest}
	resilRules    = map[string]resil.TripRule{
		BreakerConsecutive: resil.ConsecutiveFailures,
		BreakerCountWindow: resil.CountWindow,
		BreakerTimeWindow:  resil.TimeWindow,
	}
	resilScopes = map[string]resil.Scope{"": resil.GuardAll, "all": resil.GuardAll, "retries": resil.GuardRetries}
)

func (b Backoff) resil() (resil.Backoff, error) {
	schedule, ok := resilSchedules[b.Use]
	if !ok {
		return resil.Backoff{}, fmt.Errorf("unknown backoff use %q", b.Use)
	}
	jitter, ok := resilJitters[b.Jitter]
	if !ok {
		return resil.Backoff{}, fmt.Errorf("unknown jitter %q", b.Jitter)
	}
	rb := resil.Backoff{
		Schedule: schedule, Base: b.Base, Cap: b.Cap,
		Multiplier: b.Multiplier, Jitter: jitter, Factor: b.Factor,
	}
	return rb, rb.Validate()
}

// resil returns a new budget, or nil for none: a nil Budget is resil's "no
// budget".
func (b Budget) resil() (resil.Budget, error) {
	switch b.Use {
	case BudgetNone, "":
		return nil, nil
	case BudgetTokenBucket:
		return resil.NewTokenBucket(resil.TokenBucketSettings{
			Ratio: b.Ratio, Funding: resilFundings[b.Funding],
			MinTokens: b.MinTokens, MaxTokens: b.MaxTokens,
			RetryCost: b.RetryCost, TimeoutCost: b.TimeoutCost,
		})
	case BudgetWindow:
		return resil.NewWindowBudget(resil.WindowBudgetSettings{
			Ratio: b.Ratio, Funding: resilFundings[b.Funding],
			MinRetriesPerSecond: b.MinRetriesPerSecond, TTL: b.TTL,
			RetryCost: b.RetryCost, TimeoutCost: b.TimeoutCost,
		})
	case BudgetGRPC:
		return resil.NewGRPCThrottle(resil.GRPCThrottleSettings{MaxTokens: b.MaxTokens, TokenRatio: b.TokenRatio})
	case BudgetAWS:
		return resil.NewAWSQuota(resil.AWSQuotaSettings{
			Capacity: b.Capacity, RetryCost: int(b.RetryCost),
			TimeoutCost: int(b.TimeoutCost), NoRetryIncrement: b.NoRetryIncrement,
		})
	}
	return nil, fmt.Errorf("unknown budget use %q", b.Use)
}

// resil returns a new breaker, or nil for none, and the attempts it may
// refuse. name labels its state changes.
func (b Breaker) resil(name string) (*resil.Breaker, resil.Scope, error) {
	if b.Use == BreakerNone || b.Use == "" {
		return nil, resil.GuardAll, nil
	}
	rule, ok := resilRules[b.Use]
	if !ok {
		return nil, 0, fmt.Errorf("unknown breaker use %q", b.Use)
	}
	scope, ok := resilScopes[b.Scope]
	if !ok {
		return nil, 0, fmt.Errorf("unknown breaker scope %q", b.Scope)
	}
	br, err := resil.NewBreaker(resil.BreakerSettings{
		Name: name, Rule: rule,
		Threshold: b.Threshold, WindowSize: b.WindowSize, WindowPeriod: b.Window,
		MinCalls: b.MinCalls, FailureRate: b.FailureRate,
		SlowCall: b.SlowCall, SlowCallRate: b.SlowCallRate,
		Cooldown: b.Cooldown, MaxCooldown: b.MaxCooldown, Probes: b.Probes,
	})
	return br, scope, err
}
