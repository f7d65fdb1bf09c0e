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

	"github.com/retrystorm/retrystorm/calibrate"
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
	// timeouts are the errors that were timeouts, where the source counts
	// them apart (Envoy's upstream_rq_timeout): the rest were answers.
	timeouts []float64
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

// answerStatus names, per source, the series of its latency histogram's
// count that were answers, where its latency filter keeps fewer (the
// latency is a success's, the service time calibrate fits). gRPC's
// server counts its calls by status (grpc_server_call_duration_seconds,
// grpc.status: grpc-go v1.85.0 stats/opentelemetry/server_metrics.go)
// and its latency is the OK calls'; but an error the server answered is
// an answer all the same: counting only OK calls as answers made an
// error blip look like a shortage (more attempts than answers: a
// capacity drop). A call that ran out of time (DEADLINE_EXCEEDED) or
// whose caller left (CANCELLED) got no answer. resil's latency is its
// successes' and its attempt duration has the outcome (resil/outcome.go):
// a failure is an answer; a timeout, an attempt ignored (the caller
// cancelled) and a throttled one (an overload rejection: a shortage that
// says so) are not.
var answerStatus = map[string]calibrate.Ref{
	"grpc":  {Label: "grpc_status", Values: []string{"DEADLINE_EXCEEDED", "CANCELLED"}, Not: true},
	"resil": {Label: "outcome", Values: []string{"timeout", "ignored", "throttled"}, Not: true},
}

// measure reads the per-step series of w, from src's metrics, dropping
// the steps at either end with no attempts (before the load began or
// after it ended).
func measure(w *calibrate.Window, src *calibrate.Source) (*Measured, error) {
	if !w.Has(src.Attempts.Metric) {
		return nil, inputf("no %s in the window: it is how %s counts requests", src.Attempts.Metric, src.Name)
	}
	att := calibrate.Counter(w, src.Attempts)
	at := func(s []time.Time, v []float64) map[int64]float64 {
		out := make(map[int64]float64, len(s))
		for i, t := range s {
			out[t.UnixMilli()] = v[i]
		}
		return out
	}
	counter := func(r calibrate.Ref) map[int64]float64 {
		if r.Metric == "" || !w.Has(r.Metric) {
			return nil
		}
		c := calibrate.Counter(w, r)
		return at(c.T, c.V)
	}
	gauge := func(r calibrate.Ref) map[int64]float64 {
		if r.Metric == "" || !w.Has(r.Metric) {
			return nil
		}
		g := calibrate.Gauge(w, r)
		return at(g.T, g.V)
	}
	intents := counter(src.Intents)
	retries := counter(src.Retries)
	errs := counter(src.Errors)
	timeouts := counter(src.Timeouts)
	wasted := counter(src.Wasted)
	queue := gauge(src.Queue)
	var count, sum, answers map[int64]float64
	if src.Latency.Base != "" && w.Has(src.Latency.Base+"_count") {
		count = counter(calibrate.Ref{Metric: src.Latency.Base + "_count", Label: src.Latency.Filter.Label, Values: src.Latency.Filter.Values, Not: src.Latency.Filter.Not})
		sum = counter(calibrate.Ref{Metric: src.Latency.Base + "_sum", Label: src.Latency.Filter.Label, Values: src.Latency.Filter.Values, Not: src.Latency.Filter.Not})
		answers = count
		if a, ok := answerStatus[src.Name]; ok {
			answers = counter(calibrate.Ref{Metric: src.Latency.Base + "_count", Label: a.Label, Values: a.Values, Not: a.Not})
		}
	}
	step := w.Step.Seconds()
	first, last := -1, -1
	for i, v := range att.V {
		if v > 0 {
			if first < 0 {
				first = i
			}
			last = i
		}
	}
	if first < 0 {
		return nil, inputf("%s counted no attempt in the window: an empty window, or the wrong selector", src.Attempts.Metric)
	}
	m := &Measured{Step: step, start: att.T[first].Add(-w.Step)}
	for i := first; i <= last; i++ {
		k := att.T[i].UnixMilli()
		a := att.V[i]
		in := a
		switch {
		case intents != nil:
			in = intents[k]
		case retries != nil:
			in = max(0, a-retries[k])
		}
		e := errs[k]
		served := a - e
		lat := 0.0
		if count != nil {
			served = answers[k]
			if count[k] > 0 {
				lat = sum[k] * src.Latency.Scale / count[k]
			}
		}
		if wasted != nil {
			served += wasted[k]
			m.Wasted = append(m.Wasted, wasted[k]/step)
		}
		m.T = append(m.T, att.T[i].Sub(m.start).Seconds())
		m.Intents = append(m.Intents, in/step)
		m.Attempts = append(m.Attempts, a/step)
		m.Errors = append(m.Errors, e/step)
		m.ErrorRate = append(m.ErrorRate, share(e, a))
		m.Served = append(m.Served, served/step)
		m.Latency = append(m.Latency, lat)
		if queue != nil {
			m.Queue = append(m.Queue, queue[k])
		}
		if timeouts != nil {
			m.timeouts = append(m.timeouts, min(e, timeouts[k])/step)
		}
	}
	if m.n() < MinSteps {
		return nil, inputf("the window has %d steps with traffic: at least %d are needed to tell the time before an incident, the incident and after (a longer window, or a shorter --step)", m.n(), MinSteps)
	}
	return m, nil
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
	k := max(MinBefore, m.n()/4)
	var lat []float64
	for _, l := range m.Latency[:k] {
		if l > 0 {
			lat = append(lat, l)
		}
	}
	b := baseline{rate: median(m.Intents[:k]), errShare: median(m.ErrorRate[:k]), served: median(m.Served[:k])}
	ans := make([]float64, k)
	for i := range ans {
		ans[i] = m.answeredErrors(i)
	}
	b.answered = median(ans)
	b.errHi = b.errShare + max(ErrorJump, Noise*spread(m.ErrorRate[:k], b.errShare))
	b.ansHi = b.answered + max(ErrorJump, Noise*spread(ans, b.answered))
	b.rateHi = max(LoadJump*b.rate, b.rate+Noise*spread(m.Intents[:k], b.rate))
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
		if strong || i+1 == m.n() {
			return i
		}
		if next, _ := abnormal(m, b, i+1); next {
			return i
		}
	}
	return -1
}

// abnormal says whether step i is abnormal and, if so, whether by a
// strong sign (errors, no answers, a load spike) or only by its latency
// or backlog.
func abnormal(m *Measured, b baseline, i int) (ab, strong bool) {
	switch {
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
		if k, ok := recovery(m.ErrorRate, t.end, v.Baseline); ok {
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
func recovery(rate []float64, end int, base float64) (int, bool) {
	n := len(rate)
	first := n
	for k := n - 1; k >= end; k-- {
		if rate[k] > base+Tolerance {
			break
		}
		first = k
	}
	if n-first < sim.RecoveryTail {
		return 0, false
	}
	return first - end, true
}
