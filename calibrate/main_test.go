package calibrate_test

import (
	"flag"
	"os"
	"testing"

	"github.com/retrystorm/retrystorm/internal/testlock"
)

// TestMain takes the test lock before the tests start, not inside the
// real servers' tests: go test's -timeout counts from the first test, and
// in CI the CPU-heavy packages hold the lock, shared, for minutes (a wait
// inside a test timed the package out at 15 minutes). Under -short those
// tests skip, and nothing is taken.
//
// realTimeParallel: the tests that play traffic in real time against
// real servers scraped by a real Prometheus run all three at once
// (testlock.Parallel), since each keeps about a tenth of a core busy and
// waits on its ticks the rest of the time: the package took 64 s two at
// a time and 38 s three at a time, every run conclusive at its first try
// on a quiet machine. Each still watches its machine and measures again
// when a run was spoiled (testlock.Conclusive).
func TestMain(m *testing.M) {
	flag.Parse()
	testlock.Parallel(3)
	if !testing.Short() {
		testlock.Exclusive()
	}
	os.Exit(m.Run())
}
