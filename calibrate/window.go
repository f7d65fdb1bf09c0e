// Package calibrate fits a scenario to the metrics a service already
// exports: a window of Prometheus series (read live through the HTTP API,
// or from saved query_range answers) becomes the traffic, the origin and
// a fleet of a scenario file, every value with the query it came from,
// the window and how good the fit is.
//
// The package works in two halves so that replay can share them: a
// Window holds the raw series of a window, by metric name, however they
// were read (Fetch, ReadAnswers); the fitting functions (Fit and the
// helpers it uses: Counter, Gauge, Histogram) compute every rate, quantile
// and average from the raw samples, never from PromQL, so a saved answer
// and a live server give the same numbers.
package calibrate

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/prometheus/common/model"
)

// Bounds of what one calibration reads, live or from files: they keep a
// calibration's memory and the server's work small whatever the selector.
const (
	// MaxSteps is the most samples a series may have in the window (the
	// Prometheus server's own limit for query_range is 11,000 points).
	MaxSteps = 11_000
	// MaxSeries is the most series one metric may have: a selector that
	// matches more is refused, with a hint to narrow it.
	MaxSeries = 500
	// MaxSamples is the most samples of a whole window.
	MaxSamples = 4_000_000
)

// Window is a window of raw series, by metric name.
type Window struct {
	Start, End time.Time
	Step       time.Duration
	// Series holds each metric's series, by the metric's name (the
	// __name__ label; dropped from Metric).
	Series map[string][]Series
	// Where says where the series came from, for the comments: the
	// Prometheus server's address, or the files.
	Where string
	// Queries are the queries each metric was read with, by name.
	Queries map[string]string
	// Notes say what reading the window changed: a series that came twice
	// (a copy of a saved window beside the original) is held once, and
	// which.
	Notes []string

	// index is each series' place in Series[metric] and from where it was
	// read, by its metric and labels; twice counts the repeats (twice.go).
	index map[string]int
	from  map[string]string
	twice map[twice]int
}

// Series is one series: its labels and its samples in time order.
type Series struct {
	Labels  model.LabelSet
	Samples []Sample
}

// Sample is one value at one time.
type Sample struct {
	T time.Time
	V float64
}

// Has reports whether the window holds any series of metric.
func (w *Window) Has(metric string) bool { return len(w.Series[metric]) > 0 }

// add adds the series of a matrix read from where (a file, a query) to w,
// by their __name__, keeping only those sel matches, and when only is not
// empty, only those of that metric (the answer to a query for it).
func (w *Window) add(m model.Matrix, sel Selector, query, only, where string) error {
	if w.Series == nil {
		w.Series = map[string][]Series{}
		w.Queries = map[string]string{}
	}
	for _, ss := range m {
		name := string(ss.Metric[model.MetricNameLabel])
		if name == "" {
			return errors.New("a series without a metric name (__name__): save the answers of plain selectors such as {__name__=~\"envoy_cluster_.*\"}, not of expressions such as rate(...)")
		}
		if only != "" && name != only {
			continue
		}
		ls := model.LabelSet(ss.Metric).Clone()
		delete(ls, model.MetricNameLabel)
		if !sel.Matches(ls) {
			continue
		}
		if len(ss.Values) > MaxSteps {
			return fmt.Errorf("%s%s has %d samples: at most %d a series (a longer step, or a shorter window)", name, ls, len(ss.Values), MaxSteps)
		}
		s := Series{Labels: ls, Samples: make([]Sample, 0, len(ss.Values))}
		for _, p := range ss.Values {
			v := float64(p.Value)
			if math.IsNaN(v) || math.IsInf(v, 0) {
				continue // a stale marker or a gap: not a value
			}
			s.Samples = append(s.Samples, Sample{T: p.Timestamp.Time().UTC(), V: v})
		}
		if len(ss.Histograms) > 0 {
			return fmt.Errorf("%s%s is a native histogram: calibrate reads classic histograms (_bucket series with le)", name, ls)
		}
		if err := w.addSeries(name, s, where); err != nil {
			return err
		}
		if query != "" {
			w.Queries[name] = query
		}
	}
	return nil
}

