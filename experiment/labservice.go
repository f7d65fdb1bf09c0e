package experiment

import (
	"encoding/json"
	"fmt"

	"github.com/retrystorm/retrystorm/report"
	"github.com/retrystorm/retrystorm/scenario"
	"github.com/retrystorm/retrystorm/sim"
)

// LabAboutService makes out, a run against a target whose origin was not
// imposed, a verdict about the service: what the target did per fleet
// (its amplification, recovery and lost intents) in a table of its own,
// claims that rest on that alone (each fleet's amplification within its
// policy's ceiling; each guarded fleet recovers), and the comparison with
// the scenario's modelled origin moved to a labelled section of notes,
// claimed nowhere: the model of the service is the user's guess, and a
// fast service that outruns it is no failure of the service. The lab
// applies it to a run, merge to the merged shards of one.
func LabAboutService(out *Outcome, sc *scenario.Scenario, res *sim.Result) error {
	model, err := aboutService(out, sc, res)
	if err != nil {
		return err
	}
	return SetJSON(out, map[string]any{"claims": out.Claims, "model_comparison": model})
}

// aboutService is LabAboutService but for the JSON: it returns the model's
// claims, now a comparison, for the caller's JSON.
func aboutService(out *Outcome, sc *scenario.Scenario, res *sim.Result) ([]report.Claim, error) {
	model := out.Claims
	t := report.Table{
		Title: "at the target: what the service did",
		Columns: []report.Column{
			{Name: "fleet"}, {Name: "attempts/intent", Align: report.Right}, {Name: "r/req", Align: report.Right},
			{Name: "recovery", Align: report.Right}, {Name: "lost", Align: report.Right}, {Name: "victims", Align: report.Right},
		},
	}
	var claims []report.Claim
	for i, f := range res.Fleets {
		s := f.Summary
		amp := float64(s.Attempts) / float64(max(s.Intents, 1))
		rec := "never"
		if s.Recovered && s.RecoveryTicks != nil {
			rec = fmt.Sprintf("+%d", *s.RecoveryTicks)
		}
		t.Rows = append(t.Rows, []string{f.Name, report.Float(amp, 2), report.Float(s.RetriesPerRequest, 3), rec, report.Int(s.IntentsLost), report.Int(s.Victims)})
		if i >= len(sc.Fleets) {
			continue // the storm's counterfactual: not run against a target
		}
		fl := sc.Fleets[i]
		p, err := fl.NewPolicy()
		if err != nil {
			return nil, err
		}
		// The ceiling per intent, with the budget's floor spread over
		// the run's intents and 5% for what a short run's steady state
		// does not reach.
		ceiling := p.Ceiling(1) + fl.Budget.TokenBucket.MinTokens/float64(max(s.Intents, 1))
		if allowed := ceiling * 1.05; allowed < 1e9 {
			claims = append(claims, report.Check(
				fmt.Sprintf("%s sent the target at most %.2f attempts per intent, as its policy bounds it", f.Name, ceiling),
				amp <= allowed,
				map[string]any{"attempts_per_intent": round3(amp), "ceiling": round3(ceiling)},
				"%d attempts for %d intents: %.2f per intent", s.Attempts, s.Intents, amp))
		}
		if fl.Budget.Use != scenario.BudgetNone || fl.Breaker.Use != scenario.BreakerNone {
			claims = append(claims, report.Check(
				fmt.Sprintf("%s (guarded) recovers at the target after the trigger ends", f.Name),
				s.Recovered,
				map[string]any{"recovered": s.Recovered, "recovery_ticks": s.RecoveryTicks},
				"recovery %s, %d intents lost, %d victims", rec, s.IntentsLost, s.Victims))
		}
	}
	out.Claims, out.Section.Claims = claims, claims
	out.Section.Intro = append(out.Section.Intro, "Without --impose the claims are about the service: what the target did with each fleet's load (its amplification, its recovery, the intents lost). The simulator's run of the scenario's origin, a model of the service, is set beside it for comparison only, and no claim rests on it.")
	out.Section.Tables = append([]report.Table{t}, out.Section.Tables...)
	out.Section.Notes = append(out.Section.Notes, "Model comparison, not claimed (without --impose the scenario's origin is a model of the service, and the service is what is judged): the tables and charts of the simulator above, and:")
	for _, c := range model {
		mark := "as modelled"
		if !c.Holds {
			mark = "not as modelled"
		}
		out.Section.Notes = append(out.Section.Notes, fmt.Sprintf("Model comparison (%s): %s (%s).", mark, c.Text, c.Detail))
	}
	return model, nil
}

// SetJSON sets top-level keys of out's JSON (the lab adds its own).
func SetJSON(out *Outcome, kv map[string]any) error {
	data, err := json.Marshal(out.JSON)
	if err != nil {
		return err
	}
	var js map[string]json.RawMessage
	if err := json.Unmarshal(data, &js); err != nil {
		return err
	}
	for k, v := range kv {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		js[k] = b
	}
	out.JSON = js
	return nil
}
