package verdict

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/retrystorm/retrystorm/experiment"
	"github.com/retrystorm/retrystorm/grid"
	"github.com/retrystorm/retrystorm/resil/budget"

	"github.com/retrystorm/retrystorm/report"
	"github.com/retrystorm/retrystorm/scenario"
	"github.com/retrystorm/retrystorm/sim"
)

// AdviseOptions say what advise searches and against what.
type AdviseOptions struct {
	// Base, Load, Dip: as for check; the envelope is check's.
	Base      *scenario.Scenario
	Load, Dip float64
	// Seeds is how many seeds each cell runs with, from the base's seed
	// up. Zero means 3.
	Seeds int
	// MaxRuns refuses a search that would make more runs. Zero means
	// 20,000.
	MaxRuns int
	// Shard, when set, runs only the shard's cells.
	Shard grid.Shard
	// Space, when set, is the policies to try instead of advise's own
	// search space; the user's fleet is always tried first.
	Space []scenario.Fleet
	// Clients is the number of client instances, as check's; zero means
	// the base scenario's.
	Clients int
	// Conditions lets the search change what is retried (retry.on);
	// without it every candidate retries what the user's fleet retries.
	Conditions bool
	// Admit, if set, is asked before the search runs, with its estimate:
	// an error refuses it (the command line's --long rule).
	Admit func(AdviseEstimate) error
	// Exhaustive runs every candidate through the simulator at every
	// seed. Without it, an unsharded search screens the candidates first
	// (the model, or one seed of the simulator where the model does not
	// apply) and runs every seed only for those that can still win
	// (screen). A sharded search is always exhaustive: its shards must
	// not depend on each other.
	Exhaustive bool
}

// AdviseCandidate is one policy advise tried, and how it did over every
// cell and seed.
type AdviseCandidate struct {
	Name  string         `json:"name"`
	Fleet scenario.Fleet `json:"fleet"`
	// Cells[seed][fault][load].
	Cells [][][]CheckCell `json:"cells"`
	// Totals over every cell and seed (filled once all cells are in).
	Never       int   `json:"never_recovered"`
	Amplified   int   `json:"amplified"` // runs past check's amplification thresholds
	IntentsLost int64 `json:"intents_lost"`
	Extra       int64 `json:"extra_attempts"` // retries and hedges: the load beyond one attempt per intent
	Slowest     int   `json:"slowest_recovery_ticks"`
	// Source is where the totals come from: "simulator" (every cell at
	// every seed), or, for a candidate the screen left out, "model" (the
	// analytic model, one run per cell) or "simulator, 1 seed". The
	// totals of a screened-out candidate are over its Screen, one pass of
	// the cells, and it ranks after every simulated candidate.
	Source string `json:"source"`
	// Screen[fault][load] is the candidate's first pass, when the search
	// screened (see AdviseOptions.Exhaustive); Cells is then empty unless
	// the candidate was simulated at every seed after it.
	Screen       [][]CheckCell `json:"screen,omitempty"`
	ScreenSource string        `json:"screen_source,omitempty"` // "model" or "simulator, 1 seed"
}

// simulated reports whether c's totals rest on the simulator at every
// seed (a shard's result from before sources were said has none).
func (c *AdviseCandidate) simulated() bool { return c.Source == "" || c.Source == sourceSimulator }

// AdviseResult is a search's outcome: the envelope, every candidate (the
// user's own first), and the ranking.
type AdviseResult struct {
	Scenario   string            `json:"scenario"`
	Rate       float64           `json:"rate"`         // intents per second
	Tick       float64           `json:"tick_seconds"` // for peak rates
	Clients    int               `json:"clients"`
	Conditions bool              `json:"conditions"` // whether retry.on was searched
	Seeds      []uint64          `json:"seeds"`
	Loads      []float64         `json:"loads"`
	Faults     []checkFault      `json:"faults"`
	RealLoad   float64           `json:"realistic_load"`
	RealDip    float64           `json:"realistic_dip"`
	Shard      string            `json:"shard"`
	Candidates []AdviseCandidate `json:"candidates"`
	// Runs is the simulator runs the search made, and Exhaustive how
	// many it would have made without its screen.
	Runs       int `json:"simulator_runs"`
	Exhaustive int `json:"exhaustive_runs"`
	// Ranking lists candidate indexes, best first (filled once all cells
	// are in).
	Ranking []int          `json:"ranking"`
	Claims  []report.Claim `json:"claims"`
}

