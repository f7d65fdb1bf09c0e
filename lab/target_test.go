package lab

import (
	"context"
	"errors"
	"math"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/scenario"
)

// TestCheckTarget: a storm goes to this machine only, unless the caller
// says otherwise, and never with a password in the URL.
func TestCheckTarget(t *testing.T) {
	for _, c := range []struct {
		url    string
		remote bool
		ok     bool
		is     error // the error's sentinel, when one is promised
	}{
		{"http://127.0.0.1:8080/", false, true, nil},
		{"http://127.3.4.5/", false, true, nil},
		{"https://[::1]:8443/x", false, true, nil},
		{"http://LocalHost:80/", false, true, nil},
		{"http://example.com/", false, false, ErrRemoteTarget},
		{"http://10.0.0.1:8080/", false, false, ErrRemoteTarget},
		{"http://127.0.0.1.example.com/", false, false, ErrRemoteTarget},
		{"http://example.com/", true, true, nil},
		{"http://user:secret@127.0.0.1/", false, false, nil},
		{"http://user:secret@example.com/", true, false, nil},
		{"ftp://127.0.0.1/", false, false, nil},
		{"http:///path", true, false, nil},
	} {
		u, err := url.Parse(c.url)
		if err != nil {
			t.Fatal(err)
		}
		err = CheckTarget(u, c.remote)
		if (err == nil) != c.ok || (c.is != nil && !errors.Is(err, c.is)) {
			t.Errorf("CheckTarget(%s, allowRemote %v) = %v, want ok %v", c.url, c.remote, err, c.ok)
		}
	}
	if err := CheckTarget(nil, true); err == nil {
		t.Error("CheckTarget(nil) = nil")
	}
}

// TestPeakAttemptRate: the rate the lab announces before a run against a
// target is the highest fleet ceiling, λ·(1+max_retries) without a budget,
// at the highest intent rate a load trigger reaches, in wall time.
func TestPeakAttemptRate(t *testing.T) {
	sc := stormScenario(t, 1) // 100 intents/s; naive: 3 retries, no budget
	got, err := PeakAttemptRate(sc, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	// 100 × (1+3) attempts a scenario second, ten scenario seconds a
	// wall second.
	if want := 100.0 * 4 * 10; math.Abs(got-want) > 1e-9 {
		t.Errorf("storm at 100ms a tick: %g attempts/s, want %g", got, want)
	}
	sc.Triggers = append(sc.Triggers, sc.Triggers[0])
	sc.Triggers[1].Kind, sc.Triggers[1].Rate = scenario.TriggerLoad, 150
	if got, err := PeakAttemptRate(sc, time.Second); err != nil || math.Abs(got-150*4) > 1e-9 {
		t.Errorf("with a load trigger to 150/s at 1s a tick: %g attempts/s (%v), want %d", got, err, 150*4)
	}
	// A rate series counts at its highest point, scaled.
	sc.Traffic.Series = &scenario.Series{Scale: 2, Points: []scenario.Point{{At: 0, Rate: 50}, {At: time.Minute, Rate: 200}}}
	if got, err := PeakAttemptRate(sc, time.Second); err != nil || math.Abs(got-400*4) > 1e-9 {
		t.Errorf("with a series up to 200/s scaled by 2: %g attempts/s (%v), want %d", got, err, 400*4)
	}
}

// TestBoundsCountTheSeries: the lab's bounds on the tick read a rate
// series' highest point, as they read a load trigger's: a scenario whose
// series peaks at four times its rate needs a tick four times as long.
func TestBoundsCountTheSeries(t *testing.T) {
	sc := stormScenario(t, 1)
	flat, err := Bounds(sc)
	if err != nil {
		t.Fatal(err)
	}
	sc.Traffic.Series = &scenario.Series{Scale: 1, Points: []scenario.Point{{At: 0, Rate: 100}, {At: time.Minute, Rate: 400}}}
	peaked, err := Bounds(sc)
	if err != nil {
		t.Fatal(err)
	}
	if want := 4 * flat.Min; peaked.Min < want-time.Millisecond {
		t.Errorf("Bounds.Min %s with a series peaking at 400/s, want at least %s (%s at 100/s)", peaked.Min, want, flat.Min)
	}
}

// overloaded is a service that answers a lab probe at once but holds every
// request of the load (those that carry IntentHeader) longer than any
// client waits, so that the naive fleet retries all it can: without the
// cut at the scenario's end its retries would outlast it.
type overloaded struct {
	hold  time.Duration
	load  atomic.Int64
	mu    sync.Mutex
	times []time.Time // arrivals of the load's requests
}

func (s *overloaded) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get(IntentHeader) == "" {
		return // a probe of the latency at rest, or of the pause
	}
	s.load.Add(1)
	s.mu.Lock()
	s.times = append(s.times, time.Now())
	s.mu.Unlock()
	select {
	case <-time.After(s.hold):
	case <-r.Context().Done():
	}
}

// targetStorm is a short storm for runs against a stub target: 20 intents
// per second for 10 s, at 100 ms a tick (1 s of wall time per fleet).
func targetStorm(t *testing.T) *scenario.Scenario {
	sc := stormScenario(t, 5)
	sc.Duration = 10 * time.Second
	sc.Triggers[0].At, sc.Triggers[0].For = 2*time.Second, 2*time.Second
	return sc
}

