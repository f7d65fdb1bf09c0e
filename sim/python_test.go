package sim

import (
	"context"
	"encoding/json"
	"math"
	"os/exec"
	"strconv"
	"testing"

	"github.com/retrystorm/retrystorm/internal/servertest"
)

// TestPythonYardstickAgrees checks that bench/python/storm.py, the plain
// heapq simulation BENCHMARKS.md times the simulator against (issue 29),
// simulates the same thing: the storm's naive fleet, whose totals it
// must match within a few percent (its random streams are Python's, so
// not exactly; the mean of three seeds). It runs where python3 is on the
// PATH and not under -short; CI (CI=true) fails without python3, which
// .ci/run installs.
func TestPythonYardstickAgrees(t *testing.T) {
	if testing.Short() {
		t.Skip("runs python3: not under -short")
	}
	py, err := exec.LookPath("python3")
	if err != nil {
		servertest.Missing(t, "no python3 on the PATH (.ci/run installs it): %v", err)
	}
	sc := loadScenario(t, "testdata/storm.yaml")
	sc.Fleets = sc.Fleets[:1] // naive
	r, err := Run(context.Background(), sc)
	if err != nil {
		t.Fatal(err)
	}
	s := r.Fleets[0].Summary
	want := map[string]int64{
		"intents":      s.Intents,
		"attempts":     s.Attempts,
		"timeouts":     s.Timeouts,
		"successes":    s.Successes,
		"goodput":      s.Goodput,
		"intents_lost": s.IntentsLost,
		"wasted_work":  s.WastedWork,
	}
	const seeds = 3
	got := map[string]float64{}
	for seed := 1; seed <= seeds; seed++ {
		out, err := exec.Command(py, "../bench/python/storm.py", "--duration", strconv.FormatFloat(sc.Duration.Seconds(), 'f', -1, 64), "--seed", strconv.Itoa(seed)).Output()
		if err != nil {
			t.Fatalf("storm.py: %v", err)
		}
		var one map[string]int64
		if err := json.Unmarshal(out, &one); err != nil {
			t.Fatalf("storm.py's output %q: %v", out, err)
		}
		for k := range want {
			got[k] += float64(one[k]) / seeds
		}
	}
	for k, w := range want {
		if w == 0 {
			t.Fatalf("%s: the simulator counts none", k)
		}
		if d := math.Abs(got[k]-float64(w)) / float64(w); d > 0.05 {
			t.Errorf("%s: storm.py %.0f, the simulator %d: %.1f%% apart (at most 5%%)", k, got[k], w, 100*d)
		}
	}
}
