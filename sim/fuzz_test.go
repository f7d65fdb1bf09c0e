package sim

import (
	"context"
	"fmt"
	"testing"

	"github.com/retrystorm/retrystorm/scenario"
)

// FuzzRun builds small scenarios from fuzzed numbers: whatever the
// scenario loader accepts must run without a panic and keep every
// invariant of checkInvariants.
func FuzzRun(f *testing.F) {
	f.Add(uint8(0), uint16(100), uint16(120), uint8(12), uint8(0), uint8(3), uint8(10), uint8(2), uint8(1), uint8(3))
	f.Add(uint8(1), uint16(300), uint16(50), uint8(1), uint8(50), uint8(0), uint8(0), uint8(0), uint8(0), uint8(0))
	f.Add(uint8(2), uint16(10), uint16(5), uint8(3), uint8(90), uint8(255), uint8(3), uint8(3), uint8(3), uint8(1))
	f.Add(uint8(1), uint16(200), uint16(150), uint8(6), uint8(0), uint8(3), uint8(10), uint8(4), uint8(1), uint8(3))
	f.Add(uint8(0), uint16(200), uint16(150), uint8(6), uint8(0), uint8(3), uint8(10), uint8(5), uint8(2), uint8(3))
	f.Fuzz(func(t *testing.T, model uint8, rate, capacity uint16, workers, cost, retries, ratio, trigger, breaker, clients uint8) {
		origin := []string{
			fmt.Sprintf("{model: capacity, capacity: %d, rejection_cost: %g}", capacity, float64(cost%101)/100),
			fmt.Sprintf("{model: queue, capacity: %d, workers: %d, queue_limit: %d, drop_expired: %v}", capacity, workers%50+1, cost, cost%2 == 0),
			fmt.Sprintf("{model: concurrency, base: %dms, per_inflight: %dms}", workers%100+1, cost%10),
		}[model%3]
		trig := []string{
			"[]",
			fmt.Sprintf("[{kind: capacity, at: 2s, for: 3s, capacity: %d}]", capacity/3),
			"[{kind: errors, at: 2s, for: 3s, error_rate: 0.6}]",
			"[{kind: outage, at: 1s, for: 2s}]",
			"[{kind: outage, at: 1s, for: 2s, mode: refuse}]",
			"[{kind: outage, at: 1s, for: 3s, mode: stall}, {kind: outage, at: 2s, for: 500ms, mode: refuse}]",
		}[trigger%6]
		if model%3 == 2 && trigger%6 == 1 {
			trig = "[{kind: latency, at: 2s, for: 3s, factor: 5}]"
		}
		retry := fmt.Sprint(retries % 6)
		if retries == 255 {
			retry = "unlimited"
		}
		br := []string{"{use: none}", "{use: consecutive, settings: {threshold: 2, cooldown: 1s}}",
			"{use: count_window, settings: {window_size: 10, failure_rate: 0.5, min_calls: 5, cooldown: 1s}}",
			"{use: time_window, settings: {window: 1s, failure_rate: 0.4, cooldown: 500ms, max_cooldown: 4s, probes: 3}}"}[breaker%4]
		y := fmt.Sprintf(`
name: fuzz
duration: 10s
tick: 500ms
traffic: {rate: %d, clients: %d, arrivals: poisson}
origin: %s
triggers: %s
fleets:
  - name: f
    timeout: 300ms
    deadline: 5s
    retry: {max_retries: %s, backoff: {use: exponential, base: 20ms, cap: 1s, jitter: full}}
    budget: {use: token_bucket, settings: {budget_ratio: %g, min_tokens: 1}}
    breaker: %s
    hedge: {delay: 100ms}
  - name: control
    timeout: 300ms
    deadline: 5s
    retry: {max_retries: %s, backoff: {use: fixed, base: 50ms}}
    budget: {use: none}
`, rate%2000+1, clients%20+1, origin, trig, retry, float64(ratio%100+1)/100, br, retry)
		sc, err := scenario.Parse("fuzz.yaml", []byte(y))
		if err != nil {
			return // the loader's business, fuzzed on its own
		}
		r, err := Run(context.Background(), sc)
		if err != nil {
			t.Fatal(err)
		}
		checkInvariants(t, sc, r)
		var attempts int64
		for _, f := range r.Fleets {
			attempts += f.Summary.Attempts
		}
		if est := Estimate(sc); float64(attempts) > est.Attempts {
			t.Fatalf("%d attempts, more than the estimate of %.0f", attempts, est.Attempts)
		}
	})
}

// chainBudgets are one budget of every kind, for FuzzRunMatrix.
var chainBudgets = []string{
	"{use: none}",
	"{use: token_bucket, settings: {budget_ratio: 0.2, min_tokens: 2}}",
	"{use: window, settings: {budget_ratio: 0.2, min_retries_per_second: 2}}",
	"{use: grpc, settings: {max_tokens: 10, token_ratio: 0.1}}",
	"{use: aws}",
	"{use: concurrency, settings: {budget_percent: 20, min_retry_concurrency: 3}}",
	"{use: aws_adaptive}",
}

