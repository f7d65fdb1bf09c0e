package sim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/scenario"
)

// TestEarlyExitKeepsItsPromises runs scenarios whole and with each
// EarlyExit, and checks what each promises (docs/early-exit.md): with
// SkipCertainDrain every count of the run's ticks, the intents lost, the
// recovery and the baseline are the whole run's; with StopWhenDecided a
// run that stopped before its end has the whole run's recovery (never),
// baseline and NeverHealthy; with StopWhenLost also its intents, per
// tick and in all, and its intents lost. The scenarios are the project's and
// generated ones (storms, chains, replicas, every fault kind); the test
// also requires each rule to have fired, so that it cannot pass by never
// exiting early. SIM_EARLY_CASES sets how many generated scenarios.
func TestEarlyExitKeepsItsPromises(t *testing.T) {
	cases := 24
	if testing.Short() {
		cases = 6
	}
	if n, err := strconv.Atoi(os.Getenv("SIM_EARLY_CASES")); err == nil {
		cases = n
	}
	var scs []*scenario.Scenario
	for _, p := range []string{"testdata/storm.yaml", "testdata/chain-stall.yaml", "testdata/replicas-per-client.yaml", "../scenario/testdata/tiers.yaml", "testdata/early-tier-limit.yaml"} {
		sc := loadScenario(t, p)
		sc.Name = filepath.Base(p)
		scs = append(scs, sc)
	}
	rng := rand.New(rand.NewPCG(40, 1))
	for i := range cases {
		scs = append(scs, earlyCase(rng, i))
	}
	for i := range cases / 2 {
		scs = append(scs, edgeCase(rng, i))
	}
	fired := map[string]int{}
	for _, sc := range scs {
		whole := runEarly(t, sc, NoEarlyExit)
		drain := runEarly(t, sc, SkipCertainDrain)
		stop := runEarly(t, sc, StopWhenDecided)
		lost := runEarly(t, sc, StopWhenLost)
		for i := range whole.Fleets {
			w, d, s := &whole.Fleets[i], &drain.Fleets[i], &stop.Fleets[i]
			allLost(t, fmt.Sprintf("%s/%s", sc.Name, w.Name), w, &lost.Fleets[i], fired)
			at := fmt.Sprintf("%s/%s", sc.Name, w.Name)
			if w.Ended != nil {
				t.Fatalf("%s: a whole run says it ended early: %+v", at, w.Ended)
			}
			if d.Ended != nil {
				fired["drain "+d.Ended.Rule]++
				if d.Ended.Truncated {
					t.Errorf("%s: SkipCertainDrain stopped before the run's end: %+v", at, d.Ended)
				}
			}
			sameAfterDrain(t, at+" (drain skipped)", w, d)
			if s.Ended == nil || !s.Ended.Truncated {
				sameAfterDrain(t, at+" (decided at the end)", w, s)
				continue
			}
			fired["stop "+s.Ended.Rule]++
			if w.Summary.Recovered || s.Summary.Recovered || s.Summary.NeverHealthy != w.Summary.NeverHealthy ||
				s.Summary.BaselineErrorRate != w.Summary.BaselineErrorRate {
				t.Errorf("%s: stopped at %gs by %s: recovered %v never healthy %v baseline %g; the whole run: %v %v %g",
					at, s.Ended.At, s.Ended.Rule, s.Summary.Recovered, s.Summary.NeverHealthy, s.Summary.BaselineErrorRate,
					w.Summary.Recovered, w.Summary.NeverHealthy, w.Summary.BaselineErrorRate)
			}
		}
	}
	for _, rule := range []string{"drain " + EarlyQueue, "stop " + EarlyQueue, "lost " + EarlyQueue, "stop " + EarlyFedQueue, "lost " + EarlyFedQueue} {
		if fired[rule] == 0 {
			t.Errorf("the rule %q never fired: the test proves nothing of it (fired: %v)", rule, fired)
		}
	}
	t.Logf("%d scenarios; early exits: %v", len(scs), fired)
}

