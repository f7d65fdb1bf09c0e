package experiment

import (
	"context"
	"fmt"
	"strings"

	"github.com/retrystorm/retrystorm/report"
	"github.com/retrystorm/retrystorm/scenario"
	"github.com/retrystorm/retrystorm/sim"
)

const fleetsTitle = "Fleets: who pays for a capacity dip"

// Fleets runs four fleets through the same capacity dip and says who paid:
// failures, and intents lost, in two columns.
var Fleets = register(&Experiment{
	Name:    "fleets",
	Title:   fleetsTitle,
	Summary: "four fleets through the same dip: ceiling, failures, recovery and intents lost",
	Order:   20,
	Page: Page{
		Knobs: scenarioKnobs,
		Cost:  15,
	},
	Run: runFleets,
})

func runFleets(ctx context.Context, opts Options) (*Outcome, error) {
	sc, err := scenarioFor("fleets", opts)
	if err != nil {
		return nil, err
	}
	res, err := opts.run(ctx, sc)
	if err != nil {
		return nil, err
	}
	claims := fleetsClaims(sc, res)
	notes := []string{capacityModelNote(sc)}
	sec := report.Section{
		ID:    "fleets",
		Title: fleetsTitle,
		Intro: []string{
			fmt.Sprintf("%s: %s over %d clients against a %s origin of %g/s; %s. Every fleet sees the same traffic; the first is the control.",
				sc.Name, describeRate(sc), sc.Traffic.Clients, sc.Origin.Model, sc.Origin.Capacity, describeTriggers(sc)),
			"A retry budget does not make the incident smaller: it decides who pays for it. Read failures and intents lost together, never one without the other.",
		},
		Tables: []report.Table{fleetsTable(res)},
		Claims: claims,
		Charts: runCharts(res, sc, map[string]bool{res.Fleets[0].Name: true}),
		Notes: append(notes, "ceiling is the most offered load per tick each policy permits at the steady rate; after counts failures once the cause cleared; "+
			"victims are intents that arrived after the trigger ended and still saw a failure."),
	}
	return &Outcome{
		Name:     "fleets",
		Claims:   claims,
		Section:  sec,
		Findings: fleetsFindings(sc, res),
		JSON:     runJSON{Result: res, Claims: claims, Notes: notes},
	}, nil
}

func fleetsTable(res *sim.Result) report.Table {
	t := report.Table{
		Columns: []report.Column{
			{Name: "fleet"}, {Name: "ceiling", Align: report.Right}, {Name: "failures", Align: report.Right},
			{Name: "after", Align: report.Right}, {Name: "recovery", Align: report.Right},
			{Name: "lost", Align: report.Right}, {Name: "victims", Align: report.Right},
		},
		Emphasis: map[[2]int]bool{},
	}
	for i, f := range res.Fleets {
		s := f.Summary
		t.Rows = append(t.Rows, []string{
			f.Name, ceilingText(s), report.Int(s.Failures), report.Int(s.FailuresAfterClear),
			recoveryText(s), report.Int(s.IntentsLost), report.Int(s.Victims),
		})
		if !s.Recovered {
			t.Emphasis[[2]int{i, 4}] = true
		}
	}
	return t
}

// capacityModelNote says plainly what the origin model of the run can show
// and what it cannot.
func capacityModelNote(sc *scenario.Scenario) string {
	o := sc.Origin
	switch {
	case o.Model == scenario.ModelCapacity && o.RejectionCost == 0:
		return fmt.Sprintf("What this model can show, and what it cannot: the capacity origin rejects overload at once and a rejection costs it nothing (rejection_cost 0), so once the retries die out and the load (%g/s) is under capacity (%g/s), it always recovers. It shows amplification and longer outages, not metastability; for a collapse that outlives its cause, see storm (a queue whose late answers are wasted work) or give rejections a cost.",
			sc.Traffic.Rate, o.Capacity)
	case o.Model == scenario.ModelCapacity:
		return fmt.Sprintf("Rejections here cost %g of a request's work, so heavy overload eats the capacity that would have served the rest: above %.0f attempts/s the origin answers nothing, and a collapse can outlive its cause.",
			o.RejectionCost, o.Capacity/o.RejectionCost)
	}
	return fmt.Sprintf("The %s origin can hold work for clients that gave up, so a collapse can outlive its cause.", o.Model)
}

