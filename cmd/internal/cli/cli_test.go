package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/retrystorm/retrystorm/experiment"
	"github.com/retrystorm/retrystorm/internal/golden"
	"github.com/retrystorm/retrystorm/internal/servertest"
)

type result struct {
	code           int
	stdout, stderr string
}

// runCLI runs the light command, as cmd/retrystorm does: with the zero
// Heavy, so that the heavy commands go to the companion. internal/cli/full
// has its twin, which runs the full command (full.Heavy): a helper of a
// test file is not importable, and one in a package of its own would save
// nothing, each package's tests needing the binary they test.
func runCLI(t *testing.T, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	code := Main(context.Background(), args, &out, &errb, Heavy{})
	return result{code, out.String(), errb.String()}
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
	if n := widest(r.stdout); n > 80 {
		t.Errorf("a line of %d columns:\n%s", n, r.stdout)
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
			golden.Check(t, filepath.Join("testdata", name+".txt"), []byte(r.stdout[:strings.LastIndex(r.stdout, "\nreport: ")]), "go test ./internal/cli -run TestExperimentText -update")
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
		{[]string{"storm", "--nosuch"}, "retrystorm storm: unknown flag --nosuch (it takes --config, --json, --long, --max-memory, --out, --print-config, --progress or --seed)"},
		{[]string{"storm", "--sed", "1"}, "unknown flag --sed; did you mean --seed?"},
		{[]string{"--nosuch"}, "retrystorm: unknown flag --nosuch"},
		{[]string{"strom"}, `unknown command "strom"; did you mean "storm"?`},
		{[]string{"storm", "--config", ""}, `--config "": needs a file name`},
		{[]string{"storm", "--seed", "x"}, "want an unsigned integer"},
		{[]string{"storm", "extra"}, "storm takes no arguments"},
		{[]string{"run"}, "run takes one scenario file"},
		{[]string{"run", "/nonexistent.yaml"}, "nonexistent.yaml"},
		{[]string{"storm", "--config", bad}, "bad.yaml:4:"},
		{[]string{"help", "nosuch"}, `unknown command "nosuch"`},
		{[]string{"sweep", "--grid", "1"}, "--grid 1: want a whole number of cells per axis from 6 to 200"},
		{[]string{"sweep", "--grid", "2"}, "--grid 2: want a whole number of cells per axis from 6 to 200"},
		{[]string{"all", "--grid", "5"}, "--grid 5: want"},
	}
	for _, c := range cases {
		r := runCLI(t, c.args...)
		if r.code != 2 {
			t.Errorf("%v: exit %d, want 2 (stderr %q)", c.args, r.code, r.stderr)
		}
		if !strings.Contains(oneLine(r.stderr), c.want) {
			t.Errorf("%v: stderr %q lacks %q", c.args, r.stderr, c.want)
		}
		if l := widest(r.stderr); l > 80 {
			t.Errorf("%v: a line of %d columns on stderr", c.args, l)
		}
		if r.stdout != "" {
			t.Errorf("%v: wrote to stdout: %q", c.args, r.stdout)
		}
	}
}

