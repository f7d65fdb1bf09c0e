package experiment

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/retrystorm/retrystorm/internal/golden"
)

// otherSeeds are the twenty seeds besides the default that every claim
// must hold for.
func otherSeeds() []uint64 {
	var s []uint64
	for i := uint64(2); i <= 21; i++ {
		s = append(s, i*7919)
	}
	return s
}

// testGrid keeps the sweep's map small in tests: the claims are the
// same, on 100 cells instead of 1,600.
const testGrid = 10

func runExperiment(t *testing.T, e *Experiment, opts Options) *Outcome {
	t.Helper()
	opts.Grid = testGrid
	out, err := e.Run(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func checkClaims(t *testing.T, out *Outcome, what string) {
	t.Helper()
	if len(out.Claims) == 0 {
		t.Fatalf("%s: no claims", what)
	}
	for _, c := range out.Claims {
		if !c.Holds {
			t.Errorf("%s: claim fails: %s (%s)", what, c.Text, c.Detail)
		}
	}
}

// TestClaimsHold runs every experiment for its default seed and twenty
// others: each claim must hold for every one.
func TestClaimsHold(t *testing.T) {
	for _, e := range All() {
		t.Run(e.Name, func(t *testing.T) {
			t.Parallel()
			checkClaims(t, runExperiment(t, e, Options{}), "default seed")
			if testing.Short() {
				return
			}
			for _, seed := range otherSeeds() {
				checkClaims(t, runExperiment(t, e, Options{Seed: &seed}), "seed "+itoa(seed))
			}
		})
	}
}

func itoa(n uint64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// TestGolden pins each experiment's JSON for the default seed. Run with
// -update after a deliberate change, and read the diff.
func TestGolden(t *testing.T) {
	if testing.Short() {
		// Every experiment at full size: minutes under the race detector,
		// which CI runs with -short. The full pass compares them.
		t.Skip("the golden files are compared without -short")
	}
	for _, e := range All() {
		t.Run(e.Name, func(t *testing.T) {
			out := runExperiment(t, e, Options{})
			got, err := json.MarshalIndent(out.JSON, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			golden.Check(t, filepath.Join("testdata", e.Name+".golden.json"), got, "go test ./experiment -run TestGolden -update")
		})
	}
}

func TestEmbeddedScenariosParse(t *testing.T) {
	for _, e := range All() {
		if e.Config == nil {
			continue
		}
		if _, err := scenarioFor(e.Name, Options{}); err != nil {
			t.Errorf("%s: %v", e.Name, err)
		}
	}
}

// TestRegistry: every experiment declares a name and an order of its own,
// for the command table, `all`, FINDINGS.md and the page, which loop over
// All.
func TestRegistry(t *testing.T) {
	names, orders := map[string]bool{}, map[int]string{}
	for _, e := range All() {
		if e.Name == "" || e.Title == "" || e.Summary == "" || e.Run == nil {
			t.Errorf("%q: a name, a title, a summary and a run function are required", e.Name)
		}
		if names[e.Name] {
			t.Errorf("two experiments are called %q", e.Name)
		}
		if other, ok := orders[e.Order]; ok {
			t.Errorf("%s and %s have the same Order %d", other, e.Name, e.Order)
		}
		names[e.Name], orders[e.Order] = true, e.Name
	}
}
