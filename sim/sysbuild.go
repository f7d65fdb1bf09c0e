package sim

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/retrystorm/retrystorm/origin"
	"github.com/retrystorm/retrystorm/resil"
	"github.com/retrystorm/retrystorm/scenario"
)

// newSystem builds a system of sc's layers for the fleets given (their
// indices in sc.Fleets): every fleet of a shared scenario, or one.
func newSystem(sc *scenario.Scenario, fleets []int, opts *Options) (*system, error) {
	if sc.Tick <= 0 {
		return nil, fmt.Errorf("sim: tick must be positive")
	}
	s := &system{
		sc: sc, seed: sc.Seed, shared: sc.Shared, tickNs: int64(sc.Tick),
		nTicks: int((sc.Duration + sc.Tick - 1) / sc.Tick), end: int64(sc.Duration),
		boundary: int64(sc.Tick), lastT: time.Unix(0, 0),
	}
	if _, end, ok := triggerWindow(sc); ok {
		s.clearAt, s.hasClear = int64(end), true
	}
	s.sched = buildSchedule(sc, hosts(sc, len(sc.Tiers)))
	s.env = &s.sched.envs[0]
	s.layers = make([]layer, len(sc.Tiers)+1)
	s.groups = make([]group, len(fleets), len(fleets)+len(sc.Tiers))
	for slot, i := range fleets {
		if err := s.addFleet(slot, i, opts); err != nil {
			return nil, err
		}
	}
	for l := range sc.Tiers {
		if err := s.addTier(l); err != nil {
			return nil, err
		}
	}
	if err := s.addOrigin(); err != nil {
		return nil, err
	}
	s.setConditions(0)
	s.addTriggers()
	for k := range s.fleets {
		if s.fleets[k].closed {
			s.fleets[k].startClosed(s)
		}
	}
	return s, nil
}

// hosts is how many replicas layer l of sc has (a cache has one).
func hosts(sc *scenario.Scenario, l int) int {
	if l < len(sc.Tiers) {
		return max(sc.Tiers[l].Server.Replicas, 1)
	}
	return max(sc.Origin.Replicas, 1)
}

// newGroup is a group calling layer to with the policy of f.
func (s *system) newGroup(f *scenario.Fleet, fleet, from, to int, propagate bool) group {
	g := group{
		name: f.Name, fleet: fleet, from: from, to: to, base: int32(len(s.policies)),
		timeout: int64(f.Timeout), deadline: int64(f.Deadline), idemOnly: f.Retry.IdempotentOnly,
		propagate: propagate, pool: f.Pool,
		ticks: make([]tickCounts, s.nTicks), s: newSeries(s.nTicks),
	}
	g.retryOn[resil.OutcomeFailure] = f.Retry.Retries(scenario.RetryOnError)
	g.retryOn[resil.OutcomeThrottled] = f.Retry.Retries(scenario.RetryOnRejection)
	g.retryOn[resil.OutcomeTimeout] = f.Retry.Retries(scenario.RetryOnTimeout)
	g.retryOn[outcomeRefused] = f.Retry.Retries(scenario.RetryOnRefused)
	if f.Pool.On() {
		g.pools.waitingAt, g.pools.inUseAt = make([]int64, s.nTicks), make([]int64, s.nTicks)
	}
	return g
}

// addPolicy appends one caller's policy, and its pool if its group has
// one.
func (s *system) addPolicy(g *group, p resil.Policy) {
	s.policies = append(s.policies, p)
	if g.pool.On() {
		for len(s.pools) < len(s.policies)-1 {
			s.pools = append(s.pools, pool{})
		}
		s.pools = append(s.pools, pool{size: int32(g.pool.Size), limit: int32(g.pool.QueueLimit), wait: int64(g.pool.WaitTimeout)})
	}
	g.n++
}

