package lab

import (
	"context"
	"fmt"
	"math"
	"net/url"
	"runtime"
	"sync"
	"time"

	"github.com/retrystorm/retrystorm/grid"
	"github.com/retrystorm/retrystorm/scenario"
	"github.com/retrystorm/retrystorm/sim"
)

// DefaultTick is the wall-clock length of one scenario tick when the
// options say nothing: a scenario of 120 one-second ticks runs in 12 s per fleet.
const DefaultTick = 100 * time.Millisecond

// runOptions configures runFleets.
type runOptions struct {
	// Tick is the wall-clock length of one tick of the scenario: every
	// duration of the scenario is scaled by Tick / scenario tick, and every
	// rate by its inverse (see Scale). Zero means DefaultTick.
	Tick time.Duration
	// Live, if set, is told about every tick as it happens.
	Live *Live
	// Ready, if set, is called when a fleet's origin and gateway are up,
	// before its first tick, with their base URLs: both serve /metrics,
	// and the origin /admin/faults.
	Ready func(fleet string, origin, gateway *url.URL)
	// ReadyTiers, if set, is called beside Ready when the scenario has a
	// chain, with its tiers' base URLs, outermost first: each serves
	// /metrics.
	ReadyTiers func(fleet string, tiers []*url.URL)
	// AdminToken is the secret the origins' /admin/faults require (128
	// random bits, as a web page cannot guess); the live view's links
	// carry it. Empty means a new one for each fleet, known to the live
	// view alone.
	AdminToken string
	// Protocol is what the origin, the gateway and the load generator
	// speak: ProtocolHTTP (the default) or ProtocolGRPC. Over gRPC the
	// origin's and the gateway's /metrics (and the origin's
	// /admin/faults) are on HTTP servers of their own, the URLs Ready is
	// given.
	Protocol Protocol
	// ReadyGRPC, if set, is called over gRPC beside Ready, with the
	// addresses (host:port) of the origin's and the gateway's gRPC
	// servers.
	ReadyGRPC func(fleet, origin, gateway string)
	// Target, if set, is a real service to play the scenario against,
	// through a fault proxy, instead of the lab's own origin (over HTTP
	// only). Each fleet's load then stops at the end of the scenario
	// (plus one attempt's timeout): what is still out is cancelled,
	// counted as unfinished.
	Target *Target
	// startAt is when this fleet's first tick starts (see StartAt).
	startAt time.Time
	// Shard, when its Count is more than 1, runs shard Index of a run
	// split over Count load processes (see StartAt).
	Shard grid.Shard
	// StartAt, when set, is when the first fleet's first tick starts on
	// the wall clock, and each next fleet starts FleetGap after the one
	// before it ends, instead of when the servers are up and the target
	// settled: the shards of a run keep one schedule.
	StartAt time.Time
}

// FleetGap is the pause between fleets of a run with a fixed schedule
// (ExperimentOptions.StartAt), for the target to settle.
const FleetGap = 5 * time.Second

// fleetStart is when fleet i of sc starts with a fixed schedule from at.
func fleetStart(sc *scenario.Scenario, tick time.Duration, at time.Time, i int) time.Time {
	ticks := int((sc.Duration + sc.Tick - 1) / sc.Tick)
	per := time.Duration(ticks)*tick + maxTimeout(sc, tick) + FleetGap
	return at.Add(time.Duration(i) * per)
}

// maxTimeout is the longest fleet timeout of sc in wall time at tick.
func maxTimeout(sc *scenario.Scenario, tick time.Duration) time.Duration {
	var d time.Duration
	for _, f := range sc.Fleets {
		d = max(d, time.Duration(float64(f.Timeout)*tick.Seconds()/sc.Tick.Seconds()))
	}
	return d
}

// Result is a lab run in the simulator's terms (the same JSON, so the
// same tables, charts and comparisons), with what only the lab measures.
// Times and rates in the embedded result are the scenario's (ticks of
// scenario time), whatever the wall-clock tick.
type Result struct {
	*sim.Result
	Lab Info `json:"lab"`
}

