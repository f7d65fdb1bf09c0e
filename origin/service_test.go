package origin

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/retrystorm/retrystorm/scenario"
)

// Distributions the tests draw from: every kind, the empirical one with a
// bucket that holds nothing and a +Inf bucket.
var (
	exponential = scenario.ServiceTime{Dist: scenario.DistExponential}
	lognormal   = scenario.ServiceTime{Dist: scenario.DistLognormal, Sigma: 0.5}
	empirical   = scenario.ServiceTime{Dist: scenario.DistEmpirical, Buckets: []scenario.Bucket{
		{Le: 5 * ms, Fraction: 0.3}, {Le: 10 * ms, Fraction: 0.6}, {Le: 15 * ms, Fraction: 0.6},
		{Le: 25 * ms, Fraction: 0.95}, {Le: scenario.Inf, Fraction: 1},
	}}
)

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 23)) }

// secondMoment is E[X²] of the unit-mean factor of st, as the M/G/1
// formula needs it: 1 fixed, 2 exponential, exp(sigma²) lognormal, and
// for the empirical, each bucket uniform ((a²+ab+b²)/3) and the +Inf one
// at the last bound, scaled to a mean of 1.
func secondMoment(st scenario.ServiceTime) float64 {
	switch st.Dist {
	case scenario.DistExponential:
		return 2
	case scenario.DistLognormal:
		return math.Exp(st.Sigma * st.Sigma)
	case scenario.DistEmpirical:
		m := st.BucketMean()
		var sum, lo, prev float64
		for _, b := range st.Buckets {
			hi := lo
			if b.Le != scenario.Inf {
				hi = float64(b.Le) / m
			}
			sum += (b.Fraction - prev) * (lo*lo + lo*hi + hi*hi) / 3
			lo, prev = hi, b.Fraction
		}
		return sum
	}
	return 1
}

// TestSamplerMoments: each distribution's factors have mean 1 and the
// second moment its formula gives, and its quantiles where they are known.
// 400,000 independent draws: the standard error of the mean is sd/632
// (under 0.2% for these), so 1% is five standard errors and more.
func TestSamplerMoments(t *testing.T) {
	const n = 400_000
	for _, tc := range []struct {
		name string
		st   scenario.ServiceTime
		// quantiles of the factor: p → value
		q map[float64]float64
	}{
		{"exponential", exponential, map[float64]float64{0.5: math.Ln2, 0.99: math.Log(100)}},
		// The median is exp(-sigma²/2) for a mean of 1; p99 is 2.326 sigma above it.
		{"lognormal", lognormal, map[float64]float64{0.5: math.Exp(-0.125), 0.99: math.Exp(-0.125 + 2.3263*0.5)}},
		// 30% under 5ms, 60% under 10ms and still under 15ms, 95% under
		// 25ms, and 5% at 25ms, the last finite bound: the mean is
		// 0.3×2.5 + 0.3×7.5 + 0.35×20 + 0.05×25 = 11.25ms. Within a
		// bucket, a quantile is interpolated.
		{"empirical", empirical, map[float64]float64{0.3: 5 / 11.25, 0.45: 7.5 / 11.25, 0.775: 20 / 11.25, 0.99: 25 / 11.25}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := NewSampler(tc.st, newRand(1))
			if err != nil {
				t.Fatal(err)
			}
			xs := make([]float64, n)
			var sum, sq float64
			for i := range xs {
				x := s.Factor()
				xs[i], sum, sq = x, sum+x, sq+x*x
			}
			if mean := sum / n; math.Abs(mean-1) > 0.01 {
				t.Errorf("mean factor %.4f, want 1 within 1%%", mean)
			}
			// The second moment's error is larger (the fourth moment of the
			// exponential is 24): 3% is still five standard errors.
			if m2, want := sq/n, secondMoment(tc.st); math.Abs(m2-want) > 0.03*want {
				t.Errorf("E[X²] %.4f, want %.4f within 3%%", m2, want)
			}
			slices.Sort(xs)
			for p, want := range tc.q {
				// The p-quantile of 400,000 draws: its standard error is
				// sqrt(p(1-p)/n)/f(x), under 1% of the value for these.
				if got := xs[int(p*n)]; math.Abs(got-want) > 0.02*want {
					t.Errorf("p%g = %.4f, want %.4f within 2%%", 100*p, got, want)
				}
			}
		})
	}
}

// TestSamplerDeterministic: the same seed draws the same times; the fixed
// distribution draws nothing (no sampler, and a factor of 1), so a model
// without a distribution runs as it always did.
func TestSamplerDeterministic(t *testing.T) {
	for _, st := range []scenario.ServiceTime{exponential, lognormal, empirical} {
		a, _ := NewSampler(st, newRand(7))
		b, _ := NewSampler(st, newRand(7))
		c, _ := NewSampler(st, newRand(8))
		same, differ := true, false
		for range 100 {
			x, y, z := a.Draw(10*ms), b.Draw(10*ms), c.Draw(10*ms)
			same, differ = same && x == y, differ || x != z
		}
		if !same || !differ {
			t.Errorf("%s: same seed same times %v, another seed other times %v", st.Dist, same, differ)
		}
	}
	for _, st := range []scenario.ServiceTime{{}, {Dist: scenario.DistFixed, Mean: 10 * ms}} {
		s, err := NewSampler(st, nil)
		if s != nil || err != nil {
			t.Errorf("%+v: a sampler %v, %v; want none", st, s, err)
		}
		if s.Draw(10*ms) != 10*ms || s.Factor() != 1 {
			t.Errorf("the nil sampler is not fixed")
		}
	}
	if _, err := NewSampler(exponential, nil); err == nil {
		t.Error("a distribution without a source: no error")
	}
}

// TestSamplerAllocates: a draw allocates nothing.
func TestSamplerAllocates(t *testing.T) {
	for _, st := range []scenario.ServiceTime{exponential, lognormal, empirical} {
		s, _ := NewSampler(st, newRand(1))
		if n := testing.AllocsPerRun(1000, func() { s.Draw(10 * ms) }); n != 0 {
			t.Errorf("%s: %g allocations per draw", st.Dist, n)
		}
	}
}
