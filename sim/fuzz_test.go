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
