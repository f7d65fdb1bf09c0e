package sim

import (
	"context"
	"fmt"
	"sync"

	"github.com/retrystorm/retrystorm/resil"
	"github.com/retrystorm/retrystorm/scenario"
)

// Run plays every fleet of the scenario and returns the result. Fleets run
// side by side, each on its own copy of the origin; the result depends on
// the scenario alone (and its seed), never on scheduling: the same scenario
// gives the same result, byte for byte once encoded.
//
// Run checks ctx now and then and returns its error if it is done. It
// refuses, before allocating anything, a scenario whose Estimate exceeds
// DefaultLimits, with a *CostError.
func Run(ctx context.Context, sc *scenario.Scenario) (*Result, error) {
	return RunWith(ctx, sc, Options{})
}

// Options are what RunWith takes beyond the scenario.
type Options struct {
	// Limits bounds the run's Estimate: a run that would exceed them is
	// refused before it starts, with a *CostError. The zero Limits are
	// DefaultLimits.
	Limits Limits
	// Progress, if set, is told how far the run has come, in ticks of
	// virtual time summed over the fleets (total is fleets × ticks). It
	// is called from the fleets' goroutines, often, one call at a time
	// and never with less done than before: it must be quick.
	Progress func(done, total int)
	// WrapBudget, if set, is given each client's budget as it is built
	// (nil for none) with the fleet's and the client's index, and returns
	// the budget the client uses. Tools and tests wrap budgets with it to
	// watch every decision; a wrapper must pass every call through, and
	// implement budget.InFlight when the budget does, or the run is
	// no longer the policy's.
	WrapBudget func(fleet, client int, b resil.Budget) resil.Budget
	// EarlyExit lets the run stop once what is left cannot change what
	// its caller reads (check's verdict): see EarlyExit. The zero value
	// plays every run to its end.
	EarlyExit EarlyExit

	// sharedReplicas gives every client instance of a hop one picker and
	// one detector, shared, as the simulator did before issue 36: the
	// benchmarks measure what a picker and a detector per instance cost.
	sharedReplicas bool
}

// RunWith is Run with options: other limits, progress, and budgets
// wrapped to be watched.
func RunWith(ctx context.Context, sc *scenario.Scenario, opts Options) (*Result, error) {
	if len(sc.Fleets) == 0 {
		return nil, fmt.Errorf("sim: scenario %q has no fleets", sc.Name)
	}
	if err := Estimate(sc).Check(sc.Name, opts.Limits); err != nil {
		return nil, err
	}
	if sc.System() {
		return runSystemResult(ctx, sc, &opts)
	}
	fleets := make([]*fleet, len(sc.Fleets))
	for i := range fleets {
		f, err := newFleet(sc, i, &opts)
		if err != nil {
			return nil, err
		}
		fleets[i] = f
	}
	res := &Result{
		Scenario:    sc.Name,
		Seed:        sc.Seed,
		TickSeconds: sc.Tick.Seconds(),
		Fleets:      make([]FleetResult, len(fleets)),
	}
	res.Trigger = TriggerSpan(sc)
	stop := func() bool { return ctx.Err() != nil }
	if opts.Progress != nil {
		// One lock around the sum and the call: with an atomic sum alone,
		// two fleets could report 3 then 2, and progress must not go back.
		var mu sync.Mutex
		done, total := 0, 0
		for _, f := range fleets {
			total += f.nTicks
		}
		for _, f := range fleets {
			f.progress = func(ticks int) {
				mu.Lock()
				defer mu.Unlock()
				done += ticks
				opts.Progress(done, total)
			}
		}
	}
	errs := make([]error, len(fleets))
	var wg sync.WaitGroup
	for i, f := range fleets {
		wg.Go(func() {
			res.Fleets[i], errs[i] = f.run(stop)
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	// Results add up by construction; a run whose numbers do not is a bug
	// to report, not a result to print.
	if err := res.Check(); err != nil {
		return nil, err
	}
	return res, nil
}
