package resil

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// breakerStep is one call on the fixed time grid: Allow at at, then, unless
// the call was refused or hold is set, Record its outcome (and took) at at.
type breakerStep struct {
	at      float64
	o       Outcome
	took    time.Duration
	refused error // the error Allow must return (nil: admitted)
	state   State // the state after the step
	hold    bool  // keep the permit for a later step (see release)
	release int   // >0: record the permit held at step release-1 instead
}

func runBreakerSteps(t *testing.T, b *Breaker, steps []breakerStep) {
	t.Helper()
	held := map[int]Permit{}
	for i, s := range steps {
		now := ts(s.at)
		if s.release > 0 {
			b.Record(now, held[s.release-1], s.o, s.took)
		} else {
			p, err := b.Allow(now)
			if !errors.Is(err, s.refused) || (err == nil) != (s.refused == nil) {
				t.Fatalf("step %d at %vs: Allow err = %v, want %v", i, s.at, err, s.refused)
			}
			if err == nil {
				if s.hold {
					held[i] = p
				} else {
					b.Record(now, p, s.o, s.took)
				}
			}
		}
		if got := b.State(now); got != s.state {
			t.Fatalf("step %d at %vs: state = %v, want %v", i, s.at, got, s.state)
		}
	}
}

func TestBreakerConsecutive(t *testing.T) {
	var changes []StateChange
	b := mustBreaker(t, BreakerSettings{Name: "db", Threshold: 3, Cooldown: 2 * time.Second,
		OnStateChange: func(c StateChange) { changes = append(changes, c) }})
	runBreakerSteps(t, b, []breakerStep{
		{at: 0, o: OutcomeFailure, state: StateClosed},
		{at: 0, o: OutcomeTimeout, state: StateClosed},
		{at: 0, o: OutcomeSuccess, state: StateClosed}, // breaks the streak
		{at: 1, o: OutcomeFailure, state: StateClosed},
		{at: 1, o: OutcomeIgnored, state: StateClosed}, // neither: the streak goes on
		{at: 1, o: OutcomeFailure, state: StateClosed},
		{at: 1, o: OutcomeFailure, state: StateOpen}, // three in a row
		{at: 2, refused: ErrBreakerOpen, state: StateOpen},
		{at: 2.999, refused: ErrBreakerOpen, state: StateOpen},
		{at: 3, o: OutcomeSuccess, state: StateClosed}, // cooldown over: one probe, it succeeds
	})
	want := []struct{ from, to State }{{StateClosed, StateOpen}, {StateOpen, StateHalfOpen}, {StateHalfOpen, StateClosed}}
	if len(changes) != len(want) {
		t.Fatalf("changes = %+v", changes)
	}
	for i, w := range want {
		c := changes[i]
		if c.From != w.from || c.To != w.to || c.Name != "db" || c.Generation != uint64(i+2) {
			t.Fatalf("change %d = %+v, want %v→%v gen %d", i, c, w.from, w.to, i+2)
		}
	}
	if !changes[0].At.Equal(ts(1)) || !changes[1].At.Equal(ts(3)) {
		t.Fatalf("change times %v %v", changes[0].At, changes[1].At)
	}
}

func TestBreakerProbesAndCooldownBackoff(t *testing.T) {
	b := mustBreaker(t, BreakerSettings{Threshold: 1, Cooldown: time.Second, MaxCooldown: 3 * time.Second, Probes: 2})
	runBreakerSteps(t, b, []breakerStep{
		{at: 0, o: OutcomeFailure, state: StateOpen},                   // cooldown 1s
		{at: 1, hold: true, state: StateHalfOpen},                      // probe 1
		{at: 1, hold: true, state: StateHalfOpen},                      // probe 2
		{at: 1, refused: ErrTooManyProbes, state: StateHalfOpen},       // a third is refused
		{at: 1.5, release: 2, o: OutcomeIgnored, state: StateHalfOpen}, // a cancelled probe frees its slot
		{at: 1.5, hold: true, state: StateHalfOpen},                    // so another may go
		{at: 1.6, release: 2, o: OutcomeSuccess, state: StateHalfOpen}, // one success of two
		{at: 1.7, release: 6, o: OutcomeFailure, state: StateOpen},     // a failed probe reopens: cooldown 2s
		{at: 3.6, refused: ErrBreakerOpen, state: StateOpen},
		{at: 3.7, o: OutcomeTimeout, state: StateOpen}, // half-open at 3.7; fails: cooldown 3s (max)
		{at: 6.6, refused: ErrBreakerOpen, state: StateOpen},
		{at: 6.7, o: OutcomeFailure, state: StateOpen}, // again: still 3s, never beyond
		{at: 9.6, refused: ErrBreakerOpen, state: StateOpen},
		{at: 9.7, o: OutcomeSuccess, state: StateHalfOpen},
		{at: 9.7, o: OutcomeSuccess, state: StateClosed}, // both probes succeeded: closed, cooldown reset
		{at: 10, o: OutcomeFailure, state: StateOpen},
		{at: 10.9, refused: ErrBreakerOpen, state: StateOpen},
		{at: 11, o: OutcomeSuccess, state: StateHalfOpen}, // back to 1s
	})
	// Trips count openings from closed only: at 0 and at 10, not the three
	// reopenings after failed trials.
	if got := b.Trips(); got != 2 {
		t.Errorf("Trips() = %d, want 2", got)
	}
	if got := (*Breaker)(nil).Trips(); got != 0 {
		t.Errorf("nil Trips() = %d", got)
	}
}

