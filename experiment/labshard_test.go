package experiment

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/retrystorm/retrystorm/scenario"
	"github.com/retrystorm/retrystorm/sim"
)

// TestMergeLab: the shards of one lab run add up, tick by tick, into one
// result whose summary is recomputed; shards of different runs, a shard
// twice or one missing are refused, naming which; a shard that could not
// measure makes the merged run inconclusive. (The same against nginx with
// two load processes: lab's TestShardsAgainstNginx.)
func TestMergeLab(t *testing.T) {
	const yaml = `name: tiny
seed: 3
duration: 20s
traffic: {rate: 20, arrivals: constant, clients: 4}
origin: {model: queue, capacity: 24, workers: 2}
triggers:
  - {kind: capacity, at: 3s, for: 3s, capacity: 8}
fleets:
  - name: naive
    timeout: 1s
    retry: {max_retries: 3, backoff: {use: exponential, base: 100ms, cap: 10s}}
    budget: {use: none}
`
	sc, err := scenario.Parse("tiny.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	res, err := sim.Run(context.Background(), sc)
	if err != nil {
		t.Fatal(err)
	}
	shard := func(i int, run, verdict string) []byte {
		js := map[string]any{
			"scenario": res.Scenario, "seed": res.Seed, "tick_seconds": res.TickSeconds, "trigger": res.Trigger,
			"fleets": res.Fleets, "simulator": res, "verdict": verdict,
			"lab_shard": LabShard{Index: i, Count: 2, Run: run, Scenario: yaml, Target: "the service", WallTickSeconds: 0.1},
		}
		data, err := json.Marshal(js)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	m, err := Merge([][]byte{shard(2, "r1", ""), shard(1, "r1", "")})
	if err != nil {
		t.Fatal(err)
	}
	js := m.Lab.JSON.(*MergedLabJSON)
	got, want := js.Result.Fleets[0].Summary, res.Fleets[0].Summary
	if got.Intents != 2*want.Intents || got.Attempts != 2*want.Attempts || got.IntentsLost != 2*want.IntentsLost || got.Recovered != want.Recovered {
		t.Errorf("merged: %d intents, %d attempts, %d lost, recovered %v; want twice %d, %d, %d and %v",
			got.Intents, got.Attempts, got.IntentsLost, got.Recovered, want.Intents, want.Attempts, want.IntentsLost, want.Recovered)
	}
	if js.Inconclusive() || len(m.Lab.Claims) == 0 {
		t.Errorf("two measured shards: inconclusive %v, %d claims", js.Inconclusive(), len(m.Lab.Claims))
	}
	for _, c := range []struct {
		parts [][]byte
		want  string
	}{
		{[][]byte{shard(1, "r1", ""), shard(2, "r2", "")}, "lab shard 2 is of another run"},
		{[][]byte{shard(1, "r1", ""), shard(1, "r1", "")}, "lab shard 1/2 is given twice"},
		{[][]byte{shard(2, "r1", "")}, "lab shards missing: 1/2"},
		{[][]byte{shard(1, "r1", ""), []byte(`{"lab_shard": {"index": 2, "count": 2, "run": "r1"}}`)}, "result 2 is not a lab shard's JSON"},
	} {
		if _, err := Merge(c.parts); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("merge: %v, want %q", err, c.want)
		}
	}
	m, err = Merge([][]byte{shard(1, "r1", "inconclusive"), shard(2, "r1", "")})
	if err != nil {
		t.Fatal(err)
	}
	if js := m.Lab.JSON.(*MergedLabJSON); !js.Inconclusive() || len(m.Lab.Claims) != 0 || len(js.NotJudged) == 0 {
		t.Errorf("a shard that could not measure: inconclusive %v, %d claims judged", js.Inconclusive(), len(m.Lab.Claims))
	}
}
