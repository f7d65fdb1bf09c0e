// Package replay reconstructs an incident from a window of metrics and
// plays it again in the simulator: the traffic as it was (the intents per
// step the window shows), the origin as calibrate fits it from the steps
// before the incident, and the trigger inferred from the window (a
// capacity drop, an error blip, added latency, a stall, a load spike).
// It then says whether the window shows the loop that sustains a
// metastable failure, and replays the same incident with the changes
// that could have prevented it.
//
// The window is read and fitted by package calibrate (the same Window,
// Source and Fit): replay adds only what an incident needs, the per-step
// series and the inference of the trigger.
package replay

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/retrystorm/retrystorm/sim"
)

// ErrInput wraps every error that says the window cannot be replayed
// (too short, no incident start to calibrate before, nothing fitted): a
// command reports it as bad input.
var ErrInput = errors.New("replay")

func inputf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInput, fmt.Sprintf(format, args...))
}

// Thresholds of the inference. A step is abnormal when its error share
// passes the baseline's by ErrorJump, its mean latency is LatencyJump
// times the baseline's, it has no answers, or its intents are LoadJump
// times the base rate.
const (
	ErrorJump   = 0.03
	LatencyJump = 1.5
	LoadJump    = 1.5
	// Noise: a step is abnormal only beyond this many robust standard
	// deviations of the quiet steps too (baseline).
	Noise = 6.0
	// CapacityDrop: a saturated step serving less than this share of the
	// calibrated capacity is a capacity drop; the drop ends at the first
	// step serving CapacityBack of it again.
	CapacityDrop = 0.8
	CapacityBack = 0.9
	// Backlog: a step answering less than this share of its attempts,
	// its queue growing, is saturated.
	Backlog = 0.7
	// QueueShare: a queue, not shrinking, of more than this share of a
	// step's attempts is a saturated origin's; less is a burst.
	QueueShare = 0.1
	// MinBefore is the fewest steps before the incident to calibrate the
	// origin from; MinSteps the fewest of a window.
	MinBefore = 5
	MinSteps  = 20
	// Tolerance is the recovery's: within one percentage point of the
	// baseline error share, as the simulator judges (DESIGN.md).
	Tolerance = 0.01
)

// Measured is the window's per-step series, each per second except the
// shares, the latency (seconds) and the queue (requests). Step i covers
// the Step seconds ending at T[i] seconds from the window's start.
type Measured struct {
	Step      float64   `json:"step_seconds"`
	T         []float64 `json:"t"`
	Intents   []float64 `json:"intents"`
	Attempts  []float64 `json:"attempts"`
	Errors    []float64 `json:"errors"`
	ErrorRate []float64 `json:"error_rate"`
	// Served is the answers the origin gave (its latency histogram's
	// count, plus the work it did for callers that had left, where the
	// source counts it).
	Served []float64 `json:"served"`
	Wasted []float64 `json:"wasted,omitempty"`
	// Latency is the mean latency of the step's answers; 0 where none.
	Latency []float64 `json:"latency_seconds"`
	Queue   []float64 `json:"queue,omitempty"`
	// Missing marks the steps with no value (nil when none is): a metric
	// replay reads has no sample there, or none before it to count an
	// increase from (a failed scrape, a gap in saved answers). Their
	// values above are 0 and mean nothing: such a step is unknown, never
	// abnormal, never a rate. Unknown counts them.
	Missing []bool `json:"missing,omitempty"`
	Unknown int    `json:"unknown_steps,omitempty"`
	// Replayed, where it is set, is the intents per second the replay
	// runs, where they are not Intents: a source that counts its clients'
	// retries as requests (calibrate.Source.RetriesUnseen) shows intents
	// only until calls fail; from ReplayedFrom on they are unknown, and
	// taken as the rate before the incident.
	Replayed     []float64 `json:"intents_replayed,omitempty"`
	ReplayedFrom int       `json:"intents_replayed_from,omitempty"`
	// timeouts are the errors that were timeouts, where the source counts
	// them apart (Envoy's upstream_rq_timeout): the rest were answers.
	timeouts []float64
	// retriesUnseen is calibrate.Source.RetriesUnseen of the source.
	retriesUnseen string
	// start is the time of step 0's start.
	start time.Time
}

func (m *Measured) n() int { return len(m.T) }

