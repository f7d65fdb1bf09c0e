package resil

import (
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func mustThrottler(t testing.TB, s ThrottlerSettings) *Throttler {
	t.Helper()
	th, err := NewThrottler(s)
	if err != nil {
		t.Fatal(err)
	}
	return th
}

func TestThrottlerSettings(t *testing.T) {
	for _, c := range []struct {
		s     ThrottlerSettings
		field string
	}{
		{ThrottlerSettings{K: 0.5}, "ThrottlerSettings.K"},
		{ThrottlerSettings{K: math.NaN()}, "ThrottlerSettings.K"},
		{ThrottlerSettings{K: math.Inf(1)}, "ThrottlerSettings.K"},
		{ThrottlerSettings{K: 1001}, "ThrottlerSettings.K"},
		{ThrottlerSettings{Window: time.Microsecond}, "ThrottlerSettings.Window"},
		{ThrottlerSettings{Window: -time.Second}, "ThrottlerSettings.Window"},
		{ThrottlerSettings{Window: 25 * time.Hour}, "ThrottlerSettings.Window"},
		{ThrottlerSettings{Padding: 0.5}, "ThrottlerSettings.Padding"},
		{ThrottlerSettings{Padding: math.NaN()}, "ThrottlerSettings.Padding"},
		{ThrottlerSettings{MaxProbability: -0.1}, "ThrottlerSettings.MaxProbability"},
		{ThrottlerSettings{MaxProbability: 1.5}, "ThrottlerSettings.MaxProbability"},
		{ThrottlerSettings{MaxProbability: math.Inf(-1)}, "ThrottlerSettings.MaxProbability"},
	} {
		_, err := NewThrottler(c.s)
		wantSettingError(t, err, c.field)
	}
	th := mustThrottler(t, ThrottlerSettings{})
	if th.k != 2 || th.padding != 1 || th.maxP != 1 || th.window != 2*time.Minute {
		t.Errorf("defaults: k %v padding %v max %v window %v", th.k, th.padding, th.maxP, th.window)
	}
}

// TestThrottlerProbability checks the SRE formula at known counts.
func TestThrottlerProbability(t *testing.T) {
	for _, c := range []struct {
		name              string
		s                 ThrottlerSettings
		accepts, rejected int
		want              float64
	}{
		{"healthy", ThrottlerSettings{}, 10, 0, 0},
		{"empty", ThrottlerSettings{}, 0, 0, 0},
		{"half accepted, K=2: at the edge", ThrottlerSettings{}, 5, 5, 0},
		{"4 of 10 accepted", ThrottlerSettings{}, 4, 6, 2.0 / 11},
		{"none of 10 accepted", ThrottlerSettings{}, 0, 10, 10.0 / 11},
		{"30% broken, K=2", ThrottlerSettings{}, 70, 30, 0},
		{"30% broken, K=1.1", ThrottlerSettings{K: 1.1}, 70, 30, (100 - 77.0) / 101},
		{"padding 8", ThrottlerSettings{Padding: 8}, 0, 10, 10.0 / 18},
		{"capped", ThrottlerSettings{MaxProbability: 0.5}, 0, 10, 0.5},
		{"one failure", ThrottlerSettings{}, 0, 1, 0.5},
	} {
		t.Run(c.name, func(t *testing.T) {
			th := mustThrottler(t, c.s)
			for range c.accepts {
				th.Record(t0, OutcomeSuccess)
			}
			for i := range c.rejected {
				o := OutcomeFailure
				if i%2 == 1 {
					o = OutcomeTimeout
				}
				th.Record(t0, o)
			}
			th.Record(t0, OutcomeIgnored) // counts as nothing
			if got := th.Probability(t0); !near(got, c.want) {
				t.Errorf("probability = %v, want %v", got, c.want)
			}
			req, acc := th.Counts(t0)
			if req != int64(c.accepts+c.rejected) || acc != int64(c.accepts) {
				t.Errorf("counts = %d, %d", req, acc)
			}
		})
	}
}

// TestThrottlerSteps drives a throttler on a fixed time grid: the draws
// decide, refusals count as requests, and the window forgets.
func TestThrottlerSteps(t *testing.T) {
	src := &seqSource{}
	th := mustThrottler(t, ThrottlerSettings{Window: 10 * time.Second, Rand: src})
	for range 4 {
		th.Record(ts(0), OutcomeFailure)
	}
	// p = 4/5: a draw of 0.79 is refused, 0.8 is let through.
	for i, c := range []struct {
		at      float64
		u       float64
		refused bool
		p       float64 // after the call
	}{
		{1, 0.79, true, 5.0 / 6},
		{1, 0.84, false, 5.0 / 6},
		{2, 0.83, true, 6.0 / 7},
		// At 10s the slot of 0s leaves: the 4 failures are forgotten; the
		// refusals of 1s and 2s remain.
		{10.5, 0.5, true, 3.0 / 4},
		// At 12.5s those of 1s and 2s leave too: only 10.5's is left.
		{12.5, 0.0, true, 2.0 / 3},
	} {
		src.vals = []uint64{uint64(c.u * (1 << 53))}
		src.i = 0
		err := th.Allow(ts(c.at))
		if (err != nil) != c.refused || (err != nil && !errors.Is(err, ErrThrottled)) {
			t.Fatalf("step %d: err = %v, want refused %v", i, err, c.refused)
		}
		if got := th.Probability(ts(c.at)); !near(got, c.p) {
			t.Errorf("step %d: p = %v, want %v", i, got, c.p)
		}
	}
	req, _ := th.Counts(ts(12.5))
	if req != 2 {
		t.Errorf("requests at 12.5s = %d, want 2 (the refusals of 10.5s and 12.5s)", req)
	}
	if got := th.Probability(ts(30)); got != 0 {
		t.Errorf("p after the window = %v, want 0", got)
	}
}

func TestThrottlerZeroAndNil(t *testing.T) {
	var nilT *Throttler
	if err := nilT.Allow(t0); err != nil || nilT.Probability(t0) != 0 {
		t.Errorf("nil throttler: %v, %v", err, nilT.Probability(t0))
	}
	nilT.Record(t0, OutcomeFailure)
	var zero Throttler
	if err := zero.Allow(t0); !errors.Is(err, ErrThrottled) || !errors.Is(err, ErrNotBuilt) || zero.Probability(t0) != 1 {
		t.Errorf("zero throttler must refuse: %v, %v", err, zero.Probability(t0))
	}
	zero.Record(t0, OutcomeSuccess)
	if r, a := zero.Counts(t0); r != 0 || a != 0 {
		t.Error("the zero throttler counted")
	}
}

// TestThrottlerFastPath: with a healthy window Allow skips the lock until a
// slot may leave the window, and a failure that makes the probability
// positive ends the skipping at once.
func TestThrottlerFastPath(t *testing.T) {
	th := mustThrottler(t, ThrottlerSettings{Window: 10 * time.Second, Rand: draw(0)})
	th.Record(ts(0.5), OutcomeSuccess)
	if got := th.clear.Load(); got != ts(1).UnixNano() {
		t.Fatalf("clear until %v, want the next slot (1s)", time.Unix(0, got).Sub(t0))
	}
	if err := th.Allow(ts(0.9)); err != nil {
		t.Fatal(err)
	}
	th.Record(ts(0.9), OutcomeFailure)
	th.Record(ts(0.9), OutcomeFailure)
	th.Record(ts(0.9), OutcomeFailure) // 4 requests, 1 accept: p = 2/5
	if err := th.Allow(ts(0.9)); !errors.Is(err, ErrThrottled) {
		t.Errorf("after failures, with a draw of 0: %v, want ErrThrottled", err)
	}
}

func TestPolicyThrottle(t *testing.T) {
	// A throttler that refuses everything it may (draw 0) once failures
	// outnumber accepts, beside a budget and a breaker.
	newPolicy := func() (Policy, *bucket, *Breaker) {
		th := mustThrottler(t, ThrottlerSettings{Rand: draw(0)})
		tb := newBucket(bucketSpec{ratio: 0.5, min: 5, byRequest: true})
		br := mustBreaker(t, BreakerSettings{Threshold: 100})
		return Policy{MaxRetries: 3, Budget: tb, Breaker: br, Throttle: th}, tb, br
	}
	p, tb, _ := newPolicy()
	in := Intent{Idempotent: true}
	tk, err := p.Begin(t0, &in)
	if err != nil {
		t.Fatal(err)
	}
	p.End(t0, &in, tk, OutcomeFailure, 0) // 1 request, 0 accepts: p = 1/2
	if _, err := p.Retry(t0, &in, OutcomeFailure, 0, time.Time{}, draw(0)); err != nil {
		t.Fatal(err)
	}
	before := tb.Tokens(t0)
	if _, err := p.Resume(t0, &in); !errors.Is(err, ErrThrottled) || errors.Is(err, ErrBreakerOpen) {
		t.Fatalf("Resume: %v, want ErrThrottled", err)
	}
	if got := tb.Tokens(t0); got != before+1 {
		t.Errorf("the refused retry's charge was not refunded: %v -> %v", before, got)
	}
	in2 := Intent{Idempotent: true}
	if _, err := p.Begin(t0, &in2); !errors.Is(err, ErrThrottled) {
		t.Errorf("Begin: %v, want ErrThrottled", err)
	}
	if in2.Attempts() != 0 {
		t.Error("a throttled first attempt counted as sent")
	}

	// Hedges: paid, then throttled, then refunded.
	p, tb, _ = newPolicy()
	p.Hedge = HedgeSettings{Delay: time.Millisecond}
	in = Intent{Idempotent: true}
	tk, _ = p.Begin(t0, &in)
	p.End(t0, &in, tk, OutcomeFailure, 0)
	before = tb.Tokens(t0)
	if _, err := p.StartHedge(t0, &in); !errors.Is(err, ErrThrottled) {
		t.Errorf("StartHedge: %v, want ErrThrottled", err)
	}
	if got := tb.Tokens(t0); got != before {
		t.Errorf("the refused hedge's charge was not refunded: %v -> %v", before, got)
	}
}

func TestGuardThrottle(t *testing.T) {
	th := mustThrottler(t, ThrottlerSettings{Rand: draw(0)})
	br := mustBreaker(t, BreakerSettings{Threshold: 1000})
	var events []EventKind
	g, err := NewGuard(GuardSettings{
		Idempotency: Idempotent,
		Clock:       newFakeClock(t0),
		Rand:        draw(0),
		Policy:      Policy{MaxRetries: 2, Breaker: br, Throttle: th},
		OnEvent:     func(e Event) { events = append(events, e.Kind) },
	})
	if err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	err = g.Do(context.Background(), func(context.Context) error { return boom })
	// The first attempt fails (p = 1/2), the retry is throttled.
	if !errors.Is(err, ErrThrottled) || !errors.Is(err, boom) {
		t.Fatalf("err = %v, want ErrThrottled after boom", err)
	}
	err = g.Do(context.Background(), func(context.Context) error { return nil })
	if !errors.Is(err, ErrThrottled) {
		t.Fatalf("second call: %v, want ErrThrottled", err)
	}
	fell := 0
	g2, _ := NewGuard(GuardSettings{Clock: newFakeClock(t0), Policy: Policy{Throttle: th},
		Fallback: func(ctx context.Context, err error) error { fell++; return nil }})
	if err := g2.Do(context.Background(), func(context.Context) error { return nil }); err != nil || fell != 1 {
		t.Errorf("fallback: err %v, called %d times", err, fell)
	}
	st := g.Stats()
	if st.ThrottleRefusals != 2 || st.BreakerRefusals != 0 || st.Attempts != 1 || st.Failures != 2 {
		t.Errorf("stats = %+v", st)
	}
	if st.ThrottleProbability <= 0 || st.ThrottleProbability >= 1 {
		t.Errorf("ThrottleProbability = %v", st.ThrottleProbability)
	}
	want := []EventKind{EventAttempt, EventRetry, EventThrottled, EventDone, EventThrottled, EventDone}
	if len(events) != len(want) {
		t.Fatalf("events = %v, want %v", events, want)
	}
	for i := range want {
		if events[i] != want[i] {
			t.Fatalf("events = %v, want %v", events, want)
		}
	}
	if EventThrottled.String() != "throttled" {
		t.Error(EventThrottled.String())
	}
}

// TestThrottlerConcurrent: Allow and Record from many goroutines (run it
// with -race): the counts add up, whatever the interleaving.
func TestThrottlerConcurrent(t *testing.T) {
	th := mustThrottler(t, ThrottlerSettings{Rand: draw(0.5)})
	var wg sync.WaitGroup
	var refused atomic.Int64
	for w := range 4 {
		wg.Go(func() {
			for i := range 500 {
				now := t0.Add(time.Duration(i) * time.Millisecond)
				if th.Allow(now) != nil {
					refused.Add(1)
					continue
				}
				o := OutcomeSuccess
				if (w+i)%2 == 0 {
					o = OutcomeFailure
				}
				th.Record(now, o)
			}
		})
	}
	wg.Wait()
	req, acc := th.Counts(t0.Add(time.Second))
	if req != 2000 || acc > req-refused.Load() {
		t.Errorf("requests %d (want 2000), accepts %d, refused %d", req, acc, refused.Load())
	}
}

// TestThrottlerSettingsMethod: Settings returns what the throttler runs with,
// defaults filled in, and the zero settings for one never built.
func TestThrottlerSettingsMethod(t *testing.T) {
	for _, c := range []struct {
		name string
		in   ThrottlerSettings
		want ThrottlerSettings
	}{
		{"defaults", ThrottlerSettings{}, ThrottlerSettings{K: 2, Window: 2 * time.Minute, Padding: 1, MaxProbability: 1}},
		{"given", ThrottlerSettings{K: 3, Window: 10 * time.Second, Padding: 8, MaxProbability: 0.9},
			ThrottlerSettings{K: 3, Window: 10 * time.Second, Padding: 8, MaxProbability: 0.9}},
	} {
		th, err := NewThrottler(c.in)
		if err != nil {
			t.Fatal(err)
		}
		if got := th.Settings(); got != c.want {
			t.Errorf("%s: got %+v, want %+v", c.name, got, c.want)
		}
	}
	var zero Throttler
	var none *Throttler
	if zero.Settings() != (ThrottlerSettings{}) || none.Settings() != (ThrottlerSettings{}) {
		t.Error("a throttler never built has settings")
	}
}
