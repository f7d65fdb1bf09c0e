package budget

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/resil"
)

// optional is a budget written outside this package that implements every
// optional interface, and remembers what resil asked of it.
type optional struct {
	None
	built  bool
	handed []time.Time // the times Begin was given
	sent   []resil.Kind
}

var (
	_ UsesTime      = (*optional)(nil)
	_ InFlight      = (*optional)(nil)
	_ RetryShare    = (*optional)(nil)
	_ TokenReporter = (*optional)(nil)
	_ Built         = (*optional)(nil)
)

func (o *optional) Begin(now time.Time)                  { o.handed = append(o.handed, now) }
func (o *optional) Sent(now time.Time, k resil.Kind)     { o.sent = append(o.sent, k) }
func (o *optional) RetryShare() float64                  { return 0.25 }
func (o *optional) Tokens(time.Time) float64             { return 7 }
func (o *optional) Built() (constructor string, ok bool) { return "newOptional", o.built }

// TestResilHearsTheOptionalInterfaces: resil cannot name this package's
// interfaces, so it asserts the same method sets; a budget that
// implements each of them (and nothing of this package's) is heard: by
// Policy.Validate (Built), Policy.Ceiling (RetryShare), Policy.Resume
// (InFlight), and the Guard's clock and Stats (UsesTime, TokenReporter).
func TestResilHearsTheOptionalInterfaces(t *testing.T) {
	b := &optional{}
	p := resil.Policy{MaxRetries: 3, Budget: b}
	if err := p.Validate(); !errors.Is(err, resil.ErrNotBuilt) {
		t.Errorf("Validate = %v: Built said false", err)
	}
	b.built = true
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	if c := p.Ceiling(100); c != 125 {
		t.Errorf("Ceiling(100) = %v, want 125 from RetryShare", c)
	}
	in := resil.Intent{Idempotent: true}
	tk, _ := p.Begin(t0, &in)
	p.End(t0, &in, tk, resil.OutcomeFailure, 0)
	if _, err := p.Retry(t0, &in, resil.OutcomeFailure, 0, time.Time{}, noJitter()); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Resume(t0, &in); err != nil || len(b.sent) != 1 || b.sent[0] != resil.KindRetry {
		t.Errorf("Resume: %v; Sent heard %v, want [retry]", err, b.sent)
	}

	g := mustGuard(t, resil.GuardSettings{Policy: resil.Policy{Budget: b}})
	b.handed = nil
	if err := g.Do(context.Background(), func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if len(b.handed) != 1 || !b.handed[0].IsZero() {
		t.Errorf("Begin was handed %v: a budget whose UsesTime says false needs no clock read", b.handed)
	}
	if s := g.Stats(); !s.HasBudgetTokens || s.BudgetTokens != 7 {
		t.Errorf("Stats: has tokens %v, tokens %v; want 7 from Tokens", s.HasBudgetTokens, s.BudgetTokens)
	}
}