func TestBreakerGenerations(t *testing.T) {
	b := mustBreaker(t, BreakerSettings{Threshold: 2, Cooldown: time.Second})
	if g := b.Generation(); g != 1 {
		t.Fatalf("generation = %d, want 1", g)
	}
	slow, _ := b.Allow(ts(0)) // a call from the closed generation, still running
	runBreakerSteps(t, b, []breakerStep{
		{at: 0, o: OutcomeFailure, state: StateClosed},
		{at: 0, o: OutcomeFailure, state: StateOpen},
	})
	b.Record(ts(0.5), slow, OutcomeFailure, 0) // stale: must not touch the open breaker
	probe, err := b.Allow(ts(1))
	if err != nil || !probe.Probe() {
		t.Fatalf("probe = %+v, %v", probe, err)
	}
	b.Record(ts(1), slow, OutcomeSuccess, 0) // stale success must not close it
	if s := b.State(ts(1)); s != StateHalfOpen {
		t.Fatalf("a stale success changed the state to %v", s)
	}
	if _, err := b.Allow(ts(1)); !errors.Is(err, ErrTooManyProbes) {
		t.Fatalf("stale record freed a probe slot: %v", err)
	}
	b.Record(ts(1), probe, OutcomeSuccess, 0)
	if s := b.State(ts(1)); s != StateClosed {
		t.Fatalf("state = %v", s)
	}
	if g := b.Generation(); g != 4 {
		t.Fatalf("generation = %d, want 4 (closed→open→half-open→closed)", g)
	}
	b.Record(ts(2), probe, OutcomeFailure, 0) // the probe's permit is stale now
	b.Record(ts(2), Permit{}, OutcomeFailure, 0)
	p, _ := b.Allow(ts(2))
	b.Record(ts(2), p, OutcomeFailure, 0)
	if s := b.State(ts(2)); s != StateClosed {
		t.Fatalf("one failure opened a threshold-2 breaker: stale permits counted")
	}
}

func TestBreakerCountWindow(t *testing.T) {
	b := mustBreaker(t, BreakerSettings{Rule: CountWindow, WindowSize: 4, MinCalls: 4, FailureRate: 0.75})
	runBreakerSteps(t, b, []breakerStep{
		{at: 0, o: OutcomeSuccess, state: StateClosed},
		{at: 0, o: OutcomeSuccess, state: StateClosed},
		{at: 0, o: OutcomeFailure, state: StateClosed},
		{at: 0, o: OutcomeFailure, state: StateClosed}, // 2/4
		{at: 0, o: OutcomeIgnored, state: StateClosed}, // not a call for the window
		{at: 0, o: OutcomeFailure, state: StateOpen},   // SFFF once the oldest S left: 3 >= 0.75 × 4
	})

	// MinCalls: three failures in a window of 10 are not a rate yet.
	b = mustBreaker(t, BreakerSettings{Rule: CountWindow, WindowSize: 10, MinCalls: 4, FailureRate: 0.5})
	runBreakerSteps(t, b, []breakerStep{
		{at: 0, o: OutcomeFailure, state: StateClosed},
		{at: 0, o: OutcomeFailure, state: StateClosed},
		{at: 0, o: OutcomeFailure, state: StateClosed},
		{at: 0, o: OutcomeSuccess, state: StateOpen}, // 3/4 with enough calls
	})
}

