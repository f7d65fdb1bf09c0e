package verdict

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/retrystorm/retrystorm/experiment"
	"github.com/retrystorm/retrystorm/grid"
	"github.com/retrystorm/retrystorm/report"
	"github.com/retrystorm/retrystorm/scenario"
	"github.com/retrystorm/retrystorm/sim"
)

// CheckInput is one fleet to check, and where it came from.
type CheckInput struct {
	Fleet scenario.Fleet
	// Origin names its source ("envoy.yaml: route api"), for the report.
	Origin string
	// FromBase lists the settings (timeout, retry.backoff, budget...)
	// the fleet took from the base scenario or a product's default rather
	// than from the user's file: the verdict does not blame them.
	FromBase []string
	// Tiers, for a stack (CheckStack), are the layers below the fleet,
	// outermost first: each cell runs the fleet through them to the
	// origin, and the amplification is judged at the origin.
	Tiers []scenario.Tier
	// Assume, when set, is a setting the fleet's file does not say, and
	// another value it may take: check judges the realistic cells again
	// with it, and says whether the verdict rests on it.
	Assume *Assume
}

// Assume is a setting a verdict may rest on: what the check took (the
// product's default) and another value, with the fleet that has it.
type Assume struct {
	Setting string         // "the attempt timeout"
	Value   string         // "none (the SDK's default)"
	Other   string         // "1s (the base scenario's)"
	Fleet   scenario.Fleet // the fleet with Other
}

// CheckOptions say what to check the fleets against.
type CheckOptions struct {
	// Base gives the traffic, the origin (capacity or queue model) and the
	// run's timing; its fleets and triggers are replaced.
	Base *scenario.Scenario
	// Load is the highest base load (intent rate / capacity) the user
	// calls realistic; zero: the base scenario's.
	Load float64
	// Dip is the largest share of capacity a realistic dip takes away;
	// zero: the base scenario's first capacity trigger's, or a third.
	Dip float64
	// Shard, when set, runs only the shard's cells.
	Shard grid.Shard
	// Seeds is how many seeds each cell runs with, from the base's seed
	// up; zero means 3, as advise.
	Seeds int
	// Clients is the number of client instances (each with its own
	// budget and breaker) the verdict rests on; zero means the base
	// scenario's. The realistic cells also run at a quarter and four
	// times that count.
	Clients int
	// Model lets the analytic model answer the cells outside the
	// realistic region that it places far from the boundary (farCell),
	// for every seed, instead of the simulator; every realistic cell, at
	// every client count, still runs in the simulator, so the verdict
	// rests on it. Ignored for a shard, a stack, and a fleet or cell the
	// model does not describe.
	Model bool
	// NoMargin skips the margin's search (advise's evidence, tests).
	NoMargin bool
	// FullRuns plays every run to its end: no run ends early once its
	// collapse is certain (docs/early-exit.md). The verdict is the same
	// either way; what it changes is the time, the amplification printed
	// for collapsed cells, and the figures of the stopped runs in the
	// JSON.
	FullRuns bool
	// CountCollapsed plays the collapsed runs at the verdict's client
	// count to their end, so that their attempts count (advise ranks its
	// candidates by the retries of every cell). By default they stop once
	// every intent left is certain to be lost, and the map gives them no
	// amplification figure (checkearly.go).
	CountCollapsed bool
	// JudgeOn names faults (CheckResult.Faults' names) every fleet is
	// judged on besides those it retries on: advise --stack compares
	// placements that retry less than the chain as it is on the faults
	// the chain is judged on, so that a placement is not better for
	// running fewer cells.
	JudgeOn []string
	// Runs, when set, is shared with the other checks of one invocation
	// (the chains of a manifests directory): a run one of them made is
	// not made again (RunCache). Nil: the check keeps a cache of its own.
	Runs *RunCache
}

