package lab

import (
	"fmt"

	"github.com/retrystorm/retrystorm/scenario"
)

// refuseSystem reports the first key of sc, by its path, that the lab
// cannot play yet (issue 39's system: shared fleets, caches, pools, closed
// loops, ramps, bursts, flushes and partitions), rather than measure a
// scenario as something it does not say. The CPU cut and the origin's
// load-dependent latency it plays: they are the origin model's
// conditions. docs/lab.md ("What the lab cannot run yet") says what each
// would need; a cache flush against nginx's proxy_cache is measured
// beside the simulator in cache_real_test.go.
func refuseSystem(sc *scenario.Scenario) error {
	key := ""
	switch {
	case sc.Shared:
		key = "shared"
	case sc.Traffic.Closed():
		key = "traffic.arrivals: closed"
	case sc.Traffic.Ramp.For > 0:
		key = "traffic.ramp"
	}
	for i := range sc.Fleets {
		f := &sc.Fleets[i]
		switch {
		case key != "":
		case f.Traffic != nil:
			key = fmt.Sprintf("fleets[%d].traffic", i)
		case f.Callee != "":
			key = fmt.Sprintf("fleets[%d].calls", i)
		case f.Pool.On():
			key = fmt.Sprintf("fleets[%d].pool", i)
		}
	}
	for i := range sc.Tiers {
		t := &sc.Tiers[i]
		switch {
		case key != "":
		case t.Cache != nil:
			key = fmt.Sprintf("tiers[%d].cache", i)
		case t.Client.Pool.On():
			key = fmt.Sprintf("tiers[%d].client.pool", i)
		}
	}
	for i, t := range sc.Triggers {
		if key == "" && (t.Kind == scenario.TriggerBurst || t.Kind == scenario.TriggerFlush || t.Kind == scenario.TriggerPartition) {
			key = fmt.Sprintf("triggers[%d]: %s", i, t.Kind)
		}
	}
	if key == "" {
		return nil
	}
	return fmt.Errorf("lab: %s: the lab cannot play it yet (docs/lab.md, What the lab cannot run yet): run it in the simulator", key)
}
