package experiment

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/retrystorm/retrystorm/grid"

	"github.com/retrystorm/retrystorm/model"
	"github.com/retrystorm/retrystorm/report"
	"github.com/retrystorm/retrystorm/scenario"
	"github.com/retrystorm/retrystorm/sim"
)

const sweepTitle = "Sweep: the vulnerability map"

// Sweep maps where each policy recovers: base load × trigger size, for
// the naive control, a budget, a budget with a breaker, the server fix,
// an adaptive concurrency limit at the origin, and a budget with the
// adaptive throttle.
var Sweep = register(&Experiment{
	Name:    "sweep",
	Title:   sweepTitle,
	Summary: "a vulnerability map: base load × trigger size → recovered and recovery time, per policy",
	Order:   80,
	Grid:    true,
	Shard:   true,
	Page: Page{
		Knobs: []string{"grid", "dip_for", "max_retries", "jitter", "budget_ratio", "budget_floor", "breaker_threshold"},
		Heavy: true,
		Cost:  1800,
		Fixed: "The sweep sets the intent rate (as a share of capacity) and the depth of the dip on every cell of its map.",
	},
	Run: runSweep,
})

// DefaultGrid is the sweep's grid size on each axis.
const DefaultGrid = 40

// The grid's ranges: base load as a share of capacity, and the share of
// capacity the dip takes away.
const (
	sweepLoadLo, sweepLoadHi = 0.50, 0.975
	sweepDipLo, sweepDipHi   = 0.05, 1.0
)

// SweepPolicy is one policy's map: Recovery[y][x] is recovery ticks, or
// -1 for never.
type SweepPolicy struct {
	Policy   string  `json:"policy"`
	Recovery [][]int `json:"recovery_ticks"`
	// Recovered is how many cells recovered.
	Recovered int `json:"recovered"`
	// Source says what answered the policy's cells: "simulator" (every
	// cell; empty in results from before it was said), "model" (the
	// analytic model, every cell), or "model+simulator" (the model's map,
	// and the simulator in the cells Simulated marks: near the model's
	// boundary).
	Source    string   `json:"source,omitempty"`
	Simulated [][]bool `json:"simulated,omitempty"`
}

type sweepJSON struct {
	Scenario string         `json:"scenario"`
	Seed     uint64         `json:"seed"`
	Load     []float64      `json:"load"` // x: intent rate / capacity
	Dip      []float64      `json:"dip"`  // y: share of capacity the trigger removes
	Policies []SweepPolicy  `json:"policies"`
	Claims   []report.Claim `json:"claims"`
	// Shard is set in a shard's result only: which part it is, and what
	// the report needs that the map does not say. Its cells that other
	// shards run hold notRun.
	Shard *sweepShard `json:"shard,omitempty"`
}

// sweepShard describes a shard of a sweep.
type sweepShard struct {
	Part       string  `json:"part"` // "i/n"
	Rate       float64 `json:"rate"`
	ForSeconds float64 `json:"for_seconds"`
}

// notRun marks a cell another shard runs.
const notRun = -2

// sweepPolicy is a variant of the base scenario run on every cell.
type sweepPolicy struct {
	name  string
	fleet scenario.Fleet
	fix   bool           // the origin drops expired requests
	limit scenario.Limit // the origin's concurrency limit; zero: none
}

