package experiment

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/retrystorm/retrystorm/report"
	"github.com/retrystorm/retrystorm/resil/budget"
	"github.com/retrystorm/retrystorm/scenario"
	"github.com/retrystorm/retrystorm/sim"
)

const cacheTitle = "Cache: a flush, a stampede, and what recovers them"

// Cache is issue 39's sad loop: a look-aside cache whose loss sends its
// load to a database that cannot refill it. A flush at a high hit ratio
// collapses the database, and the collapse outlives the flush; the
// experiment tries each defence alone (serve-stale, coalescing, a
// jittered TTL, a retry budget, shedding at the database) and measures
// what each recovers and costs. Then the hot keys' stampede: a bulk
// preload whose keys expire together, with and without coalescing and a
// jittered TTL.
var Cache = register(&Experiment{
	Name:    "cache",
	Title:   cacheTitle,
	Summary: "a cache flush the database cannot refill, the hot keys' stampede, and which defence recovers each",
	Order:   95,
	Page: Page{
		Knobs: []string{"rate", "capacity", "max_retries", "cache_keys", "fill_timeout"},
		Heavy: true,
		Cost:  600,
		Fixed: "The experiment adds each defence to the scenario itself; the stampede runs a scenario of its own (cache_stampede.yaml).",
	},
	Run: runCache,
})

// CacheRun is one run of the cache experiment: the scenario with one
// defence, and what it measured.
type CacheRun struct {
	Name    string `json:"name"`
	Defence string `json:"defence"`
	// Recovered and RecoveryTicks are the fleet's (for the stampede,
	// whose expiry is no trigger, from the start of the run).
	Recovered          bool  `json:"recovered"`
	RecoveryTicks      *int  `json:"recovery_ticks"`
	Failures           int64 `json:"failures"`
	FailuresAfterClear int64 `json:"failures_after_clear"`
	IntentsLost        int64 `json:"intents_lost"`
	Attempts           int64 `json:"attempts"`
	// StaleHits are the answers served stale; Fills the cache's calls to
	// the database.
	StaleHits int64 `json:"stale_hits"`
	Fills     int64 `json:"fills"`
	// DatabasePeak is the most attempts that reached the database in a
	// tick; PeakMisses the most lookups that missed in one.
	DatabasePeak int64 `json:"database_peak"`
	PeakMisses   int64 `json:"peak_misses"`
	// HitRatioBefore is the cache's hit ratio (fresh and stale) in the
	// ticks before the trigger; HitRatioEnd and LateFailureShare are
	// over the last LateTicks ticks of the run.
	HitRatioBefore   float64 `json:"hit_ratio_before"`
	HitRatioEnd      float64 `json:"hit_ratio_end"`
	LateFailureShare float64 `json:"late_failure_share"`

	fleet sim.FleetResult
	cache *sim.CacheResult
}

// lateTicks is the stretch at the end of a run the late figures average.
const lateTicks = 10

// cacheJSON is the experiment's JSON.
type cacheJSON struct {
	Scenario string         `json:"scenario"`
	Stampede string         `json:"stampede_scenario"`
	Seed     uint64         `json:"seed"`
	Flush    []CacheRun     `json:"flush"`
	Herd     []CacheRun     `json:"stampede"`
	Claims   []report.Claim `json:"claims"`
}

// variant is one version of an experiment's scenario: its name, what it
// changes in words, and the change (nil: as written).
type variant struct {
	name, does string
	apply      func(sc *scenario.Scenario)
}

// onCache makes a variant's change to the scenario's first cache tier.
func onCache(f func(c *scenario.Tier)) func(sc *scenario.Scenario) {
	return func(sc *scenario.Scenario) { f(cacheOf(sc)) }
}

