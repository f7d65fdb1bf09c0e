// Package testlock lets the tests that measure real time run alone.
//
// go test runs packages in parallel, each in its own process. The lab's
// tests time real servers on loopback; beside a package that keeps both
// cores busy (the experiments' claims over 21 seeds, the browser page) they
// would measure the machine, not the lab. So the lab's tests take the lock
// exclusively and the CPU-heavy packages take it shared, for the whole
// test binary: they may run together, but not beside the lab.
//
// For the lab the lock is about speed, not correctness: the lab watches
// itself (its timers' lateness, its goroutines' waits to run, its CPU), and
// a run it reports inconclusive is measured again (Conclusive, Timed: up
// to Tries runs, each after the first once the machine is quiet); after
// the last the test skips, saying why, and fails under CI=true, where no
// test of a claim may pass unmeasured (Inconclusive). So a loaded machine
// costs the timing tests runs, never a false verdict;
// TestLabStarvedFromOutside proves it with another process keeping every
// core busy. The lock makes a conclusive run likelier. The watch does not
// see all of the work of other tests in the same process, though: each
// of the lab's storms runs in a test process of its own (docs/lab.md).
//
// The lock is an advisory file lock in the temporary directory, released
// by the operating system when the test process exits, however it exits.
// Where file locks are not available it does nothing.
package testlock

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// path is the lock file every retrystorm test binary agrees on; this
// package's own test points it elsewhere.
var path = func() string { return filepath.Join(os.TempDir(), "retrystorm-tests.lock") }

// Exclusive blocks until no other test binary holds the lock, then holds
// it until the process exits.
func Exclusive() { hold(true) }

// Shared blocks while a test binary holds the lock exclusively, then holds
// it, shared with other such binaries, until the process exits.
func Shared() { hold(false) }

// Alone makes this test binary's lock exclusive for the rest of t, and
// shared again after it, when it was shared: for a test that starves its
// own lab on purpose (cpuhog) in a package that runs beside others, whose
// load would add to the starvation it controls.
func Alone(t testing.TB) {
	mu.Lock()
	wasShared := held != nil && !heldExclusive
	mu.Unlock()
	hold(true)
	if !wasShared {
		return
	}
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		if held != nil && heldExclusive && lock(held, false) == nil {
			heldExclusive = false
		}
	})
}

// RunShared is a TestMain for a CPU-heavy test package: it holds the lock
// shared, runs the tests and exits with their status.
func RunShared(m *testing.M) {
	Shared()
	os.Exit(m.Run())
}

// held keeps the lock file open, and so the lock, for the process's life;
// heldExclusive says how it is held.
var (
	mu            sync.Mutex
	held          *os.File
	heldExclusive bool
)

func hold(exclusive bool) {
	mu.Lock()
	defer mu.Unlock()
	if held != nil {
		// Held already (a test that takes the lock, run again with
		// -count): a second file would wait for the first forever. A
		// shared lock becomes exclusive on the same file.
		if exclusive && !heldExclusive {
			if err := lock(held, true); err != nil {
				fmt.Fprintf(os.Stderr, "testlock: %v (running with the lock shared)\n", err)
				return
			}
			heldExclusive = true
		}
		return
	}
	f, err := os.OpenFile(path(), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		fmt.Fprintf(os.Stderr, "testlock: %v (running without the lock)\n", err)
		return
	}
	if err := lock(f, exclusive); err != nil {
		fmt.Fprintf(os.Stderr, "testlock: %v (running without the lock)\n", err)
		f.Close()
		return
	}
	held, heldExclusive = f, exclusive
}