// sweepVariants returns the policies the sweep maps on sc: the naive
// control, the budget alone, the guarded fleet, the naive fleet against
// the server fix and against an adaptive limit, and the budget with the
// adaptive throttle. The boundary command maps the same ones.
func sweepVariants(sc *scenario.Scenario) ([]sweepPolicy, error) {
	if len(sc.Fleets) < 2 || len(sc.Triggers) != 1 || sc.Triggers[0].Kind != scenario.TriggerCapacity || sc.Origin.Model != scenario.ModelQueue {
		return nil, fmt.Errorf("sweep: the scenario needs a queue origin, one capacity trigger, and two fleets (the naive control, then a guarded one)")
	}
	naive, guarded := sc.Fleets[0], sc.Fleets[1]
	budgetOnly := guarded
	budgetOnly.Name = "budget"
	budgetOnly.Breaker = scenario.Breaker{Use: scenario.BreakerNone}
	limit, throttle, err := defences()
	if err != nil {
		return nil, err
	}
	throttled := budgetOnly
	throttled.Name = "budget + throttle"
	throttled.Throttle = throttle
	return []sweepPolicy{
		{name: naive.Name, fleet: naive},
		{name: "budget", fleet: budgetOnly},
		{name: guarded.Name, fleet: guarded},
		{name: naive.Name + ", drop_expired", fleet: naive, fix: true},
		{name: naive.Name + ", adaptive limit", fleet: naive, limit: limit},
		{name: throttled.Name, fleet: throttled},
	}, nil
}

// sweepCell is the scenario of one cell: base at the given load (intent
// rate / capacity) and dip (the share of capacity the trigger takes away),
// run with policy p alone.
func sweepCell(base *scenario.Scenario, p sweepPolicy, load, dip float64) *scenario.Scenario {
	sc := base.Clone()
	sc.Origin.SetCapacity(base.Traffic.Rate / load)
	sc.Triggers[0].Capacity = sc.Origin.Capacity * (1 - dip)
	sc.Origin.DropExpired = p.fix
	if p.limit.Use != "" {
		sc.Origin.Limit = p.limit
	}
	sc.Fleets = []scenario.Fleet{p.fleet}
	return sc
}

func runSweep(ctx context.Context, opts Options) (*Outcome, error) {
	sc, err := scenarioFor("sweep", opts)
	if err != nil {
		return nil, err
	}
	n := opts.Grid
	if n == 0 {
		n = DefaultGrid
	}
	if n < 2 || n > 200 {
		return nil, fmt.Errorf("sweep: grid %d out of [2, 200]", n)
	}
	pols, err := sweepVariants(sc)
	if err != nil {
		return nil, err
	}
	js := sweepJSON{Scenario: sc.Name, Seed: sc.Seed, Load: linspace(sweepLoadLo, sweepLoadHi, n), Dip: linspace(sweepDipLo, sweepDipHi, n)}
	for _, p := range pols {
		sp := SweepPolicy{Policy: p.name, Recovery: make([][]int, n)}
		for y := range sp.Recovery {
			sp.Recovery[y] = make([]int, n)
		}
		js.Policies = append(js.Policies, sp)
	}
	if opts.Shard.Count > 1 {
		for _, p := range js.Policies {
			for _, row := range p.Recovery {
				for x := range row {
					row[x] = notRun
				}
			}
		}
	}
	switch opts.Engine {
	case "", EngineSim:
		if err := sweepRuns(ctx, sc, pols, &js, opts); err != nil {
			return nil, err
		}
	case EngineModel, EngineBoth:
		if opts.Shard.Count > 1 {
			return nil, fmt.Errorf("sweep: --engine %s does not shard: the model's map takes a fraction of a second, and its shards would depend on each other", opts.Engine)
		}
		if err := sweepModel(ctx, sc, pols, &js, opts); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("sweep: engine %q: want sim, model or both", opts.Engine)
	}
	if opts.Shard.Count > 1 {
		js.Shard = &sweepShard{Part: opts.Shard.String(), Rate: sc.Traffic.Rate, ForSeconds: sc.Triggers[0].For.Seconds()}
		return &Outcome{Name: "sweep", JSON: js}, nil
	}
	return sweepOutcome(js, sc.Traffic.Rate, sc.Triggers[0].For), nil
}