// allLost checks what StopWhenLost promises of fleet result l against
// the whole run w: where it stopped before the end, the whole run's
// recovery (never), baseline, NeverHealthy, intents per tick and in all,
// and intents lost; elsewhere what SkipCertainDrain promises.
func allLost(t *testing.T, at string, w, l *FleetResult, fired map[string]int) {
	t.Helper()
	if l.Ended == nil || !l.Ended.Truncated {
		if l.Ended != nil && l.Ended.AllLost {
			t.Errorf("%s: all lost at the run's end: %+v", at, l.Ended)
		}
		sameAfterDrain(t, at+" (lost at the end)", w, l)
		return
	}
	fired["lost "+l.Ended.Rule]++
	ws, ls := w.Summary, l.Summary
	if !l.Ended.AllLost || ws.Recovered || ls.Recovered || ls.NeverHealthy != ws.NeverHealthy || ls.BaselineErrorRate != ws.BaselineErrorRate ||
		ls.Intents != ws.Intents || ls.IntentsLost != ws.IntentsLost {
		t.Errorf("%s: all lost at %gs (%+v): recovered %v never healthy %v baseline %g intents %d lost %d; the whole run: %v %v %g %d %d",
			at, l.Ended.At, l.Ended, ls.Recovered, ls.NeverHealthy, ls.BaselineErrorRate, ls.Intents, ls.IntentsLost,
			ws.Recovered, ws.NeverHealthy, ws.BaselineErrorRate, ws.Intents, ws.IntentsLost)
	}
	if !reflect.DeepEqual(w.Series.Intents, l.Series.Intents) {
		t.Errorf("%s: all lost at %gs: intents per tick differ from the whole run's", at, l.Ended.At)
	}
}

func runEarly(t *testing.T, sc *scenario.Scenario, m EarlyExit) *Result {
	t.Helper()
	r, err := RunWith(context.Background(), sc, Options{EarlyExit: m})
	if err != nil {
		t.Fatalf("%s with early exit %d: %v", sc.Name, m, err)
	}
	return r
}

// sameAfterDrain checks that fleet result d, whose open intents were not
// followed after the run, counts what SkipCertainDrain promises as the
// whole run w does.
func sameAfterDrain(t *testing.T, at string, w, d *FleetResult) {
	t.Helper()
	same := func(what string, a, b any) {
		if !reflect.DeepEqual(a, b) {
			t.Errorf("%s: %s: %v, the whole run %v", at, what, b, a)
		}
	}
	ws, ds := w.Summary, d.Summary
	// What the ends after the run add, and only they: not promised.
	for _, s := range []*Summary{&ws, &ds} {
		s.Successes, s.Timeouts, s.Victims, s.LostBy, s.WastedWork, s.Dropped, s.BudgetDenials, s.BreakerTrips = 0, 0, 0, LostBy{}, 0, 0, 0, 0
	}
	same("summary", ws, ds)
	wt, dt := w.Series, d.Series
	wt.Successes, dt.Successes = nil, nil
	same("series", wt, dt)
	same("tiers", len(w.Tiers), len(d.Tiers))
	for l := range min(len(w.Tiers), len(d.Tiers)) {
		a, b := w.Tiers[l], d.Tiers[l]
		same(fmt.Sprintf("layer %d attempts, peak", l), []int64{a.Summary.Intents, a.Summary.Attempts, a.Summary.PeakOffered}, []int64{b.Summary.Intents, b.Summary.Attempts, b.Summary.PeakOffered})
		same(fmt.Sprintf("layer %d offered", l), a.Series.Offered, b.Series.Offered)
	}
}

// earlyCase generates scenario i: the storm's traffic on a queue origin
// at a random load, through one random fault, with a fleet of random
// policy, sometimes through tiers or onto replicas, as a scenario file.
func earlyCase(rng *rand.Rand, i int) *scenario.Scenario {
	pick := func(xs ...string) string { return xs[rng.IntN(len(xs))] }
	capacity := 100 / []float64{0.5, 0.7, 0.83, 0.9}[rng.IntN(4)]
	limit := 0
	if rng.IntN(5) == 0 {
		limit = 100 + rng.IntN(2000)
	}
	var fault string
	switch rng.IntN(5) {
	case 0:
		fault = fmt.Sprintf("{kind: capacity, capacity: %.1f", capacity*rng.Float64()*0.7)
	case 1:
		fault = "{kind: errors, error_rate: 1, answer: " + pick("error", "rejection")
	case 2:
		fault = "{kind: outage, mode: " + pick("refuse", "blackhole", "stall")
	default:
		fault = "{kind: capacity, capacity: 0"
	}
	y := fmt.Sprintf(`name: case %d
seed: %d
duration: 90s
tick: 1s
traffic: {rate: 100, arrivals: %s, clients: %d}
origin: {model: queue, capacity: %.2f, workers: 12, queue_limit: %d, replicas: %d}
triggers:
  - %s, at: 20s, for: %ds}
fleets:
  - name: fleet
%s`, i, i+1, pick("poisson", "constant"), 1+rng.IntN(20), capacity, limit, 1+rng.IntN(2)*rng.IntN(3), fault, 3+rng.IntN(10), earlyPolicy(rng, "    "))
	if n := rng.IntN(3); n > 0 {
		y += "tiers:\n"
		for l := range n {
			y += fmt.Sprintf("  - name: tier%d\n    server: {model: concurrency, base: 1ms, replicas: %d}\n    client:\n%s", l, 1+rng.IntN(3), earlyPolicy(rng, "      "))
		}
	}
	sc, err := scenario.Parse(fmt.Sprintf("case%d.yaml", i), []byte(y))
	if err != nil {
		panic(fmt.Sprintf("%v\n%s", err, y))
	}
	return sc
}

