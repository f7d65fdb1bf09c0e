package sim

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/retrystorm/retrystorm/scenario"
)

// FuzzSystem builds small scenarios of the system engine from fuzzed
// numbers (a cache, a tier with a pool, shared or copied fleets, open or
// closed loops, flushes, partitions, CPU cuts, bursts): whatever the
// loader accepts must run without a panic, keep every accounting identity
// (Run checks them) and every invariant of checkInvariants, and stay
// within its estimate.
func FuzzSystem(f *testing.F) {
	f.Add(uint8(0), uint16(200), uint16(80), uint16(500), uint8(0), uint8(0), uint8(2), uint8(3))
	f.Add(uint8(1), uint16(50), uint16(30), uint16(50), uint8(1), uint8(1), uint8(0), uint8(1))
	f.Add(uint8(2), uint16(900), uint16(300), uint16(20), uint8(2), uint8(2), uint8(5), uint8(0))
	f.Add(uint8(3), uint16(10), uint16(5), uint16(2), uint8(3), uint8(3), uint8(4), uint8(7))
	f.Fuzz(func(t *testing.T, shape uint8, rate, capacity, keys uint16, trigger, cacheOpts, retries, pool uint8) {
		cache := []string{
			"{keys: %d, ttl: 2s}",
			"{keys: %d, ttl: 1s, ttl_jitter: 0.5, coalesce: true, start: loaded}",
			"{keys: %d, ttl: 500ms, serve_stale: 2s, capacity: 1, eviction: fifo, popularity: uniform}",
			"{keys: %d, ttl: 0s, start: cold, coalesce: true, latency: 50ms}",
		}[cacheOpts%4]
		cache = fmt.Sprintf(cache, keys%5000+1)
		trig := []string{
			"[{kind: flush, at: 2s}]",
			"[{kind: flush, at: 2s, for: 1s, mode: soft}, {kind: capacity, at: 3s, for: 2s, capacity: 1}]",
			"[{kind: partition, from: cache, to: app, at: 1s, for: 2s}]",
			"[{kind: cpu, at: 1s, for: 3s, share: 0.1, replica: 0}, {kind: burst, at: 2s, for: 50ms, count: 40}]",
		}[trigger%4]
		traffic := fmt.Sprintf("{rate: %d, arrivals: poisson, clients: 4}", rate%2000+1)
		if shape&1 == 1 {
			traffic = fmt.Sprintf("{arrivals: closed, clients: %d, think: %dms, think_dist: exponential}", rate%50+1, rate%300)
		}
		retry := fmt.Sprint(retries % 5)
		if retries == 255 {
			retry = "unlimited"
		}
		poolKey := ""
		if pool%2 == 1 {
			poolKey = fmt.Sprintf(", pool: {size: %d, queue_limit: %d, wait_timeout: %dms}", pool%7+1, pool%3, pool%4*50)
		}
		shared := "shared: false"
		if shape&2 == 2 {
			shared = "shared: true"
		}
		y := fmt.Sprintf(`
name: fuzz
duration: 6s
tick: 500ms
%s
traffic: %s
origin: {model: queue, capacity: %d, workers: 4, replicas: 2, queue_limit: %d, shed: {deadline: %v}}
tiers:
  - name: cache
    cache: %s
    client: {timeout: 400ms, budget: {use: none}%s}
  - name: app
    server: {model: queue, capacity: 1000, workers: 8}
    client: {timeout: 300ms, retry: {max_retries: 1}, budget: {use: none}, propagate_deadline: true%s}
triggers: %s
fleets:
  - name: users
    timeout: 1s
    deadline: 3s
    retry: {max_retries: %s, backoff: {use: exponential, base: 20ms, cap: 500ms, jitter: full}}
    budget: {use: token_bucket, settings: {budget_ratio: 0.2, min_tokens: 2}}
    breaker: {use: consecutive, settings: {threshold: 3, cooldown: 300ms}}
    %s
  - name: direct
    calls: app
    timeout: 1s
    deadline: 4s
    retry: {max_retries: %s}
    budget: {use: none}
`, shared, traffic, capacity%2000+4, keys%3*10, shape&4 == 4, cache, poolKey, poolKey, trig, retry, strings.TrimPrefix(poolKey, ", "), retry)
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
			for _, l := range f.Tiers {
				attempts += l.Summary.Attempts
			}
		}
		for _, l := range r.Layers {
			attempts += l.Summary.Attempts
		}
		if est := Estimate(sc); float64(attempts) > est.Attempts {
			t.Fatalf("%d attempts, more than the estimate of %.0f", attempts, est.Attempts)
		}
	})
}
