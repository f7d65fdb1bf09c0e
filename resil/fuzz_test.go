package resil

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// FuzzBreakerProbes checks that a breaker never has more than Probes trial
// calls in flight at once, of any generation, whatever the sequence of
// calls, outcomes and times.
func FuzzBreakerProbes(f *testing.F) {
	f.Add(uint8(1), []byte{1, 0, 0, 0, 9, 0, 0, 1, 2, 3})
	f.Add(uint8(3), []byte{1, 9, 0, 0, 0, 0, 4, 0, 5, 0, 6, 9, 0, 0, 0})
	f.Add(uint8(2), []byte{1, 9, 0, 0, 3, 0, 3, 0, 2, 9, 0, 0, 0, 1, 1})
	f.Fuzz(func(t *testing.T, probes uint8, ops []byte) {
		n := int(probes%4) + 1
		b := mustBreaker(t, BreakerSettings{Threshold: 1, Cooldown: time.Second, MaxCooldown: 4 * time.Second, Probes: n})
		now := t0
		var held []Permit
		for _, op := range ops {
			switch op % 10 {
			case 0:
				if p, err := b.Allow(now); err == nil {
					held = append(held, p)
				}
			case 9:
				now = now.Add(time.Duration(op/10+1) * 100 * time.Millisecond)
			default:
				if len(held) == 0 {
					// Record a fresh closed-state call's failure to trip it.
					if p, err := b.Allow(now); err == nil {
						b.Record(now, p, OutcomeFailure, 0)
					}
					break
				}
				i := int(op) % len(held)
				o := [...]Outcome{OutcomeSuccess, OutcomeFailure, OutcomeTimeout, OutcomeIgnored}[op%4]
				b.Record(now, held[i], o, 0)
				held = append(held[:i], held[i+1:]...)
			}
			inflight := 0
			for _, p := range held {
				if p.probe {
					inflight++
				}
			}
			if inflight > n {
				t.Fatalf("%d probes in flight, limit %d", inflight, n)
			}
		}
	})
}

// FuzzBackoffDelay checks that every valid Backoff's delays stay in
// [0, Cap] (or are non-negative without a cap), in [0, Cap × (1 + Factor)]
// with UncappedJitter, and never exceed MaxDelay, whatever the draw: a draw
// the fuzzer picks (all ones included) and one from a seeded source.
func FuzzBackoffDelay(f *testing.F) {
	f.Add(uint8(2), uint8(1), int64(100e6), int64(1e9), 2.0, 0.0, 10, int64(0), uint64(1))
	f.Add(uint8(2), uint8(3), int64(1e6), int64(30e9), 0.0, 0.0, 50, int64(29e9), uint64(7))
	f.Add(uint8(1), uint8(4), int64(1e9), int64(0), 0.0, 1.0, 1, int64(0), uint64(math.MaxUint64))
	f.Add(uint8(2), uint8(2), int64(1), int64(math.MaxInt64), 1000.0, 0.0, 1<<20, int64(0), uint64(3))
	f.Add(uint8(0), uint8(3), int64(1<<60), int64(1<<62), 0.0, 0.0, 1, int64(1<<61+255), uint64(math.MaxUint64))
	f.Fuzz(func(t *testing.T, sched, jit uint8, base, capD int64, mult, factor float64, retry int, prev int64, seed uint64) {
		b := Backoff{Schedule: Schedule(sched % 3), Jitter: Jitter(jit % 5), Base: time.Duration(base),
			Cap: time.Duration(capD), Multiplier: mult, Factor: factor}
		if b.Validate() != nil {
			return
		}
		bound := b.MaxDelay(retry, time.Duration(prev))
		if bound < 0 || (b.Cap > 0 && bound > b.Cap) {
			t.Fatalf("%+v: MaxDelay(%d, %v) = %v outside [0, %v]", b, retry, time.Duration(prev), bound, b.Cap)
		}
		for _, src := range []rand.Source{constantDraw(seed), rand.NewPCG(seed, seed>>1)} {
			d := b.Delay(retry, time.Duration(prev), src)
			if d < 0 || (b.Cap > 0 && d > b.Cap) {
				t.Fatalf("%+v: Delay(%d, %v) = %v outside [0, %v]", b, retry, time.Duration(prev), d, b.Cap)
			}
			if d > bound {
				t.Fatalf("%+v: Delay(%d, %v) = %v above MaxDelay %v", b, retry, time.Duration(prev), d, bound)
			}
		}
		if b.Jitter != FactorJitter {
			return
		}
		// Uncapped, the jitter may take a delay past Cap, by Factor at most.
		b.UncappedJitter = true
		bound = b.MaxDelay(retry, time.Duration(prev))
		for _, src := range []rand.Source{constantDraw(seed), rand.NewPCG(seed, seed>>1)} {
			d := b.Delay(retry, time.Duration(prev), src)
			if d < 0 || (b.Cap > 0 && float64(d) > float64(b.Cap)*(1+b.Factor)+1) {
				t.Fatalf("%+v: Delay(%d, %v) = %v outside [0, Cap×(1+Factor)]", b, retry, time.Duration(prev), d)
			}
			if d > bound {
				t.Fatalf("%+v: Delay(%d, %v) = %v above MaxDelay %v", b, retry, time.Duration(prev), d, bound)
			}
		}
	})
}

// constantDraw is a source that always draws the same number.
type constantDraw uint64

func (c constantDraw) Uint64() uint64 { return uint64(c) }
