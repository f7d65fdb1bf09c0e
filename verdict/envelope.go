package verdict

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"time"

	"github.com/retrystorm/retrystorm/experiment"
	"github.com/retrystorm/retrystorm/grid"
	"github.com/retrystorm/retrystorm/report"
	"github.com/retrystorm/retrystorm/scenario"
	"github.com/retrystorm/retrystorm/sim"
)

// A fault of the envelope.
type checkFault struct {
	Name string  `json:"name"`
	Kind string  `json:"kind"`           // a trigger kind
	Dip  float64 `json:"dip,omitempty"`  // capacity dips: the share removed
	For  float64 `json:"for_seconds"`    // how long, seconds
	Rate float64 `json:"rate,omitempty"` // error bursts: the error rate
	// Answer, for an error burst, is what its answers are:
	// scenario.AnswerError (500) or AnswerRejection (503, UNAVAILABLE).
	Answer string `json:"answer,omitempty"`
	Mode   string `json:"mode,omitempty"` // outages: scenario.OutageRefuse or blackhole
	// Replica, when set, is the one replica the fault hits (errors,
	// outages, latency); nil: the whole origin.
	Replica *int    `json:"replica,omitempty"`
	Factor  float64 `json:"factor,omitempty"` // latency: the replica's latency multiplier
	// Bounded, for a capacity dip, bounds the origin's queue (half a
	// second of work) so that the overload is rejected at once: what a
	// config that retries only rejections (503, 429, UNAVAILABLE)
	// answers to.
	Bounded bool `json:"bounded_queue,omitempty"`
	// Exercises names the failures the fault makes, in words.
	Exercises string `json:"exercises"`
	// Retried are the failures it makes as retry conditions
	// (scenario.RetryOn*): a fleet that retries none of them is not
	// judged on it. Every fleet is judged on a dip with the base's queue.
	Retried []string `json:"retried"`
	// Instant: its failures cost the origin little (refused connections,
	// a black-holed origin doing no work, rejections answered at once),
	// so its amplification is judged against maxInstantAmplification;
	// otherwise the attempts take the origin's work or queue, judged
	// against maxWorkAmplification and maxWorkLoad.
	Instant bool `json:"instant,omitempty"`
	// Outside marks a fault past the realistic region (a deeper dip):
	// a collapse there makes a fleet AT RISK, not UNSAFE.
	Outside bool `json:"outside,omitempty"`
}

// same reports whether two faults are the same fault: their replicas by
// number, not by address.
func (f checkFault) same(g checkFault) bool {
	if (f.Replica == nil) != (g.Replica == nil) || f.Replica != nil && *f.Replica != *g.Replica {
		return false
	}
	f.Replica, g.Replica = nil, nil
	return reflect.DeepEqual(f, g)
}

// alwaysJudged reports whether every fleet is judged on the fault: a
// capacity dip with the base's queue, which every service meets.
func (f checkFault) alwaysJudged() bool {
	return f.Kind == scenario.TriggerCapacity && !f.Bounded && f.Dip < 1
}

// judges reports whether fleet fl is judged on fault f: it retries (or
// hedges on) some failure the fault makes, or the fault is one every
// fleet meets.
func judges(fl scenario.Fleet, f checkFault) bool {
	if f.alwaysJudged() || f.Replica != nil {
		return true
	}
	if fl.Retry.MaxRetries == 0 && fl.Hedge.Delay == 0 {
		return false
	}
	return slices.ContainsFunc(f.Retried, func(k string) bool {
		return fl.Retry.MaxRetries != 0 && fl.Retry.Retries(k) || k == scenario.RetryOnTimeout && fl.Hedge.Delay > 0
	})
}

// The realistic sizes of the faults of section 2 of issue 34
// (docs/check.md): an outage as long as a restart of a process behind a
// load balancer (the time for it to start and pass its readiness check),
// and a burst of the retried errors about as long (a bad instance, a
// dependency's blip).
const (
	faultSeconds = 10
	stallSeconds = 5
)

