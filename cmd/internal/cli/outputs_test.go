package cli

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestOutputCheckedBeforeTheRun: a place the command cannot write is
// refused before anything runs (nothing printed on stdout), with exit 2
// and a message that says what to do and names no temporary file. Before,
// an existing file or a dangling symbolic link given to --out failed with
// exit 1 after the whole run, and --out /proc named a temporary file
// (issue 14, item 19).
func TestOutputCheckedBeforeTheRun(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "a-file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	dangling := filepath.Join(dir, "dangling")
	if err := os.Symlink(filepath.Join(dir, "gone"), dangling); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"storm", "--out", file}, "--out " + file + ": is a file, not a directory: give a directory"},
		{[]string{"--out", file}, "--out " + file + ": is a file"},
		{[]string{"storm", "--out", dangling}, "is a symbolic link to " + filepath.Join(dir, "gone") + ", which does not exist: remove the link, or give another directory"},
		{[]string{"storm", "--out", filepath.Join(file, "report")}, file + " is a file, so no directory can be made under it"},
		{[]string{"run", "x.yaml", "--out", file}, "--out " + file + ": is a file"},
		{[]string{"page", "-o", dir}, "-o " + dir + ": is a directory: give a file name"},
		{[]string{"page", "-o", filepath.Join(dir, "no", "page.html")}, "the directory " + filepath.Join(dir, "no") + " does not exist"},
		{[]string{"all", "--findings", filepath.Join(dir, "no", "F.md"), "--out", dir}, "--findings"},
	}
	if runtime.GOOS == "linux" {
		cases = append(cases,
			struct {
				args []string
				want string
			}{[]string{"storm", "--out", "/proc"}, "--out /proc: cannot write in it"},
			struct {
				args []string
				want string
			}{[]string{"storm", "--out", "/proc/report"}, "cannot make a directory in /proc"},
			struct {
				args []string
				want string
			}{[]string{"page", "-o", "/proc/page.html"}, "cannot write in /proc"})
	}
	for _, c := range cases {
		r := runCLI(t, c.args...)
		if r.code != 2 || !strings.Contains(oneLine(r.stderr), c.want) || r.stdout != "" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit 2, nothing run, and %q", c.args, r.code, r.stdout, r.stderr, c.want)
		}
		if strings.Contains(r.stderr, ".retrystorm-probe") || strings.Contains(r.stderr, "index.html.") {
			t.Errorf("%q: the message names a temporary file: %s", c.args, r.stderr)
		}
	}
	// --json writes no report, so a bad default place is no obstacle, and
	// --print-config writes none either.
	if r := runCLI(t, "storm", "--print-config", "--out", file); r.code != 0 {
		t.Errorf("--print-config with a bad --out: exit %d: %s", r.code, r.stderr)
	}
}
