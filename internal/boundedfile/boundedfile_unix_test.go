//go:build unix

package boundedfile

import (
	"errors"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// A named pipe with no writer is refused at once: opening it to read would
// wait for a writer for ever, deaf to Ctrl-C. A device that never ends
// (/dev/zero) is refused without a byte read.
func TestReadRefusesWhatIsNotAFile(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("no named pipes here: %v", err)
	}
	for _, path := range []string{fifo, "/dev/zero", "/dev/null"} {
		done := make(chan error, 1)
		go func() { _, err := Read(path, 1<<20); done <- err }()
		select {
		case err := <-done:
			if !errors.Is(err, ErrNotRegular) {
				t.Errorf("Read(%s) = %v, want ErrNotRegular", path, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("Read(%s) still waits after 10s: it must refuse it at once", path)
		}
	}
}
