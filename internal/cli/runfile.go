package cli

import (
	"context"

	"github.com/retrystorm/retrystorm/experiment"
	"github.com/retrystorm/retrystorm/internal/safetext"
	"github.com/retrystorm/retrystorm/scenario"
)

// runFile runs a scenario file as it is: every fleet, a table, charts and
// the run's JSON. It checks no claims: a file states no expectations.
func runFile(ctx context.Context, cl *commandLine) error {
	if len(cl.args) != 1 {
		return usagef("run takes one scenario file: retrystorm run FILE.yaml")
	}
	sc, err := scenario.Load(cl.args[0])
	if err != nil {
		return err
	}
	if cl.seed != nil {
		sc.Seed = *cl.seed
	}
	if err := cl.admit(sc); err != nil {
		return err
	}
	bar := cl.newProgress("run")
	out, err := experiment.RunScenarioWith(ctx, sc, experiment.Options{Limits: cl.limits(), Progress: bar.update})
	bar.clear()
	if err != nil {
		return err
	}
	return cl.emit([]*experiment.Outcome{out}, out.JSON, "retrystorm run "+safetext.Name(cl.args[0]))
}