func TestBreakerSlowCalls(t *testing.T) {
	b := mustBreaker(t, BreakerSettings{Rule: CountWindow, WindowSize: 4, MinCalls: 4, SlowCall: 100 * time.Millisecond, SlowCallRate: 0.5, Cooldown: time.Second})
	runBreakerSteps(t, b, []breakerStep{
		{at: 0, o: OutcomeSuccess, took: 10 * time.Millisecond, state: StateClosed},
		{at: 0, o: OutcomeFailure, took: 10 * time.Millisecond, state: StateClosed}, // failures are off
		{at: 0, o: OutcomeSuccess, took: 100 * time.Millisecond, state: StateClosed},
		{at: 0, o: OutcomeSuccess, took: time.Second, state: StateOpen}, // 2 of 4 slow
		{at: 1, o: OutcomeSuccess, took: time.Second, state: StateOpen}, // a slow probe reopens
		{at: 2, o: OutcomeSuccess, took: time.Millisecond, state: StateClosed},
	})
}

func TestBreakerTimeWindow(t *testing.T) {
	b := mustBreaker(t, BreakerSettings{Rule: TimeWindow, WindowPeriod: 10 * time.Second, MinCalls: 4, FailureRate: 0.5})
	runBreakerSteps(t, b, []breakerStep{
		{at: 0, o: OutcomeFailure, state: StateClosed},
		{at: 0, o: OutcomeFailure, state: StateClosed},
		{at: 5, o: OutcomeSuccess, state: StateClosed},
		{at: 11, o: OutcomeFailure, state: StateClosed}, // the two failures at 0 have left
		{at: 11, o: OutcomeFailure, state: StateClosed}, // S F F: 3 calls < MinCalls
		{at: 12, o: OutcomeFailure, state: StateOpen},   // S F F F: 3/4
	})
	// Slow-call rate over time.
	b = mustBreaker(t, BreakerSettings{Rule: TimeWindow, WindowPeriod: time.Second, MinCalls: 2, SlowCall: time.Second, SlowCallRate: 1})
	runBreakerSteps(t, b, []breakerStep{
		{at: 0, o: OutcomeSuccess, took: 2 * time.Second, state: StateClosed},
		{at: 5, o: OutcomeSuccess, took: 2 * time.Second, state: StateClosed}, // the first left
		{at: 5, o: OutcomeFailure, took: 2 * time.Second, state: StateOpen},
	})
}

func TestBreakerCallbackMayCallBreaker(t *testing.T) {
	var b *Breaker
	var seen []State
	done := make(chan struct{})
	b = mustBreaker(t, BreakerSettings{Threshold: 1, Cooldown: time.Second, OnStateChange: func(c StateChange) {
		// Called outside the lock: all of these would deadlock inside it.
		seen = append(seen, b.State(c.At))
		_ = b.Generation()
		if p, err := b.Allow(c.At); err == nil {
			b.Record(c.At, p, OutcomeIgnored, 0)
		}
	}})
	go func() {
		defer close(done)
		p, _ := b.Allow(ts(0))
		b.Record(ts(0), p, OutcomeFailure, 0)
		b.State(ts(1))
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("deadlock: the state-change callback runs under the breaker's lock")
	}
	if len(seen) != 2 || seen[0] != StateOpen || seen[1] != StateHalfOpen {
		t.Fatalf("states seen from the callback: %v", seen)
	}
}

func TestBreakerNil(t *testing.T) {
	var b *Breaker
	p, err := b.Allow(t0)
	if err != nil || p.Probe() {
		t.Fatal(err)
	}
	b.Record(t0, p, OutcomeFailure, 0)
	if b.State(t0) != StateClosed || b.Generation() != 0 || b.Settings().Threshold != 0 {
		t.Fatal("nil breaker is not a closed breaker")
	}
}

