package replay_test

import (
	"context"
	"encoding/json"
	"io"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/calibrate"
	"github.com/retrystorm/retrystorm/internal/promtest"
	"github.com/retrystorm/retrystorm/internal/testlock"
	"github.com/retrystorm/retrystorm/lab"
	"github.com/retrystorm/retrystorm/replay"
	"github.com/retrystorm/retrystorm/scenario"
)

// chainYAML is a storm through a chain of two tiers, edge then api,
// where only the inner one retries: the users send each intent once, edge
// calls api once, and api retries three times on a 1 s timeout. The
// origin (85 intents/s on 8 workers serving 100/s) goes dark for 4 s
// from 14 s (Prometheus's discovery takes about 5 s to scrape the lab's
// servers once they are up, and replay calibrates from the steps before
// the trigger); api's attempts all time out meanwhile, four an intent,
// and when the origin is back they fill its queue faster than it drains:
// every answer is late and the loop, in api, never ends. Timeouts nest
// (api's four attempts end within edge's 6 s), so edge and the users see
// api's failures, not their own timeouts.
//
// An outage, not stormYAML's capacity dip: resil's metrics are the
// callers', whose answers are those that came within the timeout. After
// the dip the backlog lets none come in time, before the loop takes over
// as after it, so the window shows no end to the trigger (an outage to
// its end, the loop not read); the origin back from an outage answers in
// time for a second, until its queue fills, and that ends the trigger.
//
// The origin sheds by deadline, which changes nothing here (no tier
// propagates a deadline, so no request carries one) but spares Measure
// its deadline-shedding counterfactual, a second run of the scenario.
const chainYAML = `
name: chain storm
duration: 30s
tick: 1s
traffic: {rate: 85, arrivals: constant, clients: 4}
origin: {model: queue, capacity: 100, workers: 8, shed: {deadline: true}}
tiers:
  - name: edge
    server: {model: concurrency, base: 1ms}
    client: {timeout: 6s, retry: {max_retries: 0}, budget: {use: none}}
  - name: api
    server: {model: concurrency, base: 1ms}
    client: {timeout: 1s, retry: {max_retries: 3, backoff: {use: exponential, base: 25ms, cap: 250ms, jitter: full}}, budget: {use: none}}
triggers:
  - {kind: outage, at: 14s, for: 4s, mode: blackhole}
fleets:
  - name: users
    timeout: 8s
    retry: {max_retries: 0}
    budget: {use: none}
`

// TestRealPrometheusLayers runs chainYAML in the lab, every server (the
// origin, the two tiers, the gateway) scraped by a real Prometheus, and
// replays the window with resil's metrics (--source resil): each tier's
// Guard is named after the tier and the gateway's after the fleet
// (users-NN), so the layers must be the chain's three hops, the loop
// must be named in api, and the replay's verdict must be the lab's.
func TestRealPrometheusLayers(t *testing.T) {
	parallelUnlessCapturing(t) // see realTimeParallel
	bin := promtest.Bin(t, "the real-Prometheus layers test takes about 40 s")
	sc, err := scenario.Parse("chain.yaml", []byte(chainYAML))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 240*time.Second) // up to testlock.Tries runs
	defer cancel()
	promURL, targets := promtest.StartDiscovering(t, ctx, bin)

	// Ready and ReadyTiers are called one after the other, before the
	// first tick; the targets are written once both have been.
	var (
		mu    sync.Mutex
		begin time.Time
		hosts []string
		tiers bool
	)
	publish := func() {
		if !tiers || len(hosts) < 2 {
			return
		}
		_ = promtest.WriteTargets(targets, hosts...) // a failure shows as no scrape
	}
	// A run the lab says measured its machine is run again, with new
	// targets and a window of its own.
	var res *lab.Result
	testlock.Conclusive(t, func(int) string {
		mu.Lock()
		begin, hosts, tiers = time.Time{}, nil, false
		mu.Unlock()
		m, err := lab.Measure(ctx, sc, lab.ExperimentOptions{Tick: time.Second, Log: io.Discard, FleetsOnly: true,
			Ready: func(_ string, o, g *url.URL) {
				mu.Lock()
				defer mu.Unlock()
				if begin.IsZero() {
					hosts = append(hosts, o.Host, g.Host)
					begin = time.Now()
					publish()
				}
			},
			ReadyTiers: func(_ string, us []*url.URL) {
				mu.Lock()
				defer mu.Unlock()
				if !tiers {
					for _, u := range us {
						hosts = append(hosts, u.Host)
					}
					tiers = true
					publish()
				}
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		if !tiers {
			t.Fatal("the lab named no tiers to scrape")
		}
		res = m.Result
		if in := res.Lab.Inconclusive; in != nil {
			return "the lab measured its machine, not the storm: " + strings.Join(in.Reasons, "; ")
		}
		return ""
	})
	labSum := res.Fleets[0].Summary
	t.Logf("lab: recovered %v, recovery ticks %v, intents lost %d", labSum.Recovered, labSum.RecoveryTicks, labSum.IntentsLost)
	time.Sleep(2500 * time.Millisecond) // the last scrapes
	from, to := begin.Truncate(time.Second), begin.Add(sc.Duration+time.Second).Truncate(time.Second)

	src, err := calibrate.SourceNamed("resil")
	if err != nil {
		t.Fatal(err)
	}
	w, err := calibrate.Fetch(ctx, calibrate.Live{URL: promURL, Start: from, End: to, Step: time.Second, Source: src, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if *capture {
		saveWindow(t, ctx, promURL, from, to, "resil", "testdata/chain.json")
	}
	r, err := replay.Replay(ctx, w, replay.Options{Source: src})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s", r.Conclusion)
	for _, n := range r.Notes {
		t.Logf("note: %s", n)
	}
	var layers []string
	for _, l := range r.Loops {
		t.Logf("layer %s: lives %v, sustained %v, retries %v, attempts per intent %.3g → %.3g, verdict %s: %s",
			l.Layer, l.Lives, l.Sustained, l.Retries, l.AmplificationBefore, l.AmplificationAfter, l.Verdict, l.Evidence)
		layers = append(layers, l.Layer)
	}
	// Prometheus's job is promtest's "lab"; the Guards' names are the
	// tiers' and the fleet's, users-NN read as one layer.
	if want := []string{"lab/users", "lab/edge", "lab/api"}; !slices.Equal(layers, want) {
		t.Errorf("layers %q, outermost first; want the chain's, %q", layers, want)
	}
	defer func() {
		if t.Failed() {
			if b, err := json.Marshal(r.Measured); err == nil {
				t.Logf("measured at %s: %s", r.Layer, b)
			}
		}
	}()
	if !r.Incident || r.Trigger.Kind != scenario.TriggerOutage {
		t.Fatalf("inferred %+v, want the outage", r.Trigger)
	}
	// The lab's first tick starts lead (100ms) after Ready.
	if off := r.Trigger.Time.Sub(begin.Add(14 * time.Second)); off < -2*time.Second || off > 2*time.Second || r.Trigger.For < 3 || r.Trigger.For > 6 {
		t.Errorf("the outage inferred at %s (%s off) for %gs: want 14s in, 4s", r.Trigger.Time, off, r.Trigger.For)
	}
	if r.Layer != "lab/api" {
		t.Errorf("the trigger was inferred at %q, want lab/api (the origin's callers)", r.Layer)
	}
	if r.LoopLayer != "lab/api" {
		t.Errorf("the loop lives in %q, want lab/api (the one tier that retries)", r.LoopLayer)
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
