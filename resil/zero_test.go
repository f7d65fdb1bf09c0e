package resil

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// madeBudget is a budget that says whether its constructor made it, as
// resil/budget's do (Built).
type madeBudget struct {
	bucket
	made bool
}

func (b *madeBudget) Built() (string, bool) { return "newMadeBudget", b != nil && b.made }

// TestPolicyValidateRefusesUnbuiltParts: a budget that says its
// constructor did not make it, a nil pointer of a budget type that does
// not say, and a zero Breaker are refused by name, wrapping ErrNotBuilt
// (resil/budget checks each of its budgets); the built ones pass.
func TestPolicyValidateRefusesUnbuiltParts(t *testing.T) {
	for name, c := range map[string]struct {
		p          Policy
		field, msg string
	}{
		"unbuilt budget":       {Policy{MaxRetries: 1, Budget: &madeBudget{}}, "Policy.Budget", "*resil.madeBudget: a zero value or nil pointer, not made by newMadeBudget"},
		"nil budget that says": {Policy{MaxRetries: 1, Budget: (*madeBudget)(nil)}, "Policy.Budget", "not made by newMadeBudget"},
		"nil budget":           {Policy{MaxRetries: 1, Budget: (*bucket)(nil)}, "Policy.Budget", "*resil.bucket: a zero value or nil pointer, not made by its constructor"},
		"zero breaker":         {Policy{Breaker: &Breaker{}}, "Policy.Breaker", "not made by NewBreaker"},
	} {
		err := c.p.Validate()
		wantSettingError(t, err, c.field)
		if err == nil || !errors.Is(err, ErrNotBuilt) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: %v does not wrap ErrNotBuilt or say %q", name, err, c.msg)
		}
	}
	// The built ones, and a budget that does not say, pass.
	p := Policy{MaxRetries: 1, Budget: &madeBudget{made: true}, Breaker: mustBreaker(t, BreakerSettings{Threshold: 1})}
	if err := p.Validate(); err != nil {
		t.Error(err)
	}
	p = Policy{MaxRetries: 1, Budget: newBucket(bucketSpec{ratio: 0.1, byRequest: true})}
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

func TestErrNotBuiltMessage(t *testing.T) {
	if !strings.Contains(ErrNotBuilt.Error(), "constructor") {
		t.Errorf("ErrNotBuilt = %q: say how to build one", ErrNotBuilt)
	}
}
