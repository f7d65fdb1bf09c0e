// Package live is the part of retrystorm's page that runs in the browser,
// compiled to WebAssembly: it sets the page's knobs on an experiment's
// default scenario, runs the experiment (the very code the command runs),
// and hands back what the page draws: claims, tables, SVG charts and the
// YAML of the scenario it ran.
//
// It is plain Go with no tie to JavaScript, so the tests run it natively;
// page/wasm is the thin bridge that exposes it to the page.
package live

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"

	"github.com/retrystorm/retrystorm/experiment"
	"github.com/retrystorm/retrystorm/report"
	"github.com/retrystorm/retrystorm/scenario"
)

// Panel is one experiment on the page and the knobs it takes.
type Panel struct {
	Name    string `json:"name"`
	Title   string `json:"title"`
	Summary string `json:"summary"`
	// Heavy panels take seconds: the page computes them after the first
	// render, apart from the others, and only when a knob is let go.
	Heavy bool `json:"heavy"`
	// Cost ranks the panels by how long they take to compute, cheapest
	// first: the page computes them in that order on first load, so that
	// numbers are on screen as soon as can be.
	Cost  int    `json:"cost"`
	Knobs []Knob `json:"knobs"`
	// Fleets names the default scenario's fleets, which Knob.Changes and
	// Knob.Controls index.
	Fleets []string `json:"fleets,omitempty"`
	// Fixed says what the panel cannot change, for panels with few knobs.
	Fixed string `json:"fixed,omitempty"`
	// Config is the file name the page offers the YAML under, or "" for
	// an experiment that runs no scenario file.
	Config string `json:"config,omitempty"`
}

// GridKnob is the sweep's grid: not a scenario setting, but how many cells
// per axis the map has.
const GridKnob = "grid"

// DefaultGrid is the sweep's grid on the page: coarse, so that the map
// takes seconds in a browser rather than a minute.
const DefaultGrid = 8

// EngineKnob is the sweep's engine (sweep --engine): not a scenario
// setting, but what answers the map's cells.
const EngineKnob = "engine"

// DefaultEngine is what answers the sweep panel's cells when the page
// names no engine: the analytic model's map for every policy it
// describes, the simulator in every cell of the others (the adaptive
// limit). On the page's 8 × 8 grid its claims and counts are the
// simulator's (TestSweepEngine, TestSweepPanelDefaultEngine), in a third
// of the simulator's time in WebAssembly; "both", which runs the
// simulator near the model's boundary too, takes twice the model's
// (BENCHMARKS.md, issue 29). The engine select offers both, and the
// simulator in every cell as before.
const DefaultEngine = experiment.EngineModel

// Engine names, as View.Engine and Source.Engine say them.
const (
	bySimulator = "simulator"
	byModel     = "model"
	byBoth      = "model + simulator"
)

// Panels describes every panel of the page, with its knobs set as in the
// experiment's default scenario.
func Panels() ([]Panel, error) {
	var out []Panel
	for _, e := range experiment.All() {
		l := e.Page
		for _, key := range l.Knobs {
			if key != GridKnob && !slices.ContainsFunc(catalogue, func(k knob) bool { return k.key == key }) {
				return nil, fmt.Errorf("live: %s offers the knob %q, which the catalogue lacks", e.Name, key)
			}
		}
		p := Panel{Name: e.Name, Title: e.Title, Summary: e.Summary, Heavy: l.Heavy, Cost: l.Cost, Fixed: l.Fixed}
		if e.Config != nil {
			p.Config = e.Name + ".yaml"
			def, err := defaultScenario(e)
			if err != nil {
				return nil, err
			}
			for _, f := range def.Fleets {
				p.Fleets = append(p.Fleets, f.Name)
			}
			for _, k := range catalogue {
				if !slices.Contains(l.Knobs, k.key) {
					continue
				}
				if kn, ok := k.describe(def); ok {
					p.Knobs = append(p.Knobs, kn)
				}
			}
		}
		if slices.Contains(l.Knobs, GridKnob) {
			p.Knobs = append([]Knob{{
				Key: GridKnob, Label: "grid", Kind: "select", Options: []string{"6", "8", "12", "16"},
				Value: strconv.Itoa(DefaultGrid), Unit: "cells per axis",
				Hint: "runs per policy grow with its square: 16 takes a while",
			}}, p.Knobs...)
		}
		if e.Grid {
			p.Knobs = append([]Knob{{
				Key: EngineKnob, Label: "engine", Kind: "select",
				Options: []string{experiment.EngineModel, experiment.EngineBoth, experiment.EngineSim},
				Value:   DefaultEngine,
				Hint:    "what answers the cells: model, the analytic model where it describes the policy; both, the model with the simulator near its boundary; sim, the simulator in every cell (slower)",
			}}, p.Knobs...)
		}
		out = append(out, p)
	}
	return out, nil
}

