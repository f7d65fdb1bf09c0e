package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
	// Each replica's series adds up to its totals (Run checked it); one
	// that does not is named.
	if env.Replicas[0].Series == nil || len(env.Replicas[0].Series.Ejected) == 0 {
		t.Fatalf("envoy: replica 0 has no series with ejections: %+v", env.Replicas[0].Series)
	}
	env.Replicas[0].Series.Attempts[0]++
	if err := r.Check(); !errors.Is(err, ErrIdentity) || !strings.Contains(err.Error(), "replica-series") {
		t.Errorf("a broken replica series passed: %v", err)
	}
	env.Replicas[0].Series.Attempts[0]--
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

// FuzzReplicas runs every picker and both detectors over replicas with
// faults and triggers on one replica, with retries and hedges: every run
// must add up (Run checks the identities, the replicas' included) and
// repeat itself.
func FuzzReplicas(f *testing.F) {
	f.Add(uint8(3), uint8(0), uint8(1), uint8(1), uint8(0), uint8(50), uint8(2))
	f.Add(uint8(5), uint8(4), uint8(2), uint8(3), uint8(1), uint8(100), uint8(1))
	f.Add(uint8(1), uint8(2), uint8(0), uint8(0), uint8(2), uint8(0), uint8(0))
	f.Add(uint8(10), uint8(3), uint8(1), uint8(2), uint8(1), uint8(67), uint8(3))
	f.Fuzz(func(t *testing.T, n, picker, detector, fault, model, percent, retries uint8) {
		replicas := int(n%10) + 1
		origin := []string{
			fmt.Sprintf("{model: capacity, capacity: %d, replicas: %%s}", 100*replicas),
			fmt.Sprintf("{model: queue, capacity: %d, workers: %d, queue_limit: 50, replicas: %%s}", 100*replicas, 2*replicas),
			"{model: concurrency, base: 20ms, per_inflight: 1ms, replicas: %s}",
		}[model%3]
		faults := []string{"", "{replica: 0, kind: errors, error_rate: 1}", "{replica: 0, kind: blackhole}", "{replica: 0, kind: errors, error_rate: 0.5}"}[fault%4]
		if fault%5 == 4 && model%3 != 0 {
			faults = "{replica: 0, kind: latency, factor: 10}"
		}
		reps := fmt.Sprint(replicas)
		if faults != "" {
			reps = fmt.Sprintf("{count: %d, faults: [%s]}", replicas, faults)
		}
		bal := []string{"", "{use: round_robin}", "{use: random}", "{use: p2c}", "{use: least_request}", "{use: ewma, settings: {panic_threshold: 0}}"}[picker%6]
		det := []string{"", fmt.Sprintf("{use: envoy, settings: {max_ejection_percent: %d, max_ejection_rule: before, interval: 1s, base_ejection_time: 2s}}", percent%101),
			fmt.Sprintf("{use: grpc, settings: {max_ejection_percent: %d, interval: 1s, enforcing_failure_percentage: 100, failure_percentage_minimum_hosts: 1, failure_percentage_request_volume: 5}}", percent%101)}[detector%3]
		extra := ""
		if bal != "" {
			extra += "\n    balancer: " + bal
		}
		if det != "" {
			extra += "\n    outlier_detection: " + det
		}
		y := fmt.Sprintf(`
name: fuzz
duration: 10s
tick: 500ms
traffic: {rate: 200, clients: 5, arrivals: poisson}
origin: %s
triggers: [{kind: errors, at: 2s, for: 3s, error_rate: 1, replica: %d}, {kind: outage, at: 6s, for: 1s, mode: refuse, replica: %d}]
fleets:
  - name: f
    timeout: 300ms
    deadline: 2s
    retry: {max_retries: %d, backoff: {use: exponential, base: 20ms, cap: 200ms, jitter: full}}
    budget: {use: none}
    hedge: {delay: 100ms}%s
`, fmt.Sprintf(origin, reps), replicas-1, int(percent)%replicas, retries%4, extra)
		sc, err := scenario.Parse("fuzz.yaml", []byte(y))
		if err != nil {
			t.Fatalf("%v\n%s", err, y)
		}
		r, err := Run(context.Background(), sc)
		if err != nil {
			t.Fatal(err)
		}
		checkInvariants(t, sc, r)
		if len(r.Fleets[0].Replicas) != replicas {
			t.Fatalf("%d replicas reported, want %d", len(r.Fleets[0].Replicas), replicas)
		}
	})
}

