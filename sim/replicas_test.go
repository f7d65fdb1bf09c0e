package sim

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/retrystorm/retrystorm/scenario"
)

// replicaScenario: five replicas, one answering only errors, one
// black-holed, one slow; fleets that pick at random, round robin with
// Envoy's outlier detection, and P2C with gRPC's.
const replicaScenario = `name: replicas
duration: 120s
traffic: {rate: 200, clients: 20}
origin:
  model: queue
  capacity: 1000
  workers: 50
  replicas:
    count: 5
    faults:
      - {replica: 0, kind: errors, error_rate: 1}
      - {replica: 1, kind: blackhole}
      - {replica: 2, kind: latency, factor: 5}
triggers:
  - {kind: errors, at: 60s, for: 10s, error_rate: 1, replica: 3}
fleets:
  - name: random
    timeout: 500ms
    retry: {max_retries: 2}
    budget: {use: none}
  - name: envoy
    timeout: 500ms
    retry: {max_retries: 2}
    budget: {use: none}
    outlier_detection: {use: envoy, settings: {max_ejection_percent: 40}}
  - name: grpc
    timeout: 500ms
    retry: {max_retries: 2}
    budget: {use: none}
    balancer: {use: p2c}
    outlier_detection: {use: grpc, settings: {max_ejection_percent: 40, enforcing_failure_percentage: 100, failure_percentage_minimum_hosts: 3, failure_percentage_request_volume: 20}}
`

func TestReplicaFaultsAndEjection(t *testing.T) {
	sc, err := scenario.Parse("replicas.yaml", []byte(replicaScenario))
	if err != nil {
		t.Fatal(err)
	}
	r, err := Run(context.Background(), sc)
	if err != nil {
		t.Fatal(err) // Run checks every identity, the replicas' included
	}
	byName := map[string]*FleetResult{}
	for i := range r.Fleets {
		f := &r.Fleets[i]
		byName[f.Name] = f
		if len(f.Replicas) != 5 {
			t.Fatalf("%s: %d replicas", f.Name, len(f.Replicas))
		}
		for _, rep := range f.Replicas {
			t.Logf("%-6s replica %d: attempts %6d successes %6d failures %6d cancelled %4d ejections %2d ejected %5.0fs",
				f.Name, rep.Replica, rep.Attempts, rep.Successes, rep.Failures, rep.Cancelled, rep.Ejections, rep.EjectedSeconds)
		}
		if f.Replicas[0].Successes != 0 || f.Replicas[1].Successes != 0 {
			t.Errorf("%s: the failing replicas answered successes: %+v", f.Name, f.Replicas[:2])
		}
	}
	// Without ejection the bad replicas take their share all run; Envoy's
	// consecutive 5xx takes them out of the rotation, so they get far
	// fewer attempts. (At 40%, two of five may be out: three healthy
	// stay above the panic threshold.)
	rnd, env := byName["random"], byName["envoy"]
	if rnd.Replicas[0].Ejections != 0 || rnd.Replicas[0].EjectedSeconds != 0 {
		t.Errorf("random: ejections without a detector: %+v", rnd.Replicas[0])
	}
	if env.Replicas[0].Ejections == 0 || env.Replicas[1].Ejections == 0 {
		t.Errorf("envoy: the bad replicas were never ejected: %+v", env.Replicas[:2])
	}
	if env.Replicas[0].Attempts*3 > rnd.Replicas[0].Attempts {
		t.Errorf("envoy sent %d attempts to the erroring replica, random %d", env.Replicas[0].Attempts, rnd.Replicas[0].Attempts)
	}
	if env.Summary.IntentsLost >= rnd.Summary.IntentsLost {
		t.Errorf("envoy lost %d intents, random %d", env.Summary.IntentsLost, rnd.Summary.IntentsLost)
	}
	if g := byName["grpc"]; g.Replicas[0].Ejections == 0 {
		t.Errorf("grpc: the erroring replica was never ejected: %+v", g.Replicas[0])
	}
	// The same seed, the same run.
	again, err := Run(context.Background(), sc)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(again, r) {
		t.Error("two runs of the same scenario differ")
	}
	b, _ := json.Marshal(r.Fleets[1])
	if !strings.Contains(string(b), `"replicas":[{"replica":0,"attempts":`) {
		t.Errorf("JSON: %.300s", b)
	}
	// A broken per-replica count is named.
	env.Replicas[2].Attempts++
	if err := r.Check(); !errors.Is(err, ErrIdentity) || !strings.Contains(err.Error(), "replicas-are-attempts") {
		t.Errorf("Check = %v", err)
	}
}

// TestNoReplicaKeysNoReplicaResults: a scenario that neither balances nor
// names a replica reports no replicas (its JSON is what it was).
func TestNoReplicaKeysNoReplicaResults(t *testing.T) {
	sc, err := scenario.Parse("r.yaml", []byte("duration: 20s\ntraffic: {rate: 50}\norigin: {model: capacity, capacity: 100, replicas: 3}\nfleets:\n  - {name: a, timeout: 1s, budget: {use: none}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := Run(context.Background(), sc)
	if err != nil {
		t.Fatal(err)
	}
	if r.Fleets[0].Replicas != nil {
		t.Errorf("replicas %+v", r.Fleets[0].Replicas)
	}
}
