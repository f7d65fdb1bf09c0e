//go:build unix

package scenario

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A named pipe is refused at once, with or without a writer (issue 27,
// item 8): opening one with no writer waited for ever, and Ctrl-C could
// not stop `run` blocked there. The series a scenario names is read the
// same way. /dev/zero, which never ends, is refused unread.
func TestLoadRefusesPipesAndDevices(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "nowriter.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("no named pipes here: %v", err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "rates.csv"), 0o600); err != nil {
		t.Fatal(err)
	}
	series := filepath.Join(dir, "series.yaml")
	if err := os.WriteFile(series, []byte("duration: 60s\ntraffic: {series: {file: rates.csv}}\n"+fleet), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ path, want string }{
		{fifo, "nowriter.yaml: is not a regular file"},
		{"/dev/zero", "/dev/zero: is not a regular file"},
		{series, `cannot read "` + filepath.Join(dir, "rates.csv") + `": is not a regular file`},
	} {
		done := make(chan error, 1)
		go func() { _, err := Load(c.path); done <- err }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Load(%s) = %v, want %q", c.path, err, c.want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("Load(%s) still waits after 10s: it must refuse a pipe at once", c.path)
		}
	}
}
