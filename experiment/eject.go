package experiment

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/retrystorm/retrystorm/report"
	"github.com/retrystorm/retrystorm/resil/outlier"
	"github.com/retrystorm/retrystorm/scenario"
	"github.com/retrystorm/retrystorm/sim"
)

const ejectTitle = "Eject: one bad replica, outlier detection, retries and the panic threshold"

// Eject runs the other half of what a proxy decides: which replica gets an
// attempt (resil/balance) and which replicas are ejected (resil/outlier),
// beside the retry policy (issue 25). Every decision is resil's; the
// simulator drives them on virtual time.
var Eject = register(&Experiment{
	Name:    "eject",
	Title:   ejectTitle,
	Summary: "one bad replica of 3, 5, 10: outlier detection, retries, panic mode, pickers",
	Order:   100,
	Page: Page{
		Knobs: []string{"rate", "max_retries"},
		Cost:  200,
		Fixed: "The replicas, their faults, the pickers and the detectors' settings are the experiment's own.",
	},
	Run: runEject,
})

// ejectFleet is one fleet of one case: what its clients got, and what its
// replicas carried.
type ejectFleet struct {
	Name string `json:"name"`
	// SuccessShare is the share of intents that succeeded; IntentsLost
	// the others.
	SuccessShare float64 `json:"success_share"`
	IntentsLost  int64   `json:"intents_lost"`
	Goodput      int64   `json:"goodput"`
	// HealthyLoad is the mean attempts per second of a healthy replica,
	// against FairLoad, the intent rate over every replica.
	HealthyLoad float64 `json:"healthy_load"`
	FairLoad    float64 `json:"fair_load"`
	// BadAttempts are the attempts the bad replicas got; BadEjectedShare
	// the share of the run they were ejected, on average.
	BadAttempts     int64   `json:"bad_attempts"`
	BadEjectedShare float64 `json:"bad_ejected_share"`
	// NoHealthy counts the attempts that found every replica ejected.
	NoHealthy  int64   `json:"no_healthy_replica"`
	P99Seconds float64 `json:"p99_seconds"`
}

// ejectCaseRow is one origin: its replicas, the bad ones, and the fleets.
type ejectCaseRow struct {
	Case     string       `json:"case"`
	Replicas int          `json:"replicas"`
	Bad      []int        `json:"bad"`
	Fleets   []ejectFleet `json:"fleets"`
}

type ejectJSON struct {
	Scenario string         `json:"scenario"`
	Seed     uint64         `json:"seed"`
	Cases    []ejectCaseRow `json:"cases"`
	Claims   []report.Claim `json:"claims"`
}

// The fleets of the first part, in their order in each case.
const (
	ejNothing = iota
	ejOutlier
	ejRetries
	ejBoth
	ejBudget
	ejBreaker
)

// ejectCase is one run the experiment makes.
type ejectCase struct {
	name     string
	replicas int
	faults   []scenario.Fault
	fleets   []scenario.Fleet
	// origin, if set, replaces the scenario's origin (the slow replica
	// needs a model with a latency factor); capacity, if set, its
	// capacity.
	origin   *scenario.Origin
	capacity float64
}

