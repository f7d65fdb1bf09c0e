package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/retrystorm/retrystorm/internal/golden"
)

// TestBoundaryOutput pins what `retrystorm boundary` prints, as text and
// as JSON, on a 10 × 10 map of the sweep's scenario (the model's answer:
// it changes only when the model or the scenario does).
func TestBoundaryOutput(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
	}{
		{"boundary.txt", []string{"boundary", "--grid", "10"}},
		{"boundary.json", []string{"boundary", "--grid", "10", "--json"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := runCLI(t, append(c.args, "--out", t.TempDir())...)
			if r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			out := r.stdout
			if i := strings.LastIndex(out, "\nreport: "); i >= 0 {
				out = out[:i] // the report's path changes with the temporary directory
			}
			if n := widest(out); n > 80 && !strings.HasSuffix(c.name, ".json") {
				t.Errorf("a line of %d columns", n)
			}
			golden.Check(t, filepath.Join("testdata", c.name), []byte(out), "go test ./internal/cli -run TestBoundaryOutput -update")
		})
	}
}

// TestBoundaryFile maps a scenario file's own fleets, and refuses, with
// status 2, what it cannot map.
func TestBoundaryFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const fleet = `
fleets:
  - name: mine
    timeout: 1s
    retry: {max_retries: 2, backoff: {use: exponential, base: 100ms, jitter: full}}
    budget: {use: none}
`
	good := write("good.yaml", `name: good
duration: 60s
traffic: {rate: 50, clients: 5}
origin: {model: queue, capacity: 60, workers: 6}
triggers: [{kind: capacity, at: 10s, for: 5s, capacity: 30}]`+fleet)
	r := runCLI(t, "boundary", good, "--grid", "6", "--json")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	var js struct {
		Scenario string
		Source   string
		OwnLoad  float64 `json:"own_load"`
		Policies []struct{ Policy string }
	}
	if err := json.Unmarshal([]byte(r.stdout), &js); err != nil {
		t.Fatal(err)
	}
	if js.Scenario != "good" || js.Source != "model" || len(js.Policies) != 1 || js.Policies[0].Policy != "mine" || js.OwnLoad != 50.0/60 {
		t.Errorf("got %+v", js)
	}

	for _, c := range []struct {
		name, text, want string
	}{
		{"two-triggers.yaml", `name: two
duration: 60s
traffic: {rate: 50}
origin: {model: queue, capacity: 60}
triggers: [{kind: capacity, at: 10s, for: 5s, capacity: 30}, {kind: errors, at: 20s, for: 5s, error_rate: 0.5}]` + fleet, "exactly one trigger"},
		{"raised.yaml", `name: raised
duration: 60s
traffic: {rate: 50}
origin: {model: queue, capacity: 60}
triggers: [{kind: capacity, at: 10s, for: 5s, capacity: 600}]` + fleet, "raises the capacity"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := runCLI(t, "boundary", write(c.name, c.text), "--grid", "6")
			if r.code != 2 || !strings.Contains(strings.ReplaceAll(r.stderr, "\n", " "), c.want) {
				t.Errorf("exit %d, stderr %q: want 2 and %q", r.code, r.stderr, c.want)
			}
		})
	}
	// A file whose every fleet the model does not describe: each a row
	// marked unsupported, and why there is no map (exit 2 before).
	hedged := write("hedged.yaml", `name: hedged
duration: 60s
traffic: {rate: 50}
origin: {model: queue, capacity: 60}
triggers: [{kind: capacity, at: 10s, for: 5s, capacity: 30}]`+fleet+"    hedge: {delay: 50ms}\n")
	if r := runCLI(t, "boundary", hedged, "--grid", "6", "--out", t.TempDir()); r.code != 0 || !strings.Contains(r.stdout, "unsupported") || !strings.Contains(strings.ReplaceAll(r.stdout, "\n", " "), "describes none of the fleets") {
		t.Errorf("hedged: exit %d, stdout %q, stderr %q: want 0, the fleet as an unsupported row and why there is no map", r.code, r.stdout, r.stderr)
	}
	if r := runCLI(t, "boundary", good, good); r.code != 2 {
		t.Errorf("two files: exit %d, want 2", r.code)
	}

	// A 5 ms timeout makes a 0.5 ms step: ten minutes of trigger are more
	// than the model holds, so the longest-trigger search stops at the
	// longest run it holds, and says so (it failed with exit 1 before).
	fast := write("fast.yaml", `name: fast
duration: 60s
traffic: {rate: 100, clients: 20}
origin: {model: queue, capacity: 200, workers: 1}
triggers: [{kind: capacity, at: 20s, for: 10s, capacity: 60}]
fleets:
  - {name: naive, timeout: 5ms, retry: {max_retries: 3}, budget: {use: none}}
`)
	r = runCLI(t, "boundary", fast, "--grid", "6", "--json")
	var fjs struct {
		Policies []struct {
			ForSearched float64 `json:"for_searched_seconds"`
		}
	}
	if r.code != 0 {
		t.Fatalf("a 5 ms timeout: exit %d: %s", r.code, r.stderr)
	}
	if err := json.Unmarshal([]byte(r.stdout), &fjs); err != nil {
		t.Fatal(err)
	}
	if len(fjs.Policies) != 1 || fjs.Policies[0].ForSearched >= 600 || fjs.Policies[0].ForSearched < 10 {
		t.Errorf("a 5 ms timeout: %+v, want the search to stop between the trigger's 10 s and 10 minutes", fjs)
	}
}
