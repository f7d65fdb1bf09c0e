package experiment

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/retrystorm/retrystorm/report"
	"github.com/retrystorm/retrystorm/scenario"
	"github.com/retrystorm/retrystorm/sim"
)

const shedTitle = "Shed: deadlines, adaptive limits and throttling"

// Shed measures the defences that act on load rather than on retries: at
// the origin, deadline shedding and an adaptive concurrency limit against
// the storm's naive fleet; at the client, the adaptive throttle in place
// of the breaker, in the storm and against a partly broken origin.
var Shed = register(&Experiment{
	Name:    "shed",
	Title:   shedTitle,
	Summary: "deadline shedding and an adaptive limit at the origin, the adaptive throttle at the client",
	Order:   90,
	Page: Page{
		Knobs: shedKnobs,
		Cost:  50,
		Fixed: "The experiment turns the origin's deadline shedding and limit off and on itself, and breaks a share of the keys for the partial failure.",
	},
	Run: runShed,
})

// shedKnobs are the shed panel's: the storm's traffic and dip, the
// fleets' retries and policies, how the origin learns its limit and how
// eagerly the throttle refuses.
var shedKnobs = []string{"rate", "capacity", "dip", "dip_for", "max_retries", "budget_ratio", "breaker_threshold", "limit", "throttle_k"}

// shedBroken are the broken shares of the partial-failure part; the table
// shows shedBrokenShown.
var (
	shedBroken      = []float64{0.1, 0.2, 0.3, 0.4, 0.5}
	shedBrokenShown = 0.3
)

// shedRun is one row of the storm part: a fleet against one origin. Its
// summary and series are the run's fleet of the same name.
type shedRun struct {
	Name   string `json:"name"`
	Fleet  string `json:"fleet"`
	Origin string `json:"origin"`
	// GoodputDuring and GoodputAfter are the answers in time per tick,
	// during the trigger and after it.
	GoodputDuring float64     `json:"goodput_during"`
	GoodputAfter  float64     `json:"goodput_after"`
	Summary       sim.Summary `json:"-"`
	phrase        string      // the origin, in a sentence
}

// shedPartialRow is one policy against the partly broken origin.
type shedPartialRow struct {
	Broken            float64 `json:"broken"`
	Policy            string  `json:"policy"`
	Intents           int64   `json:"intents"`
	BreakerRefusals   int64   `json:"breaker_refusals"`
	ThrottleRefusals  int64   `json:"throttle_refusals"`
	Shed              float64 `json:"shed"` // refusals / intents
	AnswersThrownAway int64   `json:"answers_thrown_away"`
	IntentsLost       int64   `json:"intents_lost"`
}

// shedJSON is the JSON of `retrystorm shed`: the storm part as a run, with
// every fleet against every origin, its table, the partial failure, and
// the claims.
type shedJSON struct {
	*sim.Result
	Storm   []shedRun        `json:"storm"`
	Partial []shedPartialRow `json:"partial_failure"`
	Claims  []report.Claim   `json:"claims"`
}

// shedRoles are the scenario's fleets by what the experiment does with
// them.
type shedRoles struct {
	naive, breaker, throttle scenario.Fleet
}

