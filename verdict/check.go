package verdict

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"html/template"
	"io"
	"math"
	"slices"
	"strings"
	"time"

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
}

// A fault of the standard envelope.
type checkFault struct {
	Name string  `json:"name"`
	Kind string  `json:"kind"`           // a trigger kind
	Dip  float64 `json:"dip,omitempty"`  // capacity dips: the share removed
	For  float64 `json:"for_seconds"`    // how long, seconds
	Rate float64 `json:"rate,omitempty"` // error blips: the error rate
	Mode string  `json:"mode,omitempty"` // outages: scenario.OutageRefuse or blackhole
	// Replica, when set, is the one replica the fault hits (errors,
	// outages, latency); nil: the whole origin.
	Replica *int    `json:"replica,omitempty"`
	Factor  float64 `json:"factor,omitempty"` // latency: the replica's latency multiplier
	// Bounded, for a capacity dip, bounds the origin's queue (a second
	// of work) so that the overload is rejected at once: what a config
	// that retries only rejections (503, 429, UNAVAILABLE) answers to.
	Bounded bool `json:"bounded_queue,omitempty"`
	// Exercises names the failures the fault makes, which a config
	// retries or not.
	Exercises string `json:"exercises"`
}

// same reports whether two faults are the same fault: their replicas by
// number, not by address.
func (f checkFault) same(g checkFault) bool {
	if (f.Replica == nil) != (g.Replica == nil) || f.Replica != nil && *f.Replica != *g.Replica {
		return false
	}
	f.Replica, g.Replica = nil, nil
	return f == g
}

// CheckCell is one fleet's run in one cell of the envelope.
type CheckCell struct {
	Ran           bool  `json:"ran"`
	Recovered     bool  `json:"recovered"`
	RecoveryTicks int   `json:"recovery_ticks"` // -1 when not recovered
	Intents       int64 `json:"intents"`
	Attempts      int64 `json:"attempts"`
	Retries       int64 `json:"retries"` // retries and hedges: the extra load
	IntentsLost   int64 `json:"intents_lost"`
	PeakOffered   int64 `json:"peak_offered"`
	// Source is where the numbers come from: "simulator", or "model" for
	// a cell check --model left to the analytic model (far from the
	// boundary, outside the realistic region). Empty in results from
	// before it was said: the simulator.
	Source string `json:"source,omitempty"`
	// NeverHealthy: the fleet failed most of its tries before the fault
	// (sim.Summary.NeverHealthy), so the cell is never recovered whatever
	// the retries do; left out of the JSON when false.
	NeverHealthy bool `json:"never_healthy,omitempty"`
}

// CheckFleet is one fleet's results: Cells[fault][load], the worst seed
// of each cell at the verdict's client count.
type CheckFleet struct {
	Name   string   `json:"name"`
	Origin string   `json:"origin"`
	Risks  []string `json:"risks"` // the settings of the user's file that can keep a storm going
	// FromBase lists the settings the fleet took from the base scenario
	// or a product's default, not from the user's file: never blamed.
	FromBase []string      `json:"from_base,omitempty"`
	Cells    [][]CheckCell `json:"cells"`
	// Collapsing[fault][load] counts the seeds that never recovered.
	Collapsing [][]int `json:"collapsing_seeds"`
	// Runs[clients][seed][fault][load] is every run: at the first client
	// count every cell, at the others the realistic cells only.
	Runs [][][][]CheckCell `json:"runs"`
	// ModelRuns counts the runs the model answered (check --model).
	ModelRuns int `json:"model_runs,omitempty"`
}

// CheckResult is a check's outcome: the envelope and every fleet's map. A
// shard's result holds only its cells (Ran); MergeCheck puts shards
// together into what one run gives.
type CheckResult struct {
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
}

// checkEnvelope is the standard set of faults and loads around the
// realistic point. The faults make every failure a config may retry on:
// timeouts (an unbounded queue's late answers, a blackholed outage),
// overload rejections (a bounded queue, 503/429/UNAVAILABLE), errors
// (5xx, INTERNAL) and refused connections.
func checkEnvelope(realLoad, realDip float64) ([]float64, []checkFault) {
	loads := []float64{0.5, 0.7, 0.9}
	if !slices.Contains(loads, realLoad) {
		loads = append(loads, realLoad)
	}
	slices.Sort(loads)
	dips := []float64{realDip}
	for _, d := range []float64{0.5, 0.75} {
		if math.Abs(d-realDip) > 0.01 {
			dips = append(dips, d)
		}
	}
	slices.Sort(dips)
	var fs []checkFault
	for _, d := range dips {
		fs = append(fs, checkFault{Name: fmt.Sprintf("capacity dip of %s", report.Percent(d, 0)), Kind: scenario.TriggerCapacity, Dip: d, For: 10,
			Exercises: "late answers (timeouts) from the base's queue, rejections from a capacity origin"})
	}
	fs = append(fs, checkFault{Name: fmt.Sprintf("dip of %s, bounded queue", report.Percent(realDip, 0)), Kind: scenario.TriggerCapacity, Dip: realDip, For: 10, Bounded: true,
		Exercises: "overload rejections (503, 429, gRPC UNAVAILABLE)"})
	return loads, append(fs,
		checkFault{Name: "error blip (50% errors)", Kind: scenario.TriggerErrors, Rate: 0.5, For: 10, Exercises: "error answers (500, gRPC INTERNAL)"},
		checkFault{Name: "stall (nothing served)", Kind: scenario.TriggerCapacity, Dip: 1, For: 5, Exercises: "timeouts as the queue fills"},
		checkFault{Name: "outage, connections refused", Kind: scenario.TriggerOutage, Mode: scenario.OutageRefuse, For: 10, Exercises: "refused connections and resets, failed at once"},
		checkFault{Name: "total outage (no answer)", Kind: scenario.TriggerOutage, Mode: scenario.OutageBlackhole, For: 10, Exercises: "timeouts: nothing answers"},
	)
}

