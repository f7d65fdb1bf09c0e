package lab

import (
	"math"
	"net/http"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/scenario"
)

// TestOriginDrawsServiceTimes: the lab's origin draws its service times
// from the scenario's distribution, from its seed: one request at a time
// to a concurrency origin of base 20ms with exponential times, twice with
// the same seed, takes times that vary as an exponential does, and the
// same times both runs (the draws are the same; the wall clock adds a
// little, so the two runs' times correlate rather than match).
func TestOriginDrawsServiceTimes(t *testing.T) {
	const n = 20
	times := func(seed uint64) []float64 {
		_, url := startOrigin(t, OriginConfig{Seed: seed, Origin: scenario.Origin{
			Model: scenario.ModelConcurrency, Base: 20 * time.Millisecond, Replicas: 1,
			ServiceTime: scenario.ServiceTime{Dist: scenario.DistExponential},
		}})
		c := testClient(t)
		out := make([]float64, n)
		for i := range out {
			r := send(c, "GET", url, 2*time.Second)
			if r.status != http.StatusOK {
				t.Fatalf("request %d: status %d", i, r.status)
			}
			out[i] = r.took.Seconds()
		}
		return out
	}
	a, b := times(3), times(3)
	short, long := 0, 0
	for _, x := range a {
		switch {
		case x < 0.010: // P = 1-e^{-1/2} = 39% for an exponential of mean 20ms
			short++
		case x > 0.030: // P = e^{-3/2} = 22%
			long++
		}
	}
	if short == 0 || long == 0 {
		t.Errorf("%d of %d times under 10ms and %d over 30ms: not exponential around 20ms: %v", short, n, long, a)
	}
	if r := correlation(a, b); r < 0.7 {
		t.Errorf("the same seed twice: times correlate by %.2f, want the same draws (above 0.7)\n%v\n%v", r, a, b)
	}
}

func correlation(a, b []float64) float64 {
	var ma, mb float64
	for i := range a {
		ma += a[i] / float64(len(a))
		mb += b[i] / float64(len(b))
	}
	var sab, saa, sbb float64
	for i := range a {
		sab += (a[i] - ma) * (b[i] - mb)
		saa += (a[i] - ma) * (a[i] - ma)
		sbb += (b[i] - mb) * (b[i] - mb)
	}
	return sab / math.Sqrt(saa*sbb)
}