func shedFleets(sc *scenario.Scenario) (shedRoles, error) {
	o := sc.Origin
	switch {
	case o.Model != scenario.ModelQueue && o.Model != scenario.ModelConcurrency:
		return shedRoles{}, fmt.Errorf("shed: the origin must be a queue or concurrency model; %s's is %s", sc.Name, o.Model)
	case !o.Shed.Deadline || o.Limit.Use == "" || o.Limit.Use == scenario.LimitNone:
		return shedRoles{}, fmt.Errorf("shed: the origin needs shed: {deadline: true} and a limit (the experiment turns each off in turn); %s's has neither or one", sc.Name)
	case o.DropExpired:
		return shedRoles{}, fmt.Errorf("shed: the origin must not drop_expired: the experiment compares it with shed: {deadline: true}")
	case len(sc.Fleets) != 3:
		return shedRoles{}, fmt.Errorf("shed: the scenario needs three fleets, the naive control, one with a breaker and one with the adaptive throttle; %s has %d", sc.Name, len(sc.Fleets))
	case sc.Fleets[1].Breaker.Use == "" || sc.Fleets[1].Breaker.Use == scenario.BreakerNone:
		return shedRoles{}, fmt.Errorf("shed: the second fleet (%s) needs a breaker", sc.Fleets[1].Name)
	case sc.Fleets[2].Throttle.Use != scenario.ThrottleAdaptive:
		return shedRoles{}, fmt.Errorf("shed: the third fleet (%s) needs throttle: {use: adaptive}", sc.Fleets[2].Name)
	}
	return shedRoles{naive: sc.Fleets[0], breaker: sc.Fleets[1], throttle: sc.Fleets[2]}, nil
}

// shedOrigin is the scenario's origin with its shedding and its limit each
// on or off.
type shedOrigin struct {
	label         string // in the table: "deadline shedding"
	phrase        string // in a sentence: "the origin with ..."
	shed, limited bool
}

func (v shedOrigin) apply(o scenario.Origin) scenario.Origin {
	if !v.shed {
		o.Shed = scenario.Shed{}
	}
	if !v.limited && o.Model != scenario.ModelCapacity {
		o.Limit = scenario.Limit{Use: scenario.LimitNone}
	}
	return o
}

func runShed(ctx context.Context, opts Options) (*Outcome, error) {
	sc, err := scenarioFor("shed", opts)
	if err != nil {
		return nil, err
	}
	roles, err := shedFleets(sc)
	if err != nil {
		return nil, err
	}
	limitName := sc.Origin.Limit.Use + " limit"
	origins := []shedOrigin{
		{label: "plain origin", phrase: "neither"},
		{label: "deadline shedding", phrase: "deadline shedding", shed: true},
		{label: limitName, phrase: "its " + limitName, limited: true},
		{label: "shedding + " + limitName, phrase: "both", shed: true, limited: true},
	}
	js := shedJSON{}
	// The naive fleet against each origin, then the breaker's fleet and
	// the throttle's against the plain one.
	type job struct {
		fleet  scenario.Fleet
		origin shedOrigin
	}
	var jobs []job
	for _, o := range origins {
		jobs = append(jobs, job{roles.naive, o})
	}
	jobs = append(jobs, job{roles.breaker, origins[0]}, job{roles.throttle, origins[0]})
	step := progressSteps(opts, len(jobs)+len(shedBroken))
	start, end := sim.TriggerTicks(sc)
	for _, j := range jobs {
		run := sc.Clone()
		run.Origin = j.origin.apply(sc.Origin)
		run.Fleets = []scenario.Fleet{j.fleet}
		res, err := opts.run(ctx, run)
		if err != nil {
			return nil, err
		}
		f := res.Fleets[0]
		f.Name = j.fleet.Name + ", " + j.origin.label
		if js.Result == nil {
			js.Result = res
			js.Fleets = nil
		}
		js.Fleets = append(js.Fleets, f)
		n := len(f.Series.Tick)
		js.Storm = append(js.Storm, shedRun{
			Name: f.Name, Fleet: j.fleet.Name, Origin: j.origin.label, phrase: j.origin.phrase,
			GoodputDuring: round1(mean(f.Series.Goodput, start, end)), GoodputAfter: round1(mean(f.Series.Goodput, end, n)),
			Summary: f.Summary,
		})
		step()
	}
	js.Result.Scenario = sc.Name
	budgetAlone := roles.breaker
	budgetAlone.Name = "budget alone"
	budgetAlone.Breaker = scenario.Breaker{Use: scenario.BreakerNone}
	partialFleets := []scenario.Fleet{budgetAlone, roles.breaker, roles.throttle}
	if js.Partial, err = shedPartial(ctx, opts, sc, partialFleets, step); err != nil {
		return nil, err
	}
	js.Claims = shedClaims(sc, js, partialFleets)
	sec := shedSection(sc, js, partialFleets)
	return &Outcome{Name: "shed", Claims: js.Claims, Section: sec, Findings: shedFindings(sc, js, partialFleets), JSON: js}, nil
}

