package experiment

import (
	"context"
	"errors"
	"fmt"
	"html/template"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/retrystorm/retrystorm/report"
	"github.com/retrystorm/retrystorm/scenario"
	"github.com/retrystorm/retrystorm/sim"
)

// CheckInput is one fleet to check, and where it came from.
type CheckInput struct {
	Fleet scenario.Fleet
	// Origin names its source ("envoy.yaml: route api"), for the report.
	Origin string
}

// CheckOptions say what to check the fleets against.
type CheckOptions struct {
	// Base gives the traffic, the origin (capacity or queue model) and the
	// run's timing; its fleets and triggers are replaced.
	Base *scenario.Scenario
	// Load is the highest base load (intent rate / capacity) the user
	// calls realistic; zero: the base scenario's.
	Load float64
	// Dip is the largest share of capacity a realistic dip takes away;
	// zero: the base scenario's first capacity trigger's, or a third.
	Dip float64
	// Shard, when set, runs only the shard's cells.
	Shard Shard
}

// A fault of the standard envelope.
type checkFault struct {
	Name string  `json:"name"`
	Kind string  `json:"kind"`           // a trigger kind
	Dip  float64 `json:"dip,omitempty"`  // capacity dips: the share removed
	For  float64 `json:"for_seconds"`    // how long, seconds
	Rate float64 `json:"rate,omitempty"` // error blips: the error rate
}

// CheckCell is one fleet's run in one cell of the envelope.
type CheckCell struct {
	Ran           bool  `json:"ran"`
	Recovered     bool  `json:"recovered"`
	RecoveryTicks int   `json:"recovery_ticks"` // -1 when not recovered
	Intents       int64 `json:"intents"`
	Attempts      int64 `json:"attempts"`
	Retries       int64 `json:"retries"` // retries and hedges: the extra load
	IntentsLost   int64 `json:"intents_lost"`
	PeakOffered   int64 `json:"peak_offered"`
}

// CheckFleet is one fleet's results: Cells[fault][load].
type CheckFleet struct {
	Name   string        `json:"name"`
	Origin string        `json:"origin"`
	Risks  []string      `json:"risks"` // its settings that can keep a storm going
	Cells  [][]CheckCell `json:"cells"`
}

// CheckResult is a check's outcome: the envelope and every fleet's map. A
// shard's result holds only its cells (Ran); MergeCheck puts shards
// together into what one run gives.
type CheckResult struct {
	Scenario string         `json:"scenario"`
	Seed     uint64         `json:"seed"`
	Rate     float64        `json:"rate"`         // intents per second
	Tick     float64        `json:"tick_seconds"` // for peak rates
	Loads    []float64      `json:"loads"`
	Faults   []checkFault   `json:"faults"`
	RealLoad float64        `json:"realistic_load"`
	RealDip  float64        `json:"realistic_dip"`
	Shard    string         `json:"shard"`
	Fleets   []CheckFleet   `json:"fleets"`
	Claims   []report.Claim `json:"claims"`
}

// checkEnvelope is the standard set of faults and loads around the
// realistic point.
func checkEnvelope(realLoad, realDip float64) ([]float64, []checkFault) {
	loads := []float64{0.5, 0.7, 0.9}
	if !slices.Contains(loads, realLoad) {
		loads = append(loads, realLoad)
	}
	slices.Sort(loads)
	dips := []float64{realDip}
	for _, d := range []float64{0.5, 0.75} {
		if math.Abs(d-realDip) > 0.01 {
			dips = append(dips, d)
		}
	}
	slices.Sort(dips)
	var fs []checkFault
	for _, d := range dips {
		fs = append(fs, checkFault{Name: fmt.Sprintf("capacity dip of %s", report.Percent(d, 0)), Kind: scenario.TriggerCapacity, Dip: d, For: 10})
	}
	return loads, append(fs,
		checkFault{Name: "error blip (50% errors)", Kind: scenario.TriggerErrors, Rate: 0.5, For: 10},
		checkFault{Name: "stall (nothing served)", Kind: scenario.TriggerCapacity, Dip: 1, For: 5},
		checkFault{Name: "total outage", Kind: scenario.TriggerOutage, For: 10},
	)
}

