package experiment

import (
	"context"
	"fmt"

	"github.com/retrystorm/retrystorm/report"
	"github.com/retrystorm/retrystorm/scenario"
)

const hedgeTitle = "Hedging: a cure for one slow replica, a poison for broad slowness"

// Hedge runs hedged requests with and without a budget against a tail
// caused by one slow replica, then against every replica slow.
var Hedge = register(&Experiment{
	Name:    "hedge",
	Title:   hedgeTitle,
	Summary: "hedged requests against one slow replica and against broad slowness, with and without a budget",
	Order:   60,
	Page: Page{
		Knobs: []string{"rate", "budget_ratio"},
		Cost:  85,
		Fixed: "The slow replica and the broad slowness are the experiment's own.",
	},
	Run: runHedge,
})

// hedgeFleet is one fleet in one case.
type hedgeFleet struct {
	Name       string  `json:"name"`
	P50Seconds float64 `json:"p50_seconds"`
	P99Seconds float64 `json:"p99_seconds"`
	Load       float64 `json:"load"` // attempts per intent
	Hedges     int64   `json:"hedges"`
	Lost       int64   `json:"intents_lost"`
}

// hedgeCase is one origin condition.
type hedgeCase struct {
	Case   string       `json:"case"`
	Fleets []hedgeFleet `json:"fleets"`
}

type hedgeJSON struct {
	Scenario string         `json:"scenario"`
	Seed     uint64         `json:"seed"`
	Cases    []hedgeCase    `json:"cases"`
	Claims   []report.Claim `json:"claims"`
}

func runHedge(ctx context.Context, opts Options) (*Outcome, error) {
	sc, err := scenarioFor("hedge", opts)
	if err != nil {
		return nil, err
	}
	broad := sc.Clone()
	widened := false
	for i, t := range broad.Triggers {
		if t.Kind == scenario.TriggerLatency && t.Replicas != 0 {
			broad.Triggers[i].Replicas, widened = 0, true
		}
	}
	if !widened {
		return nil, fmt.Errorf("hedge: the scenario needs a latency trigger on some replicas (replicas: N), which the experiment widens to all")
	}
	js := hedgeJSON{Scenario: sc.Name, Seed: sc.Seed}
	var charts []report.Chart
	for k, c := range []struct {
		name string
		sc   *scenario.Scenario
	}{{"one slow replica", sc}, {"every replica slow", broad}} {
		res, err := opts.run(ctx, c.sc)
		if err != nil {
			return nil, err
		}
		hc := hedgeCase{Case: c.name}
		for _, f := range res.Fleets {
			s := f.Summary
			hc.Fleets = append(hc.Fleets, hedgeFleet{
				Name: f.Name, P50Seconds: round3(s.LatencyP50), P99Seconds: round3(s.LatencyP99),
				Load: round3(float64(s.Attempts) / float64(max(s.Intents, 1))), Hedges: s.Hedges, Lost: s.IntentsLost,
			})
		}
		js.Cases = append(js.Cases, hc)
		for _, ch := range runCharts(res, c.sc, map[string]bool{res.Fleets[0].Name: true}) {
			if ch.Title == "Offered load: attempts reaching the origin" || ch.Title == "In flight at the origin" {
				ch.Title = fmt.Sprintf("%s (%s)", ch.Title, c.name)
				charts = append(charts, ch)
			}
		}
		if opts.Progress != nil {
			opts.Progress(k+1, 2)
		}
	}
	js.Claims = hedgeClaims(sc, js)
	sec := report.Section{
		ID:    "hedge",
		Title: hedgeTitle,
		Intro: []string{
			fmt.Sprintf("%s: %g intents/s over %d replicas whose latency grows with the requests they hold (%s + %s per request in flight). First one replica is %g× slower (a tail), then all of them (broad slowness). A hedge goes to another replica after %s; the first answer wins.",
				sc.Name, sc.Traffic.Rate, sc.Origin.Replicas, sc.Origin.Base, sc.Origin.PerInflight, hedgeFactor(sc), hedgeDelay(sc)),
		},
		Tables: []report.Table{hedgeTable(js)},
		Claims: js.Claims,
		Charts: charts,
		Notes:  []string{"p50 and p99 are the latencies of the intents that succeeded, from arrival to the first answer; load is attempts per intent."},
	}
	return &Outcome{Name: "hedge", Claims: js.Claims, Section: sec, Findings: hedgeFindings(js), JSON: js}, nil
}

