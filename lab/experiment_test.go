package lab

import (
	"strings"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/experiment"
	"github.com/retrystorm/retrystorm/scenario"
)

// TestBounds: the range of ticks follows from the scenario: the storm's
// naive fleet may send 400 attempts per scenario second, so at 5,000 per
// wall second the tick is at least 80 ms; its 1 s timeout alone would
// allow 50 ms; three fleets (with the counterfactual) of 120 ticks in an
// hour allow 10 s. A run too long for any tick has Min > Max.
func TestBounds(t *testing.T) {
	storm, _ := experiment.Lookup("storm")
	sc, err := scenario.Parse("storm.yaml", storm.Config)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Bounds(sc)
	if err != nil {
		t.Fatal(err)
	}
	if b.Min != 80*time.Millisecond || b.Max != 10*time.Second || !strings.Contains(b.MinWhy, "400 attempts per scenario second") || !strings.Contains(b.MaxWhy, "3 fleets of 120 ticks") {
		t.Errorf("storm: %+v", b)
	}
	if DefaultTick < b.Min || DefaultTick > b.Max {
		t.Errorf("the default tick %s is outside the storm's range %s to %s", DefaultTick, b.Min, b.Max)
	}

	slow := *sc
	slow.Traffic.Rate = 1
	slow.Fleets = sc.Fleets[:1]
	if b, _ := Bounds(&slow); b.Min != MinScaledTimeout || !strings.Contains(b.MinWhy, "1s timeout") {
		t.Errorf("a slow storm: the timeout should bound the tick at %s: %+v", MinScaledTimeout, b)
	}

	long := *sc
	long.Duration = 100000 * time.Second
	if b, _ := Bounds(&long); b.Min <= b.Max {
		t.Errorf("100,000 ticks of three fleets fit an hour at %s to %s", b.Min, b.Max)
	}
}

// TestSimulateFleetsOnly: the storm's origin queues, so Measure plays the
// counterfactual of deadline shedding after its fleets, unless FleetsOnly
// leaves it out; the simulator's reference then has the fleets alone.
func TestSimulateFleetsOnly(t *testing.T) {
	storm, _ := experiment.Lookup("storm")
	sc, err := scenario.Parse("storm.yaml", storm.Config)
	if err != nil {
		t.Fatal(err)
	}
	sc.Fleets = sc.Fleets[:1]
	for _, c := range []struct {
		opts   ExperimentOptions
		fleets int
		cf     bool
	}{
		{ExperimentOptions{}, 2, true},
		{ExperimentOptions{FleetsOnly: true}, 1, false},
	} {
		res, cf, name, err := simulate(t.Context(), sc, c.opts)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Fleets) != c.fleets || (cf != nil) != c.cf || (name != "") != c.cf {
			t.Errorf("FleetsOnly %v: %d fleets simulated, counterfactual %v %q; want %d and %v", c.opts.FleetsOnly, len(res.Fleets), cf != nil, name, c.fleets, c.cf)
		}
	}
}