// addFleet makes fleet i of the scenario the run's fleet slot: its group,
// its clients' policies (as fleet.go makes them, from the same streams)
// and its arrivals.
func (s *system) addFleet(slot, i int, opts *Options) error {
	sc := s.sc
	f := &sc.Fleets[i]
	to := sc.Entry(i)
	g := &s.groups[slot]
	*g = s.newGroup(f, i, -1, to, false)
	g.lat = new(histogram)
	g.jitter = rand.NewPCG(sc.Seed, 0x1000+uint64(i))
	for c := range max(sc.TrafficOf(i).Clients, 1) {
		var src rand.Source
		if f.Throttle.Use == scenario.ThrottleAdaptive {
			src = rand.NewPCG(sc.Seed, throttleStream|uint64(i)<<24|uint64(c))
		}
		p, err := f.NewPolicyRand(src)
		if err != nil {
			return err
		}
		if opts.WrapBudget != nil {
			p.Budget = opts.WrapBudget(i, c, p.Budget)
		}
		s.addPolicy(g, p)
	}
	pick, err := newReplicaPick(s, &f.Balancer, hosts(sc, to), uint64(i))
	if err != nil {
		return err
	}
	g.picker = pick
	s.fleets = append(s.fleets, newArrivals(s, slot, i))
	return nil
}

// addTier builds layer l, a tier's servers or a cache, and the group of
// its calls to the next layer: a policy per replica, or the cache's one.
func (s *system) addTier(l int) error {
	sc := s.sc
	t := &sc.Tiers[l]
	f := t.Client.Fleet(t.Name)
	s.groups = append(s.groups, s.newGroup(&f, -1, l, l+1, t.Client.PropagateDeadline))
	gi := len(s.groups) - 1
	g := &s.groups[gi]
	g.jitter = rand.NewPCG(sc.Seed, 0x2000+uint64(l))
	ly := &s.layers[l]
	*ly = layer{name: t.Name, calls: gi}
	n := 1
	if t.Cache != nil {
		ly.cache = newCache(s, l, t.Cache)
	} else {
		n = hosts(sc, l)
		ly.errRate, ly.broken = t.Server.ErrorRate, t.Server.Broken
		d := &layerDriver{s: s, l: l}
		for r := range n {
			m, err := origin.NewWith(&t.Server, r, n, d, origin.Options{Rand: serviceRand(s.seed, &t.Server, l+1, r)})
			if err != nil {
				return err
			}
			ly.servers = append(ly.servers, m)
		}
	}
	for range n {
		p, err := t.NewPolicy()
		if err != nil {
			return err
		}
		s.addPolicy(g, p)
	}
	pick, err := newReplicaPick(s, &t.Client.Balancer, hosts(sc, l+1), uint64(l+1)<<24)
	if err != nil {
		return fmt.Errorf("tier %q: %w", t.Name, err)
	}
	g.picker = pick
	return nil
}

// addOrigin builds the last layer: the origin's replicas.
func (s *system) addOrigin() error {
	o := &s.sc.Origin
	n := hosts(s.sc, len(s.sc.Tiers))
	ly := &s.layers[len(s.layers)-1]
	*ly = layer{name: scenario.OriginLayer, origin: true, calls: -1}
	d := &layerDriver{s: s, l: len(s.layers) - 1}
	for r := range n {
		m, err := origin.NewWith(o, r, n, d, origin.Options{Rand: serviceRand(s.seed, o, 0, r)})
		if err != nil {
			return err
		}
		ly.servers = append(ly.servers, m)
	}
	return nil
}

// addTriggers schedules the flushes and lays the partitions of the run's
// links (a partition of another run's fleet is not this run's).
func (s *system) addTriggers() {
	for i, t := range s.sc.Triggers {
		switch t.Kind {
		case scenario.TriggerFlush:
			s.q.push(mkEvent(int64(t.At), int32(i), 0, sysFlush, 0), laneHeap)
		case scenario.TriggerPartition:
			for g := range s.groups {
				gr := &s.groups[g]
				caller := gr.from >= 0 && s.layers[gr.from].name == t.From
				if gr.fleet >= 0 && s.sc.Fleets[gr.fleet].Name == t.From {
					caller = true
				}
				if caller {
					s.cuts = append(s.cuts, cut{group: g, at: int64(t.At), end: int64(t.End())})
				}
			}
		}
	}
}