// replicaFaults are the faults of one bad replica of several, which check
// adds to its envelope when a fleet it checks balances or detects
// outliers and the origin has replicas: one replica answering only
// errors, one black-holed, one ten times slower, each for as long as the
// other faults. They are realistic at every realistic load (one bad host
// is an everyday fault), so the verdict judges the fleet's ejection and
// balancing settings on them.
func replicaFaults() []checkFault {
	bad := 0
	return []checkFault{
		{Name: "one replica returns errors", Kind: scenario.TriggerErrors, Rate: 1, For: 10, Replica: &bad,
			Exercises: "error answers from one replica of several: what outlier detection ejects on consecutive 5xx or success rate"},
		{Name: "one replica black-holed", Kind: scenario.TriggerOutage, Mode: scenario.OutageBlackhole, For: 10, Replica: &bad,
			Exercises: "timeouts from one replica of several (local-origin failures to Envoy)"},
		{Name: "one replica 10× slower", Kind: scenario.TriggerLatency, Factor: 10, For: 10, Replica: &bad,
			Exercises: "a slow replica: late answers a least-request or EWMA picker avoids and a random one does not"},
	}
}

// judgesReplicas reports whether check adds replicaFaults on base's
// origin: it has several replicas and a fleet checked, or a tier of its
// stack or of the base, balances or detects outliers.
func judgesReplicas(base *scenario.Scenario, in []CheckInput) bool {
	return base.Origin.Replicas >= 2 && slices.ContainsFunc(in, func(f CheckInput) bool { return balances(base, f) })
}

// balancingNotes say, for each fleet whose balancer or outlier detection
// (or its tiers') the faults of one replica cannot judge, why: an origin of
// one replica has nothing to pick or eject. (Through tiers each layer's
// caller picks among the next layer's replicas, and the faults hit one of
// the origin's.)
func balancingNotes(base *scenario.Scenario, in []CheckInput) []string {
	var out []string
	for _, f := range in {
		switch {
		case !balances(base, f):
		case base.Origin.Replicas < 2:
			out = append(out, fmt.Sprintf("fleet %q: its balancer and outlier detection are not judged: the base scenario's origin has one replica (give origin.replicas to add the faults of one bad replica)", f.Fleet.Name))
		}
	}
	return out
}

// balances reports whether f's fleet, or a tier it calls through (its
// stack's, or else the base's), picks replicas with a balancer or ejects
// them with outlier detection.
func balances(base *scenario.Scenario, f CheckInput) bool {
	picks := func(b scenario.Balancer, od scenario.OutlierDetection) bool { return b.Use != "" || od.Detects() }
	tiers := f.Tiers
	if tiers == nil {
		tiers = base.Tiers
	}
	return picks(f.Fleet.Balancer, f.Fleet.OutlierDetection) ||
		slices.ContainsFunc(tiers, func(t scenario.Tier) bool { return picks(t.Client.Balancer, t.Client.OutlierDetection) })
}

// envelope is the set of runs a policy is judged on: check's faults at
// its loads, with several seeds, at the number of client instances the
// verdict rests on (and, for check, the realistic cells again at a
// quarter and four times that count). Check and advise both build their
// runs with its cell method, so they agree on every cell by
// construction.
type envelope struct {
	base              *scenario.Scenario
	loads             []float64
	faults            []checkFault
	seeds             []uint64
	clients           []int // clients[0] is the verdict's count; the others run only the realistic cells
	at                time.Duration
	realLoad, realDip float64
}

// defaultSeeds is how many seeds check and advise run each cell with.
const defaultSeeds = 3

// newEnvelope builds the envelope around the realistic point (load and
// dip, zero for the base scenario's), with seeds seeds from the base's
// seed up and clients client instances (zero: the base scenario's).
// scaled adds the counts a quarter and four times as large.
func newEnvelope(base *scenario.Scenario, load, dip float64, seeds, clients int, scaled bool) (*envelope, error) {
	if base == nil {
		return nil, errors.New("a base scenario is required")
	}
	if base.Origin.Model == scenario.ModelConcurrency || base.Origin.Capacity <= 0 {
		return nil, errors.New("the base scenario's origin must have a capacity (the capacity or queue model)")
	}
	realLoad, realDip, err := realistic(base, load, dip)
	if err != nil {
		return nil, err
	}
	seeds = cmp.Or(seeds, defaultSeeds)
	if seeds < 1 || seeds > 100 {
		return nil, fmt.Errorf("%d seeds: want 1 to 100", seeds)
	}
	if clients == 0 {
		clients = max(base.Traffic.Clients, 1)
	}
	if clients < 1 || clients > maxClients {
		return nil, fmt.Errorf("%d clients: want 1 to %d", clients, maxClients)
	}
	e := &envelope{base: base, realLoad: realLoad, realDip: realDip, at: 30 * time.Second, clients: []int{clients}}
	e.loads, e.faults = checkEnvelope(realLoad, realDip)
	if len(base.Triggers) > 0 {
		e.at = base.Triggers[0].At
	}
	for s := range seeds {
		e.seeds = append(e.seeds, base.Seed+uint64(s))
	}
	if scaled {
		for _, n := range []int{max(1, (clients+2)/4), 4 * clients} {
			if !slices.Contains(e.clients, n) && n <= maxClients {
				e.clients = append(e.clients, n)
			}
		}
	}
	return e, nil
}