// Info is what the lab measures beyond the simulator's series.
type Info struct {
	// WallTickSeconds is how long one tick lasted on the wall clock.
	WallTickSeconds float64 `json:"wall_tick_seconds"`
	// Scale is WallTickSeconds / the scenario's tick.
	Scale float64 `json:"scale"`
	// Protocol is what the lab's servers spoke: http or grpc.
	Protocol Protocol `json:"protocol"`
	// Target is the service played against, if not the lab's origin;
	// RestSeconds its latency at rest, before the first fleet.
	Target      string      `json:"target,omitempty"`
	RestSeconds float64     `json:"target_rest_seconds,omitempty"`
	Fleets      []FleetInfo `json:"fleets"`
	// Inconclusive, when set, says that the lab was not measuring the
	// service but its machine (see judge): its claims are not judged.
	Inconclusive *Inconclusive `json:"inconclusive,omitempty"`
}

// FleetInfo is one fleet's run as the lab's components counted it.
type FleetInfo struct {
	Name        string        `json:"name"`
	WallSeconds float64       `json:"wall_seconds"`
	Origin      OriginCounts  `json:"origin"`
	Gateway     GatewayCounts `json:"gateway"`
	Load        LoadStats     `json:"load"`
	// Watch is what the lab saw of itself meanwhile: its timers'
	// lateness and the CPU.
	Watch WatchStats `json:"watch"`
	// SettleSeconds is the pause before the fleet, against a target,
	// waiting for it to settle.
	SettleSeconds float64 `json:"settle_seconds,omitempty"`
	// Tiers are the chain's tiers, outermost first; none without.
	Tiers []TierCounts `json:"tiers,omitempty"`
	// Replicas is the ground truth per replica, when the fleet's result
	// carries it (as the simulator's does), and NoHealthyReplica the
	// attempts that found none: the fleet's result carries them.
	Replicas         []sim.ReplicaResult `json:"-"`
	NoHealthyReplica int64               `json:"-"`
	// Latency is the latencies of the intents that succeeded, in
	// wall-clock time: what a shard's JSON carries for merge to add up
	// (experiment.LabShard), not in the lab's own.
	Latency *sim.Histogram `json:"-"`
}

// runFleets plays every fleet of sc, one after the other, each against a fresh
// origin and gateway on loopback, and returns the result. It stops early
// with ctx's error.
//
// Runs must not overlap: each times real servers on this machine. A
// command that runs the lab sets the garbage collector's target to
// GCPercent first.
func runFleets(ctx context.Context, sc *scenario.Scenario, opts runOptions) (*Result, error) {
	if err := Check(sc); err != nil {
		return nil, err
	}
	if opts.Tick <= 0 {
		opts.Tick = DefaultTick
	}
	if opts.Protocol == "" {
		opts.Protocol = ProtocolHTTP
	}
	if err := refuse(sc, opts.Protocol, opts.Target); err != nil {
		return nil, err
	}
	res := &Result{
		Result: &sim.Result{
			Scenario:    sc.Name,
			Seed:        sc.Seed,
			TickSeconds: sc.Tick.Seconds(),
			Trigger:     sim.TriggerSpan(sc),
		},
		Lab: Info{WallTickSeconds: opts.Tick.Seconds(), Scale: opts.Tick.Seconds() / sc.Tick.Seconds(), Protocol: opts.Protocol},
	}
	if t := opts.Target; t != nil {
		if err := t.rest(ctx); err != nil {
			return nil, err
		}
		res.Lab.Target, res.Lab.RestSeconds = t.URL.Redacted(), t.baseline.Seconds()
	}
	for i := range sc.Fleets {
		var settle time.Duration
		if !opts.StartAt.IsZero() {
			opts.startAt = fleetStart(sc, opts.Tick, opts.StartAt, i)
		} else if i > 0 && opts.Target != nil {
			var err error
			if settle, err = opts.Target.pause(ctx, sc.Fleets[i].Name); err != nil {
				return nil, err
			}
		}
		f, info, err := runFleet(ctx, sc, i, opts)
		if err != nil {
			return nil, err
		}
		info.SettleSeconds = settle.Seconds()
		res.Fleets = append(res.Fleets, f)
		res.Lab.Fleets = append(res.Lab.Fleets, info)
	}
	res.judge(sc, opts.Tick)
	return res, nil
}