// Request is what the page asks of a panel: the seed, and the knobs the
// user moved, by key. A knob not in Values keeps its default.
type Request struct {
	Seed   *uint64           `json:"seed,omitempty"`
	Values map[string]string `json:"values,omitempty"`
	// Engine, for the sweep, is what answers its cells (sweep --engine):
	// "model" draws the map from the analytic model in a fraction of the
	// simulator's time, "both" refines it with the simulator near the
	// model's boundary, "sim" is the simulator in every cell. Empty is
	// the engine knob's value (Values["engine"]), else DefaultEngine.
	Engine string `json:"engine,omitempty"`
	// YAML, when set, is the editor's scenario (editor.go): the panel
	// name is RunAs or the experiment that runs it as its --config, and
	// the knobs do not apply.
	YAML string `json:"yaml,omitempty"`
}

// View is a computed panel, as the page draws it.
type View struct {
	Name   string   `json:"name"`
	Title  string   `json:"title"`
	Intro  []string `json:"intro"`
	Claims []Claim  `json:"claims"`
	Tables []Table  `json:"tables"`
	// Charts and Figures are inline SVG, drawn by package report as in
	// the command's HTML report.
	Charts   []string `json:"charts"`
	Figures  []string `json:"figures"`
	Notes    []string `json:"notes"`
	Findings []string `json:"findings"`
	// YAML is the scenario the panel ran, as a file that `retrystorm run`
	// and `retrystorm NAME --config` take unchanged; empty for an
	// experiment that runs no scenario file.
	YAML string `json:"yaml,omitempty"`
	// Fleets names the fleets of the scenario run, which a knob may have
	// renamed.
	Fleets []string `json:"fleets,omitempty"`
	// Inactive lists the panel's knobs that do nothing to the scenario
	// run (drop_expired without a queue).
	Inactive []string `json:"inactive,omitempty"`
	// Engine says what answered the panel: "simulator", "model", or
	// "model + simulator" (the sweep on the model's engines). Sources
	// says it per policy, for the sweep.
	Engine  string   `json:"engine,omitempty"`
	Sources []Source `json:"sources,omitempty"`
	// Error is why the panel could not be computed; the rest is empty.
	Error string `json:"error,omitempty"`
}

// Source is what answered one policy of the sweep's map.
type Source struct {
	Policy string `json:"policy"`
	// Engine is "simulator" (every cell), "model" (every cell), or
	// "model + simulator" (the model's map, and the simulator in the
	// Simulated cells near the model's boundary).
	Engine    string `json:"engine"`
	Simulated int    `json:"simulated,omitempty"`
}

// Claim is a report.Claim with its evidence in words.
type Claim struct {
	Text     string `json:"text"`
	Holds    bool   `json:"holds"`
	Detail   string `json:"detail"`
	Measured any    `json:"measured"`
}

// Table is a report.Table in a form JSON carries.
type Table struct {
	Title   string     `json:"title,omitempty"`
	Columns []Column   `json:"columns"`
	Rows    [][]string `json:"rows"`
	// Emphasis lists the cells that carry bad news, as [row, column].
	Emphasis [][2]int `json:"emphasis,omitempty"`
}

