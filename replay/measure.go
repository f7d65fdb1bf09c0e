package replay

import (
	"math"
	"slices"
	"time"

	"github.com/retrystorm/retrystorm/calibrate"
)

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
// after it ended). A step some metric it reads has no value for (a failed
// scrape, a gap in saved answers: calibrate's Unknown) is Missing: its
// values are 0 there, and mean nothing.
func measure(w *calibrate.Window, src *calibrate.Source) (*Measured, error) {
	if !w.Has(src.Attempts.Metric) {
		return nil, inputf("no %s in the window: it is how %s counts requests", src.Attempts.Metric, src.Name)
	}
	unknown := map[int64]bool{}
	at := func(c calibrate.Steps) map[int64]float64 {
		out := make(map[int64]float64, len(c.T))
		for i, t := range c.T {
			out[t.UnixMilli()] = c.V[i]
		}
		for _, t := range c.Unknown {
			unknown[t.UnixMilli()] = true
		}
		return out
	}
	read := func(r calibrate.Ref, counter bool) map[int64]float64 {
		switch {
		case r.Metric == "" || !w.Has(r.Metric):
			return nil
		case counter:
			return at(calibrate.Counter(w, r))
		}
		return at(calibrate.Gauge(w, r))
	}
	att := calibrate.Counter(w, src.Attempts)
	attAt := at(att)
	intents := read(src.Intents, true)
	retries := read(src.Retries, true)
	errs := read(src.Errors, true)
	timeouts := read(src.Timeouts, true)
	wasted := read(src.Wasted, true)
	queue := read(src.Queue, false)
	var count, sum, answers map[int64]float64
	if src.Latency.Base != "" && w.Has(src.Latency.Base+"_count") {
		f := src.Latency.Filter
		count = read(calibrate.Ref{Metric: src.Latency.Base + "_count", Label: f.Label, Values: f.Values, Not: f.Not}, true)
		sum = read(calibrate.Ref{Metric: src.Latency.Base + "_sum", Label: f.Label, Values: f.Values, Not: f.Not}, true)
		answers = count
		if a, ok := answerStatus[src.Name]; ok {
			answers = read(calibrate.Ref{Metric: src.Latency.Base + "_count", Label: a.Label, Values: a.Values, Not: a.Not}, true)
		}
	}
	// The steps: every time the attempts have a value or are Unknown at,
	// from the first with attempts to the last.
	times := append(slices.Clone(att.T), att.Unknown...)
	slices.SortFunc(times, time.Time.Compare)
	times = slices.CompactFunc(times, time.Time.Equal)
	first := slices.IndexFunc(times, func(t time.Time) bool { return attAt[t.UnixMilli()] > 0 })
	if first < 0 {
		return nil, inputf("%s counted no attempt in the window: an empty window, or the wrong selector", src.Attempts.Metric)
	}
	last := first
	for i, t := range times {
		if attAt[t.UnixMilli()] > 0 {
			last = i
		}
	}
	step := w.Step.Seconds()
	m := &Measured{Step: step, start: times[first].Add(-w.Step), retriesUnseen: src.RetriesUnseen}
	for _, t := range times[first : last+1] {
		k := t.UnixMilli()
		a, ok := attAt[k]
		r := row{t: t, missing: !ok || unknown[k], wasted: wasted != nil, queue: queue != nil, timeouts: timeouts != nil}
		if !r.missing {
			r.attempts, r.intents, r.errors = a, a, errs[k]
			switch {
			case intents != nil:
				r.intents = intents[k]
			case retries != nil:
				r.intents = max(0, a-retries[k])
			}
			r.served = a - r.errors
			if count != nil {
				r.served = answers[k]
				if count[k] > 0 {
					r.latency = sum[k] * src.Latency.Scale / count[k]
				}
			}
			r.wastedN, r.queueN, r.timeoutsN = wasted[k], queue[k], timeouts[k]
		}
		m.add(r)
	}
	if m.Unknown == 0 {
		m.Missing = nil
	}
	if k := m.n() - m.Unknown; k < MinSteps {
		return nil, inputf("the window has %d steps with traffic: at least %d are needed to tell the time before an incident, the incident and after (a longer window, or a shorter --step)", k, MinSteps)
	}
	return m, nil
}

// row is one step's counts as measure reads them: increases over the
// step (attempts, intents, errors, answers, work for callers gone,
// timeouts), the queue at its end and its mean latency; missing when the
// step has no value; wasted, queue and timeouts say whether the source
// counts them.
type row struct {
	t                                 time.Time
	missing, wasted, queue, timeouts  bool
	attempts, intents, errors, served float64
	latency, wastedN, queueN          float64
	timeoutsN                         float64
}

// add appends step r to m: per second, or 0 and Missing when r has no
// value.
func (m *Measured) add(r row) {
	step := m.Step
	if r.missing {
		r = row{t: r.t, missing: true, wasted: r.wasted, queue: r.queue, timeouts: r.timeouts}
		m.Unknown++
	}
	r.served += r.wastedN
	m.T = append(m.T, r.t.Sub(m.start).Seconds())
	m.Intents = append(m.Intents, r.intents/step)
	m.Attempts = append(m.Attempts, r.attempts/step)
	m.Errors = append(m.Errors, r.errors/step)
	m.ErrorRate = append(m.ErrorRate, share(r.errors, r.attempts))
	m.Served = append(m.Served, r.served/step)
	m.Latency = append(m.Latency, r.latency)
	m.Missing = append(m.Missing, r.missing)
	if r.wasted {
		m.Wasted = append(m.Wasted, r.wastedN/step)
	}
	if r.queue {
		m.Queue = append(m.Queue, r.queueN)
	}
	if r.timeouts {
		m.timeouts = append(m.timeouts, min(r.errors, r.timeoutsN)/step)
	}
}

// known reports whether step i has a value: Missing's steps have none.
func (m *Measured) known(i int) bool { return m.Missing == nil || !m.Missing[i] }

// knownOf is v's values over steps [from, to) that are known.
func (m *Measured) knownOf(v []float64, from, to int) []float64 {
	out := make([]float64, 0, to-from)
	for i := from; i < to; i++ {
		if m.known(i) {
			out = append(out, v[i])
		}
	}
	return out
}

// filled is v with its unknown steps filled for the simulator, which needs
// a rate at every tick: linearly between the known steps around each gap
// (the last or first known one at the window's ends), as a rate series
// interpolates its rows. The notes say so; the window's own series keep
// them unknown.
func (m *Measured) filled(v []float64) []float64 {
	out := slices.Clone(v)
	for i := 0; i < len(out); i++ {
		if m.known(i) {
			continue
		}
		a, b := i-1, m.nextKnown(i)
		for j := i; j < b; j++ {
			switch {
			case a < 0 && b == len(out):
				out[j] = 0
			case a < 0:
				out[j] = v[b]
			case b == len(out):
				out[j] = v[a]
			default:
				out[j] = v[a] + (v[b]-v[a])*float64(j-a)/float64(b-a)
			}
		}
		i = b
	}
	return out
}

// plotted is v for a chart: NaN at the unknown steps, which a chart leaves
// out.
func (m *Measured) plotted(v []float64) []float64 {
	if m.Missing == nil || v == nil {
		return v
	}
	out := slices.Clone(v)
	for i := range out {
		if !m.known(i) {
			out[i] = math.NaN()
		}
	}
	return out
}

// MissingShare is the share of m's steps that are Missing.
func (m *Measured) MissingShare() float64 {
	if m.n() == 0 {
		return 0
	}
	return float64(m.Unknown) / float64(m.n())
}
