package experiment

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/report"
	"github.com/retrystorm/retrystorm/scenario"
	"github.com/retrystorm/retrystorm/sim"
)

// tinyShards runs a tiny storm in the simulator and returns its result and
// a maker of the JSON of shard i of 2 of a lab run of it, with its run,
// target and verdict: the simulator's numbers stand for the shard's.
func tinyShards(t *testing.T) (*sim.Result, func(i int, run, target, verdict string) []byte) {
	t.Helper()
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
	return res, func(i int, run, target, verdict string) []byte {
		js := map[string]any{
			"scenario": res.Scenario, "seed": res.Seed, "tick_seconds": res.TickSeconds, "trigger": res.Trigger,
			"fleets": res.Fleets, "simulator": res, "verdict": verdict,
			"lab_shard": LabShard{Index: i, Count: 2, Run: run, Scenario: yaml, Target: target, WallTickSeconds: 0.1},
		}
		data, err := json.Marshal(js)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
}

// TestMergeLab: the shards of one lab run add up, tick by tick, into one
// result whose summary is recomputed; shards of different runs, a shard
// twice or one missing are refused, naming which; a shard that could not
// measure makes the merged run inconclusive. (The same against nginx with
// two load processes: lab's TestShardsAgainstNginx.)
func TestMergeLab(t *testing.T) {
	res, shardOf := tinyShards(t)
	shard := func(i int, run, verdict string) []byte { return shardOf(i, run, "the service", verdict) }
	m, err := MergeLab([][]byte{shard(2, "r1", ""), shard(1, "r1", "")})
	if err != nil {
		t.Fatal(err)
	}
	js := m.JSON.(*MergedLabJSON)
	got, want := js.Result.Fleets[0].Summary, res.Fleets[0].Summary
	if got.Intents != 2*want.Intents || got.Attempts != 2*want.Attempts || got.IntentsLost != 2*want.IntentsLost || got.Recovered != want.Recovered {
		t.Errorf("merged: %d intents, %d attempts, %d lost, recovered %v; want twice %d, %d, %d and %v",
			got.Intents, got.Attempts, got.IntentsLost, got.Recovered, want.Intents, want.Attempts, want.IntentsLost, want.Recovered)
	}
	if js.Inconclusive() || len(m.Claims) == 0 {
		t.Errorf("two measured shards: inconclusive %v, %d claims", js.Inconclusive(), len(m.Claims))
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
		if _, err := MergeLab(c.parts); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("merge: %v, want %q", err, c.want)
		}
	}
	m, err = MergeLab([][]byte{shard(1, "r1", "inconclusive"), shard(2, "r1", "")})
	if err != nil {
		t.Fatal(err)
	}
	if js := m.JSON.(*MergedLabJSON); !js.Inconclusive() || len(m.Claims) != 0 || len(js.NotJudged) == 0 {
		t.Errorf("a shard that could not measure: inconclusive %v, %d claims judged", js.Inconclusive(), len(m.Claims))
	}
}