// sweepOutcome finishes a sweep whose every cell is in: the counts, the
// claims, the report.
func sweepOutcome(js sweepJSON, rate float64, dipFor time.Duration) *Outcome {
	for i := range js.Policies {
		js.Policies[i].Recovered = 0
		for _, row := range js.Policies[i].Recovery {
			for _, v := range row {
				if v >= 0 {
					js.Policies[i].Recovered++
				}
			}
		}
	}
	js.Claims = sweepClaims(js)
	sec := report.Section{
		ID:    "sweep",
		Title: sweepTitle,
		Intro: []string{
			fmt.Sprintf("%s: %g intents/s against a queue whose capacity sets the base load (%.0f%% to %.1f%% of capacity, across), and a %s dip that takes away %.0f%% to %.0f%% of it (up). Each cell is a run; its colour is the recovery time, dark where it never recovered.",
				js.Scenario, rate, 100*sweepLoadLo, 100*sweepLoadHi, dipFor, 100*sweepDipLo, 100*sweepDipHi),
			"The boundary is where the system becomes metastable: on one side it heals once the cause clears, on the other it stays down. Near it, recovery time blows up.",
		},
		Tables:  []report.Table{sweepTable(js)},
		Claims:  js.Claims,
		Figures: sweepHeatmaps(js),
		Charts:  []report.Chart{sweepLine(js)},
		// Where the answers come from: the simulator, every cell. The
		// model answers the same question (boundary), and says so.
		Notes: []string{sweepSource(js)},
	}
	return &Outcome{Name: "sweep", Claims: js.Claims, Section: sec, Findings: sweepFindings(js), JSON: js}
}

// sweepSource says what answered the map's cells, per policy when the
// engines differ (sweep --engine).
func sweepSource(js sweepJSON) string {
	var model []string
	for _, p := range js.Policies {
		if p.Source == "" || p.Source == SourceSimulator {
			continue
		}
		what := "every cell"
		if p.Simulated != nil {
			n := 0
			for _, row := range p.Simulated {
				for _, s := range row {
					if s {
						n++
					}
				}
			}
			what = fmt.Sprintf("its map, the simulator the %d cells near the model's boundary", n)
		}
		model = append(model, fmt.Sprintf("%s (%s)", p.Policy, what))
	}
	if len(model) == 0 {
		return fmt.Sprintf("Source: the simulator, one run of seed %d per cell. retrystorm boundary maps the same grid with the analytic model instead, in about a second (docs/model.md).", js.Seed)
	}
	return fmt.Sprintf("Source: the analytic model (docs/model.md, --engine) for %s; the simulator, one run of seed %d per cell, everywhere else.", strings.Join(model, "; "), js.Seed)
}

// mergeSweep puts the shards of one sweep together into what one run
// gives.
func mergeSweep(parts []sweepJSON) (*Outcome, error) {
	m := parts[0]
	if m.Shard == nil {
		return nil, errors.New("merge: a sweep result that is not a shard's")
	}
	info := *m.Shard
	m.Shard, m.Claims = nil, nil
	m.Policies = slices.Clone(m.Policies)
	for i := range m.Policies {
		m.Policies[i].Recovery = make([][]int, len(m.Dip))
		for y := range m.Policies[i].Recovery {
			m.Policies[i].Recovery[y] = slices.Repeat([]int{notRun}, len(m.Load))
		}
	}
	for _, p := range parts {
		if p.Shard == nil || p.Scenario != m.Scenario || p.Seed != m.Seed || !slices.Equal(p.Load, m.Load) || !slices.Equal(p.Dip, m.Dip) ||
			len(p.Policies) != len(m.Policies) || p.Shard.Rate != info.Rate || p.Shard.ForSeconds != info.ForSeconds {
			return nil, errors.New("merge: the sweep shards are of different sweeps")
		}
		for i, pol := range p.Policies {
			if pol.Policy != m.Policies[i].Policy || len(pol.Recovery) != len(m.Dip) {
				return nil, errors.New("merge: the sweep shards are of different sweeps")
			}
			for y, row := range pol.Recovery {
				for x, v := range row {
					if v == notRun {
						continue
					}
					if m.Policies[i].Recovery[y][x] != notRun {
						return nil, fmt.Errorf("merge: a cell of %q was run by two shards", pol.Policy)
					}
					m.Policies[i].Recovery[y][x] = v
				}
			}
		}
	}
	for _, p := range m.Policies {
		for _, row := range p.Recovery {
			if slices.Contains(row, notRun) {
				return nil, fmt.Errorf("merge: %q has cells no shard ran: give every shard's result", p.Policy)
			}
		}
	}
	return sweepOutcome(m, info.Rate, time.Duration(info.ForSeconds*float64(time.Second))), nil
}

