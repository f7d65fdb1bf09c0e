package calibrate

import (
	"fmt"
	"math"
	"time"
)

// PoissonZ: intents per step vary as Poisson arrivals at a steady rate
// would when their index of dispersion, Σ(x − x̄)² / x̄ over n steps, is
// at most PoissonZ standard deviations above its expectation under
// Poisson, n − 1 (a chi-square of n − 1 degrees of freedom, whose
// standard deviation is √(2(n − 1))). MinPoissonSteps is the fewest steps
// the test is made on.
const (
	PoissonZ        = 3.0
	MinPoissonSteps = 10
)

// SmoothCount: a rate series is written as the mean over as many steps
// around each one as hold SmoothCount intents on average, so that Poisson
// noise (its relative size 1/√count, 5% at 400) is not written as if the
// rate varied: the run draws its own arrivals around the rate, Poisson's
// noise again.
const SmoothCount = 400

// bandShare is the share of rates within SteadyBand of base.
func bandShare(rates []float64, base float64) float64 {
	in := 0
	for _, x := range rates {
		if math.Abs(x-base) <= SteadyBand*base {
			in++
		}
	}
	return float64(in) / float64(len(rates))
}

// poissonSteady reports whether counts (intents per step) vary no more
// than Poisson arrivals at a steady rate would (see PoissonZ), and the
// index of dispersion's distance from Poisson's, in standard deviations.
// Fewer than MinPoissonSteps steps, or no intent, is not steady by it.
// With a step of a second, 100 intents a second vary by ±10% from step to
// step by chance alone: SteadyBand calls that unsteady, and a series
// written of it peaks a third above its mean.
func poissonSteady(counts []float64) (bool, float64) {
	n := len(counts)
	if n < MinPoissonSteps {
		return false, math.Inf(1)
	}
	m := mean(counts)
	if !(m > 0) {
		return false, math.Inf(1)
	}
	d := 0.0
	for _, x := range counts {
		d += (x - m) * (x - m)
	}
	d /= m
	dof := float64(n - 1)
	z := (d - dof) / math.Sqrt(2*dof)
	return z <= PoissonZ, z
}

// smooth replaces each step of r.RateSeries, when it is written as a
// series (the rate varied), by the mean of the steps around it, as many
// as hold SmoothCount intents on average (an odd number): a series written
// of raw steps of few intents would carry Poisson's noise as if it were
// the rate's, and its peak, which check and advise take for the base load,
// with it. Only noise is smoothed: a step further from the median of the
// steps around it than PoissonZ times Poisson's noise is a change of the
// rate and is kept as it was, and is in no other step's mean (a burst of
// two steps stays a burst, and is not spread over its neighbours). It
// returns a note saying so, or "" when the steps hold enough intents as
// they are.
func smooth(r *Result, step time.Duration) string {
	if r.Steady || len(r.RateSeries) < 3 {
		return ""
	}
	sec := step.Seconds()
	perStep := r.Rate.V * sec
	k := int(math.Ceil(SmoothCount / max(perStep, 1e-9)))
	if k <= 1 {
		return ""
	}
	k |= 1 // odd: centred
	half := time.Duration(k/2) * step
	in := r.RateSeries
	out := make([]Sample, len(in))
	lo := 0
	for i, p := range in {
		for in[lo].T.Before(p.T.Add(-half)) {
			lo++
		}
		var around []float64
		for j := lo; j < len(in) && !in[j].T.After(p.T.Add(half)); j++ {
			around = append(around, in[j].V)
		}
		med := median(around)
		noise := func(v float64) bool { return math.Abs(v-med)*sec <= PoissonZ*math.Sqrt(max(med*sec, 1)) }
		out[i] = p
		if !noise(p.V) {
			continue // a change of the rate
		}
		sum, n := 0.0, 0
		for _, v := range around {
			if noise(v) {
				sum, n = sum+v, n+1
			}
		}
		out[i].V = sum / float64(n)
	}
	r.RateSeries = out
	return fmt.Sprintf("each step's rate is the mean over the %d steps around it of those within %g times Poisson's noise of their median (%.3g intents a step on average: a step's noise, ±%.0f%%, is not written as the rate's); a step further from it is kept as it was", k, PoissonZ, perStep, 100/math.Sqrt(max(perStep, 1e-9)))
}

// countsNotNegative refuses a window whose gauges of requests (in
// service, queued, the configured limit, healthy replicas) go below 0: no
// count of requests does, and a fit of one gave a negative replica count,
// or workers of 0 and a scenario calibrate could not read back.
func countsNotNegative(w *Window, src *Source) error {
	for _, r := range []Ref{src.Busy, src.Queue, src.Limit, src.Healthy, src.Capacity} {
		if !r.ok() {
			continue
		}
		for _, s := range w.Series[r.Metric] {
			if !r.keeps(s.Labels) {
				continue
			}
			for _, p := range s.Samples {
				if p.V < 0 {
					return fail("%s%s is %g at %s: a gauge of requests is never negative (a broken exporter, or another metric under its name)", r.Metric, s.Labels, p.V, p.T.Format(time.RFC3339))
				}
			}
		}
	}
	return nil
}
