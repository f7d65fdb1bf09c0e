package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/retrystorm/retrystorm/scenario"
)

// runYAML parses and runs a scenario, failing the test on any error.
func runYAML(t *testing.T, y string) (*scenario.Scenario, *Result) {
	t.Helper()
	sc, err := scenario.Parse("test.yaml", []byte(y))
	if err != nil {
		t.Fatal(err)
	}
	r, err := Run(context.Background(), sc)
	if err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, sc, r)
	return sc, r
}

// TestSystemEngineAgrees runs every scenario of the tests' data that both
// engines simulate through the system engine too (each fleet calling its
// first layer by name, which only the system engine reads), and wants the
// very same numbers: every fleet's summary and series, and every layer's
// summary. The system engine drives the same policies, models, draws and
// streams, in the same order.
func TestSystemEngineAgrees(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.yaml")
	more, _ := filepath.Glob("../scenario/testdata/*.yaml")
	files = append(files, more...)
	compared := 0
	for _, file := range files {
		sc, err := scenario.Load(file)
		if err != nil {
			t.Fatal(err)
		}
		if !bothEngines(sc) {
			continue
		}
		t.Run(filepath.Base(file), func(t *testing.T) {
			want, err := Run(context.Background(), sc)
			if err != nil {
				t.Fatal(err)
			}
			sys := *sc
			sys.Fleets = append([]scenario.Fleet(nil), sc.Fleets...)
			first := scenario.OriginLayer
			if len(sc.Tiers) > 0 {
				first = sc.Tiers[0].Name
			}
			for i := range sys.Fleets {
				sys.Fleets[i].Callee = first
			}
			if !sys.System() {
				t.Fatal("calls did not send the scenario to the system engine")
			}
			got, err := Run(context.Background(), &sys)
			if err != nil {
				t.Fatal(err)
			}
			for i, w := range want.Fleets {
				g := got.Fleets[i]
				if !reflect.DeepEqual(w.Summary, g.Summary) || !reflect.DeepEqual(w.Series, g.Series) {
					t.Errorf("%s: the engines disagree:\none-hop %+v\nsystem  %+v", w.Name, w.Summary, g.Summary)
				}
				for l := range w.Tiers {
					if !reflect.DeepEqual(w.Tiers[l].Summary, g.Tiers[l].Summary) {
						t.Errorf("%s, layer %s: the engines disagree:\nchain  %+v\nsystem %+v", w.Name, w.Tiers[l].Name, w.Tiers[l].Summary, g.Tiers[l].Summary)
					}
				}
			}
		})
		compared++
	}
	if compared < 4 {
		t.Fatalf("only %d scenarios compared", compared)
	}
}

// bothEngines reports whether sc uses only what both engines simulate.
func bothEngines(sc *scenario.Scenario) bool {
	if sc.System() || len(sc.Origin.Faults) > 0 || sc.Traffic.Series != nil {
		return false
	}
	for _, f := range sc.Fleets {
		if f.Hedge.Delay > 0 || f.OutlierDetection.Detects() || !f.Calls.Plain() {
			return false
		}
	}
	for _, t := range sc.Tiers {
		if t.Client.Hedge.Delay > 0 || t.Client.OutlierDetection.Detects() || !t.Client.Calls.Plain() {
			return false
		}
	}
	return true
}

// cacheFlush is a cache at a 90%+ hit ratio in front of a database sized
// for the misses, flushed at 10s.
const cacheFlush = `
name: flush
seed: 3
duration: 40s
tick: 1s
traffic: {rate: 400, arrivals: poisson, clients: 20}
origin: {model: queue, capacity: 80, workers: 8}
tiers:
  - name: cache
    cache: {keys: 2000, ttl: 5m}
    client: {timeout: 500ms, budget: {use: none}}
triggers:
  - {kind: flush, at: 10s}
fleets:
  - name: users
    timeout: 1s
    retry: {max_retries: 2}
    budget: {use: none}
`

func TestSystemDeterministic(t *testing.T) {
	for _, y := range []string{cacheFlush, sharedFleets} {
		var out [2][]byte
		for i := range out {
			_, r := runYAML(t, y)
			b, err := json.Marshal(r)
			if err != nil {
				t.Fatal(err)
			}
			out[i] = b
		}
		if !bytes.Equal(out[0], out[1]) {
			t.Error("the same scenario and seed gave two results")
		}
	}
}

