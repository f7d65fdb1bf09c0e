package sim

import (
	"math"

	"github.com/retrystorm/retrystorm/scenario"
)

// recoveryTolerance is how far above the pre-trigger baseline the failure
// share may be for a tick to count as recovered: one percentage point, or
// recoverySigmas standard deviations of a tick's share at the baseline
// when its chance alone spreads wider (a base that fails a quarter of its
// calls at rest, as a calibrated window may, moves by several points from
// tick to tick; with a tolerance of one point it never counted as
// recovered, with retries or without).
const recoveryTolerance = 0.01

// recoverySigmas is how many binomial standard deviations above the
// baseline a tick's failure share may go by chance: past four, a tick in
// a run of a thousand healthy ones does so with odds under 1 in 30.
const recoverySigmas = 4

// UnhealthyBaseline is the failure share before the trigger past which a
// fleet was never healthy: failing more than half its tries at rest (an
// origin slower than the fleet's timeout, say), it has no health to
// recover to, and staying within a point of that baseline is not a
// recovery. Such a fleet has Recovered false and NeverHealthy true.
const UnhealthyBaseline = 0.5

// RecoveryTail is how many ticks of run must remain, from the first
// recovered tick on, for the recovery to count.
const RecoveryTail = 10

// summarize fills the derived series and the summary at the end of a run.
func (f *fleet) summarize() Summary {
	sum := f.sum
	s := &f.s
	for k, c := range f.ticks {
		s.Intents[k], s.Offered[k], s.FirstAttempts[k], s.Retries[k], s.Hedges[k] = c.intents, c.offered, c.first, c.retries, c.hedges
		s.Successes[k], s.Goodput[k], s.FailedAttempts[k], s.BreakerRefusals[k] = c.successes, c.goodput, c.failed, c.refused
		s.ThrottleRefusals[k] = c.throttled
	}
	start, end := f.triggerTicks()
	Summarize(&f.s, &sum, start, end)
	for i := range f.policies[:f.clients] {
		sum.BreakerTrips += int64(f.policies[i].Breaker.Trips())
	}
	rate := f.sc.Traffic.Rate * float64(f.tickNs) / 1e9
	if c := f.policies[0].Ceiling(rate); !math.IsInf(c, 0) {
		sum.Ceiling = &c
	}
	sum.LatencyP50 = float64(f.lat.quantile(0.50)) / 1e9
	sum.LatencyP99 = float64(f.lat.quantile(0.99)) / 1e9
	return sum
}

// Summarize fills what follows from a run's series: the derived series
// (failures, error_rate, retries_per_request) and, in sum, the totals, the
// peak offered load, retries per request, the pre-trigger baseline, the
// failures after the cause cleared and the recovery. start and end are the
// triggers' ticks (see [TriggerTicks]). The fields the series do not hold
// (breaker and throttle refusals in total, timeouts, victims, intents
// lost, ...) must be in sum already: failures add sum.BreakerRefusals and
// sum.ThrottleRefusals. The throttle's refusals count as failures, as the
// breaker's do: both are calls refused locally. s.ThrottleRefusals may be
// shorter than the run (nil: none); it is set to nil when the run had
// none. The lab uses it on series measured over real HTTP, so both judge
// recovery the same way.
func Summarize(s *Series, sum *Summary, start, end int) {
	for k := range s.Tick {
		s.Failures[k] = s.FailedAttempts[k] + s.BreakerRefusals[k] + throttled(s, k)
		s.ErrorRate[k] = ratio(s.FailedAttempts[k], s.Offered[k])
		s.RetriesPerRequest[k] = ratio(s.Retries[k], s.Intents[k])
		sum.Intents += s.Intents[k]
		sum.Attempts += s.Offered[k]
		sum.Retries += s.Retries[k]
		sum.Hedges += s.Hedges[k]
		sum.Successes += s.Successes[k]
		sum.Goodput += s.Goodput[k]
		sum.FailedAttempts += s.FailedAttempts[k]
		sum.PeakOffered = max(sum.PeakOffered, s.Offered[k])
	}
	sum.Failures = sum.FailedAttempts + sum.BreakerRefusals + sum.ThrottleRefusals
	sum.RetriesPerRequest = ratio(sum.Retries, sum.Intents)
	if sum.ThrottleRefusals == 0 {
		s.ThrottleRefusals = nil // left out of the JSON, as it was before throttles
	}

	sum.BaselineErrorRate = failureShare(s, 0, start)
	for k := end; k < len(s.Tick); k++ {
		sum.FailuresAfterClear += s.Failures[k]
	}
	sum.NeverHealthy = sum.BaselineErrorRate > UnhealthyBaseline
	if r, ok := recovery(s, end, sum.BaselineErrorRate); ok && !sum.NeverHealthy {
		sum.Recovered, sum.RecoveryTicks = true, &r
	}
}

