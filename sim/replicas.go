package sim

import (
	"errors"
	"math/rand/v2"
	"time"

	"github.com/retrystorm/retrystorm/resil"
	"github.com/retrystorm/retrystorm/resil/balance"
	"github.com/retrystorm/retrystorm/resil/outlier"
)

// Replicas, as a proxy in front of them sees them: the fleet's picker
// (resil/balance) chooses the replica of each attempt and hears how it
// ended, and its outlier detector (resil/outlier) records every outcome and
// ejects, on virtual time. The simulator decides nothing here: it drives
// resil's types and counts what happened at each replica.

// Random streams of the picker's seed and the detector's draws, apart
// from the arrivals', the jitter's and the throttles'.
const (
	pickerStream   = 0xba1a << 48
	detectorStream = 0x0e1e << 48
)

// replicaState is a fleet's picker, detector and per-replica counts.
type replicaState struct {
	bal      balance.Picker
	det      *outlier.Detector
	detEvery int64 // the detector's interval
	detNext  int64 // the next evaluation due
	reps     []ReplicaResult
	ejNs     []int64 // time ejected, per replica, sampled at each tick's end
	noHost   int64
	repS     []ReplicaSeries // per replica, when there are at most MaxReplicaSeries; nil otherwise
}

// newReplicaState builds fleet idx's picker and detector, if it has them,
// and the per-replica counts if the scenario balances, detects or names a
// replica.
func (f *fleet) newReplicaState(idx int) error {
	cfg, sc := f.cfg, f.sc
	if cfg.Balancer.Use == "" && !cfg.OutlierDetection.Detects() && !sc.NamesReplicas() {
		return nil
	}
	if len(sc.Tiers) > 0 {
		return errors.New("sim: a balancer, outlier detection or replica faults with tiers are not simulated")
	}
	det, err := cfg.OutlierDetection.NewDetector(f.replicas, rand.NewPCG(sc.Seed, detectorStream|uint64(idx)))
	if err != nil {
		return err
	}
	bal, err := cfg.Balancer.NewPicker(f.replicas, det, rand.NewPCG(sc.Seed, pickerStream|uint64(idx)))
	if err != nil {
		return err
	}
	f.det, f.bal = det, bal
	if det != nil {
		if err := det.Advance(f.vt(0)); err != nil { // starts its first interval
			return err
		}
		f.detEvery = int64(det.Settings().Interval)
		f.detNext = f.detEvery
	}
	f.reps = make([]ReplicaResult, f.replicas)
	for r := range f.reps {
		f.reps[r].Replica = r
	}
	f.ejNs = make([]int64, f.replicas)
	if f.replicas <= MaxReplicaSeries {
		f.repS = newReplicaSeries(f.replicas, f.nTicks, det != nil)
	}
	return nil
}

// newReplicaSeries returns n replicas' series of ticks ticks each, on one
// backing array; with Ejected when ejected.
func newReplicaSeries(n, ticks int, ejected bool) []ReplicaSeries {
	out := make([]ReplicaSeries, n)
	counts := make([]int64, 3*n*ticks)
	var ej []bool
	if ejected {
		ej = make([]bool, n*ticks)
	}
	for r := range out {
		c := counts[3*r*ticks:]
		out[r] = ReplicaSeries{Attempts: c[:ticks:ticks], Successes: c[ticks : 2*ticks : 2*ticks], Failures: c[2*ticks : 3*ticks : 3*ticks]}
		if ejected {
			out[r].Ejected = ej[r*ticks : (r+1)*ticks : (r+1)*ticks]
		}
	}
	return out
}

// advance runs the detector's evaluations due by now.
func (f *fleet) advance(now int64) {
	if f.det == nil || now < f.detNext {
		return
	}
	f.det.Advance(f.vt(now))
	for f.detNext <= now {
		f.detNext += f.detEvery
	}
}