func runEject(ctx context.Context, opts Options) (*Outcome, error) {
	base, err := scenarioFor("eject", opts)
	if err != nil {
		return nil, err
	}
	if len(base.Fleets) == 0 {
		return nil, fmt.Errorf("eject: the scenario needs a fleet, whose policy the retrying fleets use")
	}
	if len(base.Tiers) > 0 {
		return nil, fmt.Errorf("eject: the scenario may not have tiers: the simulator balances one hop")
	}
	cases := ejectCases(base)
	js := ejectJSON{Scenario: base.Name, Seed: base.Seed}
	var charts []report.Chart
	for k, c := range cases {
		sc := base.Clone()
		sc.Triggers = nil
		if c.origin != nil {
			sc.Origin = *c.origin
		}
		if c.capacity > 0 {
			sc.Origin.Capacity = c.capacity
		}
		sc.Origin.Replicas, sc.Origin.Faults, sc.Fleets = c.replicas, c.faults, c.fleets
		if err := sc.Validate(); err != nil {
			return nil, fmt.Errorf("eject: case %s: %w", c.name, err)
		}
		res, err := opts.run(ctx, sc)
		if err != nil {
			return nil, err
		}
		js.Cases = append(js.Cases, ejectSummary(sc, c, res))
		if c.replicas == 5 && k == 1 {
			charts = append(charts, ejectChart(res, c.name))
		}
		if opts.Progress != nil {
			opts.Progress(k+1, len(cases))
		}
	}
	js.Claims = ejectClaims(js)
	sec := report.Section{
		ID:    "eject",
		Title: ejectTitle,
		Intro: []string{
			fmt.Sprintf("%s: %g intents/s from %d clients to an origin of %g attempts/s shared by its replicas. One replica answers only errors; the fleets pick round robin. Each alone: nothing, Envoy's outlier detection (consecutive 5xx, max_ejection_percent 50), retries (%d), both, both with the budget, both with the breaker.",
				base.Name, base.Traffic.Rate, base.Traffic.Clients, base.Origin.Capacity, base.Fleets[0].Retry.MaxRetries),
			"Then the panic threshold with three bad replicas of five; Envoy's max ejection rule before and after its 2023 fix (3 replicas at 67%, 2 failing, the third overloaded once they are out; and Envoy's default 10% on 3 replicas, with always_eject_one_host); and one replica 20× slower under four pickers, with and without a hedge.",
		},
		Tables: []report.Table{ejectTable(js)},
		Claims: js.Claims,
		Charts: charts,
		Notes: []string{
			"success is the share of intents that succeeded; healthy load is a healthy replica's attempts per second, against the intent rate shared by every replica (fair); bad attempts went to the bad replicas, ejected for the share of the run shown; no host counts attempts that found every replica ejected.",
			"The picks and ejections are resil/balance's and resil/outlier's; see docs/semantics.md for what the simulator approximates.",
		},
	}
	return &Outcome{Name: "eject", Claims: js.Claims, Section: sec, Findings: ejectFindings(js), JSON: js}, nil
}

// ejectCases builds the experiment's runs from the base scenario: its
// first fleet gives the retrying fleets' policy.
func ejectCases(base *scenario.Scenario) []ejectCase {
	b := newEjectBuilder(base)
	cases := b.oneBad()
	cases = append(cases, b.panicThreshold())
	cases = append(cases, b.maxEjection()...)
	return append(cases, b.slowReplica())
}

// ejectBuilder makes the experiment's fleets from the base scenario's
// first one, pol: its timeout, and its retries, budget and breaker where a
// fleet has them.
type ejectBuilder struct {
	base    *scenario.Scenario
	pol     scenario.Fleet
	noRetry scenario.Retry    // pol's retry with no retries
	rr      scenario.Balancer // round robin, Envoy's panic threshold
}

func newEjectBuilder(base *scenario.Scenario) *ejectBuilder {
	b := &ejectBuilder{base: base, pol: base.Fleets[0], rr: scenario.Balancer{Use: scenario.BalancerRoundRobin, PanicThreshold: 50}}
	b.noRetry = b.pol.Retry
	b.noRetry.MaxRetries = 0
	return b
}

// envoy is Envoy's outlier detection, its defaults but the max ejection
// percent and rule.
func (b *ejectBuilder) envoy(percent int, rule outlier.MaxEjectionRule) scenario.OutlierDetection {
	s := outlier.EnvoyDefaults(0)
	s.Flavor, s.MaxEjectionPercent, s.MaxEjectionRule = 0, percent, rule
	return scenario.OutlierDetection{Use: scenario.OutlierEnvoy, Settings: s}
}

// fleet is a fleet of pol's timeout that does not retry, with no budget,
// picking with bal.
func (b *ejectBuilder) fleet(name string, bal scenario.Balancer) scenario.Fleet {
	return scenario.Fleet{Name: name, Timeout: b.pol.Timeout, Retry: b.noRetry, Budget: scenario.Budget{Use: scenario.BudgetNone}, Balancer: bal}
}

