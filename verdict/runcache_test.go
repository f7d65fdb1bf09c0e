package verdict_test

import (
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/retrystorm/retrystorm/internal/race"
	"github.com/retrystorm/retrystorm/verdict"
)

// TestRunCacheChangesNothing checks that the runs check shares (RunCache)
// change nothing it prints or writes: configs checked with every run made
// and with identical runs made once give the same JSON and the same
// report, and some of them shared runs; and a chain checked after
// another that differs from it only in its retries, sharing their cache,
// gives what it gives alone, having made fewer runs than alone.
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
	hits := 0
	for _, c := range cases {
		var bare any
		var bareText string
		verdict.WithoutRunCache(func() { bare, _, bareText, _ = c.run(t, runDefault) })
		rc := new(verdict.RunCache)
		cached, cachedText := checkWith(t, c, rc)
		if a, b := jsonText(t, bare), jsonText(t, cached); a != b {
			t.Errorf("%s: the results differ:\nevery run made:\n%s\nruns shared:\n%s", c.name, a, b)
		}
		if bareText != cachedText {
			t.Errorf("%s: the reports differ:\nevery run made:\n%s\nruns shared:\n%s", c.name, bareText, cachedText)
		}
		made, shared := rc.Counts()
		t.Logf("%s: %d runs made, %d shared", c.name, made, shared)
		hits += shared
	}
	if hits == 0 {
		t.Error("no check shared a run: the comparison proves nothing")
	}

	// Two chains that differ in their first layer's retries: the second,
	// checked after the first through one cache, shares its runs with
	// retries off, makes fewer runs than alone, and gives what it gives
	// alone.
	first := generatedStack(rand.New(rand.NewPCG(40, 5)), base, 2)
	first.layers[0].Input.Fleet.Retry.MaxRetries = 2
	second := first
	second.layers = append([]verdict.StackLayer(nil), first.layers...)
	second.layers[0].Input.Fleet.Retry.MaxRetries = 3
	second.name += " (other retries)"
	own := new(verdict.RunCache)
	alone, _ := checkWith(t, second, own)
	madeAlone, _ := own.Counts()
	shared := new(verdict.RunCache)
	checkWith(t, first, shared)
	madeFirst, _ := shared.Counts()
	after, _ := checkWith(t, second, shared)
	madeBoth, _ := shared.Counts()
	if a, b := jsonText(t, alone), jsonText(t, after); a != b {
		t.Errorf("%s: the result differs after another chain's runs:\nalone:\n%s\nsharing:\n%s", second.name, a, b)
	}
	t.Logf("the second chain: %d runs made alone, %d after the first", madeAlone, madeBoth-madeFirst)
	if madeBoth-madeFirst >= madeAlone {
		t.Errorf("the second chain made %d runs after the first, %d alone: it shared none of the first's", madeBoth-madeFirst, madeAlone)
	}
}

// checkWith checks c as check does by default, with the cache runs, and
// returns the result and its report.
func checkWith(t *testing.T, c earlyCheck, runs *verdict.RunCache) (any, string) {
	t.Helper()
	c.runs = runs
	r, _, text, err := c.run(t, runDefault)
	if err != nil {
		t.Fatalf("%s: %v", c.name, err)
	}
	return r, text
}