// The defences against the flush, in the table's order.
var flushDefences = []variant{
	{"naive", "as written", nil},
	{"serve stale, soft flush", "entries served up to 10m past their expiry while one refresh each runs, and a soft flush, which marks them expired",
		func(sc *scenario.Scenario) {
			cacheOf(sc).Cache.ServeStale = 10 * time.Minute
			for i := range sc.Triggers {
				if sc.Triggers[i].Kind == scenario.TriggerFlush {
					sc.Triggers[i].Mode = scenario.FlushSoft
				}
			}
		}},
	{"serve stale, hard flush", "entries served up to 10m past their expiry; the flush empties the cache",
		onCache(func(c *scenario.Tier) { c.Cache.ServeStale = 10 * time.Minute })},
	{"coalesce", "one fill per key at a time: the other misses wait for it",
		onCache(func(c *scenario.Tier) { c.Cache.Coalesce = true })},
	{"jittered TTL", "each entry's TTL spread by ±20%",
		onCache(func(c *scenario.Tier) { c.Cache.TTLJitter = 0.2 })},
	{"retry budget", "the fleet's retries paid from a token bucket of ratio 0.1 (floor 10)",
		func(sc *scenario.Scenario) { sc.Fleets[0].Budget = tokenBucket(0.1, 10) }},
	{"shed at the database", "the database refuses at once what it cannot answer before the fill's deadline, which the cache propagates", shedDatabase},
	{"coalesce and shed", "both", func(sc *scenario.Scenario) {
		cacheOf(sc).Cache.Coalesce = true
		shedDatabase(sc)
	}},
}

// shedDatabase makes the origin shed by deadline and the cache's fills
// propagate theirs.
func shedDatabase(sc *scenario.Scenario) {
	sc.Origin.Shed = scenario.Shed{Deadline: true}
	sc.Origin.DropExpired = false
	cacheOf(sc).Client.PropagateDeadline = true
}

// tokenBucket is a retry budget of ratio r and floor min, funded by
// successes, as the storm's guarded fleet's.
func tokenBucket(r, min float64) scenario.Budget {
	return scenario.Budget{Use: scenario.BudgetTokenBucket, TokenBucket: budget.TokenBucketSettings{Ratio: r, MinTokens: min, MaxTokens: 100,
		Funding: budget.FundedBySuccess, RetryCost: 1, TimeoutCost: 1}}
}

// The variants of the stampede.
var stampedeDefences = []variant{
	{"naive", "as written", nil},
	{"coalesce", "one fill per key at a time", onCache(func(c *scenario.Tier) { c.Cache.Coalesce = true })},
	{"jittered TTL", "each entry's TTL spread by ±50%", onCache(func(c *scenario.Tier) { c.Cache.TTLJitter = 0.5 })},
	{"coalesce, jittered TTL", "both", onCache(func(c *scenario.Tier) {
		c.Cache.Coalesce = true
		c.Cache.TTLJitter = 0.5
	})},
}

