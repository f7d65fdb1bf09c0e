package calibrate

import (
	"fmt"
	"math"
	"time"

	"github.com/retrystorm/retrystorm/scenario"
)

// ServiceFit is the service time distribution fitted to a histogram.
type ServiceFit struct {
	// Dist is fixed, exponential, lognormal or empirical: the simplest
	// whose CDF is within Tolerance of the buckets' at every bound.
	Dist string
	// Mean is the observations' mean (the histogram's sum over its count:
	// exact, whatever the buckets); Median the fitted distribution's.
	Mean, Median float64
	// Sigma is the lognormal's shape (of the logarithm), for lognormal.
	Sigma float64
	// Distance is the largest gap between the fitted CDF and the
	// buckets' at their bounds (a Kolmogorov–Smirnov distance at the
	// bounds only); Distances the gap of each candidate.
	Distance  float64
	Distances map[string]float64
	// Buckets are what was fitted.
	Buckets Buckets
}

// Tolerance is the largest CDF gap at a bound a fitted distribution may
// have to be taken; beyond it, the next candidate is tried, and empirical
// (the buckets themselves) is the last.
const Tolerance = 0.05

// MeanSlack is how far the histogram's mean (its _sum over its _count)
// may be outside the range its buckets allow before FitService refuses
// them: Envoy's buckets come from an approximate histogram, whose
// observations near a bound may land in the next bucket.
const MeanSlack = 0.10

// FitService fits b. It needs observations, a finite, positive mean, and
// buckets that agree with the count and the mean: buckets that do not
// (all 0 while _count counted thousands, or a mean outside every
// observation's bucket) describe no distribution, and none is made up.
func FitService(b Buckets) (ServiceFit, error) {
	m := b.Mean()
	if b.Inf && math.Abs(b.Count-b.Counted) > max(1, 0.01*b.Counted) {
		return ServiceFit{}, fmt.Errorf("the +Inf bucket counted %.0f observations and _count %.0f: a histogram's +Inf bucket is its count, so its buckets are broken (an exporter's fault, or a selector mixing two histograms), and no distribution can be fitted to them", b.Count, b.Counted)
	}
	switch {
	case b.Count <= 0:
		return ServiceFit{}, fmt.Errorf("no observations in the window")
	case !(m > 0) || math.IsInf(m, 0):
		return ServiceFit{}, fmt.Errorf("the mean is %v (sum %v over %v observations): not a duration", m, b.Sum, b.Count)
	case m > 3600:
		return ServiceFit{}, fmt.Errorf("the mean is %.0f s: more than an hour a request is not a service time (is the histogram in the unit calibrate expects?)", m)
	}
	if lo, hi := b.meanRange(); m < lo/(1+MeanSlack) || m > hi*(1+MeanSlack) {
		return ServiceFit{}, fmt.Errorf("the mean, _sum over _count, is %s, but the buckets put it between %s and %s: the sum and the buckets disagree (a unit mismatch, or a broken exporter), and no distribution can be fitted to them", sec(m), sec(lo), secOrInf(hi))
	}
	cdf := b.CDF()
	gap := func(f func(x float64) float64) float64 {
		d := 0.0
		for i, le := range b.Le {
			d = max(d, math.Abs(f(le)-cdf[i]))
		}
		return d
	}
	fit := ServiceFit{Mean: m, Buckets: b, Distances: map[string]float64{}}
	fixed := gap(func(x float64) float64 {
		if x >= m {
			return 1
		}
		return 0
	})
	exp := gap(func(x float64) float64 { return 1 - math.Exp(-x/m) })
	// The lognormal of mean m with the best shape: mu = ln m − σ²/2.
	bestS, logn := 0.0, math.Inf(1)
	for s := 0.02; s <= 3; s *= 1.05 {
		mu := math.Log(m) - s*s/2
		d := gap(func(x float64) float64 { return 0.5 * math.Erfc(-(math.Log(x)-mu)/(s*math.Sqrt2)) })
		if d < logn {
			bestS, logn = s, d
		}
	}
	fit.Distances["fixed"], fit.Distances["exponential"], fit.Distances["lognormal"] = fixed, exp, logn
	switch {
	case fixed <= Tolerance:
		fit.Dist, fit.Median, fit.Distance = "fixed", m, fixed
	case exp <= Tolerance:
		fit.Dist, fit.Median, fit.Distance = "exponential", m*math.Ln2, exp
	case logn <= Tolerance:
		fit.Dist, fit.Sigma, fit.Distance = "lognormal", bestS, logn
		fit.Median = math.Exp(math.Log(m) - bestS*bestS/2)
	default:
		fit.Dist, fit.Median, fit.Distance = "empirical", b.Quantile(0.5), 0
	}
	return fit, nil
}