// Check runs each fleet through the standard faults (capacity dips, an
// error blip, a stall, a total outage) at several base loads, on the base
// scenario's origin: a small vulnerability map per fleet.
func Check(ctx context.Context, in []CheckInput, co CheckOptions, opts Options) (*CheckResult, error) {
	base := co.Base
	if base == nil {
		return nil, errors.New("check: a base scenario is required")
	}
	if len(in) == 0 {
		return nil, errors.New("check: no fleet to check")
	}
	if base.Origin.Model == scenario.ModelConcurrency || base.Origin.Capacity <= 0 {
		return nil, fmt.Errorf("check: the base scenario's origin must have a capacity (the capacity or queue model)")
	}
	realLoad, realDip, err := realistic(base, co.Load, co.Dip)
	if err != nil {
		return nil, fmt.Errorf("check: %w", err)
	}
	loads, faults := checkEnvelope(realLoad, realDip)
	at := 30 * time.Second
	if len(base.Triggers) > 0 {
		at = base.Triggers[0].At
	}
	r := &CheckResult{Scenario: base.Name, Seed: base.Seed, Rate: base.Traffic.Rate, Tick: base.Tick.Seconds(),
		Loads: loads, Faults: faults, RealLoad: realLoad, RealDip: realDip, Shard: co.Shard.String()}
	for _, f := range in {
		cf := CheckFleet{Name: f.Fleet.Name, Origin: f.Origin, Risks: risks(f.Fleet, base), Cells: newCells(len(faults), len(loads))}
		r.Fleets = append(r.Fleets, cf)
	}
	nL, nF := len(loads), len(faults)
	g := Grid{
		Cells: len(in) * nF * nL,
		Shard: co.Shard,
		Cell: func(job int) (*scenario.Scenario, error) {
			fl, fi, li := job/(nF*nL), job/nL%nF, job%nL
			sc := envelopeCell(base, loads[li], faults[fi], at)
			sc.Fleets = []scenario.Fleet{in[fl].Fleet}
			if err := sc.Validate(); err != nil {
				return nil, fmt.Errorf("check: fleet %q: %w", in[fl].Fleet.Name, err)
			}
			return sc, nil
		},
	}
	err = RunGrid(ctx, g, opts, func(job int, s sim.Summary) {
		fl, fi, li := job/(nF*nL), job/nL%nF, job%nL
		r.Fleets[fl].Cells[fi][li] = cellOf(s)
	})
	if err != nil {
		return nil, err
	}
	if co.Shard.Count > 1 {
		return r, nil // the claims need every cell: Merge makes them
	}
	r.Claims = r.claims()
	return r, nil
}

// risks lists the fleet's settings that can keep a storm going, in plain
// words, for the report to blame when the fleet stays collapsed.
func risks(f scenario.Fleet, base *scenario.Scenario) []string {
	var out []string
	clients := max(base.Traffic.Clients, 1)
	n := f.Retry.MaxRetries
	switch {
	case n == 0:
	case f.Budget.Use == scenario.BudgetNone && n < 0:
		out = append(out, "unlimited retries with no budget: nothing bounds the retries but the deadline")
	case f.Budget.Use == scenario.BudgetNone:
		out = append(out, fmt.Sprintf("max_retries %d with no budget: when everything fails, each intent sends up to %d attempts, %d× the load", n, n+1, n+1))
	case f.Budget.Use == scenario.BudgetConcurrency && f.Budget.Percent == 0:
		out = append(out, fmt.Sprintf("at most %d retries active at once per client (%d over the fleet's %d clients), whatever the traffic: a cap on concurrency, not a share of requests", f.Budget.MinConcurrency, f.Budget.MinConcurrency*clients, clients))
	case f.Budget.Use == scenario.BudgetConcurrency:
		out = append(out, fmt.Sprintf("a concurrency budget of %g%% with min_retry_concurrency %d per client (%d over %d clients): a slow dependency holds more requests in flight, which raises the allowance when it should fall", f.Budget.Percent, f.Budget.MinConcurrency, f.Budget.MinConcurrency*clients, clients))
	case f.Budget.Use == scenario.BudgetTokenBucket || f.Budget.Use == scenario.BudgetWindow:
		out = append(out, fmt.Sprintf("a budget of ratio %g: retries may add up to %s to the load", f.Budget.Ratio, report.Percent(f.Budget.Ratio, 0)))
	case f.Budget.Use == scenario.BudgetAWS || f.Budget.Use == scenario.BudgetAWSAdaptive:
		out = append(out, fmt.Sprintf("the AWS retry quota: %d tokens per client that refill only on success, spent %g per retry", f.Budget.Capacity, f.Budget.RetryCost))
	}
	if n != 0 && f.Retry.Backoff.Jitter == "none" && f.Retry.Backoff.Use != "none" {
		out = append(out, "backoff without jitter: clients that failed together retry together")
	}
	if n != 0 && (f.Retry.Backoff.Use == "none" || f.Retry.Backoff.Base == 0) && f.Retry.Backoff.Jitter != "decorrelated" {
		out = append(out, "no backoff: a failed attempt is retried at once")
	}
	if base.Origin.Model == scenario.ModelQueue && f.Retry.Retries(scenario.RetryOnTimeout) && n != 0 {
		out = append(out, fmt.Sprintf("timeout %v against a queue: once the backlog is longer than the origin serves in %v, every answer is late, and each retry of a timeout adds to the backlog", f.Timeout, f.Timeout))
	}
	if f.Breaker.Use == scenario.BreakerNone || f.Breaker.Use == "" {
		out = append(out, "no circuit breaker")
	}
	return out
}