// adviseCandidates builds the policies to try around the user's fleet:
// retry counts, budgets of every kind the simulator has, with and without
// a breaker, always with full jitter. The user's own comes first. Every
// candidate retries what the user's fleet retries unless conditions is
// set. A user's fleet with a limit on retries never gets a candidate
// without one: "no budget" is then "your budget", so that no advice
// removes a limit the user has (Envoy's max_retries, a budget).
func adviseCandidates(user scenario.Fleet, conditions bool) []AdviseCandidate {
	out := []AdviseCandidate{{Name: "yours: " + user.Name, Fleet: user}}
	budgets := []struct {
		name string
		b    scenario.Budget
	}{
		{"no budget", scenario.Budget{Use: scenario.BudgetNone}},
		{"token bucket 5%", scenario.Budget{Use: scenario.BudgetTokenBucket, TokenBucket: budget.TokenBucketSettings{Ratio: 0.05, Funding: budget.FundedBySuccess, MinTokens: 5, MaxTokens: 100, RetryCost: 1, TimeoutCost: 1}}},
		{"token bucket 10%", scenario.Budget{Use: scenario.BudgetTokenBucket, TokenBucket: budget.TokenBucketSettings{Ratio: 0.1, Funding: budget.FundedBySuccess, MinTokens: 10, MaxTokens: 100, RetryCost: 1, TimeoutCost: 1}}},
		{"token bucket 20%", scenario.Budget{Use: scenario.BudgetTokenBucket, TokenBucket: budget.TokenBucketSettings{Ratio: 0.2, Funding: budget.FundedBySuccess, MinTokens: 10, MaxTokens: 100, RetryCost: 1, TimeoutCost: 1}}},
		{"window 10%", scenario.Budget{Use: scenario.BudgetWindow, Window: budget.WindowSettings{Ratio: 0.1, Funding: budget.FundedByRequest, MinRetriesPerSecond: 1, TTL: 10 * time.Second, RetryCost: 1, TimeoutCost: 1}}},
		{"concurrency 20%/3", scenario.Budget{Use: scenario.BudgetConcurrency, Concurrency: budget.ConcurrencySettings{Percent: 20, MinConcurrency: 3}}},
		{"concurrency 10%/1", scenario.Budget{Use: scenario.BudgetConcurrency, Concurrency: budget.ConcurrencySettings{Percent: 10, MinConcurrency: 1}}},
		{"gRPC throttling 10/0.1", scenario.Budget{Use: scenario.BudgetGRPC, GRPC: budget.GRPCThrottleSettings{MaxTokens: 10, TokenRatio: 0.1}}},
		{"AWS retry quota", scenario.Budget{Use: scenario.BudgetAWS, AWS: budget.AWSQuotaSettings{Capacity: 500, RetryCost: 5, TimeoutCost: 10, NoRetryIncrement: 1}}},
	}
	if user.Budget.Use != scenario.BudgetNone && user.Budget.Use != "" {
		budgets[0].name, budgets[0].b = "your budget ("+user.Budget.Use+")", user.Budget
	}
	base := user.Retry.Backoff.Base
	if base <= 0 {
		base = 100 * time.Millisecond
	}
	backoff := scenario.Backoff{Use: "exponential", Base: base, Cap: max(10*base, time.Second), Multiplier: 2, Jitter: "full"}
	for _, n := range []int{1, 2, 3} {
		for _, b := range budgets {
			for _, br := range []bool{false, true} {
				f := user
				f.Retry = scenario.Retry{MaxRetries: n, IdempotentOnly: user.Retry.IdempotentOnly, On: user.Retry.On, Backoff: backoff}
				f.Budget = b.b
				if b.b.Use == scenario.BudgetGRPC {
					// gRPC's candidates are what a service config can say:
					// grpc-go's jitter (0.8 to 1.2 times the schedule),
					// and, when the search may change the conditions, no
					// retry of a call whose deadline passed (every other
					// failure, refused connections included).
					if conditions {
						f.Retry.On = []string{scenario.RetryOnError, scenario.RetryOnRejection, scenario.RetryOnRefused}
					}
					f.Retry.Backoff.Jitter, f.Retry.Backoff.Factor = "factor", 0.2
				}
				f.Breaker = scenario.Breaker{Use: scenario.BreakerNone}
				f.Hedge = scenario.Hedge{}
				name := fmt.Sprintf("%d retries, %s", n, b.name)
				if n == 1 {
					name = "1 retry, " + b.name
				}
				if br {
					f.Breaker = scenario.Breaker{Use: scenario.BreakerConsecutive, Threshold: 5, Cooldown: 5 * time.Second, Probes: 1, Scope: "all"}
					name += ", breaker"
				}
				f.Name = name
				out = append(out, AdviseCandidate{Name: name, Fleet: f})
			}
		}
	}
	return out
}

