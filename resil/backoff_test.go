package resil

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

const ms = time.Millisecond

func TestBackoffSchedules(t *testing.T) {
	for _, c := range []struct {
		name string
		b    Backoff
		want []time.Duration // retries 1, 2, ...
	}{
		{"none", Backoff{}, []time.Duration{0, 0, 0}},
		{"fixed", Backoff{Schedule: Fixed, Base: 100 * ms}, []time.Duration{100 * ms, 100 * ms, 100 * ms}},
		{"fixed capped", Backoff{Schedule: Fixed, Base: 100 * ms, Cap: 100 * ms}, []time.Duration{100 * ms, 100 * ms}},
		{"exponential", Backoff{Schedule: Exponential, Base: 100 * ms, Cap: time.Second},
			[]time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, time.Second, time.Second}},
		{"exponential ×1.5", Backoff{Schedule: Exponential, Base: 100 * ms, Multiplier: 1.5},
			[]time.Duration{100 * ms, 150 * ms, 225 * ms, 337500 * time.Microsecond}},
		{"exponential ×1", Backoff{Schedule: Exponential, Base: 100 * ms, Multiplier: 1},
			[]time.Duration{100 * ms, 100 * ms}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := c.b.Validate(); err != nil {
				t.Fatal(err)
			}
			for i, w := range c.want {
				if got := c.b.Delay(i+1, 0, nil); got != w {
					t.Fatalf("retry %d: %v, want %v", i+1, got, w)
				}
			}
		})
	}
}

// TestBackoffJitter checks each jitter kind with a fixed draw, and that the
// cap is applied before jitter: retry 10 of 100ms×2^9 = 51.2s is capped to
// 1s first, so full jitter at 0.5 gives 500ms (jittering first would give
// min(25.6s, 1s) = 1s).
func TestBackoffJitter(t *testing.T) {
	exp := Backoff{Schedule: Exponential, Base: 100 * ms, Cap: time.Second}
	with := func(j Jitter, f float64) Backoff { b := exp; b.Jitter, b.Factor = j, f; return b }
	uncapped := func(f float64) Backoff { b := with(FactorJitter, f); b.UncappedJitter = true; return b }
	for _, c := range []struct {
		name  string
		b     Backoff
		u     float64 // the draw
		retry int
		prev  time.Duration
		want  time.Duration
	}{
		{"full 0.5", with(FullJitter, 0), 0.5, 3, 0, 200 * ms},
		{"full 0", with(FullJitter, 0), 0, 3, 0, 0},
		{"full capped first", with(FullJitter, 0), 0.5, 10, 0, 500 * ms},
		{"equal 0.5", with(EqualJitter, 0), 0.5, 3, 0, 300 * ms},
		{"equal 0", with(EqualJitter, 0), 0, 3, 0, 200 * ms},
		{"equal capped first", with(EqualJitter, 0), 0.5, 10, 0, 750 * ms},
		{"factor low", with(FactorJitter, 0.2), 0, 3, 0, 320 * ms},
		{"factor mid", with(FactorJitter, 0.2), 0.5, 3, 0, 400 * ms},
		{"factor above cap", with(FactorJitter, 0.2), 0.75, 10, 0, time.Second},
		{"factor below cap", with(FactorJitter, 0.2), 0.25, 10, 0, 900 * ms},
		{"factor uncapped past cap", uncapped(0.2), 0.75, 10, 0, 1100 * ms},
		{"factor uncapped low", uncapped(0.2), 0, 10, 0, 800 * ms},
		{"factor uncapped under cap", uncapped(0.2), 0.5, 2, 0, 200 * ms},
		// Decorrelated: uniform(Base, 3 × prev), prev starting at Base, capped.
		{"decorrelated first", with(DecorrelatedJitter, 0), 0.5, 1, 0, 200 * ms},
		{"decorrelated next", with(DecorrelatedJitter, 0), 0.5, 2, 200 * ms, 350 * ms},
		{"decorrelated low", with(DecorrelatedJitter, 0), 0, 2, 200 * ms, 100 * ms},
		{"decorrelated capped", with(DecorrelatedJitter, 0), 0.5, 5, 800 * ms, time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := c.b.Validate(); err != nil {
				t.Fatal(err)
			}
			if got := c.b.Delay(c.retry, c.prev, draw(c.u)); got != c.want {
				t.Fatalf("Delay(%d, %v) at %v = %v, want %v", c.retry, c.prev, c.u, got, c.want)
			}
		})
	}
}

type countingSource struct {
	n   int
	src rand.Source
}

func (c *countingSource) Uint64() uint64 { c.n++; return c.src.Uint64() }