// Describe says how good the fit is, for a comment.
func (f ServiceFit) Describe() string {
	s := fmt.Sprintf("%s fits %0.f observations within %.3f of their CDF at %d bucket bounds (fixed %.3f, exponential %.3f, lognormal %.3f)",
		f.Dist, f.Buckets.Count, f.Distance, len(f.Buckets.Le), f.Distances["fixed"], f.Distances["exponential"], f.Distances["lognormal"])
	if f.Dist == "empirical" {
		s = fmt.Sprintf("no simple distribution fits %0.f observations within %.2f of their CDF (fixed %.3f, exponential %.3f, lognormal %.3f): the buckets themselves",
			f.Buckets.Count, Tolerance, f.Distances["fixed"], f.Distances["exponential"], f.Distances["lognormal"])
	}
	return s
}

// Quantile is the fitted distribution's q-quantile, in seconds: the
// buckets' interpolated one for empirical (and when q is not in (0, 1)).
func (f ServiceFit) Quantile(q float64) float64 {
	if !(q > 0 && q < 1) {
		return f.Buckets.Quantile(q)
	}
	switch f.Dist {
	case "fixed":
		return f.Mean
	case "exponential":
		return -f.Mean * math.Log(1-q)
	case "lognormal":
		mu := math.Log(f.Mean) - f.Sigma*f.Sigma/2
		return math.Exp(mu + f.Sigma*math.Sqrt2*math.Erfinv(2*q-1))
	}
	return f.Buckets.Quantile(q)
}

// ServiceTime is the fit as the scenario's origin.service_time, with its
// scale written (the mean, or the lognormal's median): the scale a queue
// origin's capacity must agree with (workers / Scale). An empirical fit
// keeps the buckets up to the first that holds every observation (at most
// 99 finite bounds), with +Inf; its scale is the buckets' own mean, which
// the scenario computes from them, not the histogram's exact mean.
func (f ServiceFit) ServiceTime() scenario.ServiceTime {
	d := func(s float64) time.Duration { return roundDuration(time.Duration(s * float64(time.Second))) }
	switch f.Dist {
	case "exponential":
		return scenario.ServiceTime{Dist: scenario.DistExponential, Mean: d(f.Mean)}
	case "lognormal":
		return scenario.ServiceTime{Dist: scenario.DistLognormal, Median: d(f.Median), Sigma: roundTo(f.Sigma, 3)}
	case "empirical":
		var bs []scenario.Bucket
		cdf := f.Buckets.CDF()
		for i, le := range f.Buckets.Le {
			if !(le > 0) || len(bs) == 99 {
				continue
			}
			fr := math.Round(cdf[i]*1e4) / 1e4
			bs = append(bs, scenario.Bucket{Le: d(le), Fraction: fr})
			if fr >= 1 {
				break
			}
		}
		if n := len(bs); n > 0 && bs[n-1].Fraction >= 1 {
			bs[n-1].Fraction = 1
		} else {
			bs = append(bs, scenario.Bucket{Le: scenario.Inf, Fraction: 1})
		}
		return scenario.ServiceTime{Dist: scenario.DistEmpirical, Buckets: bs}
	}
	return scenario.ServiceTime{Dist: scenario.DistFixed, Mean: d(f.Mean)}
}

// roundDuration rounds d to four significant digits, at least 1µs.
func roundDuration(d time.Duration) time.Duration {
	return max(time.Microsecond, time.Duration(roundTo(float64(d), 4)))
}

func secOrInf(s float64) string {
	if math.IsInf(s, 1) {
		return "+Inf"
	}
	return sec(s)
}