// TestMergeLabLatency: shards that carry their latencies as histograms
// (schema 2) merge into the quantiles of all their intents together, where
// the worst shard's p50 would be off by the other's half: one shard's
// intents took 100 ms in wall time, the other's 300 ms, a tenth of them
// 900 ms. Shards without (schema 1) fall back to the worst shard's; a
// shard whose histograms do not pair with its fleets is refused.
func TestMergeLabLatency(t *testing.T) {
	const yaml = `name: tiny
seed: 3
duration: 20s
traffic: {rate: 20, arrivals: constant, clients: 4}
origin: {model: queue, capacity: 24, workers: 2}
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
	hist := func(n int, d ...time.Duration) *sim.Histogram {
		var h sim.Histogram
		for i := range n {
			h.Add(d[i%len(d)])
		}
		return &h
	}
	// A wall tick of 0.1 s for a scenario tick of 1 s: latencies in
	// scenario time are ten times the wall's.
	shard := func(i, schema int, p50, p99 float64, lat ...*sim.Histogram) []byte {
		fleets := slices.Clone(res.Fleets)
		fleets[0].Summary.LatencyP50, fleets[0].Summary.LatencyP99 = p50, p99
		js := map[string]any{
			"scenario": res.Scenario, "seed": res.Seed, "tick_seconds": res.TickSeconds, "trigger": res.Trigger,
			"fleets": fleets, "simulator": res,
			"lab_shard": LabShard{Index: i, Count: 2, Run: "r1", Scenario: yaml, WallTickSeconds: 0.1, Schema: schema, Latency: lat},
		}
		data, err := json.Marshal(js)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	fast := hist(1000, 100*time.Millisecond)
	slow := hist(1000, 300*time.Millisecond, 300*time.Millisecond, 300*time.Millisecond, 300*time.Millisecond, 300*time.Millisecond,
		300*time.Millisecond, 300*time.Millisecond, 300*time.Millisecond, 300*time.Millisecond, 900*time.Millisecond)
	near := func(got, want float64) bool { return math.Abs(got-want) <= 0.03*want }
	for _, c := range []struct {
		name     string
		parts    [][]byte
		p50, p99 float64
	}{
		// 2,000 intents: half at 1 s, 900 at 3 s, 100 at 9 s (scenario
		// time). The median is the fast shard's last; the 99th
		// percentile the slow shard's tenth.
		{"histograms", [][]byte{shard(1, 2, 1, 1, fast), shard(2, 2, 3, 9, slow)}, 1, 9},
		{"one histogram only", [][]byte{shard(1, 2, 1, 1, fast), shard(2, 1, 3, 9)}, 3, 9},
	} {
		m, err := MergeLab(c.parts)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		s := m.JSON.(*MergedLabJSON).Result.Fleets[0].Summary
		if !near(s.LatencyP50, c.p50) || !near(s.LatencyP99, c.p99) {
			t.Errorf("%s: merged p50 %g s, p99 %g s; want %g and %g", c.name, s.LatencyP50, s.LatencyP99, c.p50, c.p99)
		}
	}
	// Three quarters fast: the median moves to the fast shard's.
	m, err := MergeLab([][]byte{shard(1, 2, 1, 1, hist(3000, 100*time.Millisecond)), shard(2, 2, 3, 3, hist(1000, 300*time.Millisecond))})
	if err != nil {
		t.Fatal(err)
	}
	if s := m.JSON.(*MergedLabJSON).Result.Fleets[0].Summary; !near(s.LatencyP50, 1) || !near(s.LatencyP99, 3) {
		t.Errorf("three quarters fast: p50 %g s, p99 %g s; want 1 and 3", s.LatencyP50, s.LatencyP99)
	}
	if _, err := MergeLab([][]byte{shard(1, 2, 1, 1, fast, fast), shard(2, 2, 3, 9, slow)}); err == nil || !strings.Contains(err.Error(), "2 histograms for 1 fleets") {
		t.Errorf("a shard with histograms for other fleets merged: %v", err)
	}
}

// TestMergeLabEscapes: a shard's target, run and fleet names come from
// outside; merged, they are printed with their escapes shown, never raw
// (issue 37: an ESC, a BEL or a U+202E in a shard's target reached the
// terminal through merge's intro).
func TestMergeLabEscapes(t *testing.T) {
	const evil = "\x1b[2J\x07\u202e"
	_, shard := tinyShards(t)
	parts := [][]byte{shard(1, "r"+evil, "http://svc"+evil+"/", ""), shard(2, "r"+evil, "http://svc"+evil+"/", "")}
	m, err := MergeLab(parts)
	if err != nil {
		t.Fatal(err)
	}
	o := m
	var text strings.Builder
	text.WriteString(strings.Join(o.Section.Intro, "\n") + strings.Join(o.Section.Notes, "\n") + strings.Join(o.Findings, "\n"))
	for _, tb := range o.Section.Tables {
		if err := tb.Render(&text, report.Style{Width: 200}); err != nil {
			t.Fatal(err)
		}
	}
	js, err := json.Marshal(o.JSON)
	if err != nil {
		t.Fatal(err)
	}
	for what, s := range map[string]string{"text": text.String(), "JSON": string(js)} {
		if i := strings.IndexAny(s, "\x1b\x07\u202e"); i >= 0 {
			t.Errorf("the %s carries a control or direction character raw: %q", what, s[max(0, i-40):min(len(s), i+10)])
		}
	}
	if !strings.Contains(text.String(), `http://svc\x1b[2J\a\u202e/`) {
		t.Errorf("the text does not name the target escaped:\n%s", text.String())
	}
}

// TestMergeLabReadsNoLocalFile is issue 37's: a lab shard's scenario
// names a rate series' CSV; merge must not open a file a shard names (a
// shard comes from anywhere), and refuses it with the field.
func TestMergeLabReadsNoLocalFile(t *testing.T) {
	dir := t.TempDir()
	csv := filepath.Join(dir, "rates.csv")
	if err := os.WriteFile(csv, []byte("seconds,rate\n0,20\n30,20\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	yaml := "name: tiny\nseed: 3\nduration: 20s\ntraffic: {series: {file: " + csv + "}, clients: 4}\norigin: {model: queue, capacity: 24, workers: 2}\n" +
		"triggers:\n  - {kind: capacity, at: 3s, for: 3s, capacity: 8}\nfleets:\n  - {name: naive, timeout: 1s, budget: {use: none}}\n"
	sc, err := scenario.Parse(filepath.Join(dir, "tiny.yaml"), []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	res, err := sim.Run(context.Background(), sc)
	if err != nil {
		t.Fatal(err)
	}
	shard := func(i int) []byte {
		data, err := json.Marshal(map[string]any{
			"scenario": res.Scenario, "seed": res.Seed, "tick_seconds": res.TickSeconds, "trigger": res.Trigger,
			"fleets": res.Fleets, "simulator": res, "verdict": "",
			"lab_shard": LabShard{Index: i, Count: 2, Run: "r1", Scenario: yaml, Target: "the service", WallTickSeconds: 0.1},
		})
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	_, err = MergeLab([][]byte{shard(1), shard(2)})
	if err == nil || !strings.Contains(err.Error(), "traffic.series.file") {
		t.Fatalf("merge of shards naming a local file: %v, want an error naming traffic.series.file", err)
	}
}
