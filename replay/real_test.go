package replay_test

import (
	"context"
	"flag"
	"io"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/retrystorm/retrystorm/calibrate"
	"github.com/retrystorm/retrystorm/internal/promtest"
	"github.com/retrystorm/retrystorm/internal/testlock"
	"github.com/retrystorm/retrystorm/lab"
	"github.com/retrystorm/retrystorm/replay"
	"github.com/retrystorm/retrystorm/scenario"
	"github.com/retrystorm/retrystorm/sim"
)

var capture = flag.Bool("capture", false, "TestRealPrometheus and TestRealPrometheusLayers: save the window each read as testdata/storm.json and testdata/chain.json")

// stormYAML is a storm the naive fleet does not survive: 70 intents/s on
// 8 workers serving 100/s (80ms each), the capacity dipping to 30/s for
// 5 s from 14 s (Prometheus's discovery takes about 5 s to scrape the
// lab's servers once they are up, and replay calibrates the origin from
// the steps before the dip); the backlog then outlasts the 1 s timeout, every answer is late,
// and three retries an intent keep the queue full after the dip.
const stormYAML = `
name: storm
duration: 34s
tick: 1s
traffic: {rate: 70, arrivals: constant, clients: 4}
origin: {model: queue, capacity: 100, workers: 8}
triggers:
  - {kind: capacity, at: 14s, for: 5s, capacity: 30}
fleets:
  - name: naive
    timeout: 1s
    retry: {max_retries: 3, backoff: {use: exponential, base: 25ms, cap: 250ms, jitter: full}}
    budget: {use: none}
`

// realTimeParallel: the tests that play a storm in real time against real
// servers (the lab's fleets, HAProxy, Prometheus; about 4 minutes one
// after another) run in parallel with each other, all four at once
// (TestMain), and take no test lock
// (internal/testlock): each keeps a sixth of a core busy and waits on its
// ticks the rest of the time, and their ticks (500 ms, 1 s) leave room for
// a busy machine. With two busy loops keeping both cores busy beside them,
// every one was conclusive at its first try, two at a time (154 s for the
// package; 142 s on a quiet machine) and four (116 s; 104 s quiet), and
// the lab's package, run beside this one, passed with no run measured
// again. Each still watches its machine and measures again
// when a run was spoiled (testlock.Conclusive), and fails in CI when it
// stays spoiled.

// parallelUnlessCapturing marks t parallel (realTimeParallel), except with
// -capture, when the tests write the windows (testdata) that
// TestCounterfactualsInTheLab reads.
func parallelUnlessCapturing(t *testing.T) {
	if !*capture {
		t.Parallel()
	}
}

