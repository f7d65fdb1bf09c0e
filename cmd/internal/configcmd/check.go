package configcmd

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/retrystorm/retrystorm/cmd/internal/cli"
	"github.com/retrystorm/retrystorm/experiment"
	"github.com/retrystorm/retrystorm/grid"
	"github.com/retrystorm/retrystorm/importer"
	"github.com/retrystorm/retrystorm/internal/outfile"
	"github.com/retrystorm/retrystorm/scenario"
	"github.com/retrystorm/retrystorm/sim"
	"github.com/retrystorm/retrystorm/verdict"
)

// Check is `retrystorm check`, run by retrystorm-full (full.Heavy).
func Check(ctx context.Context, inv *cli.Invocation) error {
	io, clear := configIO(inv, "check")
	err := RunCheck(ctx, inv.Args, checkOptions(inv), io)
	clear()
	return configErr(err)
}

// checkOptions are the options of check and advise, from the command line.
func checkOptions(inv *cli.Invocation) CheckOptions {
	c := inv.Configs
	return CheckOptions{Format: c.Format, Base: c.Base, Out: inv.ReportDir(), Load: c.Load, Dip: c.Dip,
		JSON: inv.JSON, Model: c.Model, FullRuns: c.FullRuns, Shard: c.Shard, Workers: c.Workers, Seed: inv.Seed, Seeds: c.Seeds, Clients: c.Clients,
		MaxMemory: inv.Limits().Memory, Protocol: c.Protocol, Istio: c.Istio,
		CI: CI{Stack: c.Stack, SARIF: c.SARIF, JUnit: c.JUnit, Baseline: c.Baseline, Manifests: c.Manifests, MaxRuns: c.MaxRuns, FailOnUnsafe: c.FailOnUnsafe, EmitWorst: c.EmitWorst, Instances: c.Instances, Inputs: inv.Inputs()}}
}

// CheckOptions are the flags check and advise share, as internal/cli
// parsed and checked them.
type CheckOptions struct {
	Format string  // --format: the files' format; "" detects it
	Base   string  // --base: the scenario to run against
	Out    string  // --out: the HTML report's directory
	Load   float64 // --load: the realistic load
	Dip    float64 // --dip: the realistic dip
	JSON   bool    // --json
	Model  bool    // check --model: the model answers the cells far from the boundary
	// FullRuns is check --full-runs: every run plays to its end.
	FullRuns bool
	Shard    string  // --shard i/n
	Workers  int     // --workers
	Seed     *uint64 // --seed: replaces the base scenario's
	Seeds    int     // --seeds: seeds per cell; 0 means 3
	Clients  int     // --clients: client instances; 0 means the base scenario's
	// Protocol (--protocol) and Istio (--istio) say what the configs do
	// not, as import's do: what the services speak, the Istio release.
	Protocol, Istio string
	// MaxMemory is --max-memory: the most memory one run of the envelope
	// may need (sim.Estimate); zero means sim.DefaultLimits'.
	MaxMemory int64

	// CI are check's outputs for a CI gate and its layers: --stack,
	// --sarif, --junit, --baseline (stack.go, ci.go).
	CI
}

// assume is what the importer is told the configs do not say.
func (c *CheckOptions) assume() importer.Options {
	return importer.Options{Protocol: c.Protocol, IstioVersion: c.Istio}
}

func (c *CheckOptions) options(o IO) (experiment.Options, grid.Shard, error) {
	var sh grid.Shard
	if c.Shard != "" {
		var err error
		if sh, err = grid.ParseShard(c.Shard); err != nil {
			return experiment.Options{}, sh, usagef("%v", err)
		}
		if !c.JSON {
			return experiment.Options{}, sh, usagef("--shard writes a part of the result for retrystorm merge: give --json too")
		}
		if c.EmitWorst != "" {
			return experiment.Options{}, sh, usagef("--emit-worst writes the worst cell of a whole check, which a shard is not: check without --shard, or merge the shards and check the fleet again")
		}
	}
	opts := experiment.Options{Workers: c.Workers, Limits: sim.Limits{Memory: c.MaxMemory}}
	if !c.JSON {
		opts.Progress = o.Progress
	}
	return opts, sh, nil
}

