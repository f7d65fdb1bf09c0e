package resil

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// Schedule is the delay before each retry, before jitter. The zero value is
// NoDelay. A plain value, safe to copy and share.
type Schedule uint8

const (
	// NoDelay retries at once. It is the zero value.
	NoDelay Schedule = iota
	// Fixed waits Base before every retry.
	Fixed
	// Exponential waits Base × Multiplier^(n-1) before retry n, capped at
	// Cap before jitter is applied.
	Exponential
)

var scheduleNames = [...]string{"none", "fixed", "exponential"}

// String returns "none", "fixed" or "exponential".
func (s Schedule) String() string {
	return enumString("Schedule", scheduleNames[:], uint8(s))
}

// Jitter spreads the delays of clients that failed together, so that their
// retries do not arrive together. The definitions are those of Marc
// Brooker's "Exponential Backoff And Jitter" (AWS Architecture Blog, 2015),
// where d is the scheduled delay. The zero value is NoJitter. A Jitter is a
// plain value, safe to copy and share.
type Jitter uint8

const (
	// NoJitter waits d. A synchronised herd stays synchronised.
	NoJitter Jitter = iota
	// FullJitter waits uniform(0, d).
	FullJitter
	// EqualJitter waits d/2 + uniform(0, d/2).
	EqualJitter
	// DecorrelatedJitter waits min(Cap, uniform(Base, 3 × previous delay)),
	// starting from previous = Base. It ignores the Schedule's growth: it
	// grows by itself, and each client's delays drift apart.
	DecorrelatedJitter
	// FactorJitter waits d × (1 ± Factor), uniformly, capped at Cap
	// (unless UncappedJitter).
	FactorJitter
)

var jitterNames = [...]string{"none", "full", "equal", "decorrelated", "factor"}

// String returns "none", "full", "equal", "decorrelated" or "factor".
func (j Jitter) String() string {
	return enumString("Jitter", jitterNames[:], uint8(j))
}

// Backoff says how long to wait before each retry. It is a value: Delay is a
// pure function of its arguments, and the random source is passed in.
//
// The zero value retries at once without jitter; Validate refuses the
// settings it would ignore (a Base, a Cap or a jitter without a Schedule),
// so a wait that was asked for is never silently dropped. A Backoff is safe for
// concurrent use; the rand.Source passed to Delay is not, unless the caller
// makes it so.
type Backoff struct {
	// Schedule is the delay's growth. Zero is NoDelay.
	Schedule Schedule
	// Base is the first delay (and the least delay of DecorrelatedJitter).
	// Required by every schedule but NoDelay, and by DecorrelatedJitter;
	// refused with NoDelay otherwise, which would ignore it and retry at
	// once: Backoff{Base: d} is a mistake, Backoff{Schedule: Fixed, Base: d}
	// waits d.
	Base time.Duration
	// Cap bounds every delay, before and after jitter. Zero means no cap
	// (for Fixed and Exponential; delays then saturate near 292 years).
	// Required by DecorrelatedJitter; refused with NoDelay otherwise.
	Cap time.Duration
	// Multiplier is Exponential's growth per retry. Zero means 2; else it
	// must be at least 1.
	Multiplier float64
	// Jitter spreads the delays. Zero is NoJitter. NoDelay has no delay
	// to spread: only DecorrelatedJitter, which makes its own, goes with it.
	Jitter Jitter
	// Factor is FactorJitter's spread, in (0, 1]. Required there.
	Factor float64
	// UncappedJitter, with FactorJitter only, applies Cap to the schedule
	// before the jitter and not after it, so a delay may reach
	// Cap × (1 + Factor). That is grpc-go's retry backoff:
	// min(initialBackoff × multiplier^n, maxBackoff) × uniform(0.8, 1.2).
	// False, the zero value, keeps every delay within Cap.
	UncappedJitter bool
}

// Validate reports the first invalid field, or nil.
func (b Backoff) Validate() error {
	const p = "Backoff."
	if b.Schedule > Exponential {
		return badSetting(p+"Schedule", b.Schedule, "unknown schedule")
	}
	if b.Jitter > FactorJitter {
		return badSetting(p+"Jitter", b.Jitter, "unknown jitter")
	}
	if b.Base < 0 {
		return badSetting(p+"Base", b.Base, "must not be negative")
	}
	if b.Cap < 0 {
		return badSetting(p+"Cap", b.Cap, "must not be negative")
	}
	needBase := b.Schedule != NoDelay || b.Jitter == DecorrelatedJitter
	if needBase && b.Base == 0 {
		return badSetting(p+"Base", b.Base, fmt.Sprintf("required by schedule %s with jitter %s", b.Schedule, b.Jitter))
	}
	if !needBase {
		if err := b.checkNoDelay(); err != nil {
			return err
		}
	}
	if b.Cap != 0 && b.Cap < b.Base {
		return badSetting(p+"Cap", b.Cap, "must be zero or at least Base")
	}
	if b.Jitter == DecorrelatedJitter && b.Cap == 0 {
		return badSetting(p+"Cap", b.Cap, "required by decorrelated jitter")
	}
	if b.Multiplier != 0 && (!finite(b.Multiplier) || b.Multiplier < 1 || b.Multiplier > 1000) {
		return badSetting(p+"Multiplier", b.Multiplier, "must be in [1, 1000], or zero for 2")
	}
	if b.Jitter == FactorJitter {
		if !finite(b.Factor) || b.Factor <= 0 || b.Factor > 1 {
			return badSetting(p+"Factor", b.Factor, "required by factor jitter, in (0, 1]")
		}
	} else if b.Factor != 0 {
		return badSetting(p+"Factor", b.Factor, "applies to factor jitter only")
	}
	if b.UncappedJitter && b.Jitter != FactorJitter {
		return badSetting(p+"UncappedJitter", b.UncappedJitter, "applies to factor jitter only")
	}
	return nil
}