func TestBackoffDrawsAtMostOnce(t *testing.T) {
	for j := NoJitter; j <= FactorJitter; j++ {
		b := Backoff{Schedule: Exponential, Base: ms, Cap: time.Second, Jitter: j}
		if j == FactorJitter {
			b.Factor = 0.5
		}
		src := &countingSource{src: rand.NewPCG(1, 2)}
		for i := 1; i <= 20; i++ {
			before := src.n
			b.Delay(i, time.Duration(i)*ms, src)
			if d := src.n - before; d > 1 || (j != NoJitter && d != 1) {
				t.Fatalf("%v: %d draws", j, d)
			}
		}
	}
}

func TestBackoffSaturates(t *testing.T) {
	b := Backoff{Schedule: Exponential, Base: time.Second, Multiplier: 1000}
	for _, r := range []int{1, 10, 100, 1 << 30} {
		if d := b.Delay(r, 0, nil); d <= 0 {
			t.Fatalf("retry %d: %v", r, d)
		}
	}
	if d := b.Delay(100, 0, nil); d != time.Duration(math.MaxInt64) {
		t.Fatalf("uncapped delay = %v, want saturation", d)
	}
	b.Jitter, b.Factor = FactorJitter, 1
	if d := b.Delay(100, 0, draw(0.999)); d != time.Duration(math.MaxInt64) {
		t.Fatalf("factor jitter overflowed: %v", d)
	}
}

func TestBackoffValidate(t *testing.T) {
	for _, c := range []struct {
		field string
		b     Backoff
	}{
		{"Backoff.Schedule", Backoff{Schedule: 7}},
		{"Backoff.Jitter", Backoff{Jitter: 9}},
		{"Backoff.Base", Backoff{Base: -1}},
		{"Backoff.Cap", Backoff{Cap: -1}},
		{"Backoff.Base", Backoff{Schedule: Fixed}},
		{"Backoff.Base", Backoff{Jitter: DecorrelatedJitter, Cap: time.Second}},
		{"Backoff.Cap", Backoff{Schedule: Fixed, Base: time.Second, Cap: ms}},
		{"Backoff.Cap", Backoff{Schedule: Fixed, Base: ms, Jitter: DecorrelatedJitter}},
		{"Backoff.Multiplier", Backoff{Schedule: Exponential, Base: ms, Multiplier: 0.5}},
		{"Backoff.Factor", Backoff{Schedule: Fixed, Base: ms, Jitter: FactorJitter}},
		{"Backoff.Factor", Backoff{Schedule: Fixed, Base: ms, Factor: 0.5}},
		{"Backoff.UncappedJitter", Backoff{Schedule: Fixed, Base: ms, Jitter: FullJitter, UncappedJitter: true}},
		// Settings a Backoff without delays would ignore, retrying at once
		// (issue 27, 13): the scenario loader refuses them in these words.
		{"Backoff.Base", Backoff{Base: 300 * ms}},
		{"Backoff.Cap", Backoff{Cap: time.Second}},
		{"Backoff.Jitter", Backoff{Jitter: FullJitter}},
		{"Backoff.Jitter", Backoff{Jitter: EqualJitter}},
		{"Backoff.Jitter", Backoff{Jitter: FactorJitter, Factor: 0.2}},
	} {
		err := c.b.Validate()
		wantSettingError(t, err, c.field)
	}
	// What goes with NoDelay: nothing, or decorrelated jitter, which makes
	// its own delays.
	for _, b := range []Backoff{{}, {Jitter: DecorrelatedJitter, Base: ms, Cap: time.Second}} {
		if err := b.Validate(); err != nil {
			t.Errorf("%+v: %v", b, err)
		}
	}
}

// TestNewGuardRefusesBaseWithoutSchedule: Backoff{Base: 300ms} looks like
// a 300ms wait and retried at once; NewGuard now says so.
func TestNewGuardRefusesBaseWithoutSchedule(t *testing.T) {
	_, err := NewGuard(GuardSettings{Idempotency: Idempotent,
		Policy: Policy{MaxRetries: 3, Backoff: Backoff{Base: 300 * ms}}})
	wantSettingError(t, err, "Backoff.Base")
	want := "resil: Backoff.Base = 300ms: does nothing with schedule none, which retries at once: remove it, or use fixed or exponential"
	if err == nil || err.Error() != want {
		t.Errorf("err = %v\nwant %s", err, want)
	}
}

