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
	stopper()
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
// stalled past the slack is run again, Tries times in all, and then the
// test is inconclusive: a skip here, outside CI. The stall is told, not
// caused: a throttled process's stops come when the throttler's own
// timers let them, which a loaded CI machine delays past a short run
// (TestLatenessSeesAStop checks that a real stop is seen).
func TestTimed(t *testing.T) {
	t.Setenv("CI", "")
	noWait(t)
	runs, checks := 0, 0
	run := func() func() {
		runs++
		return func() { checks++ }
	}
	for _, c := range []struct {
		late         time.Duration
		runs, checks int
		how, msg     string
	}{
		{late: 5 * time.Millisecond, runs: 1, checks: 1},
		{late: 44 * time.Millisecond, runs: Tries, how: "skip", msg: "woke up to 44ms late, past the test's slack of 5ms"},
	} {
		stalled(t, c.late)
		runs, checks = 0, 0
		how, msg := servertest.Ended(t, func(tb testing.TB) { Timed(tb, 5*time.Millisecond, run) })
		if runs != c.runs || checks != c.checks || how != c.how || !strings.Contains(msg, c.msg) {
			t.Errorf("%v late: %d runs, %d checks, then %s %q; want %d runs, %d checks, %s %q", c.late, runs, checks, how, msg, c.runs, c.checks, c.how, c.msg)
		}
	}
}

// stalled makes every run of Timed during t report its timers late by d.
func stalled(t *testing.T, d time.Duration) {
	old := watch
	watch = func() func() time.Duration { return func() time.Duration { return d } }
	t.Cleanup(func() { watch = old })
}

// TestLatenessSeesAStop: a process stopped for 50 ms (SIGSTOP, then
// SIGCONT from a child) finds its timers that late; one left alone
// finds them on time within a scheduler's slack.
func TestLatenessSeesAStop(t *testing.T) {
	stop := lateness()
	time.Sleep(50 * time.Millisecond)
	if late := stop(); late > time.Second {
		t.Errorf("left alone, timers woke %v late", late)
	}
	if !canStop() {
		t.Skip("no SIGSTOP here: the stop cannot be made")
	}
	stop = lateness()
	stopMe(t, 50*time.Millisecond)
	if late := stop(); late < 30*time.Millisecond {
		t.Errorf("stopped for 50ms, timers woke at worst %v late; want at least 30ms", late)
	}
}
