package verdict

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

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
	// Writable are the policies the user's format can write, each as the
	// product reads its edited file (importer.Writable): the search ranks
	// them with the others, and the recommendation is the best of them
	// (BestWritable); the others are what a code change would add.
	Writable []scenario.Fleet
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
	// ScreenOnly stops an unsharded search after its screen: every
	// candidate has its Screen and none its Cells, and ScreenOrder ranks
	// them. A search in rounds uses it to choose what to run in full.
	ScreenOnly bool
	// Screens, when set, keeps each candidate's screen by name across
	// searches with the same options and user fleet, so that a search in
	// rounds screens a candidate once.
	Screens *ScreenCache
}

// ScreenCache holds candidates' screens by name (AdviseOptions.Screens).
// Its zero value is empty and ready; it is not safe for concurrent use.
type ScreenCache struct {
	m map[string]screenEntry
}

type screenEntry struct {
	cells  [][]CheckCell
	source string
}

// AdviseCandidate is one policy advise tried, and how it did over every
// cell and seed.
type AdviseCandidate struct {
	Name  string         `json:"name"`
	Fleet scenario.Fleet `json:"fleet"`
	// Writable: the user's format writes it (AdviseOptions.Writable, and
	// the user's own policy).
	Writable bool `json:"writable,omitempty"`
	// Cells[seed][fault][load].
	Cells [][][]CheckCell `json:"cells"`
	// Judged[fault]: whether the candidate is judged on the fault (it,
	// or your policy, retries some failure the fault makes).
	Judged []bool `json:"judged"`
	// Bare indexes AdviseResult.Bare: the candidate with retries off, what
	// its collapses are compared with; -1 for a candidate that does not
	// retry.
	Bare int `json:"retries_off"`
	// Totals over every cell and seed (filled once all cells are in): the
	// runs that never recovered; the verdict check gives these runs, with
	// its count of realistic cells that stay collapsed where retries off
	// recover and of findings past the thresholds or outside the region.
	Never       int   `json:"never_recovered"`
	Level       Level `json:"verdict"`
	Collapsed   int   `json:"collapsed"`
	AtRisk      int   `json:"at_risk"`
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
	ScreenSource string        `json:"screen_source,omitempty"` // "model", "simulator, 1 seed", or both (sourceMixed)
}

// simulated reports whether c's totals rest on the simulator at every
// seed (a shard's result from before sources were said has none).
func (c *AdviseCandidate) simulated() bool { return c.Source == "" || c.Source == sourceSimulator }

// Simulated reports whether c's totals rest on the simulator at every
// seed, rather than on a screen.
func (c AdviseCandidate) Simulated() bool { return c.simulated() }

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
	// Bare are the candidates with retries off, each once: their runs in
	// the cells where a candidate that has it collapsed.
	Bare []AdviseBare `json:"retries_off"`
	// Runs is the simulator runs of candidates the search made, and
	// Exhaustive how many it would have made without its screen; BareRuns
	// the runs with retries off kept beside them (a shard makes them all,
	// and the merge keeps those one run makes).
	Runs       int `json:"simulator_runs"`
	Exhaustive int `json:"exhaustive_runs"`
	BareRuns   int `json:"retries_off_runs"`
	// Ranking lists candidate indexes, best first (filled once all cells
	// are in).
	Ranking []int          `json:"ranking"`
	Claims  []report.Claim `json:"claims"`
	// ScreenOrder lists candidate indexes by their screens, best first,
	// in a screened search (AdviseOptions.ScreenOnly, and the screen of
	// a search that then ran the best at every seed).
	ScreenOrder []int `json:"-"`
	screenKeys  []screenKey
}