// CheckFleet is one fleet's results: Cells[fault][load], the worst seed
// of each cell at the verdict's client count, and its verdict.
type CheckFleet struct {
	Name   string   `json:"name"`
	Origin string   `json:"origin"`
	Risks  []string `json:"risks"` // the settings of the user's file that can keep a storm going
	// FromBase lists the settings the fleet took from the base scenario
	// or a product's default, not from the user's file: never blamed.
	FromBase []string `json:"from_base,omitempty"`
	// Judged[fault] says whether the fleet is judged on the fault: it
	// retries some failure the fault makes (or the fault is a capacity
	// dip, which every fleet meets). Its cells of the others are not run.
	Judged     []bool        `json:"judged"`
	Cells      [][]CheckCell `json:"cells"`
	Collapsing [][]int       `json:"collapsing_seeds"` // [fault][load]: the seeds that never recovered
	// Runs[clients][seed][fault][load] is every run: at the first client
	// count every judged cell, at the others the realistic cells only.
	Runs [][][][]CheckCell `json:"runs"`
	// Bare[seed][fault][load] is the same fleet with retries and hedges
	// off, at the first client count, in the cells where some run of the
	// fleet never recovered (what a collapse is compared with); nil for a
	// fleet that does not retry.
	Bare [][][]CheckCell `json:"retries_off,omitempty"`
	// Assumed is the verdict with the fleet's Assume changed.
	Assumed *Assumed `json:"assumption,omitempty"`
	// ModelRuns counts the runs the model answered (check --model).
	ModelRuns int `json:"model_runs,omitempty"`

	// The verdict: its level and reasons at the first client count, the
	// level at each client count, and the margin.
	Verdict   Level     `json:"verdict"`
	Findings  []Finding `json:"findings"`
	ByClients []Level   `json:"verdict_by_clients"`
	Margin    *Margin   `json:"margin,omitempty"`
}

// Assumed is a fleet's realistic cells with one of its settings changed
// (CheckInput.Assume), and the verdict they give.
type Assumed struct {
	Setting string          `json:"setting"`
	Value   string          `json:"value"`
	Other   string          `json:"other"`
	Runs    [][][]CheckCell `json:"runs"` // [seed][fault][load], realistic cells
	Verdict Level           `json:"verdict"`
	fleet   scenario.Fleet  // the fleet with Other, for the runs
}

// CheckSchema is the version of check's JSON; a baseline of another
// version is refused.
const CheckSchema = 2

// CheckResult is a check's outcome: the envelope and every fleet's map. A
// shard's result holds only its cells (Ran); MergeCheck puts shards
// together into what one run gives.
type CheckResult struct {
	Schema   int          `json:"schema"`
	Scenario string       `json:"scenario"`
	Seed     uint64       `json:"seed"`
	Rate     float64      `json:"rate"`         // intents per second
	Tick     float64      `json:"tick_seconds"` // for peak rates
	Loads    []float64    `json:"loads"`
	Faults   []checkFault `json:"faults"`
	RealLoad float64      `json:"realistic_load"`
	RealDip  float64      `json:"realistic_dip"`
	Seeds    []uint64     `json:"seeds"`
	// Clients are the client instance counts: the verdict's first, then
	// a quarter and four times as many.
	Clients     []int          `json:"clients"`
	ClientsFrom string         `json:"clients_from"` // "--clients" or "the scenario's"
	Shard       string         `json:"shard"`
	Fleets      []CheckFleet   `json:"fleets"`
	Claims      []report.Claim `json:"claims"`
	// Notes say what the check could not judge as configured: a fleet's
	// balancer or outlier detection through tiers, or with one replica.
	Notes []string `json:"notes,omitempty"`
	// Assumptions are the numbers the check took from a base that is not
	// the user's (BaseAssumptions), printed first.
	Assumptions []string `json:"assumptions,omitempty"`
}

