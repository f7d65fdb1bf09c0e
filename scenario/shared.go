package scenario

import (
	"fmt"
	"slices"

	"go.yaml.in/yaml/v3"
)

// Systems (issue 39). Without `shared`, every fleet runs the whole
// scenario on its own copy of the origin and the tiers, as it always did:
// the fleets differ by their policy alone. With `shared: true` the fleets
// are client populations of one system, in one run: each with its own
// traffic (or the scenario's), entering the chain at the layer it calls,
// all of them loading the same caches, tiers and origin. What one fleet's
// retries do to the others is then part of the result.
//
// Shared fleets, caches, pools, closed-loop clients, flushes and
// partitions run in the simulator's system engine (sim/system.go); the
// other scenarios in its one-hop and chain engine, unchanged.

// OriginLayer is the name the origin goes by as a layer: in a fleet's
// calls, a partition's to, and the results.
const OriginLayer = "origin"

// System reports whether sc uses what only the system engine simulates:
// shared fleets, a cache, a pool, closed-loop clients, a flush or a
// partition.
func (s *Scenario) System() bool {
	if s.Shared || s.Traffic.Closed() {
		return true
	}
	for i := range s.Fleets {
		f := &s.Fleets[i]
		if f.Pool.On() || f.Callee != "" || f.Traffic != nil {
			return true
		}
	}
	for i := range s.Tiers {
		if s.Tiers[i].Cache != nil || s.Tiers[i].Client.Pool.On() {
			return true
		}
	}
	return slices.ContainsFunc(s.Triggers, func(t Trigger) bool {
		return t.Kind == TriggerFlush || t.Kind == TriggerPartition
	})
}

// TrafficOf returns fleet i's traffic: its own in a shared scenario, the
// scenario's otherwise.
func (s *Scenario) TrafficOf(i int) *Traffic {
	if t := s.Fleets[i].Traffic; t != nil {
		return t
	}
	return &s.Traffic
}

// Entry returns the layer fleet i calls: the index of a tier (or cache),
// or len(Tiers) for the origin.
func (s *Scenario) Entry(i int) int {
	switch c := s.Fleets[i].Callee; c {
	case "":
		return 0
	case OriginLayer:
		return len(s.Tiers)
	default:
		if l := slices.IndexFunc(s.Tiers, func(t Tier) bool { return t.Name == c }); l >= 0 {
			return l
		}
	}
	return 0
}

// layerNames names the layers, outermost first: the tiers (and caches),
// then the origin.
func (s *Scenario) layerNames() []string {
	out := make([]string, 0, len(s.Tiers)+1)
	for _, t := range s.Tiers {
		out = append(out, t.Name)
	}
	return append(out, OriginLayer)
}

func (s *Scenario) cacheNames() []string {
	var out []string
	for _, t := range s.Tiers {
		if t.Cache != nil {
			out = append(out, t.Name)
		}
	}
	return out
}

func (s *Scenario) fleetNames() []string {
	out := make([]string, len(s.Fleets))
	for i, f := range s.Fleets {
		out[i] = f.Name
	}
	return out
}

// checkSystem holds the rules of systems across sections: what needs a
// shared scenario, the layers fleets call, and what the system engine
// does not simulate yet.
func (s *Scenario) checkSystem(c *checker) {
	layers := s.layerNames()
	for i := range s.Fleets {
		f := &s.Fleets[i]
		p := fmt.Sprintf("fleets[%d]", i)
		switch {
		case f.Traffic != nil && !s.Shared:
			c.fail(p+".traffic", "a fleet's own traffic needs shared: true: without it every fleet runs the scenario's traffic on its own copy, and differs by its policy alone")
		case f.Callee != "" && !slices.Contains(layers, f.Callee):
			c.fail(p+".calls", "%q is no layer of the scenario%s", f.Callee, didYouMean(f.Callee, layers))
		}
	}
	for i := range s.Fleets {
		if t := s.Fleets[i].Traffic; t != nil && t.Rate == 0 && t.Series == nil && !t.Closed() && !s.triggered(s.Fleets[i].Name) {
			c.fail(fmt.Sprintf("fleets[%d].traffic.rate", i), "is 0: a fleet whose own rate is 0 needs a burst or load trigger that names it")
		}
	}
	if s.Shared && s.Traffic == (Traffic{}) {
		if i := slices.IndexFunc(s.Fleets, func(f Fleet) bool { return f.Traffic == nil }); i >= 0 {
			c.fail(fmt.Sprintf("fleets[%d].traffic", i), "is required: the scenario gives no traffic for the fleets that have none")
		}
	}
	for i := range s.Triggers {
		s.crossCheckTrigger(c, i)
	}
	if c.ok() && s.System() {
		s.checkEngine(c)
	}
}