// chainYAML builds a scenario for FuzzRunMatrix from its choices: every origin
// model, every tier model, every outage mode, every budget kind, a breaker,
// a hedge, deadline propagation and the adaptive throttle, in any mix.
func chainYAML(originModel, tierModel, outage, budget, flags uint8, rate uint16, retries uint8) string {
	models := []string{
		"{model: capacity, capacity: 80, rejection_cost: 0.2}",
		"{model: queue, capacity: 80, workers: 8, queue_limit: 40, drop_expired: true}",
		"{model: queue, capacity: 80, workers: 8}",
		"{model: concurrency, base: 20ms, per_inflight: 2ms}",
		"{model: queue, capacity: 80, workers: 8, shed: {deadline: true}, limit: {use: gradient}}",
	}
	outages := []string{
		"[]",
		"[{kind: outage, at: 2s, for: 2s, mode: blackhole}]",
		"[{kind: outage, at: 2s, for: 2s, mode: refuse}]",
		"[{kind: outage, at: 2s, for: 2s, mode: stall}]",
		"[{kind: capacity, at: 2s, for: 3s, capacity: 20}, {kind: errors, at: 3s, for: 1s, error_rate: 0.5}]",
	}
	trig := outages[int(outage)%len(outages)]
	if int(originModel)%len(models) == 3 && int(outage)%len(outages) == 4 {
		trig = "[{kind: latency, at: 2s, for: 3s, factor: 5}, {kind: errors, at: 3s, for: 1s, error_rate: 0.5}]"
	}
	b := chainBudgets[int(budget)%len(chainBudgets)]
	breaker, hedge, throttle, propagate := "{use: none}", "", "{use: none}", flags&4 != 0
	fleetHedge := "{delay: 0s}"
	if flags&1 != 0 {
		breaker = "{use: consecutive, settings: {threshold: 3, cooldown: 1s}}"
	}
	if flags&2 != 0 {
		hedge, fleetHedge = ", hedge: {delay: 60ms}", "{delay: 120ms}"
	}
	if flags&8 != 0 {
		throttle = "{use: adaptive, settings: {k: 2, window: 2s}}"
	}
	client := fmt.Sprintf("{timeout: 250ms, retry: {max_retries: %d, backoff: {use: exponential, base: 20ms, cap: 200ms, jitter: full}}, budget: %s, breaker: %s%s}",
		retries%5, b, breaker, hedge)
	tier2 := fmt.Sprintf("{timeout: 150ms, retry: {max_retries: %d}, budget: %s, propagate_deadline: %v%s}", (retries/5)%4, b, propagate, hedge)
	return fmt.Sprintf(`
name: chainfuzz
duration: 8s
tick: 500ms
traffic: {rate: %d, clients: 4, arrivals: poisson, idempotent: 0.8}
origin: %s
tiers:
  - name: edge
    server: %s
    client: %s
  - name: mid
    server: %s
    client: %s
triggers: %s
fleets:
  - name: f
    timeout: 600ms
    deadline: 3s
    retry: {max_retries: %d, idempotent_only: true}
    budget: %s
    breaker: %s
    hedge: %s
    throttle: %s
`, rate%300+1, models[int(originModel)%len(models)], models[int(tierModel)%len(models)], client,
		models[int(tierModel/5)%len(models)], tier2, trig, retries%4, b, breaker, fleetHedge, throttle)
}

// TestChainFuzzInputsParse keeps FuzzRunMatrix honest: every choice it makes
// is a scenario the loader accepts, so no part of the space is skipped.
func TestChainFuzzInputsParse(t *testing.T) {
	for o := range uint8(5) {
		for tm := range uint8(25) {
			for out := range uint8(5) {
				for b := range uint8(len(chainBudgets)) {
					y := chainYAML(o, tm, out, b, 15, 100, 13)
					if _, err := scenario.Parse("chain.yaml", []byte(y)); err != nil {
						t.Fatalf("origin %d tier %d outage %d budget %d: %v", o, tm, out, b, err)
					}
				}
			}
		}
	}
}

// FuzzRunMatrix runs chains of two tiers over every origin and tier model,
// outage mode, budget kind, breaker, hedge, deadline propagation and
// throttle: every result must satisfy every accounting identity
// (Result.Check, which Run applies; checked here again so that a run that
// slipped past it fails with the numbers).
func FuzzRunMatrix(f *testing.F) {
	for b := range uint8(len(chainBudgets)) {
		f.Add(uint8(2), uint8(b*3), uint8(b%5), b, uint8(b*5), uint16(120), uint8(13))
	}
	f.Add(uint8(2), uint8(3), uint8(3), uint8(0), uint8(0), uint16(100), uint8(3))
	f.Add(uint8(4), uint8(9), uint8(2), uint8(1), uint8(15), uint16(250), uint8(19))
	f.Fuzz(func(t *testing.T, originModel, tierModel, outage, budget, flags uint8, rate uint16, retries uint8) {
		sc, err := scenario.Parse("chain.yaml", []byte(chainYAML(originModel, tierModel, outage, budget, flags, rate, retries)))
		if err != nil {
			t.Fatal(err) // TestChainFuzzInputsParse: every choice parses
		}
		r, err := Run(context.Background(), sc)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Check(); err != nil {
			t.Fatal(err)
		}
		checkInvariants(t, sc, r)
	})
}
