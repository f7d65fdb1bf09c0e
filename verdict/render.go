package verdict

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/retrystorm/retrystorm/report"
)

// modelCells counts f's cells the model answered (check --model).
func (f CheckFleet) modelCells() int {
	n := 0
	for _, row := range f.Cells {
		for _, c := range row {
			if c.Ran && c.Source == sourceModel {
				n++
			}
		}
	}
	return n
}

// cellText is a cell as the map shows it: "n/a" where the fleet is not
// judged, the worst seed's recovery, how many of the seeds never
// recovered (with † where retries off never recover either), and the
// worst value past an amplification threshold, "×!".
func (r *CheckResult) cellText(f CheckFleet, fi, li int, finds map[[2]int][]Finding) string {
	c := f.Cells[fi][li]
	var s string
	switch {
	case fi < len(f.Judged) && !f.Judged[fi]:
		return "n/a"
	case !c.Ran:
		return "-"
	case c.Recovered:
		s = fmt.Sprintf("ok +%d", c.RecoveryTicks)
	case f.Collapsing != nil && c.Source != sourceModel: // a model cell is one run, not one a seed
		s = fmt.Sprintf("NEVER %d/%d", f.Collapsing[fi][li], len(f.Runs[0]))
	default:
		s = "NEVER"
	}
	worst := 0.0
	for _, x := range finds[[2]int{fi, li}] {
		switch x.What {
		case findSystem:
			s += "†"
		case findWork, findLoad, findInstant, findHerd:
			worst = max(worst, x.Value)
		}
	}
	if worst > 0 {
		s += fmt.Sprintf(" %.1f×!", worst)
	}
	if c.Source == sourceModel {
		s += " (m)"
	}
	return s
}

// findingsByCell files fleet i's findings by (fault, load).
func (r *CheckResult) findingsByCell(i int) map[[2]int][]Finding {
	out := map[[2]int][]Finding{}
	for _, f := range r.judge(i, 0).Findings {
		k := [2]int{f.Fault, f.Load}
		out[k] = append(out[k], f)
	}
	return out
}

// Tables returns one map per fleet: faults down, loads across.
func (r *CheckResult) Tables() []report.Table {
	var out []report.Table
	for i, f := range r.Fleets {
		finds := r.findingsByCell(i)
		t := report.Table{Title: fmt.Sprintf("%s: recovery after each fault (ticks, the worst of %d seeds), by base load", f.Name, len(r.Seeds)), Columns: []report.Column{{Name: "fault"}}, Emphasis: map[[2]int]bool{}}
		for _, l := range r.Loads {
			name := "load " + report.Percent(l, 0)
			if math.Abs(l-r.RealLoad) < 1e-9 {
				name += "*"
			}
			t.Columns = append(t.Columns, report.Column{Name: name, Align: report.Right})
		}
		for fi, row := range f.Cells {
			cells := []string{r.Faults[fi].Name}
			for li := range row {
				cells = append(cells, r.cellText(f, fi, li, finds))
				if slices.ContainsFunc(finds[[2]int{fi, li}], func(x Finding) bool { return x.level() > Safe }) {
					t.Emphasis[[2]int{fi, li + 1}] = true
				}
			}
			t.Rows = append(t.Rows, cells)
		}
		out = append(out, t)
	}
	return out
}

// maxWhy is how many reasons a verdict lists before it counts the rest.
const maxWhy = 6

