package experiment

import (
	"context"
	"fmt"

	"github.com/retrystorm/retrystorm/report"
	"github.com/retrystorm/retrystorm/scenario"
	"github.com/retrystorm/retrystorm/sim"
)

// RunScenario runs a scenario file as it is, for `retrystorm run`: every
// fleet, the table, the charts, and the run's JSON. A file states no
// expectations, so there are no claims.
func RunScenario(ctx context.Context, sc *scenario.Scenario) (*Outcome, error) {
	return RunScenarioWith(ctx, sc, Options{})
}

// RunScenarioWith is RunScenario within opts.Limits, reporting
// opts.Progress. opts.Scenario and opts.Seed are not used: sc is run as it
// is.
func RunScenarioWith(ctx context.Context, sc *scenario.Scenario, opts Options) (*Outcome, error) {
	res, err := sim.RunWith(ctx, sc, sim.Options{Limits: opts.Limits, Progress: opts.Progress})
	if err != nil {
		return nil, err
	}
	t := report.Table{
		Columns: []report.Column{
			{Name: "fleet"}, {Name: "ceiling", Align: report.Right}, {Name: "r/req", Align: report.Right},
			{Name: "failures", Align: report.Right}, {Name: "after", Align: report.Right},
			{Name: "recovery", Align: report.Right}, {Name: "lost", Align: report.Right}, {Name: "victims", Align: report.Right},
		},
		Emphasis: map[[2]int]bool{},
	}
	for i, f := range res.Fleets {
		s := f.Summary
		t.Rows = append(t.Rows, []string{
			f.Name, ceilingText(s), report.Float(s.RetriesPerRequest, 3), report.Int(s.Failures),
			report.Int(s.FailuresAfterClear), recoveryText(s), report.Int(s.IntentsLost), report.Int(s.Victims),
		})
		if !s.Recovered {
			t.Emphasis[[2]int{i, 5}] = true
		}
	}
	notes := []string{capacityModelNote(sc)}
	if len(sc.Tiers) > 0 {
		notes = append(notes, layerNote)
	}
	sec := report.Section{
		ID:    "run",
		Title: fmt.Sprintf("Scenario %s (seed %d)", sc.Name, sc.Seed),
		Intro: []string{fmt.Sprintf("%s against a %s origin; %s.",
			describeLoad(sc), sc.Origin.Model, describeTriggers(sc))},
		Tables: append(append([]report.Table{t}, chainTables(res)...), replicaTables(res)...),
		Charts: append(runCharts(res, sc, nil), replicaCharts(res)...),
		Notes:  notes,
	}
	return &Outcome{
		Name:    "run",
		Section: sec,
		JSON:    runJSON{Result: res, Claims: []report.Claim{}, Notes: notes},
	}, nil
}
