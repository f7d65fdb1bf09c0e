package origin

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/retrystorm/retrystorm/scenario"
)

// Sampler draws service times from a scenario's service-time distribution
// (scenario.ServiceTime), as factors of the model's mean: each draw is a
// variate of mean 1, which the model multiplies by its mean service time
// as the conditions of the moment make it. So a capacity trigger or a
// latency factor scales the whole distribution, and a model's mean stays
// what its capacity says.
//
// It draws from the source it was made with, and from nothing else: the
// same seed gives the same service times. A nil *Sampler is the fixed
// distribution: every factor is 1, and nothing is drawn, so a model without
// a distribution consumes no randomness and runs as it always did. A draw
// allocates nothing. Like the models, a Sampler is not safe for concurrent
// use.
type Sampler struct {
	rng  *rand.Rand
	dist dist
	// lognormal: exp(sigma Z + mu), with mu = -sigma²/2 for a mean of 1.
	sigma, mu float64
	// empirical: the cumulative shares at the bounds, from (0, 0), and
	// the bounds in units of the mean; a +Inf bucket's bound is the last
	// finite one.
	cum, at []float64
}

type dist uint8

const (
	distExponential dist = iota + 1
	distLognormal
	distEmpirical
)

// NewSampler returns the sampler of st drawing from rng, or nil for the
// fixed distribution (which needs no rng). A distribution that draws needs
// a source: without one it is an error, never a silent fixed time.
func NewSampler(st scenario.ServiceTime, rng *rand.Rand) (*Sampler, error) {
	if st.IsFixed() {
		return nil, nil
	}
	if rng == nil {
		return nil, fmt.Errorf("origin: service_time %s draws its times, but the driver gave no random source", st.Dist)
	}
	s := &Sampler{rng: rng}
	switch st.Dist {
	case scenario.DistExponential:
		s.dist = distExponential
	case scenario.DistLognormal:
		if !(st.Sigma > 0 && st.Sigma <= 4) {
			return nil, fmt.Errorf("origin: lognormal sigma must be in (0, 4], got %g", st.Sigma)
		}
		s.dist, s.sigma, s.mu = distLognormal, st.Sigma, -st.Sigma*st.Sigma/2
	case scenario.DistEmpirical:
		mean := st.BucketMean()
		if !(mean > 0) {
			return nil, fmt.Errorf("origin: the empirical service time has no finite mean: %v", st.Buckets)
		}
		s.dist = distEmpirical
		s.cum = make([]float64, 1, len(st.Buckets)+1)
		s.at = make([]float64, 1, len(st.Buckets)+1)
		for _, b := range st.Buckets {
			at := s.at[len(s.at)-1]
			if b.Le != scenario.Inf {
				at = float64(b.Le) / mean
			}
			if b.Fraction < s.cum[len(s.cum)-1] || at < s.at[len(s.at)-1] {
				return nil, fmt.Errorf("origin: the empirical service time's buckets are not cumulative: %v", st.Buckets)
			}
			s.cum = append(s.cum, b.Fraction)
			s.at = append(s.at, at)
		}
		if s.cum[len(s.cum)-1] != 1 {
			return nil, fmt.Errorf("origin: the empirical service time's last bucket holds %g of the requests, not all", s.cum[len(s.cum)-1])
		}
	default:
		return nil, fmt.Errorf("origin: unknown service-time distribution %q", st.Dist)
	}
	return s, nil
}

// Factor draws the next service time as a factor of the mean: 1 for the
// fixed distribution.
func (s *Sampler) Factor() float64 {
	if s == nil {
		return 1
	}
	switch s.dist {
	case distExponential:
		return s.rng.ExpFloat64()
	case distLognormal:
		return math.Exp(s.sigma*s.rng.NormFloat64() + s.mu)
	}
	// Empirical: the bucket whose cumulative share first passes u (the
	// first is (0, 0), which none passes), then uniform within it, as
	// histogram_quantile interpolates. Buckets that hold nothing are
	// never chosen: their share does not pass u.
	u := s.rng.Float64()
	lo, hi := 1, len(s.cum)-1 // cum[hi] = 1 > u
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if s.cum[m] > u {
			hi = m
		} else {
			lo = m + 1
		}
	}
	c0, c1 := s.cum[lo-1], s.cum[lo]
	return s.at[lo-1] + (s.at[lo]-s.at[lo-1])*(u-c0)/(c1-c0)
}

// Draw returns a service time of mean mean: mean times the next factor,
// capped far below overflow.
func (s *Sampler) Draw(mean time.Duration) time.Duration {
	if s == nil {
		return mean
	}
	return time.Duration(min(float64(mean)*s.Factor(), 1e18))
}