// Check runs each fleet through the envelope's faults (capacity dips,
// with the base's queue and a bounded one, bursts of errors and of
// rejections, a stall, a restart that refuses connections, an outage
// that never answers) at several base loads, on the base scenario's
// origin, with several seeds; the same with retries off where it
// collapses; and a search for its margin. Its verdict is the worst
// seed's.
func Check(ctx context.Context, in []CheckInput, co CheckOptions, opts experiment.Options) (*CheckResult, error) {
	if len(in) == 0 {
		return nil, errors.New("check: no fleet to check")
	}
	e, err := newEnvelope(co.Base, co.Load, co.Dip, co.Seeds, co.Clients, true)
	if err != nil {
		return nil, fmt.Errorf("check: %w", err)
	}
	base := e.base
	e.faults = append(e.faults, faultsFor(base, in)...)
	e.judgeOn = co.JudgeOn
	e.cache = co.Runs
	if e.cache == nil && !noRunCache {
		e.cache = new(RunCache)
	}
	r := &CheckResult{Schema: CheckSchema, Scenario: base.Name, Seed: base.Seed, Rate: base.Traffic.Rate, Tick: base.Tick.Seconds(),
		Loads: e.loads, Faults: e.faults, RealLoad: e.realLoad, RealDip: e.realDip, Seeds: e.seeds, Clients: e.clients,
		ClientsFrom: "the scenario's", Shard: co.Shard.String(), Notes: append(slices.Clone(e.notes), balancingNotes(base, in)...)}
	if co.Clients != 0 {
		r.ClientsFrom = "--clients"
	}
	// The floors per client the risks count are at the verdict's client
	// count (--clients), not the base scenario's.
	counted := base.Clone()
	counted.Traffic.Clients = e.clients[0]
	fleets := make([]scenario.Fleet, len(in))
	variants := make([]bool, len(in))
	for i, f := range in {
		fleets[i] = f.Fleet
		cf := CheckFleet{Name: f.Fleet.Name, Origin: f.Origin, FromBase: f.FromBase, Risks: risks(f.Fleet, counted, f.FromBase), Runs: r.newRuns()}
		for _, ft := range e.faults {
			cf.Judged = append(cf.Judged, e.judges(f, ft))
		}
		if chainRetries(f) {
			cf.Bare = newSeedCells(len(e.seeds), len(e.faults), len(e.loads))
		}
		if a := f.Assume; a != nil {
			cf.Assumed = &Assumed{Setting: a.Setting, Value: a.Value, Other: a.Other, fleet: a.Fleet,
				Runs: newSeedCells(len(e.seeds), len(e.faults), len(e.loads))}
			variants[i] = true
		}
		r.Fleets = append(r.Fleets, cf)
	}
	run := checkRun{e: e, in: in, r: r, opts: opts, early: !co.FullRuns, lost: !co.FullRuns && !co.CountCollapsed, name: func(i int) string { return fmt.Sprintf("check: fleet %q", in[i].Fleet.Name) }}
	jobs := e.jobs(in, variants)
	if co.Model && co.Shard.Count <= 1 && !run.stack() {
		jobs = r.modelFar(e, fleets, jobs)
	}
	if co.Shard.Count > 1 {
		// A shard runs its share of every run, retries off included (it
		// cannot know where the others collapse); MergeCheck keeps the
		// retries-off cells one run keeps. The first shard searches the
		// margins.
		if err := run.jobs(ctx, jobs, co.Shard); err != nil {
			return nil, err
		}
		if co.Shard.Index == 0 && !co.NoMargin {
			return r, run.margins(ctx)
		}
		return r, nil
	}
	first := slices.DeleteFunc(jobs, func(j job) bool { return j.variant == retriesOff })
	if err := run.jobs(ctx, first, grid.Shard{}); err != nil {
		return nil, err
	}
	if err := run.jobs(ctx, r.bareJobs(), grid.Shard{}); err != nil {
		return nil, err
	}
	if !co.NoMargin {
		if err := run.margins(ctx); err != nil {
			return nil, err
		}
	}
	r.finish()
	return r, nil
}

// checkRun is one check's runs: the envelope, the fleets, the result.
type checkRun struct {
	e     *envelope
	in    []CheckInput
	r     *CheckResult
	opts  experiment.Options
	early bool // runs may end early (see checkearly.go)
	lost  bool // and the printed runs too, once every intent left is lost
	name  func(i int) string
}

// stack reports whether the fleets call the origin through a stack's
// tiers.
func (c *checkRun) stack() bool {
	return slices.ContainsFunc(c.in, func(f CheckInput) bool { return f.Tiers != nil })
}