// shedPartial runs the partial-failure fleets against a healthy origin
// with each share of its keys broken: the scenario's rate from one client,
// as in the breaker experiment, so that each policy sees all the traffic;
// a capacity origin with room to spare; no trigger.
func shedPartial(ctx context.Context, opts Options, sc *scenario.Scenario, fleets []scenario.Fleet, step func()) ([]shedPartialRow, error) {
	var out []shedPartialRow
	for _, b := range shedBroken {
		run := sc.Clone()
		run.Duration = min(run.Duration, 120*time.Second)
		run.Triggers = nil
		run.Traffic.Clients = 1
		run.Origin = scenario.Origin{
			Model: scenario.ModelCapacity, Capacity: math.Max(1000, 10*sc.Traffic.Rate), Latency: 10 * time.Millisecond,
			Broken: b, Replicas: 1,
		}
		run.Fleets = fleets
		res, err := opts.run(ctx, run)
		if err != nil {
			return nil, err
		}
		for _, f := range res.Fleets {
			s := f.Summary
			out = append(out, shedPartialRow{
				Broken: b, Policy: f.Name, Intents: s.Intents,
				BreakerRefusals: s.BreakerRefusals, ThrottleRefusals: s.ThrottleRefusals,
				Shed:              round3(float64(s.BreakerRefusals+s.ThrottleRefusals) / float64(max(s.Intents, 1))),
				AnswersThrownAway: s.AnswersThrownAway, IntentsLost: s.IntentsLost,
			})
		}
		step()
	}
	return out, nil
}

func shedRow(js shedJSON, i int) shedRun { return js.Storm[i] }

// shedAt returns the partial-failure row of policy at broken share b.
func shedAt(js shedJSON, b float64, policy string) shedPartialRow {
	for _, p := range js.Partial {
		if p.Broken == b && p.Policy == policy {
			return p
		}
	}
	return shedPartialRow{}
}

// dipCapacity returns the capacity per tick during the scenario's first
// capacity trigger, or false without one.
func dipCapacity(sc *scenario.Scenario, res *sim.Result) (float64, bool) {
	for _, t := range sc.Triggers {
		if t.Kind == scenario.TriggerCapacity {
			return perTick(t.Capacity, res), true
		}
	}
	return 0, false
}

