package grid

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/retrystorm/retrystorm/scenario"
	"github.com/retrystorm/retrystorm/sim"
)

// Groups put a grid's cells whose scenarios differ only in their
// triggers, none of them before WarmAt, in one group: First gives cell
// i's group's first cell.
type Groups struct {
	First  func(i int) int
	WarmAt time.Duration
}

// RunGroups is Run for a grid whose cells come in groups: a group's cells
// run one after another on one worker, each played on from one warm-up to
// gs.WarmAt (sim.WarmUp), with the results of whole runs; a group whose
// run cannot be warmed up so runs its cells whole. (Apart from Run, so
// that a program that never groups, the page's module, carries none of
// it.)
func RunGroups(ctx context.Context, g Grid, gs Groups, opts Options, keep func(i int, f *sim.FleetResult)) error {
	_, err := runGroupsCounted(ctx, g, gs, opts, keep)
	return err
}

// runGroupsCounted is RunGroups, and counts the cells played on from a
// shared warm-up (for tests).
func runGroupsCounted(ctx context.Context, g Grid, gs Groups, opts Options, keep func(i int, f *sim.FleetResult)) (forked int64, err error) {
	var groups [][]int
	at := map[int]int{}
	total := 0
	for _, i := range g.cells() {
		first := gs.First(i)
		k, ok := at[first]
		if !ok {
			k = len(groups)
			at[first] = k
			groups = append(groups, nil)
		}
		groups[k] = append(groups[k], i)
		total++
	}
	progress := opts.progress(total)
	var count atomic.Int64
	err = each(ctx, opts.Workers, groups, func(ctx context.Context, cells []int) error {
		n, err := runGroup(ctx, &g, gs.WarmAt, opts, cells, func(i int, f *sim.FleetResult) {
			keep(i, f)
			progress()
		})
		count.Add(n)
		return err
	})
	return count.Load(), err
}

// runGroup runs one group's cells: forks of one warm-up when it has
// several and their run can be warmed up, else each whole; a cell whose
// own run cannot be played on from the warm-up runs whole.
func runGroup(ctx context.Context, g *Grid, warmAt time.Duration, opts Options, cells []int, keep func(i int, f *sim.FleetResult)) (forked int64, err error) {
	scs := make([]*scenario.Scenario, len(cells))
	for k, i := range cells {
		sc, err := g.Cell(i)
		if err != nil {
			return 0, err
		}
		scs[k] = sc
	}
	var w *sim.Warm
	if len(cells) > 1 {
		var err error
		w, err = sim.WarmUp(ctx, scs[0], warmAt, sim.Options{Limits: opts.Limits})
		switch {
		case errors.Is(err, sim.ErrNotForkable):
			w = nil
		case err != nil:
			return 0, err
		default:
			defer w.Release()
		}
	}
	for k, i := range cells {
		if ctx.Err() != nil {
			return forked, ctx.Err()
		}
		var (
			res *sim.Result
			err error
		)
		if w != nil {
			so := sim.Options{Limits: opts.Limits}
			if g.Early != nil {
				so.EarlyExit = g.Early(i)
			}
			res, err = w.Run(ctx, scs[k], so)
			if errors.Is(err, sim.ErrNotForkable) {
				// This cell's run cannot be played on from the group's
				// warm-up (a fault before its moment): whole, then.
				res, err = opts.simulate(ctx, g, i, scs[k])
			} else {
				forked++
			}
		} else {
			res, err = opts.simulate(ctx, g, i, scs[k])
		}
		if err != nil {
			return forked, err
		}
		scs[k] = nil // the run's own, and no longer kept
		keep(i, &res.Fleets[0])
	}
	return forked, nil
}
