package grid

import (
	"context"
	"runtime"
	"sync"
	"testing"

	"github.com/retrystorm/retrystorm/scenario"
	"github.com/retrystorm/retrystorm/sim"
)

// Run's progress reaches the number of cells and never goes back,
// however the workers finish: a sum taken apart from the call let one
// worker report 3 after another had reported 4.
func TestRunProgress(t *testing.T) {
	const cells = 64
	g := Grid{Cells: cells, Cell: func(int) (*scenario.Scenario, error) {
		return scenario.Parse("tiny.yaml", []byte("duration: 1s\ntraffic: {rate: 20}\norigin: {model: capacity, capacity: 100}\n"+
			"fleets:\n  - {name: f, timeout: 1s, budget: {use: none}}\n"))
	}}
	var mu sync.Mutex
	last, calls := 0, 0
	opts := Options{Workers: 8, Progress: func(done, total int) {
		runtime.Gosched() // widen the window in which another worker could report
		mu.Lock()
		defer mu.Unlock()
		if done < last {
			t.Errorf("progress went back from %d to %d", last, done)
		}
		if total != cells {
			t.Errorf("total = %d, want %d", total, cells)
		}
		last = done
		calls++
	}}
	if err := Run(context.Background(), g, opts, func(int, *sim.FleetResult) {}); err != nil {
		t.Fatal(err)
	}
	if last != cells || calls != cells {
		t.Errorf("progress ended at %d after %d calls, want %d and %d", last, calls, cells, cells)
	}
}

func TestParseShard(t *testing.T) {
	for in, want := range map[string]Shard{"1/1": {0, 1}, "3/8": {2, 8}} {
		if got, err := ParseShard(in); err != nil || got != want {
			t.Errorf("%q: %v, %v", in, got, err)
		}
	}
	for _, bad := range []string{"0/3", "4/3", "1/0", "x", "1/2/3", "-1/2", "1 /2", ""} {
		if _, err := ParseShard(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	// Every cell belongs to exactly one shard.
	for n := 1; n <= 5; n++ {
		for cell := range 30 {
			owners := 0
			for i := range n {
				if (Shard{Index: i, Count: n}).Owns(cell) {
					owners++
				}
			}
			if owners != 1 {
				t.Errorf("cell %d of %d shards has %d owners", cell, n, owners)
			}
		}
	}
}
