package sim

import (
	"context"
	"fmt"
	"sync"

	"github.com/retrystorm/retrystorm/scenario"
)

// Run plays every fleet of the scenario and returns the result. Fleets run
// side by side, each on its own copy of the origin; the result depends on
// the scenario alone (and its seed), never on scheduling: the same scenario
// gives the same result, byte for byte once encoded.
//
// Run checks ctx now and then and returns its error if it is done.
func Run(ctx context.Context, sc *scenario.Scenario) (*Result, error) {
	if len(sc.Fleets) == 0 {
		return nil, fmt.Errorf("sim: scenario %q has no fleets", sc.Name)
	}
	fleets := make([]*fleet, len(sc.Fleets))
	for i := range fleets {
		f, err := newFleet(sc, i)
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
	return res, nil
}