// tierReplicaScenario: a fleet balancing round robin over an edge tier of
// three replicas, whose client ejects (Envoy's detector, or none) among
// the origin's four replicas, one of which answers only errors and one is
// black-holed for a while. %s is the edge client's outlier_detection.
const tierReplicaScenario = `name: tier-replicas
duration: 60s
traffic: {rate: 200, clients: 4}
origin:
  model: queue
  capacity: 1000
  workers: 40
  replicas:
    count: 4
    faults:
      - {replica: 0, kind: errors, error_rate: 1}
tiers:
  - name: edge
    server: {model: concurrency, base: 1ms, replicas: 3}
    client:
      timeout: 300ms
      retry: {max_retries: 2}
      budget: {use: none}
      outlier_detection: %s
triggers:
  - {kind: outage, at: 20s, for: 10s, mode: blackhole, replica: 1}
fleets:
  - name: users
    timeout: 2s
    budget: {use: none}
    balancer: {use: round_robin}
`

// TestTierReplicas: a tier's client picks and ejects among the next
// layer's replicas as a fleet does one hop away; each layer reports its
// ground truth per replica, and the identities hold on every layer (Run
// checks them).
func TestTierReplicas(t *testing.T) {
	runWith := func(od string) *FleetResult {
		t.Helper()
		sc, err := scenario.Parse("tiers.yaml", []byte(fmt.Sprintf(tierReplicaScenario, od)))
		if err != nil {
			t.Fatal(err)
		}
		r, err := Run(context.Background(), sc)
		if err != nil {
			t.Fatal(err)
		}
		return &r.Fleets[0]
	}
	none, envoy := runWith("{use: none}"), runWith("{use: envoy, settings: {max_ejection_percent: 50}}")
	for _, f := range []*FleetResult{none, envoy} {
		if len(f.Tiers) != 2 || len(f.Replicas) != 3 || len(f.Tiers[0].Replicas) != 3 || len(f.Tiers[1].Replicas) != 4 {
			t.Fatalf("replicas: fleet %d, layers %d and %d", len(f.Replicas), len(f.Tiers[0].Replicas), len(f.Tiers[1].Replicas))
		}
		// Round robin spreads the fleet's attempts evenly over the edge.
		for _, r := range f.Replicas {
			if d := r.Attempts - f.Summary.Attempts/3; d < -1 || d > 1 {
				t.Errorf("edge replica %d: %d attempts of %d: not round robin", r.Replica, r.Attempts, f.Summary.Attempts)
			}
		}
	}
	bad := func(f *FleetResult) ReplicaResult { return f.Tiers[1].Replicas[0] }
	t.Logf("erroring origin replica: without ejection %+v; with %+v", bad(none), bad(envoy))
	if bad(envoy).Ejections == 0 || bad(envoy).Attempts*4 > bad(none).Attempts {
		t.Errorf("the edge's detector did not eject the erroring replica: %d ejections, %d attempts (without: %d)",
			bad(envoy).Ejections, bad(envoy).Attempts, bad(none).Attempts)
	}
	if envoy.Summary.IntentsLost > none.Summary.IntentsLost {
		t.Errorf("ejecting lost %d intents, not ejecting %d", envoy.Summary.IntentsLost, none.Summary.IntentsLost)
	}
	// The black-holed replica's attempts time out: failures, no successes
	// while it is out.
	if s := none.Tiers[1].Replicas[1].Series; s == nil || s.Successes[25] != 0 || s.Failures[25] == 0 {
		t.Errorf("the black-holed replica at 25 s: %+v", s)
	}
}
