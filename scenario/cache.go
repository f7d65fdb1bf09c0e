package scenario

import (
	"time"

	"go.yaml.in/yaml/v3"
)

// A look-aside cache (issue 39) is a layer of the chain: a tier whose
// `cache` replaces its `server`. Every attempt that reaches it looks its
// intent's key up: a fresh entry answers at once, an expired one within
// ServeStale answers at once too while one refresh runs in the
// background, and a miss fills the entry from the next layer with the
// tier's client policy, then answers. Fills run to their end whoever
// still waits for them, as a cache's own fetches do; with Coalesce,
// misses of a key whose fill is out wait for that fill instead of
// starting their own (Go's golang.org/x/sync/singleflight, nginx's
// proxy_cache_lock). What is fresh, stale or expired, and how long a new
// entry lives, is resil's decision (resil/freshness).

// Key popularity: how the intents' keys are drawn.
const (
	PopularityZipf    = "zipf"    // key k (from 1) with weight 1/k^skew
	PopularityUniform = "uniform" // every key alike
)

// Eviction orders: which entry a full cache drops for a new one.
const (
	EvictLRU  = "lru"  // the least recently used
	EvictFIFO = "fifo" // the oldest stored
)

// Cache starts: what the cache holds when the run begins.
const (
	// StartWarm holds the most popular keys it has room for, each
	// stored at a time drawn within the last TTL: a cache that has served
	// for a while, whose entries expire one by one.
	StartWarm = "warm"
	// StartLoaded holds the same keys, all stored at time 0: a bulk
	// preload, whose entries (without jitter) expire together.
	StartLoaded = "loaded"
	// StartCold holds nothing.
	StartCold = "cold"
)

// Flush modes (Trigger.Mode of a flush).
const (
	FlushHard = "hard" // every entry is gone
	FlushSoft = "soft" // every entry is marked expired: served stale within serve_stale while it refills
)

var (
	popularities = []string{PopularityZipf, PopularityUniform}
	evictions    = []string{EvictLRU, EvictFIFO}
	cacheStarts  = []string{StartWarm, StartLoaded, StartCold}
	flushModes   = []string{FlushHard, FlushSoft}
)

// maxKeys bounds a cache's key space: each key takes about 40 bytes of
// the run's memory, whether stored or not.
const maxKeys = 10_000_000

// Cache is a look-aside cache's settings (see the top of this file).
type Cache struct {
	// Keys is how many distinct keys the intents ask for; required.
	Keys int
	// Popularity is how each intent's key is drawn: zipf (the default)
	// or uniform. Skew is the Zipf exponent s (key k with weight
	// 1/k^s); default 1.
	Popularity string
	Skew       float64
	// Capacity is how many entries it holds; 0 holds every key.
	Capacity int
	// Eviction is which entry a full cache drops: lru (default) or fifo.
	Eviction string
	// TTL is how long an entry is fresh; 0 is for ever. TTLJitter
	// spreads each entry's TTL uniformly over TTL × [1 − j, 1 + j].
	TTL       time.Duration
	TTLJitter float64
	// ServeStale is how long past its expiry an entry is still served,
	// while one refresh runs (stale-while-revalidate); 0 serves none.
	ServeStale time.Duration
	// Coalesce makes the misses of a key whose fill is out wait for it.
	Coalesce bool
	// Latency is how long a lookup takes, hit or miss; default 1ms.
	Latency time.Duration
	// Start is what it holds at time 0: warm (default), loaded or cold.
	Start string
}

// Held is how many entries the cache holds at most.
func (c *Cache) Held() int {
	if c.Capacity > 0 {
		return min(c.Capacity, c.Keys)
	}
	return c.Keys
}

// cacheValue is a tier's cache: absent (nil) for a tier with a server.
type cacheValue struct{ p **Cache }

func (v cacheValue) read(d *decoder, n *yaml.Node, path string) error {
	c := new(Cache)
	if err := cacheObject(c).read(d, n, path); err != nil {
		return err
	}
	*v.p = c
	return nil
}

func (v cacheValue) write() *yaml.Node {
	if *v.p == nil {
		return nil
	}
	return cacheObject(*v.p).write()
}

func (v cacheValue) zero() bool { return *v.p == nil }

func (v cacheValue) validate(c *checker, path string) {
	if *v.p != nil {
		cacheObject(*v.p).validate(c, path)
	}
}

func cacheObject(c *Cache) *object {
	return &object{
		block: true,
		fields: []field{
			{key: "keys", need: true, v: integer{&c.Keys}},
			{key: "popularity", v: word{p: &c.Popularity, words: popularities}},
			{key: "skew", v: number{&c.Skew}},
			{key: "capacity", v: integer{&c.Capacity}},
			{key: "eviction", v: word{p: &c.Eviction, words: evictions}},
			{key: "ttl", v: duration{&c.TTL}},
			{key: "ttl_jitter", v: number{&c.TTLJitter}},
			{key: "serve_stale", v: duration{&c.ServeStale}},
			{key: "coalesce", v: boolean{&c.Coalesce}},
			{key: "latency", v: duration{&c.Latency}},
			{key: "start", v: word{p: &c.Start, words: cacheStarts}},
		},
		preset: func(string) {
			c.Popularity, c.Skew, c.Eviction, c.Latency, c.Start = PopularityZipf, 1, EvictLRU, time.Millisecond, StartWarm
		},
		finish: func(has func(string) bool) {
			if c.Popularity == PopularityUniform && !has("skew") {
				c.Skew = 0
			}
		},
		check: c.check,
	}
}

func (c *Cache) check(ch *checker, path string) {
	at := func(key string) string { return join(path, key) }
	in(ch, at("keys"), c.Keys, 1, maxKeys)
	switch c.Popularity {
	case PopularityZipf:
		in(ch, at("skew"), c.Skew, 0, 10)
	case PopularityUniform:
		if c.Skew != 0 {
			ch.fail(at("skew"), "applies to popularity: zipf only")
		}
	}
	in(ch, at("capacity"), c.Capacity, 0, c.Keys)
	in(ch, at("ttl"), c.TTL, 0, maxWait)
	if !(c.TTLJitter >= 0 && c.TTLJitter < 1) {
		ch.fail(at("ttl_jitter"), "must be in [0, 1), got %s", ch.show(at("ttl_jitter"), c.TTLJitter))
	}
	in(ch, at("serve_stale"), c.ServeStale, 0, maxWait)
	over(ch, at("latency"), c.Latency, 0, maxWait)
	if ch.ok() && c.TTL == 0 && c.TTLJitter != 0 {
		ch.fail(at("ttl_jitter"), "spreads the ttl, and ttl is 0s (entries never expire)")
	}
}
