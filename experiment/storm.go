package experiment

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/retrystorm/retrystorm/report"
	"github.com/retrystorm/retrystorm/scenario"
	"github.com/retrystorm/retrystorm/sim"
)

// Storm is the experiment the project exists for: a short blip against a
// queueing origin; the naive fleet stays collapsed after the blip ends,
// the guarded fleet recovers, and the same naive fleet recovers too when the
// origin drops the requests whose client gave up.
var Storm = register(&Experiment{
	Name:    "storm",
	Title:   stormTitle,
	Summary: "naive vs guarded against a queueing origin, and the drop_expired counterfactual",
	Order:   10,
	Page: Page{
		Knobs: scenarioKnobs,
		Cost:  40,
	},
	Run: runStorm,
})

const stormTitle = "Storm: a blip, a naive fleet and a guarded one"

// stormFewTicks is what "recovers within a few ticks" means.
const stormFewTicks = 5

func runStorm(ctx context.Context, opts Options) (*Outcome, error) {
	sc, err := scenarioFor("storm", opts)
	if err != nil {
		return nil, err
	}
	if len(sc.Fleets) < 2 {
		return nil, fmt.Errorf("storm: the scenario needs two fleets, the control (naive) first and the guarded one second; %s has %d", sc.Name, len(sc.Fleets))
	}
	res, err := opts.run(ctx, sc)
	if err != nil {
		return nil, err
	}
	var notes []string
	cf, cfName := StormCounterfactual(sc)
	if cf != nil {
		cfRes, err := opts.run(ctx, cf)
		if err != nil {
			return nil, err
		}
		f := cfRes.Fleets[0]
		f.Name = cfName
		res.Fleets = append(res.Fleets, f)
	} else {
		notes = append(notes, noCounterfactual)
	}
	naive, guarded := res.Fleets[0], res.Fleets[1]
	claims := stormClaims(sc, res, cfName)
	sec := report.Section{
		ID:    "storm",
		Title: stormTitle,
		Intro: []string{
			fmt.Sprintf("%s: %s over %d clients against a %s origin (capacity %g/s, %d workers, timeout %s); %s.",
				sc.Name, describeRate(sc), sc.Traffic.Clients, sc.Origin.Model, sc.Origin.Capacity, sc.Origin.Workers, sc.Fleets[0].Timeout, describeTriggers(sc)),
			"A queue longer than capacity × timeout makes every answer late: the client has already given up, retries, and the retry joins the same queue. The workers stay busy serving requests nobody waits for.",
		},
		Tables: []report.Table{stormTable(res)},
		Claims: claims,
		Charts: runCharts(res, sc, map[string]bool{naive.Name: true, cfName: true}),
		Notes:  append(notes, "r/req is retries per intent over the run; after counts failures in the ticks after the trigger ended; recovery counts ticks from the trigger's end until the failure share stays within 1 point of its pre-trigger level."),
	}
	findings := []string{stormFinding(sc, res, naive, guarded, cfName)}
	return &Outcome{
		Name:     "storm",
		Claims:   claims,
		Section:  sec,
		Findings: findings,
		JSON:     runJSON{Result: res, Claims: claims, Notes: notes},
	}, nil
}

const noCounterfactual = "The drop_expired counterfactual needs a queue origin that does not already drop expired requests; it was not run."

// StormCounterfactual returns the storm's counterfactual, the control (the
// first fleet) against the same origin dropping the requests whose client
// already gave up, and the name its fleet is reported under. It is nil
// when the origin is not a queue or already drops them.
func StormCounterfactual(sc *scenario.Scenario) (*scenario.Scenario, string) {
	if sc.Origin.Model != scenario.ModelQueue || sc.Origin.DropExpired || len(sc.Fleets) == 0 {
		return nil, ""
	}
	cf := sc.Clone()
	cf.Origin.DropExpired = true
	cf.Fleets = cf.Fleets[:1]
	return cf, sc.Fleets[0].Name + ", drop_expired"
}

