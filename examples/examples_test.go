package examples

import (
	"context"
	"io/fs"
	"testing"

	"github.com/retrystorm/retrystorm/scenario"
	"github.com/retrystorm/retrystorm/sim"
)

// TestExamples: every file is in the menu; each parses, and runs with its
// seed to the outcome examples/README.md reports for it.
func TestExamples(t *testing.T) {
	names, _ := fs.Glob(files, "*.yaml")
	if len(names) != len(order) {
		t.Fatalf("%d files, %d in the menu", len(names), len(order))
	}
	// What README.md says each shows: stays collapsed (the share of the
	// intents answered in time over the last ten seconds under a tenth),
	// or healthy at the end (over nine tenths).
	collapsed := map[string]bool{
		"metastable-retry": true, "gc-death-spiral": true, "cache-flush": true,
		"connection-pool-exhaustion": false, "cache-stampede": false, "lb-sinkholing": false,
	}
	for _, e := range All() {
		t.Run(e.Name, func(t *testing.T) {
			if e.Title == "" {
				t.Error("no title")
			}
			sc, err := scenario.Parse(e.Name+".yaml", e.YAML)
			if err != nil {
				t.Fatal(err)
			}
			want, pinned := collapsed[e.Name]
			if !pinned || testing.Short() {
				return
			}
			r, err := sim.Run(context.Background(), sc)
			if err != nil {
				t.Fatal(err)
			}
			var good, intents int64
			for _, f := range r.Fleets {
				n := len(f.Series.Tick)
				for k := n - 10; k < n; k++ {
					good, intents = good+f.Series.Goodput[k], intents+f.Series.Intents[k]
				}
			}
			share := float64(good) / float64(max(intents, 1))
			if want && share > 0.1 || !want && share < 0.9 {
				t.Errorf("%.0f%% of the intents answered in the last ten seconds; README.md says it %s", 100*share,
					map[bool]string{true: "stays collapsed", false: "is healthy at the end"}[want])
			}
		})
	}
}