// TestHelp: help, -h and --help list every command of the table, heavy
// ones too, and the flags as the README writes them; each command's help
// shows its flags.
func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"-h"}, {"--help"}, {"-help"}} {
		r := runCLI(t, args...)
		if r.code != 0 || r.stderr != "" {
			t.Fatalf("%q: exit %d: %s", args, r.code, r.stderr)
		}
		for _, c := range table(Heavy{}) {
			if c.Name != "demo" && !strings.Contains(r.stdout, "\n  "+c.Name+" ") {
				t.Errorf("%q does not list %s:\n%s", args, c.Name, r.stdout)
			}
		}
		for _, want := range []string{"--json", "--seed N", "--out DIR", "--config FILE", "Exit status", "retrystorm-full"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("%q lacks %q", args, want)
			}
		}
		if strings.Contains(r.stdout, "\n  -json") || strings.Contains(r.stdout, "\n  -seed") {
			t.Errorf("%q writes a long flag with one dash:\n%s", args, r.stdout)
		}
	}
	for _, args := range [][]string{{"storm", "--help"}, {"help", "storm"}, {"storm", "-h"}} {
		r := runCLI(t, args...)
		if r.code != 0 || !strings.Contains(r.stdout, "Usage: retrystorm storm [flags]") || !strings.Contains(r.stdout, "\n  --print-config ") {
			t.Errorf("%v: exit %d: %q", args, r.code, r.stdout)
		}
	}
	if r := runCLI(t, "help", "strom"); r.code != 2 || !strings.Contains(r.stderr, `did you mean "storm"?`) {
		t.Errorf("help strom: exit %d: %s", r.code, r.stderr)
	}
}

// TestEveryLineFits: the help of every command, the list, and the
// scenario files --print-config prints fit 80 columns when not on a
// terminal.
func TestEveryLineFits(t *testing.T) {
	runs := [][]string{{"help"}, {"--help"}}
	for _, c := range table(Heavy{}) {
		runs = append(runs, []string{"help", c.Name})
		if e, ok := experiment.Lookup(c.Name); ok && e.Config != nil {
			runs = append(runs, []string{c.Name, "--print-config"})
		}
	}
	for _, args := range runs {
		r := runCLI(t, args...)
		if r.code != 0 {
			t.Errorf("%q: exit %d: %s", args, r.code, r.stderr)
		}
		if n := widest(r.stdout); n > 80 {
			t.Errorf("%q: a line of %d columns:\n%s", args, n, r.stdout)
		}
	}
}

// widest is the most columns a line of s takes.
func widest(s string) int {
	n := 0
	for _, l := range strings.Split(s, "\n") {
		n = max(n, utf8.RuneCountInString(l))
	}
	return n
}

// oneLine joins s's lines, for matching a message that was wrapped.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

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
	golden.Check(t, "../../../FINDINGS.md", got, "go run ./cmd/retrystorm all --findings FINDINGS.md")
}

// TestSweepSmallestGrid: every grid the sweep accepts can bear out its
// claims. Before, --grid 2 was accepted and then failed them by
// construction (issue 14, item 10).
func TestSweepSmallestGrid(t *testing.T) {
	seeds := 5
	if testing.Short() {
		seeds = 1 // each is a whole sweep: minutes under the race detector
	}
	for seed := 1; seed <= seeds; seed++ {
		r := runCLI(t, "sweep", "--grid", strconv.Itoa(minGrid), "--seed", strconv.Itoa(seed), "--json")
		if r.code != 0 {
			t.Errorf("sweep --grid %d --seed %d: exit %d: %s", minGrid, seed, r.code, r.stderr)
		}
	}
	if r := runCLI(t, "sweep", "--grid", strconv.Itoa(minGrid-1)); r.code != 2 {
		t.Errorf("sweep --grid %d: exit %d, want 2", minGrid-1, r.code)
	}
}

// TestLightBinaryIsLean: cmd/retrystorm links the standard library, the
// YAML parser and this module's light packages, never the lab or anything
// it pulls in (Prometheus, protobuf), so that the demo's first go run
// compiles little.
func TestLightBinaryIsLean(t *testing.T) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		servertest.Missing(t, "no go command: %v", err)
	}
	out, err := exec.Command(goCmd, "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ModulePath+"/cmd/retrystorm").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range strings.Fields(string(out)) {
		ours := strings.HasPrefix(p, ModulePath+"/")
		if (!ours && p != "go.yaml.in/yaml/v3") || p == ModulePath+"/lab" || strings.HasPrefix(p, ModulePath+"/internal/cli/full") ||
			p == ModulePath+"/importer" || p == ModulePath+"/internal/configcmd" {
			t.Errorf("cmd/retrystorm links %s", p)
		}
	}
}
