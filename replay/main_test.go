package replay_test

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
func TestMain(m *testing.M) {
	flag.Parse()
	if !testing.Short() {
		testlock.Exclusive()
	}
	os.Exit(m.Run())
}