func TestBreakerSettingErrors(t *testing.T) {
	for _, c := range []struct {
		field string
		s     BreakerSettings
	}{
		{"BreakerSettings.Threshold", BreakerSettings{}},
		{"BreakerSettings.Cooldown", BreakerSettings{Threshold: 1, Cooldown: -1}},
		{"BreakerSettings.MaxCooldown", BreakerSettings{Threshold: 1, Cooldown: 2 * time.Second, MaxCooldown: time.Second}},
		{"BreakerSettings.Probes", BreakerSettings{Threshold: 1, Probes: -1}},
		{"BreakerSettings.Rule", BreakerSettings{Rule: 9}},
		{"BreakerSettings.FailureRate", BreakerSettings{Threshold: 1, FailureRate: 0.5}},
		{"BreakerSettings.WindowSize", BreakerSettings{Rule: CountWindow, FailureRate: 0.5}},
		{"BreakerSettings.WindowPeriod", BreakerSettings{Rule: TimeWindow, FailureRate: 0.5}},
		{"BreakerSettings.WindowPeriod", BreakerSettings{Rule: CountWindow, WindowSize: 5, WindowPeriod: time.Second, FailureRate: 0.5}},
		{"BreakerSettings.WindowSize", BreakerSettings{Rule: TimeWindow, WindowSize: 5, WindowPeriod: time.Second, FailureRate: 0.5}},
		{"BreakerSettings.Threshold", BreakerSettings{Rule: CountWindow, WindowSize: 5, Threshold: 1, FailureRate: 0.5}},
		{"BreakerSettings.MinCalls", BreakerSettings{Rule: CountWindow, WindowSize: 5, MinCalls: 6, FailureRate: 0.5}},
		{"BreakerSettings.FailureRate", BreakerSettings{Rule: CountWindow, WindowSize: 5, FailureRate: 1.5}},
		{"BreakerSettings.FailureRate", BreakerSettings{Rule: CountWindow, WindowSize: 5}},
		{"BreakerSettings.SlowCall", BreakerSettings{Rule: CountWindow, WindowSize: 5, SlowCallRate: 0.5}},
		{"BreakerSettings.SlowCallRate", BreakerSettings{Rule: CountWindow, WindowSize: 5, SlowCall: 1, SlowCallRate: 2}},
	} {
		_, err := NewBreaker(c.s)
		wantSettingError(t, err, c.field)
	}
	b := mustBreaker(t, BreakerSettings{Rule: CountWindow, WindowSize: 5, FailureRate: 0.5})
	if s := b.Settings(); s.MinCalls != 5 || s.Cooldown != 5*time.Second || s.Probes != 1 {
		t.Fatalf("defaults = %+v", s)
	}
}

// TestBreakerConcurrentProbes hammers a half-open breaker that reopens
// and cools down within microseconds: however the calls interleave, no
// more than Probes trial calls are ever in flight at once, whatever
// generation admitted them (a probe of an older generation still holds its
// slot until it is recorded). Run it with -race.
func TestBreakerConcurrentProbes(t *testing.T) {
	const probes = 5
	b := mustBreaker(t, BreakerSettings{Threshold: 1, Cooldown: 20 * time.Microsecond, Probes: probes})
	var inflight, peak atomic.Int64
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 3000 {
				now := ts(float64(i) / 1e5) // 10 µs a step: cooldowns end often
				p, err := b.Allow(now)
				if err != nil {
					continue
				}
				if p.Probe() {
					n := inflight.Add(1)
					for {
						old := peak.Load()
						if n <= old || peak.CompareAndSwap(old, n) {
							break
						}
					}
				}
				if i%7 == 0 {
					runtime.Gosched() // hold the permit a while
				}
				o := OutcomeSuccess
				if (i+w)%3 == 0 {
					o = OutcomeFailure
				}
				if p.Probe() {
					inflight.Add(-1) // before Record: the breaker counts it longer than we do
				}
				b.Record(now, p, o, 0)
			}
		})
	}
	wg.Wait()
	if got := peak.Load(); got > probes {
		t.Fatalf("%d probes in flight at once, limit %d", got, probes)
	}
}

// A probe of an older generation still holds its slot: after a failed
// trial reopens the breaker and the cooldown ends, the new half-open
// generation may admit only as many probes as are free.
func TestBreakerStaleProbesHoldTheirSlots(t *testing.T) {
	b := mustBreaker(t, BreakerSettings{Threshold: 1, Cooldown: time.Second, Probes: 2})
	p, _ := b.Allow(ts(0))
	b.Record(ts(0), p, OutcomeFailure, 0) // open
	p1, err1 := b.Allow(ts(1))
	p2, err2 := b.Allow(ts(1))
	if err1 != nil || err2 != nil || !p1.Probe() || !p2.Probe() {
		t.Fatalf("two probes: %v, %v", err1, err2)
	}
	b.Record(ts(1), p1, OutcomeFailure, 0) // reopen; p2 still out
	if _, err := b.Allow(ts(2)); err != nil {
		t.Fatalf("one free slot: %v", err)
	}
	if _, err := b.Allow(ts(2)); !errors.Is(err, ErrTooManyProbes) {
		t.Fatalf("second probe with p2 still out: %v, want ErrTooManyProbes", err)
	}
	b.Record(ts(2), p2, OutcomeSuccess, 0) // stale: frees its slot, judges nothing
	if s := b.State(ts(2)); s != StateHalfOpen {
		t.Fatalf("state %v after a stale success, want half-open", s)
	}
	if _, err := b.Allow(ts(2)); err != nil {
		t.Fatalf("slot freed by the stale probe: %v", err)
	}
}