func runCache(ctx context.Context, opts Options) (*Outcome, error) {
	flush, err := scenarioFor("cache", opts)
	if err != nil {
		return nil, err
	}
	if err := cacheShape(flush, true); err != nil {
		return nil, err
	}
	herd, err := stampedeScenario(opts)
	if err != nil {
		return nil, err
	}
	fr, err := runVariants(ctx, opts, flush, flushDefences, cacheRun)
	if err != nil {
		return nil, err
	}
	hr, err := runVariants(ctx, opts, herd, stampedeDefences, cacheRun)
	if err != nil {
		return nil, err
	}
	claims := append(flushClaims(fr), stampedeClaims(herd, hr)...)
	sec := report.Section{
		ID:    "cache",
		Title: cacheTitle,
		Intro: []string{
			fmt.Sprintf("%s: %s over %d clients, a cache of %d keys in front of a %s database (capacity %g/s); %s.",
				flush.Name, describeRate(flush), flush.Traffic.Clients, cacheOf(flush).Cache.Keys, flush.Origin.Model, flush.Origin.Capacity, describeTriggers(flush)),
			"A flush sends every lookup to the database at once. Fills that wait longer than their timeout store nothing, so the cache cannot refill while the database's backlog is longer than a fill waits, and the misses keep the backlog long: the loss of the cache outlives the flush.",
			fmt.Sprintf("The stampede (%s): %d hot keys, all loaded at once, expire together every %s; the database slows as it fills.",
				herd.Name, cacheOf(herd).Cache.Keys, cacheOf(herd).Cache.TTL),
		},
		Tables: []report.Table{cacheTable("Flush: each defence alone", fr, true), cacheTable("Stampede: the hot keys expire together", hr, false)},
		Claims: claims,
		Charts: cacheCharts(fr, hr, flush.Tick.Seconds()),
		Notes: []string{
			"recovery counts ticks from the flush until the failure share stays within a point of its level before it; for the stampede, whose expiry is no trigger, from the start of the run.",
			"Coalescing in a Go service is golang.org/x/sync/singleflight; resil/freshness makes the TTL's jitter and the serve-stale decisions.",
		},
	}
	return &Outcome{
		Name: "cache", Claims: claims, Section: sec, Findings: cacheFindings(fr, hr),
		JSON: cacheJSON{Scenario: flush.Name, Stampede: herd.Name, Seed: flush.Seed, Flush: fr, Herd: hr, Claims: claims},
	}, nil
}

// stampedeScenario is the stampede's embedded scenario, with the seed
// override.
func stampedeScenario(opts Options) (*scenario.Scenario, error) {
	sc, err := scenarioFor("cache_stampede", Options{Seed: opts.Seed})
	if err != nil {
		return nil, err
	}
	return sc, cacheShape(sc, false)
}

// cacheShape checks that sc is a scenario the experiment can run: a
// cache, one fleet, and (for the flush) a flush.
func cacheShape(sc *scenario.Scenario, flush bool) error {
	switch {
	case cacheOf(sc) == nil:
		return fmt.Errorf("cache: scenario %s has no cache: the experiment needs a tier with cache: {...}", sc.Name)
	case len(sc.Fleets) != 1 || sc.Shared:
		return fmt.Errorf("cache: scenario %s has %d fleets: the experiment runs one, unshared", sc.Name, len(sc.Fleets))
	case flush && !slices.ContainsFunc(sc.Triggers, func(t scenario.Trigger) bool { return t.Kind == scenario.TriggerFlush }):
		return fmt.Errorf("cache: scenario %s has no flush trigger", sc.Name)
	}
	return nil
}

// cacheOf is sc's first cache tier, or nil.
func cacheOf(sc *scenario.Scenario) *scenario.Tier {
	if l := sc.CacheTier(); l >= 0 {
		return &sc.Tiers[l]
	}
	return nil
}

// cloneSystem copies sc deeply enough for a defence to change its
// triggers, fleets, tiers and caches.
func cloneSystem(sc *scenario.Scenario) *scenario.Scenario {
	c := sc.Clone()
	c.Tiers = slices.Clone(sc.Tiers)
	for i := range c.Tiers {
		if k := c.Tiers[i].Cache; k != nil {
			cc := *k
			c.Tiers[i].Cache = &cc
		}
	}
	return c
}

// runVariants runs base in each variant, side by side, and reads each
// run with read.
func runVariants[T any](ctx context.Context, opts Options, base *scenario.Scenario, vs []variant, read func(variant, *sim.Result) T) ([]T, error) {
	out := make([]T, len(vs))
	errs := make([]error, len(vs))
	var wg sync.WaitGroup
	for i, v := range vs {
		sc := cloneSystem(base)
		if v.apply != nil {
			v.apply(sc)
		}
		wg.Go(func() {
			res, err := opts.run(ctx, sc)
			if err != nil {
				errs[i] = fmt.Errorf("%s, %s: %w", base.Name, v.name, err)
				return
			}
			out[i] = read(v, res)
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}
