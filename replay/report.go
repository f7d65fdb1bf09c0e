package replay

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/retrystorm/retrystorm/experiment"
	"github.com/retrystorm/retrystorm/internal/safetext"
	"github.com/retrystorm/retrystorm/report"
)

// Outcome is the replay as the command line prints and reports it: the
// conclusion, the tables, the claim that the replay reproduces the
// window, the plots of the measured series beside the replayed ones, and
// r itself as the JSON.
func (r *Result) Outcome() *experiment.Outcome {
	o := r.outcome()
	escape(&o.Section)
	for i := range o.Findings {
		o.Findings[i] = safetext.Escape(o.Findings[i])
	}
	o.Claims = o.Section.Claims
	return o
}

// escape makes every text of s safe to print: label values, file names
// and config names come from outside, and the layers' names and the
// window's files are escaped where they are read, but a note or a
// disagreement may quote more (safetext, as calibrate's comments).
func escape(s *report.Section) {
	s.Title = safetext.Escape(s.Title)
	for _, l := range [][]string{s.Intro, s.Notes} {
		for i := range l {
			l[i] = safetext.Escape(l[i])
		}
	}
	for t := range s.Tables {
		tb := &s.Tables[t]
		tb.Title = safetext.Escape(tb.Title)
		for _, row := range tb.Rows {
			for i := range row {
				row[i] = safetext.Escape(row[i])
			}
		}
	}
	for i := range s.Claims {
		s.Claims[i].Text, s.Claims[i].Detail = safetext.Escape(s.Claims[i].Text), safetext.Escape(s.Claims[i].Detail)
	}
}

func (r *Result) outcome() *experiment.Outcome {
	s := report.Section{ID: "replay", Title: "Replay: " + r.Window}
	s.Intro = []string{r.Conclusion}
	o := &experiment.Outcome{Name: "replay", JSON: r, Findings: []string{r.Conclusion}}
	if !r.Incident {
		s.Notes = append(s.Notes, r.Notes...)
		o.Section = s
		return o
	}
	c := r.Calibration
	t := r.Trigger
	loop := r.Loops[0].short()
	if len(r.Loops) > 1 {
		loop = "in no layer"
		for _, l := range r.Loops {
			if l.Lives {
				loop = "in " + l.Layer + ": " + l.short()
			}
		}
	}
	s.Tables = append(s.Tables, report.Table{
		Title:   "The incident, from " + r.Source + "'s metrics",
		Columns: []report.Column{{Name: "what"}, {Name: "value"}},
		Rows: [][]string{
			{"trigger", t.What()},
			{"when", t.When()},
			{"confidence", t.Confidence},
			{"origin before it", fmt.Sprintf("%.4g requests/s: %d workers, %s, mean %.3gs", c.Capacity, c.Workers, c.Dist, c.Service)},
			{"traffic before it", fmt.Sprintf("%.4g intents/s, %s, %.3g retries/intent", c.Rate, c.clients(), c.RetryShare)},
			{"client policy", r.policy()},
			{"measured end", r.Verdict.String()},
			{"sustaining loop", loop},
		},
	})
	if len(r.Loops) > 1 {
		s.Tables = append(s.Tables, r.layerTable())
	}
	runs := report.Table{
		Title: "The incident replayed, as it was and with one change",
		Columns: []report.Column{{Name: "replay"}, {Name: "recovers", Align: report.Right}, {Name: "intents lost", Align: report.Right},
			{Name: "failures", Align: report.Right}, {Name: "after clear", Align: report.Right}},
		Emphasis: map[[2]int]bool{},
	}
	runs.Rows = append(runs.Rows, []string{"measured (the window)", r.Verdict.String(), "", "", ""})
	for i, x := range append([]*Run{r.AsIs}, r.Others...) {
		runs.Rows = append(runs.Rows, []string{x.Name, x.Verdict.String(), strconv.FormatInt(x.IntentsLost, 10), strconv.FormatInt(x.Failures, 10), strconv.FormatInt(x.FailuresAfterClear, 10)})
		if !x.Verdict.Recovered {
			runs.Emphasis[[2]int{i + 1, 1}] = true
		}
	}
	s.Tables = append(s.Tables, runs)
	s.Claims = []report.Claim{report.Check("replayed as it was, the incident ends as the window shows (both never recover, or both recover within ±20%)",
		r.Agrees, map[string]any{"measured": r.Verdict, "replayed": r.AsIs.Verdict},
		"the window: %s; the replay: %s", r.Verdict, r.AsIs.Verdict)}
	s.Notes = append(s.Notes, "How the trigger was inferred: "+t.How+".")
	if r.Config != "" {
		s.Notes = append(s.Notes, "The client policy is the config's, "+r.Config+" (the timeout: "+c.TimeoutNte+").")
		for _, d := range r.Disagreements {
			s.Notes = append(s.Notes, fmt.Sprintf("Warning: the config and the metrics disagree on %s: %s.", d.Setting, d.Text))
		}
	} else {
		s.Notes = append(s.Notes, "The client policy's timeout and retries are calibrate's defaults where the metrics are silent: "+c.TimeoutNte+".")
	}
	for _, x := range r.Others {
		s.Notes = append(s.Notes, fmt.Sprintf("%s: %s.", x.Name, x.Change))
	}
	if r.AdviseNote != "" {
		s.Notes = append(s.Notes, r.AdviseNote)
	}
	s.Notes = append(s.Notes, r.Notes...)
	s.Charts = r.charts()
	o.Section, o.Claims = s, s.Claims
	return o
}

// clients is the client instances for the traffic's row: how many, and
// whether that is a default.
func (c *Calibration) clients() string {
	n := fmt.Sprintf("%d client instances", c.Clients)
	if c.Clients == 1 {
		n = "1 client instance"
	}
	if !c.ClientsKnown {
		n += " (a default: not in the metrics)"
	}
	return n
}