// Verdicts says, per fleet, in plain words: the verdict and what it rests
// on, its reasons, its margin, what it depends on, the worst numbers, and
// what to blame.
func (r *CheckResult) Verdicts() [][]string {
	var out [][]string
	a := r.assessment()
	for i, f := range r.Fleets {
		head := f.Name
		if f.Origin != "" {
			head += " (" + f.Origin + ")"
		}
		lines := []string{head, "verdict: " + r.verdictLine(i)}
		j := r.judge(i, 0)
		n := 0
		worstFirst := slices.Clone(j.Findings)
		slices.SortStableFunc(worstFirst, func(a, b Finding) int { return cmp.Compare(b.level(), a.level()) })
		for _, x := range worstFirst {
			if x.level() == Safe {
				continue
			}
			if n++; n <= maxWhy {
				lines = append(lines, "why: "+a.words(x, len(r.Seeds)))
			}
		}
		if n > maxWhy {
			lines = append(lines, fmt.Sprintf("why: and %d more (the map, and --json's findings)", n-maxWhy))
		}
		for _, x := range j.Findings {
			if x.What == findSystem {
				lines = append(lines, "beyond the retries: "+a.words(x, len(r.Seeds)))
			}
		}
		if f.Margin != nil {
			lines = append(lines, "margin: "+f.Margin.text(r.RealLoad, r.RealDip))
		}
		lines = append(lines, r.dependsOn(i)...)
		if skipped := r.notJudged(f); skipped != "" {
			lines = append(lines, "not judged on: "+skipped+" (it retries none of what they make)")
		}
		lines = append(lines, r.worstNumbers(f)...)
		blame := "to blame: "
		if f.Verdict == Safe {
			blame = "beyond it, to blame: "
		}
		if f.Verdict != Safe || slices.ContainsFunc(j.Findings, func(x Finding) bool { return x.What == findSystem }) {
			for _, k := range f.Risks {
				lines = append(lines, blame+k)
			}
		}
		if len(f.FromBase) > 0 {
			lines = append(lines, "not from your file (the base scenario's or the product's default, not blamed): "+strings.Join(f.FromBase, ", "))
		}
		out = append(out, lines)
	}
	return out
}

// verdictLine is fleet i's verdict in one line, with what it rests on.
func (r *CheckResult) verdictLine(i int) string {
	f := r.Fleets[i]
	region := "loads up to " + report.Percent(r.RealLoad, 0) + ", capacity dips up to " + report.Percent(r.RealDip, 0) + " and every fault it retries on at its realistic size"
	if slices.ContainsFunc(r.Faults, func(f checkFault) bool { return f.Replica != nil }) {
		region += ", and one bad replica"
	}
	has := func(whats ...string) bool {
		return slices.ContainsFunc(f.Findings, func(x Finding) bool { return slices.Contains(whats, x.What) })
	}
	var what string
	switch {
	case f.Verdict == Unsafe && has(findNeverHealthy):
		what = "it was never healthy: it failed most of its tries before the faults"
	case f.Verdict == Unsafe:
		what = "it stays collapsed in the region you call realistic where retries off recover"
	case f.Verdict == AtRisk && has(findWork, findLoad, findInstant, findHerd) && has(findOutside):
		what = "it recovers in the region you call realistic, but amplifies past the thresholds there, and collapses outside it where retries off recover"
	case f.Verdict == AtRisk && has(findOutside):
		what = "it recovers in the region you call realistic, but collapses outside it where retries off recover"
	case f.Verdict == AtRisk:
		what = "it recovers in the region you call realistic, but amplifies past the thresholds there"
	default:
		what = "it recovers without amplifying past the thresholds in the region you call realistic"
	}
	seeds := fmt.Sprintf("in each of %d seeds", len(r.Seeds))
	if f.Verdict != Safe {
		seeds = fmt.Sprintf("the worst of %d seeds", len(r.Seeds))
	}
	return fmt.Sprintf("%s: %s (%s), %s, at %d clients (%s)", f.Verdict, what, region, seeds, r.Clients[0], r.ClientsFrom)
}

// dependsOn says what the verdict would be with an assumption changed:
// the client instances, and the fleet's Assume.
func (r *CheckResult) dependsOn(i int) []string {
	f := r.Fleets[i]
	var out []string
	if len(f.ByClients) > 1 && slices.ContainsFunc(f.ByClients, func(l Level) bool { return l != f.Verdict }) {
		var at []string
		for k, n := range r.Clients {
			at = append(at, fmt.Sprintf("%s with %d", f.ByClients[k], n))
		}
		out = append(out, "depends on the client instances (each with its own budget and breaker): "+strings.Join(at, "; "))
	} else if len(f.ByClients) > 1 {
		var ns []string
		for _, n := range r.Clients {
			ns = append(ns, fmt.Sprint(n))
		}
		out = append(out, fmt.Sprintf("the same at %s client instances", strings.Join(ns, ", ")))
	}
	if a := f.Assumed; a != nil {
		if a.Verdict != f.Verdict {
			out = append(out, fmt.Sprintf("depends on %s (not in your file): %s with %s; %s with %s", a.Setting, f.Verdict, a.Value, a.Verdict, a.Other))
		} else {
			out = append(out, fmt.Sprintf("the same with %s %s as with %s", a.Setting, a.Other, a.Value))
		}
	}
	return out
}

