package lab

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"net/url"
	"strings"
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
	got, err := peakAttemptRate(sc, 100*time.Millisecond)
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
	if got, err := peakAttemptRate(sc, time.Second); err != nil || math.Abs(got-150*4) > 1e-9 {
		t.Errorf("with a load trigger to 150/s at 1s a tick: %g attempts/s (%v), want %d", got, err, 150*4)
	}
	// A rate series counts at its highest point, scaled.
	sc.Traffic.Series = &scenario.Series{Scale: 2, Points: []scenario.Point{{At: 0, Rate: 50}, {At: time.Minute, Rate: 200}}}
	if got, err := peakAttemptRate(sc, time.Second); err != nil || math.Abs(got-400*4) > 1e-9 {
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
type overloaded struct{ hold time.Duration }

func (s overloaded) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get(IntentHeader) == "" {
		return // a probe of the latency at rest, or of the pause
	}
	select {
	case <-time.After(s.hold):
	case <-r.Context().Done():
	}
}

// sends is the transport to a target in these tests: it counts what the
// lab sends, where it is sent (a service's handler may run late on a
// loaded machine, a send cannot), and, at the at-th request of the load,
// cancels the run. Set its fields before the run.
type sends struct {
	base   *http.Transport
	at     int64              // 0: never
	cancel context.CancelFunc // what the at-th request of the load calls

	n, load atomic.Int64 // every request sent; those of the load
	mu      sync.Mutex
	latest  time.Time // the latest deadline a request of the load carried
	open    int       // requests of the load sent with no deadline
}

func newSends(t *testing.T) *sends {
	s := &sends{base: targetTransport()}
	t.Cleanup(s.base.CloseIdleConnections)
	return s
}

func (s *sends) RoundTrip(r *http.Request) (*http.Response, error) {
	s.n.Add(1)
	if r.Header.Get(IntentHeader) != "" {
		s.mu.Lock()
		if dl, ok := r.Context().Deadline(); !ok {
			s.open++
		} else if dl.After(s.latest) {
			s.latest = dl
		}
		s.mu.Unlock()
		if s.load.Add(1) == s.at {
			s.cancel()
		}
	}
	return s.base.RoundTrip(r)
}

