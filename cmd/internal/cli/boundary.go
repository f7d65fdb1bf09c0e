package cli

import (
	"context"
	"errors"

	"github.com/retrystorm/retrystorm/experiment"
	"github.com/retrystorm/retrystorm/model"
	"github.com/retrystorm/retrystorm/scenario"
)

const boundaryAbout = `Maps, with the fluid model of docs/model.md instead of the simulator, where each policy recovers after a capacity dip and where it stays stuck: base load × the dip's depth, the edge of every column, the largest and the longest dip each policy survives at the scenario's own load, and its healthy and stuck states there. Without FILE it maps the sweep's scenario and policies, as sweep does with the simulator; with FILE, the file's fleets against its origin (it needs one capacity trigger). A policy the model does not describe (an adaptive limit, hedging, replicas, LIFO, budgets other than the token bucket and gRPC's throttle, tiers that queue or do more than retry) is listed as unsupported, with the reason, and not answered. A cell takes a tenth of a millisecond; sweep runs the simulator instead.`

// runBoundary prints the model's map of the sweep's scenario, or of FILE.
func runBoundary(ctx context.Context, inv *Invocation) error {
	if len(inv.Args) > 1 {
		return Usagef("boundary takes at most one scenario file: retrystorm boundary [FILE]")
	}
	opts := experiment.Options{Seed: inv.Seed, Grid: inv.Grid}
	if len(inv.Args) == 1 {
		sc, err := scenario.Load(inv.Args[0])
		if err != nil {
			return err
		}
		opts.Scenario = sc
	}
	out, err := experiment.Boundary(ctx, opts)
	switch {
	case errors.Is(err, experiment.ErrBoundaryInput), errors.Is(err, model.ErrUnsupported), errors.Is(err, model.ErrTooLarge):
		return Usagef("%v", err)
	case err != nil:
		return err
	}
	return inv.Emit([]*experiment.Outcome{out}, out.JSON, "retrystorm boundary")
}