// judge sets res.Lab.Inconclusive from what the watch saw of every fleet
// run so far, held to the bound for sc at a wall-clock tick of tick.
func (res *Result) judge(sc *scenario.Scenario, tick time.Duration) {
	var timeout time.Duration // the shortest scaled timeout
	scale := tick.Seconds() / sc.Tick.Seconds()
	for _, f := range sc.Fleets {
		if d := time.Duration(float64(f.Timeout) * scale); d > 0 && (timeout == 0 || d < timeout) {
			timeout = d
		}
	}
	maxTick := MaxWall
	if b, err := Bounds(sc); err == nil {
		maxTick = b.Max
	}
	var service time.Duration
	if res.Lab.Target == "" { // a target's own admission is not the lab's to judge
		service = serviceBound(sc.Origin, scale)
	}
	res.Lab.Inconclusive = judge(&res.Lab, tick, lateBound(tick, timeout), stallBound(tick, timeout), service, maxTick)
}

// GCPercent is the garbage collector's target the lab is meant to run
// at (GOGC 400): the lab's heap is small and churns fast, and collecting
// it at the default target took a fifth of the lab's CPU in measurements,
// time the servers need. It is the whole process's setting, so the lab
// leaves it to its command (debug.SetGCPercent), which knows whether
// anything else runs beside it.
const GCPercent = 400

// Check reports why the lab cannot run sc, or nil: the lab's origin is
// the queue, capacity or concurrency model, of one replica or several
// (each one server).
func Check(sc *scenario.Scenario) error {
	if len(sc.Fleets) == 0 {
		return fmt.Errorf("lab: scenario %q has no fleets", sc.Name)
	}
	if sc.Tick <= 0 {
		return fmt.Errorf("lab: scenario %q has no tick", sc.Name)
	}
	if _, err := NewOrigin(OriginConfig{Origin: sc.Origin}); err != nil {
		return err
	}
	if err := refuseReplicas(sc); err != nil {
		return err
	}
	if err := refuseSystem(sc); err != nil {
		return err
	}
	for _, t := range sc.Tiers {
		tr, err := NewTier(TierConfig{Tier: t, Next: &url.URL{}})
		if err != nil {
			return err
		}
		tr.halt()
	}
	return nil
}

// lead is how long the servers get to come up before the first tick.
const lead = 100 * time.Millisecond

// runFleet plays fleet i of sc against a fresh origin and gateway, and
// shuts them down before it returns.
func runFleet(ctx context.Context, sc *scenario.Scenario, i int, opts runOptions) (sim.FleetResult, FleetInfo, error) {
	if opts.Tick <= 0 {
		opts.Tick = DefaultTick
	}
	if i < 0 || i >= len(sc.Fleets) {
		return sim.FleetResult{}, FleetInfo{}, fmt.Errorf("lab: no fleet %d in scenario %q", i, sc.Name)
	}
	scale := opts.Tick.Seconds() / sc.Tick.Seconds()
	wall := Scale(sc, scale)
	fleet := wall.Fleets[i]
	n := int((sc.Duration + sc.Tick - 1) / sc.Tick)
	// What the previous fleet left (thousands of requests' garbage) is
	// collected now rather than during this fleet's first ticks, where a
	// pause looks like an outage to a breaker.
	runtime.GC()
	if !opts.startAt.IsZero() {
		select {
		case <-ctx.Done():
			return sim.FleetResult{}, FleetInfo{}, ctx.Err()
		case <-time.After(time.Until(opts.startAt.Add(-lead))):
		}
	}
	began := time.Now()
	start := began.Add(lead)
	if !opts.startAt.IsZero() {
		start = opts.startAt
	}
	tallies := hopTallies(wall, start, n)
	tally := tallies[0]
	clearAt := time.Duration(-1)
	if w := sim.TriggerSpan(wall); w != nil {
		clearAt = time.Duration(w.End * float64(time.Second))
	}

	token := opts.AdminToken
	if token == "" {
		token = newToken()
	}
	r, err := startRig(ctx, rigSpec{
		wall: wall, fleet: i, seed: sc.Seed, tallies: tallies, start: start, clearAt: clearAt,
		token: token, protocol: opts.Protocol, target: opts.Target,
	})
	if err != nil {
		return sim.FleetResult{}, FleetInfo{}, err
	}
	defer r.close()
	links := r.announce(fleet.Name, opts, token)
	page := opts.Live.beginFleet(fleet.Name, links)

	sampling := make(chan struct{})
	var sampler sync.WaitGroup
	sampler.Go(func() { sample(sampling, r.gauges(tallies), opts.Live, page, fleet.Timeout) })

	lc := LoadConfig{
		Target: r.target, Protocol: opts.Protocol, Traffic: wall.Traffic, Triggers: wall.Triggers, Tick: wall.Tick,
		Start: start, Duration: wall.Duration, Deadline: intentDeadline(fleet),
		ClearAt: clearAt, Seed: sc.Seed, Tally: tally, Shard: opts.Shard,
	}
	if opts.Target != nil {
		lc.Cutoff = wallCutoff(wall, i) // never past the scenario's end
	}
	watch := startWatch(sc.Seed)
	load, err := RunLoad(ctx, lc)
	seen := watch.finish()
	close(sampling)
	sampler.Wait()
	r.close()
	if err != nil {
		return sim.FleetResult{}, FleetInfo{}, err
	}

	info := r.info(sc, i, tally, began)
	info.Load, info.Watch = load, seen
	fr := fleetResult(sc, i, tallies, info, scale)
	opts.Live.endFleet(page, fr)
	return fr, info, nil
}