// ErrTooBig is returned when a search would cost more than its bound.
var ErrTooBig = errors.New("advise: the search is larger than its bound")

// ErrInput marks an error in what check or advise were given (the base
// scenario, the realistic region) rather than in a run: a command reports
// it as a usage error (exit 2), never as a verdict.
var ErrInput = errors.New("bad input")

type inputError string

func (e inputError) Error() string        { return string(e) }
func (e inputError) Is(target error) bool { return target == ErrInput }

func inputErrorf(format string, args ...any) error {
	return inputError(fmt.Sprintf(format, args...))
}

// AdviseEstimate is what a search will cost, before it runs.
type AdviseEstimate struct {
	Runs     int           // simulator runs (the shard's)
	Attempts float64       // at most this many simulated attempts (sim.Estimate)
	Time     time.Duration // about this long on one core, if it costs all of Attempts
}

// adviseEstimate adds up sim.Estimate over the runs the shard will make:
// each candidate at the highest load, per cell.
func adviseEstimate(e *envelope, cands []AdviseCandidate, sh grid.Shard) AdviseEstimate {
	var est AdviseEstimate
	per := len(e.seeds) * len(e.faults) * len(e.loads)
	for i, c := range cands {
		sc := envelopeCell(e.base, e.loads[len(e.loads)-1], e.faults[0], e.at)
		sc.Traffic.Clients = e.clients[0]
		sc.Fleets = []scenario.Fleet{c.Fleet}
		a := sim.Estimate(sc).Attempts
		for j := range per {
			if sh.Owns(i*per + j) {
				est.Runs++
				est.Attempts += a
			}
		}
	}
	est.Time = sim.Cost{Attempts: est.Attempts}.Time()
	return est
}