// ShedCounterfactual returns the lab's counterfactual: the control (the
// first fleet) against the same origin shedding by deadline (shed:
// {deadline: true}, which the lab's origin applies with resilhttp.Shed in
// front of its handler and its queue asks again when a worker would take a
// request), and the name its fleet is reported under. It is nil when the
// origin holds no requests (the capacity model), already sheds, or drops
// expired requests.
func ShedCounterfactual(sc *scenario.Scenario) (*scenario.Scenario, string) {
	o := sc.Origin
	if (o.Model != scenario.ModelQueue && o.Model != scenario.ModelConcurrency) || o.Shed.Deadline || o.DropExpired || len(sc.Fleets) == 0 {
		return nil, ""
	}
	cf := sc.Clone()
	cf.Origin.Shed = scenario.Shed{Deadline: true}
	cf.Fleets = cf.Fleets[:1]
	return cf, sc.Fleets[0].Name + shedSuffix
}

// shedSuffix ends the name of ShedCounterfactual's fleet.
const shedSuffix = ", deadline shedding"

// counterfactualPhrase says what the origin of the counterfactual named
// cfName does differently.
func counterfactualPhrase(cfName string) string {
	if strings.HasSuffix(cfName, shedSuffix) {
		return "sheds by deadline"
	}
	return "drops expired requests"
}

func stormTable(res *sim.Result) report.Table {
	t := report.Table{
		Columns: []report.Column{
			{Name: "fleet"}, {Name: "peak", Align: report.Right}, {Name: "r/req", Align: report.Right},
			{Name: "goodput", Align: report.Right}, {Name: "failures", Align: report.Right},
			{Name: "after", Align: report.Right}, {Name: "recovery", Align: report.Right}, {Name: "lost", Align: report.Right},
		},
		Emphasis: map[[2]int]bool{},
	}
	for i, f := range res.Fleets {
		s := f.Summary
		t.Rows = append(t.Rows, []string{
			f.Name, report.Int(s.PeakOffered), report.Float(s.RetriesPerRequest, 3),
			report.Int(s.Goodput), report.Int(s.Failures), report.Int(s.FailuresAfterClear),
			recoveryText(s), report.Int(s.IntentsLost),
		})
		if !s.Recovered {
			t.Emphasis[[2]int{i, 6}] = true
		}
	}
	return t
}

func stormClaims(sc *scenario.Scenario, res *sim.Result, cfName string) []report.Claim {
	naive, guarded := res.Fleets[0], res.Fleets[1]
	end := triggerEndTick(res)
	n := len(naive.Series.Tick)
	// The second half of what follows the trigger: long past the blip.
	late := end + (n-end)/2
	rate := perTick(sc.Traffic.Rate, res)
	goodLate := mean(naive.Series.Goodput, late, n)
	offLate := mean(naive.Series.Offered, late, n)
	amplified := rate * float64(1+max(sc.Fleets[0].Retry.MaxRetries, 0))
	claims := []report.Claim{
		report.Check(fmt.Sprintf("%s stays collapsed after the trigger ends", naive.Name),
			!naive.Summary.Recovered, map[string]any{"recovered": naive.Summary.Recovered},
			"recovered: %v", naive.Summary.Recovered),
		report.Check(fmt.Sprintf("%s's goodput stays near zero long after the trigger", naive.Name),
			goodLate < 0.1*rate, map[string]any{"goodput_per_tick": round1(goodLate), "rate_per_tick": rate},
			"%.1f answers in time per tick in the last %d ticks, against %g intents", goodLate, n-late, rate),
		report.Check(fmt.Sprintf("%s's offered load sits near (1 + retries) × rate", naive.Name),
			offLate >= 0.9*amplified, map[string]any{"offered_per_tick": round1(offLate), "amplified_per_tick": amplified},
			"%.0f attempts per tick against %.0f", offLate, amplified),
	}
	g := guarded.Summary
	claims = append(claims, report.Check(fmt.Sprintf("%s recovers within %d ticks", guarded.Name, stormFewTicks),
		g.Recovered && *g.RecoveryTicks <= stormFewTicks, map[string]any{"recovered": g.Recovered, "recovery_ticks": g.RecoveryTicks},
		"%s", recoveryText(g)))
	if ratio, ok := budgetRatio(sc.Fleets[1]); ok {
		claims = append(claims, report.Check(fmt.Sprintf("%s's retries/requests stays near its budget ratio %g", guarded.Name, ratio),
			g.RetriesPerRequest <= ratio, map[string]any{"retries_per_request": round3(g.RetriesPerRequest), "budget_ratio": ratio},
			"%.3f over the run", g.RetriesPerRequest))
	}
	peak := maxOf(naive.Series.RetriesPerRequest)
	claims = append(claims, report.Check(fmt.Sprintf("%s's retries/requests passes 1", naive.Name),
		peak > 1, map[string]any{"peak_retries_per_request": round3(peak)},
		"peak %.2f per tick, %.2f over the run", peak, naive.Summary.RetriesPerRequest))
	if cfName != "" {
		cf := res.Fleets[2].Summary
		claims = append(claims, report.Check(fmt.Sprintf("the same %s fleet recovers when the origin %s", naive.Name, counterfactualPhrase(cfName)),
			cf.Recovered, map[string]any{"recovered": cf.Recovered, "recovery_ticks": cf.RecoveryTicks},
			"%s", recoveryText(cf)))
	}
	return claims
}

