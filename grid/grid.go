// Package grid runs sets of independent simulator runs, the cells of a
// map (a sweep, a check's envelope, an advise search), on every core, and
// splits them into shards that other machines run: the same cells go to
// the same shard everywhere, so a merged result is the one a single run
// gives. It also holds the checks a shard's JSON passes before it is
// merged, since a shard comes from anywhere.
package grid

import (
	"context"
	"fmt"
	"runtime"
	"sync"

	"github.com/retrystorm/retrystorm/scenario"
	"github.com/retrystorm/retrystorm/sim"
)

// Grid is a set of independent runs, each one fleet on a scenario of its
// own: the cells of a vulnerability map (sweep, check, advise). Each
// cell's result depends on its scenario alone, so the grid's does not
// depend on scheduling, on the number of workers, or on how it is split
// into shards.
type Grid struct {
	// Cells is the number of cells, numbered from 0.
	Cells int
	// Cell builds cell i's scenario, with the one fleet it runs. It is
	// called from several goroutines at once and must not share what it
	// returns.
	Cell func(i int) (*scenario.Scenario, error)
	// Shard, when its Count is above 1, runs only the cells the shard
	// owns.
	Shard Shard
	// Early, when set, is how far cell i's run may end early (see
	// sim.EarlyExit): for a caller that reads only what the rules keep.
	// Nil: every run plays to its end.
	Early func(i int) sim.EarlyExit
}

// Shard is one part of a grid split for several machines: shard Index
// (from 0) of Count owns the cells whose number is Index modulo Count, so
// the same cells go to the same shard on any machine. The zero Shard is
// the whole grid.
type Shard struct {
	Index, Count int
}

// Owns reports whether the shard runs cell i.
func (s Shard) Owns(i int) bool { return s.Count <= 1 || i%s.Count == s.Index }

// String returns "i/n" as --shard takes it, with i from 1.
func (s Shard) String() string {
	if s.Count <= 1 {
		return "1/1"
	}
	return fmt.Sprintf("%d/%d", s.Index+1, s.Count)
}

// ParseShard reads --shard's "i/n" (i from 1 to n).
func ParseShard(v string) (Shard, error) {
	var i, n int
	if _, err := fmt.Sscanf(v, "%d/%d", &i, &n); err != nil || fmt.Sprintf("%d/%d", i, n) != v {
		return Shard{}, fmt.Errorf("--shard %q: want i/n, such as 2/8", v)
	}
	if n < 1 || n > 10000 || i < 1 || i > n {
		return Shard{}, fmt.Errorf("--shard %q: i must be in [1, n] and n in [1, 10000]", v)
	}
	return Shard{Index: i - 1, Count: n}, nil
}

// cells returns the cells the shard owns.
func (g Grid) cells() []int {
	var out []int
	for i := range g.Cells {
		if g.Shard.Owns(i) {
			out = append(out, i)
		}
	}
	return out
}

// Options say how a grid runs.
type Options struct {
	// Workers bounds the parallel runs; zero means GOMAXPROCS.
	Workers int
	// Progress, when set, is told how far the grid has come, one call at
	// a time and never with less done than before.
	Progress func(done, total int)
	// Limits bounds each simulator run (see sim.Estimate); zero fields
	// mean sim.DefaultLimits'.
	Limits sim.Limits
}

// Simulate plays sc in the simulator within the options' limits.
func (o Options) Simulate(ctx context.Context, sc *scenario.Scenario) (*sim.Result, error) {
	return sim.RunWith(ctx, sc, sim.Options{Limits: o.Limits})
}

// simulate is Simulate for cell i of g, with the early exit g gives it.
func (o Options) simulate(ctx context.Context, g *Grid, i int, sc *scenario.Scenario) (*sim.Result, error) {
	so := sim.Options{Limits: o.Limits}
	if g.Early != nil {
		so.EarlyExit = g.Early(i)
	}
	return sim.RunWith(ctx, sc, so)
}

// Run runs the grid's cells (the shard's) on opts.Workers goroutines
// (all cores by default) and hands each cell's fleet result to keep, from
// the goroutine that ran it: keep must write only what belongs to cell i,
// and keep no more of the result than it needs (its series are the run's).
// It reports progress through opts.Progress, and stops at the first error.
func Run(ctx context.Context, g Grid, opts Options, keep func(i int, f *sim.FleetResult)) error {
	todo := g.cells()
	progress := opts.progress(len(todo))
	return each(ctx, opts.Workers, todo, func(ctx context.Context, i int) error {
		sc, err := g.Cell(i)
		if err != nil {
			return err
		}
		res, err := opts.simulate(ctx, &g, i, sc)
		if err != nil {
			return err
		}
		keep(i, &res.Fleets[0])
		progress()
		return nil
	})
}

// progress returns what to call as each of total cells is done: it
// reports to o.Progress, under a lock, so that progress never goes back.
func (o Options) progress(total int) func() {
	if o.Progress == nil {
		return func() {}
	}
	var (
		mu   sync.Mutex
		done int
	)
	return func() {
		mu.Lock()
		defer mu.Unlock()
		done++
		o.Progress(done, total)
	}
}

// each calls work for every item on workers goroutines (all cores for 0),
// and stops at the first error, which it returns (or ctx's).
func each[T any](ctx context.Context, workers int, items []T, work func(ctx context.Context, item T) error) error {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu       sync.Mutex
		firstErr error
	)
	jobs := make(chan T)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for item := range jobs {
				if err := work(ctx, item); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					cancel()
				}
			}
		})
	}
	for _, item := range items {
		select {
		case jobs <- item:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
	}
	close(jobs)
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	return ctx.Err()
}