// wait is the mean time step i's answers waited in the queue, by Little's
// law (the queue at the step's end over the answers per second); 0
// without a queue gauge.
func (m *Measured) wait(i int) float64 {
	if m.Queue == nil || m.Served[i] <= 0 {
		return 0
	}
	return m.Queue[i] / m.Served[i]
}

// answeredErrors is the share of step i's answers that were errors, where
// the source counts timeouts apart: the errors less the timeouts, over
// the answers (a blip fails a share of what the origin answers, and
// under the overload its retries bring many attempts get no answer);
// else the error share of the attempts. An error blip shows in it; an
// overload shows as timeouts first.
func (m *Measured) answeredErrors(i int) float64 {
	if m.timeouts == nil {
		return m.ErrorRate[i]
	}
	return share(max(0, m.Errors[i]-m.timeouts[i]), m.Served[i])
}

// time is the wall-clock time at which step i ends.
func (m *Measured) time(i int) time.Time {
	return m.start.Add(time.Duration(m.T[i] * float64(time.Second)))
}

func share(a, b float64) float64 {
	if b <= 0 {
		return 0
	}
	return min(1, a/b)
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	c := slices.Clone(v)
	slices.Sort(c)
	if len(c)%2 == 1 {
		return c[len(c)/2]
	}
	return (c[len(c)/2-1] + c[len(c)/2]) / 2
}

// meanOr0 is v's mean, 0 for no value (a span of unknown steps): JSON
// carries no NaN.
func meanOr0(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	return mean(v)
}