func shedClaims(sc *scenario.Scenario, js shedJSON, partial []scenario.Fleet) []report.Claim {
	plain, shed, limited, both := shedRow(js, 0), shedRow(js, 1), shedRow(js, 2), shedRow(js, 3)
	breaker, throttle := shedRow(js, 4), shedRow(js, 5)
	recovered := func(r shedRun) map[string]any {
		return map[string]any{"recovered": r.Summary.Recovered, "recovery_ticks": r.Summary.RecoveryTicks}
	}
	cs := []report.Claim{
		report.Check(fmt.Sprintf("the %s fleet stays collapsed against the %s", plain.Fleet, plain.Origin),
			!plain.Summary.Recovered, recovered(plain), "%s", recoveryText(plain.Summary)),
	}
	for _, r := range []shedRun{shed, limited, both} {
		cs = append(cs, report.Check(fmt.Sprintf("the same %s fleet recovers against the origin with %s", r.Fleet, r.phrase),
			r.Summary.Recovered, recovered(r), "%s", recoveryText(r.Summary)))
	}
	if dip, ok := dipCapacity(sc, js.Result); ok {
		least := min(shed.GoodputDuring, limited.GoodputDuring, both.GoodputDuring)
		cs = append(cs, report.Check(fmt.Sprintf("with deadline shedding, %s or both, the origin answers in time, during the dip, at least three quarters of what the dip leaves it", limited.phrase),
			least >= 0.75*dip,
			map[string]any{"goodput_during": []float64{shed.GoodputDuring, limited.GoodputDuring, both.GoodputDuring}, "plain_goodput_during": plain.GoodputDuring, "dip_capacity_per_tick": dip},
			"%.1f, %.1f and %.1f answers in time per tick against a capacity of %g; the plain origin %.1f", shed.GoodputDuring, limited.GoodputDuring, both.GoodputDuring, dip, plain.GoodputDuring))
	}
	cs = append(cs, report.Check(fmt.Sprintf("with %s the origin answers the successes sooner than with deadline shedding alone: their p99 latency is lower", limited.phrase),
		limited.Summary.LatencyP99 < shed.Summary.LatencyP99,
		map[string]any{"latency_p99": round3(limited.Summary.LatencyP99), "shedding_latency_p99": round3(shed.Summary.LatencyP99)},
		"p99 %.2f s against %.2f s", limited.Summary.LatencyP99, shed.Summary.LatencyP99))
	b, t := breaker.Summary, throttle.Summary
	cs = append(cs, report.Check(fmt.Sprintf("against the %s, whose queue makes every answer late, the %s fleet recovers sooner than the %s fleet, whose throttle keeps refusing until its window has forgotten the failures", plain.Origin, breaker.Fleet, throttle.Fleet),
		b.Recovered && (!t.Recovered || *b.RecoveryTicks < *t.RecoveryTicks),
		map[string]any{"breaker_recovery_ticks": b.RecoveryTicks, "throttle_recovery_ticks": t.RecoveryTicks},
		"%s against %s", recoveryText(b), recoveryText(t)))

	// Partial failure.
	alone, br, th := shedAt(js, shedBrokenShown, partial[0].Name), shedAt(js, shedBrokenShown, partial[1].Name), shedAt(js, shedBrokenShown, partial[2].Name)
	pct := report.Percent(shedBrokenShown, 0)
	cs = append(cs,
		report.Check(fmt.Sprintf("with %s of the keys broken, %s sheds at most a tenth of the calls %s sheds", pct, policyPhrase(th.Policy, alone.Policy), policyPhrase(br.Policy, alone.Policy)),
			br.Shed > 0 && th.Shed <= br.Shed/10,
			map[string]any{"throttle_shed": th.Shed, "breaker_shed": br.Shed, "times_less": timesLess(th.Shed, br.Shed)},
			"%s of calls against %s: %s", report.Percent(th.Shed, 1), report.Percent(br.Shed, 1), timesLessText(th.Shed, br.Shed)),
		report.Check(fmt.Sprintf("with %s of the keys broken, %s throws away at most a tenth of the answers %s throws away", pct, policyPhrase(th.Policy, alone.Policy), policyPhrase(br.Policy, alone.Policy)),
			br.AnswersThrownAway > 0 && 10*th.AnswersThrownAway <= br.AnswersThrownAway,
			map[string]any{"throttle_thrown_away": th.AnswersThrownAway, "breaker_thrown_away": br.AnswersThrownAway},
			"%s against %s", report.Int(th.AnswersThrownAway), report.Int(br.AnswersThrownAway)),
		report.Check(fmt.Sprintf("with %s of the keys broken, %s loses about the intents %s loses (the broken keys'), and %s more", pct, policyPhrase(th.Policy, alone.Policy), policyPhrase(alone.Policy, alone.Policy), policyPhrase(br.Policy, alone.Policy)),
			math.Abs(float64(th.IntentsLost-alone.IntentsLost)) <= 0.02*float64(max(alone.Intents, 1)) && br.IntentsLost > alone.IntentsLost,
			map[string]any{"throttle_lost": th.IntentsLost, "budget_lost": alone.IntentsLost, "breaker_lost": br.IntentsLost},
			"%s, %s and %s intents lost", report.Int(th.IntentsLost), report.Int(alone.IntentsLost), report.Int(br.IntentsLost)),
	)
	return cs
}

// policyPhrase names a partial-failure policy in a sentence: "the budget
// alone", "the breaker fleet".
func policyPhrase(policy, budgetAlone string) string {
	if policy == budgetAlone {
		return "the " + policy
	}
	return "the " + policy + " fleet"
}

