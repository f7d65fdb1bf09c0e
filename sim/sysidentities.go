package sim

// The accounting identities of the system engine's parts (issue 39),
// beside identities.go's, which every layer's hop satisfies too:
//
// Per cache (a layer's Cache), with its layer's summary and the next
// layer's:
//
//	cache-lookups           lookups = hits + stale_hits + misses, and each count is the sum
//	                        of its series
//	cache-lookups-are-attempts lookups ≤ the layer's attempts
//	cache-coalesced         coalesced ≤ misses
//	cache-fills             fills = misses − coalesced + refreshes
//	cache-fill-outcomes     fill_successes + fill_failures ≤ fills
//	cache-fills-are-calls   fills ≤ the next layer's intents (the cache's calls to it, and
//	                        any fleet's that calls it)
//	cache-entries           entries ≤ capacity, at the end and every tick
//
// Per hop with pools (a layer's Pool, its callers' pools summed):
//
//	pool-requests           requests = acquired + wait_timeouts + rejected + abandoned
//	pool-waits              waited ≤ requests
//	pool-requests-are-attempts requests ≤ the hop's attempts
//	pool-failures           wait_timeouts + rejected ≤ the hop's failed attempts
//
// A shared run (Result.Layers):
//
//	calls-per-request       intents[l+1] ≤ attempts[l] + the intents of the fleets that call l+1
//	fleets-in-layer         the attempts of the fleets that call l ≤ attempts[l]
//	amplification           amplification[l] = attempts[l] / every fleet's intents

// component checks layer t's cache and its callers' pools; next is the
// layer below it (nil for the origin).
func (c *identityCheck) component(who string, t, next *TierResult) {
	if p := t.Pool; p != nil {
		s := &t.Summary
		if p.Requests != p.Acquired+p.WaitTimeouts+p.Rejected+p.Abandoned {
			c.fail(who, "pool-requests", "%d requests != %d acquired + %d wait timeouts + %d rejected + %d abandoned", p.Requests, p.Acquired, p.WaitTimeouts, p.Rejected, p.Abandoned)
		}
		le := func(identity, a string, x int64, b string, y int64) {
			if x > y {
				c.fail(who, identity, "%s %d > %s %d", a, x, b, y)
			}
		}
		le("pool-waits", "waited", p.Waited, "requests", p.Requests)
		le("pool-requests-are-attempts", "requests", p.Requests, "attempts", s.Attempts)
		le("pool-failures", "wait_timeouts + rejected", p.WaitTimeouts+p.Rejected, "failed_attempts", s.FailedAttempts)
	}
	k := t.Cache
	if k == nil {
		return
	}
	if k.Lookups != k.Hits+k.StaleHits+k.Misses {
		c.fail(who, "cache-lookups", "%d lookups != %d hits + %d stale hits + %d misses", k.Lookups, k.Hits, k.StaleHits, k.Misses)
	}
	se := &k.Series
	if sumOf(se.Hits) != k.Hits || sumOf(se.StaleHits) != k.StaleHits || sumOf(se.Misses) != k.Misses {
		c.fail(who, "cache-lookups", "series sum to %d hits, %d stale hits, %d misses; totals %d, %d, %d",
			sumOf(se.Hits), sumOf(se.StaleHits), sumOf(se.Misses), k.Hits, k.StaleHits, k.Misses)
	}
	if k.Lookups > t.Summary.Attempts {
		c.fail(who, "cache-lookups-are-attempts", "%d lookups > %d attempts", k.Lookups, t.Summary.Attempts)
	}
	if k.Coalesced > k.Misses {
		c.fail(who, "cache-coalesced", "%d coalesced > %d misses", k.Coalesced, k.Misses)
	}
	if k.Fills != k.Misses-k.Coalesced+k.Refreshes {
		c.fail(who, "cache-fills", "%d fills != %d misses − %d coalesced + %d refreshes", k.Fills, k.Misses, k.Coalesced, k.Refreshes)
	}
	if k.FillSuccesses+k.FillFailures > k.Fills {
		c.fail(who, "cache-fill-outcomes", "%d successes + %d failures > %d fills", k.FillSuccesses, k.FillFailures, k.Fills)
	}
	if next != nil && k.Fills > next.Summary.Intents {
		c.fail(who, "cache-fills-are-calls", "%d fills > %d calls into %s", k.Fills, next.Summary.Intents, next.Name)
	}
	if k.Entries > k.Capacity || (len(se.Entries) > 0 && maxOfInts(se.Entries) > k.Capacity) {
		c.fail(who, "cache-entries", "%d entries at the end, %d at most in a tick, > capacity %d", k.Entries, maxOfInts(se.Entries), k.Capacity)
	}
}

// layers checks the layers of a chain (a fleet's Tiers, or a shared
// run's Layers), each with its cache and pools.
func (c *identityCheck) components(prefix string, layers []TierResult) {
	for l := range layers {
		var next *TierResult
		if l+1 < len(layers) {
			next = &layers[l+1]
		}
		c.component(prefix+layers[l].Name, &layers[l], next)
	}
}

// shared checks a shared run's layers against its fleets.
func (c *identityCheck) shared(r *Result) {
	var intents int64
	for _, f := range r.Fleets {
		intents += f.Summary.Intents
	}
	for l := range r.Layers {
		t := &r.Layers[l]
		c.layer(t.Name, &t.Summary, &t.Series)
		var fleetIntents, fleetAttempts int64
		for _, f := range r.Fleets {
			if f.Calls == t.Name {
				fleetIntents += f.Summary.Intents
				fleetAttempts += f.Summary.Attempts
			}
		}
		if fleetAttempts > t.Summary.Attempts {
			c.fail(t.Name, "fleets-in-layer", "the fleets that call it sent %d attempts > %d", fleetAttempts, t.Summary.Attempts)
		}
		if l > 0 {
			if above := &r.Layers[l-1].Summary; t.Summary.Intents > above.Attempts+fleetIntents {
				c.fail(t.Name, "calls-per-request", "%d calls into it > %d attempts into %s + %d intents of the fleets that call it", t.Summary.Intents, above.Attempts, r.Layers[l-1].Name, fleetIntents)
			}
		}
		if want := ratio(t.Summary.Attempts, intents); !closeTo(t.Amplification, want) {
			c.fail(t.Name, "amplification", "%v != %d attempts / %d intents", t.Amplification, t.Summary.Attempts, intents)
		}
	}
	c.components("", r.Layers)
}

func maxOfInts(v []int64) int64 {
	var m int64
	for _, x := range v {
		m = max(m, x)
	}
	return m
}