func mean(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

// baseline is the window's normal: the medians over its first quarter
// (at least MinBefore steps), where an incident window should start
// quiet, and the thresholds a step must pass to be abnormal.
type baseline struct {
	rate, errShare, latency, served float64
	// answered is the share of answers that were errors
	// (Measured.answeredErrors).
	answered float64
	// errHi, ansHi, latHi and rateHi are the error share, answered-error
	// share, mean latency and intents a step must pass to be abnormal:
	// the baseline's by the fixed jump (ErrorJump, LatencyJump,
	// LoadJump), or by Noise times the quiet steps' own spread, whichever
	// is more: a busy origin's latency varies by more than twice its
	// median from step to step without anything wrong (M/M/c near
	// saturation), and a threshold inside the noise finds incidents in
	// every window.
	errHi, ansHi, latHi, rateHi float64
}

func baselineOf(m *Measured) baseline {
	// The first quarter of the known steps, at least MinBefore: a step
	// without a value says nothing of the normal.
	var idx []int
	for i := range m.n() {
		if m.known(i) {
			idx = append(idx, i)
		}
	}
	idx = idx[:min(len(idx), max(MinBefore, len(idx)/4))]
	pick := func(v []float64) []float64 {
		out := make([]float64, len(idx))
		for j, i := range idx {
			out[j] = v[i]
		}
		return out
	}
	var lat []float64
	for _, l := range pick(m.Latency) {
		if l > 0 {
			lat = append(lat, l)
		}
	}
	intents, errShare := pick(m.Intents), pick(m.ErrorRate)
	b := baseline{rate: median(intents), errShare: median(errShare), served: median(pick(m.Served))}
	ans := make([]float64, len(idx))
	for j, i := range idx {
		ans[j] = m.answeredErrors(i)
	}
	b.answered = median(ans)
	b.errHi = b.errShare + max(ErrorJump, Noise*spread(errShare, b.errShare))
	b.ansHi = b.answered + max(ErrorJump, Noise*spread(ans, b.answered))
	b.rateHi = max(LoadJump*b.rate, b.rate+Noise*spread(intents, b.rate))
	if len(lat) > 0 {
		b.latency = median(lat)
		b.latHi = max(LatencyJump*b.latency, b.latency+Noise*spread(lat, b.latency))
	}
	return b
}

// spread is v's robust standard deviation about its median med: 1.4826
// times the median absolute deviation, which a single wild step does not
// move.
func spread(v []float64, med float64) float64 {
	d := make([]float64, len(v))
	for i, x := range v {
		d[i] = math.Abs(x - med)
	}
	return 1.4826 * median(d)
}

// onset is the first abnormal step, or -1. A step abnormal only by its
// latency (or its backlog) counts when the next step is abnormal too: a
// busy origin's queue has bursts of a step that harm nobody (no errors,
// answers on), and a window's first such burst is not its incident.
func onset(m *Measured, b baseline) int {
	for i := range m.n() {
		ab, strong := abnormal(m, b, i)
		if !ab {
			continue
		}
		next := m.nextKnown(i + 1)
		if strong || next == m.n() {
			return i
		}
		if ab, _ := abnormal(m, b, next); ab {
			return i
		}
	}
	return -1
}

// intents is the intents per second the replay runs: Replayed where set,
// else Intents.
func (m *Measured) intents() []float64 {
	if m.Replayed != nil {
		return m.Replayed
	}
	return m.Intents
}

// assume sets Replayed: Intents to step from, the rate base after it (a
// source that counts its clients' retries as requests shows no intents
// once calls fail: the intents are taken to have stayed at the rate
// before the incident, what it was made of said in the notes).
func (m *Measured) assume(from int, base float64) {
	m.Replayed, m.ReplayedFrom = slices.Clone(m.Intents), from
	for i := from; i < m.n(); i++ {
		m.Replayed[i] = base
	}
}

// prevKnown is the last known step at or before i, or 0.
func (m *Measured) prevKnown(i int) int {
	for i > 0 && !m.known(i) {
		i--
	}
	return max(i, 0)
}

// nextKnown is the first known step from i on, or m.n().
func (m *Measured) nextKnown(i int) int {
	for i < m.n() && !m.known(i) {
		i++
	}
	return i
}

// abnormal says whether step i is abnormal and, if so, whether by a
// strong sign (errors, no answers, a load spike) or only by its latency
// or backlog.
func abnormal(m *Measured, b baseline, i int) (ab, strong bool) {
	switch {
	case !m.known(i):
		// A step without a value is unknown: a failed scrape is what an
		// overloaded target produces, but it is no sign of which load.
		return false, false
	case m.ErrorRate[i] > b.errHi:
		return true, true
	case m.Attempts[i] > 0 && m.Served[i] < 0.05*min(m.Attempts[i], max(b.served, 1e-9)):
		return true, true
	case b.rate > 0 && m.Intents[i] > b.rateHi:
		return true, true
	case b.latency > 0 && m.Latency[i] > b.latHi:
		// Latency beyond what the queue explains is added latency, a
		// strong sign; latency from waiting in a queue may be a burst.
		return true, m.Queue != nil && m.Latency[i]-m.wait(i) > b.latHi
	case m.Served[i] < Backlog*m.Attempts[i] && (m.Queue == nil || (i > 0 && m.Queue[i] > m.Queue[i-1])):
		// Saturated: answers fall behind the attempts while the queue
		// grows, before any latency or error shows it.
		return true, false
	}
	return false, false
}

// errorBaseline is the error share over steps [0, k), attempts-weighted
// as the simulator's failure share is.
func errorBaseline(m *Measured, k int) float64 {
	var e, a float64
	for i := range k {
		e += m.Errors[i]
		a += m.Attempts[i]
	}
	return share(e, a)
}

// judgeWindow is the measured verdict of the window m for the trigger t,
// judged as the simulator judges a run: the baseline before t, and the
// recovery after it, if t ended; never for a window failing past
// sim.UnhealthyBaseline before t, which had no health to recover to.
func judgeWindow(m *Measured, t Trigger) Verdict {
	v := Verdict{Baseline: errorBaseline(m, t.start)}
	v.NeverHealthy = v.Baseline > sim.UnhealthyBaseline
	if t.Ended && !v.NeverHealthy {
		// A step without attempts has no error share: no evidence either
		// way (the lab's pause between two fleets' runs).
		judged := func(i int) bool { return m.known(i) && m.Attempts[i] > 0 }
		if k, ok := recovery(m.ErrorRate, judged, t.end, v.Baseline); ok {
			s := float64(k) * m.Step
			v.Recovered, v.Seconds = true, &s
		}
	}
	return v
}

// recovery judges, as the simulator does (sim's recovery), the first step
// from end on from which every step's error share stays within Tolerance
// of the baseline to the window's end, with at least sim.RecoveryTail
// steps left: steps from end to it, and whether there is one.
//
// A step without a value (known false) neither ends the recovery nor
// counts toward its tail: the tail needs sim.RecoveryTail known steps, and
// the recovery begins at a known one.
func recovery(rate []float64, known func(int) bool, end int, base float64) (int, bool) {
	n := len(rate)
	first, tail := n, 0
	for k := n - 1; k >= end; k-- {
		if !known(k) {
			continue
		}
		if rate[k] > base+Tolerance {
			break
		}
		first = k
		tail++
	}
	if tail < sim.RecoveryTail {
		return 0, false
	}
	return first - end, true
}