// Advise searches policy settings around the user's fleet for the one
// that recovers across the check envelope, over several seeds, without
// amplifying the load past check's thresholds, with the fewest intents
// lost and the least extra load. Each cell is run as check runs it, so
// the two agree on every cell they share.
func Advise(ctx context.Context, user CheckInput, ao AdviseOptions, opts experiment.Options) (*AdviseResult, error) {
	e, err := newEnvelope(ao.Base, ao.Load, ao.Dip, ao.Seeds, ao.Clients, false)
	if err != nil {
		return nil, fmt.Errorf("advise: %w", err)
	}
	cands := adviseCandidates(user.Fleet, ao.Conditions)
	if ao.Space != nil {
		cands = cands[:1]
		for _, f := range ao.Space {
			cands = append(cands, AdviseCandidate{Name: f.Name, Fleet: f})
		}
	}
	base := e.base
	r := &AdviseResult{Scenario: base.Name, Rate: base.Traffic.Rate, Tick: base.Tick.Seconds(), Clients: e.clients[0], Conditions: ao.Conditions,
		Seeds: e.seeds, Loads: e.loads, Faults: e.faults, RealLoad: e.realLoad, RealDip: e.realDip, Shard: ao.Shard.String(), Candidates: cands}
	nS, nF, nL := len(e.seeds), len(e.faults), len(e.loads)
	est := adviseEstimate(e, cands, ao.Shard)
	maxRuns := cmp.Or(ao.MaxRuns, 20_000)
	if est.Runs > maxRuns {
		return nil, fmt.Errorf("%w: %d runs (%d candidates × %d seeds × %d faults × %d loads), at most %.2g simulated attempts, about %v on one core; the bound is %d runs: give fewer seeds, or split it with --shard",
			ErrTooBig, est.Runs, len(cands), nS, nF, nL, est.Attempts, est.Time.Round(time.Second), maxRuns)
	}
	if ao.Admit != nil {
		if err := ao.Admit(est); err != nil {
			return nil, err
		}
	}
	for i := range r.Candidates {
		r.Candidates[i].Cells = newSeedCells(nS, nF, nL)
	}
	fleets := make([]scenario.Fleet, len(cands))
	for i, c := range cands {
		fleets[i] = c.Fleet
	}
	name := func(i int) string { return fmt.Sprintf("advise: candidate %q", cands[i].Name) }
	r.Exhaustive = len(cands) * nS * nF * nL
	if ao.Shard.Count > 1 || ao.Exhaustive || len(cands) <= adviseConfirm+1 {
		var runs atomic.Int64 // keep runs on every worker
		err = e.run(ctx, fleets, name, ao.Shard, opts, func(j job, c CheckCell) {
			r.Candidates[j.fleet].Cells[j.seed][j.fault][j.load] = c
			runs.Add(1)
		})
		r.Runs += int(runs.Load())
		if err != nil {
			return nil, err
		}
		for i := range r.Candidates {
			r.Candidates[i].Source = sourceSimulator
		}
		if ao.Shard.Count <= 1 {
			r.rank()
		}
		return r, nil
	}
	if err := r.screened(ctx, e, fleets, name, opts); err != nil {
		return nil, err
	}
	return r, nil
}

func newSeedCells(seeds, faults, loads int) [][][]CheckCell {
	c := make([][][]CheckCell, seeds)
	for s := range c {
		c[s] = newCells(faults, loads)
	}
	return c
}

// realistic is the region the user calls realistic: the given load and
// dip, or the base scenario's.
func realistic(base *scenario.Scenario, load, dip float64) (float64, float64, error) {
	if load == 0 {
		load = roundTo(base.Traffic.Rate/base.Origin.Capacity, 1000)
	}
	if dip == 0 {
		dip = 1.0 / 3
		for _, t := range base.Triggers {
			if t.Kind == scenario.TriggerCapacity {
				dip = 1 - t.Capacity/base.Origin.Capacity
				break
			}
		}
		dip = roundTo(dip, 1000)
	}
	if !(load > 0 && load <= 0.975) {
		return 0, 0, inputErrorf("realistic load %g must be in (0, 0.975] of capacity (--load sets it)", load)
	}
	if !(dip > 0 && dip <= 1) {
		return 0, 0, inputErrorf("realistic dip %g must be in (0, 1] (--dip sets it)", dip)
	}
	return load, dip, nil
}

func roundTo(x, k float64) float64 { return float64(int64(x*k+0.5)) / k }