// checkEnvelope is the set of faults and loads around the realistic
// point. The faults make every failure a config may retry on: timeouts
// (an unbounded queue's late answers, a stall, a black-holed outage),
// overload rejections (a bounded queue, a burst of 503s or UNAVAILABLE),
// error answers (500, INTERNAL) and refused connections. Every fault is
// at its realistic size except the deeper dips, which are Outside.
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
		fs = append(fs, checkFault{Name: fmt.Sprintf("capacity dip of %s", report.Percent(d, 0)), Kind: scenario.TriggerCapacity, Dip: d, For: faultSeconds,
			Exercises: "late answers (timeouts) from the base's queue, rejections from a capacity origin",
			Retried:   []string{scenario.RetryOnTimeout, scenario.RetryOnRejection}, Outside: d > realDip+1e-9})
	}
	const (
		errs, rejs, tos, refs = scenario.RetryOnError, scenario.RetryOnRejection, scenario.RetryOnTimeout, scenario.RetryOnRefused
	)
	return loads, append(fs,
		checkFault{Name: fmt.Sprintf("dip of %s, bounded queue", report.Percent(realDip, 0)), Kind: scenario.TriggerCapacity, Dip: realDip, For: faultSeconds, Bounded: true,
			Exercises: "overload rejections (503, 429, gRPC UNAVAILABLE)", Retried: []string{rejs}, Instant: true},
		checkFault{Name: "burst of errors (500)", Kind: scenario.TriggerErrors, Rate: 1, Answer: scenario.AnswerError, For: faultSeconds,
			Exercises: "error answers (500, gRPC INTERNAL) after the work is done", Retried: []string{errs}},
		checkFault{Name: "burst of rejections (503)", Kind: scenario.TriggerErrors, Rate: 1, Answer: scenario.AnswerRejection, For: faultSeconds,
			Exercises: "rejections (503, 429, gRPC UNAVAILABLE) of every request", Retried: []string{rejs}, Instant: true},
		checkFault{Name: "stall (nothing served)", Kind: scenario.TriggerCapacity, Dip: 1, For: stallSeconds,
			Exercises: "timeouts as the queue fills", Retried: []string{tos}},
		checkFault{Name: "restart, connections refused", Kind: scenario.TriggerOutage, Mode: scenario.OutageRefuse, For: faultSeconds,
			Exercises: "refused connections and resets, failed at once", Retried: []string{refs}, Instant: true},
		checkFault{Name: "total outage (no answer)", Kind: scenario.TriggerOutage, Mode: scenario.OutageBlackhole, For: faultSeconds,
			Exercises: "timeouts: nothing answers, and the origin does no work", Retried: []string{tos}, Instant: true},
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
		{Name: "one replica returns errors", Kind: scenario.TriggerErrors, Rate: 1, For: faultSeconds, Replica: &bad,
			Exercises: "error answers from one replica of several: what outlier detection ejects on consecutive 5xx or success rate",
			Retried:   []string{scenario.RetryOnError}},
		{Name: "one replica black-holed", Kind: scenario.TriggerOutage, Mode: scenario.OutageBlackhole, For: faultSeconds, Replica: &bad,
			Exercises: "timeouts from one replica of several (local-origin failures to Envoy)", Retried: []string{scenario.RetryOnTimeout}, Instant: true},
		{Name: "one replica 10× slower", Kind: scenario.TriggerLatency, Factor: 10, For: faultSeconds, Replica: &bad,
			Exercises: "a slow replica: late answers a least-request or EWMA picker avoids and a random one does not",
			Retried:   []string{scenario.RetryOnTimeout}},
	}
}

// podFault is a replica's whole pod refusing connections, its sidecar
// down with it (a pod being replaced, before the proxies hear that its
// endpoint is gone), which check adds when a fleet calls replicas with a
// proxy beside each (an Istio server sidecar): the restart fault then
// reaches the caller as the sidecar's 503, and this one as the refused
// connection its own proxy retries.
func podFault() checkFault {
	return checkFault{Name: "pod replaced, connections refused", Kind: scenario.TriggerOutage, Mode: scenario.OutageRefusePod, For: faultSeconds,
		Exercises: "refused connections at the pod, its sidecar down too", Retried: []string{scenario.RetryOnRefused}, Instant: true}
}