// NewSeries returns series of n ticks, numbered, every count zero.
func NewSeries(n int) Series { return newSeries(n) }

// TriggerTicks returns, for a run of sc, the first tick its triggers touch
// and the first tick wholly after they ended. Without triggers both are 0.
func TriggerTicks(sc *scenario.Scenario) (start, end int) {
	s, e, ok := triggerWindow(sc)
	if !ok {
		return 0, 0
	}
	tick := int64(sc.Tick)
	n := int((sc.Duration + sc.Tick - 1) / sc.Tick)
	start = int(int64(s) / tick)
	end = int((int64(e) + tick - 1) / tick)
	return min(start, n), min(end, n)
}

// TriggerSpan returns the span sc's triggers cover, in seconds, as
// [Result] reports it: nil without triggers.
func TriggerSpan(sc *scenario.Scenario) *Window {
	s, e, ok := triggerWindow(sc)
	if !ok {
		return nil
	}
	return &Window{Start: s.Seconds(), End: e.Seconds()}
}

// triggerTicks is TriggerTicks for the fleet's scenario.
func (f *fleet) triggerTicks() (start, end int) { return TriggerTicks(f.sc) }

// throttled is the throttle's refusals in tick k.
func throttled(s *Series, k int) int64 {
	if k < len(s.ThrottleRefusals) {
		return s.ThrottleRefusals[k]
	}
	return 0
}

// failureShare is the share of the caller's tries (attempts sent and calls
// the breaker or the throttle refused) that failed, over ticks [from, to).
func failureShare(s *Series, from, to int) float64 {
	var failed, tried int64
	for k := from; k < to; k++ {
		failed += s.Failures[k]
		tried += s.Offered[k] + s.BreakerRefusals[k] + throttled(s, k)
	}
	return ratio(failed, tried)
}

// recovery finds the first tick k >= end from which every tick's failure
// share stays within its tolerance of the baseline to the end of the
// run, with at least RecoveryTail ticks left, and returns k - end. The
// failure share counts breaker and throttle refusals, so a breaker or a
// throttle refusing everything is not mistaken for health.
func recovery(s *Series, end int, baseline float64) (int, bool) {
	n := len(s.Tick)
	first := n
	for k := n - 1; k >= end; k-- {
		if failureShare(s, k, k+1) > baseline+tolerance(baseline, tries(s, k)) {
			break
		}
		first = k
	}
	if n-first < RecoveryTail {
		return 0, false
	}
	return first - end, true
}

// tries is the caller's tries in tick k, as failureShare counts them.
func tries(s *Series, k int) int64 {
	return s.Offered[k] + s.BreakerRefusals[k] + throttled(s, k)
}

// tolerance is how far above baseline a tick of n tries may fail and
// still count as recovered: recoveryTolerance, or recoverySigmas binomial
// standard deviations of the share at the baseline, whichever is wider.
// At a baseline of 0 it is recoveryTolerance.
func tolerance(baseline float64, n int64) float64 {
	if n <= 0 {
		return recoveryTolerance
	}
	return max(recoveryTolerance, recoverySigmas*math.Sqrt(baseline*(1-baseline)/float64(n)))
}

func ratio(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}