// policy is the client policy's row: the config's, or what the metrics
// showed of it.
func (r *Result) policy() string {
	c := r.Calibration
	if r.Config != "" {
		retries := strconv.Itoa(c.MaxRetries)
		if c.MaxRetries < 0 {
			retries = "unlimited"
		}
		return fmt.Sprintf("the config's: timeout %gs, %s retries, budget %s, breaker %s", c.Timeout, retries, has(c.Budget), has(c.Breaker))
	}
	return fmt.Sprintf("timeout %gs, %d retries, budget %s, breaker %s", c.Timeout, c.MaxRetries, yes(c.Budget), yes(c.Breaker))
}

func has(b bool) string {
	if b {
		return "yes"
	}
	return "none"
}

// layerTable is the loop at each layer: its attempts per intent before
// the trigger and after it ended, its proxy's queue, its own end, and
// where the loop lives.
func (r *Result) layerTable() report.Table {
	tb := report.Table{
		Title: "The loop, per layer, outermost first (the trigger inferred at " + r.Layer + ", the origin's callers)",
		Columns: []report.Column{{Name: "layer"}, {Name: "attempts/intent before", Align: report.Right}, {Name: "after", Align: report.Right},
			{Name: "queue before", Align: report.Right}, {Name: "after", Align: report.Right}, {Name: "recovers", Align: report.Right}, {Name: "loop"}},
		Emphasis: map[[2]int]bool{},
	}
	for i, l := range r.Loops {
		after, qa, end := "", "", "(the window ends first)"
		if l.Verdict != nil && r.Trigger.Ended {
			after, qa, end = fmt.Sprintf("%.3g", l.AmplificationAfter), fmt.Sprintf("%.0f", l.BacklogAfter), l.Verdict.String()
		}
		lives := ""
		if l.Lives {
			lives = "lives here"
			tb.Emphasis[[2]int{i, 6}] = true
		}
		tb.Rows = append(tb.Rows, []string{l.Layer, fmt.Sprintf("%.3g", l.AmplificationBefore), after, fmt.Sprintf("%.0f", l.BacklogBefore), qa, end, lives})
	}
	return tb
}

func yes(b bool) string {
	if b {
		return "seen"
	}
	return "none seen"
}

// charts plot the measured series beside the replayed ones, the
// counterfactuals dashed, the trigger shaded.
func (r *Result) charts() []report.Chart {
	m := r.Measured
	x := make([]float64, m.n())
	for i := range x {
		x[i] = float64(i) * m.Step // the start of each step, as the simulator's ticks
	}
	shade := []report.Span{{From: r.Trigger.At, To: r.Trigger.At + r.Trigger.For, Label: "trigger (inferred)"}}
	errs := report.Chart{Title: "Error rate: measured and replayed", XLabel: "time (s)", YLabel: "error rate", X: x, Shade: shade, YMax: 1, Percent: true,
		Lines: []report.Line{{Name: "measured", Y: m.plotted(m.ErrorRate)}, {Name: "replayed as-is", Y: fit(r.AsIs.ErrorRate, len(x))}}}
	load := report.Chart{Title: "Offered load: measured and replayed", XLabel: "time (s)", YLabel: "attempts / s", X: x, Shade: shade,
		Lines: []report.Line{{Name: "measured", Y: m.plotted(m.Attempts)}, {Name: "replayed as-is", Y: fit(r.AsIs.Offered, len(x))}}}
	for _, o := range r.Others {
		errs.Lines = append(errs.Lines, report.Line{Name: o.Name, Y: fit(o.ErrorRate, len(x)), Dashed: true})
		load.Lines = append(load.Lines, report.Line{Name: o.Name, Y: fit(o.Offered, len(x)), Dashed: true})
	}
	served := report.Chart{Title: "What the window shows: intents, answers and the capacity", XLabel: "time (s)", YLabel: "per second", X: x, Shade: shade,
		Lines: []report.Line{{Name: "intents", Y: m.plotted(m.Intents)}, {Name: "answers", Y: m.plotted(m.Served)}}}
	if m.Replayed != nil {
		served.Lines[0].Name = "requests (intents and retries alike)"
		served.Lines = append(served.Lines, report.Line{Name: "intents replayed", Y: m.plotted(m.Replayed), Dashed: true})
	}
	if m.Wasted != nil {
		served.Lines = append(served.Lines, report.Line{Name: "answers for callers gone", Y: m.plotted(m.Wasted)})
	}
	cap := make([]float64, len(x))
	for i := range cap {
		cap[i] = r.Calibration.Capacity
	}
	served.Lines = append(served.Lines, report.Line{Name: "calibrated capacity", Y: cap, Dashed: true})
	return []report.Chart{errs, load, served}
}

// fit pads or cuts v to n values.
func fit(v []float64, n int) []float64 {
	out := make([]float64, n)
	copy(out, v)
	return out
}

// short is the loop in a table cell.
func (l Loop) short() string {
	switch {
	case l.AmplificationAfter == 0 && !l.Sustained:
		return "not in the window"
	case !l.Sustained:
		return "none: it recovered"
	}
	var parts []string
	if l.Retries {
		parts = append(parts, fmt.Sprintf("%.3g attempts/intent (%.3g before)", l.AmplificationAfter, l.AmplificationBefore))
	}
	if l.Wasted {
		parts = append(parts, fmt.Sprintf("%.0f%% wasted work", 100*l.WastedShare))
	}
	if len(parts) == 0 {
		return "sustained, cause not shown"
	}
	return "metastable: " + strings.Join(parts, "; ")
}
