package experiment

import (
	"fmt"
	"strings"

	"github.com/retrystorm/retrystorm/report"
	"github.com/retrystorm/retrystorm/scenario"
	"github.com/retrystorm/retrystorm/sim"
)

// cacheRun reads a defence's run: its one fleet, its cache and the
// database behind it (the last layer).
func cacheRun(d variant, res *sim.Result) CacheRun {
	f := res.Fleets[0]
	r := CacheRun{Name: d.name, Defence: d.does, fleet: f}
	s := f.Summary
	r.Recovered, r.RecoveryTicks = s.Recovered, s.RecoveryTicks
	r.Failures, r.FailuresAfterClear, r.IntentsLost, r.Attempts = s.Failures, s.FailuresAfterClear, s.IntentsLost, s.Attempts
	for _, t := range f.Tiers {
		if t.Cache != nil && r.cache == nil {
			r.cache = t.Cache
		}
	}
	if n := len(f.Tiers); n > 0 {
		r.DatabasePeak = f.Tiers[n-1].Summary.PeakOffered
	}
	ticks := len(f.Series.Tick)
	if c := r.cache; c != nil {
		r.StaleHits, r.Fills = c.StaleHits, c.Fills
		r.PeakMisses = maxInt(c.Series.Misses)
		before := ticks
		if res.Trigger != nil {
			before = min(ticks, int(res.Trigger.Start/res.TickSeconds))
		}
		r.HitRatioBefore = round3(hitRatio(c, 0, before))
		r.HitRatioEnd = round3(hitRatio(c, ticks-lateTicks, ticks))
	}
	var failed, tried int64
	for k := max(ticks-lateTicks, 0); k < ticks; k++ {
		failed += f.Series.Failures[k]
		tried += f.Series.Offered[k] + f.Series.BreakerRefusals[k]
	}
	r.LateFailureShare = round3(ratioOf(failed, tried))
	return r
}

// hitRatio is the share of lookups that hit (fresh or stale) in ticks
// [from, to).
func hitRatio(c *sim.CacheResult, from, to int) float64 {
	var hit, all int64
	for k := max(from, 0); k < min(to, len(c.Series.Hits)); k++ {
		h := c.Series.Hits[k] + c.Series.StaleHits[k]
		hit, all = hit+h, all+h+c.Series.Misses[k]
	}
	return ratioOf(hit, all)
}