// maxClients bounds --clients (and four times it): each instance holds
// its own budget and breaker.
const maxClients = 100_000

// realisticCell reports whether (fault fi, load li) is in the region the
// user calls realistic: a capacity dip no larger than the realistic dip,
// with the base's queue or a bounded one, or a fault of one replica, at a
// load no higher than the realistic load.
func realisticCell(loads []float64, faults []checkFault, realLoad, realDip float64, fi, li int) bool {
	f := faults[fi]
	if f.Replica != nil {
		return loads[li] <= realLoad+1e-9
	}
	return loads[li] <= realLoad+1e-9 && f.Kind == scenario.TriggerCapacity && f.Dip <= realDip+1e-9 && f.For >= 10
}

// cell is the scenario that evaluates fleet f in one cell: client count
// ki, seed si, fault fi, load li. It is the one place a policy meets a
// cell, for check and advise alike.
func (e *envelope) cell(f scenario.Fleet, ki, si, fi, li int) (*scenario.Scenario, error) {
	return e.cellThrough(f, nil, ki, si, fi, li)
}

// cellThrough is cell with the fleet calling the origin through tiers (a
// stack's layers below the fleet); none is cell.
func (e *envelope) cellThrough(f scenario.Fleet, tiers []scenario.Tier, ki, si, fi, li int) (*scenario.Scenario, error) {
	sc := envelopeCell(e.base, e.loads[li], e.faults[fi], e.at)
	sc.Seed = e.seeds[si]
	sc.Traffic.Clients = e.clients[ki]
	if tiers != nil {
		sc.Tiers = perClient(tiers, e.clients[ki])
	}
	sc.Fleets = []scenario.Fleet{f}
	if err := sc.Validate(); err != nil {
		return nil, err
	}
	return sc, nil
}

// job is one run of an envelope: which fleet, at which client count, seed,
// fault and load.
type job struct{ fleet, clients, seed, fault, load int }

// jobs lists the runs of fleets fleets over the envelope, in an order
// that does not depend on the machine (shards own jobs by number): every
// cell at the first client count, then the realistic cells at the others.
func (e *envelope) jobs(fleets int) []job {
	var out []job
	for fl := range fleets {
		for ki := range e.clients {
			for si := range e.seeds {
				for fi := range e.faults {
					for li := range e.loads {
						if ki == 0 || realisticCell(e.loads, e.faults, e.realLoad, e.realDip, fi, li) {
							out = append(out, job{fl, ki, si, fi, li})
						}
					}
				}
			}
		}
	}
	return out
}

// run runs jobs of fleets on the envelope and hands each result to keep.
func (e *envelope) run(ctx context.Context, fleets []scenario.Fleet, name func(i int) string, sh grid.Shard, opts experiment.Options, keep func(j job, c CheckCell)) error {
	return e.runThrough(ctx, fleets, nil, name, sh, opts, keep)
}

// runThrough is run with fleet i calling the origin through tiers[i]
// (when tiers has it): a stack's chain, judged at the origin.
func (e *envelope) runThrough(ctx context.Context, fleets []scenario.Fleet, tiers [][]scenario.Tier, name func(i int) string, sh grid.Shard, opts experiment.Options, keep func(j job, c CheckCell)) error {
	return e.runJobs(ctx, e.jobs(len(fleets)), fleets, tiers, name, sh, opts, keep)
}

// runJobs is runThrough over the runs jobs lists, in its order.
func (e *envelope) runJobs(ctx context.Context, jobs []job, fleets []scenario.Fleet, tiers [][]scenario.Tier, name func(i int) string, sh grid.Shard, opts experiment.Options, keep func(j job, c CheckCell)) error {
	g := grid.Grid{
		Cells: len(jobs),
		Shard: sh,
		Cell: func(i int) (*scenario.Scenario, error) {
			j := jobs[i]
			var ts []scenario.Tier
			if j.fleet < len(tiers) {
				ts = tiers[j.fleet]
			}
			sc, err := e.cellThrough(fleets[j.fleet], ts, j.clients, j.seed, j.fault, j.load)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name(j.fleet), err)
			}
			return sc, nil
		},
	}
	if len(tiers) > 0 {
		g.Summary = atOrigin // a stack is judged where the load lands
	}
	return grid.Run(ctx, g, opts.GridOptions(), func(i int, s sim.Summary) { keep(jobs[i], cellOf(s)) })
}

