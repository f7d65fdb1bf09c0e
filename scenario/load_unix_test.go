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

// A pipe that sends more than the limit and never ends (as /dev/zero
// would) is refused as soon as the limit is passed: Load does not wait for
// an end that never comes, nor hold what it read.
func TestLoadEndlessPipe(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "endless.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("no named pipes here: %v", err)
	}
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err != nil {
			return
		}
		defer w.Close()
		chunk := []byte(strings.Repeat("# endless\n", 6554)) // 64 KiB
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}()
	done := make(chan error, 1)
	go func() { _, err := Load(fifo); done <- err }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "too large: it goes on past the limit of 1048576 bytes") {
			t.Errorf("Load(endless pipe) = %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Load is still reading an endless pipe after 30s: it must stop at the limit")
	}
}