// edgeCase generates scenario i near the edge of recovery, where a rule
// that stopped a run a little too soon would be caught: a deep dip at a
// high load, with few retries or none, so that the backlog it leaves
// drains slowly and is gone before the run ends in some runs and not in
// others; sometimes through a tier.
func edgeCase(rng *rand.Rand, i int) *scenario.Scenario {
	load := 0.85 + 0.12*rng.Float64()
	capacity := 100 / load
	timeout := time.Duration(1000+rng.IntN(4000)) * time.Millisecond
	retries := []int{0, 0, 1}[rng.IntN(3)]
	policy := func(in string) string {
		return fmt.Sprintf("%stimeout: %v\n%sretry: {max_retries: %d, backoff: {use: exponential, base: 100ms, cap: 1s, jitter: full}}\n%sbudget: {use: none}\n", in, timeout, in, retries, in)
	}
	y := fmt.Sprintf(`name: edge %d
seed: %d
duration: %ds
tick: 1s
traffic: {rate: 100, arrivals: %s, clients: %d}
origin: {model: queue, capacity: %.2f, workers: 12}
triggers:
  - {kind: capacity, capacity: %.1f, at: 20s, for: %ds}
fleets:
  - name: fleet
%s`, i, 1000+i, 60+rng.IntN(60), []string{"poisson", "constant"}[rng.IntN(2)], 1+rng.IntN(20), capacity, capacity*0.3*rng.Float64(), 5+rng.IntN(15), policy("    "))
	if rng.IntN(2) == 0 {
		y += "tiers:\n  - name: tier\n    server: {model: concurrency, base: 1ms, replicas: 2}\n    client:\n" + policy("      ")
	}
	sc, err := scenario.Parse(fmt.Sprintf("edge%d.yaml", i), []byte(y))
	if err != nil {
		panic(fmt.Sprintf("%v\n%s", err, y))
	}
	return sc
}

// earlyPolicy is a client policy of random retries, backoff, budget,
// breaker, timeout and deadline, as YAML lines indented by in.
func earlyPolicy(rng *rand.Rand, in string) string {
	timeout := time.Duration(300+rng.IntN(2700)) * time.Millisecond
	y := fmt.Sprintf("%stimeout: %v\n", in, timeout)
	if r := []int{0, 1, 2, 3, 5, 10}[rng.IntN(6)]; r > 0 {
		y += fmt.Sprintf("%sretry: {max_retries: %d, backoff: {use: exponential, base: %dms, cap: %ds, jitter: %s}}\n",
			in, r, 10+rng.IntN(200), 1+rng.IntN(5), []string{"none", "full", "equal"}[rng.IntN(3)])
	}
	if rng.IntN(3) == 0 {
		y += fmt.Sprintf("%sbudget: {use: token_bucket, settings: {budget_ratio: %.2f}}\n", in, 0.1+0.4*rng.Float64())
	} else {
		y += in + "budget: {use: none}\n"
	}
	if rng.IntN(3) == 0 {
		y += in + "breaker: {use: consecutive, settings: {threshold: 5}}\n"
	}
	if rng.IntN(4) == 0 {
		y += fmt.Sprintf("%sdeadline: %v\n", in, timeout*time.Duration(2+rng.IntN(4)))
	}
	return y
}
