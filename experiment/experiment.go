// Package experiment holds retrystorm's experiments: each runs the
// simulator (or a model built from resil) on its default scenario or a
// user's, checks its own claims on the numbers it just computed, and hands
// back tables, charts and JSON.
//
// The same claim checks run in the tests (for the default seed and twenty
// others), on the command line and, live, on the browser page.
package experiment

import (
	"cmp"
	"context"
	"embed"
	"fmt"
	"slices"

	"github.com/retrystorm/retrystorm/grid"

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
	// Progress, when set, is told how far a long experiment has come,
	// one call at a time and never with less done than before.
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
	Shard grid.Shard
	// Engine is what answers the sweep's cells: EngineSim (or empty),
	// the simulator in every cell; EngineModel, the analytic model where
	// it describes the policy; EngineBoth, the model's map first, then
	// the simulator in the cells near the model's boundary.
	Engine string
}

// Where a cell's numbers came from, as the JSON says it ("source"):
// the simulator, or the analytic model.
const (
	SourceSimulator = "simulator"
	SourceModel     = "model"
)

// The sweep's engines (Options.Engine, sweep --engine).
const (
	EngineSim   = "sim"
	EngineModel = "model"
	EngineBoth  = "both"
)

// GridOptions are what a grid of runs takes from the options.
func (o Options) GridOptions() grid.Options {
	return grid.Options{Workers: o.Workers, Progress: o.Progress, Limits: o.Limits}
}

// run plays sc in the simulator within the options' limits.
func (o Options) run(ctx context.Context, sc *scenario.Scenario) (*sim.Result, error) {
	return o.GridOptions().Simulate(ctx, sc)
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

// Experiment is one experiment: a subcommand, a section of `all`'s report
// and of FINDINGS.md, and a panel of the browser page. Everything those
// need to know about it is declared here, once, by the file that defines
// it (register), and the command table, `all`, FINDINGS.md and the page
// loop over All: adding an experiment is one new file (CONTRIBUTING.md
// shows one).
type Experiment struct {
	Name    string
	Title   string
	Summary string // one line, for --help
	// Order places the experiment among the others, lowest first: in the
	// command list, in `all`, in FINDINGS.md and on the page.
	Order int
	// Config is the embedded default scenario file, or nil for the
	// experiments that do not run a scenario file.
	Config []byte
	// Grid and Shard say that the command takes --grid (Options.Grid)
	// and --shard (Options.Shard), beside the flags every experiment
	// takes (the output's, --config's and the cost limits').
	Grid, Shard bool
	// Page is the experiment's panel on the browser page.
	Page Page
	Run  func(ctx context.Context, opts Options) (*Outcome, error)
}

// Page is an experiment's panel on the browser page (package page/live).
type Page struct {
	// Knobs are the keys of page/live's knob catalogue the panel offers,
	// and "grid" for the sweep's cells per axis; none for an experiment
	// whose numbers are its own.
	Knobs []string
	// Heavy panels take seconds: the page computes them after the first
	// render, apart from the others, and only when a knob is let go.
	Heavy bool
	// Cost is what a default run takes, in milliseconds measured
	// natively: the page computes the panels cheapest first on first
	// load, so that numbers are on screen as soon as can be.
	Cost int
	// Fixed says what the panel cannot change, for panels with few knobs.
	Fixed string
}

// scenarioKnobs are the page's knobs of an experiment that runs its
// scenario as it is (storm, fleets): the traffic, the origin, the dip and
// the fleets' policies.
var scenarioKnobs = []string{"rate", "model", "capacity", "dip", "dip_for", "drop_expired", "max_retries", "jitter", "budget_ratio", "budget_floor", "breaker_threshold"}

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

// All returns the experiments in their Order.
func All() []*Experiment {
	all := slices.Clone(registry)
	slices.SortStableFunc(all, func(a, b *Experiment) int { return cmp.Compare(a.Order, b.Order) })
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

// DefaultScenario returns experiment name's embedded default scenario,
// for the caller to change.
func DefaultScenario(name string) (*scenario.Scenario, error) {
	return scenarioFor(name, Options{})
}

// scenarioFor returns the scenario experiment name runs: the user's, or
// the embedded default, with the seed override applied. The result is the
// caller's to change.
func scenarioFor(name string, opts Options) (*scenario.Scenario, error) {
	var sc *scenario.Scenario
	if opts.Scenario != nil {
		sc = opts.Scenario.Clone()
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