// timesLess is how many times b is a, for the JSON: nil when a is zero.
func timesLess(a, b float64) any {
	if a <= 0 {
		return nil
	}
	return round1(b / a)
}

func timesLessText(a, b float64) string {
	if a <= 0 {
		return "none at all"
	}
	return fmt.Sprintf("%.0f times less", b/a)
}

func shedSection(sc *scenario.Scenario, js shedJSON, partial []scenario.Fleet) report.Section {
	dashed := map[string]bool{js.Storm[0].Name: true}
	notes := []string{
		"Goodput is answers in time per tick, during the trigger and after it; failures count failed attempts and the calls a breaker or a throttle refused; p99 is the latency of the intents that succeeded, from arrival to answer, retries included.",
		"Both defences at the origin are resil's: the simulator drives a resil.Shedder (its DeadlineShedder and Limiter) on virtual time; the lab puts resilhttp.Shed in front of its origin.",
	}
	if limited, both := js.Fleets[2], js.Fleets[3]; sameJSON(limited.Summary, both.Summary) && sameJSON(limited.Series, both.Series) {
		notes = append(notes, fmt.Sprintf("With the %s alone the origin's queue stays short enough that deadline shedding, added to it, changes nothing: the two runs are the same, tick for tick.", js.Storm[2].Origin))
	}
	return report.Section{
		ID:    "shed",
		Title: shedTitle,
		Intro: []string{
			fmt.Sprintf("%s: %g intents/s over %d clients against a %s origin (capacity %g/s, %d workers); %s. The %s fleet runs against the origin with neither defence, with deadline shedding (every attempt tells the origin when its client stops waiting; the origin refuses at once what it cannot answer in time), with an adaptive concurrency limit (%s: the origin learns from latency how many requests it may hold, and refuses the rest at once), and with both. The guarded fleet runs with its breaker, and with the adaptive throttle instead.",
				sc.Name, sc.Traffic.Rate, sc.Traffic.Clients, sc.Origin.Model, sc.Origin.Capacity, sc.Origin.Workers, describeTriggers(sc), js.Storm[0].Fleet, sc.Origin.Limit.Use),
			fmt.Sprintf("Partial failure: the same rate from one client (as in the breaker experiment) against a healthy origin with a share of its keys broken; %s, %s (a breaker) and %s (the adaptive throttle, which refuses with probability (requests − K × accepts) / (requests + 1)): traffic shed and answers thrown away, counted from ground truth.",
				partial[0].Name, partial[1].Name, partial[2].Name),
		},
		Tables: []report.Table{shedStormTable(js), shedPartialTable(js)},
		Claims: js.Claims,
		Charts: append(runCharts(js.Result, sc, dashed), shedPartialCharts(js)...),
		Notes:  notes,
	}
}

func shedStormTable(js shedJSON) report.Table {
	t := report.Table{
		Title: "The storm: each fleet against each origin",
		Columns: []report.Column{
			{Name: "fleet, origin"}, {Name: "recovery", Align: report.Right},
			{Name: "good/tick dip", Align: report.Right}, {Name: "after", Align: report.Right},
			{Name: "failures", Align: report.Right}, {Name: "lost", Align: report.Right}, {Name: "p99", Align: report.Right},
		},
		Emphasis: map[[2]int]bool{},
	}
	for i, r := range js.Storm {
		s := r.Summary
		t.Rows = append(t.Rows, []string{
			r.Name, recoveryText(s), report.Float(r.GoodputDuring, 1), report.Float(r.GoodputAfter, 1),
			report.Int(s.Failures), report.Int(s.IntentsLost), fmt.Sprintf("%.2f s", s.LatencyP99),
		})
		if !s.Recovered {
			t.Emphasis[[2]int{i, 1}] = true
		}
	}
	return t
}

