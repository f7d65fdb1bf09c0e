package experiment

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/retrystorm/retrystorm/report"
	"github.com/retrystorm/retrystorm/resil/budget"
	"github.com/retrystorm/retrystorm/scenario"
)

const breakerTitle = "Breakers: false trips, and the cost of one lever"

// Breaker measures what circuit breakers cost: how often they open against
// a healthy origin with background errors, and what they shed when the
// origin is partly broken, counted from ground truth.
var Breaker = register(&Experiment{
	Name:    "breaker",
	Title:   breakerTitle,
	Summary: "false trips against background errors, and traffic shed under partial failure",
	Order:   40,
	Page: Page{
		Heavy: true,
		Cost:  700,
		Fixed: "Each breaker is run against background error rates from 0 to 30% and against a partly broken origin; the rates and shares are the experiment's own. Change the seed to draw them again.",
	},
	Run: runBreaker,
})

var (
	breakerErrorRates = []float64{0, 0.01, 0.02, 0.05, 0.1, 0.15, 0.2, 0.3}
	breakerBroken     = []float64{0.1, 0.2, 0.3, 0.4, 0.5}
)

// falseTripsRow is one breaker's trips at each background error rate.
type falseTripsRow struct {
	Breaker string    `json:"breaker"`
	Trips   []int64   `json:"trips"`
	Calls   []int64   `json:"calls"`
	Per10k  []float64 `json:"trips_per_10k_calls"`
	// FirstRate is the lowest error rate at which it opened at all; nil
	// when it never did.
	FirstRate *float64 `json:"first_error_rate"`
}

// partialFailureRow is one policy at one broken share.
type partialFailureRow struct {
	Broken            float64 `json:"broken"`
	Policy            string  `json:"policy"`
	Intents           int64   `json:"intents"`
	Refused           int64   `json:"breaker_refusals"`
	Shed              float64 `json:"shed"` // refusals / intents
	AnswersThrownAway int64   `json:"answers_thrown_away"`
	IntentsLost       int64   `json:"intents_lost"`
}

type breakerJSON struct {
	Scenario   string              `json:"scenario"`
	Seed       uint64              `json:"seed"`
	ErrorRates []float64           `json:"error_rates"`
	FalseTrips []falseTripsRow     `json:"false_trips"`
	Partial    []partialFailureRow `json:"partial_failure"`
	Claims     []report.Claim      `json:"claims"`
}

// runBreaker runs both parts of the experiment, false trips then partial
// failure, and reports them.
func runBreaker(ctx context.Context, opts Options) (*Outcome, error) {
	sc, err := scenarioFor("breaker", opts)
	if err != nil {
		return nil, err
	}
	breakers, err := breakerFleets(sc)
	if err != nil {
		return nil, err
	}
	step := progressSteps(opts, len(breakerErrorRates)+len(breakerBroken))
	js := breakerJSON{Scenario: sc.Name, Seed: sc.Seed, ErrorRates: breakerErrorRates}
	if js.FalseTrips, err = falseTrips(ctx, opts, sc, breakers, step); err != nil {
		return nil, err
	}
	partialFleets := partialPolicies(breakers[0].Timeout)
	if js.Partial, err = partialFailure(ctx, opts, sc, partialFleets, step); err != nil {
		return nil, err
	}
	js.Claims = breakerClaims(js, partialFleets)
	sec := breakerSection(sc, js, partialFleets)
	return &Outcome{Name: "breaker", Claims: js.Claims, Section: sec, Findings: breakerFindings(js), JSON: js}, nil
}

// breakerFleets returns the scenario's fleets that have a breaker: the
// breakers under test.
func breakerFleets(sc *scenario.Scenario) ([]scenario.Fleet, error) {
	var breakers []scenario.Fleet
	for _, f := range sc.Fleets {
		if f.Breaker.Use != "" && f.Breaker.Use != scenario.BreakerNone {
			breakers = append(breakers, f)
		}
	}
	if len(breakers) == 0 {
		return nil, fmt.Errorf("breaker: the scenario has no fleet with a breaker")
	}
	return breakers, nil
}

// progressSteps returns a function that reports one more of total steps done
// to opts.Progress, if set.
func progressSteps(opts Options, total int) func() {
	done := 0
	return func() {
		done++
		if opts.Progress != nil {
			opts.Progress(done, total)
		}
	}
}

