package experiment

import (
	"context"
	"fmt"
	"math"

	"github.com/retrystorm/retrystorm/report"
	"github.com/retrystorm/retrystorm/scenario"
)

const outageTitle = "Outage: what each policy permits when nothing works"

// Outage counts the retries each policy permits in a total outage, then
// measures amplification against the failure probability, independent and
// correlated.
var Outage = register(&Experiment{
	Name:    "outage",
	Title:   outageTitle,
	Summary: "retries permitted in a total outage, and amplification against failure probability",
	Order:   50,
	Page: Page{
		Knobs: []string{"max_retries", "budget_ratio", "budget_floor"},
		Cost:  180,
		Fixed: "Every attempt fails for the whole run: the total outage is the experiment.",
	},
	Run: runOutage,
})

// outageProbabilities are the per-attempt failure probabilities of the
// amplification curves.
var outageProbabilities = []float64{0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1}

// amplificationPoint is attempts per intent at one failure probability.
type amplificationPoint struct {
	P           float64 `json:"p"`
	ClosedForm  float64 `json:"closed_form"`
	Independent float64 `json:"independent"`
	Correlated  float64 `json:"correlated"`
}

// amplificationCurve is one policy's amplification.
type amplificationCurve struct {
	Fleet  string               `json:"fleet"`
	Points []amplificationPoint `json:"points"`
}

// outageFleet is what one policy permitted in the outage.
type outageFleet struct {
	Name     string `json:"name"`
	Budget   string `json:"budget"`
	Intents  int64  `json:"intents"`
	Retries  int64  `json:"retries"`
	Attempts int64  `json:"attempts"`
}

type outageJSON struct {
	Scenario      string               `json:"scenario"`
	Seed          uint64               `json:"seed"`
	Outage        []outageFleet        `json:"outage"`
	Amplification []amplificationCurve `json:"amplification"`
	Claims        []report.Claim       `json:"claims"`
	Notes         []string             `json:"notes,omitempty"`
}

func runOutage(ctx context.Context, opts Options) (*Outcome, error) {
	sc, err := scenarioFor("outage", opts)
	if err != nil {
		return nil, err
	}
	res, err := opts.run(ctx, sc)
	if err != nil {
		return nil, err
	}
	js := outageJSON{Scenario: sc.Name, Seed: sc.Seed}
	for i, f := range res.Fleets {
		s := f.Summary
		js.Outage = append(js.Outage, outageFleet{Name: f.Name, Budget: sc.Fleets[i].Budget.Use, Intents: s.Intents, Retries: s.Retries, Attempts: s.Attempts})
	}
	count, bucket := -1, -1
	for i, f := range sc.Fleets {
		switch {
		case count < 0 && f.Budget.Use == scenario.BudgetNone && f.Retry.MaxRetries > 0:
			count = i
		case bucket < 0 && f.Budget.Use == scenario.BudgetTokenBucket:
			bucket = i
		}
	}
	if count >= 0 && bucket >= 0 {
		curves, err := amplification(ctx, sc, []int{count, bucket}, opts)
		if err != nil {
			return nil, err
		}
		js.Amplification = curves
	} else {
		js.Notes = append(js.Notes, "The amplification curves need a count-only fleet and a token bucket fleet; this scenario lacks one.")
	}
	js.Claims = outageClaims(sc, js, count, bucket)
	sec := report.Section{
		ID:    "outage",
		Title: outageTitle,
		Intro: []string{
			fmt.Sprintf("%s: every attempt fails; %d calls arrive. A per-call retry count multiplies by the calls; a budget funded by successes has nothing to spend but its floor.",
				sc.Name, res.Fleets[0].Summary.Intents),
			"Then amplification, attempts per intent, against the probability p that an attempt fails: independently (each attempt its own draw) and correlated (a broken share p of the keys fails every attempt, as in a real outage).",
		},
		Tables: outageTables(js),
		Claims: js.Claims,
		Charts: outageCharts(js),
		Notes: append(js.Notes, "The closed form for R retries with independent failures is (1 − p^(R+1)) / (1 − p): the expected number of attempts until one succeeds or R+1 were made. "+
			"Under correlated failure every retry of a failed call fails too, so a count of R gives 1 + R·p; a budget funded by successes gives about 1 + ratio·(1 − p)."),
	}
	return &Outcome{Name: "outage", Claims: js.Claims, Section: sec, Findings: outageFindings(js), JSON: js}, nil
}