// faultsFor are the faults check adds to its envelope for the fleets in
// and base's origin: those of one replica (judgesReplicas), and a pod
// replaced when a fleet or a tier calls replicas through a sidecar.
func faultsFor(base *scenario.Scenario, in []CheckInput) []checkFault {
	var fs []checkFault
	if judgesReplicas(base, in) {
		fs = append(fs, replicaFaults()...)
	}
	if slices.ContainsFunc(in, callsThroughSidecars) {
		fs = append(fs, podFault())
	}
	return fs
}

// callsThroughSidecars reports whether the origin's replicas have a proxy
// beside each, as f or its last tier calls them.
func callsThroughSidecars(f CheckInput) bool {
	calls := f.Fleet.Calls
	if n := len(f.Tiers); n > 0 {
		calls = f.Tiers[n-1].Client.Calls
	}
	return calls.Inbound.Product != ""
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
	notes             []string // what the envelope changed of the base, in words
	// cache, when set, makes each distinct run once (RunCache).
	cache *RunCache
	// judgeOn names faults every fleet is judged on (CheckOptions.JudgeOn).
	judgeOn []string
}

// Where the faults go in a run: from faultAt (or the base scenario's
// first trigger), with runAfterFault of run after it for the longest
// fault and its recovery.
const (
	faultAt       = 30 * time.Second
	runAfterFault = 90 * time.Second
)

