package experiment

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/internal/race"
	"github.com/retrystorm/retrystorm/scenario"
)

// TestModelAgreesOnTiers is the agreement test for chains (issue 29): a
// two-tier chain in front of the layers experiment's origin, over a grid of
// load × capacity dip, with the tiers retrying and without, in the model
// and the simulator. The recovered/never verdicts must agree in at least
// minVerdictAgreement of the cells; docs/model.md ("Agreement") lists the
// cells that do not. The grid is left to the plain pass: under -short or
// the race detector the layers scenario itself is checked by
// TestModelAgreesOnScenarios.
//
//	go test ./experiment -run TestModelAgreesOnTiers -v
func TestModelAgreesOnTiers(t *testing.T) {
	if testing.Short() || race.Enabled {
		t.Skip("a grid of simulator runs: the plain pass runs it")
	}
	start := time.Now()
	base, err := scenarioFor("layers", Options{})
	if err != nil {
		t.Fatal(err)
	}
	loads := []float64{0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8} // of the origin's capacity
	dips := []float64{0.1, 0.25, 0.4, 0.55, 0.7, 0.85}         // of its capacity lost for the trigger
	agree, cells := 0, 0
	for _, retries := range []int{0, 3} {
		for _, load := range loads {
			for _, dip := range dips {
				sc := twoTiers(base, retries, load, dip)
				got, want := verdicts(t, sc, sc.Fleets[0])
				simTicks := want.RecoveryTicks
				cells++
				if got.Recovered == want.Recovered {
					agree++
					t.Logf("%s: model %d, simulator %d", sc.Name, got.RecoveryTicks, simTicks)
					continue
				}
				t.Logf("%s: model %d, simulator %d: DISAGREE", sc.Name, got.RecoveryTicks, simTicks)
			}
		}
	}
	share := float64(agree) / float64(cells)
	t.Logf("verdicts agree in %d of %d cells (%.1f%%), took %v", agree, cells, 100*share, time.Since(start).Round(time.Millisecond))
	if share < minVerdictAgreement {
		t.Errorf("the verdicts agree in %.1f%% of cells, want %.0f%%", 100*share, 100*minVerdictAgreement)
	}
}

// twoTiers is the layers scenario with two of its tiers (edge and
// db-proxy, each retrying retries times), the fleet retrying twice, at
// load × the origin's capacity, and a dip that takes dip of the capacity
// for ten seconds.
func twoTiers(base *scenario.Scenario, retries int, load, dip float64) *scenario.Scenario {
	sc := base.Clone()
	sc.Tiers = []scenario.Tier{base.Tiers[0], base.Tiers[2]}
	for i := range sc.Tiers {
		sc.Tiers[i].Client.Retry.MaxRetries = retries
	}
	sc.Tiers[0].Client.Timeout = time.Second
	f := &sc.Fleets[0]
	f.Timeout = 5 * time.Second
	f.Retry.MaxRetries = 2
	sc.Traffic.Rate = load * sc.Origin.Capacity
	sc.Triggers = slices.Clone(base.Triggers)
	sc.Triggers[0].Capacity = (1 - dip) * sc.Origin.Capacity
	sc.Name = fmt.Sprintf("two tiers, tier retries %d, load %.2f, dip %.2f", retries, load, dip)
	return sc
}
