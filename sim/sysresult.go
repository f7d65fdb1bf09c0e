package sim

import "math"

// CacheResult is a cache layer's run, its lookups counted in the tick
// they happened in (those after the run not at all), its fills in the
// tick they began.
type CacheResult struct {
	// Lookups = Hits + StaleHits + Misses: every attempt that reached
	// the cache. A hit is fresh; a stale hit was served while a refresh
	// ran (serve_stale); a miss waited for a fill.
	Lookups   int64 `json:"lookups"`
	Hits      int64 `json:"hits"`
	StaleHits int64 `json:"stale_hits"`
	Misses    int64 `json:"misses"`
	// Coalesced are the misses that joined a fill already out.
	Coalesced int64 `json:"coalesced"`
	// Fills = Misses − Coalesced + Refreshes: the cache's calls to the
	// next layer, begun for a miss or to refresh a stale entry. Each
	// ended a success (the entry stored) or a failure, or was out when
	// the run's drain ended.
	Fills         int64 `json:"fills"`
	Refreshes     int64 `json:"refreshes"`
	FillSuccesses int64 `json:"fill_successes"`
	FillFailures  int64 `json:"fill_failures"`
	// Evictions are entries dropped to make room; Flushed, entries a
	// flush emptied or marked expired.
	Evictions int64 `json:"evictions"`
	Flushed   int64 `json:"flushed"`
	// Entries is what the cache held at the end of the run; Capacity,
	// the most it holds.
	Entries  int64 `json:"entries"`
	Capacity int64 `json:"capacity"`
	// HitRatio is (Hits + StaleHits) / Lookups.
	HitRatio float64     `json:"hit_ratio"`
	Series   CacheSeries `json:"series"`
}

// CacheSeries is a cache per tick: its lookups by result, and the
// entries it held at the tick's end.
type CacheSeries struct {
	Hits      []int64 `json:"hits"`
	StaleHits []int64 `json:"stale_hits"`
	Misses    []int64 `json:"misses"`
	Entries   []int64 `json:"entries"`
}

// PoolResult is the connection pools of a hop's callers (every client's,
// every replica's), summed, for the attempts sent during the run: each
// asked its pool (Requests) and got a connection at once or after a wait
// (Acquired), or was refused by a full wait queue (Rejected), or waited
// past the pool's wait timeout (WaitTimeouts), or left while it waited,
// its own timeout passed or its call cancelled (Abandoned). Waited counts
// those that had to wait at all.
type PoolResult struct {
	Requests     int64      `json:"requests"`
	Acquired     int64      `json:"acquired"`
	Waited       int64      `json:"waited"`
	WaitTimeouts int64      `json:"wait_timeouts"`
	Rejected     int64      `json:"rejected"`
	Abandoned    int64      `json:"abandoned"`
	Series       PoolSeries `json:"series"`
}

// PoolSeries is a hop's pools at each tick's end: the attempts waiting
// for a connection, and the connections in use.
type PoolSeries struct {
	Waiting []int64 `json:"waiting"`
	InUse   []int64 `json:"in_use"`
}

// systemResult is one system's run: its fleets', and its layers' hops.
type systemResult struct {
	fleets []FleetResult
	layers []TierResult
}

// results summarises the run.
func (s *system) results() systemResult {
	start, end := TriggerTicks(s.sc)
	for g := range s.groups {
		s.summarizeGroup(&s.groups[g], start, end)
	}
	var out systemResult
	var intents int64
	for slot := range s.fleets {
		g := &s.groups[slot]
		f := FleetResult{Name: g.name, Summary: g.sum, Series: g.s}
		if s.shared {
			f.Calls = s.layers[g.to].name
		}
		out.fleets = append(out.fleets, f)
		intents += g.sum.Intents
	}
	from := 0
	if !s.shared {
		from = s.groups[0].to // a fleet on its own copy: the layers it reaches
	}
	for l := from; l < len(s.layers); l++ {
		t := s.layerResult(l, start, end)
		t.Amplification = ratio(t.Summary.Attempts, intents)
		out.layers = append(out.layers, t)
	}
	return out
}

// summarizeGroup fills group g's series and summary.
func (s *system) summarizeGroup(g *group, start, end int) {
	for k, c := range g.ticks {
		g.s.Intents[k], g.s.Offered[k], g.s.FirstAttempts[k], g.s.Retries[k], g.s.Hedges[k] = c.intents, c.offered, c.first, c.retries, c.hedges
		g.s.Successes[k], g.s.Goodput[k], g.s.FailedAttempts[k], g.s.BreakerRefusals[k] = c.successes, c.goodput, c.failed, c.refused
		g.s.ThrottleRefusals[k] = c.throttled
	}
	Summarize(&g.s, &g.sum, start, end)
	for i := g.base; i < g.base+g.n; i++ {
		g.sum.BreakerTrips += int64(s.policies[i].Breaker.Trips())
	}
	if g.lat != nil {
		g.sum.LatencyP50 = float64(g.lat.quantile(0.50)) / 1e9
		g.sum.LatencyP99 = float64(g.lat.quantile(0.99)) / 1e9
	}
	if g.fleet >= 0 {
		if t := s.sc.TrafficOf(g.fleet); !t.Closed() {
			if c := s.policies[g.base].Ceiling(t.Rate * float64(s.tickNs) / 1e9); !math.IsInf(c, 0) {
				g.sum.Ceiling = &c
			}
		}
	}
}

