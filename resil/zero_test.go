package resil

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

// unbuiltBudgets are the budgets of this package as a caller can get them
// without their constructor: the zero value, and the nil pointer a failed
// constructor returns.
func unbuiltBudgets() map[string]Budget {
	return map[string]Budget{
		"nil *TokenBucket":  (*TokenBucket)(nil),
		"TokenBucket{}":     &TokenBucket{},
		"nil *WindowBudget": (*WindowBudget)(nil),
		"WindowBudget{}":    &WindowBudget{},
		"nil *GRPCThrottle": (*GRPCThrottle)(nil),
		"GRPCThrottle{}":    &GRPCThrottle{},
		"nil *AWSQuota":     (*AWSQuota)(nil),
		"AWSQuota{}":        &AWSQuota{},
	}
}

// A budget that was never built grants no retry and panics on nothing.
func TestUnbuiltBudgetsGrantNoRetries(t *testing.T) {
	for name, b := range unbuiltBudgets() {
		t.Run(name, func(t *testing.T) {
			now := t0
			for i := range 100 {
				now = now.Add(time.Second)
				b.Begin(now)
				b.Record(now, OutcomeSuccess, 0)
				b.Record(now, OutcomeSuccess, 5)
				b.Record(now, OutcomeFailure, 0)
				b.Refund(now, float64(i))
				for _, after := range []Outcome{OutcomeFailure, OutcomeTimeout} {
					if c, ok := b.Withdraw(now, after); ok || c != 0 {
						t.Fatalf("Withdraw(%v) = %v, %v: want a refusal", after, c, ok)
					}
				}
			}
			if tr, ok := b.(TokenReporter); !ok {
				t.Fatal("not a TokenReporter")
			} else if got := tr.Tokens(now); got != 0 {
				t.Errorf("Tokens = %v, want 0", got)
			}
			if rs, ok := b.(RetryShare); !ok {
				t.Fatal("not a RetryShare")
			} else if got := rs.RetryShare(); got != 0 {
				t.Errorf("RetryShare = %v, want 0", got)
			}
		})
	}
}

// The README's own pattern, with the error dropped, must fail closed in
// every driver: the Policy (as the simulator drives it) and the Guard.
func TestIgnoredConstructorErrorFailsClosed(t *testing.T) {
	budget, err := NewTokenBucket(TokenBucketSettings{Ratio: 7}) // invalid
	if err == nil || budget != nil {
		t.Fatalf("NewTokenBucket = %v, %v: want nil and an error", budget, err)
	}
	p := Policy{MaxRetries: 3, Budget: budget}
	in := Intent{Idempotent: true}
	if _, err := p.Begin(t0, &in); err != nil {
		t.Fatal(err)
	}
	p.End(t0, &in, Ticket{}, OutcomeFailure, 0)
	if _, err := p.Retry(t0, &in, OutcomeFailure, 0, time.Time{}, draw(0)); !errors.Is(err, ErrBudgetExhausted) {
		t.Errorf("Retry = %v, want ErrBudgetExhausted", err)
	}
	if c := p.Ceiling(100); c != 100 {
		t.Errorf("Ceiling(100) = %v, want 100: an unbuilt budget allows no retry", c)
	}

	_, err = NewGuard(GuardSettings{Idempotency: Idempotent, Policy: p})
	wantSettingError(t, err, "Policy.Budget")
}

func TestPolicyValidateRefusesUnbuiltParts(t *testing.T) {
	for name, b := range unbuiltBudgets() {
		p := Policy{MaxRetries: 1, Budget: b}
		err := p.Validate()
		wantSettingError(t, err, "Policy.Budget")
		if err != nil && !errors.Is(err, ErrNotBuilt) {
			t.Errorf("%s: %v does not wrap ErrNotBuilt", name, err)
		}
	}
	p := Policy{Breaker: &Breaker{}}
	err := p.Validate()
	wantSettingError(t, err, "Policy.Breaker")
	if !errors.Is(err, ErrNotBuilt) {
		t.Errorf("%v does not wrap ErrNotBuilt", err)
	}
	// The built ones, and NoBudget, pass.
	tb := mustTB(t, TokenBucketSettings{Ratio: 0.1, Funding: FundedByRequest})
	p = Policy{MaxRetries: 1, Budget: tb, Breaker: mustBreaker(t, BreakerSettings{Threshold: 1})}
	if err := p.Validate(); err != nil {
		t.Error(err)
	}
	p = Policy{MaxRetries: 1, Budget: NoBudget{}}
	if err := p.Validate(); err != nil {
		t.Error(err)
	}
}

