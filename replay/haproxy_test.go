package replay_test

import (
	"context"
	"io"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/calibrate"
	"github.com/retrystorm/retrystorm/internal/promtest"
	"github.com/retrystorm/retrystorm/internal/servertest"
	"github.com/retrystorm/retrystorm/internal/testlock"
	"github.com/retrystorm/retrystorm/lab"
	"github.com/retrystorm/retrystorm/replay"
	"github.com/retrystorm/retrystorm/scenario"
)

// TestRealHAProxyStorm runs the lab's storm (both fleets, one minute of
// it each) against HAProxy as docs/lab.md sets it up, scaled to a tick of
// 500 ms so that a shared machine keeps its schedule: a Lua service of 12
// slots of 50 ms behind it (240 requests/s, the storm's 120 a tick), a
// queue timeout of 5 s (ten ticks, as docs/lab.md's 2 s at 200 ms);
// scraped every second through HAProxy's own exporter by a real
// Prometheus. It replays the window from HAProxy's metrics alone, as
// checkHAProxyStorm judges it. With -capture it saves the window as
// testdata/haproxy-storm.json, which TestHAProxyStormWindow replays on
// every run. About 75 s.
func TestRealHAProxyStorm(t *testing.T) {
	parallelUnlessCapturing(t) // see realTimeParallel
	prom := promtest.Bin(t, "the real-HAProxy storm takes about 60 s")
	hap := servertest.Need(t, "haproxy", "haproxy")
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Second) // up to testlock.Tries runs of 75 s
	defer cancel()
	const tick = 500 * time.Millisecond
	front, stats := servertest.StartHAProxy(t, ctx, servertest.HAProxy{Bin: hap, Service: tick / 10, Maxconn: 12, Queue: 10 * tick, Exporter: true})
	promURL := promtest.Start(t, ctx, prom, promtest.Static(stats))
	sc, err := scenario.Load("../experiment/scenarios/storm.yaml")
	if err != nil {
		t.Fatal(err)
	}
	sc.Duration = time.Minute // the dip from 30s to 40s, and 20 ticks after
	u, err := url.Parse("http://" + front + "/")
	if err != nil {
		t.Fatal(err)
	}
	// A run the lab says measured its machine is run again (HAProxy's
	// queue drains in the 3 s at rest before each), with a window of its
	// own; -capture saves the conclusive run's.
	var (
		m        *lab.Measurement
		from, to time.Time
	)
	testlock.Conclusive(t, func(int) string {
		time.Sleep(3 * time.Second) // Prometheus's first scrapes, at rest
		begin := time.Now()
		var err error
		m, err = lab.Measure(ctx, sc, lab.ExperimentOptions{Tick: tick, Log: io.Discard, FleetsOnly: true,
			Target: &lab.Target{URL: u, Log: io.Discard}})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(2500 * time.Millisecond) // the last scrapes
		from, to = begin.Add(-2*time.Second).Truncate(time.Second), time.Now().Add(-time.Second).Truncate(time.Second)
		for i, f := range m.Result.Fleets {
			t.Logf("lab: %s recovered %v, %d intents lost, wall %.1fs", f.Name, f.Summary.Recovered, f.Summary.IntentsLost, m.Result.Lab.Fleets[i].WallSeconds)
		}
		if in := m.Result.Lab.Inconclusive; in != nil {
			return "the lab measured its machine, not the storm: " + strings.Join(in.Reasons, "; ")
		}
		return ""
	})
	if *capture {
		saveWindow(t, ctx, promURL, from, to, "haproxy", "testdata/haproxy-storm.json")
	}
	if s := m.Result.Fleets; len(s) != 2 || s[0].Summary.Recovered || !s[1].Summary.Recovered {
		t.Fatalf("the lab's storm: want the naive fleet collapsed and the guarded one recovered, got %+v", s)
	}
	sel, _ := calibrate.ParseSelector(`{proxy="origin"}`)
	src, _ := calibrate.SourceNamed("haproxy")
	w, err := calibrate.Fetch(ctx, calibrate.Live{URL: promURL, Start: from, End: to, Step: time.Second, Selector: sel, Source: src, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	checkHAProxyStorm(t, w)
}

// TestHAProxyStormWindow replays testdata/haproxy-storm.json, HAProxy's
// metrics of the lab's storm (TestRealHAProxyStorm -capture), as
// checkHAProxyStorm judges it.
func TestHAProxyStormWindow(t *testing.T) {
	sel, _ := calibrate.ParseSelector(`{proxy="origin"}`)
	w, err := calibrate.ReadAnswers([]string{"testdata/haproxy-storm.json"}, sel)
	if err != nil {
		t.Fatal(err)
	}
	checkHAProxyStorm(t, w)
}

// checkHAProxyStorm replays HAProxy's metrics of the lab's storm, whose
// naive fleet (3 retries, no budget) collapsed when a third of the
// capacity went for ten ticks, in front of HAProxy (the lab's fault proxy), and
// whose guarded fleet (a budget and a breaker) recovered (issue 37). HAProxy
// counts its clients' retries as requests: the retries after the dip are
// not a load spike of that many intents, the intents after the onset are
// taken as the rate before it, the client instances (which HAProxy does
// not show) are said to be a default, and a change (a budget or a
// breaker, as the guarded fleet had) prevents the incident in the replay.
func checkHAProxyStorm(t *testing.T, w *calibrate.Window) {
	t.Helper()
	src, _ := calibrate.SourceNamed("haproxy")
	r, err := replay.Replay(context.Background(), w, replay.Options{Source: src})
	if err != nil {
		t.Fatal(err)
	}
	t.Log(r.Conclusion)
	if !r.Incident {
		t.Fatalf("no incident: %s", r.Message)
	}
	base := r.Calibration.Rate
	if r.Trigger.Kind == scenario.TriggerLoad && r.Trigger.Confidence == "high" {
		t.Errorf("a load spike to %.4g intents/s, high confidence: HAProxy cannot tell retries from intents", r.Trigger.Size)
	}
	if r.Measured.Replayed == nil {
		t.Fatal("the replay runs HAProxy's requests as intents, retries and all")
	}
	for i := r.Measured.ReplayedFrom; i < len(r.Measured.Replayed); i++ {
		if r.Measured.Replayed[i] != base {
			t.Fatalf("step %d replays %.4g intents/s, not the base rate %.4g", i, r.Measured.Replayed[i], base)
		}
	}
	o := r.Outcome()
	row := o.Section.Tables[0].Rows[4][1]
	if strings.Contains(row, "1 clients") || !strings.Contains(row, "default") {
		t.Errorf("traffic row %q: want the client instances said to be a default", row)
	}
	if r.Prevents == "" {
		t.Errorf("no change prevents it, where the lab's guarded fleet recovered: %s", r.Conclusion)
	}
}