// finish sets the window's span from its samples, where it was not given,
// sorts each metric's series by their labels (the order of files or of a
// server's answer must not change a fit) and checks the window's size.
func (w *Window) finish() error {
	var n int
	var lo, hi time.Time
	var steps []time.Duration
	w.Notes = append(w.Notes, w.twiceNotes()...)
	for _, ss := range w.Series {
		slices.SortFunc(ss, func(a, b Series) int { return cmp.Compare(a.Labels.String(), b.Labels.String()) })
		for _, s := range ss {
			n += len(s.Samples)
			for i, p := range s.Samples {
				if lo.IsZero() || p.T.Before(lo) {
					lo = p.T
				}
				if p.T.After(hi) {
					hi = p.T
				}
				if i > 0 && len(steps) < 1000 {
					steps = append(steps, p.T.Sub(s.Samples[i-1].T))
				}
			}
		}
	}
	if n > MaxSamples {
		return fmt.Errorf("the window holds %d samples: at most %d (a longer step, a shorter window, or a narrower selector)", n, MaxSamples)
	}
	if n == 0 {
		return errors.New("the window holds no samples: the selector matches nothing there, or the window is before the metrics began")
	}
	if w.Start.IsZero() {
		w.Start = lo
	}
	if w.End.IsZero() {
		w.End = hi
	}
	if w.Step == 0 && len(steps) > 0 {
		slices.Sort(steps)
		w.Step = steps[len(steps)/2]
	}
	if w.Step <= 0 {
		return errors.New("every series has one sample: a window needs two at least to show a rate")
	}
	return nil
}

// answer is the JSON the HTTP API's query_range returns.
type answer struct {
	Status    string `json:"status"`
	ErrorType string `json:"errorType"`
	Error     string `json:"error"`
	Data      struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	} `json:"data"`
}

// parseAnswer reads one saved query_range answer.
func parseAnswer(data []byte) (model.Matrix, error) {
	var a answer
	if err := json.Unmarshal(data, &a); err != nil {
		return nil, fmt.Errorf("not a Prometheus API answer (JSON): %v", err)
	}
	switch {
	case a.Status == "error":
		return nil, fmt.Errorf("the answer is an error: %s: %s", a.ErrorType, a.Error)
	case a.Status != "success":
		return nil, fmt.Errorf("not a Prometheus API answer: status %q, want \"success\"", a.Status)
	case a.Data.ResultType != "matrix":
		return nil, fmt.Errorf("the result is a %q: calibrate reads the matrix a query_range answers (/api/v1/query_range)", a.Data.ResultType)
	}
	var m model.Matrix
	if err := json.Unmarshal(a.Data.Result, &m); err != nil {
		return nil, fmt.Errorf("the matrix: %v", err)
	}
	return m, nil
}

// Names lists the metrics of w, sorted.
func (w *Window) Names() []string {
	out := make([]string, 0, len(w.Series))
	for n := range w.Series {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Describe is the window for a comment: where, from when to when, the step.
func (w *Window) Describe() string {
	return fmt.Sprintf("%s, %s to %s (%s), step %s", w.Where,
		w.Start.UTC().Format(time.RFC3339), w.End.UTC().Format(time.RFC3339),
		w.End.Sub(w.Start).Round(time.Second), w.Step)
}

// Query is how metric was read: the live query, or a plain selector.
func (w *Window) Query(metric string) string {
	if q := w.Queries[metric]; q != "" {
		return q
	}
	return metric
}

// trimLabel is s without one label, for grouping histogram buckets.
func trimLabel(ls model.LabelSet, name model.LabelName) string {
	c := ls.Clone()
	delete(c, name)
	return c.String()
}

// Sub is the part of w from from to to (both included), for fitting a
// sub-window such as the steps before an incident: a counter's first
// sample there is the base of its first increase, so the sub-window's
// increases are w's over the same steps.
func (w *Window) Sub(from, to time.Time) *Window {
	out := &Window{Start: from, End: to, Step: w.Step, Where: w.Where, Queries: w.Queries, Series: map[string][]Series{}}
	for name, ss := range w.Series {
		for _, s := range ss {
			var keep []Sample
			for _, p := range s.Samples {
				if !p.T.Before(from) && !p.T.After(to) {
					keep = append(keep, p)
				}
			}
			if len(keep) > 0 {
				out.Series[name] = append(out.Series[name], Series{Labels: s.Labels, Samples: keep})
			}
		}
	}
	return out
}