// A zero Breaker is not silently off: it refuses every call it is asked
// about, and says why.
func TestZeroBreakerRefuses(t *testing.T) {
	var b Breaker
	for i := range 3 {
		now := ts(float64(i) * 100)
		p, err := b.Allow(now)
		if !errors.Is(err, ErrNotBuilt) || !errors.Is(err, ErrBreakerOpen) {
			t.Fatalf("Allow = %v, want ErrNotBuilt (which is a refusal, ErrBreakerOpen)", err)
		}
		b.Record(now, p, OutcomeSuccess, 0)
		b.Record(now, Permit{gen: 1, probe: true}, OutcomeFailure, 0)
	}
	if s := b.State(t0); s != StateOpen {
		t.Errorf("State = %v, want open", s)
	}
	if b.Generation() != 0 || b.Trips() != 0 {
		t.Errorf("Generation, Trips = %d, %d; want 0, 0", b.Generation(), b.Trips())
	}
	// Under a Policy that guards every attempt, the first one is refused.
	pol := Policy{Breaker: &b}
	var in Intent
	if _, err := pol.Begin(t0, &in); !errors.Is(err, ErrNotBuilt) {
		t.Errorf("Policy.Begin = %v, want ErrNotBuilt", err)
	}
}

// A zero Guard, or a nil one, runs nothing and returns ErrNotBuilt.
func TestZeroGuardFailsClosed(t *testing.T) {
	for name, g := range map[string]*Guard{"Guard{}": {}, "nil": nil} {
		t.Run(name, func(t *testing.T) {
			calls := 0
			fn := func(context.Context) error { calls++; return errBoom }
			if err := g.Do(context.Background(), fn); !errors.Is(err, ErrNotBuilt) {
				t.Errorf("Do = %v, want ErrNotBuilt", err)
			}
			if _, err := Call(context.Background(), g, func(context.Context, Attempt) (int, error) { calls++; return 1, nil }); !errors.Is(err, ErrNotBuilt) {
				t.Errorf("Call = %v, want ErrNotBuilt", err)
			}
			if calls != 0 {
				t.Errorf("fn ran %d times", calls)
			}
			_ = g.Stats()
			_ = g.Now()
			_ = g.Policy()
			remove := g.Observe(func(Event) {})
			remove()
		})
	}
}

// Extreme refunds and records neither overflow the balance nor push it
// outside [0, max].
func TestBudgetArithmeticClamps(t *testing.T) {
	huge := []float64{1e300, math.MaxFloat64, math.Inf(1), math.NaN(), -1e300, math.Inf(-1), 9.3e12, 1e18}
	tb := mustTB(t, TokenBucketSettings{Ratio: 0.1, Funding: FundedBySuccess, MaxTokens: 10, MinTokens: 10})
	q, err := NewAWSQuota(AWSQuotaSettings{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := NewWindowBudget(WindowBudgetSettings{Ratio: 0.5, Funding: FundedByRequest, MinRetriesPerSecond: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range huge {
		tb.Refund(t0, x)
		q.Refund(t0, x)
		q.Record(t0, OutcomeSuccess, x)
		w.Refund(t0, x)
		for _, c := range []struct {
			name    string
			got, hi float64
		}{{"TokenBucket", tb.Tokens(t0), 10}, {"AWSQuota", q.Tokens(t0), 500}, {"WindowBudget", w.Tokens(t0), 10}} {
			if !(c.got >= 0 && c.got <= c.hi) {
				t.Fatalf("%s after %v: Tokens = %v, outside [0, %v]", c.name, x, c.got, c.hi)
			}
		}
	}
	// And the budgets still work: a withdrawal succeeds and costs what it
	// should.
	if c, ok := tb.Withdraw(t0, OutcomeFailure); !ok || c != 1 {
		t.Errorf("TokenBucket.Withdraw = %v, %v", c, ok)
	}
	if c, ok := q.Withdraw(t0, OutcomeFailure); !ok || c != 5 {
		t.Errorf("AWSQuota.Withdraw = %v, %v", c, ok)
	}
}

func TestErrNotBuiltMessage(t *testing.T) {
	if !strings.Contains(ErrNotBuilt.Error(), "constructor") {
		t.Errorf("ErrNotBuilt = %q: say how to build one", ErrNotBuilt)
	}
}
