package experiment

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/retrystorm/retrystorm/model"
	"github.com/retrystorm/retrystorm/report"
	"github.com/retrystorm/retrystorm/scenario"
)

const boundaryTitle = "Boundary: where the system tips, from the analytic model"

// boundaryPolicyRow is one policy's map from the fluid model (package
// model).
type boundaryPolicyRow struct {
	Policy string `json:"policy"`
	// Recovery[y][x] is recovery ticks, or -1 for never, as the sweep's;
	// model.NeverHealthy (-2) where the fleet failed more than half its
	// calls before the dip.
	Recovery  [][]int `json:"recovery_ticks,omitempty"`
	Recovered int     `json:"recovered"`
	// NeverHealthy counts the cells of model.NeverHealthy: where the
	// fleet was not healthy before the dip, so that "never recovers"
	// would blame the dip for what the load alone does.
	NeverHealthy int `json:"never_healthy_cells"`
	// Edge[x] is the smallest dip (share of capacity taken away) the
	// policy never recovers from at load x, by bisection to 0.001; null
	// where it recovers from every dip.
	Edge []*float64 `json:"edge_dip,omitempty"`
	// LargestDip is the largest dip the policy survives at the
	// scenario's own load and trigger length (null: every dip), and
	// LargestFor the longest trigger, in seconds, it survives at the
	// scenario's own load and dip (null: every trigger up to
	// ForSearched, which is 10 minutes unless the model cannot hold so
	// long a run at the fleet's timeout).
	LargestDip  *float64 `json:"largest_dip_survived"`
	LargestFor  *float64 `json:"largest_for_survived_seconds"`
	ForSearched float64  `json:"for_searched_seconds"`
	// Healthy and Stuck are the model's equilibria at the scenario's own
	// load (Stuck null: none, the fleet always heals at that load).
	Healthy *model.Equilibrium `json:"healthy,omitempty"`
	Stuck   *model.Equilibrium `json:"stuck,omitempty"`
}

// boundaryJSON is what `retrystorm boundary --json` prints.
type boundaryJSON struct {
	Scenario string  `json:"scenario"`
	Source   string  `json:"source"` // "model": no simulator run made these numbers
	Rate     float64 `json:"rate"`
	// OwnLoad and OwnDip are the scenario's own load (rate / capacity)
	// and dip, where LargestDip and LargestFor are measured.
	OwnLoad    float64             `json:"own_load"`
	OwnDip     float64             `json:"own_dip"`
	ForSeconds float64             `json:"for_seconds"`
	Load       []float64           `json:"load"` // x: intent rate / capacity
	Dip        []float64           `json:"dip"`  // y: share of capacity the trigger removes
	Policies   []boundaryPolicyRow `json:"policies"`
	// Unsupported lists the policies the model does not describe, and
	// why: the simulator (sweep) answers for them.
	Unsupported []unsupportedRow `json:"unsupported"`
	Claims      []report.Claim   `json:"claims"` // none: see BoundaryMap
}

// unsupportedRow is a policy the model gives no answer for.
type unsupportedRow struct {
	Policy string `json:"policy"`
	Reason string `json:"reason"`
}

// boundaryTol is the precision of the edges the bisection finds.
const boundaryTol = 0.001

// maxFor is the longest trigger LargestFor looks at.
const maxFor = 10 * time.Minute

// Boundary maps with the fluid model what the sweep maps with the
// simulator: the sweep's scenario (or opts.Scenario), its grid and its
// policies, each cell a model run. It also finds, per policy, the edge of
// each column by bisection, the largest dip and the longest dip the
// policy survives at the scenario's own load, and its equilibria there.
func Boundary(ctx context.Context, opts Options) (*Outcome, error) {
	js, err := BoundaryMap(ctx, opts)
	if err != nil {
		return nil, err
	}
	return boundaryOutcome(js), nil
}