// Check runs each fleet through the standard faults (capacity dips, with
// the base's queue and a bounded one, an error blip, a stall, outages
// that refuse and that never answer) at several base loads, on the base
// scenario's origin, with several seeds: a small vulnerability map per
// fleet, its verdict the worst seed's.
func Check(ctx context.Context, in []CheckInput, co CheckOptions, opts experiment.Options) (*CheckResult, error) {
	if len(in) == 0 {
		return nil, errors.New("check: no fleet to check")
	}
	e, err := newEnvelope(co.Base, co.Load, co.Dip, co.Seeds, co.Clients, true)
	if err != nil {
		return nil, fmt.Errorf("check: %w", err)
	}
	base := e.base
	if judgesReplicas(base, in) {
		e.faults = append(e.faults, replicaFaults()...)
	}
	notes := balancingNotes(base, in)
	r := &CheckResult{Scenario: base.Name, Seed: base.Seed, Rate: base.Traffic.Rate, Tick: base.Tick.Seconds(),
		Loads: e.loads, Faults: e.faults, RealLoad: e.realLoad, RealDip: e.realDip, Seeds: e.seeds, Clients: e.clients,
		ClientsFrom: "the scenario's", Shard: co.Shard.String(), Notes: notes}
	if co.Clients != 0 {
		r.ClientsFrom = "--clients"
	}
	// The floors per client the risks count are at the verdict's client
	// count (--clients), not the base scenario's.
	counted := base.Clone()
	counted.Traffic.Clients = e.clients[0]
	fleets := make([]scenario.Fleet, len(in))
	tiers, stack := make([][]scenario.Tier, len(in)), false
	for i, f := range in {
		fleets[i], tiers[i] = f.Fleet, f.Tiers
		stack = stack || f.Tiers != nil
		cf := CheckFleet{Name: f.Fleet.Name, Origin: f.Origin, FromBase: f.FromBase, Risks: risks(f.Fleet, counted, f.FromBase), Runs: r.newRuns()}
		r.Fleets = append(r.Fleets, cf)
	}
	if !stack {
		tiers = nil // the fleets run as check runs them, through the base's tiers if any
	}
	name := func(i int) string { return fmt.Sprintf("check: fleet %q", in[i].Fleet.Name) }
	jobs := e.jobs(len(fleets))
	if co.Model && co.Shard.Count <= 1 && tiers == nil {
		jobs = r.modelFar(e, fleets, jobs)
	}
	err = e.runJobs(ctx, jobs, fleets, tiers, name, co.Shard, opts, func(j job, c CheckCell) {
		r.Fleets[j.fleet].Runs[j.clients][j.seed][j.fault][j.load] = c
	})
	if err != nil {
		return nil, err
	}
	if co.Shard.Count > 1 {
		return r, nil // the maps and claims need every cell: Merge makes them
	}
	r.finish()
	return r, nil
}

// newRuns makes an empty set of runs: clients × seeds × faults × loads.
func (r *CheckResult) newRuns() [][][][]CheckCell {
	runs := make([][][][]CheckCell, len(r.Clients))
	for k := range runs {
		runs[k] = newSeedCells(len(r.Seeds), len(r.Faults), len(r.Loads))
	}
	return runs
}