// fleet is fleet i as variant v, and the tiers it calls through (a
// stack's; nil: the base's, if any). With retries off, a stack's tiers
// retry no more either.
func (c *checkRun) fleet(i, v int) (scenario.Fleet, []scenario.Tier) {
	f, tiers := c.in[i].Fleet, c.in[i].Tiers
	switch v {
	case retriesOff:
		f = withoutRetries(f)
		if tiers != nil {
			tiers = slices.Clone(tiers)
			for k := range tiers {
				tiers[k].Client.Retry.MaxRetries, tiers[k].Client.Hedge = 0, scenario.Hedge{}
			}
		}
	case assumed:
		f = c.r.Fleets[i].Assumed.fleet
	}
	return f, tiers
}

// jobs runs jobs (the shard's) and files each cell where it belongs.
func (c *checkRun) jobs(ctx context.Context, jobs []job, sh grid.Shard) error {
	if len(jobs) == 0 {
		return nil
	}
	if c.early {
		jobs = slices.Clone(jobs)
		for k := range jobs {
			jobs[k].early = c.earlyFor(jobs[k])
		}
	}
	if err := c.e.runJobs(ctx, jobs, c.fleet, c.name, sh, c.opts, c.file); err != nil || !c.early {
		return err
	}
	var mine []job
	for k, j := range jobs {
		if sh.Owns(k) {
			mine = append(mine, j)
		}
	}
	return c.settleStopped(ctx, mine, c.cell, c.file)
}

// cell is where job j's cell is filed.
func (c *checkRun) cell(j job) *CheckCell {
	f := &c.r.Fleets[j.fleet]
	switch j.variant {
	case retriesOff:
		return &f.Bare[j.seed][j.fault][j.load]
	case assumed:
		return &f.Assumed.Runs[j.seed][j.fault][j.load]
	}
	return &f.Runs[j.clients][j.seed][j.fault][j.load]
}

// file files job j's cell where it belongs.
func (c *checkRun) file(j job, cell CheckCell) { *c.cell(j) = cell }

// bareJobs are the runs with retries off that the verdict compares a
// collapse with: the cells (fault, load) where some run of a fleet that
// retries never recovered, every seed, at the first client count.
func (r *CheckResult) bareJobs() []job {
	var out []job
	for i, f := range r.Fleets {
		if f.Bare == nil {
			continue
		}
		for fi := range r.Faults {
			for li := range r.Loads {
				if !f.collapsesIn(fi, li) {
					continue
				}
				for si := range r.Seeds {
					out = append(out, job{i, retriesOff, 0, si, fi, li, sim.NoEarlyExit})
				}
			}
		}
	}
	return out
}

// collapsesIn reports whether some run of the fleet (at any client count,
// or with its assumption changed) never recovered in cell (fi, li).
func (f *CheckFleet) collapsesIn(fi, li int) bool {
	never := func(seeds [][][]CheckCell) bool {
		return slices.ContainsFunc(seeds, func(s [][]CheckCell) bool { c := s[fi][li]; return c.Ran && !c.Recovered })
	}
	return slices.ContainsFunc(f.Runs, never) || f.Assumed != nil && never(f.Assumed.Runs)
}

// keepBare clears the retries-off cells one run would not have made
// (where no run of the fleet collapsed), so that merged shards, which ran
// them all, give what one run gives.
func (r *CheckResult) keepBare() {
	for i := range r.Fleets {
		f := &r.Fleets[i]
		for _, seed := range f.Bare {
			for fi := range seed {
				for li := range seed[fi] {
					if !f.collapsesIn(fi, li) {
						seed[fi][li] = CheckCell{}
					}
				}
			}
		}
	}
}

// newRuns makes an empty set of runs: clients × seeds × faults × loads.
func (r *CheckResult) newRuns() [][][][]CheckCell {
	runs := make([][][][]CheckCell, len(r.Clients))
	for k := range runs {
		runs[k] = newSeedCells(len(r.Seeds), len(r.Faults), len(r.Loads))
	}
	return runs
}

