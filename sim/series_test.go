package sim

import (
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/scenario"
)

// seriesScenario writes csv beside a scenario whose traffic reads it, and
// loads the scenario.
func seriesScenario(t *testing.T, csv, traffic, triggers string) *scenario.Scenario {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "rates.csv"), []byte(csv), 0o644); err != nil {
		t.Fatal(err)
	}
	yaml := "duration: 60s\ntick: 1s\ntraffic: {series: {file: rates.csv}" + traffic + "}\n" +
		"origin: {model: capacity, capacity: 10000}\n" + triggers +
		"fleets:\n  - {name: a, timeout: 1s, budget: {use: none}}\n"
	path := filepath.Join(dir, "s.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return loadScenario(t, path)
}

// TestSeriesArrivals: a rate series sets each tick's intents: constant
// arrivals give every tick its rate (interpolated at the tick's start)
// within one intent and the run the sum of them within one; Poisson
// arrivals the same on average; a load trigger replaces the series while
// it lasts.
func TestSeriesArrivals(t *testing.T) {
	const csv = "t,rps\n0,50\n30,110.5\n59,20\n"
	rate := func(sc *scenario.Scenario, k int) float64 {
		return sc.Traffic.RateAt(time.Duration(k)*time.Second, time.Second)
	}
	t.Run("constant", func(t *testing.T) {
		sc := seriesScenario(t, csv, "", "")
		got := run(t, sc).Fleets[0].Series.Intents
		var sum, want float64
		for k, n := range got {
			r := rate(sc, k)
			if math.Abs(float64(n)-r) > 1 {
				t.Errorf("tick %d: %d intents at the rate %g", k, n, r)
			}
			sum += float64(n)
			want += r
			if math.Abs(sum-want) > 1+1e-6 {
				t.Fatalf("by tick %d: %g intents, the series gives %g", k, sum, want)
			}
		}
		if r := rate(sc, 15); r != 80.25 {
			t.Errorf("tick 15's rate %g, want 80.25 (a quarter of the way from 50 to 110.5)", r)
		}
	})
	t.Run("poisson", func(t *testing.T) {
		sc := seriesScenario(t, csv, ", arrivals: poisson", "")
		var sum, want float64
		for k, n := range run(t, sc).Fleets[0].Series.Intents {
			sum += float64(n)
			want += rate(sc, k)
		}
		if math.Abs(sum-want) > 5*math.Sqrt(want) {
			t.Errorf("%g intents, the series gives %g on average", sum, want)
		}
	})
	t.Run("load trigger", func(t *testing.T) {
		sc := seriesScenario(t, csv, "", "triggers: [{kind: load, at: 10s, for: 5s, rate: 7}]\n")
		got := run(t, sc).Fleets[0].Series.Intents
		for k := 10; k < 15; k++ {
			if got[k] < 7 || got[k] > 8 {
				t.Errorf("tick %d: %d intents, want the trigger's 7 (8 when the gaps' rounding fits one more)", k, got[k])
			}
		}
		if math.Abs(float64(got[20])-rate(sc, 20)) > 1 {
			t.Errorf("tick 20: %d intents, want the series' %g after the trigger", got[20], rate(sc, 20))
		}
	})
}

// TestEstimateCountsTheSeries: the estimate follows the series' rates
// (its work), not its peak over the whole run.
func TestEstimateCountsTheSeries(t *testing.T) {
	sc := seriesScenario(t, "0,10\n50,10\n51,1000\n59,1000\n", "", "")
	c := Estimate(sc)
	// Ticks 0 to 50 at 10 per second, 51 to 59 at 1000.
	if want := 51*10 + 9*1000.0; c.Attempts < want || c.Attempts > 1.1*want {
		t.Errorf("estimated %g attempts, want about %g", c.Attempts, want)
	}
}
