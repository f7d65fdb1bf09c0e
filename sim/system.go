package sim

import (
	"context"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/retrystorm/retrystorm/origin"
	"github.com/retrystorm/retrystorm/resil"
	"github.com/retrystorm/retrystorm/scenario"
)

// The system engine (issue 39) runs what the one-hop and chain engine
// (fleet.go, chain.go) does not: fleets that share one system, caches,
// connection pools, closed-loop clients, flushes and partitions. It is a
// discrete-event simulation of its own, written for what it composes
// rather than for the last nanosecond: every layer of the chain (tiers,
// caches, the origin) serves the attempts of every caller that calls it,
// and every caller (a fleet's clients, a tier's replicas, a cache's
// fills) drives resil's Policy, as the other engine does, with virtual
// time. It shares the other engine's event queue, draws, conditions,
// server models (package origin), counters and summary, so a number means
// the same in both; the other engine stays as it was, for speed, and the
// scenarios it runs never come here (scenario.System).
//
// A run of the system engine plays one system: every fleet of a shared
// scenario at once, or, without shared, one fleet on its own copy (Run
// plays one per fleet, side by side).

// Events of the system engine, on its own queue (their numbers overlap
// the other engine's, which never shares a queue with it).
const (
	sysRetry       eventKind = iota // an intent's backoff is over (ref: intent)
	sysSend                         // an intent may ask its pacer again (ref: intent)
	sysTimeout                      // an attempt's client gives up (ref: attempt)
	sysDeliver                      // an answer that is not a server's (a cache's, a pool's) reaches an attempt (ref: attempt; aux: the outcome)
	sysPoolTimeout                  // an attempt has waited its pool's wait timeout (ref: attempt)
	sysThink                        // a closed-loop client's next intent (ref: the client; gen: the fleet)
	sysFlush                        // a flush trigger (ref: the trigger)
	sysAnswer                       // the origin answers (ref: request; aux: the outcome)
	sysComplete                     // a worker of the origin finishes (ref: request)
	sysTierWork                     // a tier's own work is over: its call begins (ref: request)
	sysTierReply                    // a tier answers its caller (ref: request; aux: the outcome)
)

// A caller group is everything that calls one layer with one policy
// configuration: a fleet's clients, or one layer's calls to the next (a
// tier's replicas, a cache's fills). Each group counts the hop from its
// callers into its layer; a layer's hop is the sum of the groups that
// call it.
type group struct {
	name     string
	fleet    int   // the fleet's index in the scenario, or -1 for a layer's calls
	from     int   // the layer that calls (-1 for a fleet)
	to       int   // the layer called
	base, n  int32 // its policies: policies[base : base+n]
	timeout  int64
	deadline int64
	idemOnly bool
	// propagate: the calling tier passes its callers' deadlines on.
	propagate bool
	retryOn   [outcomeRefused + 1]bool
	pool      scenario.Pool
	jitter    rand.Source
	picker    *replicaPick // nil: a random replica per attempt

	ticks []tickCounts
	sum   Summary
	lat   *histogram // fleets only
	s     Series
	pools poolCounts
}

// system is one run of the system engine.
type system struct {
	sc       *scenario.Scenario
	seed     uint64
	shared   bool
	tickNs   int64
	nTicks   int
	end      int64
	clearAt  int64
	hasClear bool

	q        eventQueue
	groups   []group // the fleets' first, then one per layer that calls another
	fleets   []arrivals
	layers   []layer
	policies []resil.Policy
	pools    []pool // by policy, for groups with a pool; nil otherwise

	ints  []sintent
	freeI []int32
	atts  []sattempt
	freeA []int32
	reqs  []sreq
	freeR []int32
	live  int
	cuts  []cut

	sched schedule // the origin's conditions
	envAt int
	env   *env

	nextSample int
	boundary   int64
	lastNs     int64
	lastT      time.Time
	draining   bool
	progress   func(ticks int)
}

