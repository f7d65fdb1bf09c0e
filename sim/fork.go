package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/retrystorm/retrystorm/origin"
	"github.com/retrystorm/retrystorm/resil"
	"github.com/retrystorm/retrystorm/scenario"
)

// Warm is a run played up to a moment and kept there, to be played on
// from it as several scenarios that differ only in triggers that start at
// or after it: check's faults all start at the same moment, after the
// same warm-up, which each of them played anew (a fifth of the simulation
// of a check of manifests). A Warm is not safe for concurrent use; Run
// copies it, and the copies run side by side.
type Warm struct {
	f   *fleet
	at  int64
	key string // the warmed scenario but its triggers and names
}

// ErrNotForkable is WarmUp's error for a scenario whose run it cannot
// copy (see Forkable): play each scenario whole.
var ErrNotForkable = errors.New("sim: the run cannot be warmed up once and played on several ways")

// Forkable reports whether sc's run can be warmed up to at and played on
// from there (WarmUp): one fleet on the fleet engine; triggers that start
// at or after at, a moment inside the run on its tick grid, none naming a
// replica; no
// rate series; policies that
// keep no state that fork cannot copy (a budget but the token bucket and
// the gRPC throttle, a breaker, an adaptive throttle, a pacer); no picker, detector or replica named (their state is not
// copied); and origin and tier servers whose state origin.Fork copies.
// The last is known only once the run is built: WarmUp may still return
// ErrNotForkable.
func Forkable(sc *scenario.Scenario, at time.Duration) bool {
	// A scenario that names a replica keeps the ground truth per
	// replica from its start (newReplicaState), which a warm-up without
	// it would not have.
	// A moment off the tick grid is refused: the early-exit rules check
	// on the grid from the tick of the first trigger's start, which can
	// then fall before the moment, where a warm-up never checks.
	if len(sc.Fleets) != 1 || sc.System() || sc.NamesReplicas() || at <= 0 || at >= sc.Duration || sc.Tick <= 0 || at%sc.Tick != 0 ||
		len(sc.Traffic.RateChanges(sc.Tick, sc.Duration)) > 0 {
		return false
	}
	for _, t := range sc.Triggers {
		if t.At < at {
			return false
		}
	}
	return true
}

// forkKey is what a fork's scenario must share with the warm one: all of
// it but the triggers and the names (which reach only the result, from
// the fork's own scenario).
func forkKey(sc *scenario.Scenario) (string, error) {
	c := sc.Clone()
	c.Name, c.Triggers = "", nil
	for i := range c.Fleets {
		c.Fleets[i].Name = ""
	}
	c.Tiers = slices.Clone(c.Tiers)
	for i := range c.Tiers {
		c.Tiers[i].Name = ""
	}
	b, err := json.Marshal(c)
	return string(b), err
}

// stopped is err, play's, as RunWith says it: the context's error for a
// run its context stopped.
func stopped(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil && errors.Is(err, errStopped) {
		return cerr
	}
	return err
}

// WarmKey is the key of sc's warm-up to at: scenarios of the same key
// can share one (WarmUp once, then Run for each). ok is false where sc's
// cannot be shared (Forkable).
func WarmKey(sc *scenario.Scenario, at time.Duration) (key string, ok bool) {
	if !Forkable(sc, at) {
		return "", false
	}
	key, err := forkKey(sc)
	return key, err == nil
}