func ratioOf(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

func maxInt(v []int64) int64 {
	var m int64
	for _, x := range v {
		m = max(m, x)
	}
	return m
}

// named returns the run called name.
func named(runs []CacheRun, name string) CacheRun {
	for _, r := range runs {
		if r.Name == name {
			return r
		}
	}
	panic("cache: no run " + name)
}

// flushClaims are the flush's claims: the naive fleet stays collapsed;
// which defence alone recovers it, and at what price.
func flushClaims(runs []CacheRun) []report.Claim {
	naive := named(runs, "naive")
	stale, staleHard := named(runs, "serve stale, soft flush"), named(runs, "serve stale, hard flush")
	co, jit, bud := named(runs, "coalesce"), named(runs, "jittered TTL"), named(runs, "retry budget")
	shed, both := named(runs, "shed at the database"), named(runs, "coalesce and shed")
	rec := func(r CacheRun) map[string]any {
		return map[string]any{"recovered": r.Recovered, "recovery_ticks": r.RecoveryTicks}
	}
	return []report.Claim{
		report.Check("after a flush at a high hit ratio the naive fleet stays collapsed",
			!naive.Recovered, rec(naive), "%s", recoveryText(naive.fleet.Summary)),
		report.Check("the cache does not refill: its hit ratio falls from over 90% to under half",
			naive.HitRatioBefore > 0.9 && naive.HitRatioEnd < 0.5,
			map[string]any{"hit_ratio_before": naive.HitRatioBefore, "hit_ratio_end": naive.HitRatioEnd},
			"%s before the flush, %s over the last %d ticks", report.Percent(naive.HitRatioBefore, 1), report.Percent(naive.HitRatioEnd, 1), lateTicks),
		report.Check("serve-stale after a soft flush loses no answer, at the price of stale ones",
			stale.Recovered && stale.FailuresAfterClear == 0 && stale.StaleHits > 0,
			map[string]any{"failures_after_clear": stale.FailuresAfterClear, "stale_hits": stale.StaleHits},
			"%s failures after the flush; %s answers served stale", report.Int(stale.FailuresAfterClear), report.Int(stale.StaleHits)),
		report.Check("serve-stale does nothing for a hard flush: nothing is left to serve",
			!staleHard.Recovered, rec(staleHard), "%s", recoveryText(staleHard.fleet.Summary)),
		report.Check("coalescing alone does not recover it, though it cuts the database's peak load",
			!co.Recovered && co.DatabasePeak < naive.DatabasePeak,
			map[string]any{"recovered": co.Recovered, "database_peak": co.DatabasePeak, "naive_database_peak": naive.DatabasePeak},
			"%s; at most %s attempts a tick at the database, against %s", recoveryText(co.fleet.Summary), report.Int(co.DatabasePeak), report.Int(naive.DatabasePeak)),
		report.Check("a jittered TTL does not recover a flush", !jit.Recovered, rec(jit), "%s", recoveryText(jit.fleet.Summary)),
		report.Check("a retry budget alone does not recover it: it halves the attempts, not the misses",
			!bud.Recovered && 2*bud.Attempts < naive.Attempts,
			map[string]any{"recovered": bud.Recovered, "attempts": bud.Attempts, "naive_attempts": naive.Attempts},
			"%s; %s attempts against %s", recoveryText(bud.fleet.Summary), report.Int(bud.Attempts), report.Int(naive.Attempts)),
		report.Check("deadline shedding at the database recovers it: the fills it serves are in time, and refill the cache",
			shed.Recovered, rec(shed), "%s", recoveryText(shed.fleet.Summary)),
		report.Check("coalescing with shedding recovers it with fewer fills than shedding alone",
			both.Recovered && both.Fills < shed.Fills,
			map[string]any{"recovered": both.Recovered, "fills": both.Fills, "shed_fills": shed.Fills},
			"%s; %s fills against %s", recoveryText(both.fleet.Summary), report.Int(both.Fills), report.Int(shed.Fills)),
	}
}

// stampedeClaims are the stampede's claims.
func stampedeClaims(sc *scenario.Scenario, runs []CacheRun) []report.Claim {
	naive, co := named(runs, "naive"), named(runs, "coalesce")
	jit := named(runs, "jittered TTL")
	keys := int64(cacheOf(sc).Cache.Keys)
	return []report.Claim{
		report.Check("when the hot keys expire together, their misses collapse the database and it stays so",
			naive.LateFailureShare > 0.5, map[string]any{"late_failure_share": naive.LateFailureShare, "database_peak": naive.DatabasePeak},
			"%s of the tries failed in the last %d ticks; up to %s attempts a tick at the database", report.Percent(naive.LateFailureShare, 0), lateTicks, report.Int(naive.DatabasePeak)),
		report.Check("coalescing sends one fill per key to the database, and nothing fails",
			co.DatabasePeak <= keys && co.Failures == 0, map[string]any{"database_peak": co.DatabasePeak, "keys": keys, "failures": co.Failures},
			"at most %s attempts a tick at the database for %s keys; %s failures", report.Int(co.DatabasePeak), report.Int(keys), report.Int(co.Failures)),
		report.Check("a jittered TTL spreads the expiries: a tenth of the misses in the worst tick, and nothing fails",
			10*jit.PeakMisses < naive.PeakMisses && jit.Failures == 0,
			map[string]any{"peak_misses": jit.PeakMisses, "naive_peak_misses": naive.PeakMisses, "failures": jit.Failures},
			"at most %s misses a tick against %s; %s failures", report.Int(jit.PeakMisses), report.Int(naive.PeakMisses), report.Int(jit.Failures)),
	}
}

func cacheTable(title string, runs []CacheRun, flush bool) report.Table {
	t := report.Table{
		Title: title,
		Columns: []report.Column{
			{Name: "defence"}, {Name: "recovery", Align: report.Right}, {Name: "failures", Align: report.Right},
			{Name: "lost", Align: report.Right}, {Name: "stale", Align: report.Right}, {Name: "fills", Align: report.Right},
			{Name: "db peak", Align: report.Right}, {Name: "hits end", Align: report.Right},
		},
		Emphasis: map[[2]int]bool{},
	}
	for i, r := range runs {
		rec := recoveryText(r.fleet.Summary)
		bad := !r.Recovered
		if !flush {
			rec = report.Percent(r.LateFailureShare, 0) + " late"
			bad = r.LateFailureShare > 0.5
		}
		t.Rows = append(t.Rows, []string{r.Name, rec, report.Int(r.Failures), report.Int(r.IntentsLost), report.Int(r.StaleHits),
			report.Int(r.Fills), report.Int(r.DatabasePeak), report.Percent(r.HitRatioEnd, 0)})
		if bad {
			t.Emphasis[[2]int{i, 1}] = true
		}
	}
	return t
}

// cacheCharts draws each part's database load and hit ratio, a line per
// defence.
func cacheCharts(flush, herd []CacheRun, tick float64) []report.Chart {
	var charts []report.Chart
	for _, part := range []struct {
		what string
		runs []CacheRun
	}{{"Flush", flush}, {"Stampede", herd}} {
		n := len(part.runs[0].fleet.Series.Tick)
		x := make([]float64, n)
		for i := range x {
			x[i] = float64(i) * tick
		}
		db := report.Chart{Title: part.what + ": attempts reaching the database", XLabel: "time (s)", YLabel: "attempts / tick", X: x}
		hits := report.Chart{Title: part.what + ": the cache's hit ratio", XLabel: "time (s)", YLabel: "share of lookups", X: x, Percent: true, YMax: 1}
		good := report.Chart{Title: part.what + ": goodput", XLabel: "time (s)", YLabel: "answers / tick", X: x}
		for _, r := range part.runs {
			tiers := r.fleet.Tiers
			db.Lines = append(db.Lines, report.Line{Name: r.Name, Y: floats(tiers[len(tiers)-1].Series.Offered), Dashed: r.Name == "naive"})
			ratio := make([]float64, n)
			for k := range ratio {
				ratio[k] = hitRatio(r.cache, k, k+1)
			}
			hits.Lines = append(hits.Lines, report.Line{Name: r.Name, Y: ratio, Dashed: r.Name == "naive"})
			good.Lines = append(good.Lines, report.Line{Name: r.Name, Y: floats(r.fleet.Series.Goodput), Dashed: r.Name == "naive"})
		}
		charts = append(charts, hits, db, good)
	}
	return charts
}

// cacheFindings sum each part up in a sentence.
func cacheFindings(flush, herd []CacheRun) []string {
	naive, stale, shed := named(flush, "naive"), named(flush, "serve stale, soft flush"), named(flush, "shed at the database")
	both := named(flush, "coalesce and shed")
	hn, hc := named(herd, "naive"), named(herd, "coalesce")
	return []string{
		fmt.Sprintf("Cache: a flush at a %s hit ratio %s: the hit ratio ends at %s, because fills that wait past their timeout store nothing; serve-stale after a soft flush loses no answer but serves %s stale ones, and does nothing after a hard flush; coalescing, a jittered TTL and a retry budget each leave it collapsed; deadline shedding at the database %s, and with coalescing %s on %s fills instead of %s.",
			report.Percent(naive.HitRatioBefore, 1), recoveredPhrase(naive.fleet.Summary), report.Percent(naive.HitRatioEnd, 0), report.Int(stale.StaleHits),
			recoveredPhrase(shed.fleet.Summary), recoveredPhrase(both.fleet.Summary), report.Int(both.Fills), report.Int(shed.Fills)),
		fmt.Sprintf("Cache stampede: hot keys that expire together send up to %s attempts a tick to the database, which stays collapsed (%s of the last tries fail); coalescing sends at most %s, one per key, and nothing fails.",
			report.Int(hn.DatabasePeak), report.Percent(hn.LateFailureShare, 0), report.Int(hc.DatabasePeak)),
	}
}

// describeNewTrigger says what a trigger of issue 39 does, in words.
func describeNewTrigger(t scenario.Trigger) string {
	switch t.Kind {
	case scenario.TriggerBurst:
		return fmt.Sprintf("a burst of %g intents", t.Count)
	case scenario.TriggerFlush:
		if t.Mode == scenario.FlushSoft {
			return "a soft flush of the cache"
		}
		return "a flush of the cache"
	case scenario.TriggerPartition:
		return fmt.Sprintf("a partition of %s → %s", t.From, t.To)
	case scenario.TriggerCPU:
		return fmt.Sprintf("a CPU cut to %g%%", 100*t.Share)
	}
	return t.Kind
}

// describeLoad says who sends the intents, in words: "100 intents/s over
// 20 clients", a closed loop's clients and think time, or, when the
// fleets share one system, each fleet's own.
func describeLoad(sc *scenario.Scenario) string {
	if !sc.Shared {
		return describeTraffic(&sc.Traffic)
	}
	parts := make([]string, len(sc.Fleets))
	for i, f := range sc.Fleets {
		parts[i] = f.Name + ": " + describeTraffic(sc.TrafficOf(i))
	}
	return "Fleets sharing one system (" + strings.Join(parts, "; ") + ")"
}

func describeTraffic(t *scenario.Traffic) string {
	if t.Closed() {
		return fmt.Sprintf("%d closed-loop clients thinking %s", t.Clients, t.Think)
	}
	rate := describeRate(&scenario.Scenario{Traffic: *t})
	if r := t.Ramp; r.For > 0 {
		rate += fmt.Sprintf(" (ramped from %g at %s over %s)", r.From, r.At, r.For)
	}
	return fmt.Sprintf("%s over %d clients", rate, t.Clients)
}