// notJudged names the faults fleet f is not judged on.
func (r *CheckResult) notJudged(f CheckFleet) string {
	var out []string
	for fi, ok := range f.Judged {
		if !ok {
			out = append(out, r.Faults[fi].Name)
		}
	}
	return strings.Join(out, ", ")
}

// worstNumbers are the fleet's worst amplification over a fault and the
// most intents it lost, with where.
func (r *CheckResult) worstNumbers(f CheckFleet) []string {
	worst, wf, wl := 0.0, -1, 0
	lost, lf, ll := int64(-1), 0, 0
	var lostIntents int64
	stopped := countEnded(f.Runs[0]) // their attempts stop where they did; their intents lost are the whole runs'
	for _, seed := range f.Runs[0] {
		for fi, row := range seed {
			for li, c := range row {
				if !c.Ran {
					continue
				}
				if a := c.perIntent(); c.EndedEarly == nil && a > worst {
					worst, wf, wl = a, fi, li
				}
				if c.Intents > 0 && c.IntentsLost > lost {
					lost, lf, ll, lostIntents = c.IntentsLost, fi, li, c.Intents
				}
			}
		}
	}
	var out []string
	if wf >= 0 {
		s := fmt.Sprintf("most attempts per intent over a fault and its recovery: %.2f (%s at %s load)", worst, r.Faults[wf].Name, report.Percent(r.Loads[wl], 0))
		if stopped > 0 {
			s += fmt.Sprintf(", of the runs played to their end (%d collapsed runs stopped once certain; --full-runs counts them)", stopped)
		}
		out = append(out, s)
	} else if stopped > 0 {
		out = append(out, fmt.Sprintf("most attempts per intent over a fault and its recovery: not counted (each of the %d runs that collapsed stopped once certain; --full-runs counts them)", stopped))
	}
	if lost >= 0 {
		out = append(out, fmt.Sprintf("intents lost: at most %s of %s (%s), %s at %s load",
			report.Int(lost), report.Int(lostIntents), report.Percent(float64(lost)/float64(max(lostIntents, 1)), 1), r.Faults[lf].Name, report.Percent(r.Loads[ll], 0)))
	}
	if f.ModelRuns > 0 {
		out = append(out, fmt.Sprintf("answered by the analytic model (check --model): %d runs, in cells outside the realistic region that it places far from the boundary, marked (m) on the map; every realistic cell, and so the verdict, rests on the simulator", f.ModelRuns))
	}
	return out
}

// Render writes the check as text: each fleet's verdict, then its map.
func (r *CheckResult) Render(w io.Writer, st report.Style) error {
	if len(r.Assumptions) > 0 {
		fmt.Fprintln(w, "Assumed, from neither your files nor the products' documented defaults:")
		for _, a := range r.Assumptions {
			fmt.Fprintf(w, "  - %s\n", a)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "Checked on %q: %g intents/s, at base loads %s of capacity; * marks the realistic load.\n\n", r.Scenario, r.Rate, loadList(r.Loads))
	for _, n := range r.Notes {
		fmt.Fprintf(w, "Note: %s.\n\n", n)
	}
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
		legend := "n/a: not judged (it retries none of what the fault makes); †: collapses with retries off too; ×!: past an amplification threshold (the worst value)"
		if i < len(r.Fleets) && countEnded(r.Fleets[i].Runs[0]) > 0 {
			legend += "; no ×! from a run that stopped once its collapse was certain (--full-runs plays it out)"
		}
		fmt.Fprintln(w, legend)
		fmt.Fprintln(w)
	}
	return nil
}

// countEnded is how many of seeds' runs ended early.
func countEnded(seeds [][][]CheckCell) int {
	n := 0
	for _, s := range seeds {
		for _, row := range s {
			for _, c := range row {
				if c.Ran && c.EndedEarly != nil {
					n++
				}
			}
		}
	}
	return n
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
	sec := report.Section{ID: "check", Title: "Check: is this config safe?", Tables: r.Tables(), Claims: r.Claims, Notes: r.Notes}
	for _, v := range r.Verdicts() {
		sec.Intro = append(sec.Intro, strings.Join(v, ". ")+".")
	}
	for _, f := range r.Fleets {
		sec.Figures = append(sec.Figures, checkHeatmap(r, f))
	}
	return sec
}

func checkHeatmap(r *CheckResult, f CheckFleet) report.SVG {
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
	return report.SVG(h.SVG())
}
