package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/resil"
	"github.com/retrystorm/retrystorm/resil/budget"
	"github.com/retrystorm/retrystorm/scenario"
)

func run(t *testing.T, sc *scenario.Scenario) *Result {
	t.Helper()
	r, err := Run(context.Background(), sc)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func parse(t testing.TB, yaml string) *scenario.Scenario {
	t.Helper()
	sc, err := scenario.Parse("test.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

func encode(t *testing.T, r *Result) []byte {
	t.Helper()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestSameSeedSameBytes(t *testing.T) {
	sc := loadScenario(t, "testdata/storm.yaml")
	a, b := encode(t, run(t, sc)), encode(t, run(t, sc))
	if !bytes.Equal(a, b) {
		t.Fatal("two runs with the same seed differ")
	}
	sc.Seed = 2
	if bytes.Equal(a, encode(t, run(t, sc))) {
		t.Fatal("seeds 1 and 2 give the same bytes: the seed is not used")
	}
}

func TestFleetsShareTraffic(t *testing.T) {
	sc := loadScenario(t, "testdata/storm.yaml")
	r := run(t, sc)
	a, b := r.Fleets[0].Series.Intents, r.Fleets[1].Series.Intents
	for k := range a {
		if a[k] != b[k] {
			t.Fatalf("tick %d: fleets saw %d and %d intents; traffic must be identical", k, a[k], b[k])
		}
	}
}

// checkInvariants checks what must hold of any run, whatever the policy:
// every accounting identity (Result.Check), and what follows from the
// scenario's own settings.
func checkInvariants(t *testing.T, sc *scenario.Scenario, r *Result) {
	t.Helper()
	if err := r.Check(); err != nil {
		t.Error(err)
	}
	for i, f := range r.Fleets {
		s, se := f.Summary, f.Series
		name := fmt.Sprintf("%s/%s", sc.Name, f.Name)
		throttled := s.ThrottleRefusals
		for k := range se.Tick {
			for _, v := range []float64{se.ErrorRate[k], se.BreakerOpen[k]} {
				if v < 0 || v > 1 || math.IsNaN(v) {
					t.Errorf("%s tick %d: share %v out of [0, 1]", name, k, v)
				}
			}
		}
		if (throttled == 0) != (se.ThrottleRefusals == nil) {
			t.Errorf("%s: %d throttle refusals, and the series is nil: %v", name, throttled, se.ThrottleRefusals == nil)
		}
		if sc.Fleets[i].Throttle.Use != scenario.ThrottleAdaptive && (throttled != 0 || s.LostBy.Throttled != 0) {
			t.Errorf("%s: no throttle, yet %d refusals and %d intents lost to it", name, throttled, s.LostBy.Throttled)
		}
		// Every intent either succeeded once (one answer in time) or was
		// lost; intents arriving late in the run may answer after it.
		// (A closed loop has at most one intent per client in flight.)
		tr := sc.TrafficOf(i)
		slack := int64(tr.Rate * 10)
		if tr.Closed() {
			slack = int64(tr.Clients)
		}
		if won := s.Intents - s.IntentsLost; won < 0 || won > s.Goodput+slack {
			t.Errorf("%s: %d intents succeeded but goodput is %d", name, won, s.Goodput)
		}
		if m := sc.Fleets[i].Retry.MaxRetries; m >= 0 && s.Retries > int64(m)*s.Intents {
			t.Errorf("%s: %d retries for %d intents at most %d each", name, s.Retries, s.Intents, m)
		}
		// A success-funded token bucket with unit costs: per client,
		// retries <= ratio × successes + floor.
		b := sc.Fleets[i].Budget
		if tb := b.TokenBucket; b.Use == scenario.BudgetTokenBucket && tb.Funding == budget.FundedBySuccess && tb.RetryCost == 1 && tb.TimeoutCost == 1 {
			bound := tb.Ratio*float64(s.Successes+int64(sc.Traffic.Rate*10)) + tb.MinTokens*float64(sc.Traffic.Clients) + float64(sc.Traffic.Clients)
			if float64(s.Retries+s.Hedges) > bound {
				t.Errorf("%s: %d retries break the budget bound %.0f", name, s.Retries, bound)
			}
		}
	}
}

// matrix is a spread of origins, triggers and policies, small enough to
// run quickly.
func matrix() []string {
	origins := []string{
		"{model: capacity, capacity: 120}",
		"{model: capacity, capacity: 120, rejection_cost: 0.5}",
		"{model: queue, capacity: 120, workers: 12}",
		"{model: queue, capacity: 120, workers: 12, queue_limit: 50, discipline: lifo, drop_expired: true}",
		"{model: queue, capacity: 120, workers: 12, replicas: 3, error_rate: 0.02, broken: 0.1}",
		"{model: concurrency, base: 50ms, per_inflight: 5ms, replicas: 2}",
		"{model: queue, capacity: 120, workers: 12, shed: {deadline: true}, limit: {use: gradient}}",
		"{model: queue, capacity: 120, workers: 12, queue_limit: 60, discipline: adaptive_lifo, max_queue_time: 200ms, limit: {use: aimd}, replicas: 2}",
		"{model: concurrency, base: 50ms, per_inflight: 5ms, shed: {deadline: true, reserve: 10ms}, limit: {use: vegas}}",
	}
	triggers := []string{
		"[{kind: capacity, at: 10s, for: 5s, capacity: 30}]",
		"[{kind: errors, at: 10s, for: 5s, error_rate: 0.5}]",
		"[{kind: outage, at: 10s, for: 3s}, {kind: load, at: 20s, for: 5s, rate: 200}]",
		"[{kind: latency, at: 10s, for: 5s, factor: 8, replicas: 1}]",
		"[{kind: outage, at: 10s, for: 3s, mode: refuse}, {kind: outage, at: 20s, for: 2s, mode: stall}]",
		"[{kind: outage, at: 10s, for: 4s, mode: stall}, {kind: outage, at: 12s, for: 1s, mode: refuse}]",
	}
	fleets := `
  - name: naive
    timeout: 1s
    retry: {max_retries: 3, backoff: {use: exponential, base: 100ms, cap: 2s}}
    budget: {use: none}
  - name: bucket
    timeout: 500ms
    deadline: 3s
    retry: {max_retries: unlimited, idempotent_only: true, backoff: {use: exponential, base: 50ms, cap: 1s, jitter: decorrelated}}
    budget: {use: token_bucket, settings: {budget_ratio: 0.2, min_tokens: 2, max_tokens: 20}}
    breaker: {use: count_window, settings: {window_size: 20, failure_rate: 0.5, min_calls: 10, cooldown: 2s, probes: 2}}
    hedge: {delay: 200ms}
  - name: window
    timeout: 1s
    retry: {max_retries: 2, backoff: {use: fixed, base: 200ms, jitter: equal}}
    budget: {use: window, settings: {budget_ratio: 0.1, min_retries_per_second: 1, funded_by: request}}
    breaker: {use: time_window, settings: {window: 2s, failure_rate: 0.5, slow_call: 400ms, slow_call_rate: 0.8, scope: retries}}
  - name: grpc
    timeout: 1s
    retry: {max_retries: 4, backoff: {use: exponential, base: 100ms, cap: 1s, jitter: full}}
    budget: {use: grpc, settings: {max_tokens: 10, token_ratio: 0.1}}
  - name: aws
    timeout: 1s
    retry: {max_retries: 3, backoff: {use: exponential, base: 100ms, cap: 1s, jitter: factor, factor: 0.5}}
    budget: {use: aws}
    breaker: {use: consecutive, settings: {threshold: 3, cooldown: 1s, max_cooldown: 8s}}
  - name: throttle
    timeout: 1s
    retry: {max_retries: 3, backoff: {use: exponential, base: 100ms, cap: 1s, jitter: full}}
    budget: {use: none}
    throttle: {use: adaptive, settings: {window: 5s}}
  - name: throttle and breaker
    timeout: 1s
    retry: {max_retries: 3, idempotent_only: true, backoff: {use: exponential, base: 100ms, cap: 1s, jitter: full}}
    budget: {use: token_bucket, settings: {budget_ratio: 0.1, min_tokens: 5}}
    breaker: {use: consecutive, settings: {threshold: 5, cooldown: 2s}}
    throttle: {use: adaptive, settings: {k: 1.5, window: 5s, max_probability: 0.9}}
`
	var out []string
	for i, o := range origins {
		for j, tr := range triggers {
			if strings.Contains(o, "concurrency") && strings.Contains(tr, "capacity") {
				continue // a concurrency origin has no capacity to dip
			}
			out = append(out, fmt.Sprintf(`name: m%d-%d
seed: %d
duration: 40s
tick: 500ms
traffic: {rate: 100, arrivals: poisson, clients: 5, idempotent: 0.8, keys: 0.5}
origin: %s
triggers: %s
fleets:%s`, i, j, i*10+j, o, tr, fleets))
		}
	}
	return out
}

func TestInvariants(t *testing.T) {
	for _, y := range matrix() {
		sc := parse(t, y)
		t.Run(sc.Name, func(t *testing.T) {
			t.Parallel()
			checkInvariants(t, sc, run(t, sc))
		})
	}
}

func TestStormCollapsesAndRecovers(t *testing.T) {
	sc := loadScenario(t, "testdata/storm.yaml")
	r := run(t, sc)
	checkInvariants(t, sc, r)
	naive, guarded := r.Fleets[0].Summary, r.Fleets[1].Summary
	if naive.Recovered {
		t.Errorf("naive recovered in %d ticks; it must stay collapsed", *naive.RecoveryTicks)
	}
	if !guarded.Recovered {
		t.Error("guarded never recovered")
	}
	if naive.WastedWork == 0 {
		t.Error("a collapsed queue must serve requests nobody waits for")
	}
	sc.Origin.DropExpired = true
	sc.Fleets = sc.Fleets[:1]
	if s := run(t, sc).Fleets[0].Summary; !s.Recovered || s.WastedWork != 0 {
		t.Errorf("with drop_expired the naive fleet must recover and waste nothing: recovered %v, wasted %d", s.Recovered, s.WastedWork)
	}
	// The origin's own defences, each alone: deadline shedding, an
	// adaptive concurrency limit.
	sc.Origin.DropExpired = false
	for name, o := range map[string]func(*scenario.Origin){
		"shed": func(o *scenario.Origin) { o.Shed = scenario.Shed{Deadline: true} },
		"limit": func(o *scenario.Origin) {
			o.Limit = scenario.Limit{Use: scenario.LimitAIMD, Limit: 20, MinLimit: 1, MaxLimit: 1000, Backoff: 0.9}
		},
	} {
		c := *sc
		o(&c.Origin)
		if err := c.Validate(); err != nil {
			t.Fatal(err)
		}
		r := run(t, &c)
		checkInvariants(t, &c, r)
		if s := r.Fleets[0].Summary; !s.Recovered || s.Goodput < naive.Goodput*2 {
			t.Errorf("%s: the naive fleet must recover, with more goodput than against the plain origin: recovered %v, goodput %d against %d", name, s.Recovered, s.Goodput, naive.Goodput)
		}
	}
}

// TestThrottleCountedApart: the adaptive throttle's refusals are counted
// apart from the breaker's, as failures and, when they end an intent, in
// lost_by.throttled; their ground truth is drawn as for the breaker's.
// A fleet without a throttle has no throttle fields in its JSON.
func TestThrottleCountedApart(t *testing.T) {
	sc := parse(t, `
duration: 60s
traffic: {rate: 100, clients: 2}
origin: {model: capacity, capacity: 1000, broken: 0.7}
fleets:
  - name: throttle
    timeout: 1s
    retry: {max_retries: 1}
    budget: {use: none}
    throttle: {use: adaptive, settings: {window: 5s}}
  - name: plain
    timeout: 1s
    budget: {use: none}
`)
	r := run(t, sc)
	checkInvariants(t, sc, r)
	s := r.Fleets[0].Summary
	if s.ThrottleRefusals == 0 || s.BreakerRefusals != 0 || s.LostBy.Throttled == 0 || s.LostBy.Breaker != 0 {
		t.Fatalf("throttle refusals %d, breaker refusals %d, lost %+v", s.ThrottleRefusals, s.BreakerRefusals, s.LostBy)
	}
	// 30% of the keys are healthy: about 30% of the refused calls would
	// have succeeded.
	if share := float64(s.AnswersThrownAway) / float64(s.ThrottleRefusals); share < 0.2 || share > 0.4 {
		t.Errorf("%d of %d refused calls would have succeeded (%.2f); 30%% of the keys are healthy", s.AnswersThrownAway, s.ThrottleRefusals, share)
	}
	js := string(encode(t, r))
	if n := strings.Count(js, `"throttle_refusals"`); n != 2 { // the summary's and the series', of the first fleet
		t.Errorf("throttle_refusals appears %d times in the JSON, want 2 (the throttled fleet's)", n)
	}
	if !strings.Contains(js, `"throttled":`) {
		t.Error("no lost_by.throttled in the JSON")
	}
	if a, b := js, string(encode(t, run(t, sc))); a != b {
		t.Error("two runs of a throttled fleet differ: its draws are not seeded")
	}
}

// TestOriginRates checks each model against its own arithmetic, without
// retries: what it serves per tick at a steady overload.
func TestOriginRates(t *testing.T) {
	cases := []struct {
		origin  string
		rate    float64
		goodput float64 // expected answers in time per second, steady state
		tol     float64
	}{
		{"{model: capacity, capacity: 120}", 200, 120, 3},
		{"{model: capacity, capacity: 120, rejection_cost: 0.25}", 200, (120 - 0.25*200) / 0.75, 3},
		{"{model: capacity, capacity: 120, rejection_cost: 0.5}", 300, 0, 1},
		{"{model: queue, capacity: 120, workers: 12, queue_limit: 24}", 200, 120, 3},
		{"{model: queue, capacity: 50, workers: 5}", 40, 40, 2},
		// A concurrency origin below its limit answers everything.
		{"{model: concurrency, base: 10ms, per_inflight: 1ms}", 100, 100, 2},
	}
	for _, c := range cases {
		t.Run(c.origin, func(t *testing.T) {
			sc := parse(t, fmt.Sprintf(`
duration: 30s
traffic: {rate: %g}
origin: %s
fleets:
  - name: once
    timeout: 1s
    budget: {use: none}
`, c.rate, c.origin))
			r := run(t, sc)
			got := mean(r.Fleets[0].Series.Goodput[10:])
			if math.Abs(got-c.goodput) > c.tol {
				t.Errorf("goodput %.1f/s, want %.1f ± %g", got, c.goodput, c.tol)
			}
		})
	}
}

func mean(v []int64) float64 {
	s := int64(0)
	for _, x := range v {
		s += x
	}
	return float64(s) / float64(len(v))
}

func TestBreakerGroundTruth(t *testing.T) {
	// Half the key space is broken: a breaker that opens sheds healthy
	// calls too, and the simulator must count them as thrown away.
	sc := parse(t, `
duration: 60s
traffic: {rate: 100, clients: 2}
origin: {model: capacity, capacity: 1000, broken: 0.5}
fleets:
  - name: breaker
    timeout: 1s
    budget: {use: none}
    breaker: {use: count_window, settings: {window_size: 20, failure_rate: 0.3, cooldown: 2s}}
`)
	s := run(t, sc).Fleets[0].Summary
	if s.BreakerRefusals == 0 {
		t.Fatal("the breaker never opened at 50% failures")
	}
	share := float64(s.AnswersThrownAway) / float64(s.BreakerRefusals)
	if share < 0.4 || share > 0.6 {
		t.Errorf("%d of %d refused calls would have succeeded (%.2f); half the keys are healthy", s.AnswersThrownAway, s.BreakerRefusals, share)
	}
}

func TestStopsOnCancel(t *testing.T) {
	sc := loadScenario(t, "testdata/storm.yaml")
	sc.Duration = 24 * time.Hour
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Run(ctx, sc); err == nil {
		t.Fatal("a cancelled run returned no error")
	}
}

// TestLostByColumns: every reason resil stops for lands in one column of
// the JSON's lost_by.
func TestLostByColumns(t *testing.T) {
	var l LostBy
	for r := resil.StopReason(0); r <= resil.StopThrottled; r++ {
		l.Add(r)
	}
	want := LostBy{RetriesExhausted: 4, Budget: 1, Breaker: 1, Throttled: 1, NotIdempotent: 1, Deadline: 2}
	if l != want {
		t.Fatalf("%+v, want %+v (none, exhausted, not retryable and pushback are exhausted; deadline and canceled are deadline)", l, want)
	}
}

// TestOutageModes runs one outage in each mode, against a queue origin
// with room to spare, clients without retries and a timeout shorter than
// the outage, and checks what docs/scenario.md promises of each mode.
func TestOutageModes(t *testing.T) {
	const y = `name: %s
duration: 30s
traffic: {rate: 50}
origin: {model: queue, capacity: 100, workers: 5}
triggers: [{kind: outage, at: 10s, for: 3s, mode: %s}]
fleets:
  - {name: once, timeout: 2s, budget: {use: none}}
`
	const during, after = 10, 13 // the outage's first tick, and the first after it
	res := map[string]FleetResult{}
	for _, mode := range []string{scenario.OutageRefuse, scenario.OutageBlackhole, scenario.OutageStall} {
		sc := parse(t, fmt.Sprintf(y, mode, mode))
		r := run(t, sc)
		checkInvariants(t, sc, r)
		res[mode] = r.Fleets[0]
	}
	sum := func(v []int64, from, to int) (n int64) {
		for _, x := range v[from:to] {
			n += x
		}
		return n
	}
	for mode, f := range res {
		s := f.Series
		sent := sum(s.Offered, during, after)
		if sent != 150 {
			t.Errorf("%s: %d attempts sent during the outage, want 150 (the clients do not know)", mode, sent)
		}
		if g := sum(s.Goodput, after+3, len(s.Tick)); g != sum(s.Offered, after+3, len(s.Tick)) {
			t.Errorf("%s: after the outage (and its backlog) %d of %d attempts succeeded, want all", mode, g, sum(s.Offered, after+3, len(s.Tick)))
		}
	}

	// refuse: every attempt of the outage fails at once, none times out,
	// and nothing waits.
	if f := res[scenario.OutageRefuse]; sum(f.Series.FailedAttempts, during, after) != 150 || f.Summary.Timeouts != 0 ||
		sum(f.Series.Queue, during, after) != 0 || f.Summary.WastedWork != 0 {
		t.Errorf("refuse: %d failed during the outage (want 150), %d timeouts (want 0), queue %v, %d wasted",
			sum(f.Series.FailedAttempts, during, after), f.Summary.Timeouts, f.Series.Queue[during:after], f.Summary.WastedWork)
	}
	// blackhole: every attempt of the outage times out, the server does no
	// work for them and keeps no queue.
	if f := res[scenario.OutageBlackhole]; f.Summary.Timeouts < 150 || sum(f.Series.FailedAttempts, during, after) != 150 ||
		sum(f.Series.Queue, during, after) != 0 || f.Summary.WastedWork != 0 {
		t.Errorf("blackhole: %d timeouts (want at least 150), %d failed, queue %v, %d wasted",
			f.Summary.Timeouts, sum(f.Series.FailedAttempts, during, after), f.Series.Queue[during:after], f.Summary.WastedWork)
	}
	// stall: the attempts queue up and nothing comes out; when it ends the
	// server serves the backlog: the attempts of the stall's last two
	// seconds (the timeout) still succeed, the earlier ones timed out and
	// are served for nobody.
	f := res[scenario.OutageStall]
	s := f.Series
	for k := during; k < after; k++ {
		if want := int64(50 * (k - during + 1)); s.Queue[k] < want-5 {
			t.Errorf("stall: queue %d at the end of tick %d, want about %d: the stalled server queues what arrives", s.Queue[k], k, want)
		}
	}
	if g := sum(s.Goodput, during, after); g < 50 {
		t.Errorf("stall: %d attempts sent during the stall were answered in time after it, want at least 50", g)
	}
	if f.Summary.Timeouts < 40 || f.Summary.WastedWork < 40 {
		t.Errorf("stall: %d timeouts and %d served for nobody, want at least 40 each: the first second's attempts outwait their clients", f.Summary.Timeouts, f.Summary.WastedWork)
	}
}
