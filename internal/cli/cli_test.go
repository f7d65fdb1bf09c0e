package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

type result struct {
	code           int
	stdout, stderr string
}

func runCLI(t *testing.T, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	code := Main(context.Background(), args, &out, &errb)
	return result{code, out.String(), errb.String()}
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update)", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s (rerun with -update if meant):\n%s", path, got)
	}
}

func TestDemo(t *testing.T) {
	dir := t.TempDir()
	r := runCLI(t, "--out", dir)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"Storm:", "Fleets:", "report: " + filepath.Join(dir, "index.html")} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	page, err := os.ReadFile(filepath.Join(dir, "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<svg", "Offered load", "Findings", "trigger"} {
		if !bytes.Contains(page, []byte(want)) {
			t.Errorf("report lacks %q", want)
		}
	}
	for _, bad := range []string{"http://", "https://", "<script src", "<link"} {
		if bytes.Contains(bytes.ReplaceAll(page, []byte(`xmlns="http://www.w3.org/2000/svg"`), nil), []byte(bad)) {
			t.Errorf("report refers to something outside itself: %q", bad)
		}
	}
	for _, line := range strings.Split(r.stdout, "\n") {
		if n := len([]rune(line)); n > 80 && !strings.HasPrefix(line, "✓") && !strings.HasPrefix(line, "✗") {
			t.Errorf("line of %d columns: %q", n, line)
		}
	}
}

func TestExperimentText(t *testing.T) {
	for _, name := range []string{"storm", "fleets"} {
		t.Run(name, func(t *testing.T) {
			r := runCLI(t, name, "--out", t.TempDir())
			if r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			// The report's path changes with the temporary directory.
			golden(t, name+".txt", r.stdout[:strings.LastIndex(r.stdout, "\nreport: ")])
		})
	}
}

func TestJSON(t *testing.T) {
	r := runCLI(t, "storm", "--json")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	var got struct {
		Scenario    string  `json:"scenario"`
		Seed        uint64  `json:"seed"`
		TickSeconds float64 `json:"tick_seconds"`
		Trigger     struct{ Start, End float64 }
		Fleets      []struct {
			Name    string
			Summary map[string]any
			Series  map[string][]any
		}
		Claims []struct {
			Text     string
			Holds    bool
			Measured any
		}
	}
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatal(err)
	}
	if got.Scenario != "storm" || got.Seed != 1 || got.TickSeconds != 1 || got.Trigger.End != 40 {
		t.Errorf("header: %+v", got)
	}
	summary := []string{"intents", "attempts", "retries", "successes", "failures", "breaker_refusals", "failures_after_clear",
		"victims", "recovered", "recovery_ticks", "intents_lost", "ceiling", "peak_offered", "retries_per_request", "answers_thrown_away"}
	series := []string{"tick", "offered", "first_attempts", "retries", "successes", "goodput", "failures", "error_rate",
		"retries_per_request", "queue", "breaker_open"}
	for _, f := range got.Fleets {
		for _, k := range summary {
			if _, ok := f.Summary[k]; !ok {
				t.Errorf("%s: summary lacks %q", f.Name, k)
			}
		}
		for _, k := range series {
			if len(f.Series[k]) != 120 {
				t.Errorf("%s: series %q has %d ticks, want 120", f.Name, k, len(f.Series[k]))
			}
		}
	}
	if len(got.Claims) == 0 {
		t.Error("no claims")
	}
	if r2 := runCLI(t, "storm", "--json"); r2.stdout != r.stdout {
		t.Error("two runs with the same seed print different JSON")
	}
	if r3 := runCLI(t, "storm", "--json", "--seed", "7"); r3.stdout == r.stdout {
		t.Error("--seed 7 changed nothing")
	}
}