// falseTrips runs the breakers against the healthy origin at each
// background error rate and counts how often each opened.
func falseTrips(ctx context.Context, opts Options, sc *scenario.Scenario, breakers []scenario.Fleet, step func()) ([]falseTripsRow, error) {
	out := make([]falseTripsRow, len(breakers))
	for i, f := range breakers {
		out[i].Breaker = f.Name
	}
	for _, p := range breakerErrorRates {
		run := sc.Clone()
		run.Fleets = breakers
		run.Origin.ErrorRate = 1 - (1-sc.Origin.ErrorRate)*(1-p)
		res, err := opts.run(ctx, run)
		if err != nil {
			return nil, err
		}
		for i, f := range res.Fleets {
			ft := &out[i]
			s := f.Summary
			ft.Trips = append(ft.Trips, s.BreakerTrips)
			ft.Calls = append(ft.Calls, s.Intents)
			ft.Per10k = append(ft.Per10k, round3(1e4*float64(s.BreakerTrips)/float64(max(s.Intents, 1))))
			if s.BreakerTrips > 0 && ft.FirstRate == nil {
				r := p
				ft.FirstRate = &r
			}
		}
		step()
	}
	return out, nil
}

// partialFailure runs the partial-failure fleets against the origin with
// each share of its keys broken, and counts what they shed.
func partialFailure(ctx context.Context, opts Options, sc *scenario.Scenario, fleets []scenario.Fleet, step func()) ([]partialFailureRow, error) {
	var out []partialFailureRow
	for _, b := range breakerBroken {
		run := sc.Clone()
		run.Duration = min(run.Duration, 120*time.Second)
		run.Origin.Broken = b
		run.Fleets = fleets
		res, err := opts.run(ctx, run)
		if err != nil {
			return nil, err
		}
		for _, f := range res.Fleets {
			s := f.Summary
			out = append(out, partialFailureRow{
				Broken: b, Policy: f.Name, Intents: s.Intents, Refused: s.BreakerRefusals,
				Shed:              round3(float64(s.BreakerRefusals) / float64(max(s.Intents, 1))),
				AnswersThrownAway: s.AnswersThrownAway, IntentsLost: s.IntentsLost,
			})
		}
		step()
	}
	return out, nil
}

// breakerSection is the experiment's report: what was run, the tables,
// the claims and the charts.
func breakerSection(sc *scenario.Scenario, js breakerJSON, partialFleets []scenario.Fleet) report.Section {
	calls := int64(0)
	if len(js.FalseTrips[0].Calls) > 0 {
		calls = js.FalseTrips[0].Calls[0]
	}
	return report.Section{
		ID:    "breaker",
		Title: breakerTitle,
		Intro: []string{
			fmt.Sprintf("False trips: %s calls over %s from one client, no retries, against a healthy origin that fails a background share of calls at random. How often does each breaker open?",
				report.Int(calls), sc.Duration),
			fmt.Sprintf("Partial failure: a share of the keys always fails (a broken shard). Three policies with 3 retries and a %g retry budget: the budget alone, with a breaker that opens after %d failures in a row, and with that breaker guarding retries only. Answers thrown away are refused calls whose ground-truth outcome was success.",
				partialFleets[0].Budget.Ratio(), partialFleets[1].Breaker.Threshold),
		},
		Tables: []report.Table{falseTripTable(js), partialTable(js)},
		Claims: js.Claims,
		Charts: breakerCharts(js),
		Notes:  []string{"A breaker has one lever: all or nothing. Against a dependency that is partly broken it cannot tell the broken keys from the healthy ones, so it sheds both."},
	}
}

// partialPolicies are the three fleets of the partial-failure part, with
// the storm's guarded retries, budget and breaker: a budget alone, with
// the breaker, and with the breaker on retries only.
func partialPolicies(timeout time.Duration) []scenario.Fleet {
	base := scenario.Fleet{
		Name:    "budget alone",
		Timeout: timeout,
		Retry: scenario.Retry{MaxRetries: 3, Backoff: scenario.Backoff{
			Use: "exponential", Base: 100 * time.Millisecond, Cap: 10 * time.Second, Multiplier: 2, Jitter: "full"}},
		Budget: scenario.Budget{Use: scenario.BudgetTokenBucket, TokenBucket: budget.TokenBucketSettings{Ratio: 0.1, Funding: budget.FundedBySuccess, MinTokens: 10, MaxTokens: 100, RetryCost: 1, TimeoutCost: 1}},
	}
	all := base
	all.Name = "budget + breaker"
	all.Breaker = scenario.Breaker{Use: scenario.BreakerConsecutive, Threshold: 5, Cooldown: 5 * time.Second, Probes: 1, Scope: "all"}
	retries := all
	retries.Name = "breaker on retries only"
	retries.Breaker.Scope = "retries"
	return []scenario.Fleet{base, all, retries}
}