// BoundaryMap computes what Boundary reports.
func BoundaryMap(ctx context.Context, opts Options) (*boundaryJSON, error) {
	sc, err := scenarioFor("sweep", opts)
	if err != nil {
		return nil, err
	}
	pols, err := boundaryVariants(sc, opts.Scenario != nil)
	if err != nil {
		return nil, err
	}
	n := opts.Grid
	if n == 0 {
		n = DefaultGrid
	}
	if n < 2 || n > 200 {
		return nil, fmt.Errorf("boundary: grid %d out of [2, 200]", n)
	}
	trig := sc.Triggers[0]
	if trig.Capacity > sc.Origin.Capacity {
		return nil, fmt.Errorf("%w: its trigger raises the capacity (to %g/s, from %g/s): the map varies how much a dip takes away", ErrBoundaryInput, trig.Capacity, sc.Origin.Capacity)
	}
	js := &boundaryJSON{
		Unsupported: []unsupportedRow{},
		Scenario:    sc.Name, Source: "model", Rate: sc.Traffic.Rate,
		OwnLoad: sc.Traffic.Rate / sc.Origin.Capacity, OwnDip: 1 - trig.Capacity/sc.Origin.Capacity,
		ForSeconds: trig.For.Seconds(),
		Load:       linspace(sweepLoadLo, sweepLoadHi, n), Dip: linspace(sweepDipLo, sweepDipHi, n),
	}
	// A policy the model does not describe is listed, not answered, as a
	// row of its own, even when the model describes none of them (an
	// imported file's fleet, with its route's deadline, often).
	for _, p := range pols {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		bp, err := boundaryPolicy(sc, p, js)
		if u := (*model.UnsupportedError)(nil); errors.As(err, &u) {
			js.Unsupported = append(js.Unsupported, unsupportedRow{Policy: p.name, Reason: u.Feature + ": " + u.Reason})
			continue
		} else if err != nil {
			return nil, err
		}
		js.Policies = append(js.Policies, bp)
	}
	// The map checks no claims: it is the model's answer, and the
	// agreement tests (boundary_test.go) check it against the simulator.
	js.Claims = []report.Claim{}
	return js, nil
}

// ErrBoundaryInput is what BoundaryMap's errors about the scenario's shape
// wrap: the command line exits 2 for them.
var ErrBoundaryInput = errors.New("the scenario cannot be mapped")

// boundaryVariants is what the map shows: without a file, the sweep's
// policies on the sweep's scenario; with one, its fleets as written,
// against its origin.
func boundaryVariants(sc *scenario.Scenario, fromFile bool) ([]sweepPolicy, error) {
	if len(sc.Triggers) != 1 || sc.Triggers[0].Kind != scenario.TriggerCapacity {
		return nil, fmt.Errorf("%w: it needs exactly one trigger, of kind capacity: the map varies its depth and the base load", ErrBoundaryInput)
	}
	if !fromFile {
		pols, err := sweepVariants(sc)
		if err != nil {
			return nil, fmt.Errorf("%w: %s", ErrBoundaryInput, strings.TrimPrefix(err.Error(), "sweep: "))
		}
		return pols, nil
	}
	if len(sc.Fleets) == 0 {
		return nil, fmt.Errorf("%w: it has no fleets", ErrBoundaryInput)
	}
	var pols []sweepPolicy
	for _, f := range sc.Fleets {
		pols = append(pols, sweepPolicy{name: f.Name, fleet: f, fix: sc.Origin.DropExpired, limit: sc.Origin.Limit})
	}
	return pols, nil
}

// cellModel builds the model of one cell of the map.
func cellModel(sc *scenario.Scenario, p sweepPolicy, load, dip float64) (*model.Model, error) {
	c := sweepCell(sc, p, load, dip)
	return model.New(c, c.Fleets[0])
}

