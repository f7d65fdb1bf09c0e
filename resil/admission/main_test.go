package admission

import (
	"errors"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/resil"
	"go.uber.org/goleak"
)

// TestMain fails the package if any test leaves a goroutine running: a
// Shedder's waiters must all be gone when their requests are.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// t0 is the origin of the tests' fixed time grid.
var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// ts returns t0 plus sec seconds.
func ts(sec float64) time.Time { return t0.Add(time.Duration(sec * float64(time.Second))) }

// wantSettingError fails t unless err is a *resil.SettingError naming field.
func wantSettingError(t *testing.T, err error, field string) {
	t.Helper()
	var se *resil.SettingError
	if !errors.As(err, &se) || se.Field != field {
		t.Errorf("err = %v, want a SettingError on %s", err, field)
	}
}

func near(a, b float64) bool {
	d := a - b
	return d < 1e-9 && d > -1e-9
}
