package grid

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/scenario"
	"github.com/retrystorm/retrystorm/sim"
)

// TestGroupsAreTheWholeRuns runs a grid of faults at three loads, through
// a tier, with a gRPC throttle and with a breaker (whose runs cannot be
// forked), grouped by warm-up and not: every cell's result must be the
// same, and some cells must have been played on from a shared warm-up.
func TestGroupsAreTheWholeRuns(t *testing.T) {
	faults := []string{
		"{kind: capacity, at: 20s, for: 10s, capacity: 30}",
		"{kind: errors, at: 20s, for: 5s, error_rate: 1, answer: rejection}",
		"{kind: outage, at: 20s, for: 4s, mode: blackhole}",
		"{kind: latency, at: 22s, for: 6s, factor: 3}",
	}
	policies := []string{
		"budget: {use: grpc, settings: {max_tokens: 10, token_ratio: 0.1}}",
		"budget: {use: none}\n    breaker: {use: consecutive, settings: {threshold: 5}}",
	}
	var scs []*scenario.Scenario
	for _, p := range policies {
		for _, capacity := range []float64{200, 130, 111} {
			for _, f := range faults {
				y := fmt.Sprintf(`name: g
seed: 3
duration: 60s
tick: 1s
traffic: {rate: 100, arrivals: poisson, clients: 4}
origin: {model: queue, capacity: %g, workers: 12}
triggers: [%s]
fleets:
  - name: f
    timeout: 1s
    retry: {max_retries: 2, backoff: {use: exponential, base: 50ms, cap: 1s, jitter: full}}
    %s
tiers:
  - name: t
    server: {model: concurrency, base: 1ms, replicas: 2}
    client: {timeout: 2s, retry: {max_retries: 1}, budget: {use: none}}
`, capacity, f, p)
				sc, err := scenario.Parse("g.yaml", []byte(y))
				if err != nil {
					t.Fatal(err)
				}
				scs = append(scs, sc)
			}
		}
	}
	// A cell of the first group whose fault starts before the warm-up's
	// moment: it cannot be played on from it, and runs whole.
	early := scs[0].Clone()
	early.Triggers[0].At = 15 * time.Second
	scs = append(scs, early)
	at := 20 * time.Second
	first := map[string]int{}
	group := func(i int) int {
		key, ok := sim.WarmKey(scs[i], at)
		if !ok {
			return i
		}
		if k, ok := first[key]; ok {
			return k
		}
		first[key] = i
		return i
	}
	groups := make([]int, len(scs))
	for i := range scs {
		groups[i] = group(i)
	}
	groups[len(scs)-1] = groups[0]
	run := func(grouped bool) ([]string, int64) {
		out := make([]string, len(scs))
		var mu sync.Mutex
		g := Grid{Cells: len(scs), Cell: func(i int) (*scenario.Scenario, error) { return scs[i].Clone(), nil },
			Early: func(i int) sim.EarlyExit { return sim.EarlyExit(i % 4) }}
		keep := func(i int, f *sim.FleetResult) {
			b, err := json.Marshal(f)
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			out[i] = string(b)
			mu.Unlock()
		}
		if !grouped {
			if err := Run(context.Background(), g, Options{}, keep); err != nil {
				t.Fatal(err)
			}
			return out, 0
		}
		n, err := runGroupsCounted(context.Background(), g, Groups{First: func(i int) int { return groups[i] }, WarmAt: at}, Options{}, keep)
		if err != nil {
			t.Fatal(err)
		}
		return out, n
	}
	whole, _ := run(false)
	grouped, forked := run(true)
	for i := range scs {
		if whole[i] != grouped[i] {
			t.Errorf("cell %d (%s): grouped, the result differs from the whole run's", i, scs[i].Triggers[0].Kind)
		}
	}
	// The gRPC throttle's three loads, four faults each: one warm-up per
	// load. The breaker's cannot be forked and run whole.
	if forked != 12 {
		t.Errorf("%d cells played on from a shared warm-up, want 12", forked)
	}
}