// nothingAfter checks that nothing more is sent once the run returned.
func (s *sends) nothingAfter(t *testing.T) {
	t.Helper()
	returned := s.n.Load()
	time.Sleep(200 * time.Millisecond)
	if got := s.n.Load(); got != returned {
		t.Errorf("%d requests sent after the run returned", got-returned)
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
// many retries are still due: every request the fault proxy sends the
// target is cancelled at that cut at the latest (a deadline the transport
// keeps, so no send can outlast it), and nothing is sent after the run
// returns.
func TestTargetLoadEndsWithTheScenario(t *testing.T) {
	sc := targetStorm(t)
	sc.Fleets = sc.Fleets[:1] // naive: 3 retries each, no budget
	u, err := url.Parse(startServer(t, overloaded{hold: time.Minute}))
	if err != nil {
		t.Fatal(err)
	}
	tr := newSends(t)
	tick := 100 * time.Millisecond
	var ready time.Time
	if _, err := runFleets(context.Background(), sc, runOptions{Tick: tick, Target: &Target{URL: u, Transport: tr},
		Ready: func(string, *url.URL, *url.URL) { ready = time.Now() }}); err != nil {
		t.Fatal(err)
	}
	tr.nothingAfter(t)
	wall := Scale(sc, tick.Seconds()/sc.Tick.Seconds())
	// The fleet starts lead after its servers came up at the latest; its
	// retries (backoff from 10 ms, timeouts of 100 ms) would go on some
	// 400 ms past the cut.
	cut := ready.Add(lead + wallCutoff(wall, 0))
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.load.Load() == 0 || tr.open > 0 || tr.latest.After(cut) {
		t.Errorf("%d requests of the load sent, %d with no deadline, the latest deadline %s past the cut",
			tr.load.Load(), tr.open, tr.latest.Sub(cut))
	}
}

// stopped checks that run, cancelled by tr, stopped: it returns the
// context's error, and nothing more is sent afterwards. How soon it
// stopped the callers check by what it did after the cancel (no next
// fleet, no next step), never by the wall clock, which a loaded machine
// stretches.
func stopped(t *testing.T, tr *sends, run func() error) {
	t.Helper()
	if err := run(); !errors.Is(err, context.Canceled) {
		t.Fatalf("after a cancel: %v, want context.Canceled", err)
	}
	tr.nothingAfter(t)
}

// TestTargetStopsAtOnce: cancelling a run against a target (Ctrl-C) during
// its first fleet stops it there: the second fleet never starts, and
// nothing is sent to the target once the run has returned.
func TestTargetStopsAtOnce(t *testing.T) {
	sc := targetStorm(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	u, err := url.Parse(startServer(t, overloaded{hold: time.Minute}))
	if err != nil {
		t.Fatal(err)
	}
	tr := newSends(t)
	tr.at, tr.cancel = 10, cancel // the storm under way
	var mu sync.Mutex
	var fleets []string
	stopped(t, tr, func() error {
		_, err := runFleets(ctx, sc, runOptions{Tick: 100 * time.Millisecond, Target: &Target{URL: u, Transport: tr},
			Ready: func(fleet string, _, _ *url.URL) {
				mu.Lock()
				fleets = append(fleets, fleet)
				mu.Unlock()
			}})
		return err
	})
	mu.Lock()
	defer mu.Unlock()
	if len(fleets) != 1 {
		t.Errorf("fleets started: %v, want the first only", fleets)
	}
}

// TestProbeStopsAtOnce: cancelling a probe (Ctrl-C) during its ramp's
// first step stops it there: no step completes, and nothing is sent once
// the probe has returned.
func TestProbeStopsAtOnce(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	u, err := url.Parse(startServer(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		time.Sleep(2 * time.Millisecond)
	})))
	if err != nil {
		t.Fatal(err)
	}
	// The probe's requests carry no IntentHeader: cancel on the 30th
	// send (9 at rest, then into the ramp) through a wrapper.
	tr := newSends(t)
	var n atomic.Int64
	probe := roundTripper(func(r *http.Request) (*http.Response, error) {
		if n.Add(1) == 30 {
			cancel()
		}
		return tr.RoundTrip(r)
	})
	var log bytes.Buffer
	var mu sync.Mutex
	stopped(t, tr, func() error {
		_, err := Probe(ctx, &Target{URL: u, Transport: probe}, ProbeOptions{Log: lockedWriter{&mu, &log}})
		return err
	})
	mu.Lock()
	defer mu.Unlock()
	if strings.Contains(log.String(), "lab: probe:") {
		t.Errorf("a step of the ramp completed after the cancel:\n%s", log.String())
	}
}

// roundTripper is a function as an http.RoundTripper.
type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// lockedWriter is a writer safe for concurrent use.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestTargetRefusesAChain: a chain of tiers runs against the lab's own
// origin only; against a target it is refused before anything is sent.
func TestTargetRefusesAChain(t *testing.T) {
	sc, err := scenario.Load("../experiment/scenarios/layers.yaml")
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(startServer(t, overloaded{}))
	if err != nil {
		t.Fatal(err)
	}
	tr := newSends(t)
	target := &Target{URL: u, Transport: tr}
	if _, err := runFleets(context.Background(), sc, runOptions{Tick: 2 * time.Second, Target: target}); !errors.Is(err, errChainTarget) {
		t.Errorf("Run: %v, want %v", err, errChainTarget)
	}
	if _, err := Measure(context.Background(), sc, ExperimentOptions{Tick: 2 * time.Second, Target: target}); !errors.Is(err, errChainTarget) {
		t.Errorf("Measure: %v, want %v", err, errChainTarget)
	}
	if n := tr.n.Load(); n != 0 {
		t.Errorf("%d requests sent to the target", n)
	}
}

// TestLabRefusals: the combinations the lab cannot play (a target over
// gRPC, a chain over gRPC, a chain against a target) are refused in one
// place (refuse), the same at every entry point, before anything is sent.
func TestLabRefusals(t *testing.T) {
	chain, err := scenario.Load("../experiment/scenarios/layers.yaml")
	if err != nil {
		t.Fatal(err)
	}
	flat, err := scenario.Load("../experiment/scenarios/storm.yaml")
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(startServer(t, overloaded{}))
	if err != nil {
		t.Fatal(err)
	}
	tr := newSends(t)
	target := &Target{URL: u, Transport: tr}
	tests := []struct {
		name     string
		sc       *scenario.Scenario
		protocol Protocol
		target   *Target
		want     error
	}{
		{"target over grpc", flat, ProtocolGRPC, target, errTargetGRPC},
		{"chain over grpc", chain, ProtocolGRPC, nil, errChainGRPC},
		{"chain against a target", chain, ProtocolHTTP, target, errChainTarget},
		{"chain against a target, protocol unsaid", chain, "", target, errChainTarget},
		{"everything at once", chain, ProtocolGRPC, target, errTargetGRPC},
		{"chain over http", chain, ProtocolHTTP, nil, nil},
		{"target over http", flat, "", target, nil},
		{"flat over grpc", flat, ProtocolGRPC, nil, nil},
	}
	ctx := context.Background()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := refuse(tt.sc, tt.protocol, tt.target); !errors.Is(err, tt.want) {
				t.Fatalf("refuse: %v, want %v", err, tt.want)
			}
			if tt.want == nil {
				return
			}
			if _, err := runFleets(ctx, tt.sc, runOptions{Tick: 2 * time.Second, Protocol: tt.protocol, Target: tt.target}); !errors.Is(err, tt.want) {
				t.Errorf("Run: %v, want %v", err, tt.want)
			}
			if _, err := Measure(ctx, tt.sc, ExperimentOptions{Tick: 2 * time.Second, Protocol: tt.protocol, Target: tt.target}); !errors.Is(err, tt.want) {
				t.Errorf("Measure: %v, want %v", err, tt.want)
			}
			if _, _, err := runFleet(ctx, tt.sc, 0, runOptions{Tick: 2 * time.Second, Protocol: tt.protocol, Target: tt.target}); !errors.Is(err, tt.want) {
				t.Errorf("runFleet: %v, want %v", err, tt.want)
			}
		})
	}
	if n := tr.n.Load(); n != 0 {
		t.Errorf("%d requests sent to the target", n)
	}
}
