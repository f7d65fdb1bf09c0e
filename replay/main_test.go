package replay_test

import (
	"flag"
	"os"
	"testing"

	"github.com/retrystorm/retrystorm/internal/testlock"
)

// TestMain runs the four real-time tests (realTimeParallel) all at once
// rather than two at a time (go test's default -parallel on two cores).
// Each keeps a sixth of a core busy; the package took 142-150 s two at a
// time and 104 s four at a time, and with two busy loops keeping both
// cores busy beside it every run was conclusive at its first try (116 s).
// The longest test, TestCounterfactualsInTheLab (about 95 s), bounds the
// package now.
func TestMain(m *testing.M) {
	flag.Parse()
	testlock.Parallel(4)
	os.Exit(m.Run())
}
