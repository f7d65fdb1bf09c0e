package budget

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/retrystorm/retrystorm/resil"
)

// TestMain fails the package if any test leaves a goroutine running: the
// Guards that some tests drive promise that none outlives a call.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// t0 is the origin of the tests' fixed time grid.
var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// ts returns t0 plus sec seconds.
func ts(sec float64) time.Time { return t0.Add(time.Duration(sec * float64(time.Second))) }

// noJitter is a source for Policy.Retry where no draw matters.
func noJitter() rand.Source { return rand.NewPCG(0, 0) }

func mustTB(t testing.TB, s TokenBucketSettings) *TokenBucket {
	t.Helper()
	b, err := NewTokenBucket(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// wantSettingError fails t unless err is a *resil.SettingError naming
// field.
func wantSettingError(t *testing.T, err error, field string) {
	t.Helper()
	if se, ok := errors.AsType[*resil.SettingError](err); !ok || se.Field != field {
		t.Errorf("err = %v, want a SettingError on %s", err, field)
	}
}

func near(a, b float64) bool {
	d := a - b
	return d < 1e-9 && d > -1e-9
}

func mustGuard(t testing.TB, s resil.GuardSettings) *resil.Guard {
	t.Helper()
	g, err := resil.NewGuard(s)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

var errBoom = errors.New("boom")