func hedgeFactor(sc *scenario.Scenario) float64 {
	for _, t := range sc.Triggers {
		if t.Kind == scenario.TriggerLatency {
			return t.Factor
		}
	}
	return 1
}

func hedgeDelay(sc *scenario.Scenario) string {
	for _, f := range sc.Fleets {
		if f.Hedge.Delay > 0 {
			return f.Hedge.Delay.String()
		}
	}
	return "never"
}

func hedgeTable(js hedgeJSON) report.Table {
	t := report.Table{
		Columns: []report.Column{{Name: "case"}, {Name: "fleet"}, {Name: "p50", Align: report.Right}, {Name: "p99", Align: report.Right},
			{Name: "load", Align: report.Right}, {Name: "lost", Align: report.Right}},
		Emphasis: map[[2]int]bool{},
	}
	for _, c := range js.Cases {
		for i, f := range c.Fleets {
			name := ""
			if i == 0 {
				name = c.Case
			}
			t.Rows = append(t.Rows, []string{name, f.Name, ms(f.P50Seconds), ms(f.P99Seconds), report.Float(f.Load, 2) + "×", report.Int(f.Lost)})
			if f.Lost > 0 {
				t.Emphasis[[2]int{len(t.Rows) - 1, 5}] = true
			}
		}
	}
	return t
}

func ms(s float64) string { return fmt.Sprintf("%.0f ms", 1000*s) }

func hedgeClaims(sc *scenario.Scenario, js hedgeJSON) []report.Claim {
	tail, broad := js.Cases[0].Fleets, js.Cases[1].Fleets
	control := 0
	var cs []report.Claim
	for i, f := range sc.Fleets {
		if i == control || f.Hedge.Delay == 0 {
			continue
		}
		cs = append(cs, report.Check(fmt.Sprintf("with one slow replica, %s cuts p99 at least in half", tail[i].Name),
			tail[i].P99Seconds <= tail[control].P99Seconds/2, map[string]any{"p99_seconds": tail[i].P99Seconds, "control_p99_seconds": tail[control].P99Seconds},
			"%s against %s", ms(tail[i].P99Seconds), ms(tail[control].P99Seconds)))
		if f.Budget.Use == scenario.BudgetNone {
			cs = append(cs, report.Check(fmt.Sprintf("with every replica slow, %s adds load and makes p99 worse", broad[i].Name),
				broad[i].Load > 1.5 && broad[i].P99Seconds > broad[control].P99Seconds,
				map[string]any{"load": broad[i].Load, "p99_seconds": broad[i].P99Seconds, "control_p99_seconds": broad[control].P99Seconds},
				"load %.2f×, p99 %s against %s", broad[i].Load, ms(broad[i].P99Seconds), ms(broad[control].P99Seconds)))
		} else if ratio, ok := budgetRatio(f); ok {
			worst := 0.0
			for j, g := range broad {
				if sc.Fleets[j].Hedge.Delay > 0 && sc.Fleets[j].Budget.Use == scenario.BudgetNone {
					worst = max(worst, g.P99Seconds)
				}
			}
			cs = append(cs, report.Check(fmt.Sprintf("with every replica slow, the budget caps %s's load near 1 + %g and keeps p99 below unbudgeted hedging", broad[i].Name, ratio),
				broad[i].Load <= 1+ratio+0.01 && (worst == 0 || broad[i].P99Seconds < worst),
				map[string]any{"load": broad[i].Load, "p99_seconds": broad[i].P99Seconds, "unbudgeted_p99_seconds": worst},
				"load %.2f×, p99 %s against %s", broad[i].Load, ms(broad[i].P99Seconds), ms(worst)))
		}
	}
	return cs
}

func hedgeFindings(js hedgeJSON) []string {
	var out []string
	for _, c := range js.Cases {
		for _, f := range c.Fleets {
			out = append(out, fmt.Sprintf("Hedge (%s): %s answered at p50 %s and p99 %s with %.2f attempts per intent and %s intents lost.",
				c.Case, f.Name, ms(f.P50Seconds), ms(f.P99Seconds), f.Load, report.Int(f.Lost)))
		}
	}
	return out
}