// cacheRun runs cacheFlush changed by the replacements (old, new, ...)
// and returns its one fleet and its cache's layer.
func cacheRun(t *testing.T, repl ...string) (FleetResult, TierResult) {
	t.Helper()
	_, r := runYAML(t, strings.NewReplacer(repl...).Replace(cacheFlush))
	f := r.Fleets[0]
	return f, f.Tiers[0]
}

// TestCacheFlush: the flush sends every lookup to the database, which
// cannot serve them in the fills' timeout: the cache does not refill and
// the collapse outlives the flush. Coalescing with deadline shedding at
// the database refills it, hottest keys first, and it recovers.
func TestCacheFlush(t *testing.T) {
	f, c := cacheRun(t)
	if f.Summary.Recovered {
		t.Errorf("the flushed cache recovered: %+v", f.Summary)
	}
	before := c.Cache.Series.Hits[5] * 100 / (c.Cache.Series.Hits[5] + c.Cache.Series.Misses[5])
	after := c.Cache.Series.Hits[35] * 100 / max(c.Cache.Series.Hits[35]+c.Cache.Series.Misses[35], 1)
	if before < 90 || after > before/2 {
		t.Errorf("hit ratio %d%% before the flush and %d%% long after it: want over 90%%, then under half", before, after)
	}
	if c.Cache.Flushed == 0 || c.Cache.FillFailures == 0 {
		t.Errorf("flushed %d, fill failures %d", c.Cache.Flushed, c.Cache.FillFailures)
	}
	f, c = cacheRun(t, "ttl: 5m}", "ttl: 5m, coalesce: true}",
		"workers: 8}", "workers: 8, shed: {deadline: true}}",
		"budget: {use: none}}", "budget: {use: none}, propagate_deadline: true}")
	if !f.Summary.Recovered {
		t.Errorf("coalescing and shedding did not recover the flush: %+v", f.Summary)
	}
	if c.Cache.Coalesced == 0 {
		t.Error("no miss was coalesced")
	}
}

// TestCacheBehaviour pins each of the cache's settings on a small run.
func TestCacheBehaviour(t *testing.T) {
	// A warm cache holding every key, which never expire: every lookup
	// hits, and nothing reaches the database.
	_, c := cacheRun(t, "ttl: 5m}", "ttl: 0s}", "\ntriggers:\n  - {kind: flush, at: 10s}", "")
	if k := c.Cache; k.Misses != 0 || k.Fills != 0 || k.HitRatio != 1 {
		t.Errorf("a full warm cache: %d misses, %d fills, hit ratio %v", k.Misses, k.Fills, k.HitRatio)
	}
	// A soft flush with serve_stale: the entries are served stale while
	// they refresh, one refresh per key: nothing fails.
	f, c := cacheRun(t, "ttl: 5m}", "ttl: 5m, serve_stale: 1h}", "at: 10s}", "at: 10s, mode: soft}")
	if k := c.Cache; k.StaleHits == 0 || k.Refreshes == 0 || f.Summary.Failures != 0 {
		t.Errorf("a soft flush served stale: %d stale hits, %d refreshes, %d failures", k.StaleHits, k.Refreshes, f.Summary.Failures)
	}
	// The same with a hard flush: nothing is left to serve stale.
	_, c = cacheRun(t, "ttl: 5m}", "ttl: 5m, serve_stale: 1h}")
	if n := sumOf(c.Cache.Series.StaleHits[10:]); n != 0 {
		t.Errorf("a hard flush left %d stale hits", n)
	}
	// A loaded cache without jitter: every entry expires at 10s, together.
	_, c = cacheRun(t, "ttl: 5m}", "ttl: 10s, start: loaded, coalesce: true}", "\ntriggers:\n  - {kind: flush, at: 10s}", "")
	if m := c.Cache.Series.Misses; m[9] != 0 || m[10] == 0 {
		t.Errorf("misses before and at the TTL: %d, %d", m[9], m[10])
	}
	// With a jittered TTL they do not.
	_, j := cacheRun(t, "ttl: 5m}", "ttl: 10s, ttl_jitter: 0.5, start: loaded, coalesce: true}", "\ntriggers:\n  - {kind: flush, at: 10s}", "")
	if j.Cache.Series.Misses[5] == 0 || j.Cache.Series.Misses[10] >= c.Cache.Series.Misses[10] {
		t.Errorf("jitter: misses at 5s %d (want some), at 10s %d (want fewer than without, %d)", j.Cache.Series.Misses[5], j.Cache.Series.Misses[10], c.Cache.Series.Misses[10])
	}
	// A cache of a tenth of the keys: LRU keeps the popular keys better
	// than FIFO under Zipf.
	big := "capacity: 1000, workers: 50}"
	_, lru := cacheRun(t, "ttl: 5m}", "ttl: 0s, capacity: 200}", "\ntriggers:\n  - {kind: flush, at: 10s}", "", "capacity: 80, workers: 8}", big)
	_, fifo := cacheRun(t, "ttl: 5m}", "ttl: 0s, capacity: 200, eviction: fifo}", "\ntriggers:\n  - {kind: flush, at: 10s}", "", "capacity: 80, workers: 8}", big)
	if lru.Cache.Evictions == 0 || lru.Cache.HitRatio <= fifo.Cache.HitRatio {
		t.Errorf("LRU hit ratio %v (%d evictions), FIFO %v", lru.Cache.HitRatio, lru.Cache.Evictions, fifo.Cache.HitRatio)
	}
	// A flush whose cache stores nothing for 5s (a restart).
	_, c = cacheRun(t, "at: 10s}", "at: 10s, for: 5s, mode: hard}", "ttl: 5m}", "ttl: 5m, coalesce: true}",
		"workers: 8}", "workers: 8, shed: {deadline: true}}", "budget: {use: none}}", "budget: {use: none}, propagate_deadline: true}")
	if e := c.Cache.Series.Entries; e[12] != 0 || e[30] == 0 {
		t.Errorf("entries during the restart %d (want 0), after it %d", e[12], e[30])
	}
}

