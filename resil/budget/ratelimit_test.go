package budget

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrystorm/retrystorm/resil"
)

// rl is a point on the rate limiter tests' grid: whole seconds plus
// milliseconds, from Unix second 100 (the SDK's time scale is Unix
// seconds, so the half-second buckets fall on this grid).
func rl(sec float64) time.Time {
	return time.Unix(100, 0).Add(time.Duration(math.Round(sec*1000)) * time.Millisecond)
}

func mustRateLimiter(t testing.TB, s ClientRateLimiterSettings) *ClientRateLimiter {
	t.Helper()
	l, err := NewClientRateLimiter(s)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func wantState(t *testing.T, step string, l *ClientRateLimiter, want RateLimiterState) {
	t.Helper()
	got := l.State()
	close := func(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }
	if got.Enabled != want.Enabled || !close(got.FillRate, want.FillRate) || !close(got.Capacity, want.Capacity) ||
		!close(got.Tokens, want.Tokens) || !close(got.Measured, want.Measured) {
		t.Fatalf("%s: state %+v, want %+v", step, got, want)
	}
}

// TestClientRateLimiterAdaptiveMode steps the AWS SDKs' adaptive mode on
// a fixed grid: ten responses a second for two seconds, a throttle, the
// bucket that then paces every attempt, and the CUBIC recovery. The
// expected figures come from the specification's formulas (botocore's
// ClientRateLimiter, CubicCalculator, RateClocker and TokenBucket),
// evaluated step by step outside this package.
func TestClientRateLimiterAdaptiveMode(t *testing.T) {
	l := mustRateLimiter(t, ClientRateLimiterSettings{})
	if d, ok := l.Acquire(rl(0)); !ok || d != 0 {
		t.Fatalf("before any throttle: Acquire = %v, %v; want 0, true", d, ok)
	}
	for i := range 20 {
		l.Update(rl(float64(i)/10), false)
	}
	// Measured: half-second buckets of 5 responses (10/s), smoothed by
	// 0.8 from 0: 8, 9.6, 9.92, 9.984. CUBIC with Wmax 0 grows as
	// 0.4·t³ (2.7436 at t = 1.9), capped at twice the measured rate.
	wantState(t, "twenty successes", l, RateLimiterState{FillRate: 2.7436, Capacity: 2.7436, Tokens: 1.59864, Measured: 9.984})

	// A throttle at t = 2: the rate drops to 0.7 × measured (9.9968).
	l.Update(rl(2), true)
	wantState(t, "throttled", l, RateLimiterState{Enabled: true, FillRate: 6.99776, Capacity: 6.99776, Tokens: 1.873, Measured: 9.9968})
	if d, ok := l.Acquire(rl(2)); !ok || d != 0 {
		t.Fatalf("first attempt after the throttle: %v, %v; want a token", d, ok)
	}
	// 0.873 tokens left: the next one needs 0.127 more at 6.99776/s.
	for range 3 {
		d, ok := l.Acquire(rl(2))
		if ok || d != 18148665*time.Nanosecond {
			t.Fatalf("short bucket: Acquire = %v, %v; want 18.148665ms, false", d, ok)
		}
	}
	if d, ok := l.Acquire(rl(2.25)); !ok || d != 0 {
		t.Fatalf("after 250ms of refill: %v, %v; want a token", d, ok)
	}
	wantState(t, "paced", l, RateLimiterState{Enabled: true, FillRate: 6.99776, Capacity: 6.99776, Tokens: 1.62244, Measured: 9.9968})

	// Recovery: CUBIC climbs back towards Wmax = 9.9968, but never past
	// twice the (now falling) measured rate; the fill rate never drops
	// below 0.5 and the bucket never below one token.
	l.Update(rl(3), false)
	wantState(t, "success at 3s", l, RateLimiterState{Enabled: true, FillRate: 5.59872, Capacity: 5.59872, Tokens: 5.59872, Measured: 2.79936})
	l.Update(rl(5), false)
	wantState(t, "success at 5s", l, RateLimiterState{Enabled: true, FillRate: 1.919744, Capacity: 1.919744, Tokens: 1.919744, Measured: 0.959872})
	l.Update(rl(10), false)
	wantState(t, "success at 10s", l, RateLimiterState{Enabled: true, FillRate: 0.7039488, Capacity: 1, Tokens: 1, Measured: 0.3519744})
}

// TestClientRateLimiterCubic checks the CUBIC curve itself at a steady
// measured rate: right after a throttle the rate is β·Wmax, and K seconds
// later it is back at Wmax.
func TestClientRateLimiterCubic(t *testing.T) {
	l := mustRateLimiter(t, ClientRateLimiterSettings{})
	// 100 responses a second for 5 seconds: the measured rate settles near 100.
	for i := range 500 {
		l.Update(rl(float64(i)/100), false)
	}
	m := l.State().Measured
	l.Update(rl(5), true)
	wmax := l.State().Measured
	if got := l.State().FillRate; math.Abs(got-0.7*wmax) > 1e-9 {
		t.Fatalf("after the throttle: fill rate %v, want 0.7 × %v", got, wmax)
	}
	if math.Abs(m-wmax) > 1 {
		t.Fatalf("measured rate moved from %v to %v on one response", m, wmax)
	}
	k := math.Cbrt(wmax * 0.3 / 0.4)
	// Keep the measured rate up (responses every 10ms), then look at K.
	for i := 1; float64(i)/100 < k; i++ {
		l.Update(rl(5+float64(i)/100), false)
	}
	at := 5 + math.Ceil(k*100)/100
	l.Update(rl(at), false)
	want := 0.4*math.Pow(at-5-k, 3) + wmax
	if got := l.State().FillRate; math.Abs(got-want) > 1e-6 {
		t.Fatalf("K = %.3fs after the throttle: fill rate %v, want %v (Wmax %v)", k, got, want, wmax)
	}
}

func TestClientRateLimiterFailFast(t *testing.T) {
	l := mustRateLimiter(t, ClientRateLimiterSettings{FailOnNoTokens: true})
	p := resil.Policy{Pacer: l}
	if d, err := p.Pace(rl(0)); d != 0 || err != nil {
		t.Fatalf("before any throttle: Pace = %v, %v", d, err)
	}
	l.Update(rl(0), true) // nothing measured: the rate drops to the floor
	var in resil.Intent
	tk, err := p.Begin(rl(0), &in)
	if err != nil {
		t.Fatal(err)
	}
	p.End(rl(0), &in, tk, resil.OutcomeThrottled, 0)
	if _, err := p.Pace(rl(0)); !errors.Is(err, resil.ErrRateLimited) {
		t.Fatalf("empty bucket: %v, want ErrRateLimited", err)
	}
	if d, err := p.Pace(rl(2)); d != 0 || err != nil {
		t.Fatalf("two seconds at 0.5/s: Pace = %v, %v; want a token", d, err)
	}
}

// TestPolicyPaceBefore: an attempt whose pacer wait would pass its latest
// start is refused now (ErrNoTimeLeft); one whose wait fits gets the wait;
// without a limit, or with a token, Pace's answer stands.
func TestPolicyPaceBefore(t *testing.T) {
	l := mustRateLimiter(t, ClientRateLimiterSettings{})
	p := resil.Policy{Pacer: l}
	l.Update(rl(0), true) // the rate drops to the floor, 0.5/s
	var in resil.Intent
	tk, err := p.Begin(rl(0), &in)
	if err != nil {
		t.Fatal(err)
	}
	p.End(rl(0), &in, tk, resil.OutcomeThrottled, 0)
	wait, err := p.Pace(rl(0))
	if err != nil || wait <= 0 {
		t.Fatalf("empty bucket: Pace = %v, %v; want a wait", wait, err)
	}
	for _, c := range []struct {
		name   string
		latest time.Time
		want   time.Duration
		err    error
	}{
		{"no limit", time.Time{}, wait, nil},
		{"the wait fits", rl(0).Add(wait), wait, nil},
		{"the wait passes the limit", rl(0).Add(wait - time.Nanosecond), 0, resil.ErrNoTimeLeft},
	} {
		d, err := p.PaceBefore(rl(0), c.latest)
		if d != c.want || !errors.Is(err, c.err) || (c.err == nil && err != nil) {
			t.Errorf("%s: PaceBefore = %v, %v; want %v, %v", c.name, d, err, c.want, c.err)
		}
	}
	if d, err := p.PaceBefore(rl(10), rl(10)); d != 0 || err != nil {
		t.Fatalf("a token at the limit itself: PaceBefore = %v, %v; want it to go", d, err)
	}
}

func TestClientRateLimiterSettings(t *testing.T) {
	for _, c := range []struct {
		s     ClientRateLimiterSettings
		field string
	}{
		{ClientRateLimiterSettings{Beta: 1}, "ClientRateLimiterSettings.Beta"},
		{ClientRateLimiterSettings{Beta: math.NaN()}, "ClientRateLimiterSettings.Beta"},
		{ClientRateLimiterSettings{ScaleConstant: -1}, "ClientRateLimiterSettings.ScaleConstant"},
		{ClientRateLimiterSettings{Smoothing: 1.5}, "ClientRateLimiterSettings.Smoothing"},
		{ClientRateLimiterSettings{MinFillRate: math.Inf(1)}, "ClientRateLimiterSettings.MinFillRate"},
		{ClientRateLimiterSettings{RequestCost: -1}, "ClientRateLimiterSettings.RequestCost"},
	} {
		_, err := NewClientRateLimiter(c.s)
		wantSettingError(t, err, c.field)
	}
}

// TestGuardPaces: a Guard with a Pacer waits for a token before the first
// attempt, on its clock, once the limiter is throttled.
func TestGuardPaces(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := mustRateLimiter(t, ClientRateLimiterSettings{})
		g := mustGuard(t, resil.GuardSettings{Policy: resil.Policy{Pacer: l}})
		l.Update(time.Now(), true) // throttled with nothing measured: 0.5 tokens a second
		start := time.Now()
		for range 3 {
			if err := g.Do(context.Background(), func(context.Context) error { return nil }); err != nil {
				t.Fatal(err)
			}
		}
		// The first waits 2s for a token at 0.5/s. Its success measures
		// 2 responses in 2s (0.8/s smoothed) and CUBIC from Wmax 0 allows
		// 0.4·2³ = 3.2/s, capped at twice the measured rate: 1.6/s, so
		// the second waits 1/1.6s; its update raises the rate to 3.52/s
		// (2 × 1.76), and the third waits 1/3.52s.
		want := 2*time.Second + 625*time.Millisecond + time.Duration(math.Ceil(1e9/3.52))
		if took := time.Since(start); took < want-time.Microsecond || took > want+time.Microsecond {
			t.Fatalf("three paced calls took %v, want %v", took, want)
		}
	})
}

