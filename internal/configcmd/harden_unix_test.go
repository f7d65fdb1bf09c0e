//go:build unix

package configcmd

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

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
		t.Skipf("no sparse files here: %v", err)
	}
	f.Close()
	fifo := filepath.Join(dir, "fifo.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("no named pipes here: %v", err)
	}
	ok := testdata("istio/naive.yaml")
	bad := []struct{ file, want string }{
		{huge, "huge.yaml: the file is too large (3221225472 bytes; at most"},
		{"/dev/zero", "/dev/zero: is not a regular file"},
		{fifo, "fifo.yaml: is not a regular file"},
		{dir, ": is a directory"},
	}
	cmds := []struct {
		name string
		run  func(context.Context, []string, IO) error
		args func(file string) []string
	}{
		{"import", Import, func(f string) []string { return []string{f} }},
		{"import --base", Import, func(f string) []string { return []string{"--base", f, ok} }},
		{"check", Check, func(f string) []string { return []string{f} }},
		{"check --base", Check, func(f string) []string { return []string{"--base", f, ok} }},
		{"advise", Advise, func(f string) []string { return []string{f} }},
		{"advise --base", Advise, func(f string) []string { return []string{"--base", f} }},
		{"merge", func(ctx context.Context, args []string, o IO) error { _, _, err := Merge(ctx, args, o); return err },
			func(f string) []string { return []string{f} }},
	}
	for _, c := range cmds {
		for _, b := range bad {
			done := make(chan error, 1)
			go func() { _, _, err := runCmd(t, c.run, c.args(b.file)...); done <- err }()
			select {
			case err := <-done:
				// Exit status 2: a usage error, or the scenario loader's
				// error for --base, as run gives.
				_, usage := errors.AsType[*UsageError](err)
				_, loader := errors.AsType[*scenario.Error](err)
				if !usage && !loader || !strings.Contains(err.Error(), b.want) {
					t.Errorf("%s %s: %v, want a usage error saying %q", c.name, b.file, err, b.want)
				}
			case <-time.After(20 * time.Second):
				t.Fatalf("%s %s: still running after 20s", c.name, b.file)
			}
		}
	}
}

// Issue 27, item 7: a file name that is not UTF-8 (any bytes on Unix)
// panicked import in the YAML encoder, which took it into a comment. It
// is escaped wherever it is quoted, and the scenario written loads.
func TestImportNonUTF8FileName(t *testing.T) {
	data, err := os.ReadFile(testdata("istio/naive.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "bad\xff\x1b[2J.yaml")
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Skipf("this file system takes no such name: %v", err)
	}
	var out string
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("import panicked: %v", r)
			}
		}()
		out, _, err = runCmd(t, Import, file)
	}()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, `bad\xff\x1b[2J.yaml`) || strings.ContainsRune(out, 0x1b) {
		t.Errorf("the name is not escaped in the scenario:\n%s", out)
	}
	if _, err := scenario.Parse("out.yaml", []byte(out)); err != nil {
		t.Errorf("the scenario written does not load: %v", err)
	}
}