// fleetResult is fleet i of sc in the simulator's terms, from the tallies
// of its hops (the fleet's first) and what its servers counted (info), at
// a wall-clock scale of scale.
func fleetResult(sc *scenario.Scenario, i int, tallies []*Tally, info FleetInfo, scale float64) sim.FleetResult {
	tally := tallies[0]
	fr := sim.FleetResult{Name: info.Name, Series: tally.series(), Replicas: info.Replicas, NoHealthyReplica: info.NoHealthyReplica}
	fr.Summary = summarize(sc, &fr.Series, tally, hopCounts(info, 0), scale)
	if p, err := sc.Fleets[i].NewPolicy(); err == nil {
		if c := p.Ceiling(sc.Traffic.Rate * sc.Tick.Seconds()); !math.IsInf(c, 0) {
			fr.Summary.Ceiling = &c
		}
	}
	if len(sc.Tiers) > 0 {
		for l, t := range tallies {
			name := "origin"
			if l < len(sc.Tiers) {
				name = sc.Tiers[l].Name
			}
			tr := sim.TierResult{Name: name, Series: t.series()}
			tr.Summary = summarize(sc, &tr.Series, t, hopCounts(info, l), scale)
			tr.Amplification = float64(tr.Summary.Attempts) / float64(max(fr.Summary.Intents, 1))
			fr.Tiers = append(fr.Tiers, tr)
		}
	}
	return fr
}

// hop is what the components at both ends of a hop counted of it beyond
// its tally: the server's wasted work and drops, the client's budget
// denials and breaker trips.
type hop struct {
	wasted, dropped, denials, trips int64
}

// hopCounts returns the counts of hop l (into layer l) of a run with
// info's tiers.
func hopCounts(info FleetInfo, l int) hop {
	var h hop
	if l < len(info.Tiers) {
		h.wasted, h.dropped = info.Tiers[l].Wasted, info.Tiers[l].Dropped
	} else {
		h.wasted, h.dropped = info.Origin.Wasted, info.Origin.Dropped
	}
	if l == 0 {
		h.denials, h.trips = int64(info.Gateway.BudgetDenials), int64(info.Gateway.BreakerTrips)
	} else {
		h.denials, h.trips = int64(info.Tiers[l-1].BudgetDenials), int64(info.Tiers[l-1].BreakerTrips)
	}
	return h
}

// sample records the gauges at the end of every tick, and tells the live
// view of the first hop's, until stop is closed after the last tick.
func sample(stop <-chan struct{}, gs []gauge, live *Live, fleet int, timeout time.Duration) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	t := gs[0].t
	// The ticks whose attempts may still be out when they end: the live
	// view gets them again as their answers come in.
	revise := int(timeout/t.tick) + 1
	for k := range t.n {
		end := t.start.Add(time.Duration(k+1) * t.tick)
		timer.Reset(time.Until(end))
		select {
		case <-stop:
			return
		case <-timer.C:
		}
		for _, g := range gs {
			g.t.sample(k, int64(g.queue()), g.open(end))
			if g.ejected != nil {
				g.ejected(time.Now())
			}
		}
		for j := max(0, k-revise); j <= k; j++ {
			live.tick(fleet, t.values(j))
		}
	}
	// The last ticks settle after the run: send them once more.
	for j := max(0, t.n-revise); j < t.n; j++ {
		select {
		case <-stop:
		case <-time.After(timeout):
		}
		live.tick(fleet, t.values(j))
	}
}