// envelopeCell is the base scenario at one load with one fault, without
// fleets.
func envelopeCell(base *scenario.Scenario, load float64, ft checkFault, at time.Duration) *scenario.Scenario {
	sc := base.Clone()
	sc.Origin.SetCapacity(base.Traffic.Rate / load)
	t := scenario.Trigger{Kind: ft.Kind, At: at, For: time.Duration(ft.For * float64(time.Second))}
	switch ft.Kind {
	case scenario.TriggerCapacity:
		t.Capacity = sc.Origin.Capacity * (1 - ft.Dip)
	case scenario.TriggerErrors:
		t.ErrorRate = ft.Rate
	case scenario.TriggerOutage:
		t.Mode = ft.Mode
	case scenario.TriggerLatency:
		t.Factor = ft.Factor
	}
	if ft.Replica != nil {
		r := *ft.Replica
		t.Replica = &r
	}
	if ft.Bounded && sc.Origin.Model == scenario.ModelQueue {
		// Half a second of work waits at most: past it the origin
		// rejects at once, as a bounded queue or load shedding does.
		sc.Origin.QueueLimit = max(int(math.Ceil(sc.Origin.Capacity/2)), 1)
	}
	sc.Triggers = []scenario.Trigger{t}
	return sc
}

func cellOf(s sim.Summary) CheckCell {
	c := CheckCell{Ran: true, Source: sourceSimulator, Recovered: s.Recovered, RecoveryTicks: -1, Intents: s.Intents, Attempts: s.Attempts,
		Retries: s.Retries + s.Hedges, IntentsLost: s.IntentsLost, PeakOffered: s.PeakOffered, NeverHealthy: s.NeverHealthy}
	if s.Recovered {
		c.RecoveryTicks = *s.RecoveryTicks
	}
	return c
}

// rank totals every candidate's cells and orders them: the fewest runs
// that never recover or amplify past check's thresholds first (so a
// policy without a budget is not ranked first because a fault failed to
// punish it), then the fewest intents lost, then the least extra load,
// then the fastest recovery; ties keep the order they were built in.
//
// A candidate the screen left out ranks after every simulated one, by its
// screen's totals: the recommendation always rests on the simulator.
func (r *AdviseResult) rank() {
	r.Ranking = r.Ranking[:0]
	for i := range r.Candidates {
		c := &r.Candidates[i]
		c.Never, c.Amplified, c.IntentsLost, c.Extra, c.Slowest = 0, 0, 0, 0, 0
		runs := c.Cells
		if !c.simulated() {
			runs = [][][]CheckCell{c.Screen}
		}
		for _, seed := range runs {
			for _, row := range seed {
				for li, cell := range row {
					if !cell.Recovered {
						c.Never++
					}
					if amplifies(cell, r.Rate, r.Tick, r.Loads[li]) {
						c.Amplified++
					}
					c.IntentsLost += cell.IntentsLost
					c.Extra += cell.Retries
					c.Slowest = max(c.Slowest, cell.RecoveryTicks)
				}
			}
		}
		r.Ranking = append(r.Ranking, i)
	}
	slices.SortStableFunc(r.Ranking, func(a, b int) int {
		x, y := &r.Candidates[a], &r.Candidates[b]
		return cmp.Or(compareBool(!x.simulated(), !y.simulated()), cmp.Compare(x.Never+x.Amplified, y.Never+y.Amplified), cmp.Compare(x.Never, y.Never), cmp.Compare(x.IntentsLost, y.IntentsLost),
			cmp.Compare(x.Extra, y.Extra), cmp.Compare(x.Slowest, y.Slowest))
	})
	best := r.Candidates[r.Ranking[0]]
	yours := r.Candidates[0]
	cells := len(r.Seeds) * len(r.Faults) * len(r.Loads)
	r.Claims = []report.Claim{
		report.Check(fmt.Sprintf("the recommendation (%s) recovers in every cell of the envelope, over %d seeds", best.Name, len(r.Seeds)),
			best.Never == 0, map[string]any{"never_recovered": best.Never, "cells": cells}, "%d of %d cells never recovered", best.Never, cells),
		report.Check(fmt.Sprintf("the recommendation amplifies the load past check's thresholds (%g attempts per intent, %g× capacity) in no cell", maxAttemptsPerIntent, maxPeakOverCapacity),
			best.Amplified == 0, map[string]any{"amplified": best.Amplified, "cells": cells}, "%d of %d cells amplified", best.Amplified, cells),
		report.Check("the recommendation loses no more intents than your policy",
			best.IntentsLost <= yours.IntentsLost, map[string]any{"intents_lost": best.IntentsLost, "yours": yours.IntentsLost},
			"%s against %s", report.Int(best.IntentsLost), report.Int(yours.IntentsLost)),
	}
}

