package resil

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestMain fails the package if any test leaves a goroutine running: the
// Guard promises that none outlives a call.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// t0 is the origin of the tests' fixed time grid.
var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// ts returns t0 plus sec seconds.
func ts(sec float64) time.Time { return t0.Add(time.Duration(sec * float64(time.Second))) }

// fixedSource draws the same number every time, so that uniform(src) is u.
type fixedSource uint64

func (s fixedSource) Uint64() uint64 { return uint64(s) }

// draw returns a source whose uniform draw is u, in [0, 1).
func draw(u float64) rand.Source { return fixedSource(uint64(u * (1 << 53))) }

// seqSource draws its values in turn, then repeats the last.
type seqSource struct {
	vals []uint64
	i    int
}

func (s *seqSource) Uint64() uint64 {
	v := s.vals[min(s.i, len(s.vals)-1)]
	s.i++
	return v
}

func mustTB(t testing.TB, s TokenBucketSettings) *TokenBucket {
	t.Helper()
	b, err := NewTokenBucket(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustBreaker(t testing.TB, s BreakerSettings) *Breaker {
	t.Helper()
	b, err := NewBreaker(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// wantSettingError fails t unless err is a *SettingError naming field.
func wantSettingError(t *testing.T, err error, field string) {
	t.Helper()
	var se *SettingError
	if !errors.As(err, &se) || se.Field != field {
		t.Errorf("err = %v, want a SettingError on %s", err, field)
	}
}

func near(a, b float64) bool {
	d := a - b
	return d < 1e-9 && d > -1e-9
}
