package resil

import "time"

// Clock is the time source of a [Guard]: it reads the time and makes the
// timers the Guard waits on (backoff, hedge delay, per-attempt timeout).
// The policies never read a clock; only the Guard does, through this.
//
// Implementations must be safe for concurrent use. A nil Clock in Settings
// means [RealClock]; tests inject a fake, or run the default under
// testing/synctest.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// NewTimer returns a timer whose channel receives once after d.
	NewTimer(d time.Duration) Timer
	// AfterFunc calls f in its own goroutine after d, unless stopped.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a timer made by a [Clock]. Stop may be called from another
// goroutine than the one that receives from C, so implementations must be
// safe for concurrent use.
type Timer interface {
	// C returns the channel the timer sends on; nil for AfterFunc timers.
	C() <-chan time.Time
	// Stop prevents the timer from firing and reports whether it did so.
	Stop() bool
}

// RealClock returns the system clock: time.Now and the runtime's timers.
func RealClock() Clock { return realClock{} }

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

func (realClock) AfterFunc(d time.Duration, f func()) Timer {
	return realTimer{time.AfterFunc(d, f)}
}

// realTimer is pointer-shaped, so boxing it in a Timer does not allocate.
type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time { return r.t.C }
func (r realTimer) Stop() bool          { return r.t.Stop() }
