package scenario

import (
	"fmt"
	"slices"
)

// The triggers of issue 39, beside the origin's: a burst of extra
// intents, a cache's flush, a partition of one link of the chain, and a
// cut of the CPU of the origin or of one of its replicas.
const (
	// TriggerBurst adds Count intents, spread evenly over For, to the
	// rate (of one fleet's traffic, in a shared scenario): a spike.
	TriggerBurst = "burst"
	// TriggerFlush empties the cache Cache at At (Mode: FlushHard, or
	// FlushSoft, which marks every entry expired instead); for For after
	// it the cache stores nothing, as a cache node does while it
	// restarts. For may be 0s.
	TriggerFlush = "flush"
	// TriggerPartition cuts the link from From (a fleet, a tier or a
	// cache) to To (the layer it calls): what is sent over it vanishes,
	// both ways, and its callers time out.
	TriggerPartition = "partition"
	// TriggerCPU leaves the origin (or its replica Replica) Share of its
	// CPU: each request's service takes 1/Share times as long, so a
	// queue replica serves Share of its capacity.
	TriggerCPU = "cpu"
)

// newTriggerKinds are the kinds above, in the order the file's tables
// list them.
var newTriggerKinds = []string{TriggerBurst, TriggerFlush, TriggerPartition, TriggerCPU}

// maxBurst bounds a burst's intents.
const maxBurst = 1_000_000

// triggerFields are the trigger map's keys for the kinds above; the
// origin's kinds' keys are in schema.go.
func triggerFields(t *Trigger) []field {
	var (
		burst = []string{TriggerBurst}
		flush = []string{TriggerFlush}
		part  = []string{TriggerPartition}
	)
	return []field{
		{key: "count", kinds: burst, need: true, v: number{&t.Count}},
		{key: "cache", kinds: flush, v: omitZero{text{&t.Cache}}},
		{key: "mode", kinds: flush, v: word{p: &t.Mode, words: flushModes, unset: FlushHard}},
		{key: "from", kinds: part, need: true, v: text{&t.From}},
		{key: "to", kinds: part, need: true, v: text{&t.To}},
		{key: "share", kinds: []string{TriggerCPU}, need: true, v: number{&t.Share}},
		{key: "fleet", kinds: []string{TriggerLoad, TriggerBurst}, v: omitZero{text{&t.Fleet}}},
	}
}

// checkNew holds the rules of each new kind's own values.
func (t *Trigger) checkNew(c *checker, path string) {
	at := func(key string) string { return join(path, key) }
	switch t.Kind {
	case TriggerBurst:
		in(c, at("count"), t.Count, 1, maxBurst)
	case TriggerCPU:
		if !(t.Share > 0 && t.Share < 1) {
			c.fail(at("share"), "must be in (0, 1): the share of the CPU left, got %s", c.show(at("share"), t.Share))
		}
	}
}

// checkFor checks a trigger's span: above 0, but for a flush, whose For
// (how long the cache stores nothing) may be 0.
func (t *Trigger) checkFor(c *checker, path string) {
	if t.Kind == TriggerFlush {
		in(c, join(path, "for"), t.For, 0, maxRun)
		return
	}
	over(c, join(path, "for"), t.For, 0, maxRun)
}

// crossCheckTrigger holds the rules that tie a new trigger to the rest of
// the scenario: the cache a flush names, the link a partition names, the
// model a CPU cut slows, the fleet a load or a burst changes.
func (s *Scenario) crossCheckTrigger(c *checker, i int) {
	t := &s.Triggers[i]
	p := fmt.Sprintf("triggers[%d]", i)
	switch t.Kind {
	case TriggerFlush:
		caches := s.cacheNames()
		switch {
		case len(caches) == 0:
			c.fail(p+".kind", "a flush needs a cache: a tier with cache: {...}")
		case t.Cache == "" && len(caches) > 1:
			c.fail(p+".cache", "is required: the scenario has %d caches (%s)", len(caches), oneOf(caches))
		case t.Cache != "" && !slices.Contains(caches, t.Cache):
			c.fail(p+".cache", "%q is no cache of the scenario%s", t.Cache, didYouMean(t.Cache, caches))
		}
	case TriggerPartition:
		if key, why := s.link(t.From, t.To); why != "" {
			c.fail(p+"."+key, "%s", why)
		}
	case TriggerCPU:
		if s.Origin.Model == ModelCapacity {
			c.fail(p+".kind", "a cpu cut makes service slower, and the capacity model has no service to slow: use a capacity trigger")
		}
	}
	if t.Fleet != "" {
		switch {
		case !s.Shared:
			c.fail(p+".fleet", "names a fleet's traffic, which only a shared scenario gives each fleet (shared: true); without it the trigger changes every fleet's")
		case !slices.ContainsFunc(s.Fleets, func(f Fleet) bool { return f.Name == t.Fleet }):
			c.fail(p+".fleet", "%q is no fleet of the scenario%s", t.Fleet, didYouMean(t.Fleet, s.fleetNames()))
		}
	}
}

// link reports why from does not call to directly, and the key to blame,
// or "" when it does.
func (s *Scenario) link(from, to string) (key, why string) {
	layers := s.layerNames()
	l := slices.Index(layers, to)
	if l < 0 {
		return "to", fmt.Sprintf("%q is no layer of the scenario%s", to, didYouMean(to, layers))
	}
	if j := slices.Index(layers, from); j >= 0 {
		switch {
		case j == len(layers)-1:
			return "from", "the origin calls no layer"
		case j+1 != l:
			return "to", fmt.Sprintf("%s does not call %s: it calls %s", from, to, layers[j+1])
		}
		return "", ""
	}
	i := slices.IndexFunc(s.Fleets, func(f Fleet) bool { return f.Name == from })
	if i < 0 {
		return "from", fmt.Sprintf("%q is no fleet or layer of the scenario%s", from, didYouMean(from, append(s.fleetNames(), layers...)))
	}
	if e := s.Entry(i); e != l {
		return "to", fmt.Sprintf("fleet %s does not call %s: it calls %s", from, to, layers[e])
	}
	return "", ""
}

// newConditions applies tr, a burst or a CPU cut of every replica, to c,
// and returns the intents per second it adds to the rate (a burst's,
// added after the load triggers, which set the rate).
func newConditions(c *Conditions, tr Trigger) float64 {
	if tr.Kind == TriggerBurst {
		return tr.Count / tr.For.Seconds()
	}
	for i := range c.Factor {
		c.Factor[i] /= tr.Share
	}
	return 0
}
