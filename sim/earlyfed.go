//go:build !js

package sim

import (
	"math"
	"slices"

	"github.com/retrystorm/retrystorm/origin"
	"github.com/retrystorm/retrystorm/scenario"
)

// The fed queue rule: the queue rule with the intents still to come
// counted in (docs/early-exit.md). The queue rule proves a collapse only
// once the queue at hand outlasts the rest of the run; a metastable queue
// that the storm keeps long, tick after tick, never does. But every
// intent still to arrive sends a first attempt that joins the queue
// behind it, and FIFO holds each later request behind those too. With
// the intents to come drawn ahead, a request that joins the queue when n
// of them have reached it ends no earlier than now + (Q + n + 1)·s/w.

// fed is what the fed rule needs of a run: when its conditions hold for
// the whole run (newFed), the longest a first attempt takes from the
// fleet to the origin and, once the rate is final, the arrival times of
// the intents still to come.
type fed struct {
	transit int64   // the tiers' own work, which a first attempt passes through
	times   []int64 // the intents to come, drawn ahead
	drawn   bool    // times holds every arrival from when they were drawn to the end
	tooMany bool    // more than maxFedArrivals were to come: the rule is off
}

// maxFedArrivals bounds the intents the rule draws ahead (8 bytes each):
// past it, the run goes without the rule.
const maxFedArrivals = 1 << 20

// newFed returns the fed rule's state for f, or nil when some intent's
// first attempt might not join the origin's queue, or not within a known
// time of its arrival: every policy (the fleet's and the tiers') sends
// every first attempt (no breaker, no adaptive throttle, no pacer), no
// picker or detector can find no host, the origin is one replica with an
// unbounded queue and no faults of its own, and each tier serves every
// request it gets in a fixed time (a concurrency model of fixed latency,
// no limit and no deadline shedding) before it calls the next layer. The queue rule's own conditions
// (queueRuleHolds, no hedging, no pacer) are newEarly's.
func newFed(f *fleet) *fed {
	sc := f.sc
	o := &sc.Origin
	if len(f.origin) != 1 || o.QueueLimit != 0 || len(o.Faults) > 0 || f.reps != nil || f.chain != nil && f.chain.kept {
		return nil
	}
	for i := range f.policies {
		if p := &f.policies[i]; p.Breaker != nil || p.Throttle != nil || p.Pacer != nil {
			return nil
		}
	}
	r := &fed{}
	for _, t := range sc.Tiers {
		s := &t.Server
		if s.Model != scenario.ModelConcurrency || s.PerInflight != 0 || !s.ServiceTime.IsFixed() || len(s.Faults) > 0 || s.Base <= 0 {
			return nil
		}
		// A tier with a limit or deadline shedding refuses at its door
		// what the rule counts on to reach the queue: a tier limited to L
		// calls held until its client's timeout lets through L per
		// timeout, and the queue drains behind it.
		if _, admits, err := origin.ShedderSettings(s); err != nil || admits {
			return nil
		}
		r.transit += int64(s.Base)
	}
	// A first attempt still out when it reaches the last tier: a tier
	// that propagates deadlines does not call for an attempt already
	// given up.
	if f.timeout <= r.transit+earlyMargin || f.deadline > 0 && f.deadline <= r.transit+earlyMargin {
		return nil
	}
	return r
}

// fedArrivals returns the arrival times of the intents to come from now
// on, drawn ahead (and the stream put back) the first time it is asked,
// once the rate is final: they are those the run will draw. ok is false
// when they are too many to keep.
func (f *fleet) fedArrivals(now int64) (times []int64, ok bool) {
	r := f.early.fed
	if !r.drawn {
		r.drawn = true
		if f.env.rate*float64(f.end-now)/1e9 > maxFedArrivals {
			r.tooMany = true
			return nil, false
		}
		saved, ahead, next := *f.early.arrivals, f.ahead, f.nextArrival
		for t := next; t < f.end && !r.tooMany; t = satAdd(t, f.gap()) {
			r.times = append(r.times, t)
			r.tooMany = len(r.times) > maxFedArrivals
		}
		*f.early.arrivals, f.ahead, f.nextArrival = saved, ahead, next
		if r.tooMany {
			r.times = nil
		}
	}
	if r.tooMany {
		return nil, false
	}
	k, _ := slices.BinarySearch(r.times, now)
	return r.times[k:], true
}