func linspace(lo, hi float64, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = math.Round((lo+(hi-lo)*float64(i)/float64(n-1))*10000) / 10000
	}
	return out
}

// sweepRuns runs every cell of every policy on all cores.
func sweepRuns(ctx context.Context, base *scenario.Scenario, pols []sweepPolicy, js *sweepJSON, opts Options) error {
	n := len(js.Load)
	// Source stays empty, the simulator: the sweep's JSON is as it was.
	return sweepJobs(ctx, base, pols, js, opts, len(pols)*n*n, func(i int) int { return i })
}

// sweepJobs runs cells jobs of the sweep's grid (job(i) is the i-th:
// policy, row and column in one number) on all cores.
func sweepJobs(ctx context.Context, base *scenario.Scenario, pols []sweepPolicy, js *sweepJSON, opts Options, cells int, at func(i int) int) error {
	n := len(js.Load)
	g := grid.Grid{
		Cells: cells,
		Shard: opts.Shard,
		Cell: func(i int) (*scenario.Scenario, error) {
			job := at(i)
			p, y, x := job/(n*n), job/n%n, job%n
			return sweepCell(base, pols[p], js.Load[x], js.Dip[y]), nil
		},
	}
	return grid.Run(ctx, g, opts.GridOptions(), func(i int, f *sim.FleetResult) {
		s := f.Summary
		job := at(i)
		p, y, x := job/(n*n), job/n%n, job%n
		r := -1
		if s.Recovered {
			r = *s.RecoveryTicks
		}
		js.Policies[p].Recovery[y][x] = r
	})
}

func sweepTable(js sweepJSON) report.Table {
	t := report.Table{
		Title: fmt.Sprintf("Cells that recovered, of %d", len(js.Load)*len(js.Dip)),
		Columns: []report.Column{{Name: "policy"}, {Name: "recovered", Align: report.Right}, {Name: "share", Align: report.Right},
			{Name: "slowest", Align: report.Right}, {Name: "edge at " + report.Percent(js.Dip[sweepRow(js)], 0) + " dip", Align: report.Right}},
	}
	for _, p := range js.Policies {
		slowest := 0
		for _, row := range p.Recovery {
			for _, v := range row {
				slowest = max(slowest, v)
			}
		}
		// The edge: the highest base load up to which every cell of the
		// line chart's row recovered.
		edgeText := "none"
		for x, v := range p.Recovery[sweepRow(js)] {
			if v < 0 {
				break
			}
			edgeText = report.Percent(js.Load[x], 1)
			if x == len(js.Load)-1 {
				edgeText = "beyond " + edgeText
			}
		}
		t.Rows = append(t.Rows, []string{p.Policy, report.Int(int64(p.Recovered)),
			report.Percent(float64(p.Recovered)/float64(len(js.Load)*len(js.Dip)), 0), fmt.Sprintf("+%d ticks", slowest), edgeText})
	}
	return t
}

