package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
	if r.code != exitUsage || raw(r.stderr) || !strings.Contains(r.stderr, `EVIL\x1b[0m.yaml": cannot read the file`) {
		t.Errorf("missing file: exit %d, stderr %q", r.code, r.stderr)
	}

	if err := os.WriteFile(evil, []byte("duration: [\n"), 0o644); err != nil {
		t.Skipf("this file system refuses the name: %v", err)
	}
	r = runCLI(t, "run", evil)
	if r.code != exitUsage || raw(r.stderr) || !strings.Contains(r.stderr, `EVIL\x1b[0m.yaml":`) {
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
	if r.code == exitOK || raw(r.stderr) || !strings.Contains(r.stderr, `EVIL\x1b[0m.yaml`) {
		t.Errorf("report under a file: exit %d, stderr %q", r.code, r.stderr)
	}
}