// compareBool orders false before true.
func compareBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// Best returns the recommended candidate.
func (r *AdviseResult) Best() AdviseCandidate { return r.Candidates[r.Ranking[0]] }

// MergeAdvise puts the shards of one search together and ranks it, as
// one run does.
func MergeAdvise(parts []*AdviseResult) (*AdviseResult, error) {
	if len(parts) == 0 {
		return nil, errors.New("merge: no results")
	}
	m := *parts[0]
	m.Shard = grid.Shard{}.String()
	m.Runs = 0
	for _, p := range parts {
		m.Runs += p.Runs
	}
	m.Candidates = slices.Clone(parts[0].Candidates)
	for i := range m.Candidates {
		m.Candidates[i].Cells = newSeedCells(len(m.Seeds), len(m.Faults), len(m.Loads))
	}
	for _, p := range parts {
		if p.Scenario != m.Scenario || p.Clients != m.Clients || p.Conditions != m.Conditions || !slices.Equal(p.Seeds, m.Seeds) || !slices.Equal(p.Loads, m.Loads) || !slices.EqualFunc(p.Faults, m.Faults, checkFault.same) ||
			p.RealLoad != m.RealLoad || p.RealDip != m.RealDip || len(p.Candidates) != len(m.Candidates) {
			return nil, fmt.Errorf("merge: shard %s searched another scenario, envelope or set of candidates", p.Shard)
		}
		for i, c := range p.Candidates {
			if c.Name != m.Candidates[i].Name || !reflect.DeepEqual(c.Fleet, m.Candidates[i].Fleet) || len(c.Cells) != len(m.Seeds) {
				return nil, fmt.Errorf("merge: shard %s's candidate %d is %q, not %q", p.Shard, i, c.Name, m.Candidates[i].Name)
			}
			for s := range c.Cells {
				if err := mergeCells(m.Candidates[i].Cells[s], c.Cells[s]); err != nil {
					return nil, fmt.Errorf("merge: a cell of %q %v", c.Name, err)
				}
			}
		}
	}
	for _, c := range m.Candidates {
		for _, seed := range c.Cells {
			if !complete(seed) {
				return nil, fmt.Errorf("merge: %q has cells no shard ran: give every shard's result", c.Name)
			}
		}
	}
	m.rank()
	return &m, nil
}

// Table is the ranking: the recommendation, the runner-ups, and yours.
func (r *AdviseResult) Table(top int) report.Table {
	cells := len(r.Seeds) * len(r.Faults) * len(r.Loads)
	t := report.Table{
		Title: fmt.Sprintf("Policies ranked over %d cells (%d faults × %d loads × %d seeds)", cells, len(r.Faults), len(r.Loads), len(r.Seeds)),
		Columns: []report.Column{{Name: "#", Align: report.Right}, {Name: "policy"}, {Name: "recovered", Align: report.Right},
			{Name: "amplified", Align: report.Right}, {Name: "intents lost", Align: report.Right}, {Name: "extra attempts", Align: report.Right}, {Name: "slowest", Align: report.Right},
			{Name: "from"}},
		Emphasis: map[[2]int]bool{},
	}
	for pos, i := range r.Ranking {
		if pos >= top && i != 0 {
			continue
		}
		c := r.Candidates[i]
		n, from := cells, "simulator"
		if !c.simulated() {
			// One pass of the cells: the model's, or one seed's.
			n, from = len(r.Faults)*len(r.Loads), c.Source
		}
		row := []string{fmt.Sprint(pos + 1), c.Name, fmt.Sprintf("%d/%d", n-c.Never, n), fmt.Sprint(c.Amplified), report.Int(c.IntentsLost), report.Int(c.Extra), fmt.Sprintf("+%d ticks", c.Slowest), from}
		if c.Never > 0 {
			t.Emphasis[[2]int{len(t.Rows), 2}] = true
		}
		if c.Amplified > 0 {
			t.Emphasis[[2]int{len(t.Rows), 3}] = true
		}
		t.Rows = append(t.Rows, row)
	}
	return t
}