// steadyBase is base as check's envelope runs it: a traffic series
// (calibrate writes one when the rate varied over its window) becomes a
// steady rate at the series' median, the arrivals as written, since a
// window's peaks are an incident, not the base load the faults are put
// on; notes say so. A base without a series is returned as it is.
func steadyBase(base *scenario.Scenario) (*scenario.Scenario, []string) {
	s := base.Traffic.Series
	if s == nil || len(s.Points) == 0 {
		return base, nil
	}
	rates := make([]float64, len(s.Points))
	lo, hi := math.Inf(1), 0.0
	for i, p := range s.Points {
		rates[i] = p.Rate * s.Scale
		lo, hi = min(lo, rates[i]), max(hi, rates[i])
	}
	slices.Sort(rates)
	median := rates[len(rates)/2]
	if len(rates)%2 == 0 {
		median = (rates[len(rates)/2-1] + rates[len(rates)/2]) / 2
	}
	b := base.Clone()
	b.Traffic.Series = nil
	b.Traffic.Rate = median
	return b, []string{fmt.Sprintf("the base's traffic is a series from %.4g to %.4g intents/s: the faults are put on a steady rate at its median, %.4g intents/s (its peaks are an incident of the window, not the base load)", lo, hi, median)}
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
	base, notes := steadyBase(base)
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
	e := &envelope{base: base, realLoad: realLoad, realDip: realDip, at: faultAt, clients: []int{clients}, notes: notes}
	e.loads, e.faults = checkEnvelope(realLoad, realDip)
	if len(base.Triggers) > 0 && base.Triggers[0].At >= 10*base.Tick {
		e.at = base.Triggers[0].At
	}
	if long := e.at + runAfterFault; base.Duration < long {
		// A window shorter than the faults (calibrate's of a few
		// seconds): the run is extended, the traffic as it was.
		b := base.Clone()
		b.Duration = long.Truncate(b.Tick)
		e.base = b
		e.notes = append(e.notes, fmt.Sprintf("the base's run (%v) is extended to %v: each fault starts at %v and the run goes on %v after it, for the recovery", base.Duration, b.Duration, e.at, runAfterFault))
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
// user calls realistic: a fault at its realistic size (not a deeper dip
// than the realistic one) at a load no higher than the realistic load.
func realisticCell(loads []float64, faults []checkFault, realLoad float64, fi, li int) bool {
	return loads[li] <= realLoad+1e-9 && !faults[fi].Outside
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
	return e.scenarioAt(f, tiers, e.clients[ki], si, e.loads[li], e.faults[fi])
}

// scenarioAt is cellThrough at any load and fault, in or out of the
// envelope (the margin's search).
func (e *envelope) scenarioAt(f scenario.Fleet, tiers []scenario.Tier, clients, si int, load float64, ft checkFault) (*scenario.Scenario, error) {
	sc := envelopeCell(e.base, load, ft, e.at)
	sc.Seed = e.seeds[si]
	sc.Traffic.Clients = clients
	if tiers != nil {
		sc.Tiers = perClient(tiers, clients)
	}
	sc.Fleets = []scenario.Fleet{f}
	if err := sc.Validate(); err != nil {
		return nil, err
	}
	return sc, nil
}

// Variants of a fleet that a check runs beside it: the fleet as the user
// configured it, the same with retries off (what the verdict compares a
// collapse and the margin with), and the fleet with an assumption
// changed (Assumption).
const (
	asConfigured = iota
	retriesOff
	assumed
)

// job is one run of an envelope: which fleet, in which variant, at which
// client count, seed, fault and load, and how far it may end early (the
// zero value: to its end).
type job struct {
	fleet, variant, clients, seed, fault, load int
	early                                      sim.EarlyExit
}

// jobs lists the runs of the fleets over the envelope, in an order that
// does not depend on the machine (shards own jobs by number): for each
// fleet, every cell it is judged on at the first client count, then the
// realistic ones at the others; then the same cells with retries off at
// the first count (for a fleet that retries at all), then its assumed
// variant's realistic cells (for a fleet that has one).
func (e *envelope) jobs(fleets []CheckInput, variants []bool) []job {
	var out []job
	add := func(fl, v, ki int, realOnly bool) {
		for si := range e.seeds {
			for fi, ft := range e.faults {
				if !e.judges(fleets[fl], ft) {
					continue
				}
				for li := range e.loads {
					if !realOnly || realisticCell(e.loads, e.faults, e.realLoad, fi, li) {
						out = append(out, job{fl, v, ki, si, fi, li, sim.NoEarlyExit})
					}
				}
			}
		}
	}
	for fl := range fleets {
		for ki := range e.clients {
			add(fl, asConfigured, ki, ki > 0)
		}
		if chainRetries(fleets[fl]) {
			add(fl, retriesOff, 0, false)
		}
		if fl < len(variants) && variants[fl] {
			add(fl, assumed, 0, true)
		}
	}
	return out
}

// retries reports whether f sends any attempt past the first: retries
// or hedges.
func retries(f scenario.Fleet) bool { return f.Retry.MaxRetries != 0 || f.Hedge.Delay > 0 }

// chainRetries reports whether in sends any attempt past the first at
// some layer: its fleet, or a tier it calls through (a stack's inner
// layers, which may retry where the first does not: an app that does not
// retry behind a sidecar that does).
func chainRetries(in CheckInput) bool {
	return retries(in.Fleet) || slices.ContainsFunc(in.Tiers, func(t scenario.Tier) bool { return retries(t.Client.Fleet(t.Name)) })
}

// chainJudges reports whether in is judged on fault f: its fleet, or a
// tier it calls through, retries a failure f makes at the origin. (An
// approximation for a layer above another: it sees what the one below
// gives up with, not the origin's failure, which giveup.Seen models for
// the closed form and not here: an app that retries only 504s behind a
// sidecar that times out is not judged on a stall.)
func chainJudges(in CheckInput, f checkFault) bool {
	return judges(in.Fleet, f) || slices.ContainsFunc(in.Tiers, func(t scenario.Tier) bool { return judges(t.Client.Fleet(t.Name), f) })
}

// judges reports whether in is judged on fault f: it retries what f
// makes (chainJudges), or the check judges every fleet on f (JudgeOn).
func (e *envelope) judges(in CheckInput, f checkFault) bool {
	return chainJudges(in, f) || slices.Contains(e.judgeOn, f.Name)
}

// withoutRetries is f with its retries and hedges off, everything else
// as it is.
func withoutRetries(f scenario.Fleet) scenario.Fleet {
	f.Retry.MaxRetries = 0
	f.Hedge = scenario.Hedge{}
	return f
}

// runJobs runs jobs on the envelope, fleet i as variant v being
// spec(i, v), calling the origin through the tiers it gives, if any (a
// stack's chain, judged at the origin), and hands each cell to keep,
// from the goroutines that run them. With a cache (and no shard, whose
// cells are numbered by job), a run the cache has, or that another job
// makes, is not made again.
func (e *envelope) runJobs(ctx context.Context, jobs []job, spec func(i, v int) (scenario.Fleet, []scenario.Tier), name func(i int) string, sh grid.Shard, opts experiment.Options, keep func(j job, c CheckCell)) error {
	build := func(j job) (*scenario.Scenario, error) {
		f, ts := spec(j.fleet, j.variant)
		sc, err := e.cellThrough(f, ts, j.clients, j.seed, j.fault, j.load)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name(j.fleet), err)
		}
		return sc, nil
	}
	if e.cache == nil || sh.Count > 1 {
		g := grid.Grid{
			Cells: len(jobs),
			Shard: sh,
			Cell:  func(i int) (*scenario.Scenario, error) { return build(jobs[i]) },
			Early: func(i int) sim.EarlyExit { return jobs[i].early },
		}
		return grid.Run(ctx, g, opts.GridOptions(), func(i int, f *sim.FleetResult) {
			j := jobs[i]
			keep(j, e.cellOf(f, j.fault, j.load))
		})
	}
	type run struct {
		job   job
		sc    *scenario.Scenario
		key   runKey
		keyed bool
		same  []job // jobs whose run is this one's
	}
	// Every job's scenario is built (and kept until its run starts) to key
	// it: a few kilobytes each, for check's hundreds of jobs.
	var todo []*run
	first := map[runKey]*run{}
	for _, j := range jobs {
		sc, err := build(j)
		if err != nil {
			return err
		}
		k, ok, cell, hit := e.cache.find(sc, j.early, e.reading(j))
		if hit {
			keep(j, cell)
			continue
		}
		if ok {
			if r := first[k]; r != nil {
				r.same = append(r.same, j)
				continue
			}
		}
		r := &run{job: j, sc: sc, key: k, keyed: ok}
		if ok {
			first[k] = r
		}
		todo = append(todo, r)
	}
	g := grid.Grid{
		Cells: len(todo),
		Cell: func(i int) (*scenario.Scenario, error) {
			sc := todo[i].sc
			todo[i].sc = nil // the run's own, and no longer kept
			return sc, nil
		},
		Early: func(i int) sim.EarlyExit { return todo[i].job.early },
	}
	gs := grid.Groups{First: warmGroups(todo, func(r *run) *scenario.Scenario { return r.sc }, e.at), WarmAt: e.at}
	return grid.RunGroups(ctx, g, gs, opts.GridOptions(), func(i int, f *sim.FleetResult) {
		r := todo[i]
		cell := e.cellOf(f, r.job.fault, r.job.load)
		if r.keyed {
			e.cache.put(r.key, cell)
			e.cache.shared(len(r.same))
		}
		keep(r.job, cell)
		for _, j := range r.same {
			keep(j, cell)
		}
	})
}

// warmGroups groups runs whose scenarios differ only in their faults,
// which all start at at: the same fleet, client count, seed and load
// (and origin: a bounded queue's is its own). Each group's runs share one
// warm-up to at (grid.Grid.Group); the result is each run's whole.
func warmGroups[R any](runs []R, sc func(R) *scenario.Scenario, at time.Duration) func(i int) int {
	first := make([]int, len(runs))
	seen := map[string]int{}
	for i, r := range runs {
		first[i] = i
		if key, ok := sim.WarmKey(sc(r), at); ok {
			if k, ok := seen[key]; ok {
				first[i] = k
			} else {
				seen[key] = i
			}
		}
	}
	return func(i int) int { return first[i] }
}

// reading is how job j's run is read (cellOf's window: the tick, the
// fault's start and length, the capacity), which two jobs of the same
// scenario may not share.
func (e *envelope) reading(j job) string {
	return fmt.Sprintf("cell %d %d %g %g", e.base.Tick, e.at, e.faults[j.fault].For, e.base.Traffic.Rate/e.loads[j.load])
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
		t.ErrorRate, t.Answer = ft.Rate, ft.Answer
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
