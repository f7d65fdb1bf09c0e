package experiment

import (
	"context"
	"testing"
)

// BenchmarkFleets is what the browser page recomputes after every slider
// step on the fleets panel: the whole experiment, four fleets and claims.
func BenchmarkFleets(b *testing.B) { benchExperiment(b, Fleets) }

// BenchmarkStorm is the storm experiment, its three runs and claims.
func BenchmarkStorm(b *testing.B) { benchExperiment(b, Storm) }

func benchExperiment(b *testing.B, e *Experiment) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.Run(context.Background(), Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSweep is the sweep experiment as the command runs it: a 40 × 40
// grid for four policies, 6,400 runs, on every core. Run it with -cpu 2
// for the figure the limit is about.
//
//	go test -run '^$' -bench Sweep -benchtime 1x -cpu 2 ./experiment
func BenchmarkSweep(b *testing.B) { benchExperiment(b, Sweep) }
