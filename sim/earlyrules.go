//go:build !js

package sim

import (
	"math"
	"math/rand/v2"
	"time"

	"github.com/retrystorm/retrystorm/origin"
	"github.com/retrystorm/retrystorm/resil/admission"
	"github.com/retrystorm/retrystorm/scenario"
)

// earlyMargin is the slack every comparison of the rules keeps: far more
// than a nanosecond's rounding, far less than any timeout.
const earlyMargin = int64(time.Millisecond)

// early is a run's state for its EarlyExit: what the rules need that does
// not change during the run.
type early struct {
	mode     EarlyExit
	checkAt  int64 // the next moment the decision rules look (StopWhenDecided)
	drained  bool  // the drain rule has looked
	timeout  int64 // the attempt timeout of the hop that calls the origin
	settled  int64 // from when the baseline's ticks have every attempt ended
	startTk  int   // the triggers' first tick
	endTk    int   // the first tick after them
	life     int64 // how long a fleet's intent may send attempts, at most, from its arrival
	arrivals *rand.PCG
	fed      *fed // the fed rule's state (earlyfed.go); nil where it does not apply
}

// newEarly returns the fleet's early-exit state for mode, or nil when the
// rules cannot apply to its scenario: the origin must be a FIFO queue of
// fixed service times that drops and sheds nothing, behind triggers whose
// end the baseline and recovery are judged from, and the fleet must
// neither pace its attempts nor hedge them (docs/early-exit.md).
func newEarly(f *fleet, mode EarlyExit, arrivals *rand.PCG) *early {
	o := &f.sc.Origin
	if mode == NoEarlyExit || !f.hasClear || !queueRuleHolds(o) || f.hedging || f.policies[0].Pacer != nil {
		return nil
	}
	start, end := f.triggerTicks()
	e := &early{mode: mode, timeout: f.timeout, startTk: start, endTk: end, arrivals: arrivals, life: f.lifetime()}
	if f.chain != nil {
		e.timeout = f.chain.hops[f.last].timeout
	}
	e.fed = newFed(f)
	e.settled = int64(start)*f.tickNs + f.timeout + earlyMargin
	e.checkAt = max(e.settled, 0)
	if mode == SkipCertainDrain {
		e.checkAt = math.MaxInt64
	}
	return e
}

// queueRuleHolds reports whether o is an origin the queue rule reasons
// about: a FIFO queue whose every request takes the mean service time,
// with no limiter, no deadline shedding, no drop_expired and no longest
// wait. (A queue_limit is fine: a request it rejects fails.)
func queueRuleHolds(o *scenario.Origin) bool {
	if o.Model != scenario.ModelQueue || o.DropExpired || o.MaxQueueTime > 0 || !o.ServiceTime.IsFixed() {
		return false
	}
	if d, err := o.QueueDiscipline(); err != nil || d != admission.FIFO {
		return false
	}
	_, admits, err := origin.ShedderSettings(o)
	return err == nil && !admits
}

// lifetime bounds how long after its arrival a fleet's intent may still
// have an attempt out: every attempt's timeout and every backoff at its
// longest (resil.Backoff.MaxDelay), within the intent's deadline; past the
// drain limit when its retries are unlimited (the run stops following it
// there).
func (f *fleet) lifetime() int64 {
	forever := drainLimit + f.timeout + earlyMargin
	p := &f.policies[0]
	life := forever
	if r := p.MaxRetries; r >= 0 {
		l, prev := (int64(r)+1)*(f.timeout+1), time.Duration(0)
		for n := 1; n <= r && l < forever; n++ {
			prev = p.Backoff.MaxDelay(n, prev)
			l += int64(prev)
		}
		life = min(l, forever)
	}
	if f.deadline > 0 {
		life = min(life, f.deadline+1)
	}
	return life
}

// checkEarly applies the rules at now, the moment of the next step: every
// event before now has happened, none at now yet. It reports whether the
// run stops here, and records why in end.
func (f *fleet) checkEarly(now int64, end *EarlyEnd) bool {
	e := f.early
	if now >= f.end {
		if e.drained || f.nextSample < f.nTicks {
			return false // every tick sampled first, as the whole run samples them
		}
		e.drained = true
		// Every intent still open is lost when no attempt it may still
		// send can be answered in time.
		if c0, ok := f.noSuccessBefore(now); ok && c0 > f.end+e.life+earlyMargin {
			*end = EarlyEnd{At: float64(f.end) / 1e9, Rule: EarlyQueue}
			return true
		}
		return false
	}
	if now < e.checkAt {
		return false
	}
	e.checkAt = now + f.tickNs // at most once a tick
	b, never := f.baselineNow()
	stop := EarlyEnd{At: float64(now) / 1e9, Rule: EarlyQueue, Truncated: true}
	switch {
	case e.mode == StopWhenLost:
		// Every open intent and every one to come is lost once no attempt
		// before the last of them can end can succeed.
		c0, ok := f.noSuccessBefore(now)
		queue := ok && c0 > f.end+e.life+earlyMargin && (never || f.cannotRecover(now, b, c0))
		if !queue && !(f.fedAllLost(now) && (never || f.fedCannotRecover(now, b))) {
			return false
		}
		if !queue {
			stop.Rule = EarlyFedQueue
		}
		stop.AllLost = true
	case never:
		stop.Rule = EarlyNeverHealthy
	default:
		c0, ok := f.noSuccessBefore(now)
		if !ok || !f.cannotRecover(now, b, c0) {
			if !f.fedCannotRecover(now, b) {
				return false
			}
			stop.Rule = EarlyFedQueue
		}
	}
	*end = stop
	return true
}

