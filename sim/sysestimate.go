package sim

import (
	"math"
	"time"
	"unsafe"

	"github.com/retrystorm/retrystorm/scenario"
)

// Sizes of what the system engine holds, in bytes: an attempt in flight
// (its slot, its request at a server, its events), an intent, a cache's
// key (its expiry, its pending fill, its place in the eviction order, its
// share of the popularity table) and a tick of a cache's series.
var (
	sysAttemptBytes = int64(unsafe.Sizeof(sattempt{}) + unsafe.Sizeof(sreq{}) + 2*unsafe.Sizeof(event{}) + 3*8)
	sysIntentBytes  = int64(unsafe.Sizeof(sintent{})) + 8
	sysRequestBytes = int64(unsafe.Sizeof(sreq{})) + 4 + 8
	cacheKeyBytes   = int64(8 + 4 + 4 + 4 + 8)
)

// estimateSystem is Estimate for a scenario of the system engine: every
// fleet's intents through the layers it reaches, each layer's calls as
// many attempts as its policy allows per attempt it receives, and the
// memory of their tables, caches and series.
func estimateSystem(sc *scenario.Scenario) Cost {
	var c Cost
	ticks := int64(1)
	if sc.Tick > 0 {
		ticks = max(1, int64((sc.Duration+sc.Tick-1)/sc.Tick))
	}
	copies := int64(1)
	if !sc.Shared {
		copies = int64(len(sc.Fleets))
	}
	var held, backlog float64
	for i := range sc.Fleets {
		f := &sc.Fleets[i]
		intents, peak := fleetIntents(sc, i)
		entry := sc.Entry(i)
		per, life := attemptsPerIntent(sc, f, estimateServer(sc, entry, f.Timeout))
		attempts := intents * per
		if share, floor, ok := budgetShare(f, sc.Duration); ok {
			attempts = min(attempts, intents*(1+share)+float64(max(sc.TrafficOf(i).Clients, 1))*floor)
		}
		c.Attempts += attempts
		// Without hedging an intent, and each call made for it below,
		// has one attempt out at a time: what is held is the intents in
		// flight (a closed loop's clients, at most), once per layer.
		inflight := min(intents, peak*life.Seconds())
		if sc.TrafficOf(i).Closed() {
			inflight = min(inflight, float64(max(sc.TrafficOf(i).Clients, 1)))
		}
		held += inflight * float64(len(sc.Tiers)+1-entry)
		// Each layer's calls below: as many attempts as their policy
		// allows per attempt they serve.
		above := attempts
		for l := entry; l < len(sc.Tiers); l++ {
			cl := sc.Tiers[l].Client.Fleet(sc.Tiers[l].Name)
			p, _ := attemptsPerIntent(sc, &cl, estimateServer(sc, l+1, cl.Timeout))
			below := above * p
			if share, floor, ok := budgetShare(&cl, sc.Duration); ok {
				below = min(below, above*(1+share)+float64(hosts(sc, l))*floor)
			}
			c.Attempts += below
			above = below
		}
		if o := &sc.Origin; o.Model == scenario.ModelQueue && !o.DropExpired && !o.Shed.Deadline && intents > 0 {
			// What reaches the origin a second: its share of the
			// attempts, and at most one from each call in flight each
			// time an attempt can end.
			caller := f
			if n := len(sc.Tiers); n > entry {
				caller = ptr(sc.Tiers[n-1].Client.Fleet(sc.Tiers[n-1].Name))
			}
			rate := min(peak*above/intents, inflight/quickest(o, caller).Seconds())
			b := max(0, rate-o.Capacity) * sc.Duration.Seconds()
			if o.QueueLimit > 0 {
				b = min(b, float64(o.QueueLimit))
			}
			backlog += min(b, above)
		}
		clients := int64(max(sc.TrafficOf(i).Clients, 1))
		c.Memory = satAdd(c.Memory, satMul(clients, perClientBytes(f)+int64(unsafe.Sizeof(pool{}))))
	}
	groups := int64(len(sc.Fleets) + len(sc.Tiers))
	mem := satMul(satMul(ticks, tickBytes), groups)
	for l := range sc.Tiers {
		t := &sc.Tiers[l]
		mem = satAdd(mem, satMul(int64(hosts(sc, l)), perClientBytes(ptr(t.Client.Fleet(t.Name)))))
		if t.Cache != nil {
			mem = satAdd(mem, satAdd(satMul(int64(t.Cache.Keys), cacheKeyBytes), satMul(ticks, 4*8)))
		}
	}
	mem = satAdd(mem, toBytes(held, sysAttemptBytes+sysIntentBytes))
	mem = satAdd(mem, toBytes(backlog, sysRequestBytes))
	c.Memory = satAdd(c.Memory, satMul(mem, copies))
	return c
}

func ptr[T any](v T) *T { return &v }

// estimateServer is layer l of sc as the estimate of an attempt's
// quickest end sees it: a server, or for a cache one that answers after
// its latency.
func estimateServer(sc *scenario.Scenario, l int, timeout time.Duration) *scenario.Origin {
	if l < len(sc.Tiers) {
		if c := sc.Tiers[l].Cache; c != nil {
			return &scenario.Origin{Model: scenario.ModelCapacity, Latency: min(c.Latency, timeout)}
		}
		return &sc.Tiers[l].Server
	}
	return &sc.Origin
}

// fleetIntents returns the intents fleet i of sc starts at most, and its
// highest rate: an open loop's by its rate's schedule, a closed loop's by
// its clients, each ending as soon as an attempt can.
func fleetIntents(sc *scenario.Scenario, i int) (total, peak float64) {
	t := sc.TrafficOf(i)
	if sc.Duration <= 0 {
		return 0, 0
	}
	if t.Closed() {
		clients := float64(max(t.Clients, 1))
		cycle := max(t.Think, time.Duration(rejectDelay)) // the least between two intents (sysarrivals.go)
		rate := clients / cycle.Seconds()
		return rate*sc.Duration.Seconds() + clients, rate
	}
	a := arrivals{traffic: t}
	a.schedule(sc, sc.Fleets[i].Name)
	for k, at := range a.at {
		if at >= int64(sc.Duration) {
			break
		}
		end := int64(sc.Duration)
		if k+1 < len(a.at) {
			end = min(end, a.at[k+1])
		}
		r := max(a.rate[k], 0)
		total += r*float64(end-at)/1e9 + 1
		peak = max(peak, r)
	}
	if t.Arrivals == "poisson" {
		total += 10*math.Sqrt(total) + 10
	}
	return total, peak
}