// finish makes each fleet's map (the worst seed per cell), its verdicts
// and the claims, once every run is in.
func (r *CheckResult) finish() {
	a := r.assessment()
	for i := range r.Fleets {
		f := &r.Fleets[i]
		f.Cells, f.Collapsing = worstOfSeeds(f.Runs[0])
		f.ByClients = f.ByClients[:0]
		for k := range r.Clients {
			j := a.judge(f.Runs[k], f.Bare, f.Judged)
			if k == 0 {
				f.Verdict, f.Findings = j.Level, j.Findings
			}
			f.ByClients = append(f.ByClients, j.Level)
		}
		if f.Assumed != nil {
			f.Assumed.Verdict = a.judge(f.Assumed.Runs, f.Bare, f.Judged).Level
		}
	}
	r.Notes = append(r.Notes, r.neverHealthyNotes()...)
	r.Notes = append(r.Notes, r.earlyNote()...)
	r.Claims = r.claims()
}

// assessment is the result's axes, for judge.
func (r *CheckResult) assessment() assessment {
	return assessment{loads: r.Loads, faults: r.Faults, realLoad: r.RealLoad}
}

// judge is fleet i's judgement at client count ki.
func (r *CheckResult) judge(i, ki int) judgement {
	f := r.Fleets[i]
	return r.assessment().judge(f.Runs[ki], f.Bare, f.Judged)
}

// neverHealthyNotes say, for each fleet that failed most of its tries
// before a fault began in some run, at which loads: its NEVER there is
// not a storm its retries kept going but a fleet that never worked (an
// origin slower than its timeout, say), and no retry policy mends it.
func (r *CheckResult) neverHealthyNotes() []string {
	var notes []string
	for _, f := range r.Fleets {
		var loads []string
		for li := range r.Loads {
			bad := false
			for _, seed := range f.Runs[0] {
				for fi := range seed {
					bad = bad || seed[fi][li].NeverHealthy
				}
			}
			if bad {
				loads = append(loads, report.Percent(r.Loads[li], 0))
			}
		}
		if loads != nil {
			at := "load " + loads[0]
			if len(loads) > 1 {
				at = "loads " + strings.Join(loads, ", ")
			}
			notes = append(notes, fmt.Sprintf("fleet %q was never healthy at %s: before the fault it already failed more than half of its tries, so those cells are NEVER whatever it retries; compare its timeout with the origin's service time there",
				f.Name, at))
		}
	}
	return notes
}

// realistic reports whether cell (fault fi, load li) is in the region the
// user calls realistic (see realisticCell).
func (r *CheckResult) realistic(fi, li int) bool {
	return realisticCell(r.Loads, r.Faults, r.RealLoad, fi, li)
}

// Level is fleet i's verdict at the verdict's client count.
func (r *CheckResult) Level(i int) Level { return r.Fleets[i].Verdict }

// FailingCells is how many cells count against fleet i at the verdict's
// client count: realistic cells that stay collapsed, and findings past
// the thresholds or outside the region. A baseline compares it.
func (r *CheckResult) FailingCells(i int) int {
	j := r.judge(i, 0)
	return j.count(Unsafe) + j.count(AtRisk)
}

func (r *CheckResult) claims() []report.Claim {
	var cs []report.Claim
	for i, f := range r.Fleets {
		j := r.judge(i, 0)
		cs = append(cs, report.Check(fmt.Sprintf("%s is SAFE: it recovers without amplifying the load past the thresholds in every realistic cell (load up to %s, capacity dips up to %s, and every fault it retries on at its realistic size), and collapses outside the region only where retries off do too, in each of %d seeds, at %d clients",
			f.Name, report.Percent(r.RealLoad, 0), report.Percent(r.RealDip, 0), len(r.Seeds), r.Clients[0]),
			j.Level == Safe, map[string]any{"verdict": levelKeys[j.Level], "collapsed_realistic_cells": j.count(Unsafe), "findings_at_risk": j.count(AtRisk)},
			"%s: %d realistic cells stay collapsed, %d findings past the thresholds or outside the region", j.Level, j.count(Unsafe), j.count(AtRisk)))
	}
	return cs
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
