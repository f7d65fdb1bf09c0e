package sim

import (
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/retrystorm/retrystorm/resil/freshness"
	"github.com/retrystorm/retrystorm/scenario"
)

// A look-aside cache as a layer of the system engine (scenario.Cache).
// Every attempt that reaches it looks up its intent's key: a fresh entry
// answers after the cache's latency, a stale one (within serve_stale of
// its expiry) too while one refresh runs, and a miss waits for a fill: a
// call of the cache's client policy to the next layer, which stores the
// entry when it succeeds and answers the misses that wait for it. Fills
// run to their end whoever still waits. With coalescing a miss whose key
// has a fill out joins it. Whether an entry is fresh, stale or expired,
// and when a new one expires, is freshness.Policy's to say.

// cache is one cache layer's state.
type cache struct {
	cfg     *scenario.Cache
	fresh   freshness.Policy
	cdf     []float64 // zipf: the cumulative share of keys 0..k; nil for uniform
	expires []int64   // per key: absent, or when it stops being fresh (never)
	pending []int32   // per key: the fill its misses join (and its refresh), or -1
	prev    []int32   // the eviction order: head goes first, tail is the newest
	next    []int32
	head    int32
	tail    int32
	count   int
	held    int
	lru     bool
	latency int64
	blocked int64 // a flush's restart: nothing is stored before it
	jitter  rand.Source

	fills   []fill
	freeF   []int32
	waiting int64 // attempts waiting for a fill

	st CacheResult
}

// fill is one fetch of a key from the next layer.
type fill struct {
	key     int32
	call    int32
	refresh bool
	counted bool
	waiters []waiter
}

// Sentinels of cache.expires.
const (
	absent = math.MinInt64
	never  = math.MaxInt64
)

// Purposes of the cache's draws (beside hash.go's).
const (
	drawCacheKey  uint64 = 0xcace
	drawCacheWarm uint64 = 0xcacf
)

// cacheStream marks each cache's stream of TTL jitter.
const cacheStream = 0xcac << 48

func newCache(s *system, l int, cfg *scenario.Cache) *cache {
	n := cfg.Keys
	c := &cache{
		cfg:     cfg,
		fresh:   freshness.Policy{TTL: cfg.TTL, Jitter: cfg.TTLJitter, StaleWhileRevalidate: cfg.ServeStale},
		expires: make([]int64, n), pending: make([]int32, n), prev: make([]int32, n), next: make([]int32, n),
		head: -1, tail: -1, held: cfg.Held(), lru: cfg.Eviction != scenario.EvictFIFO,
		latency: int64(cfg.Latency), blocked: math.MinInt64,
		jitter: rand.NewPCG(s.seed, cacheStream|uint64(l)),
	}
	if cfg.Popularity == scenario.PopularityZipf {
		c.cdf = ZipfShares(n, cfg.Skew)
	}
	for k := range c.expires {
		c.expires[k], c.pending[k] = absent, -1
	}
	c.st.Capacity = int64(c.held)
	c.st.Series = CacheSeries{Hits: make([]int64, s.nTicks), StaleHits: make([]int64, s.nTicks), Misses: make([]int64, s.nTicks), Entries: make([]int64, s.nTicks)}
	c.warm(s)
	return c
}

// warm fills the cache as its start says: the held most popular keys,
// least popular first so that the most popular are the newest.
func (c *cache) warm(s *system) {
	if c.cfg.Start == scenario.StartCold {
		return
	}
	ttl := float64(c.cfg.TTL)
	for k := c.held - 1; k >= 0; k-- {
		stored := int64(0)
		if c.cfg.Start == scenario.StartWarm {
			stored = -int64(draw(s.seed, uint64(k), 0, drawCacheWarm) * ttl)
		}
		c.link(int32(k))
		c.expires[k] = c.expiry(stored)
	}
}

var zipfCDFs sync.Map // [2]float64{n, skew} → []float64, immutable once made

