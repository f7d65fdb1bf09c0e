package lab

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/internal/testlock"
)

// The lab's timing tests judge a run only when the lab says it measured
// the service, not its machine (its watch: Result.Lab.Inconclusive). A
// run the machine spoiled is measured again (testlock.Tries runs in all),
// after waiting for the machine to be quiet, at the longer tick the lab
// suggests, at most twice the last, as retrystorm lab --auto-tick does
// (a burst of other work passes; a tick twice as long keeps the test
// short). After the last try the test is inconclusive: it skips, saying
// why, and fails under CI=true, which must show every claim checked.

// conclusive runs run at tick until the lab calls a run conclusive (nil),
// and returns that run's result and the tick it ran at; after
// testlock.Tries inconclusive runs it ends t (testlock.Conclusive).
func conclusive[R any](t *testing.T, tick time.Duration, run func(tick time.Duration) (R, *Inconclusive)) (R, time.Duration) {
	t.Helper()
	var r R
	testlock.Conclusive(t, func(int) string {
		var in *Inconclusive
		if r, in = run(tick); in == nil {
			return ""
		}
		why := fmt.Sprintf("at a %s tick, as the lab reports it: %s; %s", Short(tick), strings.Join(in.Reasons, "; "), in.Suggestion)
		if next := in.SuggestedTick(); next > tick {
			tick = min(next, 2*tick)
		}
		return why
	})
	return r, tick
}

// logWatch logs what the lab's watch saw of each fleet of res.
func logWatch(t *testing.T, res *Result) {
	t.Helper()
	for _, f := range res.Lab.Fleets {
		w := f.Watch
		t.Logf("%s: the lab's watch: load late p99 %.2f ms; timers late p99 %.2f ms, mean %.3f ms, max %.1f ms; scheduler wait p99 %.3f ms, mean %.3f ms; GC pause max %.3f ms",
			f.Name, 1000*f.Load.LateP99, 1000*w.TimerLateP99, 1000*w.TimerLateMean, 1000*w.TimerLateMax, 1000*w.SchedLatP99, 1000*w.SchedLatMean, 1000*w.GCPauseMax)
	}
}