// realistic reports whether cell (fault fi, load li) is in the region the
// user calls realistic: a capacity dip no larger than RealDip at a load no
// higher than RealLoad.
func (r *CheckResult) realistic(fi, li int) bool {
	f := r.Faults[fi]
	return r.Loads[li] <= r.RealLoad+1e-9 && f.Kind == scenario.TriggerCapacity && f.Dip <= r.RealDip+1e-9 && f.For >= 10
}

// Collapsed reports whether fleet i stays collapsed in a realistic cell.
func (r *CheckResult) Collapsed(i int) bool {
	for fi, row := range r.Fleets[i].Cells {
		for li, c := range row {
			if c.Ran && !c.Recovered && r.realistic(fi, li) {
				return true
			}
		}
	}
	return false
}

func (r *CheckResult) claims() []report.Claim {
	var cs []report.Claim
	for i, f := range r.Fleets {
		never := 0
		for fi, row := range f.Cells {
			for li, c := range row {
				if c.Ran && !c.Recovered && r.realistic(fi, li) {
					never++
				}
			}
		}
		cs = append(cs, report.Check(fmt.Sprintf("%s recovers in every realistic cell (load up to %s, capacity dips up to %s)", f.Name, report.Percent(r.RealLoad, 0), report.Percent(r.RealDip, 0)),
			!r.Collapsed(i), map[string]any{"collapsed_realistic_cells": never}, "%d realistic cells stay collapsed", never))
	}
	return cs
}

// newCells makes an empty map of faults × loads.
func newCells(faults, loads int) [][]CheckCell {
	c := make([][]CheckCell, faults)
	for i := range c {
		c[i] = make([]CheckCell, loads)
	}
	return c
}

var errTwice = errors.New("was run by two shards")

// mergeCells copies the cells src ran into dst.
func mergeCells(dst, src [][]CheckCell) error {
	if len(src) != len(dst) {
		return errors.New("has another envelope")
	}
	for f, row := range src {
		if len(row) != len(dst[f]) {
			return errors.New("has another envelope")
		}
		for l, c := range row {
			if !c.Ran {
				continue
			}
			if dst[f][l].Ran {
				return errTwice
			}
			dst[f][l] = c
		}
	}
	return nil
}

// complete reports whether every cell ran.
func complete(cells [][]CheckCell) bool {
	for _, row := range cells {
		for _, c := range row {
			if !c.Ran {
				return false
			}
		}
	}
	return true
}

