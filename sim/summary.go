package sim

import "math"

// recoveryTolerance is how far above the pre-trigger baseline the failure
// share may be for a tick to count as recovered: one percentage point.
const recoveryTolerance = 0.01

// recoveryTail is how many ticks of run must remain, from the first
// recovered tick on, for the recovery to count.
const recoveryTail = 10

// summarize fills the derived series and the summary at the end of a run.
func (f *fleet) summarize() Summary {
	s := &f.s
	sum := f.sum
	for k, c := range f.ticks {
		s.Intents[k], s.Offered[k], s.FirstAttempts[k], s.Retries[k], s.Hedges[k] = c.intents, c.offered, c.first, c.retries, c.hedges
		s.Successes[k], s.Goodput[k], s.FailedAttempts[k], s.BreakerRefusals[k] = c.successes, c.goodput, c.failed, c.refused
	}
	for k := range s.Tick {
		s.Failures[k] = s.FailedAttempts[k] + s.BreakerRefusals[k]
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
	sum.Failures = sum.FailedAttempts + sum.BreakerRefusals
	for i := range f.policies {
		sum.BreakerTrips += int64(f.policies[i].Breaker.Trips())
	}
	sum.RetriesPerRequest = ratio(sum.Retries, sum.Intents)

	start, end := f.triggerTicks()
	sum.BaselineErrorRate = f.failureShare(0, start)
	for k := end; k < len(s.Tick); k++ {
		sum.FailuresAfterClear += s.Failures[k]
	}
	if r, ok := f.recovery(end, sum.BaselineErrorRate); ok {
		sum.Recovered, sum.RecoveryTicks = true, &r
	}

	rate := f.sc.Traffic.Rate * float64(f.tickNs) / 1e9
	if c := f.policies[0].Ceiling(rate); !math.IsInf(c, 0) {
		sum.Ceiling = &c
	}
	sum.LatencyP50 = float64(f.lat.quantile(0.50)) / 1e9
	sum.LatencyP99 = float64(f.lat.quantile(0.99)) / 1e9
	return sum
}

// triggerTicks returns the first tick the triggers touch and the first tick
// wholly after they ended. Without triggers both are 0.
func (f *fleet) triggerTicks() (start, end int) {
	s, e, ok := triggerWindow(f.sc)
	if !ok {
		return 0, 0
	}
	start = int(int64(s) / f.tickNs)
	end = int((int64(e) + f.tickNs - 1) / f.tickNs)
	return min(start, f.nTicks), min(end, f.nTicks)
}

// failureShare is the share of the caller's tries (attempts sent and calls
// the breaker refused) that failed, over ticks [from, to).
func (f *fleet) failureShare(from, to int) float64 {
	var failed, tried int64
	for k := from; k < to; k++ {
		failed += f.s.Failures[k]
		tried += f.s.Offered[k] + f.s.BreakerRefusals[k]
	}
	return ratio(failed, tried)
}

// recovery finds the first tick k >= end from which every tick's failure
// share stays within recoveryTolerance of the baseline to the end of the
// run, with at least recoveryTail ticks left, and returns k - end. The
// failure share counts breaker refusals, so a breaker refusing everything
// is not mistaken for health.
func (f *fleet) recovery(end int, baseline float64) (int, bool) {
	n := len(f.s.Tick)
	first := n
	for k := n - 1; k >= end; k-- {
		if f.failureShare(k, k+1) > baseline+recoveryTolerance {
			break
		}
		first = k
	}
	if n-first < recoveryTail {
		return 0, false
	}
	return first - end, true
}

func ratio(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}
