package calibrate

import (
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/prometheus/common/model"
)

// steps is a series summed over the series of a metric, one value per
// sample time, in time order.
type steps struct {
	T []time.Time
	V []float64
	// Unknown are the times, in order, at which a series that should have
	// a sample there (it has samples before and after) has none: a failed
	// scrape (Prometheus marks a failed target's series stale, and a
	// range query then has no point), or a gap in saved answers. They
	// have no value: not 0, and not the sum of the other series; and a
	// counter's increase across a gap, which covers several steps, is no
	// step's.
	Unknown []time.Time
}

// Steps is the per-step sum Counter and Gauge return.
type Steps = steps

// Missing is the number of the window's steps s has no value for.
func (s steps) Missing() int { return len(s.Unknown) }

// at returns the value at t and whether there is one.
func (s steps) at(t time.Time) (float64, bool) {
	i, ok := slices.BinarySearchFunc(s.T, t, func(a, b time.Time) int { return a.Compare(b) })
	if !ok {
		return 0, false
	}
	return s.V[i], true
}

// sumBy adds, per sample time, f of each series r keeps; a time at which
// one of them has a gap (see gaps) is Unknown, and has no value.
func sumBy(w *Window, r Ref, counter bool, f func(s Series) []Sample) steps {
	acc := map[int64]float64{}
	unknown := map[int64]bool{}
	for _, s := range w.Series[r.Metric] {
		if !r.keeps(s.Labels) {
			continue
		}
		for _, p := range f(s) {
			acc[p.T.UnixMilli()] += p.V
		}
		for _, t := range gaps(s, w.Step, counter) {
			unknown[t.UnixMilli()] = true
		}
	}
	var out steps
	keys := make([]int64, 0, len(acc))
	for k := range acc {
		if !unknown[k] {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		out.T = append(out.T, time.UnixMilli(k).UTC())
		out.V = append(out.V, acc[k])
	}
	for k := range unknown {
		out.Unknown = append(out.Unknown, time.UnixMilli(k).UTC())
	}
	slices.SortFunc(out.Unknown, time.Time.Compare)
	return out
}

// gapped reports whether two samples dt apart have a gap between them: more
// than a step and a half, so at least one step's sample is missing.
func gapped(dt, step time.Duration) bool { return step > 0 && dt > step*3/2 }

// gaps are the times s has no sample at, between two it has: the window's
// steps between samples more than a step apart and, for a counter, the
// later sample's (its increase since the one before covers the gap too).
func gaps(s Series, step time.Duration, counter bool) []time.Time {
	var out []time.Time
	for i := 1; i < len(s.Samples); i++ {
		a, b := s.Samples[i-1].T, s.Samples[i].T
		if !gapped(b.Sub(a), step) {
			continue
		}
		n := int(math.Round(float64(b.Sub(a)) / float64(step)))
		for k := 1; k < n; k++ {
			out = append(out, a.Add(time.Duration(k)*step))
		}
		if counter {
			out = append(out, b)
		}
	}
	return out
}

// increments are a counter's increases between its samples, each at the
// later sample's time; a decrease is a reset (the process restarted), and
// the value after it is the increase, as Prometheus's increase() takes it.
// A series born in the window (w.born) counts its first value too: the
// increase from the 0 it began at. An increase across a gap (samples more
// than a step and a half apart) is left out: it is several steps', and
// which is not known.
func increments(s Series, born bool, step time.Duration) []Sample {
	out := make([]Sample, 0, len(s.Samples))
	if born && len(s.Samples) > 0 {
		out = append(out, s.Samples[0])
	}
	for i := 1; i < len(s.Samples); i++ {
		if gapped(s.Samples[i].T.Sub(s.Samples[i-1].T), step) {
			continue
		}
		d := s.Samples[i].V - s.Samples[i-1].V
		if d < 0 {
			d = s.Samples[i].V
		}
		out = append(out, Sample{T: s.Samples[i].T, V: d})
	}
	return out
}

func values(s Series) []Sample { return s.Samples }

// Counter is a counter's increase per step, summed over its series.
func Counter(w *Window, r Ref) steps {
	born := w.born(r.Metric)
	return sumBy(w, r, true, func(s Series) []Sample { return increments(s, born(s), w.Step) })
}

// born returns whether a series of metric began inside the window, from
// 0: its first sample comes after the first of another series of the
// same metric and target (job and instance), so its target was up and
// scraped before and the series did not exist yet. A counter with labels
// is created at its first increment (the OTel SDK's instruments, as
// grpc-go's UNAVAILABLE calls; client_golang's vectors): the first
// failure of a kind shows as a new series, whose first value is its
// increase. The first series of a target cannot be told from a target
// whose scrapes began in the window, and counts from its first sample.
func (w *Window) born(metric string) func(Series) bool {
	target := func(s Series) string { return string(s.Labels["job"]) + "\x00" + string(s.Labels["instance"]) }
	first := map[string]time.Time{}
	for _, s := range w.Series[metric] {
		if len(s.Samples) == 0 {
			continue
		}
		k := target(s)
		if t, ok := first[k]; !ok || s.Samples[0].T.Before(t) {
			first[k] = s.Samples[0].T
		}
	}
	return func(s Series) bool {
		return len(s.Samples) > 0 && s.Samples[0].T.After(first[target(s)])
	}
}

// Gauge is a gauge summed over its series at each sample time.
func Gauge(w *Window, r Ref) steps { return sumBy(w, r, false, values) }

// total is the sum of the values.
func (s steps) total() float64 {
	t := 0.0
	for _, v := range s.V {
		t += v
	}
	return t
}

// span is the time the increments of s cover: a step each (an increase
// across a gap is none of them).
func (s steps) span(step time.Duration) time.Duration {
	return time.Duration(len(s.T)) * step
}

// stats of a list of values.
func median(v []float64) float64 { return quantile(v, 0.5) }

func quantile(v []float64, q float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	c := slices.Clone(v)
	slices.Sort(c)
	pos := q * float64(len(c)-1)
	i := int(pos)
	if i+1 >= len(c) {
		return c[len(c)-1]
	}
	f := pos - float64(i)
	return c[i]*(1-f) + c[i+1]*f
}

func mean(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	return sum(v) / float64(len(v))
}

func sum(v []float64) float64 {
	t := 0.0
	for _, x := range v {
		t += x
	}
	return t
}

// Buckets is a classic histogram's counts over some steps: cumulative
// counts at each finite upper bound (in seconds), the total count and the
// sum of the observations.
type Buckets struct {
	Le    []float64 // finite upper bounds, increasing, in seconds
	Cum   []float64 // observations at or below each bound
	Count float64
	Sum   float64 // seconds
	// Inf says Count is the +Inf bucket's; Counted is then the _count's,
	// which must be the same (FitService refuses buckets that say
	// otherwise).
	Inf     bool
	Counted float64
}

// Histogram adds up h's increases over the steps keep accepts (nil: all).
// A step is the time of the sample that ends it.
func Histogram(w *Window, h Hist, keep func(time.Time) bool) Buckets {
	ok := func(ls model.LabelSet) bool { return h.Filter.keeps(ls) }
	inc := func(s Series, born func(Series) bool) float64 {
		t := 0.0
		for _, p := range increments(s, born(s), w.Step) {
			if keep == nil || keep(p.T) {
				t += p.V
			}
		}
		return t
	}
	byLe := map[float64]float64{}
	born := w.born(h.Base + "_bucket")
	for _, s := range w.Series[h.Base+"_bucket"] {
		if !ok(s.Labels) {
			continue
		}
		le, err := strconv.ParseFloat(string(s.Labels["le"]), 64)
		if err != nil {
			continue
		}
		byLe[le] += inc(s, born)
	}
	var b Buckets
	for le, c := range byLe {
		if math.IsInf(le, 1) {
			continue
		}
		b.Le = append(b.Le, le*h.Scale)
		_ = c
	}
	slices.Sort(b.Le)
	for _, le := range b.Le {
		b.Cum = append(b.Cum, byLe[le/h.Scale])
	}
	if inf, ok := byLe[math.Inf(1)]; ok {
		b.Count, b.Inf = inf, true
	}
	cnt, sm := 0.0, 0.0
	bornCount, bornSum := w.born(h.Base+"_count"), w.born(h.Base+"_sum")
	for _, s := range w.Series[h.Base+"_count"] {
		if ok(s.Labels) {
			cnt += inc(s, bornCount)
		}
	}
	for _, s := range w.Series[h.Base+"_sum"] {
		if ok(s.Labels) {
			sm += inc(s, bornSum)
		}
	}
	b.Counted = cnt
	if !b.Inf {
		b.Count = cnt
	}
	b.Sum = sm * h.Scale
	// A bucket count may not decrease with its bound (a scrape between
	// two buckets' updates): make it monotone.
	for i := 1; i < len(b.Cum); i++ {
		b.Cum[i] = max(b.Cum[i], b.Cum[i-1])
	}
	return b
}

// meanRange is the least and the most the observations' mean can be,
// given the buckets: every observation at its bucket's lower bound, or
// at its upper bound (+Inf when some are above the last finite bound).
func (b Buckets) meanRange() (lo, hi float64) {
	prev, below := 0.0, 0.0
	for i, le := range b.Le {
		n := min(b.Cum[i], b.Count) - below
		if n > 0 {
			lo += n * prev
			hi += n * le
			below += n
		}
		prev = le
	}
	if above := b.Count - below; above > 0 {
		lo += above * prev
		hi = math.Inf(1)
	}
	return lo / b.Count, hi / b.Count
}

// Mean is the observations' mean, in seconds.
func (b Buckets) Mean() float64 {
	if b.Count <= 0 {
		return math.NaN()
	}
	return b.Sum / b.Count
}

// CDF is the share of observations at or below each bound.
func (b Buckets) CDF() []float64 {
	out := make([]float64, len(b.Cum))
	for i, c := range b.Cum {
		out[i] = min(1, c/b.Count)
	}
	return out
}

// Quantile interpolates linearly within the bucket, as
// histogram_quantile does.
func (b Buckets) Quantile(q float64) float64 {
	if b.Count <= 0 || len(b.Le) == 0 {
		return math.NaN()
	}
	rank := q * b.Count
	lo, below := 0.0, 0.0
	for i, le := range b.Le {
		if b.Cum[i] >= rank {
			in := b.Cum[i] - below
			if in <= 0 {
				return le
			}
			return lo + (le-lo)*(rank-below)/in
		}
		lo, below = le, b.Cum[i]
	}
	return b.Le[len(b.Le)-1]
}