// baselineNow is the fleet's failure share before the triggers, as
// Summarize will find it, and whether it was never healthy; the ticks it
// covers are settled (early.settled).
func (f *fleet) baselineNow() (float64, bool) {
	var failed, tried int64
	for _, c := range f.ticks[:f.early.startTk] {
		failed += c.failed + c.refused + c.throttled
		tried += c.offered + c.refused + c.throttled
	}
	b := ratio(failed, tried)
	return b, b > UnhealthyBaseline
}

// cannotRecover reports whether the queue rule, which proved at now that
// no attempt can be answered success before c0, proves that the fleet
// does not recover: every attempt it sends before the run ends fails, and
// some tick of the last RecoveryTail ticks after the triggers and after
// now will hold enough intents' first tries, all failed, to be past the
// baseline's tolerance.
func (f *fleet) cannotRecover(now int64, baseline float64, c0 int64) bool {
	if c0 <= f.end+f.timeout+earlyMargin {
		return false
	}
	need := triesPastTolerance(baseline)
	if need == 0 {
		return false
	}
	from := max(f.early.endTk, f.nTicks-RecoveryTail, int((now+f.tickNs-1)/f.tickNs))
	if from >= f.nTicks {
		return false
	}
	counts := f.arrivalsFrom(from)
	for _, n := range counts {
		if n >= need {
			return true
		}
	}
	return false
}

// triesPastTolerance is the fewest tries of a tick for which a tick that
// failed all of them is past the recovery's tolerance of baseline (see
// tolerance), or 0 when no number is.
func triesPastTolerance(baseline float64) int64 {
	if !(1 > baseline+recoveryTolerance) {
		return 0
	}
	// 4·sqrt(b(1−b)/n) < 1−b once n > 16b/(1−b); check the exact
	// comparison recovery makes from there.
	n := max(int64(recoverySigmas*recoverySigmas*baseline/(1-baseline)), 1)
	for ; n < 1<<40; n++ {
		if 1 > baseline+tolerance(baseline, n) {
			return n
		}
	}
	return 0
}

// arrivalsFrom counts the intents that will arrive in each tick from tick
// from to the end of the run, by drawing the arrival stream ahead and
// putting it back: the rate in force is the last (noSuccessBefore's
// condition), so the gaps are those the run will draw.
func (f *fleet) arrivalsFrom(from int) []int64 {
	saved, ahead, next := *f.early.arrivals, f.ahead, f.nextArrival
	counts := make([]int64, f.nTicks-from)
	for t := next; t < f.end; t = satAdd(t, f.gap()) {
		if k := int(t / f.tickNs); k >= from {
			counts[k-from]++
		}
	}
	*f.early.arrivals, f.ahead, f.nextArrival = saved, ahead, next
	return counts
}

// noSuccessBefore is the queue rule: it returns a time before which no
// attempt of any layer can be answered success in time, and whether the
// rule proves it at now. The origin is a FIFO queue of fixed service time
// s per request and worker (queueRuleHolds), its conditions are the last
// the triggers set, and no outage is in force. A request that arrives from
// now on waits behind the Q requests queued at now, so it ends no earlier
// than now + (Q+1)·s/workers; and a request queued at now whose client
// still waits arrived within one timeout of now, so at most the last
// `recent` of the queue: each ends no earlier than now + (Q−recent+1)·
// s/workers, which the rule requires to be past any such deadline.
// Successes reach the fleet only from the origin's answers, so none comes
// before the earliest of these ends.
func (f *fleet) noSuccessBefore(now int64) (int64, bool) {
	if f.envAt+1 < len(f.sched.at) || f.env.outage || !(f.env.capacity > 0) {
		return 0, false
	}
	for _, m := range f.env.repOut {
		if m != "" {
			return 0, false
		}
	}
	recent := f.recentArrivals(now)
	share := f.env.capacity / float64(len(f.origin))
	c0 := math.Inf(1)
	for r, m := range f.origin {
		// A worker holds each request workers/rate × factor seconds
		// (truncated to the nanosecond, hence the 1 ns less).
		per := 1e9*f.env.factor[r]/share - 1
		q := int64(m.Queued())
		if q-recent < 1 || float64(q-recent+1)*per <= float64(f.early.timeout+earlyMargin) {
			return 0, false
		}
		c0 = min(c0, float64(now)+float64(q+1)*per)
	}
	if c0 >= math.MaxInt64/2 {
		return math.MaxInt64 / 2, true
	}
	return int64(c0), true
}

// recentArrivals bounds the requests that reached the origin within one
// timeout (and the margin) before now: the attempts the hop that calls it
// sent in the ticks that window touches. Only attempts sent during the
// run are counted, which is all there are before its end.
func (f *fleet) recentArrivals(now int64) int64 { return f.recentWithin(now, f.early.timeout) }

// recentWithin bounds the requests that reached the origin within window
// (and the margin) before now, as recentArrivals does.
func (f *fleet) recentWithin(now, window int64) int64 {
	from := max((now-window-earlyMargin)/f.tickNs, 0)
	var n int64
	for k := int(from); k < f.nTicks && int64(k)*f.tickNs <= now; k++ {
		n += f.oticks[k].offered
	}
	return n
}