// Column is a table column.
type Column struct {
	Name  string `json:"name"`
	Right bool   `json:"right,omitempty"`
}

// Scenario returns the scenario panel name runs for req: the experiment's
// default with the knobs applied, validated, and the knobs that had no
// effect. It returns a nil scenario for an experiment that runs none.
func Scenario(name string, req Request) (*scenario.Scenario, []string, error) {
	e, err := lookup(name)
	if err != nil {
		return nil, nil, err
	}
	for _, key := range slices.Sorted(maps.Keys(req.Values)) {
		if !slices.Contains(e.Page.Knobs, key) && !(key == EngineKnob && e.Grid) {
			return nil, nil, fmt.Errorf("%s takes no knob %q", name, key)
		}
	}
	if e.Config == nil {
		return nil, nil, nil
	}
	def, err := defaultScenario(e)
	if err != nil {
		return nil, nil, err
	}
	sc := *def
	sc.Triggers = slices.Clone(def.Triggers)
	sc.Fleets = slices.Clone(def.Fleets)
	if req.Seed != nil {
		sc.Seed = *req.Seed
	}
	// The catalogue's order, not the map's: the model comes before the
	// settings that depend on it.
	for _, k := range catalogue {
		if v, ok := req.Values[k.key]; ok {
			if err := k.apply(def, &sc, v); err != nil {
				return nil, nil, fmt.Errorf("%s: %w", k.label, err)
			}
		}
	}
	if err := sc.Validate(); err != nil {
		return nil, nil, err
	}
	var inactive []string
	for _, k := range catalogue {
		if k.inert != nil && slices.Contains(e.Page.Knobs, k.key) && k.inert(&sc) {
			inactive = append(inactive, k.key)
		}
	}
	return &sc, inactive, nil
}

// Run computes panel name for req. progress, when set, is told how far a
// long experiment (the sweep) has come, from any of its goroutines. A
// failure is the View's Error.
func Run(ctx context.Context, name string, req Request, progress func(done, total int)) View {
	if req.YAML != "" {
		return runYAML(ctx, name, req, progress)
	}
	v := View{Name: name}
	e, err := lookup(name)
	if err != nil {
		v.Error = err.Error()
		return v
	}
	v.Title = e.Title
	sc, inactive, err := Scenario(name, req)
	if err != nil {
		v.Error = err.Error()
		return v
	}
	v.Inactive = inactive
	engine := req.Engine
	if engine == "" {
		engine = req.Values[EngineKnob]
	}
	switch {
	case engine != "" && !e.Grid:
		v.Error = fmt.Sprintf("%s takes no engine: only the sweep does", name)
		return v
	case engine == "" && e.Grid:
		engine = DefaultEngine
	}
	opts := experiment.Options{Seed: req.Seed, Scenario: sc, Progress: progress, Grid: DefaultGrid, Engine: engine}
	if g, ok := req.Values[GridKnob]; ok {
		if opts.Grid, err = strconv.Atoi(g); err != nil {
			v.Error = fmt.Sprintf("grid: want a whole number, got %q", g)
			return v
		}
	}
	out, err := e.Run(ctx, opts)
	if err != nil {
		v.Error = err.Error()
		return v
	}
	if sc != nil {
		v.YAML = string(scenario.Marshal(sc))
		for _, f := range sc.Fleets {
			v.Fleets = append(v.Fleets, f.Name)
		}
	}
	fill(&v, out)
	v.Engine = bySimulator
	if e.Grid {
		if v.Sources, err = sources(out.JSON); err != nil {
			return View{Name: name, Error: err.Error()}
		}
		v.Engine = engineOf(v.Sources)
	}
	return v
}