// RunCheck checks the fleets of files; it returns ErrUnsafe when one
// stays collapsed in the realistic region.
func RunCheck(ctx context.Context, files []string, c CheckOptions, o IO) error {
	if c.Manifests != "" {
		return RunManifests(ctx, files, c, o) // manifests.go
	}
	if len(c.Stack) > 0 {
		return RunStack(ctx, files, c, o) // stack.go
	}
	if len(files) == 0 {
		return usagef("check takes one or more config or scenario files: retrystorm check FILE...")
	}
	opts, sh, err := c.options(o)
	if err != nil {
		return err
	}
	in, b, _, u, err := o.reader().Files(files, c.Format, c.Base, c.assume())
	if err != nil {
		return err
	}
	if c.Seed != nil {
		b.Seed = *c.Seed
	}
	r, err := verdict.Check(ctx, in, verdict.CheckOptions{Base: b, Load: c.Load, Dip: c.Dip, Shard: sh, Seeds: c.Seeds, Clients: c.Clients, Model: c.Model, FullRuns: c.FullRuns}, opts)
	if err != nil {
		return costly(err)
	}
	if c.Base == "" && !fromScenario(in, files) {
		r.Assumptions = verdict.BaseAssumptions(r, b, "the storm scenario's")
	}
	if c.EmitWorst != "" {
		if err := emitWorst(o, r, in, b, c.EmitWorst, append(slices.Clone(files), c.Inputs...)); err != nil {
			return err
		}
	}
	err = printCheck(o, r, c.JSON, c.Out, "retrystorm check "+strings.Join(files, " "), c.failOn())
	if c.gated() && r.Shard == (grid.Shard{}).String() && (err == nil || errors.Is(err, ErrUnsafe)) {
		return c.gate(o, checkVerdicts(r, in, u), verdict.SettingsOf(r)) // ci.go: SARIF, JUnit, --baseline
	}
	return err
}

func printCheck(o IO, r *verdict.CheckResult, asJSON bool, out, command string, failOn verdict.Level) error {
	if asJSON {
		if err := writeJSON(o.Stdout, r); err != nil {
			return err
		}
	} else {
		if err := r.Render(o.Stdout, o.Style); err != nil {
			return err
		}
		if err := writeReport(o, out, r.Section(), command); err != nil {
			return err
		}
	}
	if r.Shard != (grid.Shard{}).String() {
		return nil // a shard's verdict waits for merge
	}
	for i := range r.Fleets {
		if r.Level(i) >= failOn {
			return ErrUnsafe
		}
	}
	return nil
}

// fromScenario reports whether the base of a check came from the user's
// own scenario files: then its numbers are the user's, not assumed.
func fromScenario(in []verdict.CheckInput, files []string) bool {
	for _, ci := range in {
		if slices.Contains(files, ci.Origin) {
			return true
		}
	}
	return false
}

// emitWorst writes the worst cell of the check to file (--emit-worst), or
// says on standard error that every fleet is SAFE. The file must not be
// one of the inputs.
func emitWorst(o IO, r *verdict.CheckResult, in []verdict.CheckInput, base *scenario.Scenario, file string, inputs []string) error {
	sc, notes, ok, err := r.WorstScenario(in, base)
	if err != nil {
		return err
	}
	if !ok {
		fmt.Fprintf(o.Stderr, "--emit-worst: every fleet is SAFE: %s not written\n", file)
		return nil
	}
	if err := outfile.Write(file, outfile.Scenario, scenario.MarshalNotes(sc, notes), inputs); err != nil {
		return usagef("--emit-worst %v", err)
	}
	fmt.Fprintf(o.Stderr, "worst cell: %s (retrystorm run %s reproduces it)\n", file, file)
	return nil
}