// MergeCheck puts the results of the shards of one check together. Every
// shard must have checked the same fleets on the same envelope, and every
// cell must have been run by exactly one of them.
func MergeCheck(parts []*CheckResult) (*CheckResult, error) {
	if len(parts) == 0 {
		return nil, errors.New("merge: no results")
	}
	m := *parts[0]
	m.Shard = Shard{}.String()
	m.Fleets = slices.Clone(parts[0].Fleets)
	for i := range m.Fleets {
		m.Fleets[i].Cells = newCells(len(m.Faults), len(m.Loads))
	}
	for _, p := range parts {
		if p.Scenario != m.Scenario || p.Seed != m.Seed || !slices.Equal(p.Loads, m.Loads) || !slices.Equal(p.Faults, m.Faults) ||
			p.RealLoad != m.RealLoad || p.RealDip != m.RealDip || len(p.Fleets) != len(m.Fleets) {
			return nil, fmt.Errorf("merge: shard %s checked another scenario, envelope or set of fleets", p.Shard)
		}
		for i, f := range p.Fleets {
			if f.Name != m.Fleets[i].Name || !slices.Equal(f.Risks, m.Fleets[i].Risks) {
				return nil, fmt.Errorf("merge: shard %s's fleet %d is %q, not %q", p.Shard, i, f.Name, m.Fleets[i].Name)
			}
			if err := mergeCells(m.Fleets[i].Cells, f.Cells); err != nil {
				return nil, fmt.Errorf("merge: a cell of fleet %q %v", f.Name, err)
			}
		}
	}
	for _, f := range m.Fleets {
		if !complete(f.Cells) {
			return nil, fmt.Errorf("merge: fleet %q has cells no shard ran: give every shard's result", f.Name)
		}
	}
	m.Claims = m.claims()
	return &m, nil
}

// cellText is a cell as the map shows it.
func cellText(c CheckCell) string {
	switch {
	case !c.Ran:
		return "-"
	case c.Recovered:
		return fmt.Sprintf("ok +%d", c.RecoveryTicks)
	}
	return "NEVER"
}

// Tables returns one map per fleet: faults down, loads across.
func (r *CheckResult) Tables() []report.Table {
	var out []report.Table
	for _, f := range r.Fleets {
		t := report.Table{Title: f.Name + ": recovery after each fault (ticks), by base load", Columns: []report.Column{{Name: "fault"}}, Emphasis: map[[2]int]bool{}}
		for _, l := range r.Loads {
			name := "load " + report.Percent(l, 0)
			if math.Abs(l-r.RealLoad) < 1e-9 {
				name += "*"
			}
			t.Columns = append(t.Columns, report.Column{Name: name, Align: report.Right})
		}
		for fi, row := range f.Cells {
			cells := []string{r.Faults[fi].Name}
			for li, c := range row {
				cells = append(cells, cellText(c))
				if c.Ran && !c.Recovered {
					t.Emphasis[[2]int{fi, li + 1}] = true
				}
			}
			t.Rows = append(t.Rows, cells)
		}
		out = append(out, t)
	}
	return out
}

