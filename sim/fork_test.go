package sim

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/resil/budget"
	"github.com/retrystorm/retrystorm/scenario"
)

// TestForkIsTheWholeRun warms generated scenarios up to their fault's
// start once and plays each of several faults on from there, with every
// early exit, and requires each result to be the whole run's, byte for
// byte once encoded; and it requires forks to have been made, so that it
// cannot pass by refusing them all.
func TestForkIsTheWholeRun(t *testing.T) {
	cases := 18
	if testing.Short() {
		cases = 6
	}
	rng := rand.New(rand.NewPCG(41, 1))
	ctx := context.Background()
	forked := 0
	for i := range cases {
		var sc *scenario.Scenario
		switch i % 3 {
		case 0:
			sc = earlyCase(rng, i)
		case 1:
			sc = edgeCase(rng, i)
		default:
			// gRPC's retry throttle, whose tokens a storm spends.
			sc = earlyCase(rng, i)
			sc.Fleets[0].Budget = scenario.Budget{Use: scenario.BudgetGRPC, GRPC: budget.GRPCThrottleSettings{MaxTokens: 10, TokenRatio: 0.1}}
		}
		at := sc.Triggers[0].At
		capacity := sc.Origin.Capacity
		faults := []scenario.Trigger{
			sc.Triggers[0],
			{Kind: scenario.TriggerCapacity, At: at, For: 7 * time.Second, Capacity: capacity * 0.2},
			{Kind: scenario.TriggerErrors, At: at, For: 5 * time.Second, ErrorRate: 1, Answer: "error"},
			{Kind: scenario.TriggerOutage, At: at, For: 4 * time.Second, Mode: scenario.OutageRefuse},
			{Kind: scenario.TriggerLatency, At: at + time.Second, For: 6 * time.Second, Factor: 4},
		}
		w, err := WarmUp(ctx, sc, at, Options{})
		if err == ErrNotForkable {
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", sc.Name, err)
		}
		for k, ft := range faults {
			v := sc.Clone()
			v.Name = sc.Name + "/" + ft.Kind
			v.Triggers = []scenario.Trigger{ft}
			if err := v.Validate(); err != nil {
				t.Fatalf("%s: fault %d: %v", sc.Name, k, err)
			}
			for _, m := range []EarlyExit{NoEarlyExit, SkipCertainDrain, StopWhenDecided, StopWhenLost} {
				whole, err := RunWith(ctx, v, Options{EarlyExit: m})
				if err != nil {
					t.Fatal(err)
				}
				fork, err := w.Run(ctx, v, Options{EarlyExit: m})
				if err != nil {
					t.Fatalf("%s, early exit %d: %v", v.Name, m, err)
				}
				a, errA := json.Marshal(whole)
				b, errB := json.Marshal(fork)
				if errA != nil || errB != nil || len(a) < 100 {
					t.Fatalf("%s: encoding the results: %v, %v", v.Name, errA, errB)
				}
				if string(a) != string(b) {
					t.Errorf("%s, early exit %d: the fork differs from the whole run", v.Name, m)
				}
				forked++
			}
		}
		w.Release()
	}
	// A fault that names a replica: the whole run keeps each replica's
	// ground truth from its start, the warm-up did not; refused.
	sc, err := scenario.Parse("replicas.yaml", []byte(`name: replicas
seed: 1
duration: 60s
tick: 1s
traffic: {rate: 100, arrivals: poisson, clients: 4}
origin: {model: queue, capacity: 150, workers: 12, replicas: 2}
triggers:
  - {kind: capacity, capacity: 50, at: 20s, for: 10s}
fleets:
  - name: fleet
    timeout: 1s
    retry: {max_retries: 2}
    budget: {use: none}
`))
	if err != nil {
		t.Fatal(err)
	}
	w, err := WarmUp(ctx, sc, sc.Triggers[0].At, Options{})
	if err != nil {
		t.Fatalf("%s: %v", sc.Name, err)
	}
	bad := 1
	named := sc.Clone()
	named.Triggers = []scenario.Trigger{{Kind: scenario.TriggerErrors, At: sc.Triggers[0].At, For: 5 * time.Second, ErrorRate: 1, Replica: &bad}}
	if _, err := w.Run(ctx, named, Options{}); err != ErrNotForkable {
		t.Errorf("a fault that names a replica, played on from a warm-up without: %v, want ErrNotForkable", err)
	}
	w.Release()
	if forked < cases {
		t.Errorf("%d forks in %d scenarios: the test proves little", forked, cases)
	}
	t.Logf("%d forks, each the whole run", forked)
}

// TestForkRefusesAndStops: a moment off the tick grid is refused (the
// early-exit rules check on the grid from the tick of the fault's start,
// which can fall before such a moment, where a warm-up never checks); and
// a warm-up or a fork whose context ends says so with the context's
// error, as RunWith does, not the simulator's own.
func TestForkRefusesAndStops(t *testing.T) {
	sc := loadScenario(t, "testdata/storm.yaml")
	sc.Fleets = sc.Fleets[:1]
	at := sc.Triggers[0].At
	if !Forkable(sc, at) {
		t.Fatalf("%s at %v: not forkable", sc.Name, at)
	}
	if Forkable(sc, at-sc.Tick/2) {
		t.Errorf("a moment half a tick off the grid is forkable")
	}
	if _, err := WarmUp(context.Background(), sc, at-sc.Tick/2, Options{}); err != ErrNotForkable {
		t.Errorf("warming up to a moment off the grid: %v, want ErrNotForkable", err)
	}
	done, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := WarmUp(done, sc, at, Options{}); !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled warm-up: %v, want context.Canceled", err)
	}
	w, err := WarmUp(context.Background(), sc, at, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Release()
	if _, err := w.Run(done, sc, Options{}); !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled fork: %v, want context.Canceled", err)
	}
}