// checkNoDelay refuses the settings that a Backoff without delays
// (NoDelay, without decorrelated jitter) would silently ignore: a Base, a
// Cap or a jitter written there mean the writer expected a wait, and the
// retries would go at once. The scenario loader reports these same
// reasons under its own keys (use, base, cap, jitter), so a file and a
// program are refused in the same words.
func (b *Backoff) checkNoDelay() error {
	const p, fix = "Backoff.", "use fixed or exponential"
	switch {
	case b.Base != 0:
		return badSetting(p+"Base", b.Base, "does nothing with schedule none, which retries at once: remove it, or "+fix)
	case b.Cap != 0:
		return badSetting(p+"Cap", b.Cap, "does nothing with schedule none, which retries at once: remove it, or "+fix)
	case b.Jitter != NoJitter:
		return badSetting(p+"Jitter", b.Jitter, b.Jitter.String()+" jitter spreads a delay, and schedule none has none: "+fix+", or decorrelated jitter")
	}
	return nil
}

// Delay returns the wait before retry number retry (1 for the first retry).
// prev is the delay returned for the previous retry of the same call (zero
// before the first); only DecorrelatedJitter uses it. src is the random
// source for jitter; it may be nil when Jitter is NoJitter. Each call draws
// at most one number from src.
//
// The result is in [0, Cap] (in [0, +292 years] without a cap; in
// [0, Cap × (1 + Factor)] with UncappedJitter). Delay
// assumes a valid Backoff (see Validate) and does not allocate.
func (b Backoff) Delay(retry int, prev time.Duration, src rand.Source) time.Duration {
	return b.delay(retry, prev, src)
}

// delay is Delay without the copy of b: Policy asks it for every retry.
func (b *Backoff) delay(retry int, prev time.Duration, src rand.Source) time.Duration {
	limit := time.Duration(math.MaxInt64)
	if b.Cap > 0 {
		limit = b.Cap
	}
	if b.Jitter == DecorrelatedJitter {
		lo := b.Base
		hi := 3 * max(prev, lo)
		if hi < 0 || hi/3 != max(prev, lo) { // overflow
			hi = limit
		}
		return min(limit, lo+time.Duration(uniform(src)*float64(hi-lo)))
	}
	var d time.Duration
	switch b.Schedule {
	case NoDelay:
		return 0
	case Fixed:
		d = b.Base
	case Exponential:
		m := b.Multiplier
		if m == 0 {
			m = 2
		}
		k := max(retry, 1) - 1
		var f float64
		if m == 2 && k < 63 {
			// The default multiplier: a shift, exactly what math.Pow(2, k)
			// returns, at a tenth of its cost.
			f = float64(b.Base) * float64(uint64(1)<<k)
		} else {
			f = float64(b.Base) * math.Pow(m, float64(k))
		}
		if f >= float64(limit) || math.IsNaN(f) {
			d = limit
		} else {
			d = time.Duration(f)
		}
	}
	d = min(d, limit)
	switch b.Jitter {
	case FullJitter:
		d = time.Duration(uniform(src) * float64(d))
	case EqualJitter:
		d = d/2 + time.Duration(uniform(src)*float64(d-d/2))
	case FactorJitter:
		f := float64(d) * (1 + b.Factor*(2*uniform(src)-1))
		if b.UncappedJitter {
			if f >= float64(math.MaxInt64) {
				return math.MaxInt64
			}
			return max(0, time.Duration(f))
		}
		if f >= float64(limit) {
			return limit
		}
		d = max(0, time.Duration(f))
	}
	return min(max(d, 0), limit)
}

// MaxDelay returns the longest wait Delay can return for the same retry
// and prev, whatever it draws: a bound that holds for every jitter,
// decorrelated included, so that a caller can budget time for a retry
// chain without drawing (chain it: the bound of retry n+1 takes the bound
// of retry n as prev). It is pure, assumes a valid Backoff and does not
// allocate.
//
// Every jitter grows with its draw, and so does each step of Delay's
// arithmetic (rounding included), so MaxDelay is Delay at the largest draw
// there is: not an estimate that could fall a nanosecond short, but the
// wait a source drawing all ones would get.
func (b Backoff) MaxDelay(retry int, prev time.Duration) time.Duration {
	return b.Delay(retry, prev, largestDraw{})
}

// largestDraw is a rand.Source that always draws its largest number.
type largestDraw struct{}

func (largestDraw) Uint64() uint64 { return math.MaxUint64 }

// uniform draws from [0, 1) with 53 bits, as math/rand/v2's Float64 does.
func uniform(src rand.Source) float64 {
	return float64(src.Uint64()<<11>>11) / (1 << 53)
}
