package lab

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/scenario"
)

// TestProbeScenarioReplays: whatever the probe measured, the scenario it
// writes runs in the lab at the tick it names, with the flags of the
// replay command it prints (issue 26: against nginx it wrote a 20 ms
// timeout for a 100 ms tick, which the lab refused, and at 2.5 s a 1 ms
// one, which no tick holds).
func TestProbeScenarioReplays(t *testing.T) {
	step := func(rate, served, p50 float64) ProbeStep {
		return ProbeStep{Rate: rate, Throughput: served, P50: p50, P90: 2 * p50, P99: 3 * p50, Mean: 1.2 * p50}
	}
	cases := []struct {
		name     string
		r        ProbeResult
		impose   bool
		tickFrom time.Duration // the least tick wanted
	}{
		// nginx as issue 26 saw it: 0.1 ms at rest, the ramp at its cap.
		{"nginx at the cap", ProbeResult{Rest: 100 * time.Microsecond, Capacity: 4998, CeilingBy: CeilingCap,
			Steps: []ProbeStep{step(1000, 1000, 1e-4), step(5000, 4998, 2e-4)}, Knee: 1}, true, DefaultTick},
		// HAProxy as TestProbeHAProxy: 12 workers of 20 ms.
		{"haproxy", ProbeResult{Rest: 20 * time.Millisecond, Capacity: 590, CeilingBy: CeilingService,
			Steps: []ProbeStep{step(25, 25, 0.02), step(506, 500, 0.025), step(760, 590, 0.3)}, Knee: 1}, false, 250 * time.Millisecond},
		// A fast service the machine could not keep up with.
		{"machine-bound", ProbeResult{Rest: time.Millisecond, Capacity: 3000, CeilingBy: CeilingMachine,
			Steps: []ProbeStep{step(500, 500, 0.001), step(3000, 3000, 0.002)}, Knee: 1}, true, DefaultTick},
		// A slow service: 2 s at rest, 3 requests/s.
		{"slow", ProbeResult{Rest: 2 * time.Second, Capacity: 3, CeilingBy: CeilingService,
			Steps: []ProbeStep{step(10, 3, 2), step(15, 3, 4)}, Knee: 0}, false, maxProbeTick},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := c.r
			r.URL = "http://127.0.0.1:8080/"
			r.Why = "measured"
			r.KneeP50 = r.Steps[r.Knee].P50
			r.plan(DefaultTick)
			if r.Impose != c.impose {
				t.Errorf("impose %v, want %v", r.Impose, c.impose)
			}
			if r.Tick < c.tickFrom {
				t.Errorf("tick %s, want at least %s", r.Tick, c.tickFrom)
			}
			y := r.Scenario()
			sc, err := scenario.Parse("probed.yaml", y)
			if err != nil {
				t.Fatalf("%v\n%s", err, y)
			}
			b, err := Bounds(sc)
			if err != nil {
				t.Fatal(err)
			}
			if r.Tick < b.Min || r.Tick > b.Max {
				t.Errorf("tick %s outside the lab's bounds [%s, %s] (%s; %s)\n%s", r.Tick, b.Min, b.Max, b.MinWhy, b.MaxWhy, y)
			}
			need, why, err := MinDuration(context.Background(), sc)
			if err != nil {
				t.Fatal(err)
			}
			if sc.Duration < need {
				t.Errorf("the scenario lasts %s, its claims need %s: %s", sc.Duration, need, why)
			}
			want := "# Replay it: retrystorm lab --target http://127.0.0.1:8080/ --tick " + Short(r.Tick)
			if c.impose {
				want += " --impose"
			}
			if !strings.Contains(string(y), want+" --config FILE\n") {
				t.Errorf("the scenario lacks %q:\n%s", want, y)
			}
			if wall := time.Duration(float64(sc.Fleets[0].Timeout) * r.Tick.Seconds()); wall < MinScaledTimeout || wall < time.Duration(10*r.KneeP50*1e9) {
				t.Errorf("timeout %s of wall time for a service at p50 %gs", wall, r.KneeP50)
			}
		})
	}
}