func TestBackoffZeroAlloc(t *testing.T) {
	b := Backoff{Schedule: Exponential, Base: ms, Cap: time.Second, Jitter: DecorrelatedJitter}
	src := rand.NewPCG(1, 2)
	if n := testing.AllocsPerRun(100, func() { b.Delay(3, 10*ms, src) }); n != 0 {
		t.Fatalf("Delay allocates %v times", n)
	}
	if n := testing.AllocsPerRun(100, func() { b.MaxDelay(3, 10*ms) }); n != 0 {
		t.Fatalf("MaxDelay allocates %v times", n)
	}
}

func TestBackoffDoublingIsPow(t *testing.T) {
	// The shift used for the default multiplier must give what math.Pow
	// gives, so that the simulator's runs do not depend on the shortcut.
	for k := range 63 {
		if got, want := float64(uint64(1)<<k), math.Pow(2, float64(k)); got != want {
			t.Fatalf("2^%d: %v != %v", k, got, want)
		}
	}
	b := Backoff{Schedule: Exponential, Base: 3 * ms}
	b2 := b
	b2.Multiplier = 2.0000000000000004 // takes the math.Pow path
	for r := 1; r < 70; r++ {
		d, d2 := b.Delay(r, 0, nil), b2.Delay(r, 0, nil)
		if d <= 0 || d2 < d {
			t.Fatalf("retry %d: %v, %v with a hair more growth", r, d, d2)
		}
	}
}

// TestBackoffGRPCFormula checks that Exponential with FactorJitter 0.2 and
// UncappedJitter is grpc-go's retry backoff, delay for delay:
// min(initialBackoff × multiplier^n, maxBackoff) × (0.8 + 0.4u), where n
// counts the retries before this one and u is the draw.
func TestBackoffGRPCFormula(t *testing.T) {
	for _, c := range []struct {
		initial, maxB time.Duration
		mult          float64
	}{
		{100 * ms, time.Second, 2},
		{10 * ms, 10 * ms, 1},
		{50 * ms, 3 * time.Second, 1.5},
		{time.Second, 120 * time.Second, 1.6},
	} {
		b := Backoff{Schedule: Exponential, Base: c.initial, Cap: c.maxB, Multiplier: c.mult,
			Jitter: FactorJitter, Factor: 0.2, UncappedJitter: true}
		if err := b.Validate(); err != nil {
			t.Fatal(err)
		}
		for n := range 8 {
			for _, u := range []float64{0, 0.25, 0.5, 0.999} {
				cur := min(float64(c.initial)*math.Pow(c.mult, float64(n)), float64(c.maxB))
				want := time.Duration(int64(cur * (0.8 + 0.4*u)))
				if got := b.Delay(n+1, 0, draw(u)); got != want {
					t.Errorf("%v×%v cap %v, retry %d, u=%v: %v, want %v", c.initial, c.mult, c.maxB, n+1, u, got, want)
				}
			}
		}
	}
}

// TestBackoffMaxDelay: the bound of each jitter kind on a fixed grid, and
// the chain of decorrelated bounds (each retry's bound grows from the
// previous one's, up to the cap). A draw is below 1, so a jittered delay
// truncated to whole nanoseconds stays a nanosecond under its schedule:
// MaxDelay says so, exactly.
func TestBackoffMaxDelay(t *testing.T) {
	exp := Backoff{Schedule: Exponential, Base: 100 * ms, Cap: time.Second}
	with := func(j Jitter, f float64) Backoff { b := exp; b.Jitter, b.Factor = j, f; return b }
	const ns = time.Nanosecond
	for _, c := range []struct {
		name string
		b    Backoff
		want []time.Duration // retries 1, 2, ..., each with the previous bound as prev
	}{
		{"none", Backoff{}, []time.Duration{0, 0}},
		{"no jitter", exp, []time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, time.Second}},
		{"full", with(FullJitter, 0), []time.Duration{100*ms - ns, 200*ms - ns, 400*ms - ns, 800*ms - ns, time.Second - ns}},
		{"equal", with(EqualJitter, 0), []time.Duration{100*ms - ns, 200*ms - ns, 400*ms - ns, 800*ms - ns, time.Second - ns}},
		{"factor", with(FactorJitter, 0.5), []time.Duration{150 * ms, 300 * ms, 600 * ms, time.Second, time.Second}},
		{"decorrelated", with(DecorrelatedJitter, 0), []time.Duration{300*ms - ns, 900*ms - 4*ns, time.Second, time.Second}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var prev time.Duration
			for i, w := range c.want {
				got := c.b.MaxDelay(i+1, prev)
				if got != w {
					t.Fatalf("retry %d after %v: MaxDelay %v, want %v", i+1, prev, got, w)
				}
				prev = got
			}
		})
	}
}
