package admission

import (
	"math"
	"testing"
	"time"
)

func mustLimiter(t testing.TB, s LimitSettings) *Limiter {
	t.Helper()
	l, err := NewLimiter(s)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestLimitSettings: each algorithm's settings are checked field by field,
// an error naming its type's field; a field of another algorithm cannot be
// set at all, which LimiterSettings used to refuse at run time.
func TestLimitSettings(t *testing.T) {
	for _, c := range []struct {
		s     LimitSettings
		field string
	}{
		{nil, "LimitSettings"},
		{FixedLimit{}, "FixedLimit.Limit"},
		{FixedLimit{Limit: -1}, "FixedLimit.Limit"},
		{FixedLimit{Limit: 2_000_000}, "FixedLimit.Limit"},
		{AIMDLimit{MinLimit: -1}, "AIMDLimit.MinLimit"},
		{AIMDLimit{MinLimit: 10, MaxLimit: 5}, "AIMDLimit.MaxLimit"},
		{AIMDLimit{Limit: -1}, "AIMDLimit.Limit"},
		{AIMDLimit{Backoff: 1}, "AIMDLimit.Backoff"},
		{AIMDLimit{Backoff: math.NaN()}, "AIMDLimit.Backoff"},
		{AIMDLimit{SlowRTT: -time.Second}, "AIMDLimit.SlowRTT"},
		{GradientLimit{MaxLimit: 2_000_000}, "GradientLimit.MaxLimit"},
		{GradientLimit{Smoothing: 1.5}, "GradientLimit.Smoothing"},
		{GradientLimit{Smoothing: math.Inf(1)}, "GradientLimit.Smoothing"},
		{GradientLimit{Tolerance: 0.9}, "GradientLimit.Tolerance"},
		{GradientLimit{Headroom: -1}, "GradientLimit.Headroom"},
		{GradientLimit{Headroom: math.NaN()}, "GradientLimit.Headroom"},
		{GradientLimit{Window: time.Nanosecond}, "GradientLimit.Window"},
		{GradientLimit{WindowSamples: -3}, "GradientLimit.WindowSamples"},
		{GradientLimit{LongWindow: -1}, "GradientLimit.LongWindow"},
		{VegasLimit{MinLimit: -2}, "VegasLimit.MinLimit"},
		{VegasLimit{Probe: -1}, "VegasLimit.Probe"},
		{VegasLimit{Smoothing: 2}, "VegasLimit.Smoothing"},
	} {
		_, err := NewLimiter(c.s)
		wantSettingError(t, err, c.field)
	}
	// Defaults, and the initial limit clamped into [MinLimit, MaxLimit];
	// Settings returns the type NewLimiter was given.
	want := map[LimitSettings]LimitSettings{
		GradientLimit{}: GradientLimit{Limit: 20, MinLimit: 1, MaxLimit: 1000, Smoothing: 0.2, Tolerance: 1.5,
			Headroom: 4, Window: time.Second, WindowSamples: 10, LongWindow: 600},
		VegasLimit{}:                          VegasLimit{Limit: 20, MinLimit: 1, MaxLimit: 1000, Smoothing: 1},
		AIMDLimit{MinLimit: 50, MaxLimit: 60}: AIMDLimit{Limit: 50, MinLimit: 50, MaxLimit: 60, Backoff: 0.9},
		AIMDLimit{Limit: 500, MaxLimit: 60}:   AIMDLimit{Limit: 60, MinLimit: 1, MaxLimit: 60, Backoff: 0.9},
		FixedLimit{Limit: 7}:                  FixedLimit{Limit: 7},
	}
	for in, w := range want {
		l := mustLimiter(t, in)
		if got := l.Settings(); got != w || got.Algorithm() != in.Algorithm() {
			t.Errorf("%#v: settings %#v, want %#v", in, got, w)
		}
	}
	if s := (*Limiter)(nil).Settings(); s != nil {
		t.Errorf("nil Limiter's settings: %#v", s)
	}
}

func TestLimiterFixed(t *testing.T) {
	l := mustLimiter(t, FixedLimit{Limit: 2})
	p1, ok1 := l.Acquire(t0)
	p2, ok2 := l.Acquire(t0)
	_, ok3 := l.Acquire(t0)
	if !ok1 || !ok2 || ok3 || l.InFlight() != 2 {
		t.Fatalf("acquire: %v %v %v, in flight %d", ok1, ok2, ok3, l.InFlight())
	}
	l.Release(ts(1), p1, true) // a fixed limit ignores drops
	l.Ignore(p2)
	l.Ignore(p2) // a second release of the same permit is ignored
	l.Release(ts(1), LimitPermit{}, false)
	if l.InFlight() != 0 || l.Limit() != 2 {
		t.Errorf("in flight %d, limit %d", l.InFlight(), l.Limit())
	}
	if !p1.Admitted() || p1.Start() != t0 {
		t.Error("permit")
	}
}

func TestLimiterZeroAndNil(t *testing.T) {
	var zero Limiter
	if _, ok := zero.Acquire(t0); ok {
		t.Error("the zero Limiter admitted a request")
	}
	var nilL *Limiter
	if _, ok := nilL.Acquire(t0); ok || nilL.Limit() != 0 || nilL.InFlight() != 0 {
		t.Error("the nil Limiter admitted a request")
	}
	nilL.Release(t0, LimitPermit{ok: true}, false)
	nilL.Ignore(LimitPermit{ok: true})
}

// sample ends one request that started rtt before at with inflight in
// flight, as Release would see it.
func sample(l *Limiter, at time.Time, rtt time.Duration, inflight int64, dropped bool) {
	l.inflight.Add(1)
	l.Release(at, LimitPermit{start: at.Add(-rtt), inflight: inflight, ok: true}, dropped)
}

type limitStep struct {
	at       float64
	rtt      time.Duration
	inflight int64
	dropped  bool
	want     float64 // the estimate after the step
}

func runSteps(t *testing.T, l *Limiter, steps []limitStep) {
	t.Helper()
	for i, s := range steps {
		sample(l, ts(s.at), s.rtt, s.inflight, s.dropped)
		if !near(l.est, s.want) || l.Limit() != int(s.want) {
			t.Errorf("step %d: estimate %v limit %d, want %v", i, l.est, l.Limit(), s.want)
		}
	}
}

// TestAIMDSteps: additive increase while the limit is used, multiplicative
// decrease on drops and slow requests, within [MinLimit, MaxLimit].
func TestAIMDSteps(t *testing.T) {
	l := mustLimiter(t, AIMDLimit{Limit: 10, MaxLimit: 12, Backoff: 0.5, SlowRTT: 100 * time.Millisecond})
	ms := time.Millisecond
	runSteps(t, l, []limitStep{
		{0, 10 * ms, 5, false, 11},   // half used: grow
		{1, 10 * ms, 5, false, 11},   // less than half of 11: hold
		{2, 10 * ms, 6, false, 12},   // grow
		{3, 10 * ms, 12, false, 12},  // at MaxLimit
		{4, 10 * ms, 12, true, 6},    // a drop halves it
		{5, 150 * ms, 6, false, 3},   // slower than SlowRTT: a drop
		{6, 100 * ms, 3, false, 4},   // at SlowRTT exactly: not slow
		{7, 10 * ms, 1, true, 2},     // drop
		{8, 10 * ms, 1, true, 1},     // drop
		{9, 10 * ms, 1, true, 1},     // at MinLimit
		{10, 10 * ms, 1, false, 2},   // grow again
		{11, 500 * ms, 2, true, 1.0}, // a drop's latency does not matter
	})
}

// TestGradientSteps: one update per complete window, smoothed; the
// gradient of latencies, the drop share, the app-limited hold and the
// long RTT's recovery rule.
func TestGradientSteps(t *testing.T) {
	l := mustLimiter(t, GradientLimit{Limit: 10, MaxLimit: 100, Smoothing: 0.5,
		Tolerance: 1, Headroom: 2, Window: time.Second, WindowSamples: 2, LongWindow: 1})
	ms := time.Millisecond
	runSteps(t, l, []limitStep{
		// Window 1: short = long = 100ms, gradient 1: 10·½ + (10+2)·½.
		{0, 100 * ms, 10, false, 10},
		{0.5, 100 * ms, 10, false, 10}, // two samples, but only half a second
		{1, 100 * ms, 10, false, 11},
		// Window 2: short 200ms, long = mean(100, 200) = 150ms: gradient
		// ¾, target 11·¾ + 2 = 10.25, smoothed 10.625.
		{2, 200 * ms, 11, false, 11},
		{3, 200 * ms, 11, false, 10.625},
		// Window 3: a drop in two: gradient min(⅚, 1 − ½) = ½: target
		// 10.625·½ + 2, smoothed 8.96875.
		{4, 0, 11, true, 10.625},
		{5, 200 * ms, 11, false, 8.96875},
		// Window 4: at most 2 in flight, under half the limit: hold.
		{6, 100 * ms, 2, false, 8.96875},
		{7, 100 * ms, 2, false, 8.96875},
		// Window 5: short 50ms, long = mean(100, 200, 200, 100, 50) = 130,
		// over twice the short: the long RTT drops by 5%; gradient 1.
		{8, 50 * ms, 8, false, 8.96875},
		{9, 50 * ms, 8, false, 9.96875},
	})
	if !near(l.long.value, 130*0.95*float64(ms)) {
		t.Errorf("long RTT = %v, want 123.5ms", time.Duration(l.long.value))
	}
	// The long RTT is an exponential average after its warm-up.
	e := ewma{alpha: 0.5, warm: 2}
	for i, c := range []struct{ v, want float64 }{{10, 10}, {20, 15}, {35, 25}, {5, 15}} {
		if got := e.add(c.v); got != c.want {
			t.Errorf("ewma step %d = %v, want %v", i, got, c.want)
		}
	}
}

// TestGradientReacts: with the limit in use, a sudden rise of the latency
// (the short RTT four times the long one) cuts the limit by half or more
// within a few windows, and the limit grows again once the latency is back.
// Gradient2 compares with the long-term average, not with the unloaded
// latency, so a rise that lasts is accepted in time: it reacts to changes.
func TestGradientReacts(t *testing.T) {
	l := mustLimiter(t, GradientLimit{Window: 100 * time.Millisecond})
	now := t0
	run := func(windows int, rtt time.Duration) int {
		for range windows {
			n := int64(l.Limit())
			for range 10 {
				sample(l, now, rtt, n, false)
			}
			now = now.Add(100 * time.Millisecond)
		}
		return l.Limit()
	}
	calm := run(100, 100*time.Millisecond)
	if calm <= 20 {
		t.Fatalf("the limit did not grow while latency was steady: %d", calm)
	}
	hit := run(10, 400*time.Millisecond)
	if hit > calm/2 {
		t.Errorf("after 10 slow windows the limit is %d, from %d: want half or less", hit, calm)
	}
	if back := run(20, 100*time.Millisecond); back <= hit {
		t.Errorf("the limit did not grow back: %d after %d", back, hit)
	}
}

// TestVegasSteps: the no-load latency from the first and the fastest
// samples, the queue estimate against log10 steps, drops, and the
// app-limited hold.
func TestVegasSteps(t *testing.T) {
	l := mustLimiter(t, VegasLimit{Limit: 10, MaxLimit: 100})
	ms := time.Millisecond
	runSteps(t, l, []limitStep{
		{0, 100 * ms, 10, false, 10}, // the first: the no-load latency
		{1, 100 * ms, 10, false, 16}, // no queue: + 6 log10(10)
		// Twice the no-load latency at 16: a queue of 8 > 6 log10(16).
		{2, 200 * ms, 16, false, 16 - math.Log10(16)},
		// A queue of ceil(14.8 × 0.2) = 3, between log10 and 3 log10.
		{3, 125 * ms, 14, false, 15.966020818223667},
		{4, 0, 14, true, 14.762824127008178},        // a drop: − log10
		{5, 100 * ms, 2, false, 14.762824127008178}, // far from the limit
		{6, 50 * ms, 14, false, 14.762824127008178}, // faster: the new no-load latency
		{7, 0, 14, false, 14.762824127008178},       // no latency: ignored
	})
	if l.noload != 50*ms {
		t.Errorf("no-load latency %v, want 50ms", l.noload)
	}
}

// TestVegasSettles: against a server that serves 10 at once in 100ms and
// queues the rest, with the load keeping the limit full, Vegas stays near
// 10 (it swings around it: each window's ten samples see the latency of
// the limit the window began with) however long it runs. With a probe,
// each probe taken under load measures a loaded latency and the limit
// creeps up: the trade-off the Probe setting documents.
func TestVegasSettles(t *testing.T) {
	run := func(probe int) (mean float64, peak int) {
		l := mustLimiter(t, VegasLimit{Limit: 5, Probe: probe})
		now, sum := t0, 0
		for w := range 3000 {
			n := int64(l.Limit())
			rtt := 100 * time.Millisecond
			if n > 10 {
				rtt = time.Duration(float64(rtt) * float64(n) / 10)
			}
			for range 10 {
				sample(l, now, rtt, n, false)
			}
			now = now.Add(100 * time.Millisecond)
			if w >= 2000 {
				sum += l.Limit()
				peak = max(peak, l.Limit())
			}
		}
		return float64(sum) / 1000, peak
	}
	mean, peak := run(0)
	if mean < 10 || mean > 20 || peak > 30 {
		t.Errorf("without a probe: mean limit %.1f, peak %d over the last 1000 windows; want about 10 to 20", mean, peak)
	}
	if crept, _ := run(30); crept < 2*mean {
		t.Errorf("with a probe every 30 × limit: mean limit %.1f; want it to have crept up from %.1f", crept, mean)
	}
}

func TestLimitAlgorithmString(t *testing.T) {
	for a, want := range map[LimitAlgorithm]string{LimitFixed: "fixed", LimitAIMD: "aimd", LimitGradient: "gradient", LimitVegas: "vegas", 7: "LimitAlgorithm(7)"} {
		if a.String() != want {
			t.Errorf("%d: %q", a, a.String())
		}
	}
}