// runSystem plays sc in the system engine and fills res's fleets (and,
// for a shared scenario, its layers).
func runSystem(ctx context.Context, sc *scenario.Scenario, res *Result, opts *Options) error {
	stop := func() bool { return ctx.Err() != nil }
	runs := [][]int{}
	if sc.Shared {
		all := make([]int, len(sc.Fleets))
		for i := range all {
			all[i] = i
		}
		runs = append(runs, all)
	} else {
		for i := range sc.Fleets {
			runs = append(runs, []int{i})
		}
	}
	systems := make([]*system, len(runs))
	for k, fleets := range runs {
		s, err := newSystem(sc, fleets, opts)
		if err != nil {
			return err
		}
		systems[k] = s
	}
	progressAll(systems, opts.Progress)
	outs := make([]systemResult, len(systems))
	errs := make([]error, len(systems))
	var wg sync.WaitGroup
	for k, s := range systems {
		wg.Go(func() { outs[k], errs[k] = s.run(stop) })
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	for k, out := range outs {
		for j, f := range out.fleets {
			if !sc.Shared {
				f.Tiers = out.layers
			}
			res.Fleets[runs[k][j]] = f
		}
		if sc.Shared {
			res.Layers = out.layers
		}
	}
	return nil
}

// progressAll tells progress of every system's ticks, summed.
func progressAll(systems []*system, progress func(done, total int)) {
	if progress == nil {
		return
	}
	var mu sync.Mutex
	done, total := 0, 0
	for _, s := range systems {
		total += s.nTicks
	}
	for _, s := range systems {
		s.progress = func(ticks int) {
			mu.Lock()
			defer mu.Unlock()
			done += ticks
			progress(done, total)
		}
	}
}

// vt is virtual time ns as a time.Time for resil.
func (s *system) vt(ns int64) time.Time {
	if ns != s.lastNs {
		s.lastNs, s.lastT = ns, time.Unix(0, ns)
	}
	return s.lastT
}

// tickOf is the tick of ns, or -1 after the run.
func (s *system) tickOf(ns int64) int32 {
	k := ns / s.tickNs
	if k >= int64(s.nTicks) || ns < 0 {
		return -1
	}
	return int32(k)
}

// run plays the system to the end of its drain and returns its results.
func (s *system) run(stop func() bool) (systemResult, error) {
	limit := satAdd(s.end, drainLimit)
	var e event
	for steps := 1; ; steps++ {
		nextEnv := int64(math.MaxInt64)
		if s.envAt+1 < len(s.sched.at) {
			nextEnv = s.sched.at[s.envAt+1]
		}
		fa, arrival := s.nextArrival()
		now := min(nextEnv, arrival, s.q.next())
		if now == math.MaxInt64 || now > limit || (now >= s.end && s.live == 0) {
			break
		}
		if now >= s.boundary {
			s.sampleUpTo(int(min(now/s.tickNs, int64(s.nTicks))))
		}
		switch {
		case nextEnv == now:
			s.switchEnv(now)
		case arrival == now:
			s.fleets[fa].arrive(s, now)
		default:
			s.q.pop(&e)
			s.handle(&e)
		}
		if steps&0xffff == 0 && stop != nil && stop() {
			return systemResult{}, errStopped
		}
	}
	s.sampleUpTo(s.nTicks)
	s.finishUnfinished()
	return s.results(), nil
}

// nextArrival is the open-loop fleet whose next intent comes first, and
// when (math.MaxInt64 for none before the end of the arrivals).
func (s *system) nextArrival() (int, int64) {
	k, at := -1, int64(math.MaxInt64)
	for i := range s.fleets {
		if a := s.fleets[i].due(); a < at {
			k, at = i, a
		}
	}
	if at >= s.end {
		return -1, math.MaxInt64
	}
	return k, at
}

// switchEnv moves to the next env of the origin's conditions.
func (s *system) switchEnv(now int64) {
	s.envAt++
	s.env = &s.sched.envs[s.envAt]
	s.setConditions(now)
}

// setConditions puts the env in force at the origin's replicas.
func (s *system) setConditions(now int64) {
	o := &s.layers[len(s.layers)-1]
	share := s.env.capacity / float64(len(o.servers))
	for r, m := range o.servers {
		m.SetConditions(time.Duration(now), origin.Conditions{Capacity: share, Factor: s.env.factor[r]})
	}
}

// sampleUpTo records the end-of-tick samples of every tick before k.
func (s *system) sampleUpTo(k int) {
	if s.nextSample >= k {
		return
	}
	if s.progress != nil {
		s.progress(k - s.nextSample)
	}
	for ; s.nextSample < k; s.nextSample++ {
		t := s.nextSample
		end := s.vt(int64(t+1) * s.tickNs)
		for g := range s.groups {
			gr := &s.groups[g]
			gr.s.Queue[t] = s.layers[gr.to].queued()
			open := 0
			for i := gr.base; i < gr.base+gr.n; i++ {
				if s.policies[i].Breaker.State(end) == resil.StateOpen {
					open++
				}
			}
			gr.s.BreakerOpen[t] = float64(open) / float64(gr.n)
			s.samplePools(gr, t)
		}
		for l := range s.layers {
			if c := s.layers[l].cache; c != nil {
				c.sample(t)
			}
		}
	}
	s.boundary = int64(s.nextSample+1) * s.tickNs
}

// handle dispatches event e.
func (s *system) handle(e *event) {
	switch e.kind() {
	case sysRetry, sysSend:
		in := &s.ints[e.ref()]
		if in.gen != e.gen() || in.free {
			return
		}
		if e.kind() == sysRetry {
			s.resume(e.ref(), e.at)
		} else {
			s.start(e.ref(), e.at)
		}
	case sysTimeout:
		if s.atts[e.ref()].gen == e.gen() {
			s.timedOut(e.ref(), e.at)
		}
	case sysDeliver:
		if s.atts[e.ref()].gen == e.gen() {
			s.delivered(e.ref(), e.at, e.aux())
		}
	case sysPoolTimeout:
		if s.atts[e.ref()].gen == e.gen() {
			s.poolGaveUp(e.ref(), e.at)
		}
	case sysThink:
		s.fleets[e.gen()].think(s, e.ref(), e.at)
	case sysFlush:
		s.flush(&s.sc.Triggers[e.ref()], e.at)
	default:
		s.layerEvent(e)
	}
}

// runSystemResult is RunWith for a scenario of the system engine.
func runSystemResult(ctx context.Context, sc *scenario.Scenario, opts *Options) (*Result, error) {
	res := &Result{Scenario: sc.Name, Seed: sc.Seed, TickSeconds: sc.Tick.Seconds(), Fleets: make([]FleetResult, len(sc.Fleets))}
	res.Trigger = TriggerSpan(sc)
	if err := runSystem(ctx, sc, res, opts); err != nil {
		return nil, err
	}
	if err := res.Check(); err != nil {
		return nil, err
	}
	return res, nil
}