// ZipfShares returns the cumulative shares of a Zipf distribution over n
// keys of exponent skew, as a cache with popularity zipf draws its keys:
// key k (from 0) weighs 1/(k+1)^skew, and a uniform draw u asks for the
// first key whose share is u or more. The slice is shared: do not modify
// it.
func ZipfShares(n int, skew float64) []float64 {
	id := [2]float64{float64(n), skew}
	if v, ok := zipfCDFs.Load(id); ok {
		return v.([]float64)
	}
	cdf := make([]float64, n)
	sum := 0.0
	for k := range cdf {
		sum += math.Pow(float64(k+1), -skew)
		cdf[k] = sum
	}
	for k := range cdf {
		cdf[k] /= sum
	}
	v, _ := zipfCDFs.LoadOrStore(id, cdf)
	return v.([]float64)
}

// key is the key intent root asks for.
func (c *cache) key(seed, root uint64) int32 {
	u := draw(seed, root, 0, drawCacheKey)
	if c.cdf == nil {
		return int32(u * float64(len(c.expires)))
	}
	k, _ := slices.BinarySearch(c.cdf, u)
	return int32(min(k, len(c.cdf)-1))
}

// expiry is when an entry stored at ns stops being fresh.
func (c *cache) expiry(ns int64) int64 {
	e := c.fresh.Expires(time.Unix(0, ns), c.jitter)
	if e.IsZero() {
		return never
	}
	return e.UnixNano()
}

// state is what a lookup of key k at now may do.
func (c *cache) state(s *system, k int32, now int64) freshness.State {
	e := c.expires[k]
	if e == absent || now < c.blocked {
		return freshness.Expired
	}
	if e == never {
		return freshness.Fresh
	}
	return c.fresh.State(s.vt(now), time.Unix(0, e))
}

// lookup is attempt ai reaching cache layer l at now.
func (s *system) lookup(l *layer, ai int32, now int64) {
	c := l.cache
	a := &s.atts[ai]
	in := &s.ints[a.intent]
	k := c.key(s.seed, in.root)
	t := s.tickOf(now)
	if t >= 0 {
		c.st.Lookups++
	}
	switch c.state(s, k, now) {
	case freshness.Fresh:
		c.count1(&c.st.Hits, c.st.Series.Hits, t)
		c.touch(k)
		s.answerAt(ai, now+c.latency, answerOK)
		return
	case freshness.Stale:
		c.count1(&c.st.StaleHits, c.st.Series.StaleHits, t)
		c.touch(k)
		s.answerAt(ai, now+c.latency, answerOK)
		if c.pending[k] < 0 {
			f := s.newFill(l, k, in, now, true)
			c.pending[k] = f
			s.start(c.fills[f].call, now)
		}
		return
	}
	c.count1(&c.st.Misses, c.st.Series.Misses, t)
	if c.expires[k] != absent && now >= c.blocked {
		c.remove(k) // expired past serving
	}
	a.where = atCache
	c.waiting++
	if f := c.pending[k]; c.cfg.Coalesce && f >= 0 {
		if t >= 0 {
			c.st.Coalesced++
		}
		a.req = f
		c.fills[f].waiters = append(c.fills[f].waiters, waiter{ai, a.gen})
		return
	}
	f := s.newFill(l, k, in, now, false)
	if c.cfg.Coalesce {
		c.pending[k] = f
	}
	a.req = f
	c.fills[f].waiters = append(c.fills[f].waiters, waiter{ai, a.gen})
	s.start(c.fills[f].call, now)
}

// count1 counts one lookup in total and in tick t's series.
func (c *cache) count1(total *int64, series []int64, t int32) {
	if t >= 0 {
		*total++
		series[t]++
	}
}

// newFill makes a fill of key k for intent in (a miss's, or a stale
// hit's refresh): the cache's call to the next layer, begun by the
// caller once its waiter is in.
func (s *system) newFill(l *layer, k int32, in *sintent, now int64, refresh bool) int32 {
	c := l.cache
	fi := slot(&c.fills, &c.freeF, fill{})
	counted := s.tickOf(now) >= 0
	if counted {
		c.st.Fills++
		if refresh {
			c.st.Refreshes++
		}
	}
	j := s.newCall(l.calls, 0, fi, in.root, in.broken, now, uint64(k))
	s.ints[j].fromFill = true
	c.fills[fi] = fill{key: k, call: j, refresh: refresh, counted: counted, waiters: c.fills[fi].waiters[:0]}
	return fi
}

