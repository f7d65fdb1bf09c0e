package live

import (
	"context"
	"errors"
	"fmt"
	"math"
	"unicode/utf8"

	"github.com/retrystorm/retrystorm/examples"
	"github.com/retrystorm/retrystorm/experiment"
	"github.com/retrystorm/retrystorm/scenario"
	"github.com/retrystorm/retrystorm/sim"
)

// The page's scenario editor (issue 39): the user's own scenario, typed,
// pasted, loaded from a file, picked from the examples or carried in the
// page's address (#scenario=...), is checked, its cost estimated, and run
// in the browser: as `retrystorm run` does, or as an experiment does with
// --config, claims included.

// RunAs is the name the editor runs a plain scenario under: `retrystorm
// run`. Any other name is an experiment's, which runs the scenario as its
// --config.
const RunAs = "run"

// MaxYAML is the most a scenario the editor takes may hold: a scenario is
// a page of YAML, and the page's address carries it (a larger fragment is
// refused before it is decoded).
const MaxYAML = 64 << 10

// Browser speed: the page's module runs the simulator about this many
// times slower than the command (BENCHMARKS.md, issue 29's page), and the
// editor runs a scenario at once only when its estimate is under AutoRun.
const (
	wasmSlowdown = 3
	AutoRun      = 1.0 // seconds
)

// editorLimits bound what the editor runs: a browser tab has less memory
// to spare than a command.
var editorLimits = sim.Limits{Memory: 512 << 20}

// Check is what the editor says of a scenario before it runs it.
type Check struct {
	OK bool `json:"ok"`
	// Error, Line, Column and Field say why the scenario is refused, and
	// where (Line 0: the whole text).
	Error  string `json:"error,omitempty"`
	Line   int    `json:"line,omitempty"`
	Column int    `json:"column,omitempty"`
	Field  string `json:"field,omitempty"`
	// Name is the scenario's; Fleets its fleets'; As what runs it.
	Name   string   `json:"name,omitempty"`
	Fleets []string `json:"fleets,omitempty"`
	As     string   `json:"as,omitempty"`
	// Seconds is the estimated time of the run in this browser, at most
	// (sim.Estimate's bound on the work); Auto says it is short enough to
	// run at once.
	Seconds float64 `json:"seconds"`
	Memory  int64   `json:"memory"`
	Auto    bool    `json:"auto"`
}

// CheckYAML parses yaml as the editor's scenario and estimates what
// running it as as (RunAs or an experiment's name) costs.
func CheckYAML(yaml, as string) Check {
	sc, err := parseEditor(yaml)
	if err != nil {
		c := Check{Error: err.Error()}
		// errors.AsType, not errors.As: As would bring reflection's
		// 30 KB into the page's module.
		if se, ok := errors.AsType[*scenario.Error](err); ok {
			c.Line, c.Column, c.Field = se.Line, se.Column, se.Field
		}
		return c
	}
	c := Check{OK: true, Name: sc.Name, As: as}
	for _, f := range sc.Fleets {
		c.Fleets = append(c.Fleets, f.Name)
	}
	cost := sim.Estimate(sc)
	c.Memory = cost.Memory
	secs, err := estimateSeconds(sc, as, cost)
	if err != nil {
		return Check{Error: err.Error()}
	}
	c.Seconds = secs
	c.Auto = secs <= AutoRun && editorLimits.Memory >= cost.Memory
	if err := cost.Check(sc.Name, editorLimits); err != nil {
		c.OK, c.Error = false, err.Error()
	}
	return c
}

// parseEditor reads the editor's text as a scenario file of its own.
func parseEditor(yaml string) (*scenario.Scenario, error) {
	switch {
	case len(yaml) > MaxYAML:
		return nil, fmt.Errorf("the scenario is %d bytes; the page takes at most %d (64 KiB)", len(yaml), MaxYAML)
	case !utf8.ValidString(yaml):
		return nil, errors.New("the scenario is not UTF-8 text")
	}
	return scenario.Parse("scenario.yaml", []byte(yaml))
}

// estimateSeconds is how long running sc as as takes in the browser, at
// most: the simulator's bound on the attempts at the browser's speed for
// a plain run; an experiment's measured cost scaled by how much more its
// scenario may simulate than its default.
func estimateSeconds(sc *scenario.Scenario, as string, cost sim.Cost) (float64, error) {
	if as == RunAs || as == "" {
		return wasmSlowdown * cost.Time().Seconds(), nil
	}
	e, err := lookup(as)
	if err != nil {
		return 0, err
	}
	if e.Config == nil {
		return 0, fmt.Errorf("%s runs no scenario file: run the scenario as %s", as, RunAs)
	}
	def, err := defaultScenario(e)
	if err != nil {
		return 0, err
	}
	scale := cost.Attempts / math.Max(sim.Estimate(def).Attempts, 1)
	return wasmSlowdown * float64(e.Page.Cost) / 1000 * math.Max(scale, 0.05), nil
}

// runYAML is Run for the editor's scenario: as `retrystorm run`, or as an
// experiment's --config.
func runYAML(ctx context.Context, name string, req Request, progress func(done, total int)) View {
	v := View{Name: name}
	sc, err := parseEditor(req.YAML)
	if err != nil {
		v.Error = err.Error()
		return v
	}
	if req.Seed != nil {
		sc.Seed = *req.Seed
	}
	opts := experiment.Options{Scenario: sc, Progress: progress, Limits: editorLimits, Grid: DefaultGrid}
	var out *experiment.Outcome
	if name == RunAs {
		v.Title = "Your scenario"
		out, err = experiment.RunScenarioWith(ctx, sc, opts)
	} else {
		e, lerr := lookup(name)
		if lerr != nil {
			v.Error = lerr.Error()
			return v
		}
		v.Title = e.Title
		if e.Grid {
			opts.Engine = DefaultEngine
		}
		out, err = e.Run(ctx, opts)
	}
	if err != nil {
		v.Error = err.Error()
		return v
	}
	v.YAML = string(scenario.Marshal(sc))
	for _, f := range sc.Fleets {
		v.Fleets = append(v.Fleets, f.Name)
	}
	fill(&v, out)
	v.Engine = bySimulator
	return v
}

// Example is one entry of the editor's examples menu.
type Example struct {
	Group string `json:"group"`
	Name  string `json:"name"`
	Title string `json:"title"`
	// As is what runs it: an experiment's name, or RunAs.
	As   string `json:"as"`
	YAML string `json:"yaml"`
}

// Examples lists the editor's examples: every experiment's default
// scenario (run as that experiment), then Stability Sim's eight (run as
// scenario files).
func Examples() []Example {
	var out []Example
	for _, e := range experiment.All() {
		if e.Config != nil {
			out = append(out, Example{Group: "retrystorm's experiments", Name: e.Name, Title: e.Title, As: e.Name, YAML: string(e.Config)})
		}
	}
	for _, x := range examples.All() {
		out = append(out, Example{Group: "Stability Sim's examples", Name: x.Name, Title: x.Title, As: RunAs, YAML: string(x.YAML)})
	}
	return out
}