// TestBreakerFuncReadsClockOnlyWhenNeeded drives AllowFunc and RecordFunc
// on the fixed grid with a clock that counts its reads: each step must
// decide as Allow and Record do, and read the clock only as often as the
// state or the rule needs the time.
func TestBreakerFuncReadsClockOnlyWhenNeeded(t *testing.T) {
	type step struct {
		at      float64
		o       Outcome
		refused bool
		state   State
		reads   int // clock reads by AllowFunc and RecordFunc together
	}
	for _, tc := range []struct {
		name  string
		s     BreakerSettings
		steps []step
	}{
		{"consecutive", BreakerSettings{Threshold: 2, Cooldown: 5 * time.Second}, []step{
			{at: 0, o: OutcomeSuccess, state: StateClosed, reads: 0},
			{at: 1, o: OutcomeFailure, state: StateClosed, reads: 0},
			{at: 2, o: OutcomeSuccess, state: StateClosed, reads: 0}, // resets the streak under the lock: no time needed
			{at: 3, o: OutcomeFailure, state: StateClosed, reads: 0},
			{at: 4, o: OutcomeFailure, state: StateOpen, reads: 1}, // trips: the cooldown starts now
			{at: 5, refused: true, state: StateOpen, reads: 1},     // open: is the cooldown over?
			{at: 9, o: OutcomeSuccess, state: StateClosed, reads: 2},
			{at: 10, o: OutcomeSuccess, state: StateClosed, reads: 0},
		}},
		{"count window", BreakerSettings{Rule: CountWindow, WindowSize: 4, MinCalls: 2, FailureRate: 1}, []step{
			{at: 0, o: OutcomeFailure, state: StateClosed, reads: 0},
			{at: 1, o: OutcomeFailure, state: StateOpen, reads: 1},
		}},
		{"time window", BreakerSettings{Rule: TimeWindow, WindowPeriod: 10 * time.Second, MinCalls: 2, FailureRate: 1}, []step{
			{at: 0, o: OutcomeSuccess, state: StateClosed, reads: 1}, // the window moves with time
			{at: 1, o: OutcomeFailure, state: StateClosed, reads: 1},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lazyB := mustBreaker(t, tc.s)
			timed := mustBreaker(t, tc.s) // the same steps through Allow and Record
			for i, s := range tc.steps {
				now := ts(s.at)
				reads := 0
				clock := func() time.Time { reads++; return now }
				p, err := lazyB.AllowFunc(clock)
				q, err2 := timed.Allow(now)
				if (err != nil) != s.refused || (err2 != nil) != s.refused {
					t.Fatalf("step %d: AllowFunc err = %v, Allow err = %v, want refused %v", i, err, err2, s.refused)
				}
				if err == nil {
					lazyB.RecordFunc(clock, p, s.o, 0)
					timed.Record(now, q, s.o, 0)
				}
				if reads != s.reads {
					t.Errorf("step %d: %d clock reads, want %d", i, reads, s.reads)
				}
				if got, want := lazyB.State(now), timed.State(now); got != s.state || want != s.state {
					t.Fatalf("step %d: states %v (Func) and %v (time given), want %v", i, got, want, s.state)
				}
			}
		})
	}
	// A nil clock is time.Now: a real breaker takes it without panicking.
	b := mustBreaker(t, BreakerSettings{Threshold: 1})
	p, err := b.AllowFunc(nil)
	if err != nil {
		t.Fatal(err)
	}
	b.RecordFunc(nil, p, OutcomeFailure, 0)
	if _, err := b.AllowFunc(nil); !errors.Is(err, ErrBreakerOpen) {
		t.Fatalf("after a failure with threshold 1: %v, want ErrBreakerOpen", err)
	}
}

// TestBreakerTimeWindowBeforeEpoch: virtual clocks often start at the zero
// Time, before 1970; a time window must work there too (negative slot
// indices). resil/budget's window budget has the same test.
func TestBreakerTimeWindowBeforeEpoch(t *testing.T) {
	var zero time.Time
	b := mustBreaker(t, BreakerSettings{Rule: TimeWindow, WindowPeriod: time.Second, FailureRate: 0.5, MinCalls: 2})
	p, _ := b.Allow(zero)
	b.Record(zero, p, OutcomeFailure, 0)
	p, _ = b.Allow(zero.Add(time.Millisecond))
	b.Record(zero.Add(time.Millisecond), p, OutcomeFailure, 0)
	if s := b.State(zero.Add(time.Millisecond)); s != StateOpen {
		t.Fatalf("state = %v, want open", s)
	}
}