// TestRealPrometheus runs the storm through the lab's own origin and
// gateway, scraped every second by a real Prometheus on 127.0.0.1, then
// replays the window from Prometheus's HTTP API: the window's verdict
// and the replay's (recovered or never) must agree with what the lab
// measured, and the inferred trigger must be the dip.
func TestRealPrometheus(t *testing.T) {
	parallelUnlessCapturing(t) // see realTimeParallel
	bin := promtest.Bin(t, "the real-Prometheus replay test takes about 45 s")
	sc, err := scenario.Parse("storm.yaml", []byte(stormYAML))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 240*time.Second) // up to testlock.Tries runs of 40 s
	defer cancel()
	promURL, targets := promtest.StartDiscovering(t, ctx, bin)

	// The scenario's fleet alone (FleetsOnly): the window and the scrape
	// are its run's. A run the lab says measured its machine is run
	// again, with new targets for Prometheus and a window of its own.
	var (
		begin time.Time
		res   *lab.Result
	)
	testlock.Conclusive(t, func(int) string {
		begin = time.Time{}
		m, err := lab.Measure(ctx, sc, lab.ExperimentOptions{Tick: time.Second, Log: io.Discard, FleetsOnly: true, Ready: func(_ string, o, g *url.URL) {
			if !begin.IsZero() {
				return
			}
			_ = promtest.WriteTargets(targets, o.Host, g.Host) // a failure shows as no scrape
			begin = time.Now()
		}})
		if err != nil {
			t.Fatal(err)
		}
		res = m.Result
		if in := res.Lab.Inconclusive; in != nil {
			return "the lab measured its machine, not the storm: " + strings.Join(in.Reasons, "; ")
		}
		return ""
	})
	labSum := res.Fleets[0].Summary // the scenario's own fleet, run first
	t.Logf("lab: recovered %v, recovery ticks %v, intents lost %d", labSum.Recovered, labSum.RecoveryTicks, labSum.IntentsLost)
	time.Sleep(2500 * time.Millisecond) // the last scrapes
	from, to := begin.Truncate(time.Second), begin.Add(sc.Duration+time.Second).Truncate(time.Second)

	w, err := calibrate.Fetch(ctx, calibrate.Live{URL: promURL, Start: from, End: to, Step: time.Second, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if *capture {
		saveWindow(t, ctx, promURL, from, to, "lab", "testdata/storm.json")
	}
	r, err := replay.Replay(ctx, w, replay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s", r.Conclusion)
	if !r.Incident || r.Trigger.Kind != scenario.TriggerCapacity {
		t.Fatalf("inferred %+v, want the capacity dip", r.Trigger)
	}
	// The lab's first tick starts lead (100ms) after Ready.
	if off := r.Trigger.Time.Sub(begin.Add(14 * time.Second)); off < -2*time.Second || off > 2*time.Second || r.Trigger.Size > 45 || r.Trigger.Size < 20 || r.Trigger.For < 3 || r.Trigger.For > 8 {
		t.Errorf("the dip inferred at %s (%s off) to %.4g/s for %gs: want 14s in, 30/s, 5s", r.Trigger.Time, off, r.Trigger.Size, r.Trigger.For)
	}
	if r.Verdict.Recovered != labSum.Recovered {
		t.Errorf("the window's verdict %s, the lab's recovered %v", r.Verdict, labSum.Recovered)
	}
	if r.AsIs.Verdict.Recovered != labSum.Recovered {
		t.Errorf("the replay's verdict %s, the lab's recovered %v", r.AsIs.Verdict, labSum.Recovered)
	}
	if !r.Agrees {
		t.Errorf("the replay does not agree with the window: %s", r.Conclusion)
	}
}

// saveWindow saves, as one query_range answer, the raw series replay
// reads of source's metrics: how testdata/storm.json (go test ./replay
// -run 'TestRealPrometheus$' -capture) and testdata/chain.json (-run
// TestRealPrometheusLayers -capture) were made.
func saveWindow(t *testing.T, ctx context.Context, u string, from, to time.Time, source, file string) {
	client, err := api.NewClient(api.Config{Address: u})
	if err != nil {
		t.Fatal(err)
	}
	src, err := calibrate.SourceNamed(source)
	if err != nil {
		t.Fatal(err)
	}
	var all model.Matrix
	for _, m := range src.Metrics() {
		v, _, _, err := v1.NewAPI(client).QueryRange(ctx, m, v1.Range{Start: from, End: to, Step: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, v.(model.Matrix)...)
	}
	promtest.WriteAnswer(t, file, all)
}

// TestCounterfactualsInTheLab plays the replay of the captured storm in
// the lab, over real HTTP: as it was, and each counterfactual the replay
// ran (the retry budget, the breaker, the throttle, advise's pick, and an
// origin that drops expired requests). Each must end in the lab as the
// replay predicts: both never recover, or both recover within ±20% of the
// lab's recovery or a tick (replay.Agree), the target; the intents
// lost are logged beside the replay's. It needs no Prometheus, only the
// lab: two runs of half-second ticks (the fleets, then the origin that
// drops expired requests), about 95 s here, each fleet after the lab's
// own settling. Skipped with -short, and when the lab says it measured its
// machine rather than the storm.
func TestCounterfactualsInTheLab(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the lab runs seven fleets for about 95 s")
	}
	parallelUnlessCapturing(t) // see realTimeParallel
	w, err := calibrate.ReadAnswers([]string{"testdata/storm.json"}, calibrate.Selector{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 480*time.Second) // up to testlock.Tries runs of each
	defer cancel()
	r, err := replay.Replay(ctx, w, replay.Options{Advise: true})
	if err != nil {
		t.Fatal(err)
	}
	if r.AdviseNote != "" {
		t.Fatalf("advise's pick was not replayed: %s", r.AdviseNote)
	}
	const dropName = "drop expired"
	predicted := map[string]*replay.Run{"as-is": r.AsIs}
	fleets := *r.Scenario
	fleets.Fleets = []scenario.Fleet{r.AsIs.Fleet}
	fleets.Fleets[0].Name = "as-is"
	for _, o := range r.Others {
		predicted[o.Name] = o
		if o.Name == dropName {
			continue // the origin's change, not a fleet's: played below
		}
		f := o.Fleet
		f.Name = o.Name
		fleets.Fleets = append(fleets.Fleets, f)
	}
	if _, ok := predicted[dropName]; !ok {
		t.Fatalf("the replay ran no %q counterfactual", dropName)
	}
	drop := *r.Scenario
	drop.Origin.DropExpired = true
	drop.Fleets = []scenario.Fleet{r.AsIs.Fleet}
	drop.Fleets[0].Name = dropName

	tick := r.Scenario.Tick.Seconds()
	measured := map[string]sim.Summary{}
	wall := map[string]float64{} // seconds
	for _, s := range []*scenario.Scenario{&fleets, &drop} {
		var m *lab.Measurement
		testlock.Conclusive(t, func(int) string {
			var err error
			if m, err = lab.Measure(ctx, s, lab.ExperimentOptions{Tick: 500 * time.Millisecond, Log: io.Discard, FleetsOnly: true}); err != nil {
				t.Fatal(err)
			}
			if in := m.Result.Lab.Inconclusive; in != nil {
				return "the lab measured its machine: " + strings.Join(in.Reasons, "; ")
			}
			return ""
		})
		for i, f := range m.Result.Fleets {
			if _, ok := predicted[f.Name]; ok { // not Measure's own counterfactual (deadline shedding), which replay does not predict
				measured[f.Name] = f.Summary
				wall[f.Name] = m.Result.Lab.Fleets[i].WallSeconds
			}
		}
	}
	var names []string
	for _, o := range append([]*replay.Run{r.AsIs}, r.Others...) {
		names = append(names, o.Name)
	}
	t.Logf("%-13s %-10s %-10s %9s %9s %6s", "replay", "lab", "replayed", "lab lost", "replayed", "wall")
	for _, name := range names {
		p := predicted[name]
		s, ok := measured[name]
		if !ok {
			t.Errorf("%s: the lab did not play it", name)
			continue
		}
		got := replay.Verdict{Recovered: s.Recovered}
		if k := s.RecoveryTicks; s.Recovered && k != nil {
			sec := float64(*k) * tick
			got.Seconds = &sec
		}
		t.Logf("%-13s %-10s %-10s %9d %9d %5.1fs", name, got, p.Verdict, s.IntentsLost, p.IntentsLost, wall[name])
		if !replay.Agree(got, p.Verdict, tick) {
			t.Errorf("%s: the lab recovered %s, the replay predicted %s (want both never, or within ±20%% or a tick of the lab's)", name, got, p.Verdict)
		}
	}
}