// ExampleClientRateLimiter shows the AWS adaptive mode's pacing: no limit
// until a throttle, then a token per attempt from a bucket that refills
// at the rate CUBIC sets.
func ExampleClientRateLimiter() {
	l, err := NewClientRateLimiter(ClientRateLimiterSettings{}) // the SDKs' constants
	if err != nil {
		panic(err)
	}
	now := time.Unix(1000, 0)
	for i := range 40 { // 20 responses a second for two seconds
		l.Update(now.Add(time.Duration(i)*50*time.Millisecond), false)
	}
	now = now.Add(2 * time.Second)
	l.Update(now, true) // throttled
	sent := 0
	for ms := 0; ms < 1000; ms++ { // one second of attempts, one every millisecond
		if _, ok := l.Acquire(now.Add(time.Duration(ms) * time.Millisecond)); ok {
			sent++
		}
	}
	fmt.Printf("fill rate %.1f/s after the throttle; %d attempts went in the next second\n", l.State().FillRate, sent)
	// Output: fill rate 14.0/s after the throttle; 15 attempts went in the next second
}

// FuzzClientRateLimiter checks the limiter's invariants over any sequence
// of acquisitions and responses on a moving clock: the bucket stays in [0,
// capacity], the capacity at least one token, the fill rate at least
// MinFillRate once set; every value is finite; a refused Acquire names a
// positive wait, after which (with no response in between) it succeeds
// or, when the float arithmetic left it a hair short, names a wait of at
// most a microsecond;
// before the first throttle nothing is refused.
func FuzzClientRateLimiter(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 200, 201})
	f.Add([]byte{255, 255, 128, 64, 1, 1, 1, 1, 3, 3, 3})
	f.Fuzz(func(t *testing.T, ops []byte) {
		l := mustRateLimiter(t, ClientRateLimiterSettings{})
		now := time.Unix(1_700_000_000, 0)
		throttled := false
		for _, op := range ops {
			now = now.Add(time.Duration(op>>2) * 7 * time.Millisecond)
			switch op & 3 {
			case 0, 1:
				d, ok := l.Acquire(now)
				if !ok {
					if !throttled {
						t.Fatal("refused before any throttle")
					}
					if d <= 0 || d > time.Hour {
						t.Fatalf("refused with wait %v", d)
					}
					if d < time.Hour {
						if d2, ok := l.Acquire(now.Add(d)); !ok && d2 > time.Microsecond {
							t.Fatalf("refused for %v more after the wait %v it named (%+v)", d2, d, l.State())
						}
						now = now.Add(d)
					}
				}
			case 2:
				l.Update(now, false)
			case 3:
				l.Update(now, true)
				throttled = true
			}
			s := l.State()
			for _, v := range []float64{s.FillRate, s.Capacity, s.Tokens, s.Measured} {
				if !finite(v) || v < 0 {
					t.Fatalf("state %+v", s)
				}
			}
			if s.Tokens > s.Capacity+1e-9 || (s.Capacity != 0 && s.Capacity < 1) || (s.FillRate != 0 && s.FillRate < 0.5) {
				t.Fatalf("state %+v", s)
			}
		}
	})
}
