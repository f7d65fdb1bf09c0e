package replay_test

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/retrystorm/retrystorm/calibrate"
	"github.com/retrystorm/retrystorm/internal/promtest"
	"github.com/retrystorm/retrystorm/replay"
	"github.com/retrystorm/retrystorm/scenario"
)

// withGap is the window of file with the times of samples [from, to) of
// its first series left out of every series whose metric only keeps (nil:
// all): what Prometheus answers for the scrapes a target failed (it marks
// their series stale, and a range query then has no point there).
func withGap(t *testing.T, file string, from, to int, only func(metric string) bool) *calibrate.Window {
	t.Helper()
	a := promtest.ReadAnswer(t, file)
	gone := map[float64]bool{}
	for _, p := range a.Data.Result[0].Values[from:to] {
		gone[p[0].(float64)] = true
	}
	a = a.Edited(func(s promtest.AnswerSeries) promtest.AnswerSeries {
		if only == nil || only(s.Metric["__name__"]) {
			s.Values = slices.DeleteFunc(s.Values, func(p [2]any) bool { return gone[p[0].(float64)] })
		}
		return s
	})
	return readWindow(t, a.Write(t, filepath.Join(t.TempDir(), "gap.json")))
}

// TestScrapeGaps: steps without samples are unknown, never a rate nor an
// incident (issue 37). Dropping samples 60-65 of calibrate's steady
// HAProxy window made "a load spike to 1060 intents/s, high confidence"
// (the counters' increase over the gap taken as one step's), a 20-step
// gap 21 times the base rate, and a gap in the lab's storm "a blackhole
// outage". Each window says how much of it is missing, and a trigger next
// to a gap is less sure.
func TestScrapeGaps(t *testing.T) {
	answers := func(metric string) bool { return strings.HasPrefix(metric, "retrystorm_origin_request") }
	for _, c := range []struct {
		name     string
		file     string
		from, to int
		only     func(metric string) bool
		unknown  int // steps without a value: the gap, and the step after it
		check    func(t *testing.T, r *replay.Result)
	}{
		{"steady, samples 60-65", "../calibrate/testdata/haproxy.json", 60, 66, nil, 7, func(t *testing.T, r *replay.Result) {
			if r.Incident {
				t.Errorf("incident %s: want none", r.Trigger.Describe())
			}
		}},
		{"steady, 20 steps", "../calibrate/testdata/haproxy.json", 60, 80, nil, 21, func(t *testing.T, r *replay.Result) {
			if r.Incident {
				t.Errorf("incident %s: want none", r.Trigger.Describe())
			}
		}},
		{"the storm, in the dip", "testdata/storm.json", 11, 13, nil, 3, func(t *testing.T, r *replay.Result) {
			if !r.Incident || r.Trigger.Kind != scenario.TriggerCapacity {
				t.Fatalf("trigger %+v: want the capacity dip, not an outage", r.Trigger)
			}
			if r.Trigger.Confidence == "high" || !strings.Contains(r.Trigger.How, "have no value") {
				t.Errorf("confidence %s (%s): want it lowered for the gap", r.Trigger.Confidence, r.Trigger.How)
			}
			if r.Verdict.Recovered {
				t.Errorf("the window's verdict %s: the lab's storm never recovered", r.Verdict)
			}
		}},
		// The origin's answers (its latency histogram and its requests
		// by result) missing as the dip begins, its attempts not: "no
		// answers while attempts arrived", an outage, before.
		{"the storm, the answers' series", "testdata/storm.json", 8, 10, answers, 3, func(t *testing.T, r *replay.Result) {
			if !r.Incident || r.Trigger.Kind != scenario.TriggerCapacity {
				t.Fatalf("trigger %+v: want the capacity dip, not an outage", r.Trigger)
			}
			if r.Trigger.Confidence == "high" {
				t.Errorf("confidence %s (%s): want it lowered for the gap", r.Trigger.Confidence, r.Trigger.How)
			}
		}},
		{"the storm, after the dip", "testdata/storm.json", 18, 21, nil, 4, func(t *testing.T, r *replay.Result) {
			if !r.Incident || r.Trigger.Kind != scenario.TriggerCapacity {
				t.Fatalf("trigger %+v: want the capacity dip", r.Trigger)
			}
			if r.Verdict.Recovered {
				t.Errorf("the window's verdict %s: the lab's storm never recovered", r.Verdict)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, err := replay.Replay(context.Background(), withGap(t, c.file, c.from, c.to, c.only), replay.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if r.Measured.Unknown != c.unknown {
				t.Errorf("%d steps without a value, want %d", r.Measured.Unknown, c.unknown)
			}
			said := r.Message + strings.Join(r.Notes, " ")
			if !strings.Contains(said, "have no value") {
				t.Errorf("nothing says how much of the window is missing: %q", said)
			}
			c.check(t, r)
		})
	}
}
