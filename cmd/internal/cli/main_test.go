package cli

import (
	"testing"

	"github.com/retrystorm/retrystorm/internal/testlock"
)

// TestMain keeps these CPU-heavy tests from running beside the lab's, which
// time real servers (see internal/testlock).
func TestMain(m *testing.M) { testlock.RunShared(m) }
