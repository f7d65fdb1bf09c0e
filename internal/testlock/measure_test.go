package testlock

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/internal/cpuhog"
	"github.com/retrystorm/retrystorm/internal/servertest"
)

func TestMain(m *testing.M) {
	cpuhog.Main()
	os.Exit(m.Run())
}

// TestInconclusive: a measurement the machine spoiled skips outside CI
// and fails under CI=true, saying why either way.
func TestInconclusive(t *testing.T) {
	for _, c := range []struct{ ci, want string }{{"", "skip"}, {"false", "skip"}, {"true", "fail"}} {
		t.Setenv("CI", c.ci)
		how, msg := servertest.Ended(t, func(tb testing.TB) { Inconclusive(tb, "late by %d ms", 90) })
		if how != c.want || !strings.Contains(msg, "late by 90 ms") {
			t.Errorf("CI=%q: %s %q, want a %s that says why", c.ci, how, msg, c.want)
		}
	}
}

// TestConclusive: an inconclusive run is measured again, with the try's
// number, until one is conclusive; after Tries it ends the test, saying
// why (a skip outside CI).
func TestConclusive(t *testing.T) {
	t.Setenv("CI", "")
	noWait(t)
	var tries []int
	Conclusive(t, func(try int) string {
		if tries = append(tries, try); try < 2 {
			return "spoiled"
		}
		return ""
	})
	if fmt.Sprint(tries) != "[1 2]" {
		t.Errorf("tries %v, want [1 2]", tries)
	}
	tries = nil
	how, msg := servertest.Ended(t, func(tb testing.TB) {
		Conclusive(tb, func(try int) string {
			tries = append(tries, try)
			return fmt.Sprintf("spoiled %d", try)
		})
	})
	if len(tries) != Tries || how != "skip" || !strings.Contains(msg, fmt.Sprintf("spoiled %d", Tries)) {
		t.Errorf("always spoiled: tries %v, then %s %q; want %d tries and a skip that gives the last reason", tries, how, msg, Tries)
	}
}

// noWait makes Quiet wait for nothing during t (its budget is spent): it
// is tested by TestOthersBusy, and these tests must not wait for a busy
// machine.
func noWait(t *testing.T) {
	waitMu.Lock()
	old := waited
	waited = MaxQuietWait
	waitMu.Unlock()
	t.Cleanup(func() {
		waitMu.Lock()
		waited = old
		waitMu.Unlock()
	})
}

// TestOthersBusy: busy loops in another process, twice as many as the
// cores, keep the machine past quiet, as othersBusy sees it.
func TestOthersBusy(t *testing.T) {
	if _, ok := othersBusy(QuietSample); !ok {
		t.Skip("this system does not say how busy it is: Quiet waits for nothing here")
	}
	cpuhog.Start(t)
	share, ok := othersBusy(QuietSample)
	if !ok || share < 0.5 {
		t.Errorf("beside busy loops on every core, others keep %.0f%% of the cores busy (ok %v); want most", 100*share, ok)
	}
}

// TestTimed: checks are made after a run whose timers kept time; a run
// stalled past the slack (a process that stops this one for 30 ms of
// every 100) is run again, Tries times in all, and then the test is
// inconclusive: a skip here, outside CI.
func TestTimed(t *testing.T) {
	t.Setenv("CI", "")
	noWait(t) // nor for the hog's below
	runs, checks := 0, 0
	run := func() func() {
		runs++
		time.Sleep(200 * time.Millisecond)
		return func() { checks++ }
	}
	Timed(t, time.Second, run)
	if runs != 1 || checks != 1 {
		t.Fatalf("on time: %d runs, %d checks; want 1, 1", runs, checks)
	}
	if !canStop() {
		return
	}
	cpuhog.Start(t)
	runs, checks = 0, 0
	how, msg := servertest.Ended(t, func(tb testing.TB) { Timed(tb, 5*time.Millisecond, run) })
	if runs != Tries || checks != 0 || how != "skip" || !strings.Contains(msg, "past the test's slack of 5ms") {
		t.Errorf("stalled: %d runs, %d checks, then %s %q; want %d runs, no check, and a skip that says why", runs, checks, how, msg, Tries)
	}
}