// sharedFleets: two fleets share one origin; the naive one's retries
// take the origin from the polite one too.
const sharedFleets = `
name: shared
seed: 5
duration: 60s
tick: 1s
shared: true
origin: {model: queue, capacity: 120, workers: 12}
triggers:
  - {kind: capacity, at: 20s, for: 5s, capacity: 40}
fleets:
  - name: naive
    traffic: {rate: 50, arrivals: poisson, clients: 10}
    timeout: 1s
    retry: {max_retries: 3}
    budget: {use: none}
  - name: polite
    traffic: {rate: 50, arrivals: poisson, clients: 10}
    timeout: 1s
    retry: {max_retries: 3, backoff: {use: exponential, base: 100ms, cap: 5s, jitter: full}}
    budget: {use: token_bucket, settings: {budget_ratio: 0.1, min_tokens: 1}}
`

// TestSharedFleets: one run, one origin; the polite fleet, which recovers
// on its own copy, does not while it shares the origin with the naive one.
func TestSharedFleets(t *testing.T) {
	_, r := runYAML(t, sharedFleets)
	if len(r.Layers) != 1 || r.Fleets[0].Calls != "origin" {
		t.Fatalf("layers %v, the naive fleet calls %q", len(r.Layers), r.Fleets[0].Calls)
	}
	if o := r.Layers[0].Summary; o.Attempts != r.Fleets[0].Summary.Attempts+r.Fleets[1].Summary.Attempts {
		t.Errorf("the origin's %d attempts are not both fleets'", o.Attempts)
	}
	if r.Fleets[1].Summary.Recovered {
		t.Error("the polite fleet recovered beside the naive one")
	}
	// The same fleets, each on its own copy of the origin.
	copies := strings.NewReplacer("shared: true\n", "traffic: {rate: 50, arrivals: poisson, clients: 10}\n",
		"    traffic: {rate: 50, arrivals: poisson, clients: 10}\n", "").Replace(sharedFleets)
	_, alone := runYAML(t, copies)
	if !alone.Fleets[1].Summary.Recovered {
		t.Errorf("the polite fleet on its own copy did not recover: %+v", alone.Fleets[1].Summary)
	}
}