func falseTripTable(js breakerJSON) report.Table {
	t := report.Table{Title: "Trips per 10,000 calls, by background error rate", Columns: []report.Column{{Name: "breaker"}}, Emphasis: map[[2]int]bool{}}
	for _, p := range js.ErrorRates {
		t.Columns = append(t.Columns, report.Column{Name: report.Percent(p, 0), Align: report.Right})
	}
	t.Columns = append(t.Columns, report.Column{Name: "first", Align: report.Right})
	for i, ft := range js.FalseTrips {
		row := []string{ft.Breaker}
		for j, v := range ft.Per10k {
			row = append(row, trimNum(v))
			if v > 0 {
				t.Emphasis[[2]int{i, j + 1}] = true
			}
		}
		first := "never"
		if ft.FirstRate != nil {
			first = report.Percent(*ft.FirstRate, 0)
		}
		t.Rows = append(t.Rows, append(row, first))
	}
	return t
}

func trimNum(v float64) string {
	if v == float64(int64(v)) {
		return report.Int(int64(v))
	}
	if v < 10 {
		return report.Float(v, 1)
	}
	return report.Float(v, 0)
}

func partialTable(js breakerJSON) report.Table {
	t := report.Table{
		Title: "Partial failure: what each policy shed",
		Columns: []report.Column{{Name: "broken", Align: report.Right}, {Name: "policy"}, {Name: "shed", Align: report.Right},
			{Name: "thrown away", Align: report.Right}, {Name: "lost", Align: report.Right}},
	}
	for i, p := range js.Partial {
		b := ""
		if i == 0 || js.Partial[i-1].Broken != p.Broken {
			b = report.Percent(p.Broken, 0)
		}
		t.Rows = append(t.Rows, []string{b, p.Policy, report.Percent(p.Shed, 0), report.Int(p.AnswersThrownAway), report.Int(p.IntentsLost)})
	}
	return t
}

func breakerCharts(js breakerJSON) []report.Chart {
	trips := report.Chart{Title: "False trips against background error rate", XLabel: "background error rate (%)", YLabel: "trips / 10,000 calls"}
	for _, p := range js.ErrorRates {
		trips.X = append(trips.X, 100*p)
	}
	for _, ft := range js.FalseTrips {
		trips.Lines = append(trips.Lines, report.Line{Name: ft.Breaker, Y: ft.Per10k})
	}
	shed := report.Chart{Title: "Partial failure: share of calls the breaker refused", XLabel: "broken share of keys (%)", YLabel: "refused / calls", Percent: true}
	thrown := report.Chart{Title: "Partial failure: answers thrown away", XLabel: "broken share of keys (%)", YLabel: "refused calls that would have succeeded"}
	for _, b := range breakerBroken {
		shed.X = append(shed.X, 100*b)
		thrown.X = append(thrown.X, 100*b)
	}
	byPolicy := map[string][]partialFailureRow{}
	var names []string
	for _, p := range js.Partial {
		if _, ok := byPolicy[p.Policy]; !ok {
			names = append(names, p.Policy)
		}
		byPolicy[p.Policy] = append(byPolicy[p.Policy], p)
	}
	for _, n := range names {
		var s, th []float64
		for _, p := range byPolicy[n] {
			s = append(s, p.Shed)
			th = append(th, float64(p.AnswersThrownAway))
		}
		shed.Lines = append(shed.Lines, report.Line{Name: n, Y: s})
		thrown.Lines = append(thrown.Lines, report.Line{Name: n, Y: th})
	}
	return []report.Chart{trips, shed, thrown}
}