// errorsOn is the replicas rs answering only errors.
func errorsOn(rs ...int) []scenario.Fault {
	var fs []scenario.Fault
	for _, r := range rs {
		fs = append(fs, scenario.Fault{Replica: r, Kind: scenario.FaultErrors, ErrorRate: 1})
	}
	return fs
}

// oneBad is one bad replica of 3, 5 and 10, under each defence alone and
// together: nothing, outlier detection, retries, both, both with the
// budget, both with the breaker.
func (b *ejectBuilder) oneBad() []ejectCase {
	var cases []ejectCase
	for _, n := range []int{3, 5, 10} {
		nothing := b.fleet("nothing", b.rr)
		od := b.fleet("outlier detection", b.rr)
		od.OutlierDetection = b.envoy(50, outlier.CheckAfter)
		retries := b.fleet("retries", b.rr)
		retries.Retry = b.pol.Retry
		both := retries
		both.Name, both.OutlierDetection = "both", od.OutlierDetection
		budget := both
		budget.Name, budget.Budget = "both + budget", b.pol.Budget
		breaker := both
		breaker.Name, breaker.Breaker = "both + breaker", b.pol.Breaker
		cases = append(cases, ejectCase{
			name: fmt.Sprintf("1 bad of %d", n), replicas: n, faults: errorsOn(0),
			fleets: []scenario.Fleet{nothing, od, retries, both, budget, breaker},
		})
	}
	return cases
}

// panicThreshold is three bad replicas of five, all ejected (max 100%),
// which leave 40% healthy, below Envoy's 50%: with panic mode, without
// it, and without detection.
func (b *ejectBuilder) panicThreshold() ejectCase {
	panicOn := b.fleet("panic at 50%", b.rr)
	panicOn.Retry, panicOn.OutlierDetection = b.pol.Retry, b.envoy(100, outlier.CheckAfter)
	panicOff := panicOn
	panicOff.Name, panicOff.Balancer.PanicThreshold = "panic off", 0
	noDetect := b.fleet("no detection", b.rr)
	noDetect.Retry = b.pol.Retry
	return ejectCase{name: "3 bad of 5", replicas: 5, faults: errorsOn(0, 1, 2),
		fleets: []scenario.Fleet{noDetect, panicOn, panicOff}}
}

// maxEjection is Envoy's max ejection rule before and after its 2023 fix,
// at 67% and at its default 10%.
func (b *ejectBuilder) maxEjection() []ejectCase {
	// Envoy's rule, 3 hosts at 67%, 2 failing: once both are out, the
	// third takes the whole load, more than its share of the capacity,
	// and its rejections (503s) eject it too under the old rule. Panic
	// mode off (gRPC has none), so that the rule alone decides.
	off := scenario.Balancer{Use: scenario.BalancerRoundRobin}
	before := b.fleet("before 2023", off)
	before.Retry, before.OutlierDetection = b.pol.Retry, b.envoy(67, outlier.CheckBefore)
	after := before
	after.Name, after.OutlierDetection = "after 2023", b.envoy(67, outlier.CheckAfter)
	at67 := ejectCase{name: "2 bad of 3 at 67%", replicas: 3, faults: errorsOn(0, 1),
		fleets: []scenario.Fleet{before, after}, capacity: 1.5 * b.base.Traffic.Rate}
	// Envoy's default max_ejection_percent, 10, on 3 hosts: since the fix
	// one ejection is 33%, above it, unless always_eject_one_host.
	before10, after10 := before, after
	before10.Name, before10.OutlierDetection = "before 2023", b.envoy(10, outlier.CheckBefore)
	after10.Name, after10.OutlierDetection = "after 2023", b.envoy(10, outlier.CheckAfter)
	always := after10
	always.Name = "after + always_eject_one_host"
	always.OutlierDetection.Settings.AlwaysEjectOneHost = true
	for _, f := range []*scenario.Fleet{&before10, &after10, &always} {
		f.Balancer = b.rr
	}
	at10 := ejectCase{name: "1 bad of 3 at 10%", replicas: 3, faults: errorsOn(0),
		fleets: []scenario.Fleet{before10, after10, always}}
	return []ejectCase{at67, at10}
}