func boundaryPolicy(sc *scenario.Scenario, p sweepPolicy, js *boundaryJSON) (boundaryPolicyRow, error) {
	bp := boundaryPolicyRow{Policy: p.name}
	// Whether the model describes the policy at all: the scenario as it
	// is, with this policy.
	own, err := cellModel(sc, p, js.OwnLoad, js.OwnDip)
	if err != nil {
		return bp, fmt.Errorf("boundary: %s: %w", p.name, err)
	}
	bp.Recovery, err = model.Map(len(js.Load), len(js.Dip), func(x, y int) (*model.Model, error) {
		return cellModel(sc, p, js.Load[x], js.Dip[y])
	})
	if err != nil {
		return bp, err
	}
	for _, row := range bp.Recovery {
		for _, v := range row {
			switch {
			case v >= 0:
				bp.Recovered++
			case v == model.NeverHealthy:
				bp.NeverHealthy++
			}
		}
	}
	for _, load := range js.Load {
		e, ok, err := model.Edge(0, 1, boundaryTol, func(dip float64) (*model.Model, error) { return cellModel(sc, p, load, dip) })
		if err != nil {
			return bp, err
		}
		bp.Edge = append(bp.Edge, edgeValue(e, ok))
	}
	e, ok, err := model.Edge(0, 1, boundaryTol, func(dip float64) (*model.Model, error) { return cellModel(sc, p, js.OwnLoad, dip) })
	if err != nil {
		return bp, err
	}
	bp.LargestDip = edgeValue(e, ok)
	// The longest trigger, in seconds, at the scenario's own dip: the run
	// grows with it, so that as many ticks follow the trigger's end. A
	// short timeout makes a short step, and a run of maxFor more than the
	// model holds: the search then stops at the longest it holds.
	forCell := func(secs float64) (*model.Model, error) {
		c := sweepCell(sc, p, js.OwnLoad, js.OwnDip)
		d := time.Duration(secs * float64(time.Second))
		c.Duration += d - c.Triggers[0].For
		c.Triggers[0].For = max(d, time.Millisecond)
		return model.New(c, c.Fleets[0])
	}
	limit := maxFor.Seconds()
	for ; limit > 1; limit = math.Floor(limit / 2) {
		if _, err := forCell(limit); !errors.Is(err, model.ErrTooLarge) {
			break
		}
	}
	bp.ForSearched = limit
	e, ok, err = model.Edge(0, limit, 0.1, forCell)
	if err != nil {
		return bp, err
	}
	if ok {
		e = math.Round(e*10) / 10
	}
	bp.LargestFor = edgeValue(e, ok)
	h, stuck := own.Equilibria()
	bp.Healthy, bp.Stuck = &h, stuck
	return bp, nil
}

// edgeValue is an edge for the JSON: null when there is none. The value
// it survives is just below the edge.
func edgeValue(e float64, ok bool) *float64 {
	if !ok {
		return nil
	}
	e = math.Round(e*1000) / 1000
	return &e
}

func boundaryOutcome(js *boundaryJSON) *Outcome {
	sec := report.Section{
		ID:    "boundary",
		Title: boundaryTitle,
		Intro: []string{
			fmt.Sprintf("%s, answered by the fluid model (docs/model.md), not the simulator: %g intents/s against a queue whose capacity sets the base load (%.0f%% to %.1f%% of capacity, across), and a %s dip that takes away %.0f%% to %.0f%% of it (up). Map: '.' recovers within 5 ticks, 'o' slower, '#' never, '!' never healthy before the dip.",
				js.Scenario, js.Rate, 100*sweepLoadLo, 100*sweepLoadHi, time.Duration(js.ForSeconds*float64(time.Second)), 100*sweepDipLo, 100*sweepDipHi),
		},
		Tables: []report.Table{boundaryTable(js)},
		Claims: js.Claims,
	}
	var notes []string
	for _, u := range js.Unsupported {
		notes = append(notes, fmt.Sprintf("%s: unsupported by the model (%s); the simulator answers for it (sweep).", u.Policy, u.Reason))
	}
	if len(js.Policies) == 0 {
		notes = append(notes, "The model describes none of the fleets: there is no map to draw. `retrystorm sweep --config FILE` maps them with the simulator.")
	}
	for _, p := range js.Policies {
		if p.NeverHealthy > 0 {
			notes = append(notes, fmt.Sprintf("%s is never healthy in %d of %d cells ('!'): it fails more than half its calls before the dip, at that load alone, so those cells say nothing about the dip.",
				p.Policy, p.NeverHealthy, len(js.Load)*len(js.Dip)))
		}
	}
	for _, p := range js.Policies {
		sec.Tables = append(sec.Tables, boundaryMapTable(js, p))
		sec.Figures = append(sec.Figures, boundaryHeatmap(js, p))
	}
	sec.Notes = notes
	var findings []string
	for _, p := range js.Policies {
		if p.NeverHealthy == len(js.Load)*len(js.Dip) {
			findings = append(findings, fmt.Sprintf("Boundary (model): %s is never healthy, at any load of the map.", p.Policy))
			continue
		}
		findings = append(findings, fmt.Sprintf("Boundary (model): %s survives a dip of up to %s at %s load.", p.Policy, survived(p.LargestDip), report.Percent(js.OwnLoad, 0)))
	}
	return &Outcome{Name: "boundary", Claims: js.Claims, Section: sec, Findings: findings, JSON: js}
}

