package cpuhog

import (
	"os"
	"strconv"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	Main()
	os.Exit(m.Run())
}

// TestStart: a hog starts spinning, and is gone once its test ends; the
// test's own process, not a hog, passes through Main.
func TestStart(t *testing.T) {
	if Active() {
		t.Fatal("the test's own process is a hog")
	}
	var pid int
	t.Run("hog", func(t *testing.T) {
		pid = Start(t)
		if !canThrottle {
			return
		}
		// Stopped for 30 ms of every 100: within a second, some 5 ms
		// sleep overruns by far more than any scheduler's slack.
		worst := time.Duration(0)
		for end := time.Now().Add(time.Second); time.Now().Before(end); {
			t0 := time.Now()
			time.Sleep(5 * time.Millisecond)
			worst = max(worst, time.Since(t0)-5*time.Millisecond)
		}
		if worst < Stop/2 {
			t.Errorf("the worst overrun of a 5 ms sleep was %v: the throttle did not stop this process", worst)
		}
	})
	if _, err := os.Stat("/proc/self"); err != nil {
		t.Skip("no /proc here to look for the hog in")
	}
	if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); !os.IsNotExist(err) {
		t.Errorf("the hog, process %d, outlived its test: %v", pid, err)
	}
}