// WarmUp plays sc up to at (nothing at at has happened) and keeps the run
// there, for Run. It returns ErrNotForkable where Forkable says no or the
// run's state cannot be copied. o's EarlyExit is not used: no rule looks
// before the triggers (they start at or after at).
func WarmUp(ctx context.Context, sc *scenario.Scenario, at time.Duration, o Options) (*Warm, error) {
	if !Forkable(sc, at) || o.Progress != nil || o.WrapBudget != nil {
		return nil, ErrNotForkable
	}
	if err := Estimate(sc).Check(sc.Name, o.Limits); err != nil {
		return nil, err
	}
	key, err := forkKey(sc)
	if err != nil {
		return nil, ErrNotForkable
	}
	f, err := newFleet(sc, 0, &Options{sharedReplicas: o.sharedReplicas})
	if err != nil {
		return nil, err
	}
	if !f.forkable() {
		f.give()
		return nil, ErrNotForkable
	}
	stop := func() bool { return ctx.Err() != nil }
	_, paused, err := f.play(stop, int64(at))
	if err != nil {
		return nil, stopped(ctx, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err // as RunWith: a run its context ended is no result
	}
	if !paused || f.envAt != 0 {
		f.give()
		return nil, ErrNotForkable
	}
	return &Warm{f: f, at: int64(at), key: key}, nil
}

// Run plays a copy of w on from its moment as scenario sc, with o's
// early exit and limits: sc must be w's scenario with other triggers (and
// names), none starting before the moment. The result is RunWith(ctx, sc,
// o)'s, byte for byte (TestForkIsTheWholeRun).
func (w *Warm) Run(ctx context.Context, sc *scenario.Scenario, o Options) (*Result, error) {
	if w.f == nil {
		return nil, errors.New("sim: a released warm-up")
	}
	if !Forkable(sc, time.Duration(w.at)) || o.Progress != nil || o.WrapBudget != nil {
		return nil, ErrNotForkable
	}
	if key, err := forkKey(sc); err != nil || key != w.key {
		return nil, fmt.Errorf("sim: scenario %q is not the warmed-up one but for its triggers", sc.Name)
	}
	if err := Estimate(sc).Check(sc.Name, o.Limits); err != nil {
		return nil, err
	}
	f := w.f.fork(sc, &o)
	stop := func() bool { return ctx.Err() != nil }
	ended, _, err := f.play(stop, math.MaxInt64)
	if err != nil {
		return nil, stopped(ctx, err)
	}
	res := &Result{Scenario: sc.Name, Seed: sc.Seed, TickSeconds: sc.Tick.Seconds(), Fleets: []FleetResult{f.result(&ended)}}
	res.Trigger = TriggerSpan(sc)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := res.Check(); err != nil {
		return nil, err
	}
	return res, nil
}

// Release gives the warm run's memory back; w runs no more.
func (w *Warm) Release() {
	if w.f != nil {
		w.f.give()
		w.f = nil
	}
}

// budgetForker is a budget whose state can be copied (resil/budget's
// token bucket and gRPC throttle).
type budgetForker interface{ Fork() resil.Budget }

// forkable reports whether f's state is all copied by fork.
func (f *fleet) forkable() bool {
	if f.reps != nil || f.bal || f.det || f.chain != nil && f.chain.kept || f.hedging {
		return false
	}
	if _, ok := f.jitter.(*rand.PCG); !ok {
		return false
	}
	for i := range f.policies {
		p := &f.policies[i]
		if _, ok := p.Budget.(budgetForker); p.Budget != nil && !ok || p.Breaker != nil || p.Throttle != nil || p.Pacer != nil {
			return false
		}
	}
	models := f.origin
	if f.chain != nil {
		for _, l := range f.chain.layers {
			models = append(slices.Clone(models), l...)
		}
	}
	for _, m := range models {
		if _, ok := origin.Fork(m, nil); !ok {
			return false
		}
	}
	return true
}

// fork returns a copy of f, paused, that plays on as scenario sc: the same
// state, its own memory, sc's triggers from now on.
func (f *fleet) fork(sc *scenario.Scenario, o *Options) *fleet {
	g := *f
	g.sc, g.cfg = sc, &sc.Fleets[0]
	g.policies = slices.Clone(f.policies)
	for i := range g.policies {
		if b := g.policies[i].Budget; b != nil {
			g.policies[i].Budget = b.(budgetForker).Fork()
		}
	}
	jitter := *f.jitter.(*rand.PCG)
	arrivals := *f.arrivalsSrc
	g.jitter, g.arrivalsSrc = &jitter, &arrivals
	g.arrivals = rand.New(&arrivals)
	g.take()
	g.atts = append(g.atts, f.atts...)
	g.freeA = append(g.freeA, f.freeA...)
	g.ints = append(g.ints, f.ints...)
	g.freeI = append(g.freeI, f.freeI...)
	g.q.copyFrom(f.q)
	g.reqs.copyFrom(f.reqs)
	copy(g.ticks, f.ticks)
	*g.lat = *f.lat
	g.s = f.s.clone()
	g.sum = f.sum.clone()
	g.progress = nil
	g.origin = make([]origin.Model, len(f.origin))
	for r, m := range f.origin {
		g.origin[r], _ = origin.Fork(m, (*originDriver)(&g))
	}
	g.oticks, g.osum = g.ticks, &g.sum
	if f.chain != nil {
		g.chain = f.chain.fork(&g)
		n := len(g.chain.hops) - 1
		g.oticks, g.osum = g.chain.hops[n].ticks, &g.chain.hops[n].sum
	}
	// The triggers from now on are sc's; none has started.
	g.sched = buildSchedule(sc, g.replicas)
	g.env = &g.sched.envs[g.envAt]
	g.clearAt, g.hasClear = 0, false
	if _, end, ok := triggerWindow(sc); ok {
		g.clearAt, g.hasClear = int64(end), true
	}
	g.early = newEarly(&g, o.EarlyExit, &arrivals)
	return &g
}

// fork copies the chain's state for fleet g.
func (c *chain) fork(g *fleet) *chain {
	d := *c
	d.hops = slices.Clone(c.hops)
	for i := range d.hops {
		h := &d.hops[i]
		h.ticks, h.s, h.sum = slices.Clone(h.ticks), h.s.clone(), h.sum.clone()
	}
	d.layers = make([][]origin.Model, len(c.layers))
	for l, ms := range c.layers {
		d.layers[l] = make([]origin.Model, len(ms))
		drv := &tierDriver{f: g, layer: uint8(l)}
		for r, m := range ms {
			d.layers[l][r], _ = origin.Fork(m, drv)
		}
	}
	d.reqs, d.free = slices.Clone(c.reqs), slices.Clone(c.free)
	d.rs = slices.Clone(c.rs)
	return &d
}

// copyFrom makes q a copy of s, in q's own memory.
func (q *eventQueue) copyFrom(s *eventQueue) {
	lanes, buckets, atts := q.lanes, q.heap.buckets, q.atts
	*q = *s
	q.atts = atts
	for i := range q.lanes {
		q.lanes[i].buf = append(lanes[i].buf[:0], s.lanes[i].buf...)
	}
	for b := range q.heap.buckets {
		q.heap.buckets[b] = append(buckets[b][:0], s.heap.buckets[b]...)
	}
}

// copyFrom makes t a copy of s, in t's own memory.
func (t *requests) copyFrom(s *requests) {
	for len(t.chunks) < len(s.chunks) {
		t.chunks = append(t.chunks, new([requestChunk]request))
	}
	// The slots handed out so far; the others are set when taken.
	for i := range s.chunks {
		n := min(int(s.made)-i*requestChunk, requestChunk)
		if n <= 0 {
			break
		}
		copy(t.chunks[i][:n], s.chunks[i][:n])
	}
	t.made, t.free = s.made, append(t.free[:0], s.free...)
}

// clone is a copy of s that shares none of its slices.
func (s Series) clone() Series {
	c := s
	c.Tick = slices.Clone(s.Tick)
	for _, p := range []*[]int64{&c.Intents, &c.Offered, &c.FirstAttempts, &c.Retries, &c.Hedges, &c.Successes, &c.Goodput,
		&c.Failures, &c.FailedAttempts, &c.BreakerRefusals, &c.ThrottleRefusals, &c.Queue} {
		*p = slices.Clone(*p)
	}
	for _, p := range []*[]float64{&c.ErrorRate, &c.RetriesPerRequest, &c.BreakerOpen} {
		*p = slices.Clone(*p)
	}
	return c
}

// clone is a copy of s that shares none of its pointers.
func (s Summary) clone() Summary {
	c := s
	if s.RecoveryTicks != nil {
		v := *s.RecoveryTicks
		c.RecoveryTicks = &v
	}
	if s.Ceiling != nil {
		v := *s.Ceiling
		c.Ceiling = &v
	}
	return c
}