func survived(e *float64) string {
	if e == nil {
		return "every size"
	}
	return report.Percent(*e, 1)
}

func boundaryTable(js *boundaryJSON) report.Table {
	t := report.Table{
		Title: fmt.Sprintf("At the scenario's own load (%s) and dip (%s, %gs)", report.Percent(js.OwnLoad, 1), report.Percent(js.OwnDip, 0), js.ForSeconds),
		Columns: []report.Column{{Name: "policy"}, {Name: "largest dip", Align: report.Right}, {Name: "longest", Align: report.Right},
			{Name: "stuck state", Align: report.Right}, {Name: "recovered", Align: report.Right}},
	}
	for _, p := range js.Policies {
		longest := fmt.Sprintf("%gs+", p.ForSearched)
		if m := p.ForSearched / 60; m == math.Trunc(m) && m > 0 {
			longest = fmt.Sprintf("%gm+", m)
		}
		if p.LargestFor != nil {
			longest = fmt.Sprintf("%.1fs", *p.LargestFor)
		}
		stuck := "none"
		if p.Stuck != nil {
			stuck = fmt.Sprintf("%.0f/s sent, %.0f ok", p.Stuck.Offered, p.Stuck.Goodput)
		}
		largest, recovered := survived(p.LargestDip), report.Percent(float64(p.Recovered)/float64(len(js.Load)*len(js.Dip)), 0)
		if p.NeverHealthy == len(js.Load)*len(js.Dip) {
			largest, longest = "never healthy", ""
		}
		if p.NeverHealthy > 0 {
			recovered += fmt.Sprintf(" (%s never healthy)", report.Percent(float64(p.NeverHealthy)/float64(len(js.Load)*len(js.Dip)), 0))
		}
		t.Rows = append(t.Rows, []string{p.Policy, largest, longest, stuck, recovered})
	}
	for _, u := range js.Unsupported {
		t.Rows = append(t.Rows, []string{u.Policy, "unsupported", "", "", ""})
	}
	return t
}

// boundaryMapTable draws p's map in characters, the largest dip on top.
func boundaryMapTable(js *boundaryJSON, p boundaryPolicyRow) report.Table {
	t := report.Table{
		Title:   p.Policy,
		Columns: []report.Column{{Name: "dip", Align: report.Right}, {Name: fmt.Sprintf("load %s → %s", report.Percent(js.Load[0], 0), report.Percent(js.Load[len(js.Load)-1], 1))}},
	}
	for y := len(p.Recovery) - 1; y >= 0; y-- {
		var b strings.Builder
		for _, v := range p.Recovery[y] {
			switch {
			case v == model.NeverHealthy:
				b.WriteByte('!')
			case v < 0:
				b.WriteByte('#')
			case v < 5:
				b.WriteByte('.')
			default:
				b.WriteByte('o')
			}
		}
		t.Rows = append(t.Rows, []string{report.Percent(js.Dip[y], 0), b.String()})
	}
	return t
}

func boundaryHeatmap(js *boundaryJSON, p boundaryPolicyRow) report.SVG {
	top := 0
	cells := make([][]float64, len(p.Recovery))
	for y, row := range p.Recovery {
		cells[y] = make([]float64, len(row))
		for x, v := range row {
			top = max(top, v)
			cells[y][x] = float64(v)
			if v < 0 {
				cells[y][x] = math.NaN()
			}
		}
	}
	h := report.Heatmap{
		Title: p.Policy + " (model)", XLabel: "base load", YLabel: "dip", X: js.Load, Y: js.Dip, Cells: cells,
		Unit: "ticks", Max: float64(max(top, 1)), Never: "never recovered (or never healthy: the text map's '!')",
		XFmt: func(v float64) string { return report.Percent(v, 0) },
		YFmt: func(v float64) string { return report.Percent(v, 0) },
	}
	return report.SVG(h.SVG())
}
