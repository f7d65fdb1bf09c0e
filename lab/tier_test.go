package lab

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/scenario"
)

// chainScenario is one tier in front of an origin that is out (blackhole)
// for the whole run. Intents arrive for the first 10 s at 10 a second and
// the run goes on 20 s more, so that every retry of every layer falls
// inside it. The fleet and the tier retry 3 times at once; the tier's
// attempt times out after 1 s, the fleet's after fleetTimeout.
func chainScenario(t *testing.T, fleetTimeout string, propagate bool) *scenario.Scenario {
	t.Helper()
	p := "false"
	if propagate {
		p = "true"
	}
	sc, err := scenario.Parse("chain.yaml", []byte(`
name: chain
duration: 30s
traffic: {rate: 10}
origin: {model: queue, capacity: 200, workers: 20}
tiers:
  - name: api
    server: {model: queue, capacity: 2000, workers: 200}
    client: {timeout: 1s, retry: {max_retries: 3}, budget: {use: none}, propagate_deadline: `+p+`}
triggers:
  - {kind: outage, at: 0s, for: 30s}
  - {kind: load, at: 10s, for: 20s, rate: 0}
fleets:
  - {name: naive, timeout: `+fleetTimeout+`, retry: {max_retries: 3}, budget: {use: none}}
`))
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// TestLabChainAmplifies: in a total outage of the origin, a fleet and a
// tier each retrying three times send 4 attempts per intent to the tier
// and 4 × 4 = 16 to the origin; the layers are reported as the simulator
// reports them, the tier's then the origin's.
func TestLabChainAmplifies(t *testing.T) {
	sc := chainScenario(t, "5s", false)
	res, err := runFleets(context.Background(), sc, runOptions{Tick: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	checkTallies(t, res)
	f := res.Fleets[0]
	if len(f.Tiers) != 2 || f.Tiers[0].Name != "api" || f.Tiers[1].Name != "origin" || len(res.Lab.Fleets[0].Tiers) != 1 {
		t.Fatalf("layers %+v", f.Tiers)
	}
	api, org := f.Tiers[0], f.Tiers[1]
	t.Logf("intents %d; api: %d attempts (%.2f), origin: %d (%.2f); api's wasted work %d", f.Summary.Intents,
		api.Summary.Attempts, api.Amplification, org.Summary.Attempts, org.Amplification, api.Summary.WastedWork)
	if f.Summary.Intents < 95 || f.Summary.Intents > 105 {
		t.Errorf("%d intents, want 100", f.Summary.Intents)
	}
	if api.Summary.Attempts != f.Summary.Attempts || api.Summary.Intents != f.Summary.Intents {
		t.Errorf("the first layer's hop is not the fleet's: %+v", api.Summary)
	}
	if math.Abs(api.Amplification-4) > 0.2 || math.Abs(org.Amplification-16) > 0.8 {
		t.Errorf("amplification %.2f at the tier and %.2f at the origin, want 4 and 16", api.Amplification, org.Amplification)
	}
	if org.Summary.Intents < 3*f.Summary.Intents || org.Summary.IntentsLost != org.Summary.Intents {
		t.Errorf("the tier's calls: %d begun, %d lost; want every one of the fleet's attempts, all lost", org.Summary.Intents, org.Summary.IntentsLost)
	}
}

// TestLabChainPropagatesDeadlines: when the fleet gives up after 2.5 s, a
// tier that propagates its caller's deadline stops its call then (about 3
// attempts at the origin per fleet attempt, the last cut short), and one
// that does not goes on to its fourth and answers nobody.
func TestLabChainPropagatesDeadlines(t *testing.T) {
	if testing.Short() {
		t.Skip("two chains of 3 s each; TestLabChainAmplifies runs one in -short")
	}
	per := map[bool]float64{}
	for _, propagate := range []bool{false, true} {
		res, err := runFleets(context.Background(), chainScenario(t, "2500ms", propagate), runOptions{Tick: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		checkTallies(t, res)
		api, org := res.Fleets[0].Tiers[0], res.Fleets[0].Tiers[1]
		per[propagate] = float64(org.Summary.Attempts) / float64(max(api.Summary.Attempts, 1))
		t.Logf("propagate %v: %.2f attempts at the origin per attempt at the tier; the tier's wasted work %d", propagate, per[propagate], api.Summary.WastedWork)
		if !propagate && api.Summary.WastedWork < api.Summary.Attempts/2 {
			t.Errorf("without propagation the tier answered %d of %d attempts after their caller left; want most", api.Summary.WastedWork, api.Summary.Attempts)
		}
		if propagate && api.Summary.WastedWork > api.Summary.Attempts/10 {
			t.Errorf("with propagation the tier still answered %d of %d attempts after their caller left", api.Summary.WastedWork, api.Summary.Attempts)
		}
	}
	if math.Abs(per[false]-4) > 0.3 || math.Abs(per[true]-3) > 0.3 {
		t.Errorf("attempts at the origin per tier attempt: %.2f without propagation (want 4), %.2f with (want 3)", per[false], per[true])
	}
}

// TestLabChainAgreesWithSimulator: lab.Measure runs a chain in the
// simulator and the lab and compares them layer by layer; every claim
// (who recovers, each layer's offered load, each hop's retries/requests)
// holds.
func TestLabChainAgreesWithSimulator(t *testing.T) {
	if testing.Short() {
		t.Skip("a chain in the simulator and the lab, with the drop_expired counterfactual: 6 s")
	}
	if ownProcess(t) {
		return
	}
	// An inconclusive run judges no claim: it is measured again.
	m, _ := conclusive(t, DefaultTick, func(tick time.Duration) (*Measurement, *Inconclusive) {
		m, err := Measure(context.Background(), chainScenario(t, "2500ms", true), ExperimentOptions{Tick: tick})
		if err != nil {
			t.Fatal(err)
		}
		return m, m.Inconclusive
	})
	out := m.Outcome
	layered := 0
	for _, tb := range out.Section.Tables {
		for _, r := range tb.Rows {
			if strings.Contains(r[0], "→ origin") {
				layered++
			}
		}
	}
	if layered == 0 {
		t.Error("no layer was compared")
	}
	for _, c := range out.Claims {
		if !c.Holds {
			t.Errorf("claim fails: %s (%s)", c.Text, c.Detail)
		}
	}
}
