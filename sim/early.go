package sim

import (
	"math"
)

// EarlyExit says whether a run may stop before it has followed every
// intent to its end, once what is left can no longer change what its
// caller reads (docs/early-exit.md has the rules and their proofs). The
// zero value never stops early: a run's result is as it always was.
type EarlyExit uint8

const (
	// NoEarlyExit plays the run to its end and follows every intent that
	// arrived during it to its own end.
	NoEarlyExit EarlyExit = iota
	// SkipCertainDrain plays the run to its end, then stops following the
	// intents still open when the queue rule proves that none of them can
	// succeed any more: they are counted lost at once. Every count of the
	// run's ticks, the fleet's intents lost, its recovery and its baseline
	// are what the whole run gives; the fleet's failed attempts of its
	// last ticks are counted as they will end (failed). What only the ends
	// after the run add is not counted: successes served late for nobody,
	// timeouts apart from other failures, wasted work, victims, breaker
	// trips, budget denials, the losses' reasons (Unfinished, where the
	// whole run says which stop ended each), a tier's calls.
	SkipCertainDrain
	// StopWhenDecided is SkipCertainDrain, and also ends the run as soon
	// as the fleet's recovery is decided: it was never healthy before the
	// triggers, or a queue rule (the queue rule, or the fed one, which
	// counts the intents still to come) proves that it cannot recover
	// before the run ends. The result says where it stopped (FleetResult.Ended);
	// its recovery (never), its baseline and NeverHealthy are the whole
	// run's, and every other count stops there.
	StopWhenDecided
	// StopWhenLost is SkipCertainDrain, and also ends the run as soon as
	// a queue rule proves that the fleet cannot recover and that every
	// intent still open, and every one still to arrive before the run's
	// end, is lost: no attempt any of them may send can be answered in
	// time. The intents to come are drawn ahead and counted lost at once
	// (LostBy.Unfinished, with those still open). Its recovery (never),
	// baseline, NeverHealthy, intents (per tick too) and intents lost are
	// the whole run's; every other count stops where it did. It asks more
	// of the queue than StopWhenDecided does, so it stops later, and never
	// by the never-healthy rule alone.
	StopWhenLost
)

// The rules an early exit names (EarlyEnd.Rule).
const (
	// EarlyQueue: the origin's FIFO queue holds more work than it can
	// serve before any answer could come in time again.
	EarlyQueue = "queue_cannot_drain"
	// EarlyNeverHealthy: the fleet failed most of its tries before the
	// triggers (Summary.NeverHealthy): it does not recover.
	EarlyNeverHealthy = "never_healthy"
	// EarlyFedQueue: the queue at hand and the first attempts of the
	// intents still to come hold every attempt the rule needs past its
	// timeout (earlyfed.go).
	EarlyFedQueue = "queue_stays_fed"
)

// EarlyEnd says where a run with an EarlyExit stopped, and by which rule.
type EarlyEnd struct {
	// At is when, in seconds of virtual time.
	At   float64 `json:"at"`
	Rule string  `json:"rule"`
	// Truncated: the run stopped before its end (StopWhenDecided,
	// StopWhenLost); its counts and series stop at At. False: it played to
	// its end, and only the open intents' ends after it were not followed.
	Truncated bool `json:"truncated"`
	// AllLost: the run stopped before its end by StopWhenLost's rule; its
	// intents, per tick and in all, and its intents lost are the whole
	// run's.
	AllLost bool `json:"all_lost,omitempty"`
}

// settleOpen counts, when the drain rule stopped the run at its end, the
// fleet's attempts still out as the failures they are certain to be (each
// ends failed in the tick it was sent in, as a whole run counts it), so
// that the run's failure series and recovery are the whole run's. A
// fleet without hedging has one attempt out per intent at most.
func (f *fleet) settleOpen() {
	for i := range f.ints {
		in := &f.ints[i]
		if in.free || in.hop != 0 {
			continue
		}
		for a := in.head; a >= 0; a = f.atts[a].next {
			at := &f.atts[a]
			if at.tick < 0 {
				continue
			}
			f.ticks[at.tick].failed++
			if f.reps != nil {
				f.replicaState.failedOpen(at)
			}
		}
	}
}

// failedOpen counts attempt a, still out when the run stopped, as the
// failure it is certain to be at its replica, as ended would.
func (rs *replicaState) failedOpen(a *attempt) {
	if rs.bal && a.flags&attPicked == 0 {
		return // it found no replica
	}
	rs.reps[a.replica].Failures++
	if rs.repS != nil {
		rs.repS[a.replica].Failures[a.tick]++
	}
}

// endSamples takes the samples of the ticks not sampled yet: every one,
// as the whole run would, unless the run stopped before its end (then
// they stay zero, and progress hears that they are done); a run stopped
// at its end first counts its open attempts as the failures they are.
func (f *fleet) endSamples(ended *EarlyEnd) {
	switch {
	case !ended.Truncated:
		f.sampleUpTo(f.nTicks)
		if ended.Rule != "" {
			f.settleOpen()
		}
	case f.progress != nil && f.nextSample < f.nTicks:
		f.progress(f.nTicks - f.nextSample)
	}
	if ended.AllLost {
		f.loseArrivals()
	}
}

// loseArrivals counts, when StopWhenLost's rule stopped the run, the
// intents still to arrive before its end: each in its tick, and lost, as
// the rule proves it will be. The arrival stream is drawn as the run
// would have drawn it (its rate is the last, the rule's condition).
func (f *fleet) loseArrivals() {
	for t := f.nextArrival; t < f.end; t = satAdd(t, f.gap()) {
		if k := t / f.tickNs; k < int64(f.nTicks) {
			f.ticks[k].intents++
		}
		f.sum.IntentsLost++
		f.sum.LostBy.Unfinished++
	}
	f.nextArrival = math.MaxInt64
}

// truncate marks what a run stopped before its end decided: no layer
// recovered. (The fleet's is the rule's conclusion; a tier's is not
// judged, and said false.)
func truncate(r *FleetResult) {
	if !r.Ended.Truncated {
		return
	}
	r.Summary.Recovered, r.Summary.RecoveryTicks = false, nil
	for i := range r.Tiers {
		r.Tiers[i].Summary.Recovered, r.Tiers[i].Summary.RecoveryTicks = false, nil
	}
}
