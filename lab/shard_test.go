package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/experiment"
	"github.com/retrystorm/retrystorm/grid"
	"github.com/retrystorm/retrystorm/internal/testlock"
	"github.com/retrystorm/retrystorm/scenario"
	"github.com/retrystorm/retrystorm/sim"
	"github.com/retrystorm/retrystorm/verdict"
)

// shardHelperEnv, when set ("i/n target start out"), makes this test
// binary one shard's load process (TestShardProcess).
const shardHelperEnv = "RETRYSTORM_LAB_SHARD_HELPER"

// shardScenario is a storm small enough for two load processes and one
// nginx on a shared machine: 40 intents a second over 20 clients against
// 60 a second, dipping to 20 for 5 s.
func shardScenario(t *testing.T) *scenario.Scenario {
	t.Helper()
	sc, err := scenario.Parse("shards.yaml", []byte(`name: shards
seed: 7
duration: 30s
traffic: {rate: 40, arrivals: constant, clients: 20}
origin: {model: queue, capacity: 60, workers: 6}
triggers:
  - {kind: capacity, at: 5s, for: 5s, capacity: 20}
fleets:
  - name: naive
    timeout: 1s
    retry: {max_retries: 3, backoff: {use: exponential, base: 100ms, cap: 10s}}
    budget: {use: none}
  - name: guarded
    timeout: 1s
    retry: {max_retries: 3, idempotent_only: true, backoff: {use: exponential, base: 100ms, cap: 10s, jitter: full}}
    budget: {use: token_bucket, settings: {budget_ratio: 0.1, min_tokens: 10}}
    breaker: {use: consecutive, settings: {threshold: 5, cooldown: 5s}}
`))
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// TestShardProcess is one shard's load process when shardHelperEnv says
// so (TestShardsAgainstNginx starts two), and nothing otherwise.
func TestShardProcess(t *testing.T) {
	v := os.Getenv(shardHelperEnv)
	if v == "" {
		t.Skip("run by TestShardsAgainstNginx as a load process of its own")
	}
	f := strings.Fields(v)
	shard, err := grid.ParseShard(f[0])
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(f[1])
	if err != nil {
		t.Fatal(err)
	}
	unix, err := strconv.ParseInt(f[2], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	m, err := Measure(context.Background(), shardScenario(t), ExperimentOptions{
		Tick: DefaultTick, Target: &Target{URL: u}, Shard: shard, StartAt: time.Unix(unix, 0),
	})
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(m.Outcome.JSON)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f[3], data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestShardsAgainstNginx: a run split over two load processes against
// nginx, merged, counts what the same run in one process does, within the
// lab's tolerances; merge refuses a shard of another run, and one given
// twice.
func TestShardsAgainstNginx(t *testing.T) {
	if ownProcess(t) {
		return
	}
	timed(t)
	target := startNginx(t)
	u, _ := url.Parse(target)
	// Both runs must be conclusive, the shards' and the one process's,
	// or they are measured again (testlock.Tries runs of each at most).
	var (
		parts  [][]byte
		merged *verdict.Merged
		one    *Measurement
	)
	testlock.Conclusive(t, func(int) string {
		var why string
		if parts, why = runShards(t, target); why != "" {
			return why
		}
		var err error
		if merged, err = verdict.Merge(parts); err != nil {
			t.Fatal(err)
		}
		one, err = Measure(context.Background(), shardScenario(t), ExperimentOptions{Tick: DefaultTick, Target: &Target{URL: u}})
		if err != nil {
			t.Fatal(err)
		}
		if one.Inconclusive != nil {
			return "the run in one process was inconclusive: " + strings.Join(one.Inconclusive.Reasons, "; ")
		}
		return ""
	})
	compareTallies(t, shardScenario(t), one.Result.Result, labOf(t, merged.Lab))

	// Shards of different runs, or one shard twice: exit 2's errors.
	other := strings.Replace(string(parts[1]), `"run":"`, `"run":"x`, 1)
	if _, err := verdict.Merge([][]byte{parts[0], []byte(other)}); err == nil || !strings.Contains(err.Error(), "is of another run") {
		t.Errorf("shards of different runs merged: %v", err)
	}
	if _, err := verdict.Merge([][]byte{parts[0], parts[0]}); err == nil || !strings.Contains(err.Error(), "given twice") {
		t.Errorf("a shard given twice merged: %v", err)
	}
	if _, err := verdict.Merge([][]byte{parts[0]}); err == nil || !strings.Contains(err.Error(), "missing: 2/2") {
		t.Errorf("a shard missing merged: %v", err)
	}
}

// runShards runs shardScenario split over two load processes of their
// own (this test binary, as TestShardProcess) against target, and returns
// their JSON, or why a shard was inconclusive.
func runShards(t *testing.T, target string) (parts [][]byte, inconclusive string) {
	t.Helper()
	dir := t.TempDir()
	start := time.Now().Add(3 * time.Second).Truncate(time.Second)
	var procs []*exec.Cmd
	var files []string
	for i := 1; i <= 2; i++ {
		out := filepath.Join(dir, fmt.Sprintf("shard-%d.json", i))
		files = append(files, out)
		cmd := exec.Command(os.Args[0], "-test.run=^TestShardProcess$", "-test.count=1")
		cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d/2 %s %d %s", shardHelperEnv, i, target, start.Unix(), out))
		var log strings.Builder
		cmd.Stdout, cmd.Stderr = &log, &log
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		procs = append(procs, cmd)
		t.Cleanup(func() {
			if cmd.ProcessState == nil {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
			}
		})
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("shard %d's process:\n%s", i, log.String())
			}
		})
	}
	for i, cmd := range procs {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("shard %d/2: %v", i+1, err)
		}
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, data)
	}
	for _, p := range parts {
		var js struct{ Verdict string }
		_ = json.Unmarshal(p, &js)
		if js.Verdict == "inconclusive" {
			return nil, fmt.Sprintf("a shard was inconclusive: %s", p[:min(len(p), 2000)])
		}
	}
	return parts, ""
}

