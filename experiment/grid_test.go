package experiment

import (
	"context"
	"runtime"
	"sync"
	"testing"

	"github.com/retrystorm/retrystorm/scenario"
	"github.com/retrystorm/retrystorm/sim"
)

// RunGrid's progress reaches the number of cells and never goes back,
// however the workers finish: a sum taken apart from the call let one
// worker report 3 after another had reported 4.
func TestRunGridProgress(t *testing.T) {
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
	if err := RunGrid(context.Background(), g, opts, func(int, sim.Summary) {}); err != nil {
		t.Fatal(err)
	}
	if last != cells || calls != cells {
		t.Errorf("progress ended at %d after %d calls, want %d and %d", last, calls, cells, cells)
	}
}
