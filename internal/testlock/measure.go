package testlock

import (
	"fmt"
	"os"
	"sync"
	"testing"
	"time"
)

// A test that times real servers measures the machine as much as what it
// tests: beside other work its timers wake late, and the tools that
// measure (the lab's watch, a load generator's lateness) then call the
// run inconclusive. Outside CI such a test skips, saying why; in CI
// (CI=true), which must show that every claim was checked, it fails. To
// make a conclusive run likely, a timing test holds the lock exclusively
// (so that no CPU-heavy test package runs beside it), and when a burst of
// other work spoiled a run it waits for the machine to be quiet (Quiet)
// and measures again, up to Tries runs in all (Conclusive).

// Tries is how many times a timing test measures before it calls itself
// inconclusive: a run spoiled by a burst of other work (the go command
// compiling the next test binary, another program) is measured again, at
// most twice more, each time at a longer tick where the test has one.
const Tries = 3

// CI reports whether the tests run in CI (CI=true), where no test of a
// claim may skip.
func CI() bool { return os.Getenv("CI") == "true" }

// Inconclusive ends t, whose last try measured the machine rather than
// what it tests: it skips, saying why, outside CI; under CI=true, where
// no test of a claim may skip, it fails with the same words.
func Inconclusive(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if CI() {
		t.Fatalf("inconclusive after %d tries, and CI=true takes no skip of a claim: %s", Tries, msg)
	}
	t.Skipf("inconclusive: %s", msg)
}

// The machine is quiet when the other processes keep less than
// QuietShare of its cores busy over a sample of QuietSample. Quiet waits
// at most QuietWait for it each time, and MaxQuietWait in all in one test
// process, so that a machine busy for good (a shared one) costs a test
// binary a minute, not one per test: its tests then measure anyway, and
// may be inconclusive.
const (
	QuietShare   = 0.25
	QuietSample  = 500 * time.Millisecond
	QuietWait    = 20 * time.Second
	MaxQuietWait = time.Minute
)

var (
	waitMu sync.Mutex
	waited time.Duration
)

// Quiet waits until the machine is quiet, or for as long as it may, and
// logs what it waited for. It returns the share of the cores the other
// processes kept busy in its last sample (0 where the system does not
// say: it then waits for nothing).
func Quiet(t testing.TB) float64 {
	t.Helper()
	waitMu.Lock()
	defer waitMu.Unlock()
	start := time.Now()
	for {
		share, ok := othersBusy(QuietSample)
		d := time.Since(start)
		if !ok || share < QuietShare {
			waited += d
			if d > time.Second {
				t.Logf("testlock: waited %v for the machine to be quiet (other processes keep %.0f%% of its cores busy)", d.Round(time.Second), 100*share)
			}
			return share
		}
		if d >= QuietWait || waited+d >= MaxQuietWait {
			waited += d
			t.Logf("testlock: the machine is busy (other processes keep %.0f%% of its cores busy); measuring anyway after %v", 100*share, d.Round(time.Second))
			return share
		}
	}
}

// Conclusive runs a timing test's run until it returns "" (the run
// measured what it tests), at most Tries times, each run after the first
// once the machine is quiet (Quiet: the first costs nothing on a quiet
// machine, and a burst of other work that spoiled it waits); it logs why
// each other run was inconclusive, and after the last ends t
// (Inconclusive: a skip, and a failure under CI=true). try counts from 1,
// for a run that needs fresh state each time.
func Conclusive(t testing.TB, run func(try int) (inconclusive string)) {
	t.Helper()
	for try := 1; ; try++ {
		if try > 1 {
			Quiet(t)
		}
		why := run(try)
		if why == "" {
			return
		}
		if try == Tries {
			Inconclusive(t, "%s", why)
		}
		t.Logf("try %d of %d: inconclusive: %s; measuring again", try, Tries, why)
	}
}

// Timed runs a timing test's run, which returns the test's checks, and
// makes the checks only when this process's timers kept time while it
// ran: a timer that should wake every 5 ms never woke more than slack
// late. A run the machine stalled longer (it measured the machine, not
// what it tests) runs again, up to Tries times, after waiting for the
// machine to be quiet; then the test is inconclusive. slack is the
// test's own tolerance: a stall shorter than it cannot turn its checks.
func Timed(t testing.TB, slack time.Duration, run func() (check func())) {
	t.Helper()
	Conclusive(t, func(int) string {
		stop := watch()
		check := run()
		if late := stop(); late > slack {
			return fmt.Sprintf("this process's timers woke up to %v late, past the test's slack of %v", late.Round(time.Millisecond), slack)
		}
		check()
		return ""
	})
}

// watch is lateness; a test replaces it to stall a run on cue.
var watch = lateness

// lateness starts a timer that wakes every 5 ms, and returns a function
// that stops it and says how late it woke at worst.
func lateness() (stop func() time.Duration) {
	const period = 5 * time.Millisecond
	done, worst, started := make(chan struct{}), make(chan time.Duration, 1), make(chan struct{})
	go func() {
		close(started) // a stall from here on is seen
		var w time.Duration
		for next := time.Now().Add(period); ; next = next.Add(period) {
			select {
			case <-done:
				worst <- w
				return
			case <-time.After(time.Until(next)):
			}
			w = max(w, time.Since(next))
			if now := time.Now(); next.Before(now) {
				next = now // a stall is counted once, not again for each period it covered
			}
		}
	}()
	<-started
	return func() time.Duration {
		close(done)
		return <-worst
	}
}