// labOf is the lab's run in a merged outcome's JSON.
func labOf(t *testing.T, o *experiment.Outcome) *sim.Result {
	t.Helper()
	data, err := json.Marshal(o.JSON)
	if err != nil {
		t.Fatal(err)
	}
	var r sim.Result
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	return &r
}

// compareTallies holds the merged shards to the run in one process: the
// intents within 2%, the offered load per phase within the lab's
// tolerances (experiment.LabTolerances, as the lab holds itself to the
// simulator), and the same verdict on recovery.
func compareTallies(t *testing.T, sc *scenario.Scenario, one, merged *sim.Result) {
	t.Helper()
	start, end := sim.TriggerTicks(sc)
	for i, f := range one.Fleets {
		m := merged.Fleets[i]
		a, b := f.Summary, m.Summary
		t.Logf("%s: one process %d intents, %d attempts, recovered %v, latency p50 %.4f s, p99 %.4f s; two shards %d intents, %d attempts, recovered %v, latency p50 %.4f s, p99 %.4f s (from their histograms)",
			f.Name, a.Intents, a.Attempts, a.Recovered, a.LatencyP50, a.LatencyP99, b.Intents, b.Attempts, b.Recovered, b.LatencyP50, b.LatencyP99)
		if d := math.Abs(float64(a.Intents-b.Intents)) / float64(max(a.Intents, 1)); d > 0.02 {
			t.Errorf("%s: %d intents in one process, %d merged", f.Name, a.Intents, b.Intents)
		}
		for p, span := range [][2]int{{0, start}, {start, end}, {end, len(f.Series.Offered)}} {
			tol := experiment.LabTolerances.Offered
			if p == 1 {
				tol = experiment.LabTolerances.OfferedDuring
			}
			x, y := meanOf(f.Series.Offered[span[0]:span[1]]), meanOf(m.Series.Offered[span[0]:span[1]])
			if ok, _ := tol.Allows(x, y); !ok {
				t.Errorf("%s: offered per tick in phase %d: %.1f in one process, %.1f merged", f.Name, p, x, y)
			}
		}
		if a.Recovered != b.Recovered {
			t.Errorf("%s: recovered %v in one process, %v merged", f.Name, a.Recovered, b.Recovered)
		}
	}
}

func meanOf(v []int64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := 0.0
	for _, x := range v {
		s += float64(x)
	}
	return s / float64(len(v))
}