// checkEngine refuses what the system engine does not simulate yet.
func (s *Scenario) checkEngine(c *checker) {
	why := "is not simulated together with shared fleets, caches, pools, closed-loop clients, flushes or partitions yet"
	for i, f := range s.Fleets {
		p := fmt.Sprintf("fleets[%d]", i)
		switch {
		case f.Hedge.Delay > 0:
			c.fail(p+".hedge", "hedging %s", why)
		case f.OutlierDetection.Detects():
			c.fail(p+".outlier_detection", "outlier detection %s", why)
		case !f.Calls.Plain():
			c.fail(p+".product", "a product's give-up answers, gRPC calls and inbound proxies (protocol, product, inbound) %s", why)
		}
	}
	for i, t := range s.Tiers {
		p := fmt.Sprintf("tiers[%d].client", i)
		switch {
		case t.Client.Hedge.Delay > 0:
			c.fail(p+".hedge", "hedging %s", why)
		case t.Client.OutlierDetection.Detects():
			c.fail(p+".outlier_detection", "outlier detection %s", why)
		case !t.Client.Calls.Plain():
			c.fail(p+".product", "a product's give-up answers, gRPC calls and inbound proxies (protocol, product, inbound) %s", why)
		}
	}
	if len(s.Origin.Faults) > 0 {
		c.fail("origin.replicas.faults", "replica faults %s: use triggers that name a replica", why)
	}
}

// trafficValue is the scenario's traffic: required, but for a shared
// scenario whose fleets each have their own, where it may be left out.
type trafficValue struct{ s *Scenario }

func (v trafficValue) object() *object                               { return trafficObject(&v.s.Traffic) }
func (v trafficValue) absentObject() *object                         { return v.object() }
func (v trafficValue) read(d *decoder, n *yaml.Node, p string) error { return v.object().read(d, n, p) }
func (v trafficValue) absent() bool                                  { return v.s.Shared && v.s.Traffic == (Traffic{}) }
func (v trafficValue) zero() bool                                    { return v.absent() || v.object().zero() }

func (v trafficValue) write() *yaml.Node {
	if v.absent() {
		return nil
	}
	return v.object().write()
}

func (v trafficValue) validate(c *checker, path string) {
	if !v.absent() {
		v.object().validate(c, path)
	}
}

// fleetTraffic is a fleet's own traffic: absent (nil) takes the
// scenario's.
type fleetTraffic struct{ p **Traffic }

func (v fleetTraffic) read(d *decoder, n *yaml.Node, path string) error {
	t := new(Traffic)
	if err := trafficObject(t).read(d, n, path); err != nil {
		return err
	}
	*v.p = t
	return nil
}

func (v fleetTraffic) write() *yaml.Node {
	if *v.p == nil {
		return nil
	}
	return trafficObject(*v.p).write()
}

func (v fleetTraffic) zero() bool { return *v.p == nil }

func (v fleetTraffic) validate(c *checker, path string) {
	if *v.p != nil {
		o := trafficObject(*v.p)
		o.check = func(c *checker, path string) { (*v.p).checkRate(c, path, true) }
		o.validate(c, path)
	}
}

// tierServer is a tier's server: required, but for a cache, which has
// none.
type tierServer struct{ t *Tier }

func (v tierServer) object() *object                               { return originObject(&v.t.Server) }
func (v tierServer) read(d *decoder, n *yaml.Node, p string) error { return v.object().read(d, n, p) }
func (v tierServer) zero() bool                                    { return v.t.Cache != nil }

func (v tierServer) write() *yaml.Node {
	if v.t.Cache != nil {
		return nil
	}
	return v.object().write()
}

func (v tierServer) validate(c *checker, path string) {
	if v.t.Cache == nil {
		v.object().validate(c, path)
	}
}

// given is an optional map that a file may not give as absent: a pool of
// size 0 or a ramp of no time is a mistake, not a way to write none (leave
// the key out). A scenario built in code may leave it zero: none.
type given struct {
	unlessUnset
	key, msg string // the key a given map must set, and what to say
}

func (v given) read(d *decoder, n *yaml.Node, path string) error {
	if err := v.unlessUnset.read(d, n, path); err != nil {
		return err
	}
	if !v.set() {
		return d.errorAt(join(path, v.key), "%s", v.msg)
	}
	return nil
}

// CacheTier is the index of the first tier that is a cache, or -1.
func (s *Scenario) CacheTier() int {
	return slices.IndexFunc(s.Tiers, func(t Tier) bool { return t.Cache != nil })
}

// PoolTier is the index of the first tier whose calls go through a pool,
// or -1.
func (s *Scenario) PoolTier() int {
	return slices.IndexFunc(s.Tiers, func(t Tier) bool { return t.Client.Pool.On() })
}

// triggered reports whether a burst or a load trigger names fleet name.
func (s *Scenario) triggered(name string) bool {
	return slices.ContainsFunc(s.Triggers, func(t Trigger) bool {
		return (t.Kind == TriggerBurst || t.Kind == TriggerLoad) && t.Fleet == name
	})
}