func breakerClaims(js breakerJSON, partial []scenario.Fleet) []report.Claim {
	var cs []report.Claim
	zero := true
	for _, ft := range js.FalseTrips {
		zero = zero && ft.Trips[0] == 0
	}
	cs = append(cs, report.Check("against an origin without errors, no breaker ever opens", zero, map[string]any{"trips_at_0": zero}, "none did"))
	// Consecutive-failure breakers: a higher threshold first trips at an
	// error rate no lower than a lower threshold's.
	var prev *float64
	ordered := true
	var firsts []string
	for _, ft := range js.FalseTrips {
		if !startsWith(ft.Breaker, "consecutive") {
			continue
		}
		f := 2.0 // never: above every rate
		if ft.FirstRate != nil {
			f = *ft.FirstRate
		}
		if prev != nil && f < *prev {
			ordered = false
		}
		prev = &f
		firsts = append(firsts, fmt.Sprintf("%s: %s", ft.Breaker, firstText(ft.FirstRate)))
	}
	if len(firsts) > 1 {
		cs = append(cs, report.Check("a consecutive-failure breaker with a higher threshold needs a higher error rate before it opens at all",
			ordered, map[string]any{"first_error_rates": firsts}, "%s", joinComma(firsts)))
	}
	// More errors, more trips, until the breaker spends most of its time
	// open; compare two rates well apart.
	lo, hi := slices.Index(js.ErrorRates, 0.05), slices.Index(js.ErrorRates, 0.2)
	for _, ft := range js.FalseTrips {
		if startsWith(ft.Breaker, "consecutive") && ft.FirstRate != nil && *ft.FirstRate <= 0.2 && lo >= 0 && hi >= 0 {
			cs = append(cs, report.Check(fmt.Sprintf("%s opens more often at 20%% background errors than at 5%%", ft.Breaker),
				ft.Trips[hi] > ft.Trips[lo], map[string]any{"trips_at_5": ft.Trips[lo], "trips_at_20": ft.Trips[hi]},
				"%d trips against %d", ft.Trips[hi], ft.Trips[lo]))
		}
	}
	at := func(b float64, policy string) partialFailureRow {
		for _, p := range js.Partial {
			if p.Broken == b && p.Policy == policy {
				return p
			}
		}
		return partialFailureRow{}
	}
	mid := breakerBroken[len(breakerBroken)/2]
	full, ret, alone := at(mid, partial[1].Name), at(mid, partial[2].Name), at(mid, partial[0].Name)
	cs = append(cs,
		report.Check(fmt.Sprintf("with %s of the keys broken, %s sheds calls that would have succeeded", report.Percent(mid, 0), full.Policy),
			full.AnswersThrownAway > 0, map[string]any{"answers_thrown_away": full.AnswersThrownAway, "shed": full.Shed},
			"%s answers thrown away, %s of calls shed", report.Int(full.AnswersThrownAway), report.Percent(full.Shed, 0)),
		report.Check(fmt.Sprintf("%s sheds less and throws away fewer answers than the breaker on every call", ret.Policy),
			ret.Shed < full.Shed && ret.AnswersThrownAway < full.AnswersThrownAway,
			map[string]any{"shed": ret.Shed, "answers_thrown_away": ret.AnswersThrownAway},
			"%s shed, %s thrown away", report.Percent(ret.Shed, 0), report.Int(ret.AnswersThrownAway)),
		report.Check(fmt.Sprintf("%s loses only the broken keys' intents", alone.Policy),
			abs(float64(alone.IntentsLost)/float64(max(alone.Intents, 1))-mid) < 0.02,
			map[string]any{"lost_share": round3(float64(alone.IntentsLost) / float64(max(alone.Intents, 1)))},
			"%s of intents lost", report.Percent(float64(alone.IntentsLost)/float64(max(alone.Intents, 1)), 1)),
	)
	return cs
}

func firstText(r *float64) string {
	if r == nil {
		return "never"
	}
	return report.Percent(*r, 0)
}

func startsWith(s, p string) bool { return len(s) >= len(p) && s[:len(p)] == p }

func joinComma(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += ", "
		}
		out += x
	}
	return out
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

func breakerFindings(js breakerJSON) []string {
	var out []string
	for _, ft := range js.FalseTrips {
		if ft.FirstRate == nil {
			out = append(out, fmt.Sprintf("Breaker: %s never opened, at any background error rate up to %s.",
				ft.Breaker, report.Percent(js.ErrorRates[len(js.ErrorRates)-1], 0)))
			continue
		}
		out = append(out, fmt.Sprintf("Breaker: %s first opened at a %s background error rate; at 2%% it tripped %s times per 10,000 calls, at 10%% %s.",
			ft.Breaker, firstText(ft.FirstRate), trimNum(ft.Per10k[2]), trimNum(ft.Per10k[4])))
	}
	for _, p := range js.Partial {
		if p.Broken == 0.3 {
			out = append(out, fmt.Sprintf("Breaker: with 30%% of the keys broken, %s shed %s of calls and threw away %s answers that existed; %s intents were lost.",
				p.Policy, report.Percent(p.Shed, 0), report.Int(p.AnswersThrownAway), report.Int(p.IntentsLost)))
		}
	}
	return out
}
