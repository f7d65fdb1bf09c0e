package lab

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"time"

	"github.com/retrystorm/retrystorm/grid"
	"github.com/retrystorm/retrystorm/scenario"
)

// A run split over load processes (lab --target --shard i/n): every shard
// plays the whole schedule of intents, derived from the seed, and sends
// those of the clients it owns (client c when c mod n is i-1), through a
// gateway and a fault proxy of its own; the proxies share the scenario's
// origin, each with 1/n of its capacity, workers and queue, so that
// together they impose (or, in a dip, allow) what one would. The shards
// keep one wall-clock schedule: the first fleet starts at the next
// multiple of ShardAlign of Unix time at least ShardLead away, each next
// one FleetGap after the last ends. `merge` puts their JSON together
// (experiment.MergeLab), and refuses shards of different runs.
const (
	ShardAlign = 15 * time.Second
	ShardLead  = 5 * time.Second
)

// ShardStart is when the shards of a run started at now begin: the next
// multiple of ShardAlign at least ShardLead away. Shards started within
// ShardAlign - ShardLead of each other on clocks in step agree.
func ShardStart(now time.Time) time.Time {
	return now.Add(ShardLead + ShardAlign - 1).Truncate(ShardAlign)
}

// shardOf is the scenario shard s of n plays in the lab: sc with
// the origin's capacity, workers and queue limit, and every capacity
// trigger's capacity, divided among the shards.
func shardOf(sc *scenario.Scenario, s grid.Shard) *scenario.Scenario {
	if s.Count <= 1 {
		return sc
	}
	c := *sc
	n := float64(s.Count)
	c.Origin.Capacity /= n
	if c.Origin.Workers > 0 {
		c.Origin.Workers = max(1, int(math.Ceil(float64(c.Origin.Workers)/n)))
	}
	if c.Origin.QueueLimit > 0 {
		c.Origin.QueueLimit = max(1, int(math.Ceil(float64(c.Origin.QueueLimit)/n)))
	}
	c.Triggers = append([]scenario.Trigger(nil), sc.Triggers...)
	for i := range c.Triggers {
		if c.Triggers[i].Kind == scenario.TriggerCapacity {
			c.Triggers[i].Capacity /= n
		}
	}
	return &c
}

// runID names a sharded run: the scenario, the tick, the target, the
// shard count and the start; the shards of one run share it.
func runID(sc *scenario.Scenario, tick time.Duration, target string, n int, start time.Time) string {
	h := sha256.New()
	h.Write(scenario.Marshal(sc))
	fmt.Fprintf(h, "\x00%d\x00%s\x00%d\x00%d", tick, target, n, start.Unix())
	return hex.EncodeToString(h.Sum(nil)[:12])
}
