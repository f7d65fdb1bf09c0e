package sim

import (
	"context"
	"testing"

	"github.com/retrystorm/retrystorm/internal/budgetcheck"
)

// TestConcurrencyBudgetInTheStorm runs Envoy's retry budget through the
// storm and checks every retry decision of every client against Envoy's
// rule, counted from outside resil: no decision may break it, and the
// budget must bind (refuse some retries) for the test to mean anything.
func TestConcurrencyBudgetInTheStorm(t *testing.T) {
	sc := parse(t, `
name: envoy storm
seed: 3
duration: 90s
traffic: {rate: 100, arrivals: poisson, clients: 4}
origin: {model: queue, capacity: 120, workers: 12}
triggers:
  - {kind: capacity, at: 30s, for: 10s, capacity: 40}
fleets:
  - name: envoy
    timeout: 1s
    retry: {max_retries: 3, backoff: {use: exponential, base: 25ms, cap: 250ms, jitter: full}}
    budget: {use: concurrency, settings: {budget_percent: 20, min_retry_concurrency: 3}}
`)
	w := budgetcheck.Watch(20, 3)
	res, err := RunWith(context.Background(), sc, Options{WrapBudget: w.Wrap})
	if err != nil {
		t.Fatal(err)
	}
	clients, allowed, refused, peak, bad, err := w.Totals()
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range bad {
		t.Error(v)
	}
	t.Logf("%d clients: %d retries allowed, %d refused, at most %d active at once in one client", clients, allowed, refused, peak)
	if allowed == 0 || refused == 0 {
		t.Fatalf("%d retries allowed and %d refused: the budget did not bind", allowed, refused)
	}
	if s := res.Fleets[0].Summary; s.Retries > allowed {
		t.Errorf("the run sent %d retries, more than the %d the budget allowed", s.Retries, allowed)
	}
}

// TestAWSAdaptivePaces runs the AWS SDKs' two modes through a capacity
// dip on the capacity model, whose excess is rejected at once (a
// throttle): the adaptive mode's rate limiter must hold back attempts
// during the dip, so it offers the origin less than the standard mode.
func TestAWSAdaptivePaces(t *testing.T) {
	sc := parse(t, `
name: aws
seed: 5
duration: 60s
traffic: {rate: 100, arrivals: constant, clients: 4}
origin: {model: capacity, capacity: 120}
triggers:
  - {kind: capacity, at: 20s, for: 10s, capacity: 40}
fleets:
  - name: standard
    timeout: 1s
    retry: {max_retries: 2, backoff: {use: exponential, base: 1s, cap: 20s, jitter: full}}
    budget: {use: aws}
  - name: adaptive
    timeout: 1s
    retry: {max_retries: 2, backoff: {use: exponential, base: 1s, cap: 20s, jitter: full}}
    budget: {use: aws_adaptive}
`)
	res := run(t, sc)
	offered := func(f int) (n int64) {
		for k := 20; k < 30; k++ {
			n += res.Fleets[f].Series.Offered[k]
		}
		return n
	}
	std, ad := offered(0), offered(1)
	t.Logf("offered during the dip: standard %d, adaptive %d", std, ad)
	if ad >= std*9/10 {
		t.Errorf("adaptive offered %d attempts during the dip, standard %d: the rate limiter did not pace", ad, std)
	}
	before := func(f int) (n int64) {
		for k := 5; k < 20; k++ {
			n += res.Fleets[f].Series.Offered[k]
		}
		return n
	}
	if before(0) != before(1) {
		t.Errorf("before the dip the modes differ (%d, %d): the limiter must stay off until a throttle", before(0), before(1))
	}
}

// TestRetryOn: a fleet that retries only rejections sends no retry in a
// storm whose failures are timeouts, and one that retries timeouts does.
func TestRetryOn(t *testing.T) {
	sc := loadScenario(t, "testdata/storm.yaml")
	sc.Fleets = sc.Fleets[:1]
	sc.Fleets = append(sc.Fleets, sc.Fleets[0], sc.Fleets[0])
	sc.Fleets[0].Retry.On = []string{"rejection"}
	sc.Fleets[1].Retry.On = []string{"timeout"}
	sc.Fleets[1].Name, sc.Fleets[2].Name = "timeouts", "all"
	if err := sc.Validate(); err != nil {
		t.Fatal(err)
	}
	res := run(t, sc)
	only, timeouts, all := res.Fleets[0].Summary, res.Fleets[1].Summary, res.Fleets[2].Summary
	if only.Retries != 0 || only.LostBy.RetriesExhausted == 0 {
		t.Errorf("retrying rejections only: %d retries, %d lost; want none and some", only.Retries, only.LostBy.RetriesExhausted)
	}
	if timeouts.Retries == 0 || timeouts.Retries != all.Retries {
		t.Errorf("retrying timeouts: %d retries, all: %d; want the same, not zero (the queue model fails by timeouts)", timeouts.Retries, all.Retries)
	}
}
