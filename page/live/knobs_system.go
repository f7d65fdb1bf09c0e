package live

import (
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/retrystorm/retrystorm/scenario"
)

// The knobs of issue 39's panels, on a scenario's first cache tier and its
// pools. They copy the tiers they change: the default scenario's are
// shared by every request.
func init() { catalogue = append(catalogue, systemKnobs...) }

var systemKnobs = []knob{
	{
		key: "cache_keys", label: "keys in the cache", kind: "range", unit: "keys",
		hint:    "how many distinct keys the intents ask for (Zipf): more keys, more distinct fills after a flush",
		rng:     func(*scenario.Scenario) (float64, float64, float64) { return 100, 100_000, 100 },
		applies: func(def *scenario.Scenario) bool { return def.CacheTier() >= 0 },
		get: func(sc *scenario.Scenario, _ *scenario.Fleet) string {
			return strconv.Itoa(sc.Tiers[sc.CacheTier()].Cache.Keys)
		},
		set: func(sc *scenario.Scenario, _ *scenario.Fleet, v string) error {
			c := ownCache(sc)
			if err := setInt(&c.Keys, v); err != nil {
				return err
			}
			c.Capacity = min(c.Capacity, c.Keys)
			return nil
		},
	},
	{
		key: "fill_timeout", label: "fill timeout", kind: "range", unit: "ms",
		hint:    "how long a cache's fill waits for the database before it gives up and stores nothing",
		rng:     func(*scenario.Scenario) (float64, float64, float64) { return 50, 3000, 50 },
		applies: func(def *scenario.Scenario) bool { return def.CacheTier() >= 0 },
		get: func(sc *scenario.Scenario, _ *scenario.Fleet) string {
			return num(float64(sc.Tiers[sc.CacheTier()].Client.Timeout) / float64(time.Millisecond))
		},
		set: func(sc *scenario.Scenario, _ *scenario.Fleet, v string) error {
			ms, err := parseFloat(v)
			if err != nil {
				return err
			}
			ownCache(sc)
			sc.Tiers[sc.CacheTier()].Client.Timeout = time.Duration(math.Round(ms)) * time.Millisecond
			return nil
		},
	},
	{
		key: "pool_size", label: "connections per pool", kind: "range", unit: "",
		hint:    "each caller's connection pool to the database: fewer fill up sooner when it slows",
		rng:     func(*scenario.Scenario) (float64, float64, float64) { return 1, 100, 1 },
		applies: func(def *scenario.Scenario) bool { return def.PoolTier() >= 0 },
		get: func(sc *scenario.Scenario, _ *scenario.Fleet) string {
			return strconv.Itoa(sc.Tiers[sc.PoolTier()].Client.Pool.Size)
		},
		set: func(sc *scenario.Scenario, _ *scenario.Fleet, v string) error {
			sc.Tiers = slices.Clone(sc.Tiers)
			return setInt(&sc.Tiers[sc.PoolTier()].Client.Pool.Size, v)
		},
	},
}

// ownCache gives sc tiers and a first cache of its own, and returns the
// cache.
func ownCache(sc *scenario.Scenario) *scenario.Cache {
	sc.Tiers = slices.Clone(sc.Tiers)
	t := &sc.Tiers[sc.CacheTier()]
	c := *t.Cache
	t.Cache = &c
	return t.Cache
}
