package sim

import (
	"math/rand/v2"
	"time"

	"github.com/retrystorm/retrystorm/resil"
	"github.com/retrystorm/retrystorm/resil/balance"
	"github.com/retrystorm/retrystorm/resil/outlier"
	"github.com/retrystorm/retrystorm/scenario"
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

// replicaState is one hop's pickers, detectors and per-replica counts:
// the fleet's, over the layer its intents call (the origin, or a chain's
// first tier), or a tier's client's, over the next layer. Each client
// instance of the hop (each of the fleet's clients, each replica of the
// calling tier) has a picker and a detector of its own, fed by its own
// attempts alone, as each Envoy has its own cluster's outlier detector
// and load balancer and each gRPC channel its own: a detector's request
// volumes and consecutive counts are one proxy's, not the fleet's.
type replicaState struct {
	n      int        // replicas of the layer called
	inst   []instance // per client instance; nil when the hop neither balances nor detects
	base   int32      // the first client instance's policy: an attempt's instance is its intent's client less base
	bal    bool       // the hop has pickers
	det    bool       // the hop has detectors
	every  int64      // the detectors' interval
	reps   []ReplicaResult
	ejNs   []int64 // time ejected by most instances, per replica, sampled at each tick's end
	noHost int64
	repS   []ReplicaSeries // per replica, when there are at most MaxReplicaSeries; nil otherwise
}

// instance is one client instance's picker and detector (either may be
// nil), and when its detector's next evaluation is due.
type instance struct {
	bal  balance.Picker
	det  *outlier.Detector
	next int64
}

// newReplicaState builds fleet idx's picker and detector, if it has them,
// and the per-replica counts if the scenario balances, detects or names a
// replica, over the layer its intents call.
func (f *fleet) newReplicaState(idx int) error {
	cfg, sc := f.cfg, f.sc
	// A replica named is the origin's: through tiers the fleet calls the
	// first tier, whose ground truth is kept only when the fleet balances.
	names := sc.NamesReplicas() && len(sc.Tiers) == 0
	if cfg.Balancer.Use == "" && !cfg.OutlierDetection.Detects() && !names {
		return nil
	}
	n := f.replicas
	if len(sc.Tiers) > 0 {
		n = max(sc.Tiers[0].Server.Replicas, 1)
	}
	return f.replicaState.init(f, n, int(f.clients), 0, &cfg.Balancer, &cfg.OutlierDetection, uint64(idx))
}

// ownReplicas is the replica state of the fleet's own calls, or nil when
// it keeps none.
func (f *fleet) ownReplicas() *replicaState {
	if f.reps == nil {
		return nil
	}
	return &f.replicaState
}

// init builds rs over n replicas with balancer b and detector od (either
// may be unset), one of each per client instance (instances of them, the
// first at policy base), drawing from the streams of key. With
// Options.sharedReplicas every instance shares the first's (the model
// before issue 36, kept to measure what the instances cost).
func (rs *replicaState) init(f *fleet, n, instances int, base int32, b *scenario.Balancer, od *scenario.OutlierDetection, key uint64) error {
	sc := f.sc
	rs.n, rs.base = n, base
	if b.Use != "" || od.Detects() {
		rs.inst = make([]instance, max(instances, 1))
	}
	for i := range rs.inst {
		if i > 0 && f.sharedReplicas {
			rs.inst[i] = rs.inst[0]
			continue
		}
		k := key | uint64(i)<<32
		det, err := od.NewDetector(n, rand.NewPCG(sc.Seed, detectorStream|k))
		if err != nil {
			return err
		}
		bal, err := b.NewPicker(n, det, rand.NewPCG(sc.Seed, pickerStream|k))
		if err != nil {
			return err
		}
		in := &rs.inst[i]
		in.det, in.bal = det, bal
		rs.bal, rs.det = bal != nil, det != nil
		if det != nil {
			if err := det.Advance(f.vt(0)); err != nil { // starts its first interval
				return err
			}
			rs.every = int64(det.Settings().Interval)
			in.next = rs.every
		}
	}
	rs.reps = make([]ReplicaResult, n)
	for r := range rs.reps {
		rs.reps[r].Replica = r
	}
	rs.ejNs = make([]int64, n)
	if n <= MaxReplicaSeries && n*f.nTicks <= maxReplicaSeriesTicks {
		rs.repS = newReplicaSeries(n, f.nTicks, rs.det)
	}
	return nil
}

// of returns the instance attempt a belongs to: its intent's client's.
func (rs *replicaState) of(f *fleet, a *attempt) *instance {
	return &rs.inst[f.ints[a.intent].client-rs.base]
}

// maxReplicaSeriesTicks bounds one hop's replica series, replicas ×
// ticks: 6 MB of counts, so that a long run at a fine tick through a
// chain of tiers does not hold hundreds of megabytes of them.
const maxReplicaSeriesTicks = 1 << 18

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

// advance runs the evaluations of instance in's detector due by now.
func (rs *replicaState) advance(f *fleet, in *instance, now int64) {
	if in.det == nil || now < in.next {
		return
	}
	in.det.Advance(f.vt(now))
	for in.next <= now {
		in.next += rs.every
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
func (rs *replicaState) pick(f *fleet, a *attempt, now int64, avoid int32) bool {
	in := rs.of(f, a)
	rs.advance(f, in, now)
	t := f.vt(now)
	r, err := in.bal.Pick(t)
	if err != nil {
		return false
	}
	for k := 0; k < hedgeRepicks && int32(r) == avoid && rs.n > 1; k++ {
		r2, err := in.bal.Pick(t)
		if err != nil {
			break
		}
		in.bal.Done(t, r, 0, resil.OutcomeIgnored)
		r = r2
	}
	a.replica = uint16(r)
	a.flags |= attPicked
	return true
}

// sentTo counts attempt a at its replica, or as finding none.
func (rs *replicaState) sentTo(a *attempt) {
	if a.tick < 0 {
		return
	}
	if rs.bal && a.flags&attPicked == 0 {
		rs.noHost++
		return
	}
	rs.reps[a.replica].Attempts++
	if rs.repS != nil {
		rs.repS[a.replica].Attempts[a.tick]++
	}
}

// ended is attempt a's end at now, with outcome kind (resil's, or
// outcomeRefused): the picker hears of it, the detector records it, and
// its replica counts it.
func (rs *replicaState) ended(f *fleet, a *attempt, now int64, kind resil.Outcome) {
	if rs.bal && a.flags&attPicked == 0 {
		return // it found no replica
	}
	if a.flags&attPicked != 0 {
		a.flags &^= attPicked
		t := f.vt(now)
		in := rs.of(f, a)
		in.bal.Done(t, int(a.replica), time.Duration(now-a.sent), policyOutcome(kind))
		if in.det != nil && kind != resil.OutcomeIgnored {
			in.det.Record(t, int(a.replica), detectorResult(kind, a.req >= 0))
		}
	}
	if a.tick < 0 {
		return
	}
	r := &rs.reps[a.replica]
	switch kind {
	case resil.OutcomeSuccess:
		r.Successes++
		if rs.repS != nil {
			rs.repS[a.replica].Successes[a.tick]++
		}
	case resil.OutcomeIgnored:
		r.Cancelled++
	default:
		r.Failures++
		if rs.repS != nil {
			rs.repS[a.replica].Failures[a.tick]++
		}
	}
}

// detectorResult is how outlier detection sees an attempt's end: an error
// answer is a 5xx, an overload rejection a 503 (a gateway error), a
// refused connection, or a timeout of an attempt that never reached its
// replica (a black hole), a failure to connect (a local-origin failure,
// which Envoy counts as a gateway error unless it splits them), and a
// timeout of one the replica took in (reached: a stalled or slow replica)
// a connection's success and then a timeout (outlier.Timeout).
func detectorResult(kind resil.Outcome, reached bool) outlier.Result {
	switch kind {
	case resil.OutcomeSuccess:
		return outlier.Success
	case resil.OutcomeFailure:
		return outlier.Error5xx
	case resil.OutcomeThrottled, outcomeGateway:
		return outlier.GatewayError // a 503; a tier's 502 or 504
	case resil.OutcomeTimeout:
		if reached {
			return outlier.Timeout
		}
	}
	return outlier.LocalFailure
}

// sampleEjected counts tick t, ending at end, for each replica most
// client instances' detectors have ejected then (half or more: a
// replica is out of most callers' rotation). With one instance, its own.
func (rs *replicaState) sampleEjected(f *fleet, t int, end int64) {
	insts := rs.instances()
	for i := range insts {
		rs.advance(f, &insts[i], end)
	}
	for r := range rs.ejNs {
		n := 0
		for i := range insts {
			if insts[i].det.Ejected(r) {
				n++
			}
		}
		if 2*n >= len(insts) && n > 0 {
			rs.ejNs[r] += f.tickNs
			if rs.repS != nil {
				rs.repS[r].Ejected[t] = true
			}
		}
	}
}

// instances returns the distinct instances: one when they share theirs.
func (rs *replicaState) instances() []instance {
	if f := rs.inst; len(f) > 1 && f[0].det == f[1].det && f[0].bal == f[1].bal {
		return f[:1]
	}
	return rs.inst
}

// replicaResults returns the per-replica ground truth, nil when not kept.
func (rs *replicaState) results() ([]ReplicaResult, int64) {
	if rs.reps == nil {
		return nil, 0
	}
	out := make([]ReplicaResult, len(rs.reps))
	copy(out, rs.reps)
	for r := range out {
		out[r].EjectedSeconds = time.Duration(rs.ejNs[r]).Seconds()
		for _, in := range rs.instances() {
			if in.det != nil {
				out[r].Ejections += int64(in.det.Host(r).Ejections)
			}
		}
		if rs.repS != nil {
			out[r].Series = &rs.repS[r]
		}
	}
	return out, rs.noHost
}
