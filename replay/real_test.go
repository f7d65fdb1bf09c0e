package replay_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/retrystorm/retrystorm/calibrate"
	"github.com/retrystorm/retrystorm/internal/promtest"
	"github.com/retrystorm/retrystorm/lab"
	"github.com/retrystorm/retrystorm/replay"
	"github.com/retrystorm/retrystorm/scenario"
)

var capture = flag.Bool("capture", false, "TestRealPrometheus: save the window it read as testdata/storm.json")

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

// TestRealPrometheus runs the storm through the lab's own origin and
// gateway, scraped every second by a real Prometheus on 127.0.0.1, then
// replays the window from Prometheus's HTTP API: the window's verdict
// and the replay's (recovered or never) must agree with what the lab
// measured, and the inferred trigger must be the dip.
func TestRealPrometheus(t *testing.T) {
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("prometheus is not on the PATH; CI must install it")
		}
		t.Skip("prometheus is not on the PATH: install it to run the real-Prometheus replay test")
	}
	if testing.Short() {
		t.Skip("-short: the real-Prometheus replay test takes about 45 s")
	}
	// The lock is TestMain's.
	sc, err := scenario.Parse("storm.yaml", []byte(stormYAML))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	dir := t.TempDir()
	targets := filepath.Join(dir, "targets.json")
	if err := os.WriteFile(targets, []byte("[]"), 0o644); err != nil {
		t.Fatal(err)
	}
	promURL := promtest.Start(t, ctx, bin, promtest.FileSD(targets))

	var begin time.Time
	// Measure runs the scenario's fleet and then, when the scenario has
	// one, its counterfactual: the window and the scrape are the first
	// run's.
	m, err := lab.Measure(ctx, sc, lab.ExperimentOptions{Tick: time.Second, Log: io.Discard, Ready: func(_ string, o, g *url.URL) {
		if !begin.IsZero() {
			return
		}
		b, _ := json.Marshal([]map[string]any{{"targets": []string{o.Host, g.Host}}})
		tmp := targets + ".tmp"
		if err := os.WriteFile(tmp, b, 0o644); err == nil {
			_ = os.Rename(tmp, targets)
		}
		begin = time.Now()
	}})
	if err != nil {
		t.Fatal(err)
	}
	res := m.Result
	if in := res.Lab.Inconclusive; in != nil {
		t.Skipf("inconclusive: the lab measured its machine, not the storm: %+v", in)
	}
	labSum := res.Fleets[0].Summary // the scenario's own fleet, run first
	t.Logf("lab: recovered %v, recovery ticks %v, intents lost %d", labSum.Recovered, labSum.RecoveryTicks, labSum.IntentsLost)
	time.Sleep(2500 * time.Millisecond) // the last scrapes
	from, to := begin.Truncate(time.Second), begin.Add(sc.Duration+time.Second).Truncate(time.Second)

	w, err := calibrate.Fetch(ctx, calibrate.Live{URL: promURL, Start: from, End: to, Step: time.Second, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if *capture {
		saveWindow(t, ctx, promURL, from, to, "testdata/storm.json")
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
// reads of the lab: how testdata/storm.json was made (go test ./replay
// -run TestRealPrometheus -capture).
func saveWindow(t *testing.T, ctx context.Context, u string, from, to time.Time, file string) {
	client, err := api.NewClient(api.Config{Address: u})
	if err != nil {
		t.Fatal(err)
	}
	src, _ := calibrate.SourceNamed("lab")
	var all model.Matrix
	for _, m := range src.Metrics() {
		v, _, _, err := v1.NewAPI(client).QueryRange(ctx, m, v1.Range{Start: from, End: to, Step: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, v.(model.Matrix)...)
	}
	b, err := json.Marshal(map[string]any{"status": "success", "data": map[string]any{"resultType": "matrix", "result": all}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestCounterfactualsInTheLab plays the replay of the captured storm in
// the lab, over real HTTP: as it was, with the breaker and with an origin
// that drops expired requests. Each must end in the lab as the replay
// predicts (recovered or never). The stretch goal; it needs no
// Prometheus, only the lab (about 90 s here: three fleets of half-second
// ticks, each after the lab's own settling).
func TestCounterfactualsInTheLab(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the lab runs three fleets for about 50 s")
	}
	// The lock is TestMain's.
	w, err := calibrate.ReadAnswers([]string{"testdata/storm.json"}, calibrate.Selector{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := replay.Replay(context.Background(), w, replay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"as-is": r.AsIs.Verdict.Recovered}
	sc := *r.Scenario
	sc.Fleets = []scenario.Fleet{r.AsIs.Fleet}
	sc.Fleets[0].Name = "as-is"
	for _, o := range r.Others {
		want[o.Name] = o.Verdict.Recovered
		if o.Name == "breaker" {
			f := o.Fleet
			f.Name = o.Name
			sc.Fleets = append(sc.Fleets, f)
		}
	}
	drop := *r.Scenario
	drop.Origin.DropExpired = true
	drop.Fleets = []scenario.Fleet{r.AsIs.Fleet}
	drop.Fleets[0].Name = "drop expired"
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	for _, s := range []*scenario.Scenario{&sc, &drop} {
		m, err := lab.Measure(ctx, s, lab.ExperimentOptions{Tick: 500 * time.Millisecond, Log: io.Discard})
		if err != nil {
			t.Fatal(err)
		}
		res := m.Result
		if in := res.Lab.Inconclusive; in != nil {
			t.Skipf("inconclusive: the lab measured its machine: %+v", in)
		}
		for _, f := range res.Fleets {
			predicted, ok := want[f.Name]
			if !ok {
				continue // Measure's own counterfactual (deadline shedding), which replay does not predict
			}
			got := f.Summary.Recovered
			ticks := "never"
			if k := f.Summary.RecoveryTicks; k != nil {
				ticks = fmt.Sprintf("after %d ticks", *k)
			}
			t.Logf("%s: the lab recovered %s, %d intents lost; the replay predicted recovered %v", f.Name, ticks, f.Summary.IntentsLost, predicted)
			if got != predicted {
				t.Errorf("%s: the lab recovered %v, the replay predicted %v", f.Name, got, predicted)
			}
		}
	}
}