// Verdicts says, per fleet, in plain words: the worst amplification,
// where it stays collapsed, the intents lost, and what to blame.
func (r *CheckResult) Verdicts() [][]string {
	var out [][]string
	for i, f := range r.Fleets {
		var lines []string
		head := f.Name
		if f.Origin != "" {
			head += " (" + f.Origin + ")"
		}
		lines = append(lines, head)
		worst, wf, wl := 0.0, 0, 0
		peak := 0.0
		lost, lf, ll := int64(-1), 0, 0
		var never []string
		nNever := 0
		for fi, row := range f.Cells {
			var at []string
			real := false
			for li, c := range row {
				if !c.Ran {
					continue
				}
				if c.Intents > 0 {
					if a := float64(c.Attempts) / float64(c.Intents); a > worst {
						worst, wf, wl = a, fi, li
					}
					if c.IntentsLost > lost {
						lost, lf, ll = c.IntentsLost, fi, li
					}
				}
				if p := float64(c.PeakOffered) / (r.Rate * r.Tick); p > peak {
					peak = p
				}
				if !c.Recovered {
					nNever++
					at = append(at, report.Percent(r.Loads[li], 0))
					real = real || r.realistic(fi, li)
				}
			}
			if len(at) > 0 {
				w := fmt.Sprintf("%s at %s load", r.Faults[fi].Name, strings.Join(at, ", "))
				if real {
					w += " (realistic)"
				}
				never = append(never, w)
			}
		}
		lines = append(lines, fmt.Sprintf("worst amplification: %.2f attempts per intent over the run (%s at %s load); peak offered load %.1f× the intent rate",
			worst, r.Faults[wf].Name, report.Percent(r.Loads[wl], 0), peak))
		cells := len(r.Faults) * len(r.Loads)
		if len(never) == 0 {
			lines = append(lines, fmt.Sprintf("recovers in all %d cells", cells))
		} else {
			lines = append(lines, fmt.Sprintf("stays collapsed in %d of %d cells: %s", nNever, cells, strings.Join(never, "; ")))
		}
		if lost >= 0 {
			c := f.Cells[lf][ll]
			lines = append(lines, fmt.Sprintf("intents lost: at most %s of %s (%s), %s at %s load",
				report.Int(lost), report.Int(c.Intents), report.Percent(float64(lost)/float64(max(c.Intents, 1)), 1), r.Faults[lf].Name, report.Percent(r.Loads[ll], 0)))
		}
		if r.Collapsed(i) {
			lines = append(lines, "verdict: UNSAFE: it stays collapsed in the region you call realistic (load up to "+report.Percent(r.RealLoad, 0)+", capacity dips up to "+report.Percent(r.RealDip, 0)+")")
			for _, k := range f.Risks {
				lines = append(lines, "to blame: "+k)
			}
		} else {
			lines = append(lines, "verdict: safe in the region you call realistic (load up to "+report.Percent(r.RealLoad, 0)+", capacity dips up to "+report.Percent(r.RealDip, 0)+")")
			if len(never) > 0 {
				for _, k := range f.Risks {
					lines = append(lines, "beyond it, to blame: "+k)
				}
			}
		}
		out = append(out, lines)
	}
	return out
}

// Render writes the check as text: each fleet's verdict, then its map.
func (r *CheckResult) Render(w io.Writer, st report.Style) error {
	fmt.Fprintf(w, "Checked on %q: %g intents/s, at base loads %s of capacity; * marks the realistic load.\n\n", r.Scenario, r.Rate, loadList(r.Loads))
	tables := r.Tables()
	for i, v := range r.Verdicts() {
		for j, l := range v {
			if j == 0 {
				fmt.Fprintln(w, l)
				continue
			}
			fmt.Fprintln(w, "  "+l)
		}
		fmt.Fprintln(w)
		if err := tables[i].Render(w, st); err != nil {
			return err
		}
		fmt.Fprintln(w)
	}
	return nil
}

func loadList(ls []float64) string {
	var s []string
	for _, l := range ls {
		s = append(s, report.Percent(l, 0))
	}
	return strings.Join(s, ", ")
}

// Section is the check as a report section, with a heatmap per fleet.
func (r *CheckResult) Section() report.Section {
	sec := report.Section{ID: "check", Title: "Check: is this config safe?", Tables: r.Tables(), Claims: r.Claims}
	for _, v := range r.Verdicts() {
		sec.Intro = append(sec.Intro, strings.Join(v, ". ")+".")
	}
	for _, f := range r.Fleets {
		sec.Figures = append(sec.Figures, checkHeatmap(r, f))
	}
	return sec
}

func checkHeatmap(r *CheckResult, f CheckFleet) template.HTML {
	cells := make([][]float64, len(f.Cells))
	ys := make([]float64, len(f.Cells))
	top := 0.0
	for fi, row := range f.Cells {
		ys[fi] = float64(fi)
		cells[fi] = make([]float64, len(row))
		for li, c := range row {
			cells[fi][li] = float64(c.RecoveryTicks)
			if !c.Recovered {
				cells[fi][li] = math.NaN()
			}
			top = math.Max(top, float64(c.RecoveryTicks))
		}
	}
	h := report.Heatmap{Title: f.Name, XLabel: "base load", YLabel: "fault", X: r.Loads, Y: ys, Cells: cells,
		Unit: "ticks", Max: math.Max(top, 1), Never: "never recovered",
		XFmt: func(v float64) string { return report.Percent(v, 0) },
		YFmt: func(v float64) string {
			if i := int(v); i >= 0 && i < len(r.Faults) {
				return r.Faults[i].Name
			}
			return ""
		}}
	return template.HTML(h.SVG())
}
