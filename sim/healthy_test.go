package sim

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/retrystorm/retrystorm/scenario"
)

// TestSummarizeNeverHealthy: recovery is judged against the failure share
// before the trigger, so a fleet already failing most of its tries there
// would "recover" by failing as much after it. Past UnhealthyBaseline it
// is never healthy and never recovered; at or under it, the rule is the
// one DESIGN.md states. Ten ticks before the trigger, ten of it, twenty
// after; every tick 100 tries.
func TestSummarizeNeverHealthy(t *testing.T) {
	for _, c := range []struct {
		name                   string
		before, during, after  int64 // failed tries a tick
		wantRecovered, wantBad bool
	}{
		{"healthy, recovers", 0, 80, 0, true, false},
		{"healthy, stays down", 0, 80, 80, false, false},
		{"failing 40% at rest, back to it", 40, 90, 40, true, false},
		{"failing half at rest, back to it", 50, 90, 50, true, false},
		{"failing 60% at rest, back to it", 60, 90, 60, false, true},
		{"failing all at rest", 100, 100, 100, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			const n, start, end = 40, 10, 20
			s := NewSeries(n)
			for k := range n {
				s.Offered[k] = 100
				switch {
				case k < start:
					s.FailedAttempts[k] = c.before
				case k < end:
					s.FailedAttempts[k] = c.during
				default:
					s.FailedAttempts[k] = c.after
				}
			}
			var sum Summary
			Summarize(&s, &sum, start, end)
			if sum.Recovered != c.wantRecovered || sum.NeverHealthy != c.wantBad {
				t.Fatalf("recovered %v, never healthy %v (baseline %.2f); want %v, %v", sum.Recovered, sum.NeverHealthy, sum.BaselineErrorRate, c.wantRecovered, c.wantBad)
			}
			if sum.Recovered != (sum.RecoveryTicks != nil) {
				t.Fatalf("recovered %v with recovery ticks %v", sum.Recovered, sum.RecoveryTicks)
			}
		})
	}
}

// TestRecoveryAllowsChance: a tick's failure share counts as recovered
// within a point of the baseline, or within four binomial standard
// deviations of it when chance alone spreads wider: a base failing 26% of
// its 150 tries a tick at rest (a calibrated window's) moves by 3.6
// points a tick, and with one point it never counted as recovered, with
// retries or without. At a baseline of 0 the rule is DESIGN.md's point.
func TestRecoveryAllowsChance(t *testing.T) {
	for _, c := range []struct {
		name     string
		baseline float64
		n        int64
		want     float64
	}{
		{"no failures at rest", 0, 150, 0.01},
		{"no tries", 0.26, 0, 0.01},
		{"1% of 100", 0.01, 100, 4 * 0.00995},
		{"26% of 150", 0.26, 150, 4 * 0.035815},
		{"26% of 100,000", 0.26, 100_000, 0.01},
	} {
		if got := tolerance(c.baseline, c.n); got < c.want-1e-5 || got > c.want+1e-5 {
			t.Errorf("%s: tolerance %.5f, want %.5f", c.name, got, c.want)
		}
	}
	// 26% at rest, ticks of 150 tries drawn around it (±2.5 standard
	// deviations), a dip of 80% failing: recovered as soon as it ends.
	const n, start, end = 60, 20, 30
	s := NewSeries(n)
	wobble := []int64{39, 30, 46, 35, 42, 27, 44, 38, 31, 48}
	for k := range n {
		s.Offered[k], s.FailedAttempts[k] = 150, wobble[k%len(wobble)]
		if k >= start && k < end {
			s.FailedAttempts[k] = 120
		}
	}
	var sum Summary
	Summarize(&s, &sum, start, end)
	if !sum.Recovered || *sum.RecoveryTicks != 0 {
		t.Errorf("recovered %v after %v ticks (baseline %.3f), want at once", sum.Recovered, sum.RecoveryTicks, sum.BaselineErrorRate)
	}
	// Failing 45% after it, past four deviations of 26%: not recovered.
	for k := end; k < n; k++ {
		s.FailedAttempts[k] = 68
	}
	sum = Summary{}
	Summarize(&s, &sum, start, end)
	if sum.Recovered {
		t.Errorf("recovered at 45%% failing against a baseline of %.3f", sum.BaselineErrorRate)
	}
}

// TestOriginSlowerThanTimeoutIsNeverHealthy: an origin whose service time
// (100 ms: 10 workers at 100/s) is longer than the fleet's timeout (50
// ms) fails every attempt at 30% load, before the dip as after it. The
// run said "recovered" before (failing as much after the dip as before);
// now it says never healthy, in the JSON too.
func TestOriginSlowerThanTimeoutIsNeverHealthy(t *testing.T) {
	sc, err := scenario.Parse("slow.yaml", []byte(`
duration: 60s
traffic: {rate: 30}
origin: {model: queue, capacity: 100, workers: 10}
triggers: [{kind: capacity, at: 10s, for: 5s, capacity: 50}]
fleets:
  - {name: slow, timeout: 50ms, retry: {max_retries: 2}, budget: {use: none}}
`))
	if err != nil {
		t.Fatal(err)
	}
	r, err := Run(context.Background(), sc)
	if err != nil {
		t.Fatal(err)
	}
	s := r.Fleets[0].Summary
	if !s.NeverHealthy || s.Recovered || s.BaselineErrorRate < 0.9 {
		t.Fatalf("never healthy %v, recovered %v, baseline %.2f: want never healthy, not recovered, the baseline about 1", s.NeverHealthy, s.Recovered, s.BaselineErrorRate)
	}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"never_healthy":true`) || !strings.Contains(string(b), `"recovered":false`) {
		t.Fatalf("the summary's JSON %s: want never_healthy true and recovered false", b)
	}

	// The same fleet with a timeout the origin meets is healthy, and
	// its JSON does not mention it.
	sc.Fleets[0].Timeout *= 10
	r, err = Run(context.Background(), sc)
	if err != nil {
		t.Fatal(err)
	}
	s = r.Fleets[0].Summary
	if s.NeverHealthy || !s.Recovered {
		t.Fatalf("with a 500ms timeout: never healthy %v, recovered %v; want healthy and recovered", s.NeverHealthy, s.Recovered)
	}
	b, _ = json.Marshal(s)
	if strings.Contains(string(b), "never_healthy") {
		t.Fatalf("a healthy fleet's JSON mentions never_healthy: %s", b)
	}
}