// intentDeadline is how long the load generator lets an intent wait. The
// simulator follows an intent to its end; the lab needs a bound, so it is
// the fleet's deadline or, without one, twice as long as the retries can
// take (every attempt's timeout and every backoff at its longest, which
// resil's Backoff.MaxDelay bounds for every jitter, and one more timeout):
// twice, so that the delays of a loaded machine do not cut retries short.
// Unlimited retries count as ten.
func intentDeadline(f scenario.Fleet) time.Duration {
	if f.Deadline > 0 {
		return f.Deadline
	}
	retries := f.Retry.MaxRetries
	if retries < 0 {
		retries = 10
	}
	total := time.Duration(retries+2) * f.Timeout
	p, err := f.NewPolicy()
	if err != nil {
		return total
	}
	var prev time.Duration
	for r := 1; r <= retries; r++ {
		prev = p.Backoff.MaxDelay(r, prev)
		total += prev
	}
	return 2 * total
}

// summarize fills the summary of a hop (the fleet's into the first
// layer, or a tier's into the next) from what its tally and the
// components at its ends counted, judging recovery as the simulator does.
func summarize(sc *scenario.Scenario, s *sim.Series, t *Tally, h hop, scale float64) sim.Summary {
	sum := sim.Summary{
		Timeouts:          t.get(tTimeouts),
		Victims:           t.get(tVictims),
		LostBy:            t.lostBy(),
		AnswersThrownAway: t.get(tThrown),
		WastedWork:        h.wasted,
		Dropped:           h.dropped,
		BudgetDenials:     h.denials,
		BreakerTrips:      h.trips,
	}
	for k, r := range s.BreakerRefusals {
		sum.BreakerRefusals += r
		sum.ThrottleRefusals += s.ThrottleRefusals[k]
	}
	l := sum.LostBy
	sum.IntentsLost = l.RetriesExhausted + l.Budget + l.Breaker + l.Throttled + l.NotIdempotent + l.Deadline + l.Unfinished
	start, end := sim.TriggerTicks(sc)
	sim.Summarize(s, &sum, start, end)
	q := t.latencies.quantiles(0.50, 0.99)
	sum.LatencyP50, sum.LatencyP99 = q[0]/scale, q[1]/scale
	return sum
}

// announce tells opts' Ready callbacks where r's servers for fleet are,
// and returns the links the live view shows (the faults page's with
// token, without a target).
func (r *rig) announce(fleet string, opts runOptions, token string) liveLinks {
	if opts.Ready != nil {
		opts.Ready(fleet, r.osrv.URL(), r.gsrv.URL())
	}
	if opts.ReadyTiers != nil && len(r.tsrv) > 0 {
		tiers := make([]*url.URL, len(r.tsrv))
		for l, s := range r.tsrv {
			tiers[l] = s.URL()
		}
		opts.ReadyTiers(fleet, tiers)
	}
	if opts.ReadyGRPC != nil && r.ogrpc != nil {
		opts.ReadyGRPC(fleet, r.ogrpc.Addr(), r.ggrpc.Addr())
	}
	links := liveLinks{Origin: r.osrv.url.String(), Gateway: r.gsrv.url.String()}
	if opts.Target == nil {
		faults := r.osrv.URL()
		faults.Path, faults.RawQuery = "/admin/faults", url.Values{"token": {token}}.Encode()
		links.Faults = faults.String()
	}
	return links
}

// info is what r's servers counted for fleet i of sc, begun at began;
// tally is the fleet's.
func (r *rig) info(sc *scenario.Scenario, i int, tally *Tally, began time.Time) FleetInfo {
	info := FleetInfo{
		Name: sc.Fleets[i].Name, WallSeconds: time.Since(began).Seconds(),
		Origin: r.origin.Counts(), Gateway: r.gw.Counts(),
		Latency: tally.latencyHistogram(),
	}
	for _, t := range r.tiers {
		info.Tiers = append(info.Tiers, t.Counts())
	}
	if g, ok := r.gw.(*Gateway); ok && reportsReplicas(sc, i) {
		info.Replicas, info.NoHealthyReplica = g.ReplicaResults(sc.Tick)
	}
	return info
}

// hopTallies are wall's tallies of n ticks from start, one per hop: the
// fleet's into the first layer, then each tier's into the next.
func hopTallies(wall *scenario.Scenario, start time.Time, n int) []*Tally {
	tallies := make([]*Tally, len(wall.Tiers)+1)
	for l := range tallies {
		tallies[l] = NewTally(start, wall.Tick, n)
	}
	return tallies
}
