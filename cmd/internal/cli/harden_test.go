package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/retrystorm/retrystorm/internal/servertest"
	"github.com/retrystorm/retrystorm/scenario"
)

const tinyScenario = "duration: 10s\ntraffic: {rate: 10}\norigin: {model: capacity, capacity: 20}\n" +
	"fleets:\n  - {name: a, timeout: 1s, budget: {use: none}}\n"

// A file name holding an escape sequence never reaches the terminal or the
// report raw: messages quote it, the report's title escapes it.
func TestFileNamesAreQuoted(t *testing.T) {
	dir := t.TempDir()
	evil := filepath.Join(dir, "\x1b[41mEVIL\x1b[0m.yaml")
	raw := func(s string) bool { return strings.ContainsAny(s, "\x1b\u202e") }

	r := runCLI(t, "run", evil)
	if r.code != exitUsage || raw(r.stderr) || !strings.Contains(oneLine(r.stderr), `EVIL\x1b[0m.yaml": cannot read the file`) {
		t.Errorf("missing file: exit %d, stderr %q", r.code, r.stderr)
	}

	if err := os.WriteFile(evil, []byte("duration: [\n"), 0o644); err != nil {
		servertest.Missing(t, "this file system refuses the name: %v", err)
	}
	r = runCLI(t, "run", evil)
	if r.code != exitUsage || raw(r.stderr) || !strings.Contains(oneLine(r.stderr), `EVIL\x1b[0m.yaml":`) {
		t.Errorf("bad file: exit %d, stderr %q", r.code, r.stderr)
	}

	if err := os.WriteFile(evil, []byte(tinyScenario), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "report")
	r = runCLI(t, "run", evil, "--out", out)
	if r.code != exitOK || raw(r.stdout) || raw(r.stderr) {
		t.Fatalf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	doc, err := os.ReadFile(filepath.Join(out, "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	if raw(string(doc)) {
		t.Error("the report holds the escape sequence raw")
	}
	if !strings.Contains(string(doc), `EVIL\x1b[0m.yaml`) {
		t.Error("the report's title does not name the file, escaped")
	}

	// Any other error that quotes a path (here: the report cannot go
	// under a file) is escaped too.
	r = runCLI(t, "run", evil, "--out", filepath.Join(evil, "report"))
	if r.code == exitOK || raw(r.stderr) || !strings.Contains(oneLine(r.stderr), `EVIL\x1b[0m.yaml`) {
		t.Errorf("report under a file: exit %d, stderr %q", r.code, r.stderr)
	}
}

// A small file that asks for a run that would not fit in memory is
// refused before anything runs, with the estimate and the limit.
func TestRunRefusesWhatWouldNotFit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "windows.yaml")
	wide := "duration: 10s\ntraffic: {rate: 1, clients: 1000000}\norigin: {model: capacity, capacity: 10}\n" +
		"fleets:\n  - name: f\n    timeout: 1s\n    budget: {use: none}\n" +
		"    breaker: {use: count_window, settings: {window_size: 1000000, failure_rate: 0.5}}\n"
	if err := os.WriteFile(path, []byte(wide), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"run", path}, {"storm", "--config", path}, {"run", path, "--max-memory", "1GiB"}} {
		r := runCLI(t, args...)
		if r.code != exitUsage || !strings.Contains(oneLine(r.stderr), "would need about") || !strings.Contains(oneLine(r.stderr), "more than the limit of") || !strings.Contains(oneLine(r.stderr), "--max-memory") {
			t.Errorf("%v: exit %d, stderr %q", args, r.code, r.stderr)
		}
	}
	if r := runCLI(t, "run", path, "--max-memory", "lots"); r.code != exitUsage || !strings.Contains(oneLine(r.stderr), "want a size") {
		t.Errorf("--max-memory lots: exit %d, stderr %q", r.code, r.stderr)
	}
}

// A run estimated to take long is refused when nobody watches, unless
// --long says to go ahead.
func TestRunRefusesLongWorkUnlessLong(t *testing.T) {
	path := filepath.Join(t.TempDir(), "month.yaml")
	month := "duration: 720h\ntick: 1h\ntraffic: {rate: 1000000}\norigin: {model: capacity, capacity: 2000000}\n" +
		"fleets:\n  - {name: f, timeout: 1s, budget: {use: none}}\n"
	if err := os.WriteFile(path, []byte(month), 0o644); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, "run", path)
	if r.code != exitUsage || !strings.Contains(oneLine(r.stderr), "days of work") || !strings.Contains(oneLine(r.stderr), "--long") {
		t.Errorf("exit %d, stderr %q", r.code, r.stderr)
	}
	// --long admits it (without running it here: it would take days).
	c, _ := lookup(table(Heavy{}), "run")
	cl := &Invocation{Name: "run", Stdout: &strings.Builder{}, Stderr: &strings.Builder{}}
	if err := parse(c, []string{"--long", path}, cl); err != nil {
		t.Fatal(err)
	}
	sc, err := loadForTest(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.Admit(sc); err != nil {
		t.Errorf("with --long: %v", err)
	}
}

// --progress shows progress when standard error is not a terminal.
func TestRunProgressWhenPiped(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tiny.yaml")
	if err := os.WriteFile(path, []byte(tinyScenario), 0o644); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, "run", path, "--json", "--progress")
	if r.code != exitOK || !strings.Contains(oneLine(r.stderr), "run: 100% (10/10)") {
		t.Errorf("exit %d, stderr %q", r.code, r.stderr)
	}
	if r := runCLI(t, "run", path, "--json"); r.stderr != "" {
		t.Errorf("without --progress, piped: stderr %q", r.stderr)
	}
}

func loadForTest(path string) (*scenario.Scenario, error) { return scenario.Load(path) }
