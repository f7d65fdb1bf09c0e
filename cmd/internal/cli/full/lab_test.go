package full

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/retrystorm/retrystorm/internal/cpuhog"
	"github.com/retrystorm/retrystorm/internal/testlock"
	"github.com/retrystorm/retrystorm/lab"
)

// tinyStorm is a storm small and short enough for a test of the command:
// 20 ticks of 20 intents against a queue that loses most of its capacity
// for three.
const tinyStorm = `name: tiny
seed: 3
duration: 20s
traffic: {rate: 20, arrivals: poisson, clients: 4}
origin: {model: queue, capacity: 24, workers: 2}
triggers:
  - {kind: capacity, at: 3s, for: 3s, capacity: 8}
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
`

func writeTiny(t *testing.T) string {
	path := filepath.Join(t.TempDir(), "tiny.yaml")
	if err := os.WriteFile(path, []byte(tinyStorm), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLabJSON(t *testing.T) {
	r := runCLI(t, "lab", "--config", writeTiny(t), "--tick", "50ms", "--json")
	if r.code != 0 && r.code != 1 && r.code != lab.ExitInconclusive {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	if r.stderr != "" && r.code == 0 {
		t.Errorf("--json is not quiet on stderr: %q", r.stderr)
	}
	var out struct {
		Scenario    string  `json:"scenario"`
		TickSeconds float64 `json:"tick_seconds"`
		Fleets      []struct {
			Name    string         `json:"name"`
			Summary map[string]any `json:"summary"`
			Series  map[string]any `json:"series"`
		} `json:"fleets"`
		Simulator struct {
			Fleets []struct{ Name string } `json:"fleets"`
		} `json:"simulator"`
		Agreement []map[string]any `json:"agreement"`
		Claims    []map[string]any `json:"claims"`
		NotJudged []map[string]any `json:"claims_not_judged"` // inconclusive
		Lab       struct {
			WallTickSeconds float64 `json:"wall_tick_seconds"`
			Fleets          []map[string]any
		} `json:"lab"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("%v\n%s", err, r.stdout)
	}
	names := func() (s []string) {
		for _, f := range out.Fleets {
			s = append(s, f.Name)
		}
		return s
	}()
	if out.Scenario != "tiny" || out.TickSeconds != 1 || out.Lab.WallTickSeconds != 0.05 ||
		strings.Join(names, "|") != "naive|guarded|naive, deadline shedding" || len(out.Simulator.Fleets) != 3 ||
		len(out.Agreement) != 12 || len(out.Claims)+len(out.NotJudged) != 5 || len(out.Lab.Fleets) != 3 {
		t.Errorf("JSON: scenario %q, tick %g, wall tick %g, fleets %q, %d simulated, %d agreements, %d claims, %d lab fleets",
			out.Scenario, out.TickSeconds, out.Lab.WallTickSeconds, names, len(out.Simulator.Fleets), len(out.Agreement), len(out.Claims), len(out.Lab.Fleets))
	}
	for _, f := range out.Fleets {
		for _, k := range []string{"intents", "recovered", "recovery_ticks", "retries_per_request", "peak_offered", "answers_thrown_away"} {
			if _, ok := f.Summary[k]; !ok {
				t.Errorf("%s: summary lacks %s", f.Name, k)
			}
		}
		for _, k := range []string{"tick", "offered", "first_attempts", "retries", "goodput", "error_rate", "queue", "breaker_open"} {
			if _, ok := f.Series[k]; !ok {
				t.Errorf("%s: series lacks %s", f.Name, k)
			}
		}
	}
}

func TestLabText(t *testing.T) {
	dir := t.TempDir()
	r := runCLI(t, "lab", "--config", writeTiny(t), "--tick", "50ms", "--out", dir)
	if r.code != 0 && r.code != 1 && r.code != lab.ExitInconclusive {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	for _, want := range []string{"Lab: the same scenario over real HTTP", "lab (real HTTP, one tick = 50 ms)", "simulator", "lab against simulator", "agrees", "report: "} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if log := strings.Join(strings.Fields(r.stderr), " "); !strings.Contains(log, "live view at http://127.0.0.1:") || !strings.Contains(log, "gateway http://127.0.0.1:") {
		t.Errorf("stderr does not say where the live view and the servers are:\n%s", r.stderr)
	}
	page, err := os.ReadFile(filepath.Join(dir, "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{": simulator", ": lab", "lab against simulator"} {
		if !strings.Contains(string(page), want) {
			t.Errorf("report lacks %q", want)
		}
	}
	// The tables fit 80 columns; the log, piped here, keeps each record on
	// one line for grep (docs/lab.md), however long (TestLogWholeWhenPiped).
	for _, line := range strings.Split(r.stdout, "\n") {
		if n := utf8.RuneCountInString(line); n > 80 {
			t.Errorf("line of %d columns: %q", n, line)
		}
	}
	for _, line := range strings.Split(r.stderr, "\n") {
		if strings.HasPrefix(line, " ") {
			t.Errorf("a log record continued on a line of its own: %q", line)
		}
	}
}

// TestLabGRPC runs the tiny storm over gRPC: the same tables, JSON and
// claims, said to be over gRPC, and the servers' gRPC addresses on the log.
func TestLabGRPC(t *testing.T) {
	dir := t.TempDir()
	r := runCLI(t, "lab", "--config", writeTiny(t), "--tick", "50ms", "--protocol", "grpc", "--out", dir)
	if r.code != 0 && r.code != 1 && r.code != lab.ExitInconclusive {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	for _, want := range []string{"Lab: the same scenario over real gRPC", "lab (real gRPC, one tick = 50 ms)", "lab against simulator", "resilgrpc"} {
		if !strings.Contains(strings.Join(strings.Fields(r.stdout), " "), want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if log := strings.Join(strings.Fields(r.stderr), " "); !strings.Contains(log, "gRPC origin 127.0.0.1:") || !strings.Contains(log, "gRPC gateway 127.0.0.1:") {
		t.Errorf("stderr does not say where the gRPC servers are:\n%s", r.stderr)
	}
	j := runCLI(t, "lab", "--config", writeTiny(t), "--tick", "50ms", "--protocol", "grpc", "--json")
	var out struct {
		Fleets []struct{ Name string } `json:"fleets"`
		Lab    struct {
			Protocol string `json:"protocol"`
		} `json:"lab"`
		Claims    []map[string]any `json:"claims"`
		NotJudged []map[string]any `json:"claims_not_judged"` // inconclusive
	}
	if err := json.Unmarshal([]byte(j.stdout), &out); err != nil {
		t.Fatalf("%v\n%s", err, j.stdout)
	}
	if j.stderr != "" && j.code == 0 {
		t.Errorf("--json is not quiet on stderr over gRPC: %q", j.stderr)
	}
	if out.Lab.Protocol != "grpc" || len(out.Fleets) != 3 || len(out.Claims)+len(out.NotJudged) != 5 {
		t.Errorf("JSON: protocol %q, %d fleets, %d claims (%d not judged); want grpc, 3, 5", out.Lab.Protocol, len(out.Fleets), len(out.Claims), len(out.NotJudged))
	}
}

// TestLabUsage: bad flags are refused before anything runs, with exit 2,
// and so are values with which the lab could only fail its own claims: a
// tick so short that the storm's peak load outruns the machine, or so long
// that the run takes hours, and a duration that ends before recovery can
// be seen (issue 14, item 10).
func TestLabUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"lab", "--tick", "0s"}, "--tick 0s: want a positive duration"},
		{[]string{"lab", "--tick", "1ms"}, "--tick 1ms: storm needs a tick from 80ms to 10s in the lab: below 80ms, fleet naive's 400 attempts per scenario second would pass 5000 per second of wall time"},
		{[]string{"lab", "--tick", "50ms"}, "--tick 50ms: storm needs a tick from 80ms"},
		{[]string{"lab", "--tick", "1h"}, "--tick 1h: storm needs a tick from 80ms to 10s in the lab: above 10s, its 3 fleets of 120 ticks would take more than 1h"},
		{[]string{"lab", "--config", writeTiny(t), "--tick", "20ms"}, "--tick 20ms: tiny needs a tick from 50ms to 1m in the lab: below 50ms, fleet naive's 1s timeout would last less than 50ms of wall time"},
		{[]string{"lab", "--duration", "7500ms"}, "is not a whole number of ticks of 1s"},
		{[]string{"lab", "--duration", "45s"}, "--duration 45s: storm needs at least 1m"},
		// Issue 26: 50 s, once the documented least, cannot show the
		// counterfactual recover (+5 ticks in the simulator).
		{[]string{"lab", "--duration", "50s"}, "--duration 50s: storm needs at least 1m: the end of its last trigger (tick 40), twice the longest recovery the simulator sees (naive, deadline shedding, +5 ticks) and 10 ticks for a recovery to count"},
		{[]string{"lab", "--port", "70000"}, "--port 70000: want a port from 0 to 65535"},
		{[]string{"lab", "--protocol", "grpcs"}, "--protocol grpcs: want http or grpc"},
		{[]string{"lab", "--protocol", "GRPC"}, "--protocol GRPC: want http or grpc"},
		{[]string{"lab", "--protocol", ""}, `--protocol "": want http or grpc`},
		{[]string{"lab", "--protocol", "grpc", "--tick", "50ms"}, "--tick 50ms: storm needs a tick from 80ms"},
		{[]string{"lab", "--protocol", "grpc", "--config", "../../../../experiment/scenarios/hedge.yaml"}, "fleets[1].hedge with origin.replicas"},
		{[]string{"lab", "--protocol", "grpc", "--config", "../../../../lab/testdata/replicas.yaml"}, "run over HTTP only; drop --protocol grpc"},
		{[]string{"lab", "extra"}, "lab takes no arguments"},
		{[]string{"lab", "--config", "does-not-exist.yaml"}, "does-not-exist.yaml"},
		{[]string{"lab", "--config", ""}, `--config "": needs a file name`},
		{[]string{"lab", "--config", "../../../../experiment/scenarios/hedge.yaml"}, "fleets[1].hedge with origin.replicas"}, // a hedge among replicas: the simulator's only
	} {
		r := runCLI(t, c.args...)
		if r.code != 2 || !strings.Contains(strings.Join(strings.Fields(r.stderr), " "), c.want) {
			t.Errorf("%q: exit %d, want 2 and %q\n%s", c.args, r.code, c.want, r.stderr)
		}
	}
	r := runCLI(t, "help", "lab")
	for _, want := range []string{"--tick D", "--duration D", "--port N", "--config FILE", "--json", "default " + lab.DefaultTick.String(), "--protocol P", "http or grpc (default http)"} {
		if !strings.Contains(strings.Join(strings.Fields(r.stdout), " "), want) {
			t.Errorf("help lab lacks %q", want)
		}
	}
	if r := runCLI(t, "lab", "--print-config"); r.code != 0 || !strings.Contains(r.stdout, "name: storm") {
		t.Errorf("--print-config: exit %d\n%s", r.code, r.stdout)
	}
}

// starve takes the lab's CPU away on purpose until the test ends (as the
// lab package's test does): one core for the process, on a machine whose
// every core another process keeps busy (cpuhog.Start). Loops inside the
// process, on its one core, made runtime.GC (the lab's, before each
// fleet) take minutes: it yields once per span it sweeps.
func starve(t *testing.T) {
	t.Helper()
	// The starvation is the test's own: other packages' tests beside it
	// would add load it does not control (TestLabInconclusive's lab once
	// judged a run measured whose fleet lost one intent to it).
	testlock.Alone(t)
	procs := runtime.GOMAXPROCS(1)
	t.Cleanup(func() { runtime.GOMAXPROCS(procs) })
	cpuhog.Start(t)
}

// TestLabInconclusive: a lab starved of CPU exits 3, says why and what
// tick to try, in text and in JSON; --auto-tick runs it again at the
// ticks it suggests (still starved here, so still inconclusive).
func TestLabInconclusive(t *testing.T) {
	path := filepath.Join(t.TempDir(), "short.yaml")
	// One fleet, one retry, 16 ticks: short however slow the starved
	// lab runs. The origin has room to spare (half its capacity used):
	// at 83% a starved load generator's catch-up bursts, 10% of a tick
	// late, emptied its credit and failed the claim that the fleet
	// recovers, in a run the lab could call measured. The fault fails
	// every attempt for two ticks rather than dipping the capacity: which
	// attempts a dip serves depends on their order within a tick, and
	// the throttle's bursts (12% of a tick late, inside the bound)
	// reorder them: at --auto-tick's 800 ms, twice in CI, the lab's
	// offered load during a two-tick capacity dip was 38.5 against the
	// simulator's 32, 0.3 points past the bound (docs/lab.md).
	if err := os.WriteFile(path, []byte(`name: short
seed: 3
duration: 16s
traffic: {rate: 20, arrivals: constant, clients: 4}
origin: {model: capacity, capacity: 40}
triggers:
  - {kind: errors, at: 1s, for: 2s, error_rate: 1}
fleets:
  - name: naive
    timeout: 1s
    retry: {max_retries: 1, backoff: {use: exponential, base: 100ms, cap: 1s}}
    budget: {use: none}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	starve(t)
	r := runCLI(t, "lab", "--config", path, "--tick", "50ms", "--json", "--out", t.TempDir())
	if r.code != lab.ExitInconclusive {
		t.Fatalf("exit %d, want %d\n%s%s", r.code, lab.ExitInconclusive, r.stdout, r.stderr)
	}
	var js struct {
		Verdict      string            `json:"verdict"`
		Inconclusive *lab.Inconclusive `json:"inconclusive"`
		Claims       []json.RawMessage `json:"claims"`
		NotJudged    []map[string]any  `json:"claims_not_judged"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &js); err != nil {
		t.Fatalf("%v\n%s", err, r.stdout)
	}
	if js.Verdict != "inconclusive" || js.Inconclusive == nil || len(js.Claims) != 0 || len(js.NotJudged) == 0 || js.Inconclusive.SuggestedTickSeconds < 0.1 {
		t.Errorf("the JSON does not say the run was inconclusive, with a longer tick:\n%s", r.stdout)
	}
	// --auto-tick reruns at the longer tick each run suggests. Starved as
	// the lab is, it may end inconclusive still (exit 3), or find a tick
	// it can hold (on one loaded machine: 50ms, 200ms, then 540ms) and
	// judge the claims there, which hold for this scenario. Exit 1 would
	// be a verdict from a lab that could not measure: never.
	r = runCLI(t, "lab", "--config", path, "--tick", "50ms", "--auto-tick", "--out", t.TempDir())
	out := strings.Join(strings.Fields(r.stdout+r.stderr), " ")
	t.Logf("--auto-tick: exit %d", r.code)
	want := []string{"INCONCLUSIVE", "ms late at the 99th percentile", "run it again with --tick", "--auto-tick: running it again at --tick 200ms"}
	switch r.code {
	case lab.ExitInconclusive:
		want = append(want, "Not judged:", "inconclusive: the lab was not measuring the service")
	case 0:
		want = []string{"--auto-tick: --tick 50ms was inconclusive", "--auto-tick: running it again at --tick 200ms", "This run's tick:"}
	default:
		t.Fatalf("--auto-tick: exit %d, want %d or 0\n%s", r.code, lab.ExitInconclusive, out)
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("--auto-tick, exit %d: the output lacks %q:\n%s", r.code, w, out)
		}
	}
}