// layerResult is the hop into layer l: the sum of the groups that call
// it (a single group's own, when one calls it), its cache and its
// callers' pools.
func (s *system) layerResult(l, start, end int) TierResult {
	var callers []*group
	for g := range s.groups {
		if s.groups[g].to == l {
			callers = append(callers, &s.groups[g])
		}
	}
	t := TierResult{Name: s.layers[l].name}
	switch len(callers) {
	case 0:
		t.Series = newSeries(s.nTicks)
		Summarize(&t.Series, &t.Summary, start, end)
		t.Series.ThrottleRefusals = nil
	case 1:
		t.Summary, t.Series = callers[0].sum, callers[0].s
	default:
		t.Summary, t.Series = s.mergeHop(callers, start, end)
	}
	if c := s.layers[l].cache; c != nil {
		r := c.st
		r.Entries = int64(c.count)
		r.HitRatio = ratio(r.Hits+r.StaleHits, r.Lookups)
		t.Cache = &r
	}
	t.Pool = poolResult(callers)
	return t
}

// mergeHop sums the hops of several groups into one layer.
func (s *system) mergeHop(callers []*group, start, end int) (Summary, Series) {
	se := newSeries(s.nTicks)
	var sum Summary
	var lat histogram
	weight := 0.0
	for _, g := range callers {
		for k := range se.Tick {
			se.Intents[k] += g.s.Intents[k]
			se.Offered[k] += g.s.Offered[k]
			se.FirstAttempts[k] += g.s.FirstAttempts[k]
			se.Retries[k] += g.s.Retries[k]
			se.Successes[k] += g.s.Successes[k]
			se.Goodput[k] += g.s.Goodput[k]
			se.FailedAttempts[k] += g.s.FailedAttempts[k]
			se.BreakerRefusals[k] += g.s.BreakerRefusals[k]
			se.ThrottleRefusals[k] += throttled(&g.s, k)
			se.Queue[k] = g.s.Queue[k]
			se.BreakerOpen[k] += g.s.BreakerOpen[k] * float64(g.n)
		}
		weight += float64(g.n)
		addCounts(&sum, &g.sum)
		if g.lat != nil {
			for b, n := range g.lat.counts {
				lat.counts[b] += n
			}
			lat.n += g.lat.n
		}
	}
	for k := range se.BreakerOpen {
		se.BreakerOpen[k] /= weight
	}
	Summarize(&se, &sum, start, end)
	sum.LatencyP50, sum.LatencyP99 = float64(lat.quantile(0.50))/1e9, float64(lat.quantile(0.99))/1e9
	return sum, se
}

// addCounts adds the counts of b that the series do not hold to a.
func addCounts(a, b *Summary) {
	a.Timeouts += b.Timeouts
	a.BreakerRefusals += b.BreakerRefusals
	a.ThrottleRefusals += b.ThrottleRefusals
	a.Victims += b.Victims
	a.IntentsLost += b.IntentsLost
	l, m := &a.LostBy, b.LostBy
	l.RetriesExhausted, l.Budget, l.Breaker, l.Throttled = l.RetriesExhausted+m.RetriesExhausted, l.Budget+m.Budget, l.Breaker+m.Breaker, l.Throttled+m.Throttled
	l.NotIdempotent, l.Deadline, l.Unfinished = l.NotIdempotent+m.NotIdempotent, l.Deadline+m.Deadline, l.Unfinished+m.Unfinished
	a.AnswersThrownAway += b.AnswersThrownAway
	a.WastedWork += b.WastedWork
	a.Dropped += b.Dropped
	a.BudgetDenials += b.BudgetDenials
	a.BreakerTrips += b.BreakerTrips
}

// poolResult sums the pools of the groups that have one, or nil.
func poolResult(callers []*group) *PoolResult {
	var p *PoolResult
	for _, g := range callers {
		if !g.pool.On() {
			continue
		}
		if p == nil {
			n := len(g.pools.waitingAt)
			p = &PoolResult{Series: PoolSeries{Waiting: make([]int64, n), InUse: make([]int64, n)}}
		}
		c := &g.pools
		p.Requests += c.requests
		p.Acquired += c.acquired
		p.Waited += c.waited
		p.WaitTimeouts += c.timeouts
		p.Rejected += c.rejected
		p.Abandoned += c.abandoned
		for k := range c.waitingAt {
			p.Series.Waiting[k] += c.waitingAt[k]
			p.Series.InUse[k] += c.inUseAt[k]
		}
	}
	return p
}