func shedPartialTable(js shedJSON) report.Table {
	t := report.Table{
		Title: fmt.Sprintf("Partial failure: %s of the keys broken", report.Percent(shedBrokenShown, 0)),
		Columns: []report.Column{{Name: "policy"}, {Name: "shed", Align: report.Right},
			{Name: "thrown away", Align: report.Right}, {Name: "lost", Align: report.Right}},
	}
	for _, p := range js.Partial {
		if p.Broken == shedBrokenShown {
			t.Rows = append(t.Rows, []string{p.Policy, report.Percent(p.Shed, 1), report.Int(p.AnswersThrownAway), report.Int(p.IntentsLost)})
		}
	}
	return t
}

func shedPartialCharts(js shedJSON) []report.Chart {
	shed := report.Chart{Title: "Partial failure: share of calls refused locally", XLabel: "broken share of keys (%)", YLabel: "refused / calls", Percent: true}
	thrown := report.Chart{Title: "Partial failure: answers thrown away", XLabel: "broken share of keys (%)", YLabel: "refused calls that would have succeeded"}
	for _, b := range shedBroken {
		shed.X = append(shed.X, 100*b)
		thrown.X = append(thrown.X, 100*b)
	}
	var names []string
	by := map[string][]shedPartialRow{}
	for _, p := range js.Partial {
		if _, ok := by[p.Policy]; !ok {
			names = append(names, p.Policy)
		}
		by[p.Policy] = append(by[p.Policy], p)
	}
	for _, n := range names {
		var s, th []float64
		for _, p := range by[n] {
			s = append(s, p.Shed)
			th = append(th, float64(p.AnswersThrownAway))
		}
		shed.Lines = append(shed.Lines, report.Line{Name: n, Y: s})
		thrown.Lines = append(thrown.Lines, report.Line{Name: n, Y: th})
	}
	return []report.Chart{shed, thrown}
}

func shedFindings(sc *scenario.Scenario, js shedJSON, partial []scenario.Fleet) []string {
	plain, shed, limited, both := shedRow(js, 0), shedRow(js, 1), shedRow(js, 2), shedRow(js, 3)
	breaker, throttle := shedRow(js, 4), shedRow(js, 5)
	out := []string{
		fmt.Sprintf("Shed: after %s, the %s fleet %s against the %s; against the origin with deadline shedding it %s, with %s it %s, with both it %s. Answers in time per tick during the dip: %.1f, %.1f, %.1f and %.1f; p99 latency of the successes: %.2f s, %.2f s, %.2f s and %.2f s.",
			describeTriggers(sc), plain.Fleet, recoveredPhrase(plain.Summary), plain.Origin,
			recoveredPhrase(shed.Summary), limited.phrase, recoveredPhrase(limited.Summary), recoveredPhrase(both.Summary),
			plain.GoodputDuring, shed.GoodputDuring, limited.GoodputDuring, both.GoodputDuring,
			plain.Summary.LatencyP99, shed.Summary.LatencyP99, limited.Summary.LatencyP99, both.Summary.LatencyP99),
		fmt.Sprintf("Shed: against the %s, the %s fleet %s and lost %s intents; with the adaptive throttle instead of the breaker it %s and lost %s.",
			plain.Origin, breaker.Fleet, recoveredPhrase(breaker.Summary), report.Int(breaker.Summary.IntentsLost),
			recoveredPhrase(throttle.Summary), report.Int(throttle.Summary.IntentsLost)),
	}
	for _, p := range partial {
		r := shedAt(js, shedBrokenShown, p.Name)
		out = append(out, fmt.Sprintf("Shed: with %s of the keys broken, %s shed %s of calls, threw away %s answers that existed and lost %s intents.",
			report.Percent(shedBrokenShown, 0), policyPhrase(r.Policy, partial[0].Name), report.Percent(r.Shed, 1), report.Int(r.AnswersThrownAway), report.Int(r.IntentsLost)))
	}
	return out
}

// sameJSON reports whether a and b encode to the same JSON: for results,
// which are plain data, that is equality, without reflect.DeepEqual's code
// in the page's module.
func sameJSON(a, b any) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}