// fillEnded is fill fi of the cache of layer l ending at now: on
// success the entry is stored; every miss still waiting is answered.
func (s *system) fillEnded(l *layer, fi int32, ok bool, now int64) {
	c := l.cache
	f := &c.fills[fi]
	if c.pending[f.key] == fi {
		c.pending[f.key] = -1
	}
	if f.counted {
		if ok {
			c.st.FillSuccesses++
		} else {
			c.st.FillFailures++
		}
	}
	if ok && now >= c.blocked {
		c.store(f.key, now)
	}
	aux := uint8(0)
	if ok {
		aux = answerOK
	}
	for _, w := range f.waiters {
		a := &s.atts[w.att]
		if a.gen != w.gen || a.where != atCache || a.req != fi {
			continue // it left
		}
		a.where, a.req = atNone, -1
		c.waiting--
		s.answerAt(w.att, now, aux)
	}
	c.freeF = append(c.freeF, fi)
}

// unwait is attempt ai no longer waiting for its fill.
func (s *system) unwait(ai int32) {
	a := &s.atts[ai]
	s.layers[s.groups[s.ints[a.intent].group].to].cache.waiting--
}

// store puts key k in the cache, fresh from now, making room first.
func (c *cache) store(k int32, now int64) {
	if c.expires[k] != absent {
		c.unlink(k)
		c.count--
	} else if c.count >= c.held && c.head >= 0 {
		v := c.head
		c.unlink(v)
		c.expires[v] = absent
		c.count--
		c.st.Evictions++
	}
	c.link(k)
	c.expires[k] = c.expiry(now)
}

// touch makes key k the most recently used, for LRU eviction.
func (c *cache) touch(k int32) {
	if c.lru && c.tail != k {
		c.unlink(k)
		c.link(k)
		c.count-- // link counted it again
	}
}

// remove drops key k.
func (c *cache) remove(k int32) {
	c.unlink(k)
	c.expires[k] = absent
	c.count--
}

// link appends key k at the tail of the eviction order.
func (c *cache) link(k int32) {
	c.prev[k], c.next[k] = c.tail, -1
	if c.tail >= 0 {
		c.next[c.tail] = k
	} else {
		c.head = k
	}
	c.tail = k
	c.count++
}

func (c *cache) unlink(k int32) {
	p, n := c.prev[k], c.next[k]
	if p >= 0 {
		c.next[p] = n
	} else {
		c.head = n
	}
	if n >= 0 {
		c.prev[n] = p
	} else {
		c.tail = p
	}
}

// flush empties the cache (hard) or marks every entry expired at now
// (soft), and stores nothing for d after it.
func (s *system) flush(t *scenario.Trigger, now int64) {
	for l := range s.layers {
		c := s.layers[l].cache
		if c == nil || (t.Cache != "" && s.layers[l].name != t.Cache) {
			continue
		}
		if s.tickOf(now) >= 0 {
			c.st.Flushed += int64(c.count)
		}
		for k := c.head; k >= 0; {
			next := c.next[k]
			if t.Mode == scenario.FlushSoft {
				c.expires[k] = min(c.expires[k], now)
			} else {
				c.expires[k] = absent
			}
			k = next
		}
		if t.Mode != scenario.FlushSoft {
			c.head, c.tail, c.count = -1, -1, 0
		}
		c.blocked = now + int64(t.For)
	}
}

// sample records the cache at the end of tick t.
func (c *cache) sample(t int) { c.st.Series.Entries[t] = int64(c.count) }

// holds reports whether a lookup of the key of intent root at now would
// be answered by the cache itself (fresh or stale).
func (c *cache) holds(s *system, root uint64, now int64) bool {
	return c.state(s, c.key(s.seed, root), now) != freshness.Expired
}