func sweepHeatmaps(js sweepJSON) []report.SVG {
	top := 0
	for _, p := range js.Policies {
		for _, row := range p.Recovery {
			for _, v := range row {
				top = max(top, v)
			}
		}
	}
	var out []report.SVG
	for _, p := range js.Policies {
		cells := make([][]float64, len(p.Recovery))
		for y, row := range p.Recovery {
			cells[y] = make([]float64, len(row))
			for x, v := range row {
				cells[y][x] = float64(v)
				if v < 0 {
					cells[y][x] = math.NaN()
				}
			}
		}
		h := report.Heatmap{
			Title: p.Policy, XLabel: "base load", YLabel: "dip", X: js.Load, Y: js.Dip, Cells: cells,
			Unit: "ticks", Max: float64(top), Never: "never recovered",
			XFmt: func(v float64) string { return report.Percent(v, 0) },
			YFmt: func(v float64) string { return report.Percent(v, 0) },
		}
		out = append(out, report.SVG(h.SVG()))
	}
	return out
}

// sweepRow is the dip the line chart follows: the middle of the grid.
func sweepRow(js sweepJSON) int { return len(js.Dip) / 2 }

func sweepLine(js sweepJSON) report.Chart {
	y := sweepRow(js)
	c := report.Chart{
		Title:  fmt.Sprintf("Recovery time against base load, dip of %s", report.Percent(js.Dip[y], 0)),
		XLabel: "base load (share of capacity)", YLabel: "recovery (ticks; gap = never)", X: js.Load,
	}
	for _, p := range js.Policies {
		v := make([]float64, len(js.Load))
		for x, r := range p.Recovery[y] {
			v[x] = float64(r)
			if r < 0 {
				v[x] = math.NaN()
			}
		}
		c.Lines = append(c.Lines, report.Line{Name: p.Policy, Y: v})
	}
	return c
}

func sweepClaims(js sweepJSON) []report.Claim {
	byName := map[int]SweepPolicy{}
	for i, p := range js.Policies {
		byName[i] = p
	}
	naive, budget, guarded, fix := byName[0], byName[1], byName[2], byName[3]
	var cs []report.Claim
	for _, p := range []SweepPolicy{budget, guarded, fix, byName[4], byName[5]} {
		cs = append(cs, report.Check(fmt.Sprintf("%s recovers in more of the map than %s", p.Policy, naive.Policy),
			p.Recovered > naive.Recovered, map[string]any{"recovered": p.Recovered, "naive_recovered": naive.Recovered},
			"%d cells against %d", p.Recovered, naive.Recovered))
	}
	// Near the boundary recovery time blows up for a policy whose backlog
	// drains at the spare capacity; the naive fleet's edge is a cliff.
	rows, blown := blowUps(budget)
	cs = append(cs, report.Check(fmt.Sprintf("%s's recovery time blows up near its boundary: 10+ ticks slower there than far from it, in most rows that cross it", budget.Policy),
		rows > 0 && 2*blown > rows, map[string]any{"rows_with_boundary": rows, "rows_blown_up": blown},
		"%d of %d rows", blown, rows))
	slowest := 0
	for _, row := range naive.Recovery {
		for _, v := range row {
			slowest = max(slowest, v)
		}
	}
	cs = append(cs, report.Check(fmt.Sprintf("%s's boundary is a cliff: it recovers within 10 ticks or never", naive.Policy),
		slowest <= 10, map[string]any{"slowest_recovery_ticks": slowest}, "slowest recovery +%d ticks", slowest))
	return cs
}

// blowUps counts the rows of p's map that cross a boundary (recovered,
// then never, as load grows) and those where the recovery just before the
// boundary is 10+ ticks slower than the row's fastest.
func blowUps(p SweepPolicy) (rows, blown int) {
	for _, row := range p.Recovery {
		edge := -1
		for x, v := range row {
			if v < 0 {
				break
			}
			edge = x
		}
		if edge < 0 || edge == len(row)-1 {
			continue
		}
		rows++
		fastest, near := math.MaxInt, 0
		for x := 0; x <= edge; x++ {
			fastest = min(fastest, row[x])
		}
		for x := max(0, edge-2); x <= edge; x++ {
			near = max(near, row[x])
		}
		if near >= fastest+10 {
			blown++
		}
	}
	return rows, blown
}

