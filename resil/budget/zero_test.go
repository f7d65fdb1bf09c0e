package budget

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/resil"
)

// unbuiltBudgets are the budgets of this package as a caller can get them
// without their constructor: the zero value, and the nil pointer a failed
// constructor returns.
func unbuiltBudgets() map[string]resil.Budget {
	return map[string]resil.Budget{
		"nil *TokenBucket":  (*TokenBucket)(nil),
		"TokenBucket{}":     &TokenBucket{},
		"nil *Window":       (*Window)(nil),
		"Window{}":          &Window{},
		"nil *GRPCThrottle": (*GRPCThrottle)(nil),
		"GRPCThrottle{}":    &GRPCThrottle{},
		"nil *AWSQuota":     (*AWSQuota)(nil),
		"AWSQuota{}":        &AWSQuota{},
	}
}

// TestPolicyValidateRefusesUnbuiltBudgets: every budget of this package
// (Built), and the rate limiter, that its constructor did not make is
// refused by name, with ErrNotBuilt; the built ones, and None, pass.
func TestPolicyValidateRefusesUnbuiltBudgets(t *testing.T) {
	unbuilt := unbuiltBudgets()
	unbuilt["nil *Concurrency"], unbuilt["Concurrency{}"] = (*Concurrency)(nil), &Concurrency{}
	for name, b := range unbuilt {
		p := resil.Policy{MaxRetries: 1, Budget: b}
		err := p.Validate()
		wantSettingError(t, err, "Policy.Budget")
		if constructor, _ := b.(Built).Built(); err == nil || !errors.Is(err, resil.ErrNotBuilt) || !strings.Contains(err.Error(), constructor) {
			t.Errorf("%s: %v does not wrap ErrNotBuilt or name %s", name, err, constructor)
		}
	}
	for name, l := range map[string]*ClientRateLimiter{"nil": nil, "zero": {}} {
		p := resil.Policy{Pacer: l}
		err := p.Validate()
		wantSettingError(t, err, "Policy.Pacer")
		if !errors.Is(err, resil.ErrNotBuilt) {
			t.Errorf("%s pacer: %v does not wrap ErrNotBuilt", name, err)
		}
	}
	tb := mustTB(t, TokenBucketSettings{Ratio: 0.1, Funding: FundedByRequest})
	l, err := NewClientRateLimiter(ClientRateLimiterSettings{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []resil.Policy{{MaxRetries: 1, Budget: tb, Pacer: l}, {MaxRetries: 1, Budget: None{}}} {
		if err := p.Validate(); err != nil {
			t.Error(err)
		}
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
				b.Record(now, resil.OutcomeSuccess, 0)
				b.Record(now, resil.OutcomeSuccess, 5)
				b.Record(now, resil.OutcomeFailure, 0)
				b.Refund(now, float64(i))
				for _, after := range []resil.Outcome{resil.OutcomeFailure, resil.OutcomeTimeout} {
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
	p := resil.Policy{MaxRetries: 3, Budget: budget}
	in := resil.Intent{Idempotent: true}
	if _, err := p.Begin(t0, &in); err != nil {
		t.Fatal(err)
	}
	p.End(t0, &in, resil.Ticket{}, resil.OutcomeFailure, 0)
	if _, err := p.Retry(t0, &in, resil.OutcomeFailure, 0, time.Time{}, noJitter()); !errors.Is(err, resil.ErrBudgetExhausted) {
		t.Errorf("Retry = %v, want ErrBudgetExhausted", err)
	}
	if c := p.Ceiling(100); c != 100 {
		t.Errorf("Ceiling(100) = %v, want 100: an unbuilt budget allows no retry", c)
	}

	_, err = resil.NewGuard(resil.GuardSettings{Idempotency: resil.Idempotent, Policy: p})
	wantSettingError(t, err, "Policy.Budget")
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
	w, err := NewWindow(WindowSettings{Ratio: 0.5, Funding: FundedByRequest, MinRetriesPerSecond: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range huge {
		tb.Refund(t0, x)
		q.Refund(t0, x)
		q.Record(t0, resil.OutcomeSuccess, x)
		w.Refund(t0, x)
		for _, c := range []struct {
			name    string
			got, hi float64
		}{{"TokenBucket", tb.Tokens(t0), 10}, {"AWSQuota", q.Tokens(t0), 500}, {"Window", w.Tokens(t0), 10}} {
			if !(c.got >= 0 && c.got <= c.hi) {
				t.Fatalf("%s after %v: Tokens = %v, outside [0, %v]", c.name, x, c.got, c.hi)
			}
		}
	}
	// And the budgets still work: a withdrawal succeeds and costs what it
	// should.
	if c, ok := tb.Withdraw(t0, resil.OutcomeFailure); !ok || c != 1 {
		t.Errorf("TokenBucket.Withdraw = %v, %v", c, ok)
	}
	if c, ok := q.Withdraw(t0, resil.OutcomeFailure); !ok || c != 5 {
		t.Errorf("AWSQuota.Withdraw = %v, %v", c, ok)
	}
}

// TestGuardSuccessAllocatesNothing pins the claim of the package doc: a
// successful call with a budget and a closed breaker allocates nothing.
func TestGuardSuccessAllocatesNothing(t *testing.T) {
	g := benchGuard(t, 0, nil)
	ctx := context.Background()
	ok := func(context.Context) error { return nil }
	if n := testing.AllocsPerRun(1000, func() { g.Do(ctx, ok) }); n != 0 {
		t.Fatalf("Do allocates %v times per call", n)
	}
	call := func(ctx context.Context, a resil.Attempt) (int, error) { return a.Number, nil }
	if n := testing.AllocsPerRun(1000, func() { resil.Call(ctx, g, call) }); n != 0 {
		t.Fatalf("Call allocates %v times per call", n)
	}
}

// TestBudgetsAllocateNothing: a budget's four methods allocate nothing.
func TestBudgetsAllocateNothing(t *testing.T) {
	tb := mustTB(t, TokenBucketSettings{Ratio: 0.5, Funding: FundedByRequest, MinTokens: 50})
	w, _ := NewWindow(WindowSettings{Ratio: 0.5, Funding: FundedByRequest})
	for _, b := range []resil.Budget{tb, w, None{}} {
		if n := testing.AllocsPerRun(1000, func() {
			b.Begin(t0)
			b.Begin(t0)
			if c, ok := b.Withdraw(t0, resil.OutcomeFailure); ok {
				b.Refund(t0, c)
			}
			b.Record(t0, resil.OutcomeSuccess, 0)
		}); n != 0 {
			t.Fatalf("%T allocates %v times", b, n)
		}
	}
}
