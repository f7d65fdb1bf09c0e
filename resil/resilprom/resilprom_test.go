package resilprom

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"

	"github.com/retrystorm/retrystorm/resil"
	"github.com/retrystorm/retrystorm/resil/budget"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var errBoom = errors.New("boom")

func TestMetrics(t *testing.T) {
	tb, _ := budget.NewTokenBucket(budget.TokenBucketSettings{Ratio: 0.5, Funding: budget.FundedByRequest, MinTokens: 1})
	br, _ := resil.NewBreaker(resil.BreakerSettings{Threshold: 3, Cooldown: time.Hour})
	g, err := resil.NewGuard(resil.GuardSettings{Idempotency: resil.Idempotent, Policy: resil.Policy{MaxRetries: 2, Budget: tb, Breaker: br}})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	c, err := Register(reg, "db", g)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	g.Do(ctx, func(context.Context) error { return errBoom }) // fails, a retry fails, the budget stops it
	g.Do(ctx, func(context.Context) error { return errBoom }) // third failure in a row: open; its retry refused and refunded
	g.Do(ctx, func(context.Context) error { return nil })     // refused
	g.Do(ctx, func(context.Context) error { return nil })     // refused

	want := `
# HELP resil_intents_total Guarded calls started.
# TYPE resil_intents_total counter
resil_intents_total{name="db"} 4
# HELP resil_attempts_total Attempts sent: first attempts, retries and hedges.
# TYPE resil_attempts_total counter
resil_attempts_total{name="db"} 3
# HELP resil_retries_total Retries sent.
# TYPE resil_retries_total counter
resil_retries_total{name="db"} 1
# HELP resil_hedges_total Hedged attempts sent.
# TYPE resil_hedges_total counter
resil_hedges_total{name="db"} 0
# HELP resil_budget_denials_total Retries and hedges the retry budget refused.
# TYPE resil_budget_denials_total counter
resil_budget_denials_total{name="db"} 1
# HELP resil_breaker_refusals_total Attempts the circuit breaker refused.
# TYPE resil_breaker_refusals_total counter
resil_breaker_refusals_total{name="db"} 3
# HELP resil_breaker_state Circuit breaker state: 0 closed, 1 open, 2 half-open.
# TYPE resil_breaker_state gauge
resil_breaker_state{name="db"} 1
# HELP resil_budget_tokens Retry budget balance, in retries of unit cost.
# TYPE resil_budget_tokens gauge
resil_budget_tokens{name="db"} 1
# HELP resil_retries_per_request Retries sent per guarded call since start: the retry-storm early warning.
# TYPE resil_retries_per_request gauge
resil_retries_per_request{name="db"} 0.25
`
	names := []string{"resil_intents_total", "resil_attempts_total", "resil_retries_total", "resil_hedges_total",
		"resil_budget_denials_total", "resil_breaker_refusals_total", "resil_breaker_state", "resil_budget_tokens",
		"resil_retries_per_request"}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Fatal(err)
	}
	// First attempts and a retry, all failed: two series.
	if got, err := testutil.GatherAndCount(reg, "resil_attempt_duration_seconds"); err != nil || got != 2 {
		t.Fatalf("histogram series = %d, %v", got, err)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %v", problems, err)
	}
	// A second guard with the same name is refused; another name is fine.
	if _, err := Register(reg, "db", g); err == nil {
		t.Fatal("duplicate registration accepted")
	}
	g2, _ := resil.NewGuard(resil.GuardSettings{})
	c2, err := Register(reg, "cache", g2)
	if err != nil {
		t.Fatal(err)
	}
	g2.Do(ctx, func(context.Context) error { return nil })
	if got, _ := testutil.GatherAndCount(reg, "resil_budget_tokens"); got != 1 {
		t.Fatalf("a guard without a budget reports tokens: %d series", got)
	}
	if got, _ := testutil.GatherAndCount(reg, "resil_intents_total"); got != 2 {
		t.Fatalf("two guards: %d series", got)
	}
	if !c.Unregister() || !c2.Unregister() {
		t.Fatal("Unregister")
	}
	if got, _ := testutil.GatherAndCount(reg); got != 0 {
		t.Fatalf("%d series left after Unregister", got)
	}
	// Options: buckets and more const labels (on a registry of their own:
	// Prometheus wants one label set per metric name).
	reg3 := prometheus.NewPedanticRegistry()
	c3, err := RegisterWith(reg3, g2, Options{Name: "cache", Buckets: []float64{0.1, 1}, ConstLabels: prometheus.Labels{"zone": "a"}})
	if err != nil {
		t.Fatal(err)
	}
	g2.Do(ctx, func(context.Context) error { return nil })
	mfs, err := reg3.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, mf := range mfs {
		if mf.GetName() != "resil_attempt_duration_seconds" {
			continue
		}
		found = true
		m := mf.GetMetric()
		if len(m) != 1 {
			t.Fatalf("%d series", len(m))
		}
		labels := map[string]string{}
		for _, l := range m[0].GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		h := m[0].GetHistogram()
		if labels["kind"] != "first" || labels["outcome"] != "success" || labels["zone"] != "a" || labels["name"] != "cache" ||
			h.GetSampleCount() != 1 || len(h.GetBucket()) != 2 || h.GetBucket()[0].GetUpperBound() != 0.1 {
			t.Fatalf("histogram %v %v", labels, h)
		}
	}
	if !found {
		t.Fatal("no histogram")
	}
	c3.Unregister()
	g.Do(ctx, func(context.Context) error { return nil }) // no observer left: must not panic
}

func TestRegisterErrors(t *testing.T) {
	g, _ := resil.NewGuard(resil.GuardSettings{})
	reg := prometheus.NewRegistry()
	if _, err := Register(nil, "x", g); err == nil {
		t.Fatal("nil registerer")
	}
	if _, err := Register(reg, "x", nil); err == nil {
		t.Fatal("nil guard")
	}
	if _, err := Register(reg, "", g); err == nil {
		t.Fatal("empty name")
	}
}