// TestTargetLoadEndsWithTheScenario: against a target, a fleet's load
// stops at the end of the scenario plus one attempt's timeout, however
// many retries are still due, and nothing reaches the target after the
// run returns.
func TestTargetLoadEndsWithTheScenario(t *testing.T) {
	sc := targetStorm(t)
	sc.Fleets = sc.Fleets[:1] // naive: 3 retries each, no budget
	svc := &overloaded{hold: time.Minute}
	u, err := url.Parse(startServer(t, svc))
	if err != nil {
		t.Fatal(err)
	}
	tick := 100 * time.Millisecond
	if _, err := Run(context.Background(), sc, Options{Tick: tick, Target: &Target{URL: u}}); err != nil {
		t.Fatal(err)
	}
	returned := svc.load.Load()
	svc.mu.Lock()
	first, last := svc.times[0], svc.times[len(svc.times)-1]
	svc.mu.Unlock()
	wall := Scale(sc, tick.Seconds()/sc.Tick.Seconds())
	cutoff := wallCutoff(wall, 0) // 1 s of scenario, and a timeout of 100 ms
	// The last intents start at the end; their retries (backoff from
	// 10 ms, timeouts of 100 ms) would go on some 400 ms more. Allow a
	// hop's lateness past the cut, not a retry's.
	slack := 60 * time.Millisecond
	if slow() {
		slack = 250 * time.Millisecond
	}
	span := last.Sub(first)
	t.Logf("the load reached the target for %s; the cut is at %s", span.Round(time.Millisecond), cutoff)
	if span > cutoff+slack {
		t.Errorf("the load reached the target for %s, past the scenario's %s and one timeout (%s)", span.Round(time.Millisecond), wall.Duration, cutoff)
	}
	time.Sleep(200 * time.Millisecond)
	if n := svc.load.Load(); n != returned {
		t.Errorf("%d requests reached the target after the run returned", n-returned)
	}
}

// stopsAtOnce checks that cancelling run (Ctrl-C) once sent has reached n
// requests stops it at once: run returns the context's error within a
// few hundred milliseconds, and sent stays where it was afterwards.
func stopsAtOnce(t *testing.T, sent func() int64, n int64, run func(context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cancelled := make(chan time.Time, 1)
	go func() {
		for sent() < n && ctx.Err() == nil {
			time.Sleep(2 * time.Millisecond)
		}
		cancelled <- time.Now()
		cancel()
	}()
	err := run(ctx)
	took := time.Since(<-cancelled)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("after a cancel: %v, want context.Canceled", err)
	}
	t.Logf("returned %s after the cancel", took.Round(time.Millisecond))
	bound := 300 * time.Millisecond
	if slow() {
		bound = time.Second
	}
	if took > bound {
		t.Errorf("returned %s after the cancel, want under %s", took.Round(time.Millisecond), bound)
	}
	returned := sent()
	time.Sleep(200 * time.Millisecond)
	if got := sent(); got != returned {
		t.Errorf("%d requests reached the service after the cancelled run returned", got-returned)
	}
}

// TestTargetStopsAtOnce: cancelling a run against a target (Ctrl-C) stops
// the load at once, long before the fleets would have ended (two of 1.1 s
// of wall time, and a pause), and nothing reaches the target afterwards.
func TestTargetStopsAtOnce(t *testing.T) {
	sc := targetStorm(t)
	svc := &overloaded{hold: time.Minute}
	u, err := url.Parse(startServer(t, svc))
	if err != nil {
		t.Fatal(err)
	}
	stopsAtOnce(t, svc.load.Load, 10, func(ctx context.Context) error { // the storm under way
		_, err := Run(ctx, sc, Options{Tick: 100 * time.Millisecond, Target: &Target{URL: u}})
		return err
	})
}

// counting is a service that answers at once and counts what it gets.
type counting struct{ n atomic.Int64 }

func (s *counting) ServeHTTP(http.ResponseWriter, *http.Request) { s.n.Add(1) }

// TestProbeStopsAtOnce: cancelling a probe (Ctrl-C) stops its ramp at
// once: it returns the context's error and sends nothing more.
func TestProbeStopsAtOnce(t *testing.T) {
	svc := &counting{}
	u, err := url.Parse(startServer(t, svc))
	if err != nil {
		t.Fatal(err)
	}
	stopsAtOnce(t, svc.n.Load, 30, func(ctx context.Context) error { // 9 at rest, then into the ramp
		_, err := Probe(ctx, &Target{URL: u}, ProbeOptions{})
		return err
	})
}

// TestTargetRefusesAChain: a chain of tiers runs against the lab's own
// origin only; against a target it is refused before anything is sent.
func TestTargetRefusesAChain(t *testing.T) {
	sc, err := scenario.Load("../experiment/scenarios/layers.yaml")
	if err != nil {
		t.Fatal(err)
	}
	svc := &counting{}
	u, err := url.Parse(startServer(t, svc))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Run(context.Background(), sc, Options{Tick: 2 * time.Second, Target: &Target{URL: u}}); !errors.Is(err, errChainTarget) {
		t.Errorf("Run: %v, want %v", err, errChainTarget)
	}
	if _, err := Experiment(context.Background(), sc, ExperimentOptions{Tick: 2 * time.Second, Target: &Target{URL: u}}); !errors.Is(err, errChainTarget) {
		t.Errorf("Experiment: %v, want %v", err, errChainTarget)
	}
	if n := svc.n.Load(); n != 0 {
		t.Errorf("%d requests reached the target", n)
	}
}
