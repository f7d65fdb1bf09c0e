package experiment

import (
	"fmt"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/internal/race"
	"github.com/retrystorm/retrystorm/scenario"
)

// TestModelAgreesOnConcurrency: the storm's fleets against a concurrency
// origin (latency = 50ms + per_inflight × requests in flight), with and
// without deadline shedding, through slower service, a load spike and a
// blackhole outage, at three slopes of latency: the model's verdict must
// be the simulator's (48 runs of each).
func TestModelAgreesOnConcurrency(t *testing.T) {
	if race.Enabled {
		t.Skip("simulator runs compared: numbers, not concurrency; the plain pass runs it")
	}
	base, err := scenarioFor("storm", Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, per := range []time.Duration{2 * time.Millisecond, 4 * time.Millisecond, 6 * time.Millisecond} {
		for _, tr := range []scenario.Trigger{
			{Kind: scenario.TriggerLatency, Factor: 2, At: 30 * time.Second, For: 10 * time.Second},
			{Kind: scenario.TriggerLatency, Factor: 5, At: 30 * time.Second, For: 10 * time.Second},
			{Kind: scenario.TriggerLoad, Rate: 150, At: 30 * time.Second, For: 10 * time.Second},
			{Kind: scenario.TriggerOutage, Mode: scenario.OutageBlackhole, At: 30 * time.Second, For: 10 * time.Second},
		} {
			for _, shed := range []bool{false, true} {
				for _, f := range base.Fleets {
					sc := base.Clone()
					sc.Origin = scenario.Origin{Model: scenario.ModelConcurrency, Base: 50 * time.Millisecond, PerInflight: per, Replicas: 1}
					sc.Origin.Shed.Deadline = shed
					sc.Triggers = []scenario.Trigger{tr}
					sc.Fleets = []scenario.Fleet{f}
					got, want := verdicts(t, sc, f)
					simTicks := want.RecoveryTicks
					name := fmt.Sprintf("per_inflight %v, %s %g, shed %v, %s", per, tr.Kind, tr.Factor+tr.Rate, shed, f.Name)
					t.Logf("%s: model %d, simulator %d", name, got.RecoveryTicks, simTicks)
					if got.Recovered != want.Recovered {
						t.Errorf("%s: the model says recovered %v (%d), the simulator %v (%d)", name, got.Recovered, got.RecoveryTicks, want.Recovered, simTicks)
					}
				}
			}
		}
	}
}
