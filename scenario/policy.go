package scenario

import (
	"encoding"
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
	if f.Budget.Use == BudgetAWSAdaptive {
		if p.Pacer, err = resil.NewClientRateLimiter(resil.ClientRateLimiterSettings{
			Beta: f.Budget.Beta, ScaleConstant: f.Budget.ScaleConstant,
			Smoothing: f.Budget.Smoothing, MinFillRate: f.Budget.MinFillRate,
			FailOnNoTokens: f.Budget.FailOnNoTokens,
		}); err != nil {
			return resil.Policy{}, f.wrap(err)
		}
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

// readWord reads one of resil's enum values from its word, with resil's
// UnmarshalText: the empty word leaves the zero value. what names the
// field in the error.
func readWord(v encoding.TextUnmarshaler, what, word string) error {
	if word == "" {
		return nil
	}
	if err := v.UnmarshalText([]byte(word)); err != nil {
		return fmt.Errorf("unknown %s %q: %w", what, word, err)
	}
	return nil
}

func (b Backoff) resil() (resil.Backoff, error) {
	rb := resil.Backoff{Base: b.Base, Cap: b.Cap, Multiplier: b.Multiplier, Factor: b.Factor}
	if err := readWord(&rb.Schedule, "backoff use", b.Use); err != nil {
		return resil.Backoff{}, err
	}
	if err := readWord(&rb.Jitter, "jitter", b.Jitter); err != nil {
		return resil.Backoff{}, err
	}
	return rb, rb.Validate()
}

// funding is the budget's funded_by.
func (b Budget) funding() (resil.Funding, error) {
	var f resil.Funding
	err := readWord(&f, "funded_by", b.Funding)
	return f, err
}

// resil returns a new budget, or nil for none: a nil Budget is resil's "no
// budget".
func (b Budget) resil() (resil.Budget, error) {
	switch b.Use {
	case BudgetNone, "":
		return nil, nil
	case BudgetTokenBucket:
		funding, err := b.funding()
		if err != nil {
			return nil, err
		}
		return resil.NewTokenBucket(resil.TokenBucketSettings{
			Ratio: b.Ratio, Funding: funding,
			MinTokens: b.MinTokens, MaxTokens: b.MaxTokens,
			RetryCost: b.RetryCost, TimeoutCost: b.TimeoutCost,
		})
	case BudgetWindow:
		funding, err := b.funding()
		if err != nil {
			return nil, err
		}
		return resil.NewWindowBudget(resil.WindowBudgetSettings{
			Ratio: b.Ratio, Funding: funding,
			MinRetriesPerSecond: b.MinRetriesPerSecond, TTL: b.TTL,
			RetryCost: b.RetryCost, TimeoutCost: b.TimeoutCost,
		})
	case BudgetGRPC:
		return resil.NewGRPCThrottle(resil.GRPCThrottleSettings{MaxTokens: b.MaxTokens, TokenRatio: b.TokenRatio})
	case BudgetConcurrency:
		return resil.NewConcurrencyBudget(resil.ConcurrencyBudgetSettings{Percent: b.Percent, MinConcurrency: b.MinConcurrency})
	case BudgetAWS, BudgetAWSAdaptive:
		// aws_adaptive is the standard mode's quota plus a rate limiter,
		// which NewPolicy adds as the policy's Pacer.
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
	var rule resil.TripRule
	if err := readWord(&rule, "breaker use", b.Use); err != nil {
		return nil, 0, err
	}
	var scope resil.Scope
	if err := readWord(&scope, "breaker scope", b.Scope); err != nil {
		return nil, 0, err
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