// finish makes each fleet's map (the worst seed per cell) and the claims,
// once every run is in.
func (r *CheckResult) finish() {
	for i := range r.Fleets {
		f := &r.Fleets[i]
		f.Cells, f.Collapsing = worstOfSeeds(f.Runs[0])
	}
	r.Notes = append(r.Notes, r.neverHealthyNotes()...)
	r.Claims = r.claims()
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

// worstOfSeeds is a map of the worst seed per cell: never recovered if
// any seed never recovered, else the slowest recovery; and how many seeds
// never recovered. Check's maps and advise's evidence both use it.
func worstOfSeeds(seeds [][][]CheckCell) ([][]CheckCell, [][]int) {
	cells := make([][]CheckCell, len(seeds[0]))
	never := make([][]int, len(seeds[0]))
	for f := range cells {
		cells[f] = make([]CheckCell, len(seeds[0][f]))
		never[f] = make([]int, len(seeds[0][f]))
		for l := range cells[f] {
			w := seeds[0][f][l]
			for s, seed := range seeds {
				x := seed[f][l]
				if x.Ran && !x.Recovered {
					never[f][l]++
				}
				if s > 0 && (!x.Recovered && w.Recovered || x.Recovered == w.Recovered && x.RecoveryTicks > w.RecoveryTicks) {
					w = x
				}
			}
			cells[f][l] = w
		}
	}
	return cells, never
}

// The amplification a cell may show and still count as safe, documented
// in docs/check.md: the peak offered load in one tick against the
// origin's full capacity in a tick, and the attempts per intent over the
// whole run. A policy past either turns a dip into a flood whether or not
// the origin happens to recover from it.
const (
	maxPeakOverCapacity  = 2.0
	maxAttemptsPerIntent = 1.5
)

// amplification returns a run's peak offered load against the origin's
// full capacity at load li, and its attempts per intent.
func (r *CheckResult) amplification(c CheckCell, li int) (peak, perIntent float64) {
	return cellAmplification(c, r.Rate, r.Tick, r.Loads[li])
}

func cellAmplification(c CheckCell, rate, tick, load float64) (peak, perIntent float64) {
	if capTick := rate / load * tick; capTick > 0 {
		peak = float64(c.PeakOffered) / capTick
	}
	if c.Intents > 0 {
		perIntent = float64(c.Attempts) / float64(c.Intents)
	}
	return peak, perIntent
}

// amplifies reports whether a run passes either amplification threshold.
func amplifies(c CheckCell, rate, tick, load float64) bool {
	p, a := cellAmplification(c, rate, tick, load)
	return c.Ran && (p > maxPeakOverCapacity || a > maxAttemptsPerIntent)
}

// judgement is a fleet's verdict at one client count: the realistic
// cells where some seed never recovers, and those where some seed
// amplifies past the thresholds.
type judgement struct{ Collapsed, Amplified int }

func (j judgement) unsafe() bool { return j.Collapsed > 0 || j.Amplified > 0 }

func (j judgement) String() string {
	if !j.unsafe() {
		return "safe"
	}
	var why []string
	if j.Collapsed > 0 {
		why = append(why, fmt.Sprintf("%d realistic cell%s", j.Collapsed, map[bool]string{true: " collapses", false: "s collapse"}[j.Collapsed == 1]))
	}
	if j.Amplified > 0 {
		why = append(why, fmt.Sprintf("%d amplif%s past the thresholds", j.Amplified, map[bool]string{true: "y", false: "ies"}[j.Amplified != 1]))
	}
	return "UNSAFE (" + strings.Join(why, ", ") + ")"
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// judge is fleet i's verdict at client count ki, over every seed of the
// realistic cells.
func (r *CheckResult) judge(i, ki int) judgement {
	var j judgement
	for fi := range r.Faults {
		for li := range r.Loads {
			if !r.realistic(fi, li) {
				continue
			}
			never, amp := false, false
			for _, seed := range r.Fleets[i].Runs[ki] {
				c := seed[fi][li]
				never = never || (c.Ran && !c.Recovered)
				amp = amp || amplifies(c, r.Rate, r.Tick, r.Loads[li])
			}
			if never {
				j.Collapsed++
			}
			if amp {
				j.Amplified++
			}
		}
	}
	return j
}

// risks lists the fleet's settings that can keep a storm going, in plain
// words, for the report to blame when the fleet stays collapsed. A
// setting listed in fromBase came from the base scenario or a product's
// default, not from the user's file: it is not blamed (the verdict says
// where it came from instead).
func risks(f scenario.Fleet, base *scenario.Scenario, fromBase []string) []string {
	var out []string
	mine := func(setting string) bool {
		for _, b := range fromBase {
			// A backoff whose base is a default is not the file's.
			if b == setting || strings.HasPrefix(setting, b+".") || b == setting+".base" {
				return false
			}
		}
		return true
	}
	clients := max(base.Traffic.Clients, 1)
	n := f.Retry.MaxRetries
	retriesMine := mine("retry.max_retries") || mine("budget")
	switch {
	case n == 0 || !retriesMine:
	case f.Budget.Use == scenario.BudgetNone && n < 0:
		out = append(out, "unlimited retries with no budget: nothing bounds the retries but the deadline")
	case f.Budget.Use == scenario.BudgetNone:
		out = append(out, fmt.Sprintf("max_retries %d with no budget: when everything fails, each intent sends up to %d attempts, %d× the load", n, n+1, n+1))
	case f.Budget.Use == scenario.BudgetConcurrency && f.Budget.Concurrency.Percent == 0:
		c := f.Budget.Concurrency
		out = append(out, fmt.Sprintf("at most %d retries active at once per client (%d over the fleet's %d clients), whatever the traffic: a cap on concurrency, not a share of requests", c.MinConcurrency, c.MinConcurrency*clients, clients))
	case f.Budget.Use == scenario.BudgetConcurrency:
		c := f.Budget.Concurrency
		out = append(out, fmt.Sprintf("a concurrency budget of %g%% with min_retry_concurrency %d per client (%d over %d clients): a slow dependency holds more requests in flight, which raises the allowance when it should fall", c.Percent, c.MinConcurrency, c.MinConcurrency*clients, clients))
	case f.Budget.Use == scenario.BudgetWindow && f.Budget.Window.MinRetriesPerSecond > 0:
		// The floor is per client: many small clients get past it
		// together, and in an outage it is what gets through.
		w := f.Budget.Window
		floor := w.MinRetriesPerSecond * float64(clients)
		how := "or the floor, whichever is larger"
		if w.Tower {
			how = "plus the floor (tower's rule)"
		}
		out = append(out, fmt.Sprintf("a budget of ratio %g %s, the floor %g retries a second per client (%g over the fleet's %d clients): retries may add %s to the load, and in a total outage the floor still gets through",
			w.Ratio, how, w.MinRetriesPerSecond, floor, clients, report.Percent(w.Ratio, 0)))
	case f.Budget.Use == scenario.BudgetTokenBucket || f.Budget.Use == scenario.BudgetWindow:
		out = append(out, fmt.Sprintf("a budget of ratio %g: retries may add up to %s to the load", f.Budget.Ratio(), report.Percent(f.Budget.Ratio(), 0)))
	case f.Budget.Use == scenario.BudgetAWS || f.Budget.Use == scenario.BudgetAWSAdaptive:
		out = append(out, fmt.Sprintf("the AWS retry quota: %d tokens per client that refill only on success, spent %d per retry", f.Budget.AWS.Capacity, f.Budget.AWS.RetryCost))
	}
	if n != 0 && f.Retry.Backoff.Jitter == "none" && f.Retry.Backoff.Use != "none" && mine("retry.backoff") {
		out = append(out, "backoff without jitter: clients that failed together retry together")
	}
	if n != 0 && (f.Retry.Backoff.Use == "none" || f.Retry.Backoff.Base == 0) && f.Retry.Backoff.Jitter != "decorrelated" && mine("retry.backoff") {
		out = append(out, "no backoff: a failed attempt is retried at once")
	}
	if base.Origin.Model == scenario.ModelQueue && f.Retry.Retries(scenario.RetryOnTimeout) && n != 0 && mine("timeout") {
		out = append(out, fmt.Sprintf("timeout %v against a queue: once the backlog is longer than the origin serves in %v, every answer is late, and each retry of a timeout adds to the backlog", f.Timeout, f.Timeout))
	}
	if f.Breaker.Use == scenario.BreakerNone || f.Breaker.Use == "" {
		out = append(out, "no circuit breaker")
	}
	return out
}

// realistic reports whether cell (fault fi, load li) is in the region the
// user calls realistic (see realisticCell).
func (r *CheckResult) realistic(fi, li int) bool {
	return realisticCell(r.Loads, r.Faults, r.RealLoad, r.RealDip, fi, li)
}

// Collapsed reports whether fleet i stays collapsed, in some seed, in a
// realistic cell at the verdict's client count.
func (r *CheckResult) Collapsed(i int) bool { return r.judge(i, 0).Collapsed > 0 }

// Unsafe reports whether fleet i fails the check: it stays collapsed, or
// amplifies the load past the thresholds, in some seed of a realistic
// cell at the verdict's client count.
func (r *CheckResult) Unsafe(i int) bool { return r.judge(i, 0).unsafe() }

func (r *CheckResult) claims() []report.Claim {
	var cs []report.Claim
	for i, f := range r.Fleets {
		j := r.judge(i, 0)
		cs = append(cs, report.Check(fmt.Sprintf("%s recovers without amplifying the load past the thresholds in every realistic cell (load up to %s, capacity dips up to %s), in each of %d seeds, at %d clients",
			f.Name, report.Percent(r.RealLoad, 0), report.Percent(r.RealDip, 0), len(r.Seeds), r.Clients[0]),
			!j.unsafe(), map[string]any{"collapsed_realistic_cells": j.Collapsed, "amplifying_realistic_cells": j.Amplified},
			"%d realistic cells stay collapsed, %d amplify past the thresholds", j.Collapsed, j.Amplified))
	}
	return cs
}

// newCells makes an empty map of faults × loads.
func newCells(faults, loads int) [][]CheckCell {
	c := make([][]CheckCell, faults)
	for i := range c {
		c[i] = make([]CheckCell, loads)
	}
	return c
}

var errTwice = errors.New("was run by two shards")

// mergeCells copies the cells src ran into dst.
func mergeCells(dst, src [][]CheckCell) error {
	if len(src) != len(dst) {
		return errors.New("has another envelope")
	}
	for f, row := range src {
		if len(row) != len(dst[f]) {
			return errors.New("has another envelope")
		}
		for l, c := range row {
			if !c.Ran {
				continue
			}
			if dst[f][l].Ran {
				return errTwice
			}
			dst[f][l] = c
		}
	}
	return nil
}

// complete reports whether every cell ran.
func complete(cells [][]CheckCell) bool {
	for _, row := range cells {
		for _, c := range row {
			if !c.Ran {
				return false
			}
		}
	}
	return true
}

// MergeCheck puts the results of the shards of one check together. Every
// shard must have checked the same fleets on the same envelope, and every
// cell must have been run by exactly one of them.
func MergeCheck(parts []*CheckResult) (*CheckResult, error) {
	if len(parts) == 0 {
		return nil, errors.New("merge: no results")
	}
	m := *parts[0]
	m.Shard = grid.Shard{}.String()
	m.Fleets = slices.Clone(parts[0].Fleets)
	for i := range m.Fleets {
		m.Fleets[i].Runs = m.newRuns()
	}
	for _, p := range parts {
		if p.Scenario != m.Scenario || p.Seed != m.Seed || !slices.Equal(p.Loads, m.Loads) || !slices.EqualFunc(p.Faults, m.Faults, checkFault.same) ||
			!slices.Equal(p.Seeds, m.Seeds) || !slices.Equal(p.Clients, m.Clients) ||
			p.RealLoad != m.RealLoad || p.RealDip != m.RealDip || len(p.Fleets) != len(m.Fleets) {
			return nil, fmt.Errorf("merge: shard %s checked another scenario, envelope or set of fleets", p.Shard)
		}
		for i, f := range p.Fleets {
			if f.Name != m.Fleets[i].Name || !slices.Equal(f.Risks, m.Fleets[i].Risks) {
				return nil, fmt.Errorf("merge: shard %s's fleet %d is %q, not %q", p.Shard, i, f.Name, m.Fleets[i].Name)
			}
			if len(f.Runs) != len(m.Clients) {
				return nil, fmt.Errorf("merge: shard %s's fleet %q has another set of runs", p.Shard, f.Name)
			}
			for k := range f.Runs {
				if len(f.Runs[k]) != len(m.Seeds) {
					return nil, fmt.Errorf("merge: shard %s's fleet %q has another set of runs", p.Shard, f.Name)
				}
				for s := range f.Runs[k] {
					if err := mergeCells(m.Fleets[i].Runs[k][s], f.Runs[k][s]); err != nil {
						return nil, fmt.Errorf("merge: a cell of fleet %q %v", f.Name, err)
					}
				}
			}
		}
	}
	for _, f := range m.Fleets {
		for _, seed := range f.Runs[0] {
			if !complete(seed) {
				return nil, fmt.Errorf("merge: fleet %q has cells no shard ran: give every shard's result", f.Name)
			}
		}
	}
	m.finish()
	return &m, nil
}

// modelCells counts f's cells the model answered (check --model).
func (f CheckFleet) modelCells() int {
	n := 0
	for _, row := range f.Cells {
		for _, c := range row {
			if c.Ran && c.Source == sourceModel {
				n++
			}
		}
	}
	return n
}

// cellText is a cell as the map shows it: the worst seed's recovery, how
// many of the seeds never recovered, and the peak offered load against
// capacity when some seed passed the amplification thresholds.
func (r *CheckResult) cellText(f CheckFleet, fi, li int) string {
	c := f.Cells[fi][li]
	var s string
	switch {
	case !c.Ran:
		return "-"
	case c.Recovered:
		s = fmt.Sprintf("ok +%d", c.RecoveryTicks)
	case f.Collapsing != nil && c.Source != sourceModel: // a model cell is one run, not one a seed
		s = fmt.Sprintf("NEVER %d/%d", f.Collapsing[fi][li], len(f.Runs[0]))
	default:
		s = "NEVER"
	}
	if peak, amp := r.peak(f, fi, li); amp {
		s += fmt.Sprintf(" %.1f×!", peak)
	}
	if c.Source == sourceModel {
		s += " (m)"
	}
	return s
}

// peak is the highest peak offered load against capacity over the seeds
// of a cell, and whether some seed passed the amplification thresholds.
func (r *CheckResult) peak(f CheckFleet, fi, li int) (float64, bool) {
	top, amp := 0.0, false
	if len(f.Runs) == 0 {
		return 0, false
	}
	for _, seed := range f.Runs[0] {
		c := seed[fi][li]
		p, _ := r.amplification(c, li)
		top = math.Max(top, p)
		amp = amp || amplifies(c, r.Rate, r.Tick, r.Loads[li])
	}
	return top, amp
}

// Tables returns one map per fleet: faults down, loads across.
func (r *CheckResult) Tables() []report.Table {
	var out []report.Table
	for _, f := range r.Fleets {
		t := report.Table{Title: fmt.Sprintf("%s: recovery after each fault (ticks, the worst of %d seeds), by base load", f.Name, len(r.Seeds)), Columns: []report.Column{{Name: "fault"}}, Emphasis: map[[2]int]bool{}}
		for _, l := range r.Loads {
			name := "load " + report.Percent(l, 0)
			if math.Abs(l-r.RealLoad) < 1e-9 {
				name += "*"
			}
			t.Columns = append(t.Columns, report.Column{Name: name, Align: report.Right})
		}
		for fi, row := range f.Cells {
			cells := []string{r.Faults[fi].Name}
			for li, c := range row {
				cells = append(cells, r.cellText(f, fi, li))
				if _, amp := r.peak(f, fi, li); c.Ran && (!c.Recovered || amp) {
					t.Emphasis[[2]int{fi, li + 1}] = true
				}
			}
			t.Rows = append(t.Rows, cells)
		}
		out = append(out, t)
	}
	return out
}

// Verdicts says, per fleet, in plain words: the worst amplification,
// where it stays collapsed, the intents lost, the verdict at each client
// count, and what to blame.
func (r *CheckResult) Verdicts() [][]string {
	var out [][]string
	region := "load up to " + report.Percent(r.RealLoad, 0) + ", capacity dips up to " + report.Percent(r.RealDip, 0) + ", with the base's queue or a bounded one"
	if slices.ContainsFunc(r.Faults, func(f checkFault) bool { return f.Replica != nil }) {
		region += ", and one bad replica"
	}
	for i, f := range r.Fleets {
		var lines []string
		head := f.Name
		if f.Origin != "" {
			head += " (" + f.Origin + ")"
		}
		lines = append(lines, head)
		worst, wf, wl := 0.0, 0, 0
		peak, pf, pl := 0.0, 0, 0
		lost, lf, ll := int64(-1), 0, 0
		var lostIntents int64
		for _, seed := range f.Runs[0] {
			for fi, row := range seed {
				for li, c := range row {
					if !c.Ran {
						continue
					}
					p, a := r.amplification(c, li)
					if a > worst {
						worst, wf, wl = a, fi, li
					}
					if p > peak {
						peak, pf, pl = p, fi, li
					}
					if c.Intents > 0 && c.IntentsLost > lost {
						lost, lf, ll, lostIntents = c.IntentsLost, fi, li, c.Intents
					}
				}
			}
		}
		var never []string
		nNever := 0
		for fi, row := range f.Cells {
			var at []string
			real := false
			for li, c := range row {
				if c.Ran && !c.Recovered {
					nNever++
					if c.Source == sourceModel {
						// One model run, not one per seed.
						at = append(at, fmt.Sprintf("%s (the model)", report.Percent(r.Loads[li], 0)))
					} else {
						at = append(at, fmt.Sprintf("%s (%d of %d seeds)", report.Percent(r.Loads[li], 0), f.Collapsing[fi][li], len(r.Seeds)))
					}
					real = real || r.realistic(fi, li)
				}
			}
			if len(at) > 0 {
				w := fmt.Sprintf("%s at %s load", r.Faults[fi].Name, strings.Join(at, ", "))
				if real {
					w += " (realistic)"
				}
				never = append(never, w)
			}
		}
		lines = append(lines, fmt.Sprintf("worst amplification: %.2f attempts per intent over the run (%s at %s load); peak offered load %.1f× the origin's capacity (%s at %s load); the thresholds: %g attempts per intent, %g× capacity",
			worst, r.Faults[wf].Name, report.Percent(r.Loads[wl], 0), peak, r.Faults[pf].Name, report.Percent(r.Loads[pl], 0), maxAttemptsPerIntent, maxPeakOverCapacity))
		cells := len(r.Faults) * len(r.Loads)
		seeds := fmt.Sprintf("in each of %d seeds", len(r.Seeds))
		if n := f.modelCells(); n > 0 {
			seeds = fmt.Sprintf("%d in each of %d seeds, %d answered once by the model", cells-n, len(r.Seeds), n)
		}
		if len(never) == 0 {
			lines = append(lines, fmt.Sprintf("recovers in all %d cells (%s)", cells, seeds))
		} else {
			lines = append(lines, fmt.Sprintf("stays collapsed in %d of %d cells (%s): %s", nNever, cells, seeds, strings.Join(never, "; ")))
		}
		if lost >= 0 {
			lines = append(lines, fmt.Sprintf("intents lost: at most %s of %s (%s), %s at %s load",
				report.Int(lost), report.Int(lostIntents), report.Percent(float64(lost)/float64(max(lostIntents, 1)), 1), r.Faults[lf].Name, report.Percent(r.Loads[ll], 0)))
		}
		j := r.judge(i, 0)
		if j.unsafe() {
			lines = append(lines, fmt.Sprintf("verdict: %s in the region you call realistic (%s), the worst of %d seeds, at %d clients (%s)", j, region, len(r.Seeds), r.Clients[0], r.ClientsFrom))
		} else {
			lines = append(lines, fmt.Sprintf("verdict: safe in the region you call realistic (%s), in each of %d seeds, at %d clients (%s)", region, len(r.Seeds), r.Clients[0], r.ClientsFrom))
		}
		if f.ModelRuns > 0 {
			lines = append(lines, fmt.Sprintf("answered by the analytic model (check --model): %d of the %d runs at %d clients, in cells outside the realistic region that it places far from the boundary, marked (m) on the map; every realistic cell, and so the verdict, rests on the simulator",
				f.ModelRuns, len(r.Seeds)*len(r.Faults)*len(r.Loads), r.Clients[0]))
		}
		if len(r.Clients) > 1 {
			var at []string
			for k, n := range r.Clients {
				at = append(at, fmt.Sprintf("%d: %s", n, r.judge(i, k)))
			}
			lines = append(lines, "by client instances (each with its own budget and breaker): "+strings.Join(at, "; "))
		}
		blame := "to blame: "
		if !j.unsafe() {
			blame = "beyond it, to blame: "
		}
		if j.unsafe() || len(never) > 0 {
			for _, k := range f.Risks {
				lines = append(lines, blame+k)
			}
		}
		if len(f.FromBase) > 0 {
			lines = append(lines, "not from your file (the base scenario's or the product's default, not blamed): "+strings.Join(f.FromBase, ", "))
		}
		out = append(out, lines)
	}
	return out
}

// Render writes the check as text: each fleet's verdict, then its map.
func (r *CheckResult) Render(w io.Writer, st report.Style) error {
	fmt.Fprintf(w, "Checked on %q: %g intents/s, at base loads %s of capacity; * marks the realistic load.\n\n", r.Scenario, r.Rate, loadList(r.Loads))
	for _, n := range r.Notes {
		fmt.Fprintf(w, "Note: %s.\n\n", n)
	}
	tables := r.Tables()
	for i, v := range r.Verdicts() {
		for j, l := range v {
			if j == 0 {
				fmt.Fprintln(w, l)
				continue
			}
			fmt.Fprintln(w, "  "+l)
		}
		fmt.Fprintln(w)
		if err := tables[i].Render(w, st); err != nil {
			return err
		}
		fmt.Fprintln(w)
	}
	return nil
}

func loadList(ls []float64) string {
	var s []string
	for _, l := range ls {
		s = append(s, report.Percent(l, 0))
	}
	return strings.Join(s, ", ")
}

// Section is the check as a report section, with a heatmap per fleet.
func (r *CheckResult) Section() report.Section {
	sec := report.Section{ID: "check", Title: "Check: is this config safe?", Tables: r.Tables(), Claims: r.Claims, Notes: r.Notes}
	for _, v := range r.Verdicts() {
		sec.Intro = append(sec.Intro, strings.Join(v, ". ")+".")
	}
	for _, f := range r.Fleets {
		sec.Figures = append(sec.Figures, checkHeatmap(r, f))
	}
	return sec
}

func checkHeatmap(r *CheckResult, f CheckFleet) template.HTML {
	cells := make([][]float64, len(f.Cells))
	ys := make([]float64, len(f.Cells))
	top := 0.0
	for fi, row := range f.Cells {
		ys[fi] = float64(fi)
		cells[fi] = make([]float64, len(row))
		for li, c := range row {
			cells[fi][li] = float64(c.RecoveryTicks)
			if !c.Recovered {
				cells[fi][li] = math.NaN()
			}
			top = math.Max(top, float64(c.RecoveryTicks))
		}
	}
	h := report.Heatmap{Title: f.Name, XLabel: "base load", YLabel: "fault", X: r.Loads, Y: ys, Cells: cells,
		Unit: "ticks", Max: math.Max(top, 1), Never: "never recovered",
		XFmt: func(v float64) string { return report.Percent(v, 0) },
		YFmt: func(v float64) string {
			if i := int(v); i >= 0 && i < len(r.Faults) {
				return r.Faults[i].Name
			}
			return ""
		}}
	return template.HTML(h.SVG())
}
