package calibrate

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/retrystorm/retrystorm/scenario"
)

// TestFitService: each shape is recognised from its buckets, the simplest
// first, and the service_time written for it is one the scenario takes,
// with a capacity that agrees with its scale.
func TestFitService(t *testing.T) {
	le := []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}
	hist := func(cdf func(x float64) float64, mean float64) Buckets {
		b := Buckets{Le: le, Count: 10000, Sum: 10000 * mean}
		for _, x := range le {
			b.Cum = append(b.Cum, math.Round(10000*cdf(x)))
		}
		return b
	}
	logn := func(med, s float64) func(float64) float64 {
		return func(x float64) float64 { return 0.5 * math.Erfc(-(math.Log(x)-math.Log(med))/(s*math.Sqrt2)) }
	}
	for _, c := range []struct {
		name   string
		b      Buckets
		dist   string
		median float64
	}{
		{"fixed", hist(func(x float64) float64 { return map[bool]float64{true: 1}[x >= 0.04] }, 0.04), "fixed", 0.04},
		{"exponential", hist(func(x float64) float64 { return 1 - math.Exp(-x/0.05) }, 0.05), "exponential", 0.05 * math.Ln2},
		{"lognormal", hist(logn(0.1, 0.8), 0.1*math.Exp(0.32)), "lognormal", 0.1},
		// Two modes: a cache hit at 5ms, a miss at 400ms.
		{"bimodal", hist(func(x float64) float64 {
			return 0.7*map[bool]float64{true: 1}[x >= 0.004] + 0.3*map[bool]float64{true: 1}[x >= 0.4]
		}, 0.7*0.004+0.3*0.4), "empirical", math.NaN()},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, err := FitService(c.b)
			if err != nil {
				t.Fatal(err)
			}
			if f.Dist != c.dist {
				t.Fatalf("fitted %s, want %s: %s", f.Dist, c.dist, f.Describe())
			}
			if !math.IsNaN(c.median) && math.Abs(f.Median-c.median) > 0.05*c.median {
				t.Errorf("median %g, want %g", f.Median, c.median)
			}
			r := &Result{Service: f, ServiceTime: f.ServiceTime(), Workers: Value{V: 4}}
			sc, _ := r.ServiceTime.Scale()
			r.Scale = sc.Seconds()
			r.Capacity = Value{V: roundTo(4/r.Scale, 6)}
			var b yamlWriter
			serviceTime(&b, r)
			file := fmt.Sprintf("duration: 10s\ntraffic: {rate: 1}\norigin:\n  model: queue\n  workers: 4\n  capacity: %s\n%s"+
				"fleets:\n  - {name: a, timeout: 1s, budget: {use: none}}\n", num(r.Capacity.V), b.String())
			s, err := scenario.Parse("fit.yaml", []byte(file))
			if err != nil {
				t.Fatalf("%v\n%s", err, file)
			}
			if got := s.Origin.ServiceTime; got.Dist != c.dist && !(c.dist == "fixed" && got.IsFixed()) {
				t.Errorf("parsed %q", s.Origin.ServiceTime.Dist)
			}
			if c.dist == "empirical" && !strings.Contains(file, "{le: 5ms, fraction: 0.7}") {
				t.Errorf("buckets:\n%s", file)
			}
		})
	}
	if _, err := FitService(Buckets{Le: le, Cum: make([]float64, len(le))}); err == nil {
		t.Error("no observations: no error")
	}
}
