package sim

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/resil/budget"
	"github.com/retrystorm/retrystorm/scenario"
)

// The small files that ask for too much: the estimate says so,
// before anything is allocated, with the figure and the limit.
func TestEstimateRefusesWhatWouldNotFit(t *testing.T) {
	base := parse(t, `
duration: 100000s
traffic: {rate: 1}
origin: {model: capacity, capacity: 10}
fleets:
  - {name: f, timeout: 1s, budget: {use: none}}
`)
	manyFleets := *base
	manyFleets.Fleets = nil
	for i := range 10_000 {
		f := base.Fleets[0]
		f.Name = fmt.Sprint("f", i)
		manyFleets.Fleets = append(manyFleets.Fleets, f)
	}
	wideWindows := parse(t, `
duration: 10s
traffic: {rate: 1, clients: 1000000}
origin: {model: capacity, capacity: 10}
fleets:
  - name: f
    timeout: 1s
    budget: {use: none}
    breaker: {use: count_window, settings: {window_size: 1000000, failure_rate: 0.5}}
`)
	for _, c := range []struct {
		name string
		sc   *scenario.Scenario
		at   int64 // the estimate is at least this
	}{
		{"10,000 fleets × 100,000 ticks", &manyFleets, 10_000 * 100_000 * 192},
		{"1,000,000 clients × a window of 1,000,000", wideWindows, 1e12},
	} {
		cost := Estimate(c.sc)
		if cost.Memory < c.at {
			t.Errorf("%s: estimate %s, want at least %s", c.name, Bytes(cost.Memory), Bytes(c.at))
		}
		err := cost.Check(c.sc.Name, DefaultLimits)
		var ce *CostError
		if !errors.As(err, &ce) || !ce.Memory || !errors.Is(err, ErrTooCostly) {
			t.Fatalf("%s: Check = %v, want a memory *CostError", c.name, err)
		}
		if msg := err.Error(); !strings.Contains(msg, Bytes(cost.Memory)) || !strings.Contains(msg, "limit of 2 GiB") {
			t.Errorf("%s: %q does not give the estimate and the limit", c.name, msg)
		}
	}
}

// The valid files that run for days: the estimate of the work
// says so.
func TestEstimateOfLongRuns(t *testing.T) {
	busy := parse(t, `
duration: 720h
tick: 1h
traffic: {rate: 1000000}
origin: {model: capacity, capacity: 2000000}
fleets:
  - {name: f, timeout: 1s, budget: {use: none}}
`)
	if c := Estimate(busy); c.Attempts < 2.5e12 || c.Time() < 4*24*time.Hour {
		t.Errorf("1e6 intents/s for 720h: %.3g attempts, %v; want at least 2.6e12 and days", c.Attempts, c.Time())
	}
	spin := parse(t, `
duration: 10s
traffic: {rate: 10}
origin: {model: capacity, capacity: 10}
triggers: [{kind: outage, at: 1s, for: 5s}]
fleets:
  - {name: f, timeout: 1ms, retry: {max_retries: unlimited}, budget: {use: none}}
`)
	if c := Estimate(spin); c.Attempts < 100*3.6e6 {
		t.Errorf("unlimited retries every millisecond, followed for an hour: %.3g attempts, want at least 3.6e8", c.Attempts)
	}
	// A budget caps the same fleet near its share.
	capped := *spin
	capped.Fleets = []scenario.Fleet{spin.Fleets[0]}
	capped.Fleets[0].Budget = scenario.Budget{Use: scenario.BudgetTokenBucket, TokenBucket: budget.TokenBucketSettings{Ratio: 0.1, Funding: budget.FundedBySuccess, MinTokens: 10, MaxTokens: 100, RetryCost: 1, TimeoutCost: 1}}
	if c := Estimate(&capped); c.Attempts > 103*1.1+10+0.5 {
		t.Errorf("with a budget of 0.1 and a floor of 10: %.3g attempts, want at most 124 (100 intents and one for each change of rate)", c.Attempts)
	}
	err := Estimate(spin).Check("spin", Limits{Attempts: 1e8})
	var ce *CostError
	if !errors.As(err, &ce) || ce.Memory || !strings.Contains(err.Error(), "allow a long run") {
		t.Errorf("Check = %v, want a work *CostError", err)
	}
}

// RunWith refuses before it runs, and runs within the limits.
func TestRunWithLimits(t *testing.T) {
	sc := loadScenario(t, "testdata/storm.yaml")
	_, err := RunWith(context.Background(), sc, Options{Limits: Limits{Memory: 64 << 10}})
	if !errors.Is(err, ErrTooCostly) {
		t.Fatalf("RunWith(64 KiB) = %v, want ErrTooCostly", err)
	}
	if _, err := RunWith(context.Background(), sc, Options{Limits: Limits{Attempts: 10}}); !errors.Is(err, ErrTooCostly) {
		t.Fatalf("RunWith(10 attempts) = %v, want ErrTooCostly", err)
	}
	if _, err := Run(context.Background(), sc); err != nil {
		t.Fatal(err)
	}
}