// amplification runs the chosen fleets with failure probability p, first
// drawn per attempt, then as a broken share of the keys.
func amplification(ctx context.Context, base *scenario.Scenario, fleets []int, opts Options) ([]amplificationCurve, error) {
	progress := opts.Progress
	curves := make([]amplificationCurve, len(fleets))
	for j, i := range fleets {
		curves[j].Fleet = base.Fleets[i].Name
	}
	total := 2 * len(outageProbabilities)
	for k, p := range outageProbabilities {
		var measured [2][]float64
		for mode := range 2 {
			sc := base.Clone()
			// Arrivals stop five seconds before the end, so every retry
			// of every call falls inside the run and is counted.
			sc.Duration = 60e9
			sc.Triggers = []scenario.Trigger{{Kind: scenario.TriggerLoad, At: 55e9, For: 5e9, Rate: 0}}
			sc.Fleets = nil
			for _, i := range fleets {
				f := base.Fleets[i]
				f.Deadline = 0
				sc.Fleets = append(sc.Fleets, f)
			}
			if mode == 0 {
				sc.Origin.ErrorRate = p
			} else {
				sc.Origin.Broken = p
			}
			res, err := opts.run(ctx, sc)
			if err != nil {
				return nil, err
			}
			for _, f := range res.Fleets {
				measured[mode] = append(measured[mode], float64(f.Summary.Attempts)/float64(max(f.Summary.Intents, 1)))
			}
			if progress != nil {
				progress(2*k+mode+1, total)
			}
		}
		for j, i := range fleets {
			curves[j].Points = append(curves[j].Points, amplificationPoint{
				P:           p,
				ClosedForm:  round3(closedForm(p, base.Fleets[i].Retry.MaxRetries)),
				Independent: round3(measured[0][j]),
				Correlated:  round3(measured[1][j]),
			})
		}
	}
	return curves, nil
}

// closedForm is the expected attempts per call with r retries and
// independent failures of probability p: 1 + p + p² + … + p^r.
func closedForm(p float64, r int) float64 {
	if p == 1 {
		return float64(r + 1)
	}
	return (1 - math.Pow(p, float64(r+1))) / (1 - p)
}

func outageTables(js outageJSON) []report.Table {
	t := report.Table{
		Title: "Retries permitted in a total outage",
		Columns: []report.Column{{Name: "policy"}, {Name: "budget"}, {Name: "calls", Align: report.Right},
			{Name: "retries", Align: report.Right}, {Name: "per call", Align: report.Right}},
	}
	for _, f := range js.Outage {
		t.Rows = append(t.Rows, []string{f.Name, f.Budget, report.Int(f.Intents), report.Int(f.Retries),
			report.Float(float64(f.Retries)/float64(max(f.Intents, 1)), 3)})
	}
	tables := []report.Table{t}
	if len(js.Amplification) == 2 {
		a := report.Table{
			Title: "Attempts per call against failure probability p",
			Columns: []report.Column{{Name: "p", Align: report.Right}, {Name: "closed form", Align: report.Right},
				{Name: "count", Align: report.Right}, {Name: "count corr.", Align: report.Right},
				{Name: "budget", Align: report.Right}, {Name: "budget corr.", Align: report.Right}},
		}
		c, b := js.Amplification[0], js.Amplification[1]
		for i, pt := range c.Points {
			a.Rows = append(a.Rows, []string{report.Float(pt.P, 2), report.Float(pt.ClosedForm, 3), report.Float(pt.Independent, 3),
				report.Float(pt.Correlated, 3), report.Float(b.Points[i].Independent, 3), report.Float(b.Points[i].Correlated, 3)})
		}
		tables = append(tables, a)
	}
	return tables
}

func outageCharts(js outageJSON) []report.Chart {
	if len(js.Amplification) != 2 {
		return nil
	}
	c, b := js.Amplification[0], js.Amplification[1]
	x := make([]float64, len(c.Points))
	pick := func(pts []amplificationPoint, f func(amplificationPoint) float64) []float64 {
		out := make([]float64, len(pts))
		for i, p := range pts {
			out[i] = f(p)
		}
		return out
	}
	for i, p := range c.Points {
		x[i] = p.P
	}
	return []report.Chart{{
		Title: "Amplification: attempts per call against failure probability", XLabel: "failure probability p", YLabel: "attempts per call", X: x,
		Lines: []report.Line{
			{Name: "closed form", Y: pick(c.Points, func(p amplificationPoint) float64 { return p.ClosedForm }), Dashed: true},
			{Name: c.Fleet + ", independent", Y: pick(c.Points, func(p amplificationPoint) float64 { return p.Independent })},
			{Name: c.Fleet + ", correlated", Y: pick(c.Points, func(p amplificationPoint) float64 { return p.Correlated })},
			{Name: b.Fleet + ", independent", Y: pick(b.Points, func(p amplificationPoint) float64 { return p.Independent })},
			{Name: b.Fleet + ", correlated", Y: pick(b.Points, func(p amplificationPoint) float64 { return p.Correlated })},
		},
	}}
}

