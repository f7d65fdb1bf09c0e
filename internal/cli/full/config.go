package full

import (
	"context"
	"errors"
	"fmt"

	"github.com/retrystorm/retrystorm/experiment"
	"github.com/retrystorm/retrystorm/internal/cli"
	"github.com/retrystorm/retrystorm/internal/configcmd"
)

// The commands that read users' configs: their logic is package
// configcmd's; these turn the parsed command line into its options.

func configIO(inv *cli.Invocation, label string) (configcmd.IO, func()) {
	update, clear := inv.Progress(label)
	return configcmd.IO{Stdout: inv.Stdout, Stderr: inv.Stderr, Style: inv.Style(), Progress: update}, clear
}

// configErr maps configcmd's errors to the command line's: a usage error
// is exit status 2, an unsafe config 1 (everything was printed).
func configErr(err error) error {
	var ue *configcmd.UsageError
	switch {
	case errors.As(err, &ue):
		return cli.Usagef("%s", ue.Msg)
	case errors.Is(err, configcmd.ErrUnsafe):
		return cli.ErrClaims
	}
	return err
}

func checkOptions(inv *cli.Invocation) configcmd.CheckOptions {
	c := inv.Configs
	return configcmd.CheckOptions{Format: c.Format, Base: c.Base, Out: inv.ReportDir(), Load: c.Load, Dip: c.Dip,
		JSON: inv.JSON, Shard: c.Shard, Workers: c.Workers, Seed: inv.Seed, Seeds: c.Seeds, Clients: c.Clients,
		MaxMemory: inv.Limits().Memory, Protocol: c.Protocol, Istio: c.Istio,
		CI: configcmd.CI{Stack: c.Stack, SARIF: c.SARIF, JUnit: c.JUnit, Baseline: c.Baseline, Manifests: c.Manifests}}
}

func runImport(ctx context.Context, inv *cli.Invocation) error {
	io, clear := configIO(inv, "import")
	defer clear()
	c := inv.Configs
	return configErr(configcmd.RunImport(ctx, inv.Args, configcmd.ImportOptions{Format: c.Format, Base: c.Base, Output: c.Output, Timeout: c.Timeout, Protocol: c.Protocol, Istio: c.Istio}, io))
}

func runCheck(ctx context.Context, inv *cli.Invocation) error {
	io, clear := configIO(inv, "check")
	err := configcmd.RunCheck(ctx, inv.Args, checkOptions(inv), io)
	clear()
	return configErr(err)
}

func runAdvise(ctx context.Context, inv *cli.Invocation) error {
	if c := inv.Configs; c.Manifests != "" || c.SARIF != "" || c.JUnit != "" || c.Baseline != "" {
		return cli.Usagef("advise does not take --manifests, --sarif, --junit or --baseline yet: they are check's (docs/stack.md)")
	}
	if len(inv.Configs.Stack) > 0 {
		io, clear := configIO(inv, "advise")
		err := configcmd.RunAdviseStack(ctx, inv.Args, checkOptions(inv), io)
		clear()
		return configErr(err)
	}
	io, clear := configIO(inv, "advise")
	c := inv.Configs
	// A search too long to run unwatched is refused as run refuses a
	// scenario: --long lets it go ahead.
	admit := func(e experiment.AdviseEstimate) error {
		return inv.AdmitSearch(fmt.Sprintf("the search (%d runs)", e.Runs), e.Attempts)
	}
	err := configcmd.RunAdvise(ctx, inv.Args, configcmd.AdviseOptions{CheckOptions: checkOptions(inv), Seeds: c.Seeds, MaxRuns: c.MaxRuns, Top: c.Top, As: c.As,
		Route: c.Route, Conditions: c.Conditions, Admit: admit}, io)
	clear()
	return configErr(err)
}

func runMerge(ctx context.Context, inv *cli.Invocation) error {
	io, clear := configIO(inv, "merge")
	defer clear()
	sweep, _, err := configcmd.RunMerge(ctx, inv.Args, configcmd.MergeOptions{JSON: inv.JSON, Out: inv.ReportDir(), Top: inv.Configs.Top}, io)
	if err != nil || sweep == nil {
		return configErr(err)
	}
	// A sweep's shards merged print as the sweep prints; a lab run's as
	// the lab's.
	title := experiment.Sweep.Title
	if sweep.Name == "lab" {
		title = "retrystorm lab: the shards of one run, merged"
	}
	if err := inv.Emit([]*experiment.Outcome{sweep}, sweep.JSON, title); err != nil {
		return err
	}
	if j, ok := sweep.JSON.(*experiment.MergedLabJSON); ok && j.Inconclusive() {
		return cli.ErrInconclusive
	}
	return nil
}
