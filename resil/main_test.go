package resil

import (
	"errors"
	"math"
	"math/rand/v2"
	"sync"
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

// bucket is the retry budget of this package's tests, which cannot import
// resil/budget (it imports resil): a token bucket, counted in millionths
// of a token so that ten deposits of 0.1 make one, funded by requests or
// by successes, starting at its floor, capped at 100, a retry costing 1
// (timeout after a timeout). With unlimited it allows every retry, charges
// nothing and caps nothing, as budget.None does.
type bucket struct {
	mu        sync.Mutex
	tokens    int64
	ratio     int64
	timeout   int64
	byRequest bool
	unlimited bool
}

// bucketSpec says what bucket to make: ratio, the floor min, the cost of
// a retry after a timeout (zero: 1), and who funds it.
type bucketSpec struct {
	ratio, min, timeout float64
	byRequest           bool
}

const micro = 1_000_000

func newBucket(s bucketSpec) *bucket {
	b := &bucket{tokens: int64(s.min * micro), ratio: int64(math.Round(s.ratio * micro)), timeout: micro, byRequest: s.byRequest}
	if s.timeout > 0 {
		b.timeout = int64(s.timeout * micro)
	}
	return b
}

func (b *bucket) add(x int64) {
	b.mu.Lock()
	b.tokens = min(100*micro, b.tokens+x)
	b.mu.Unlock()
}

func (b *bucket) Begin(time.Time) {
	if b.byRequest {
		b.add(b.ratio)
	}
}

func (b *bucket) Record(_ time.Time, o Outcome, _ float64) {
	if !b.byRequest && o == OutcomeSuccess {
		b.add(b.ratio)
	}
}

func (b *bucket) Withdraw(_ time.Time, after Outcome) (float64, bool) {
	if b.unlimited {
		return 0, true
	}
	c := int64(micro)
	if after == OutcomeTimeout {
		c = b.timeout
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.tokens < c {
		return 0, false
	}
	b.tokens -= c
	return float64(c) / micro, true
}

func (b *bucket) Refund(_ time.Time, cost float64) {
	if cost > 0 {
		b.add(int64(math.Round(cost * micro)))
	}
}

func (b *bucket) Tokens(time.Time) float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return float64(b.tokens) / micro
}

func (b *bucket) UsesTime() bool { return false }

func (b *bucket) RetryShare() float64 {
	if b.unlimited {
		return math.Inf(1)
	}
	return float64(b.ratio) / micro
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
