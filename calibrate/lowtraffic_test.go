package calibrate_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/retrystorm/retrystorm/internal/race"
)

// TestLowTrafficServiceTime: without a queue gauge (gRPC), steps whose
// mean latency stands out are taken as queued and left out of the fit;
// at low traffic a step's mean is of a few observations and wanders, and
// a fixed bar (25% over the median step's) dropped the steps that drew
// long service times: the service time came out short (exponential at 10
// observations a step: mean −13%; lognormal σ 1 at 5: −30%), and the
// capacity, workers over it, as much too high. Windows of gen_test.go's
// model that never queue, two hours at 15 s, several seeds: the fitted
// mean and median are those of the service time, on average over the
// seeds within 3%, and each within 10%.
func TestLowTrafficServiceTime(t *testing.T) {
	if race.Enabled {
		t.Skip("fits 24 two-hour windows: numbers, not concurrency; the plain pass runs it")
	}
	const mean = 0.020
	for _, c := range []struct {
		name    string
		perStep float64 // observations a step
		service func(*rand.Rand) float64
		mean    float64
		median  float64
	}{
		{"exponential, 10 a step", 10, func(r *rand.Rand) float64 { return r.ExpFloat64() * mean }, mean, mean * math.Ln2},
		{"exponential, 30 a step", 30, func(r *rand.Rand) float64 { return r.ExpFloat64() * mean }, mean, mean * math.Ln2},
		{"lognormal σ 1, 5 a step", 5, lognormal(mean, 1), mean * math.Exp(0.5), mean},
		{"lognormal σ 1, 20 a step", 20, lognormal(mean, 1), mean * math.Exp(0.5), mean},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := genModel{instances: 1, workers: 64, mean: c.mean, service: c.service, steps: 480,
				rate: func(int) float64 { return c.perStep / genStep.Seconds() }}
			const seeds = 6
			var meanErr, medErr float64
			for seed := range uint64(seeds) {
				r := fitGRPC(t, buildGRPC(g, g.run(seed+1)))
				em, ed := r.Service.Mean/c.mean-1, r.Service.Median/c.median-1
				if math.Abs(em) > 0.10 || math.Abs(ed) > 0.10 {
					t.Errorf("seed %d: mean %s (%+.1f%%), median %s (%+.1f%%): %s", seed+1, ms(r.Service.Mean), 100*em, ms(r.Service.Median), 100*ed, r.ServiceNte)
				}
				meanErr += em / seeds
				medErr += ed / seeds
			}
			t.Logf("over %d seeds: mean %+.1f%%, median %+.1f%%", seeds, 100*meanErr, 100*medErr)
			if math.Abs(meanErr) > 0.03 || math.Abs(medErr) > 0.03 {
				t.Errorf("over %d seeds, the mean is off by %+.1f%% and the median by %+.1f%%: more than 3%%", seeds, 100*meanErr, 100*medErr)
			}
		})
	}
}

func ms(s float64) string { return fmt.Sprintf("%.2fms", 1000*s) }
