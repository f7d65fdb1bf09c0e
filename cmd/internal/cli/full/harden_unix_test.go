//go:build unix

package full

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/internal/servertest"
	"github.com/retrystorm/retrystorm/scenario"
)

// Issue 27, item 1: import, check, advise, merge and --base read their
// files with a bound, as run does: a file too large is refused before it
// is read (a 3 GiB sparse file allocated 3.2 GB), one that never ends
// (/dev/zero reached 22.7 GiB), a directory and a named pipe (which
// blocked for ever, deaf to Ctrl-C: item 8) are refused, all with exit
// status 2 and the file's name.
func TestCommandsReadBoundedFiles(t *testing.T) {
	dir := t.TempDir()
	huge := filepath.Join(dir, "huge.yaml")
	f, err := os.Create(huge)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(3 << 30); err != nil {
		servertest.Missing(t, "no sparse files here: %v", err)
	}
	f.Close()
	fifo := filepath.Join(dir, "fifo.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		servertest.Missing(t, "no named pipes here: %v", err)
	}
	ok := importerData("istio/naive.yaml")
	bad := []struct{ file, want string }{
		{huge, "huge.yaml: the file is too large (3221225472 bytes; at most"},
		{"/dev/zero", "/dev/zero: is not a regular file"},
		{fifo, "fifo.yaml: is not a regular file"},
		{dir, ": is a directory"},
	}
	for _, args := range []func(file string) []string{
		func(f string) []string { return []string{"import", f} },
		func(f string) []string { return []string{"import", "--base", f, ok} },
		func(f string) []string { return []string{"check", f} },
		func(f string) []string { return []string{"check", "--base", f, ok} },
		func(f string) []string { return []string{"advise", f} },
		func(f string) []string { return []string{"advise", "--base", f} },
		func(f string) []string { return []string{"merge", f} },
	} {
		for _, b := range bad {
			args := append(args(b.file), "--out", t.TempDir())
			if args[0] == "import" {
				args = args[:len(args)-2] // import writes no report
			}
			done := make(chan result, 1)
			go func() { done <- runCLI(t, args...) }()
			select {
			case r := <-done:
				if r.code != 2 || !strings.Contains(oneLine(r.stderr), b.want) {
					t.Errorf("%q: exit %d, want 2 saying %q\n%s", args, r.code, b.want, r.stderr)
				}
			case <-time.After(20 * time.Second):
				t.Fatalf("%q: still running after 20s", args)
			}
		}
	}
}

// Issue 27, item 7: a file name that is not UTF-8 (any bytes on Unix)
// panicked import in the YAML encoder, which took it into a comment. It
// is escaped wherever it is quoted, and the scenario written loads.
func TestImportNonUTF8FileName(t *testing.T) {
	data, err := os.ReadFile(importerData("istio/naive.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "bad\xff\x1b[2J.yaml")
	if err := os.WriteFile(file, data, 0o644); err != nil {
		servertest.Missing(t, "this file system takes no such name: %v", err)
	}
	r := runCLI(t, "import", file)
	if r.code != 0 || strings.Contains(r.stderr, "panic") {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	if !strings.Contains(r.stdout, `bad\xff\x1b[2J.yaml`) || strings.ContainsRune(r.stdout, 0x1b) {
		t.Errorf("the name is not escaped in the scenario:\n%s", r.stdout)
	}
	if _, err := scenario.Parse("out.yaml", []byte(r.stdout)); err != nil {
		t.Errorf("the scenario written does not load: %v", err)
	}
}