func fleetsClaims(sc *scenario.Scenario, res *sim.Result) []report.Claim {
	control := res.Fleets[0]
	c := control.Summary
	var claims []report.Claim
	var budgeted []int
	for i := 1; i < len(res.Fleets); i++ {
		if sc.Fleets[i].Budget.Use != scenario.BudgetNone {
			budgeted = append(budgeted, i)
		}
	}
	for _, i := range budgeted {
		f := res.Fleets[i]
		s := f.Summary
		claims = append(claims,
			report.Check(fmt.Sprintf("%s peaks below the control", f.Name),
				s.PeakOffered < c.PeakOffered, map[string]any{"peak_offered": s.PeakOffered, "control_peak_offered": c.PeakOffered},
				"peak %d attempts/tick against %d", s.PeakOffered, c.PeakOffered),
			report.Check(fmt.Sprintf("%s fails less than the control after the cause cleared", f.Name),
				s.FailuresAfterClear < c.FailuresAfterClear, map[string]any{"failures_after_clear": s.FailuresAfterClear, "control_failures_after_clear": c.FailuresAfterClear},
				"%d against %d", s.FailuresAfterClear, c.FailuresAfterClear),
		)
	}
	if len(budgeted) > 0 {
		// The trade, said of the first budgeted fleet: it fails less and
		// loses more.
		f := res.Fleets[budgeted[0]]
		s := f.Summary
		claims = append(claims, report.Check(fmt.Sprintf("%s trades failures for lost intents: fewer failures, more intents lost than the control", f.Name),
			s.Failures < c.Failures && s.IntentsLost > c.IntentsLost,
			map[string]any{"failures": s.Failures, "intents_lost": s.IntentsLost, "control_failures": c.Failures, "control_intents_lost": c.IntentsLost},
			"%d failures and %d lost, against %d and %d", s.Failures, s.IntentsLost, c.Failures, c.IntentsLost))
	}
	for i, f := range res.Fleets {
		if sc.Fleets[i].Breaker.Use != "" && sc.Fleets[i].Breaker.Use != scenario.BreakerNone {
			s := f.Summary
			claims = append(claims, report.Check(fmt.Sprintf("%s's breaker throws away answers that existed", f.Name),
				s.AnswersThrownAway > 0, map[string]any{"answers_thrown_away": s.AnswersThrownAway, "breaker_refusals": s.BreakerRefusals},
				"%d of %d refused calls would have succeeded", s.AnswersThrownAway, s.BreakerRefusals))
		}
	}
	if sc.Origin.Model == scenario.ModelCapacity && sc.Origin.RejectionCost == 0 && sc.Traffic.Rate < sc.Origin.Capacity {
		all := true
		var never []string
		for _, f := range res.Fleets {
			if !f.Summary.Recovered {
				all = false
				never = append(never, f.Name)
			}
		}
		detail := "every fleet recovered"
		if !all {
			detail = "never recovered: " + strings.Join(never, ", ")
		}
		claims = append(claims, report.Check("with free rejections and load under capacity, every fleet recovers: amplified, not metastable",
			all, map[string]any{"all_recovered": all}, "%s", detail))
	}
	return claims
}

func fleetsFindings(sc *scenario.Scenario, res *sim.Result) []string {
	c := res.Fleets[0].Summary
	out := []string{fmt.Sprintf("Fleets: through %s, the control (%s) failed %s requests, %s of them after the cause cleared, %s and lost %s intents.",
		describeTriggers(sc), res.Fleets[0].Name, report.Int(c.Failures), report.Int(c.FailuresAfterClear), recoveredPhrase(c), report.Int(c.IntentsLost))}
	for i := 1; i < len(res.Fleets); i++ {
		s := res.Fleets[i].Summary
		out = append(out, fmt.Sprintf("Fleets: %s failed %s requests (%s after the cause cleared) and lost %s intents; %s answers were thrown away by a breaker.",
			res.Fleets[i].Name, report.Int(s.Failures), report.Int(s.FailuresAfterClear), report.Int(s.IntentsLost), report.Int(s.AnswersThrownAway)))
	}
	return out
}
