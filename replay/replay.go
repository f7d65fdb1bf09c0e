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
	ErrorJump   = 0.05
	LatencyJump = 2.0
	LoadJump    = 1.5
	// CapacityDrop: a saturated step serving less than this share of the
	// calibrated capacity is a capacity drop; the drop ends at the first
	// step serving CapacityBack of it again.
	CapacityDrop = 0.8
	CapacityBack = 0.9
	// Backlog: a step answering less than this share of its attempts,
	// its queue growing, is saturated.
	Backlog = 0.7
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
	// start is the time of step 0's start.
	start time.Time
}

func (m *Measured) n() int { return len(m.T) }

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
	wasted := counter(src.Wasted)
	queue := gauge(src.Queue)
	var count, sum map[int64]float64
	if src.Latency.Base != "" && w.Has(src.Latency.Base+"_count") {
		count = counter(calibrate.Ref{Metric: src.Latency.Base + "_count", Label: src.Latency.Filter.Label, Values: src.Latency.Filter.Values, Not: src.Latency.Filter.Not})
		sum = counter(calibrate.Ref{Metric: src.Latency.Base + "_sum", Label: src.Latency.Filter.Label, Values: src.Latency.Filter.Values, Not: src.Latency.Filter.Not})
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
			served = count[k]
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
// quiet.
type baseline struct {
	rate, errShare, latency, served float64
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
	if len(lat) > 0 {
		b.latency = median(lat)
	}
	return b
}

// onset is the first abnormal step, or -1.
func onset(m *Measured, b baseline) int {
	for i := range m.n() {
		if abnormal(m, b, i) {
			return i
		}
	}
	return -1
}

func abnormal(m *Measured, b baseline, i int) bool {
	switch {
	case m.ErrorRate[i] > b.errShare+ErrorJump:
		return true
	case b.latency > 0 && m.Latency[i] > LatencyJump*b.latency:
		return true
	case m.Attempts[i] > 0 && m.Served[i] < 0.05*min(m.Attempts[i], max(b.served, 1e-9)):
		return true
	case b.rate > 0 && m.Intents[i] > LoadJump*b.rate:
		return true
	case m.Served[i] < Backlog*m.Attempts[i] && (m.Queue == nil || (i > 0 && m.Queue[i] > m.Queue[i-1])):
		// Saturated: answers fall behind the attempts while the queue
		// grows, before any latency or error shows it.
		return true
	}
	return false
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
