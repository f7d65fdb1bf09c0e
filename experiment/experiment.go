// Package experiment holds retrystorm's experiments: each runs the
// simulator (or a model built from resil) on its default scenario or a
// user's, checks its own claims on the numbers it just computed, and hands
// back tables, charts and JSON.
//
// The same claim checks run in the tests (for the default seed and twenty
// others), on the command line and, live, on the browser page.
package experiment

import (
	"context"
	"embed"
	"fmt"
	"slices"

	"github.com/retrystorm/retrystorm/report"
	"github.com/retrystorm/retrystorm/scenario"
	"github.com/retrystorm/retrystorm/sim"
)

//go:embed scenarios/*.yaml
var scenarios embed.FS

// Options are what every experiment takes from the command line.
type Options struct {
	// Seed, when set, replaces the scenario's seed.
	Seed *uint64
	// Scenario, when set, replaces the experiment's default scenario
	// (from --config).
	Scenario *scenario.Scenario
	// Progress, when set, is told how far a long experiment has come.
	Progress func(done, total int)
	// Workers bounds the parallel runs of the experiments that make many
	// (sweep); zero means GOMAXPROCS.
	Workers int
	// Grid is the sweep's cells per axis; zero means DefaultGrid.
	Grid int
	// Limits bounds each simulator run (see sim.Estimate); zero fields
	// mean sim.DefaultLimits'.
	Limits sim.Limits
	// Shard, when its Count is above 1, runs only the shard's cells of
	// the sweep: its Outcome has the JSON alone, for Merge.
	Shard Shard
}

// run plays sc in the simulator within the options' limits.
func (o Options) run(ctx context.Context, sc *scenario.Scenario) (*sim.Result, error) {
	return sim.RunWith(ctx, sc, sim.Options{Limits: o.Limits})
}

// Outcome is what an experiment produces.
type Outcome struct {
	Name     string
	Claims   []report.Claim
	Section  report.Section
	Findings []string
	// JSON is the machine-readable result; it carries the claims.
	JSON any
}

// Experiment is one subcommand.
type Experiment struct {
	Name    string
	Title   string
	Summary string // one line, for --help
	// Config is the embedded default scenario file, or nil for the
	// experiments that do not run a scenario file.
	Config []byte
	Run    func(ctx context.Context, opts Options) (*Outcome, error)
}

var registry []*Experiment

func register(e *Experiment) *Experiment {
	if e.Config == nil {
		if data, err := scenarios.ReadFile("scenarios/" + e.Name + ".yaml"); err == nil {
			e.Config = data
		}
	}
	registry = append(registry, e)
	return e
}

// order is the order experiments are documented and run in.
var order = []string{"storm", "fleets", "jitter", "breaker", "outage", "hedge", "layers", "sweep", "shed"}

// All returns the experiments in the order they are documented.
func All() []*Experiment {
	all := slices.Clone(registry)
	slices.SortStableFunc(all, func(a, b *Experiment) int {
		return slices.Index(order, a.Name) - slices.Index(order, b.Name)
	})
	return all
}

// Lookup returns the experiment called name.
func Lookup(name string) (*Experiment, bool) {
	for _, e := range registry {
		if e.Name == name {
			return e, true
		}
	}
	return nil, false
}

// scenarioFor returns the scenario experiment name runs: the user's, or
// the embedded default, with the seed override applied. The result is the
// caller's to change.
func scenarioFor(name string, opts Options) (*scenario.Scenario, error) {
	var sc *scenario.Scenario
	if opts.Scenario != nil {
		sc = clone(opts.Scenario)
	} else {
		file := "scenarios/" + name + ".yaml"
		data, err := scenarios.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("experiment %s has no embedded scenario", name)
		}
		s, err := scenario.Parse(name+".yaml", data)
		if err != nil {
			return nil, fmt.Errorf("embedded scenario %s: %w", name, err)
		}
		sc = s
	}
	if opts.Seed != nil {
		sc.Seed = *opts.Seed
	}
	return sc, nil
}

// clone copies a scenario deeply enough to change it: its slices are its
// own.
func clone(s *scenario.Scenario) *scenario.Scenario {
	c := *s
	c.Triggers = slices.Clone(s.Triggers)
	c.Fleets = slices.Clone(s.Fleets)
	return &c
}