func sweepFindings(js sweepJSON) []string {
	var out []string
	cells := len(js.Load) * len(js.Dip)
	for _, p := range js.Policies {
		out = append(out, fmt.Sprintf("Sweep: %s recovered in %d of %d cells (%s) of base load %s–%s × dip %s–%s.",
			p.Policy, p.Recovered, cells, report.Percent(float64(p.Recovered)/float64(cells), 0),
			report.Percent(js.Load[0], 0), report.Percent(js.Load[len(js.Load)-1], 1), report.Percent(js.Dip[0], 0), report.Percent(js.Dip[len(js.Dip)-1], 0)))
	}
	return out
}

// defences returns the adaptive limit and the adaptive throttle the shed
// experiment's scenario sets (its origin's limit and its third fleet's
// throttle), so that the sweep maps the same defences.
func defences() (scenario.Limit, scenario.Throttle, error) {
	sc, err := scenarioFor("shed", Options{})
	if err != nil {
		return scenario.Limit{}, scenario.Throttle{}, err
	}
	if _, err := shedFleets(sc); err != nil {
		return scenario.Limit{}, scenario.Throttle{}, err
	}
	return sc.Origin.Limit, sc.Fleets[2].Throttle, nil
}

// sweepBand is how far, in cells, from the model's boundary sweep
// --engine both runs the simulator: where the model's verdict changes
// between neighbours, and this many cells around it. The model agrees
// with the simulator in 98–100% of the sweep's cells, and its
// disagreements sit on that edge (docs/model.md).
const sweepBand = 1

// sweepModel answers the sweep with the analytic model for every policy
// it describes and with the simulator for the others; with EngineBoth,
// the simulator also runs the cells within sweepBand of the model's
// boundary, and its answers replace the model's there.
func sweepModel(ctx context.Context, base *scenario.Scenario, pols []sweepPolicy, js *sweepJSON, opts Options) error {
	n := len(js.Load)
	var jobs []int
	for pi, p := range pols {
		sp := &js.Policies[pi]
		rec, err := model.Map(n, n, func(x, y int) (*model.Model, error) { return cellModel(base, p, js.Load[x], js.Dip[y]) })
		if errors.Is(err, model.ErrUnsupported) {
			sp.Source = SourceSimulator
			for c := range n * n {
				jobs = append(jobs, pi*n*n+c)
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("sweep: %s: %w", p.name, err)
		}
		sp.Recovery, sp.Source = rec, SourceModel
		if opts.Engine != EngineBoth {
			continue
		}
		sp.Source, sp.Simulated = SourceModel+"+"+SourceSimulator, nearEdge(rec, sweepBand)
		for y, row := range sp.Simulated {
			for x, near := range row {
				if near {
					jobs = append(jobs, pi*n*n+y*n+x)
				}
			}
		}
	}
	return sweepJobs(ctx, base, pols, js, opts, len(jobs), func(i int) int { return jobs[i] })
}

// nearEdge marks the cells of a map (recovery ticks, -1 never) within
// band cells of one whose neighbour has the other verdict.
func nearEdge(rec [][]int, band int) [][]bool {
	ny := len(rec)
	out := make([][]bool, ny)
	for y := range out {
		out[y] = make([]bool, len(rec[y]))
	}
	for y, row := range rec {
		for x, r := range row {
			edge := x+1 < len(row) && (row[x+1] < 0) != (r < 0) || y+1 < ny && (rec[y+1][x] < 0) != (r < 0)
			if !edge {
				continue
			}
			for yy := max(0, y-band); yy <= min(ny-1, y+1+band); yy++ {
				for xx := max(0, x-band); xx <= min(len(row)-1, x+1+band); xx++ {
					out[yy][xx] = true
				}
			}
		}
	}
	return out
}