func TestPrintConfigRoundTrip(t *testing.T) {
	r := runCLI(t, "fleets", "--print-config")
	if r.code != 0 || !strings.Contains(r.stdout, "budget_ratio") {
		t.Fatalf("exit %d: %s", r.code, r.stdout)
	}
	path := filepath.Join(t.TempDir(), "fleets.yaml")
	edited := strings.Replace(r.stdout, "capacity: 40", "capacity: 60", 1)
	if err := os.WriteFile(path, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	a := runCLI(t, "fleets", "--json")
	b := runCLI(t, "fleets", "--json", "--config", path)
	if b.code != 0 {
		t.Fatalf("--config: exit %d: %s", b.code, b.stderr)
	}
	if a.stdout == b.stdout {
		t.Error("the edited config changed nothing")
	}
	c := runCLI(t, "run", path, "--json")
	if c.code != 0 || !strings.Contains(c.stdout, `"claims": []`) {
		t.Errorf("run FILE: exit %d: %s", c.code, c.stderr)
	}
}

func TestUsageErrors(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("name: x\nduration: 10s\ntraffic: {rate: 10}\norigin: {model: queue, capacity: -1}\nfleets: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"nosuch"}, `unknown command "nosuch"`},
		{[]string{"storm", "--nosuch"}, "flag provided but not defined: -nosuch"},
		{[]string{"storm", "--seed", "x"}, "want an unsigned integer"},
		{[]string{"storm", "extra"}, "storm takes no arguments"},
		{[]string{"run"}, "run takes one scenario file"},
		{[]string{"run", "/nonexistent.yaml"}, "nonexistent.yaml"},
		{[]string{"storm", "--config", bad}, "bad.yaml:4:"},
		{[]string{"help", "nosuch"}, `unknown command "nosuch"`},
		{[]string{"sweep", "--grid", "1"}, "--grid 1: want 2 to 200"},
	}
	for _, c := range cases {
		r := runCLI(t, c.args...)
		if r.code != 2 {
			t.Errorf("%v: exit %d, want 2 (stderr %q)", c.args, r.code, r.stderr)
		}
		if !strings.Contains(r.stderr, c.want) {
			t.Errorf("%v: stderr %q lacks %q", c.args, r.stderr, c.want)
		}
		if r.stdout != "" {
			t.Errorf("%v: wrote to stdout: %q", c.args, r.stdout)
		}
	}
}

func TestHelp(t *testing.T) {
	r := runCLI(t, "help")
	if r.code != 0 {
		t.Fatal(r.stderr)
	}
	for _, want := range []string{"storm", "fleets", "run", "--json", "--seed", "--out", "--config", "Exit status"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("help lacks %q", want)
		}
	}
	for _, args := range [][]string{{"storm", "--help"}, {"help", "storm"}} {
		r := runCLI(t, args...)
		if r.code != 0 || !strings.Contains(r.stdout, "Usage: retrystorm storm") || !strings.Contains(r.stdout, "-print-config") {
			t.Errorf("%v: exit %d: %q", args, r.code, r.stdout)
		}
	}
}

// TestFailedClaimExits1 edits the storm so that its claims cannot hold:
// without a trigger nothing collapses. Everything is printed, then exit 1.
func TestFailedClaimExits1(t *testing.T) {
	r := runCLI(t, "storm", "--print-config")
	calm := strings.Replace(r.stdout, "capacity: 80}", "capacity: 120}", 1)
	path := filepath.Join(t.TempDir(), "calm.yaml")
	if err := os.WriteFile(path, []byte(calm), 0o644); err != nil {
		t.Fatal(err)
	}
	r = runCLI(t, "storm", "--config", path, "--json")
	if r.code != 1 {
		t.Fatalf("exit %d, want 1: %s", r.code, r.stderr)
	}
	var got struct{ Claims []struct{ Holds bool } }
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || len(got.Claims) == 0 {
		t.Fatalf("the JSON must still be printed: %v", err)
	}
}

// TestFindingsCurrent regenerates FINDINGS.md the way the README says and
// compares it with the committed one. Rewrite it with
// go run ./cmd/retrystorm all --findings FINDINGS.md.
func TestFindingsCurrent(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every experiment on the full sweep grid; skipped with -short")
	}
	path := filepath.Join(t.TempDir(), "FINDINGS.md")
	r := runCLI(t, "all", "--findings", path, "--out", t.TempDir())
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile("../../FINDINGS.md", got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile("../../FINDINGS.md")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Error("FINDINGS.md is out of date: go run ./cmd/retrystorm all --findings FINDINGS.md")
	}
}
