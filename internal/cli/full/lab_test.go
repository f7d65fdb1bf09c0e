package full

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// tinyStorm is a storm small and short enough for a test of the command:
// 12 ticks of 20 intents against a queue that loses most of its capacity
// for three.
const tinyStorm = `name: tiny
seed: 3
duration: 12s
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
	if r.code != 0 && r.code != 1 {
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
		strings.Join(names, "|") != "naive|guarded|naive, drop_expired" || len(out.Simulator.Fleets) != 3 ||
		len(out.Agreement) != 12 || len(out.Claims) != 5 || len(out.Lab.Fleets) != 3 {
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
	if r.code != 0 && r.code != 1 {
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
	for _, out := range []string{r.stdout, r.stderr} {
		for _, line := range strings.Split(out, "\n") {
			if n := utf8.RuneCountInString(line); n > 80 {
				t.Errorf("line of %d columns: %q", n, line)
			}
		}
	}
}

func TestLabUsage(t *testing.T) {
	for _, args := range [][]string{
		{"lab", "--tick", "0s"},
		{"lab", "--duration", "7500ms"},
		{"lab", "--port", "70000"},
		{"lab", "extra"},
		{"lab", "--config", "does-not-exist.yaml"},
		{"lab", "--config", "../../experiment/scenarios/hedge.yaml"}, // replicas: the simulator's only
	} {
		if r := runCLI(t, args...); r.code != 2 {
			t.Errorf("%q: exit %d, want 2\n%s", args, r.code, r.stderr)
		}
	}
	r := runCLI(t, "help", "lab")
	for _, want := range []string{"-tick", "-duration", "-port", "-config", "-json"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("help lab lacks %q", want)
		}
	}
	if r := runCLI(t, "lab", "--print-config"); r.code != 0 || !strings.Contains(r.stdout, "name: storm") {
		t.Errorf("--print-config: exit %d\n%s", r.code, r.stdout)
	}
}