// slowReplica is a replica 20× slower than the others, under each picker,
// with and without a hedge after 50ms. No retries: the hedge is the only
// extra load.
func (b *ejectBuilder) slowReplica() ejectCase {
	var pickers []scenario.Fleet
	for _, p := range []struct{ name, use string }{
		{"random", scenario.BalancerRandom}, {"round robin", scenario.BalancerRoundRobin},
		{"p2c", scenario.BalancerP2C}, {"ewma", scenario.BalancerEWMA},
	} {
		bal := scenario.Balancer{Use: p.use, PanicThreshold: 50}
		if p.use == scenario.BalancerEWMA {
			bal.Decay, bal.DefaultRTT = defaultDecay, defaultRTT
		}
		f := b.fleet(p.name, bal)
		h := f
		h.Name, h.Hedge = p.name+" + hedge", scenario.Hedge{Delay: hedgeAfter, Max: 1}
		pickers = append(pickers, f, h)
	}
	base := b.base
	slow := &scenario.Origin{Model: scenario.ModelConcurrency, Base: cmp.Or(base.Origin.Latency, base.Origin.Base, 20*time.Millisecond)}
	return ejectCase{name: "1 slow of 5", replicas: 5, origin: slow,
		faults: []scenario.Fault{{Replica: 0, Kind: scenario.FaultLatency, Factor: 20}}, fleets: pickers}
}

// The EWMA picker's defaults (Linkerd's) and the hedge's delay.
const (
	defaultDecay = 10 * time.Second
	defaultRTT   = 30 * time.Millisecond
	hedgeAfter   = 50 * time.Millisecond
)

// ejectSummary turns one run into its case's rows.
func ejectSummary(sc *scenario.Scenario, c ejectCase, res *sim.Result) ejectCaseRow {
	ec := ejectCaseRow{Case: c.name, Replicas: c.replicas}
	for _, f := range c.faults {
		if !slices.Contains(ec.Bad, f.Replica) {
			ec.Bad = append(ec.Bad, f.Replica)
		}
	}
	secs := sc.Duration.Seconds()
	for _, f := range res.Fleets {
		s := f.Summary
		row := ejectFleet{
			Name: f.Name, IntentsLost: s.IntentsLost, Goodput: s.Goodput,
			SuccessShare: round3(1 - float64(s.IntentsLost)/float64(max(s.Intents, 1))),
			FairLoad:     round3(float64(s.Intents) / secs / float64(c.replicas)),
			NoHealthy:    f.NoHealthyReplica, P99Seconds: round3(s.LatencyP99),
		}
		var healthy int64
		var ejected float64
		for _, r := range f.Replicas {
			if slices.Contains(ec.Bad, r.Replica) {
				row.BadAttempts += r.Attempts
				ejected += r.EjectedSeconds
			} else {
				healthy += r.Attempts
			}
		}
		if good := c.replicas - len(ec.Bad); good > 0 {
			row.HealthyLoad = round3(float64(healthy) / secs / float64(good))
		}
		if len(ec.Bad) > 0 {
			row.BadEjectedShare = round3(ejected / secs / float64(len(ec.Bad)))
		}
		ec.Fleets = append(ec.Fleets, row)
	}
	return ec
}

func ejectTable(js ejectJSON) report.Table {
	t := report.Table{
		Columns: []report.Column{{Name: "case"}, {Name: "fleet"}, {Name: "success", Align: report.Right},
			{Name: "lost", Align: report.Right}, {Name: "healthy load", Align: report.Right},
			{Name: "bad attempts", Align: report.Right}, {Name: "ejected", Align: report.Right},
			{Name: "no host", Align: report.Right}, {Name: "p99", Align: report.Right}},
		Emphasis: map[[2]int]bool{},
	}
	for _, c := range js.Cases {
		for i, f := range c.Fleets {
			name := ""
			if i == 0 {
				name = c.Case
			}
			t.Rows = append(t.Rows, []string{name, f.Name, pct(f.SuccessShare), report.Int(f.IntentsLost),
				fmt.Sprintf("%s/s (fair %s)", report.Float(f.HealthyLoad, 0), report.Float(f.FairLoad, 0)),
				report.Int(f.BadAttempts), pct(f.BadEjectedShare), report.Int(f.NoHealthy), ms(f.P99Seconds)})
			if f.NoHealthy > 0 {
				t.Emphasis[[2]int{len(t.Rows) - 1, 7}] = true
			}
			if f.SuccessShare < 0.99 {
				t.Emphasis[[2]int{len(t.Rows) - 1, 2}] = true
			}
		}
	}
	return t
}