// fill puts an experiment's outcome in the view: its prose, claims,
// tables and charts.
func fill(v *View, out *experiment.Outcome) {
	s := out.Section
	v.Intro, v.Notes, v.Findings = s.Intro, s.Notes, out.Findings
	for _, c := range out.Claims {
		v.Claims = append(v.Claims, Claim{Text: c.Text, Holds: c.Holds, Detail: c.Detail, Measured: c.Measured})
	}
	for _, t := range s.Tables {
		v.Tables = append(v.Tables, tableOf(t))
	}
	for _, c := range s.Charts {
		v.Charts = append(v.Charts, c.SVG())
	}
	for _, f := range s.Figures {
		v.Figures = append(v.Figures, string(f))
	}
}

// sources reads what answered each policy from the sweep's JSON (its
// policies' source and simulated cells, as sweep --engine writes them).
func sources(js any) ([]Source, error) {
	b, err := json.Marshal(js)
	if err != nil {
		return nil, fmt.Errorf("live: the sweep's result: %w", err)
	}
	var m struct {
		Policies []struct {
			Policy    string   `json:"policy"`
			Source    string   `json:"source"`
			Simulated [][]bool `json:"simulated"`
		} `json:"policies"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("live: the sweep's result: %w", err)
	}
	out := make([]Source, len(m.Policies))
	for i, p := range m.Policies {
		s := Source{Policy: p.Policy, Engine: bySimulator}
		switch p.Source {
		case "model":
			s.Engine = byModel
		case "model+simulator":
			s.Engine = byBoth
			for _, row := range p.Simulated {
				for _, sim := range row {
					if sim {
						s.Simulated++
					}
				}
			}
		}
		out[i] = s
	}
	return out, nil
}

// engineOf sums the policies' sources up in one: the simulator when it
// answered every cell, the model when it did, else both.
func engineOf(src []Source) string {
	sim := slices.ContainsFunc(src, func(s Source) bool { return s.Engine == bySimulator || s.Simulated > 0 })
	model := slices.ContainsFunc(src, func(s Source) bool { return s.Engine != bySimulator })
	switch {
	case !model:
		return bySimulator
	case !sim:
		return byModel
	}
	return byBoth
}

// lookup returns the experiment of panel name: every experiment has one
// (experiment.Page).
func lookup(name string) (*experiment.Experiment, error) {
	e, ok := experiment.Lookup(name)
	if !ok {
		return nil, fmt.Errorf("no panel %q", name)
	}
	return e, nil
}

func defaultScenario(e *experiment.Experiment) (*scenario.Scenario, error) {
	v, _ := parsed.LoadOrStore(e.Name, sync.OnceValues(func() (*scenario.Scenario, error) {
		return scenario.Parse(e.Name+".yaml", e.Config)
	}))
	def, err := v.(func() (*scenario.Scenario, error))()
	if err != nil {
		return nil, fmt.Errorf("live: the embedded scenario of %s: %w", e.Name, err)
	}
	// A copy of its own for every caller, down to the slices: the knobs
	// write into the scenario they are given.
	sc := *def
	sc.Triggers = slices.Clone(def.Triggers)
	sc.Fleets = slices.Clone(def.Fleets)
	for i := range sc.Fleets {
		sc.Fleets[i].Retry.On = slices.Clone(def.Fleets[i].Retry.On)
	}
	return &sc, nil
}

// parsed holds each experiment's embedded scenario, parsed once: a slider
// step on the page would otherwise parse it again, a twentieth of the
// step's work.
var parsed sync.Map // experiment name → func() (*scenario.Scenario, error)

func tableOf(t report.Table) Table {
	out := Table{Title: t.Title, Rows: t.Rows}
	for _, c := range t.Columns {
		out.Columns = append(out.Columns, Column{Name: c.Name, Right: c.Align == report.Right})
	}
	// Row by row, not in the map's random order: the JSON should not be
	// random (and sorting [2]int cells would add a sort to the module).
	for i, row := range t.Rows {
		for j := range row {
			if t.Emphasis[[2]int{i, j}] {
				out.Emphasis = append(out.Emphasis, [2]int{i, j})
			}
		}
	}
	return out
}