// evidence is each candidate's map as check shows it (the worst seed per
// cell), for the user's policy and the top candidates.
func (r *AdviseResult) evidence(top int) *CheckResult {
	cr := &CheckResult{Scenario: r.Scenario, Rate: r.Rate, Tick: r.Tick, Seeds: r.Seeds, Clients: []int{r.Clients},
		Loads: r.Loads, Faults: r.Faults, RealLoad: r.RealLoad, RealDip: r.RealDip}
	show := []int{0}
	for _, i := range r.Ranking[:min(top, len(r.Ranking))] {
		if i != 0 && r.Candidates[i].simulated() {
			show = append(show, i)
		}
	}
	for _, i := range show {
		c := r.Candidates[i]
		cells, never := worstOfSeeds(c.Cells)
		cr.Fleets = append(cr.Fleets, CheckFleet{Name: c.Name, Cells: cells, Collapsing: never, Runs: [][][][]CheckCell{c.Cells}})
	}
	return cr
}

// Render writes the recommendation, the ranking and the evidence: each
// map (the worst seed per cell) for your policy and the top candidates.
func (r *AdviseResult) Render(w io.Writer, st report.Style, top int) error {
	best := r.Best()
	fmt.Fprintf(w, "Recommended: %s\n\n", best.Name)
	if err := r.Table(top).Render(w, st); err != nil {
		return err
	}
	if s := r.screenNote(); s != "" {
		fmt.Fprintln(w)
		fmt.Fprintln(w, s)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Evidence: recovery after each fault (ticks; the worst seed per cell), your policy and the top candidates.")
	fmt.Fprintln(w)
	for _, t := range r.evidence(top).Tables() {
		if err := t.Render(w, st); err != nil {
			return err
		}
		fmt.Fprintln(w)
	}
	return report.RenderClaims(w, r.Claims, st)
}

// Section is the search as a report section: the ranking, and a heatmap
// per policy shown.
func (r *AdviseResult) Section(top int) report.Section {
	ev := r.evidence(top)
	sec := report.Section{ID: "advise", Title: "Advise: a better policy, with the evidence",
		Intro: []string{fmt.Sprintf("Recommended: %s. Every policy was run through %d faults at %d base loads with %d seeds; the maps show the worst seed per cell.",
			r.Best().Name, len(r.Faults), len(r.Loads), len(r.Seeds))},
		Tables: append([]report.Table{r.Table(top)}, ev.Tables()...), Claims: r.Claims}
	if s := r.screenNote(); s != "" {
		sec.Intro = append(sec.Intro, s)
	}
	for _, f := range ev.Fleets {
		sec.Figures = append(sec.Figures, checkHeatmap(ev, f))
	}
	return sec
}

// Describe says a fleet's policy in one line, for a terminal.
func Describe(f scenario.Fleet) string {
	var b strings.Builder
	fmt.Fprintf(&b, "timeout %v, max_retries %d", f.Timeout, f.Retry.MaxRetries)
	if bo := f.Retry.Backoff; bo.Use != "none" && bo.Use != "" {
		fmt.Fprintf(&b, ", %s backoff from %v (cap %v, %s jitter)", bo.Use, bo.Base, bo.Cap, bo.Jitter)
	}
	fmt.Fprintf(&b, ", budget %s", f.Budget.Use)
	if f.Breaker.Use != "" && f.Breaker.Use != scenario.BreakerNone {
		fmt.Fprintf(&b, ", breaker %s", f.Breaker.Use)
	}
	return b.String()
}