func pct(x float64) string { return fmt.Sprintf("%.1f%%", 100*x) }

// ejectChart is a case's goodput per tick, one line a fleet.
func ejectChart(res *sim.Result, name string) report.Chart {
	ch := report.Chart{Title: "Goodput: answers in time (" + name + ")", XLabel: "time (s)", YLabel: "answers / tick"}
	for i, f := range res.Fleets {
		if i == 0 {
			for t := range f.Series.Tick {
				ch.X = append(ch.X, float64(t)*res.TickSeconds)
			}
		}
		y := make([]float64, len(f.Series.Goodput))
		for t, g := range f.Series.Goodput {
			y[t] = float64(g)
		}
		ch.Lines = append(ch.Lines, report.Line{Name: f.Name, Y: y, Dashed: i == 0})
	}
	return ch
}

func ejectClaims(js ejectJSON) []report.Claim {
	var cs []report.Claim
	caseOf := func(name string) *ejectCaseRow {
		for i := range js.Cases {
			if js.Cases[i].Case == name {
				return &js.Cases[i]
			}
		}
		return nil
	}
	for _, n := range []int{3, 5, 10} {
		c := caseOf(fmt.Sprintf("1 bad of %d", n))
		if c == nil || len(c.Fleets) != 6 {
			continue
		}
		f := c.Fleets
		cs = append(cs, report.Check(fmt.Sprintf("1 bad replica of %d: outlier detection alone loses less than half the intents nothing does", n),
			2*f[ejOutlier].IntentsLost < f[ejNothing].IntentsLost,
			map[string]any{"outlier_lost": f[ejOutlier].IntentsLost, "nothing_lost": f[ejNothing].IntentsLost},
			"%d against %d", f[ejOutlier].IntentsLost, f[ejNothing].IntentsLost))
		cs = append(cs, report.Check(fmt.Sprintf("1 bad replica of %d: with detection the retries send the bad replica under a fifth of the attempts they send it without", n),
			5*f[ejBoth].BadAttempts < f[ejRetries].BadAttempts,
			map[string]any{"both_bad_attempts": f[ejBoth].BadAttempts, "retries_bad_attempts": f[ejRetries].BadAttempts},
			"%d against %d", f[ejBoth].BadAttempts, f[ejRetries].BadAttempts))
		cs = append(cs, report.Check(fmt.Sprintf("1 bad replica of %d: retries with detection lose no more intents than retries alone", n),
			f[ejBoth].IntentsLost <= f[ejRetries].IntentsLost,
			map[string]any{"both_lost": f[ejBoth].IntentsLost, "retries_lost": f[ejRetries].IntentsLost},
			"%d against %d", f[ejBoth].IntentsLost, f[ejRetries].IntentsLost))
	}
	if c := caseOf("3 bad of 5"); c != nil && len(c.Fleets) == 3 {
		none, on, off := c.Fleets[0], c.Fleets[1], c.Fleets[2]
		cs = append(cs, report.Check("3 bad replicas of 5, all ejected: at Envoy's 50% panic threshold the picker sends to the bad ones again, about as often as with no detection at all",
			2*on.BadAttempts > none.BadAttempts,
			map[string]any{"panic_bad_attempts": on.BadAttempts, "no_detection_bad_attempts": none.BadAttempts},
			"%d attempts to the bad replicas against %d", on.BadAttempts, none.BadAttempts))
		cs = append(cs, report.Check("3 bad replicas of 5: with panic mode off the two healthy replicas take the load, and fewer intents are lost than with it",
			off.IntentsLost < on.IntentsLost && 10*off.BadAttempts < on.BadAttempts,
			map[string]any{"off_lost": off.IntentsLost, "on_lost": on.IntentsLost, "off_bad_attempts": off.BadAttempts},
			"%d lost against %d; %d attempts to the bad replicas", off.IntentsLost, on.IntentsLost, off.BadAttempts))
	}
	if c := caseOf("2 bad of 3 at 67%"); c != nil && len(c.Fleets) == 2 {
		before, after := c.Fleets[0], c.Fleets[1]
		cs = append(cs, report.Check("3 replicas at 67%, 2 failing: Envoy's pre-2023 rule ejects the third too, leaving no replica; the fixed rule always keeps one",
			before.NoHealthy > 0 && after.NoHealthy == 0,
			map[string]any{"before_no_host": before.NoHealthy, "after_no_host": after.NoHealthy},
			"%d attempts found no replica before the fix, %d after", before.NoHealthy, after.NoHealthy))
		cs = append(cs, report.Check("3 replicas at 67%, 2 failing: the fixed rule loses fewer intents",
			after.IntentsLost < before.IntentsLost,
			map[string]any{"before_lost": before.IntentsLost, "after_lost": after.IntentsLost},
			"%d against %d", after.IntentsLost, before.IntentsLost))
	}
	if c := caseOf("1 bad of 3 at 10%"); c != nil && len(c.Fleets) == 3 {
		before, after, always := c.Fleets[0], c.Fleets[1], c.Fleets[2]
		cs = append(cs, report.Check("3 replicas at Envoy's default 10%: the fixed rule never ejects the bad one; the old rule and always_eject_one_host do",
			after.BadEjectedShare == 0 && before.BadEjectedShare > 0.5 && always.BadEjectedShare > 0.5,
			map[string]any{"after": after.BadEjectedShare, "before": before.BadEjectedShare, "always_eject_one_host": always.BadEjectedShare},
			"ejected %s of the run after the fix, %s before, %s with always_eject_one_host", pct(after.BadEjectedShare), pct(before.BadEjectedShare), pct(always.BadEjectedShare)))
	}
	if c := caseOf("1 slow of 5"); c != nil && len(c.Fleets) == 8 {
		f := c.Fleets // random, +hedge, rr, +hedge, p2c, +hedge, ewma, +hedge
		rnd, rr, p2c, ewma := f[0], f[2], f[4], f[6]
		cs = append(cs, report.Check("1 slow replica of 5: P2C and EWMA send it under half the attempts random and round robin send it",
			2*p2c.BadAttempts < min(rnd.BadAttempts, rr.BadAttempts) && 2*ewma.BadAttempts < min(rnd.BadAttempts, rr.BadAttempts),
			map[string]any{"random": rnd.BadAttempts, "round_robin": rr.BadAttempts, "p2c": p2c.BadAttempts, "ewma": ewma.BadAttempts},
			"p2c %d, ewma %d, random %d, round robin %d", p2c.BadAttempts, ewma.BadAttempts, rnd.BadAttempts, rr.BadAttempts))
		cs = append(cs, report.Check("1 slow replica of 5: a hedge cuts random's and round robin's p99 at least in half",
			2*f[1].P99Seconds <= rnd.P99Seconds && 2*f[3].P99Seconds <= rr.P99Seconds,
			map[string]any{"random": rnd.P99Seconds, "random_hedge": f[1].P99Seconds, "round_robin": rr.P99Seconds, "round_robin_hedge": f[3].P99Seconds},
			"random %s to %s, round robin %s to %s", ms(rnd.P99Seconds), ms(f[1].P99Seconds), ms(rr.P99Seconds), ms(f[3].P99Seconds)))
	}
	return cs
}

func ejectFindings(js ejectJSON) []string {
	var out []string
	for _, c := range js.Cases {
		for _, f := range c.Fleets {
			out = append(out, fmt.Sprintf("Eject (%s): %s kept %s of intents (%s lost); the bad replicas got %s attempts, ejected %s of the run; p99 %s.",
				c.Case, f.Name, pct(f.SuccessShare), report.Int(f.IntentsLost), report.Int(f.BadAttempts), pct(f.BadEjectedShare), ms(f.P99Seconds)))
		}
	}
	return out
}
