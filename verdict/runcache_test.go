package verdict_test

import (
	"context"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/retrystorm/retrystorm/experiment"
	"github.com/retrystorm/retrystorm/internal/race"
	"github.com/retrystorm/retrystorm/verdict"
)

// TestRunCacheChangesNothing checks that the runs check shares (RunCache)
// change nothing it prints or writes: configs checked with every run made
// and with identical runs made once give the same JSON and the same
// report; and a chain checked after another that differs from it only in
// its retries, sharing their cache, gives what it gives alone, having
// made fewer runs. It fails if no run was shared, so that it cannot pass
// by sharing nothing.
func TestRunCacheChangesNothing(t *testing.T) {
	if testing.Short() || race.Enabled {
		t.Skip("whole checks, twice each: numbers, not concurrency")
	}
	base := earlyBase(t)
	rng := rand.New(rand.NewPCG(40, 4))
	cases := []earlyCheck{
		istio10(t, filepath.Join("testdata", "early", "small-base.yaml"), 1),
		generatedStack(rng, base, 0),
		generatedStack(rng, base, 1),
		// Retries off collapse too: stopped runs are run again.
		{name: "storm at the edge", in: []verdict.CheckInput{{Fleet: base.Fleets[0], Origin: "storm"}}, base: base, seeds: 1, load: 0.975, dip: 0.9},
	}
	for _, c := range cases {
		var bare any
		var bareText string
		verdict.WithoutRunCache(func() { bare, _, bareText, _ = c.run(t, runDefault) })
		cached, _, cachedText, err := c.run(t, runDefault)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if a, b := jsonText(t, bare), jsonText(t, cached); a != b {
			t.Errorf("%s: the results differ:\nevery run made:\n%s\nruns shared:\n%s", c.name, a, b)
		}
		if bareText != cachedText {
			t.Errorf("%s: the reports differ:\nevery run made:\n%s\nruns shared:\n%s", c.name, bareText, cachedText)
		}
	}

	// Two chains that differ in their first layer's retries: the second,
	// checked after the first through one cache, shares its runs with
	// retries off.
	first := generatedStack(rand.New(rand.NewPCG(40, 5)), base, 2)
	first.layers[0].Input.Fleet.Retry.MaxRetries = 2
	second := first
	second.layers = append([]verdict.StackLayer(nil), first.layers...)
	second.layers[0].Input.Fleet.Retry.MaxRetries = 3
	second.name += " (other retries)"
	var alone any
	verdict.WithoutRunCache(func() { alone, _, _, _ = second.run(t, runDefault) })
	shared := new(verdict.RunCache)
	for _, c := range []earlyCheck{first, second} {
		co := verdict.CheckOptions{Base: c.base, Seeds: c.seeds, Runs: shared}
		s, err := verdict.CheckStack(context.Background(), c.layers, co, experiment.Options{})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if c.name == second.name {
			if a, b := jsonText(t, alone), jsonText(t, s); a != b {
				t.Errorf("%s: the result differs after another chain's runs:\nalone:\n%s\nsharing:\n%s", c.name, a, b)
			}
		}
	}
	made, hits := shared.Counts()
	t.Logf("two chains: %d runs made, %d shared", made, hits)
	if hits == 0 {
		t.Errorf("two chains that differ only in their retries shared no run (%d made): the test proves nothing", made)
	}
}