// fedQueue is the fed rule's account of the origin's queue at now: q0
// requests wait, a worker holds each per nanoseconds (workers together,
// hence the least time between two starts on average), and times are the
// intents to come. fedQueue reports false when the rule does not apply at
// now: the triggers have not set their last conditions, an outage is in
// force, or the intents to come are too many to draw.
func (f *fleet) fedQueue(now int64) (q0 int64, per float64, times []int64, ok bool) {
	if f.early.fed == nil || f.envAt+1 < len(f.sched.at) || f.env.outage || !(f.env.capacity > 0) || f.env.repOut != nil {
		return 0, 0, nil, false
	}
	per = 1e9*f.env.factor[0]/f.env.capacity - 1
	q0 = int64(f.origin[0].Queued())
	if float64(q0+1)*per <= float64(f.timeout+earlyMargin) {
		return 0, 0, nil, false // an attempt sent now could be answered in time
	}
	times, ok = f.fedArrivals(now)
	return q0, per, times, ok
}

// fedFails reports whether every fleet attempt sent in [x, y) fails: a
// request any of them makes joins the origin's queue at some a ≥ its
// send time s, behind the q0 queued at now and every intent to come that
// arrived by s − transit (its first attempt has joined by s), so it ends
// no earlier than now + (q0 + n(s) + 1)·per, which the rule requires to
// be past s + the fleet's timeout. Between two arrivals the bound falls
// as s grows, so it is checked just before each arrival counts and at y.
func (f *fleet) fedFails(now, x, y int64, q0 int64, per float64, times []int64) bool {
	slack := float64(f.timeout + earlyMargin)
	lag := f.early.fed.transit + earlyMargin
	// n(s): the arrivals at or before s − lag.
	n, _ := slices.BinarySearch(times, x-lag+1)
	passes := func(n int, s int64) bool {
		return float64(now)+float64(q0+int64(n)+1)*per-float64(s) > slack
	}
	for ; n < len(times) && times[n]+lag < y; n++ {
		if c := times[n] + lag; c > x && !passes(n, c) {
			return false // just before arrival n counts
		}
	}
	return passes(n, y)
}

// fedCannotRecover is cannotRecover by the fed rule: some tick of the last
// RecoveryTail ticks after the triggers, and from now's next tick on,
// holds enough intents' first tries, all failed (fedFails), to be past
// the baseline's tolerance.
func (f *fleet) fedCannotRecover(now int64, baseline float64) bool {
	q0, per, times, ok := f.fedQueue(now)
	if !ok {
		return false
	}
	need := triesPastTolerance(baseline)
	if need == 0 {
		return false
	}
	from := max(f.early.endTk, f.nTicks-RecoveryTail, int((now+f.tickNs-1)/f.tickNs))
	for k := from; k < f.nTicks; k++ {
		x, y := int64(k)*f.tickNs, int64(k+1)*f.tickNs
		lo, _ := slices.BinarySearch(times, x)
		hi, _ := slices.BinarySearch(times, y)
		if int64(hi-lo) >= need && f.fedFails(now, x, y, q0, per, times) {
			return true
		}
	}
	return false
}

// fedAllLost reports whether the fed rule proves at now that every intent
// still open, and every one to come, is lost: no attempt any of them may
// send (until the last of them can send no more, early.life after the
// run's end) can be answered in time; and the attempts out at now cannot
// be either, their requests being among the last `recent` of the queue
// (those that reached the origin within the fleet's timeout), behind at
// least one that did not.
func (f *fleet) fedAllLost(now int64) bool {
	q0, per, times, ok := f.fedQueue(now)
	if !ok {
		return false
	}
	recent := f.recentWithin(now, f.timeout)
	if q0-recent < 1 || float64(q0-recent+1)*per <= float64(f.timeout+earlyMargin) {
		return false
	}
	last := satAdd(f.end, f.early.life+earlyMargin)
	if last >= math.MaxInt64/2 {
		return false
	}
	return f.fedFails(now, now, last, q0, per, times)
}