// The estimate bounds the work: no run simulates more attempts than it
// said, whatever the policy.
func TestEstimateBoundsAttempts(t *testing.T) {
	for _, extra := range []string{
		"", // the storm as it is
		"  - {name: unlimited, timeout: 1s, deadline: 20s, retry: {max_retries: unlimited, backoff: {use: fixed, base: 100ms}}, budget: {use: none}}\n",
		"  - {name: hedged, timeout: 1s, retry: {max_retries: 2}, hedge: {delay: 200ms, max: 2}, budget: {use: grpc, settings: {max_tokens: 10, token_ratio: 0.1}}}\n",
		"  - {name: aws, timeout: 1s, retry: {max_retries: 5}, budget: {use: aws}}\n",
		"  - {name: window, timeout: 1s, retry: {max_retries: unlimited, backoff: {use: exponential, base: 10ms, cap: 1s, jitter: full}}, budget: {use: window, settings: {budget_ratio: 0.2, min_retries_per_second: 1}}}\n",
	} {
		sc := loadScenario(t, "testdata/storm.yaml")
		if extra != "" {
			sc.Fleets = append(sc.Fleets, parse(t, "duration: 1s\ntraffic: {rate: 1}\norigin: {model: capacity, capacity: 1}\nfleets:\n"+extra).Fleets...)
		}
		r := run(t, sc)
		var got int64
		for _, f := range r.Fleets {
			got += f.Summary.Attempts
		}
		if est := Estimate(sc); float64(got) > est.Attempts {
			t.Errorf("%s: %d attempts, estimate %.0f", strings.TrimSpace(extra), got, est.Attempts)
		}
	}
}

// Progress reaches fleets × ticks, never goes back, and may be called from
// several goroutines.
func TestRunProgress(t *testing.T) {
	sc := loadScenario(t, "testdata/storm.yaml")
	var mu sync.Mutex
	last, total, calls := 0, 0, 0
	_, err := RunWith(context.Background(), sc, Options{Progress: func(done, n int) {
		runtime.Gosched() // widen the window in which another fleet could report
		mu.Lock()
		defer mu.Unlock()
		if done < last {
			t.Errorf("progress went back from %d to %d", last, done)
		}
		last, total = done, n
		calls++
	}})
	if err != nil {
		t.Fatal(err)
	}
	want := len(sc.Fleets) * int(sc.Duration/sc.Tick)
	if last != want || total != want || calls == 0 {
		t.Errorf("progress ended at %d of %d after %d calls, want %d of %d", last, total, calls, want, want)
	}
}

// A rate so small that the time to the next arrival overflows int64 means
// no more arrivals, not one every nanosecond (a float beyond int64 converts
// to the most negative int64 on amd64).
func TestTinyRateArrivesOnce(t *testing.T) {
	for _, arrivals := range []string{"constant", "poisson"} {
		sc := parse(t, `
duration: 10s
traffic: {rate: 1e-300, arrivals: `+arrivals+`}
origin: {model: capacity, capacity: 10}
triggers: [{kind: load, at: 2s, for: 2s, rate: 1e-300}]
fleets:
  - {name: f, timeout: 1s, budget: {use: none}}
`)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		r, err := Run(ctx, sc)
		cancel()
		if err != nil {
			t.Fatalf("%s: %v", arrivals, err)
		}
		if n := r.Fleets[0].Summary.Intents; n > 2 {
			t.Errorf("%s: %d intents at a rate of 1e-300/s over 10s, want at most 2", arrivals, n)
		}
	}
}

// TestEstimateCountsThePicker: a least-request picker looks at every
// replica on every attempt, and the estimate of the work says so (issue
// 37: over 10,000 replicas it said 24 ms for a run of 1.2 s, as for round
// robin's 0.07 s); the other pickers cost nothing more.
func TestEstimateCountsThePicker(t *testing.T) {
	run := func(balancer string) Cost {
		return Estimate(parse(t, `
duration: 60s
traffic: {rate: 1000, arrivals: constant, clients: 10}
origin: {model: capacity, capacity: 100000, replicas: 10000}
fleets:
  - {name: f, timeout: 1s, retry: {max_retries: 0}, budget: {use: none}, balancer: {use: `+balancer+`}}
`))
	}
	rr, lr := run("round_robin"), run("least_request")
	if rr.Attempts > 61_000 {
		t.Errorf("round robin: %.3g attempts' worth, want the 60,000 attempts", rr.Attempts)
	}
	// 60,000 picks over 10,000 replicas, at ScanShare an attempt each:
	// 2.85 million attempts' worth, about 1.1 s (the run took 1.18 s).
	if want := 60_000 * 10_000 * ScanShare; lr.Attempts < want || lr.Time() < time.Second {
		t.Errorf("least request over 10,000 replicas: %.3g attempts' worth, %v; want at least %.3g and a second", lr.Attempts, lr.Time(), want)
	}
	for _, b := range []string{"random", "p2c", "ewma"} {
		if c := run(b); c.Attempts != rr.Attempts {
			t.Errorf("%s: %.3g attempts' worth, round robin's %.3g", b, c.Attempts, rr.Attempts)
		}
	}
}