func outageClaims(sc *scenario.Scenario, js outageJSON, count, bucket int) []report.Claim {
	var cs []report.Claim
	most := js.Outage[0]
	for _, f := range js.Outage {
		if f.Retries > most.Retries {
			most = f
		}
	}
	for i, f := range js.Outage {
		fl := sc.Fleets[i]
		switch {
		case fl.Budget.Use == scenario.BudgetNone && fl.Retry.MaxRetries > 0:
			want := int64(fl.Retry.MaxRetries) * f.Intents
			cs = append(cs, report.Check(fmt.Sprintf("%s permits exactly max_retries × calls = %d retries", f.Name, want),
				f.Retries == want, map[string]any{"retries": f.Retries, "expected": want}, "%d", f.Retries))
		case fl.Budget.Use == scenario.BudgetTokenBucket && sc.Traffic.Clients == 1:
			want := int64(fl.Budget.TokenBucket.MinTokens)
			cs = append(cs, report.Check(fmt.Sprintf("%s permits its floor alone: min_tokens = %d retries", f.Name, want),
				f.Retries == want, map[string]any{"retries": f.Retries, "min_tokens": fl.Budget.TokenBucket.MinTokens}, "%d", f.Retries))
		case fl.Budget.Use == scenario.BudgetGRPC && sc.Traffic.Clients == 1:
			limit := int64(fl.Budget.GRPC.MaxTokens / 2)
			cs = append(cs, report.Check(fmt.Sprintf("%s stops retrying once its tokens fall to half: at most max_tokens/2 = %d retries", f.Name, limit),
				f.Retries <= limit, map[string]any{"retries": f.Retries, "limit": limit}, "%d", f.Retries))
		case fl.Budget.Use == scenario.BudgetAWS && sc.Traffic.Clients == 1:
			capacity, cost := fl.Budget.AWS.Capacity, fl.Budget.AWS.RetryCost
			if capacity == 0 {
				capacity = 500
			}
			if cost == 0 {
				cost = 5
			}
			want := int64(capacity) / int64(cost)
			cs = append(cs, report.Check(fmt.Sprintf("%s spends its quota: capacity/retry cost = %d retries", f.Name, want),
				f.Retries == want, map[string]any{"retries": f.Retries, "expected": want}, "%d", f.Retries))
		}
	}
	if fl := sc.Fleets[0]; fl.Budget.Use == scenario.BudgetNone && fl.Retry.MaxRetries < 0 {
		cs = append(cs, report.Check(fmt.Sprintf("%s (no count, no budget) permits the most", js.Outage[0].Name),
			most.Name == js.Outage[0].Name, map[string]any{"retries": js.Outage[0].Retries}, "%d retries", js.Outage[0].Retries))
	}
	if len(js.Amplification) == 2 {
		c, b := js.Amplification[0], js.Amplification[1]
		worst := 0.0
		for _, p := range c.Points {
			worst = max(worst, math.Abs(p.Independent-p.ClosedForm)/p.ClosedForm)
		}
		cs = append(cs, report.Check(fmt.Sprintf("%s's measured amplification matches the closed form within 2%% at every p", c.Fleet),
			worst <= 0.02, map[string]any{"worst_relative_error": round3(worst)}, "worst %.2f%%", 100*worst))
		last := len(c.Points) - 1
		r := float64(sc.Fleets[count].Retry.MaxRetries)
		ratio := sc.Fleets[bucket].Budget.Ratio()
		cc := c.Points[last].Correlated
		cs = append(cs,
			report.Check(fmt.Sprintf("under correlated failure at p = 1, %s multiplies the load by 1 + R = %g", c.Fleet, 1+r),
				math.Abs(cc-(1+r)) < 0.01, map[string]any{"attempts_per_call": cc}, "%.3f attempts per call", cc),
			report.Check(fmt.Sprintf("under correlated failure, %s stays within 1 + ratio (%g) plus its floor at every p", b.Fleet, 1+ratio),
				maxCorrelated(b) <= 1+ratio+0.01, map[string]any{"max_attempts_per_call": maxCorrelated(b)}, "at most %.3f attempts per call", maxCorrelated(b)))
	}
	return cs
}

func maxCorrelated(c amplificationCurve) float64 {
	m := 0.0
	for _, p := range c.Points {
		m = max(m, p.Correlated)
	}
	return m
}

func outageFindings(js outageJSON) []string {
	var out []string
	for _, f := range js.Outage {
		out = append(out, fmt.Sprintf("Outage: over %s calls that all failed, %s permitted %s retries (%.2f per call).",
			report.Int(f.Intents), f.Name, report.Int(f.Retries), float64(f.Retries)/float64(max(f.Intents, 1))))
	}
	if len(js.Amplification) == 2 {
		c, b := js.Amplification[0], js.Amplification[1]
		last := len(c.Points) - 1
		out = append(out, fmt.Sprintf("Outage: at failure probability 1, %s made %.2f attempts per call and %s %.2f; at p = 0.5, correlated failure gave %.2f and %.2f.",
			c.Fleet, c.Points[last].Correlated, b.Fleet, b.Points[last].Correlated, c.Points[5].Correlated, b.Points[5].Correlated))
	}
	return out
}