// hedgeRepicks is how many more picks a hedge makes to find another
// replica than its attempt's: Envoy's previous_hosts retry host predicate
// with host_selection_retry_max_attempts 3.
const hedgeRepicks = 3

// pick asks the fleet's picker for attempt a's replica at now, and reports
// false when there is none (every replica ejected, panic mode off). A
// hedge goes elsewhere than the attempt it runs beside (avoid) if the
// picker offers another replica within hedgeRepicks more picks.
func (f *fleet) pick(a *attempt, now int64, avoid int32) bool {
	f.advance(now)
	t := f.vt(now)
	r, err := f.bal.Pick(t)
	if err != nil {
		return false
	}
	for k := 0; k < hedgeRepicks && int32(r) == avoid && f.replicas > 1; k++ {
		r2, err := f.bal.Pick(t)
		if err != nil {
			break
		}
		f.bal.Done(t, r, 0, resil.OutcomeIgnored)
		r = r2
	}
	a.replica, a.picked = uint16(r), true
	return true
}

// sentTo counts attempt a at its replica, or as finding none.
func (f *fleet) sentTo(a *attempt) {
	if a.tick < 0 {
		return
	}
	if f.bal != nil && !a.picked {
		f.noHost++
		return
	}
	f.reps[a.replica].Attempts++
	if f.repS != nil {
		f.repS[a.replica].Attempts[a.tick]++
	}
}

// ended is attempt a's end at now, with outcome kind (resil's, or
// outcomeRefused): the picker hears of it, the detector records it, and
// its replica counts it.
func (f *fleet) ended(a *attempt, now int64, kind resil.Outcome) {
	if f.bal != nil && !a.picked {
		return // it found no replica
	}
	if a.picked {
		a.picked = false
		t := f.vt(now)
		f.bal.Done(t, int(a.replica), time.Duration(now-a.sent), policyOutcome(kind))
		if f.det != nil && kind != resil.OutcomeIgnored {
			f.det.Record(t, int(a.replica), detectorResult(kind))
		}
	}
	if a.tick < 0 {
		return
	}
	r := &f.reps[a.replica]
	switch kind {
	case resil.OutcomeSuccess:
		r.Successes++
		if f.repS != nil {
			f.repS[a.replica].Successes[a.tick]++
		}
	case resil.OutcomeIgnored:
		r.Cancelled++
	default:
		r.Failures++
		if f.repS != nil {
			f.repS[a.replica].Failures[a.tick]++
		}
	}
}

// detectorResult is how outlier detection sees an attempt's end: an error
// answer is a 5xx, an overload rejection a 503 (a gateway error), and a
// timeout or a refused connection no answer at all (a local-origin
// failure, which Envoy counts as a gateway error unless it splits them).
func detectorResult(kind resil.Outcome) outlier.Result {
	switch kind {
	case resil.OutcomeSuccess:
		return outlier.Success
	case resil.OutcomeFailure:
		return outlier.Error5xx
	case resil.OutcomeThrottled:
		return outlier.GatewayError
	}
	return outlier.LocalFailure
}

// sampleEjected counts tick t, ending at end, for each replica ejected
// then.
func (f *fleet) sampleEjected(t int, end int64) {
	f.advance(end)
	for r := range f.ejNs {
		if f.det.Ejected(r) {
			f.ejNs[r] += f.tickNs
			if f.repS != nil {
				f.repS[r].Ejected[t] = true
			}
		}
	}
}

// replicaResults returns the per-replica ground truth, nil when not kept.
func (f *fleet) replicaResults() ([]ReplicaResult, int64) {
	if f.reps == nil {
		return nil, 0
	}
	out := make([]ReplicaResult, len(f.reps))
	copy(out, f.reps)
	for r := range out {
		out[r].EjectedSeconds = time.Duration(f.ejNs[r]).Seconds()
		if f.det != nil {
			out[r].Ejections = int64(f.det.Host(r).Ejections)
		}
		if f.repS != nil {
			out[r].Series = &f.repS[r]
		}
	}
	return out, f.noHost
}
