package lab

import (
	"os"
	"strings"
	"testing"

	"github.com/retrystorm/retrystorm/scenario"
)

// TestRefuseSystem: the lab refuses, by the first key it cannot play, a
// scenario of issue 39's system, and plays the rest.
func TestRefuseSystem(t *testing.T) {
	const fleet = "fleets:\n  - {name: a, timeout: 1s, retry: {max_retries: 1}, budget: {use: none}}\n"
	const base = "name: s\nduration: 10s\ntick: 1s\n"
	const origin = "origin: {model: queue, capacity: 100, workers: 4}\n"
	cases := []struct {
		name, yaml, want string
	}{
		{"storm", "", ""},
		{"cpu cut and load latency", base + "origin: {model: queue, capacity: 100, workers: 4, load_latency: {curve: power, factor: 4, exponent: 2}}\ntraffic: {rate: 50}\ntriggers: [{kind: cpu, at: 2s, for: 2s, share: 0.5}]\n" + fleet, ""},
		{"cache", "../experiment/scenarios/cache.yaml", "tiers[0].cache"},
		{"pool", "../experiment/scenarios/pool.yaml", "tiers[0].client.pool"},
		{"shared", "../scenario/testdata/system.yaml", "shared"},
		{"ramp", base + origin + "traffic: {rate: 50, ramp: {from: 10, at: 2s, for: 5s}}\n" + fleet, "traffic.ramp"},
		{"closed", base + origin + "traffic: {arrivals: closed, clients: 10, think: 100ms}\n" + fleet, "traffic.arrivals: closed"},
		{"burst", base + origin + "traffic: {rate: 10}\ntriggers: [{kind: burst, at: 2s, for: 1s, count: 100}]\n" + fleet, "triggers[0]: burst"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sc := stormScenario(t, 1)
			if c.yaml != "" {
				y := []byte(c.yaml)
				if !strings.Contains(c.yaml, "\n") {
					var err error
					if y, err = os.ReadFile(c.yaml); err != nil {
						t.Fatal(err)
					}
				}
				var err error
				if sc, err = scenario.Parse(c.name+".yaml", y); err != nil {
					t.Fatal(err)
				}
			}
			err := refuseSystem(sc)
			switch {
			case c.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case c.want != "" && (err == nil || !strings.HasPrefix(err.Error(), "lab: "+c.want+": ")):
				t.Errorf("got %v, want the refusal of %s", err, c.want)
			}
		})
	}
}
