package full

import (
	"context"
	"errors"

	"github.com/retrystorm/retrystorm/cmd/internal/cli"
	"github.com/retrystorm/retrystorm/experiment"
	"github.com/retrystorm/retrystorm/importer"
	"github.com/retrystorm/retrystorm/replay"
)

// runReplay is retrystorm replay: an incident window, live or saved,
// reconstructed and replayed as it was and with the changes that could
// have prevented it. A window that cannot be replayed (unreachable, empty,
// too short, nothing to calibrate before the incident) is bad input, exit
// 2; a window without an incident says so and exits 0; a replay whose
// verdict disagrees with the window's fails its claim, exit 1.
func runReplay(ctx context.Context, inv *cli.Invocation) error {
	if len(inv.Args) > 0 {
		return cli.Usagef("replay takes no arguments (saved answers are --file FILE), got %q", inv.Args[0])
	}
	cfg, err := readConfig(inv, inv.Calibrate.Configs, importer.Options{})
	if err != nil {
		return err
	}
	w, src, err := readWindow(ctx, inv)
	if err != nil {
		return err
	}
	opts := replay.Options{Source: src, Advise: !inv.ReplayNoAdvise, Config: cfg}
	if inv.Seed != nil {
		opts.Seed = *inv.Seed
	}
	r, err := replay.Replay(ctx, w, opts)
	switch {
	case errors.Is(err, replay.ErrInput):
		return cli.Usagef("%v", err)
	case err != nil:
		return err
	}
	if cfg != nil {
		warn(inv, cfg, r.Disagreements)
	}
	o := r.Outcome()
	return inv.Emit([]*experiment.Outcome{o}, r, "retrystorm replay")
}