// AdviseBare is a fleet with retries off and its runs,
// Cells[seed][fault][load], in the cells where some candidate with it
// never recovered.
type AdviseBare struct {
	Fleet scenario.Fleet  `json:"fleet"`
	Cells [][][]CheckCell `json:"cells"`
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
	e.faults = append(e.faults, faultsFor(e.base, []CheckInput{user})...)
	cands := adviseCandidates(user.Fleet, ao.Conditions)
	if ao.Space != nil {
		cands = cands[:1]
		for _, f := range ao.Space {
			cands = append(cands, AdviseCandidate{Name: f.Name, Fleet: f})
		}
	}
	if ao.Writable != nil {
		cands[0].Writable = true
		for _, f := range ao.Writable {
			cands = append(cands, AdviseCandidate{Name: f.Name, Fleet: f, Writable: true})
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
	r.prepare(user.Fleet)
	name := func(i int) string { return fmt.Sprintf("advise: candidate %q", cands[i].Name) }
	for i := range r.Candidates {
		r.Exhaustive += len(r.candidateJobs(i, 0))
	}
	if !ao.ScreenOnly && (ao.Shard.Count > 1 || ao.Exhaustive || len(cands) <= adviseConfirm+1) {
		for i := range r.Candidates {
			r.Candidates[i].Cells = newSeedCells(nS, nF, nL)
			r.Candidates[i].Source = sourceSimulator
		}
		var jobs []job
		for i := range r.Candidates {
			jobs = append(jobs, r.candidateJobs(i, 0)...)
		}
		if ao.Shard.Count > 1 {
			// A shard cannot know where the others collapse: it runs its
			// share of every retries-off cell, and the merge keeps what
			// one run keeps.
			return r, r.run(ctx, e, append(jobs, r.bareJobs(true)...), name, ao.Shard, opts)
		}
		if err := r.run(ctx, e, jobs, name, grid.Shard{}, opts); err != nil {
			return nil, err
		}
		if err := r.run(ctx, e, r.bareJobs(false), name, grid.Shard{}, opts); err != nil {
			return nil, err
		}
		r.rank()
		return r, nil
	}
	if err := r.screened(ctx, e, name, opts, ao.ScreenOnly, ao.Screens); err != nil {
		return nil, err
	}
	return r, nil
}

// prepare sets what every candidate is judged on (the faults it, or your
// policy, retries on: so that every comparison is over the same cells
// and seeds as your policy's, and over its own) and its retries-off
// fleet.
func (r *AdviseResult) prepare(user scenario.Fleet) {
	for i := range r.Candidates {
		c := &r.Candidates[i]
		c.Judged = c.Judged[:0]
		for _, ft := range r.Faults {
			c.Judged = append(c.Judged, judges(c.Fleet, ft) || judges(user, ft))
		}
		c.Bare = -1
		if !retries(c.Fleet) {
			continue
		}
		bare := withoutRetries(c.Fleet)
		bare.Name = "retries off"
		c.Bare = slices.IndexFunc(r.Bare, func(b AdviseBare) bool { return reflect.DeepEqual(b.Fleet, bare) })
		if c.Bare < 0 {
			c.Bare = len(r.Bare)
			r.Bare = append(r.Bare, AdviseBare{Fleet: bare, Cells: newSeedCells(len(r.Seeds), len(r.Faults), len(r.Loads))})
		}
	}
}

// candidateJobs are candidate i's runs of the cells it is judged on, from
// seed from on.
func (r *AdviseResult) candidateJobs(i, from int) []job {
	var out []job
	c := &r.Candidates[i]
	for si := from; si < len(r.Seeds); si++ {
		for fi := range r.Faults {
			if !c.Judged[fi] {
				continue
			}
			for li := range r.Loads {
				out = append(out, job{fleet: i, seed: si, fault: fi, load: li})
			}
		}
	}
	return out
}

// bareJobs are the retries-off runs not made yet of the cells where a
// candidate simulated at every seed never recovered, or of every cell
// when all is set.
func (r *AdviseResult) bareJobs(all bool) []job {
	need := make([][][]bool, len(r.Bare))
	for b := range need {
		need[b] = make([][]bool, len(r.Faults))
		for fi := range need[b] {
			need[b][fi] = make([]bool, len(r.Loads))
		}
	}
	for _, c := range r.Candidates {
		if c.Bare < 0 {
			continue
		}
		for fi := range r.Faults {
			for li := range r.Loads {
				need[c.Bare][fi][li] = need[c.Bare][fi][li] || c.Judged[fi] && (all || c.collapsesIn(fi, li))
			}
		}
	}
	var out []job
	for b, cells := range need {
		for fi, row := range cells {
			for li, ok := range row {
				for si := range r.Seeds {
					if ok && !r.Bare[b].Cells[si][fi][li].Ran {
						out = append(out, job{fleet: b, variant: retriesOff, seed: si, fault: fi, load: li})
					}
				}
			}
		}
	}
	return out
}

// collapsesIn reports whether some seed of the candidate's runs never
// recovered in cell (fi, li).
func (c *AdviseCandidate) collapsesIn(fi, li int) bool {
	return slices.ContainsFunc(c.Cells, func(s [][]CheckCell) bool { x := s[fi][li]; return x.Ran && !x.Recovered })
}

// keepBare clears the retries-off cells one run would not have made, so
// that merged shards, which ran them all, give what one run gives.
func (r *AdviseResult) keepBare() {
	keep := map[job]bool{}
	for _, j := range r.bareJobs(false) {
		keep[job{fleet: j.fleet, fault: j.fault, load: j.load}] = true
	}
	for b := range r.Bare {
		for _, seed := range r.Bare[b].Cells {
			for fi := range seed {
				for li := range seed[fi] {
					if !keep[job{fleet: b, fault: fi, load: li}] && !r.bareNeeded(b, fi, li) {
						seed[fi][li] = CheckCell{}
					}
				}
			}
		}
	}
}

// bareNeeded reports whether retries-off fleet b's cell (fi, li) is one a
// candidate's collapse is compared with.
func (r *AdviseResult) bareNeeded(b, fi, li int) bool {
	return slices.ContainsFunc(r.Candidates, func(c AdviseCandidate) bool { return c.Bare == b && c.Judged[fi] && c.collapsesIn(fi, li) })
}

// run runs jobs (candidates, and retries-off fleets) and files each cell.
func (r *AdviseResult) run(ctx context.Context, e *envelope, jobs []job, name func(int) string, sh grid.Shard, opts experiment.Options) error {
	if len(jobs) == 0 {
		return nil
	}
	spec := func(i, v int) (scenario.Fleet, []scenario.Tier) {
		if v == retriesOff {
			return r.Bare[i].Fleet, nil
		}
		return r.Candidates[i].Fleet, nil
	}
	// Every figure advise ranks by is the whole run's with the certain
	// drain skipped (docs/early-exit.md); the screen's runs stop sooner,
	// and a candidate that goes on runs its stopped cells again.
	jobs = slices.Clone(jobs)
	for k := range jobs {
		if jobs[k].early == sim.NoEarlyExit {
			jobs[k].early = sim.SkipCertainDrain
		}
	}
	var runs atomic.Int64 // keep runs on every worker
	err := e.runJobs(ctx, jobs, spec, name, sh, opts, func(j job, c CheckCell) {
		if j.variant == retriesOff {
			r.Bare[j.fleet].Cells[j.seed][j.fault][j.load] = c
			return
		}
		runs.Add(1)
		cand := &r.Candidates[j.fleet]
		if cand.Cells == nil {
			cand.Screen[j.fault][j.load] = c
			return
		}
		cand.Cells[j.seed][j.fault][j.load] = c
	})
	r.Runs += int(runs.Load())
	return err
}

// rank judges every candidate's runs as check judges a fleet's and
// orders them: the fewest realistic cells that stay collapsed (where
// retries off recover), then the fewest findings past the thresholds or
// outside the realistic region, then the fewest intents lost, then the
// least extra load, then the fastest recovery; ties keep the order they
// were built in.
//
// A candidate the screen left out ranks after every simulated one, by its
// screen's totals (every collapse counted): the recommendation always
// rests on the simulator.
func (r *AdviseResult) rank() {
	a := assessment{loads: r.Loads, faults: r.Faults, realLoad: r.RealLoad}
	r.Ranking = r.Ranking[:0]
	r.BareRuns = 0
	for _, b := range r.Bare {
		for _, seed := range b.Cells {
			for _, row := range seed {
				for _, c := range row {
					if c.Ran {
						r.BareRuns++
					}
				}
			}
		}
	}
	for i := range r.Candidates {
		c := &r.Candidates[i]
		c.Never, c.IntentsLost, c.Extra, c.Slowest = 0, 0, 0, 0
		runs, bare := c.Cells, r.bareOf(c)
		if !c.simulated() {
			runs, bare = [][][]CheckCell{c.Screen}, newSeedCells(1, len(r.Faults), len(r.Loads))
		}
		j := a.judge(runs, bare, c.Judged)
		c.Level, c.Collapsed, c.AtRisk = j.Level, j.count(Unsafe), j.count(AtRisk)
		for _, seed := range runs {
			for fi, row := range seed {
				if !c.Judged[fi] {
					continue
				}
				for _, cell := range row {
					if !cell.Recovered {
						c.Never++
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
		return cmp.Or(compareBool(!x.simulated(), !y.simulated()), cmp.Compare(x.Collapsed, y.Collapsed), cmp.Compare(x.AtRisk, y.AtRisk),
			cmp.Compare(x.IntentsLost, y.IntentsLost), cmp.Compare(x.Extra, y.Extra), cmp.Compare(x.Slowest, y.Slowest))
	})
	best := r.Candidates[r.Ranking[0]]
	yours := r.Candidates[0]
	r.Claims = []report.Claim{
		report.Check(fmt.Sprintf("the recommendation (%s) is SAFE over the envelope, in each of %d seeds", best.Name, len(r.Seeds)),
			best.Level == Safe, map[string]any{"verdict": levelKeys[best.Level], "collapsed": best.Collapsed, "at_risk": best.AtRisk},
			"%s: %d realistic cells stay collapsed, %d findings past the thresholds or outside the region", best.Level, best.Collapsed, best.AtRisk),
		report.Check("the recommendation does no worse than your policy: no more realistic cells that stay collapsed, then no more findings, then no more intents lost",
			cmp.Or(cmp.Compare(best.Collapsed, yours.Collapsed), cmp.Compare(best.AtRisk, yours.AtRisk), cmp.Compare(best.IntentsLost, yours.IntentsLost)) <= 0,
			map[string]any{"collapsed": best.Collapsed, "at_risk": best.AtRisk, "intents_lost": best.IntentsLost,
				"yours_collapsed": yours.Collapsed, "yours_at_risk": yours.AtRisk, "yours_intents_lost": yours.IntentsLost},
			"%d, %d, %s against yours %d, %d, %s", best.Collapsed, best.AtRisk, report.Int(best.IntentsLost), yours.Collapsed, yours.AtRisk, report.Int(yours.IntentsLost)),
	}
}

// bareOf is candidate c's runs with retries off, or nil for a candidate
// that does not retry.
func (r *AdviseResult) bareOf(c *AdviseCandidate) [][][]CheckCell {
	if c.Bare < 0 || c.Bare >= len(r.Bare) {
		return nil
	}
	return r.Bare[c.Bare].Cells
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

// Best returns the best candidate of all.
func (r *AdviseResult) Best() AdviseCandidate { return r.Candidates[r.Ranking[0]] }

// BestWritable returns the best candidate the user's format can write (the
// user's own policy among them), and whether the search had any: the
// recommendation when it did.
func (r *AdviseResult) BestWritable() (AdviseCandidate, bool) {
	for _, i := range r.Ranking {
		if r.Candidates[i].Writable {
			return r.Candidates[i], true
		}
	}
	return AdviseCandidate{}, false
}

// Recommended is the recommendation: the best candidate the user's format
// writes when the search had such candidates and one does better than the
// user's own policy, else the user's own when the search had them (no
// edit helps), else the best of all.
func (r *AdviseResult) Recommended() AdviseCandidate {
	if w, ok := r.BestWritable(); ok {
		if Better(w, r.Candidates[0]) {
			return w
		}
		return r.Candidates[0]
	}
	return r.Best()
}

// Better reports whether candidate a does better than b over the same
// cells and seeds: fewer realistic cells that stay collapsed, then fewer
// findings past the thresholds or outside the region, then fewer intents
// lost.
func Better(a, b AdviseCandidate) bool {
	return cmp.Or(cmp.Compare(a.Collapsed, b.Collapsed), cmp.Compare(a.AtRisk, b.AtRisk), cmp.Compare(a.IntentsLost, b.IntentsLost)) < 0
}

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
	m.Bare = slices.Clone(parts[0].Bare)
	for b := range m.Bare {
		m.Bare[b].Cells = newSeedCells(len(m.Seeds), len(m.Faults), len(m.Loads))
	}
	into := func(what string, dst, src [][][]CheckCell) error {
		if len(src) != len(dst) {
			return fmt.Errorf("merge: %s has another set of runs", what)
		}
		for s := range src {
			if err := mergeCells(dst[s], src[s]); err != nil {
				return fmt.Errorf("merge: a cell of %s %v", what, err)
			}
		}
		return nil
	}
	for _, p := range parts {
		if p.Scenario != m.Scenario || p.Clients != m.Clients || p.Conditions != m.Conditions || !slices.Equal(p.Seeds, m.Seeds) || !slices.Equal(p.Loads, m.Loads) || !slices.EqualFunc(p.Faults, m.Faults, checkFault.same) ||
			p.RealLoad != m.RealLoad || p.RealDip != m.RealDip || len(p.Candidates) != len(m.Candidates) || len(p.Bare) != len(m.Bare) {
			return nil, fmt.Errorf("merge: shard %s searched another scenario, envelope or set of candidates", p.Shard)
		}
		for i, c := range p.Candidates {
			mc := m.Candidates[i]
			if c.Name != mc.Name || !reflect.DeepEqual(c.Fleet, mc.Fleet) || !slices.Equal(c.Judged, mc.Judged) || c.Bare != mc.Bare {
				return nil, fmt.Errorf("merge: shard %s's candidate %d is %q, not %q", p.Shard, i, c.Name, mc.Name)
			}
			if err := into(strconv.Quote(c.Name), mc.Cells, c.Cells); err != nil {
				return nil, err
			}
		}
		for b, x := range p.Bare {
			if !reflect.DeepEqual(x.Fleet, m.Bare[b].Fleet) {
				return nil, fmt.Errorf("merge: shard %s's retries-off fleet %d is another", p.Shard, b)
			}
			if err := into("retries off", m.Bare[b].Cells, x.Cells); err != nil {
				return nil, err
			}
		}
	}
	for _, c := range m.Candidates {
		for _, seed := range c.Cells {
			if !complete(seed, c.Judged) {
				return nil, fmt.Errorf("merge: %q has cells no shard ran: give every shard's result", c.Name)
			}
		}
	}
	m.keepBare()
	m.rank()
	return &m, nil
}

// Table is the ranking: the recommendation, the runner-ups, and yours.
func (r *AdviseResult) Table(top int) report.Table {
	cells := len(r.Seeds) * len(r.Faults) * len(r.Loads)
	t := report.Table{
		Title: fmt.Sprintf("Policies ranked over %d cells (%d faults × %d loads × %d seed%s)", cells, len(r.Faults), len(r.Loads), len(r.Seeds), plural(len(r.Seeds))),
		Columns: []report.Column{{Name: "#", Align: report.Right}, {Name: "policy"}, {Name: "verdict"}, {Name: "collapsed", Align: report.Right},
			{Name: "at risk", Align: report.Right}, {Name: "intents lost", Align: report.Right}, {Name: "extra attempts", Align: report.Right}, {Name: "slowest", Align: report.Right},
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
		_ = n
		row := []string{fmt.Sprint(pos + 1), c.Name, c.Level.String(), fmt.Sprint(c.Collapsed), fmt.Sprint(c.AtRisk), report.Int(c.IntentsLost), report.Int(c.Extra), fmt.Sprintf("+%d ticks", c.Slowest), from}
		if c.Level != Safe {
			t.Emphasis[[2]int{len(t.Rows), 2}] = true
		}
		if c.Collapsed > 0 {
			t.Emphasis[[2]int{len(t.Rows), 3}] = true
		}
		if c.AtRisk > 0 {
			t.Emphasis[[2]int{len(t.Rows), 4}] = true
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
		cr.Fleets = append(cr.Fleets, CheckFleet{Name: c.Name, Cells: cells, Collapsing: never, Runs: [][][][]CheckCell{c.Cells},
			Bare: r.bareOf(&c), Judged: c.Judged, Verdict: c.Level})
	}
	return cr
}

// Render writes the recommendation, the ranking and the evidence: each
// map (the worst seed per cell) for your policy and the top candidates.
func (r *AdviseResult) Render(w io.Writer, st report.Style, top int) error {
	fmt.Fprintf(w, "Recommended: %s\n\n", r.Recommended().Name)
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
			r.Recommended().Name, len(r.Faults), len(r.Loads), len(r.Seeds))},
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

// CodeAdditions are what code in the client would add to fleet f, beyond
// what its proxy's or SDK's config can say: resil's breaker, a token
// bucket of 10% in place of its budget, and both. Advise shows the best of
// them beside the best policy the user's format writes.
func CodeAdditions(f scenario.Fleet) []scenario.Fleet {
	breaker := scenario.Breaker{Use: scenario.BreakerConsecutive, Threshold: 5, Cooldown: 5 * time.Second, Probes: 1, Scope: "all"}
	bucket := scenario.Budget{Use: scenario.BudgetTokenBucket, TokenBucket: budget.TokenBucketSettings{Ratio: 0.1, Funding: budget.FundedBySuccess, MinTokens: 10, MaxTokens: 100, RetryCost: 1, TimeoutCost: 1}}
	withBreaker, withBucket, both := f, f, f
	withBreaker.Breaker, both.Breaker = breaker, breaker
	withBucket.Budget, both.Budget = bucket, bucket
	withBreaker.Name = withSuffix(f.Name, " + resil's breaker (5 failures, 5s)")
	withBucket.Name = withSuffix(f.Name, " + resil's token bucket 10%")
	both.Name = withSuffix(f.Name, " + resil's breaker and token bucket 10%")
	return []scenario.Fleet{withBreaker, withBucket, both}
}

// withSuffix is name and suffix within a fleet name's length
// (scenario.MaxNameBytes), name cut short (at a rune) with "…" if need be.
func withSuffix(name, suffix string) string {
	room := scenario.MaxNameBytes - len(suffix)
	if len(name) <= room {
		return name + suffix
	}
	cut := room - len("…")
	for cut > 0 && !utf8.RuneStart(name[cut]) {
		cut--
	}
	return name[:cut] + "…" + suffix
}