// budgetRatio returns the ratio of a fleet's token bucket or window budget.
func budgetRatio(f scenario.Fleet) (float64, bool) {
	switch f.Budget.Use {
	case scenario.BudgetTokenBucket, scenario.BudgetWindow:
		return f.Budget.Ratio(), true
	}
	return 0, false
}

func stormFinding(sc *scenario.Scenario, res *sim.Result, naive, guarded sim.FleetResult, cfName string) string {
	end := triggerEndTick(res)
	n := len(naive.Series.Tick)
	s := fmt.Sprintf("Storm: after %s, the %s fleet %s (goodput %.1f per tick over the last %d ticks, offered load %.0f per tick, retries/requests %.2f), while the %s fleet %s with retries/requests %.3f",
		describeTriggers(sc), naive.Name, recoveredPhrase(naive.Summary),
		mean(naive.Series.Goodput, end+(n-end)/2, n), n-(end+(n-end)/2), mean(naive.Series.Offered, end+(n-end)/2, n), naive.Summary.RetriesPerRequest,
		guarded.Name, recoveredPhrase(guarded.Summary), guarded.Summary.RetriesPerRequest)
	if cfName != "" {
		s += fmt.Sprintf("; against an origin that %s, the same %s fleet %s", counterfactualPhrase(cfName), naive.Name, recoveredPhrase(res.Fleets[2].Summary))
	}
	return s + "."
}

func recoveredPhrase(s sim.Summary) string {
	switch {
	case s.NeverHealthy:
		return fmt.Sprintf("was never healthy (%s of its tries failed before the trigger)", report.Percent(s.BaselineErrorRate, 0))
	case !s.Recovered:
		return "never recovered"
	case *s.RecoveryTicks == 0:
		return "recovered at once"
	case *s.RecoveryTicks == 1:
		return "recovered in 1 tick"
	}
	return fmt.Sprintf("recovered in %d ticks", *s.RecoveryTicks)
}

// describeRate says what the intent rate is, in words: "100 intents/s",
// or where a rate series comes from and its peak.
func describeRate(sc *scenario.Scenario) string {
	if sr := sc.Traffic.Series; sr != nil {
		from := "a rate series"
		if sr.File != "" {
			from += " from " + filepath.Base(sr.File)
		}
		return fmt.Sprintf("%s (at most %g intents/s)", from, sr.Peak())
	}
	return fmt.Sprintf("%g intents/s", sc.Traffic.Rate)
}

// describeTriggers says what the triggers do, in words.
func describeTriggers(sc *scenario.Scenario) string {
	if len(sc.Triggers) == 0 {
		return "no trigger"
	}
	s := ""
	for i, t := range sc.Triggers {
		if i > 0 {
			s += " and "
		}
		switch t.Kind {
		case scenario.TriggerCapacity:
			s += fmt.Sprintf("a capacity dip to %g/s", t.Capacity)
		case scenario.TriggerErrors:
			s += fmt.Sprintf("a %g%% error blip", 100*t.ErrorRate)
		case scenario.TriggerOutage:
			s += "an outage"
			if t.Mode != "" && t.Mode != scenario.OutageBlackhole {
				s += fmt.Sprintf(" (%s)", t.Mode) // the default reads as before
			}
		case scenario.TriggerLoad:
			s += fmt.Sprintf("a load change to %g intents/s", t.Rate)
		case scenario.TriggerLatency:
			s += fmt.Sprintf("latency ×%g", t.Factor)
		default:
			s += describeNewTrigger(t) // cacheview.go
			if t.Kind == scenario.TriggerFlush && t.For == 0 {
				s += fmt.Sprintf(" at %s", t.At)
				continue
			}
		}
		s += fmt.Sprintf(" from %s for %s", t.At, t.For)
	}
	return s
}
