package lab

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/internal/servertest"
	"github.com/retrystorm/retrystorm/internal/testlock"
	"github.com/retrystorm/retrystorm/scenario"
	"github.com/retrystorm/retrystorm/sim"
)

// These tests play the storm against servers nobody here wrote: HAProxy's
// queue (a server with maxconn and timeout queue is a real FIFO queueing
// origin) and nginx serving a file, both from Debian's packages, started on
// 127.0.0.1 with a configuration written to a temporary directory. They
// skip when the servers are not installed, or when the lab could not
// measure after testlock.Tries runs, except in CI (CI=true), where .ci/run
// installs the servers and a test of a claim must not skip: there they
// fail.

// startHAProxy runs HAProxy as a finite queueing origin on 127.0.0.1 and
// returns its URL: a frontend whose backend server takes maxconn requests
// at once, each for service (a Lua service that sleeps, inside the same
// HAProxy), with the rest in HAProxy's FIFO queue for at most queue.
// Without option abortonclose, HAProxy serves a queued request whose
// client closed its connection: wasted work, as the scenario's origin does.
func startHAProxy(t *testing.T, maxconn int, service, queue time.Duration) string {
	t.Helper()
	front, _ := servertest.StartHAProxy(t, context.Background(), servertest.HAProxy{Bin: servertest.Need(t, "haproxy", "haproxy"), Service: service, Maxconn: maxconn, Queue: queue})
	return "http://" + front + "/"
}

// startNginx runs nginx on 127.0.0.1 serving a small file, and returns its
// URL.
func startNginx(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "index.html"), []byte("ok\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return runNginx(t, dir, "", "root "+dir+";")
}

// runNginx runs nginx on 127.0.0.1 with its files in dir, the directives
// http in its http block, and one server whose directives (after listen)
// are server, and returns its URL.
func runNginx(t *testing.T, dir, http, server string) string {
	t.Helper()
	addr, _ := servertest.Nginx(t, dir, "/", func(listen string) string {
		return fmt.Sprintf("    keepalive_requests 100000;\n    %s\n    server {\n        listen %s;\n        %s\n    }", http, listen, server)
	})
	return "http://" + addr + "/"
}

// realStorm is the storm experiment's scenario, shortened to 45 ticks (the
// dip from 5 s to 15 s, 30 ticks after it to see who recovers), played at
// 200 ms a tick: 500 intents per second of wall time, 2,000 attempts in the
// naive fleet's collapse, against an origin of 12 workers of 20 ms (600 per
// second). At 100 intents a tick a stray timeout moves a tick's error rate
// by one point, which recovery tolerates; the 100 ms tick, at twice the
// rates, is more than a shared machine carries beside a real server.
func realStorm(t *testing.T) (*scenario.Scenario, time.Duration) {
	t.Helper()
	sc := stormScenario(t, 1)
	sc.Duration = 45 * time.Second
	sc.Triggers[0].At = 5 * time.Second
	return sc, 200 * time.Millisecond
}

// timed skips a test that measures a real server's timing where the
// measurement would not hold: with -short (CI runs it without), and under
// the race detector, which slows real HTTP several times over.
func timed(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("a storm against a real server takes 20 s or so: skipped with -short")
	}
	if raceEnabled {
		t.Skip("the race detector slows real HTTP several times over: the lab would measure it")
	}
}

// checkStorm runs sc against target and checks the storm's verdicts: the
// naive fleet stays collapsed, the guarded one recovers, as the simulator
// says of the same scenario.
func checkStorm(t *testing.T, target *Target) {
	t.Helper()
	sc, tick := realStorm(t)
	simRes, err := sim.Run(context.Background(), sc)
	if err != nil {
		t.Fatal(err)
	}
	res, _ := conclusive(t, tick, func(tick time.Duration) (*Result, *Inconclusive) {
		res, err := runFleets(context.Background(), sc, runOptions{Tick: tick, Target: target})
		if err != nil {
			t.Fatal(err)
		}
		logWatch(t, res)
		return res, res.Lab.Inconclusive
	})
	for i, f := range res.Fleets {
		s, m := f.Summary, simRes.Fleets[i].Summary
		t.Logf("%-8s lab: recovered %-5v peak %4d r/req %.3f goodput %5d failures %5d lost %4d | sim: recovered %-5v peak %4d r/req %.3f goodput %5d failures %5d lost %4d (settled in %.1fs)",
			f.Name, s.Recovered, s.PeakOffered, s.RetriesPerRequest, s.Goodput, s.Failures, s.IntentsLost,
			m.Recovered, m.PeakOffered, m.RetriesPerRequest, m.Goodput, m.Failures, m.IntentsLost, res.Lab.Fleets[i].SettleSeconds)
		if want := i == 1; s.Recovered != want || m.Recovered != want {
			t.Errorf("%s: recovered %v in the lab and %v in the simulator, want %v in both", f.Name, s.Recovered, m.Recovered, want)
		}
	}
	naive := res.Fleets[0].Series
	n := len(naive.Goodput)
	var good int64
	for _, g := range naive.Goodput[n-10:] {
		good += g
	}
	if rate := sc.Traffic.Rate * sc.Tick.Seconds(); float64(good) > rate {
		t.Errorf("naive: %d answers in time in the last 10 ticks, want near none (%g intents a tick): collapsed", good, rate)
	}
	for _, f := range res.Lab.Fleets {
		if f.Load.LateP99 > 0.05 {
			t.Logf("%s: the load generator was %.0f ms late (p99): the machine, not the target, may show in the verdict", f.Name, 1000*f.Load.LateP99)
		}
	}
}

// TestLabAgainstHAProxy: the storm against HAProxy as the origin, 12
// requests at a time for 20 ms each (600 per second, 120 per tick at 200 ms
// a tick, as the storm's origin), the fault proxy applying the capacity
// dip.
func TestLabAgainstHAProxy(t *testing.T) {
	if ownProcess(t) {
		return
	}
	timed(t)
	u, err := url.Parse(startHAProxy(t, 12, 20*time.Millisecond, 2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	checkStorm(t, &Target{URL: u, Log: testLog{t}})
}

// TestLabImposesOriginOnNginx: nginx serving a file answers far faster
// than the storm's origin; imposing the scenario's origin makes it one.
func TestLabImposesOriginOnNginx(t *testing.T) {
	if ownProcess(t) {
		return
	}
	timed(t)
	u, err := url.Parse(startNginx(t))
	if err != nil {
		t.Fatal(err)
	}
	checkStorm(t, &Target{URL: u, Impose: true, Log: testLog{t}})
}

// TestProbeHAProxy: the probe finds HAProxy's capacity (12 at a time, 20
// ms each: 600 per second) and writes a scenario the loader takes.
func TestProbeHAProxy(t *testing.T) {
	if ownProcess(t) {
		return
	}
	timed(t)
	u, err := url.Parse(startHAProxy(t, 12, 20*time.Millisecond, time.Second))
	if err != nil {
		t.Fatal(err)
	}
	r := probeReplays(t, u, true)
	if r.Capacity < 400 || r.Capacity > 700 {
		t.Errorf("capacity %.0f/s, want about 600", r.Capacity)
	}
	if r.Workers < 9 || r.Workers > 16 {
		t.Errorf("%d workers, want about 12", r.Workers)
	}
	// Little's law at the knee counts the requests in HAProxy's queue
	// too: near 600/s the 12 workers are busy and a queue has formed.
	if r.Concurrency < 6 || r.Concurrency > 40 {
		t.Errorf("concurrency %.1f at the knee, want from 6 to 40", r.Concurrency)
	}
	if r.CeilingBy != CeilingService || r.Impose {
		t.Errorf("ceiling by %s (%s), impose %v: want the service's, replayed as it is", r.CeilingBy, r.Why, r.Impose)
	}
}

// TestProbeNginx: nginx serves a small file faster than one machine can
// storm it: the probe says the ceiling it found is its own (its cap, or
// the machine), and writes a scenario replayed with --impose (issue 26: it
// reported its own 5,000 requests/s cap as nginx's capacity).
func TestProbeNginx(t *testing.T) {
	timed(t)
	u, err := url.Parse(startNginx(t))
	if err != nil {
		t.Fatal(err)
	}
	r := probeReplays(t, u, false)
	if r.CeilingBy == CeilingService {
		t.Errorf("nginx's ceiling at %.0f/s said to be the service's: %s", r.Capacity, r.Why)
	}
	if !r.Impose {
		t.Errorf("nginx at %.0f/s replayed without --impose", r.Capacity)
	}
}

// TestProbeLabOrigin: the lab's own origin, a queue of 4 workers of 10 ms
// (400 requests/s), probed as a target: its capacity and its workers as
// built.
func TestProbeLabOrigin(t *testing.T) {
	if ownProcess(t) {
		return
	}
	timed(t)
	o, err := NewOrigin(OriginConfig{Origin: queueOrigin(4, 400)})
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(startRunning(t, o.Run, o.Handler()))
	if err != nil {
		t.Fatal(err)
	}
	r := probeReplays(t, u, true)
	if r.Capacity < 300 || r.Capacity > 480 {
		t.Errorf("capacity %.0f/s, want about 400", r.Capacity)
	}
	if r.Workers < 3 || r.Workers > 6 {
		t.Errorf("%d workers, want about 4", r.Workers)
	}
	if r.CeilingBy != CeilingService || r.Impose {
		t.Errorf("ceiling by %s (%s), impose %v: want the service's, replayed as it is", r.CeilingBy, r.Why, r.Impose)
	}
}

// probeReplays probes u until a probe is conclusive (and, with service,
// finds a ceiling that is not the machine's: the service's, or the
// probe's own cap), up to testlock.Tries probes, and checks that the
// scenario it writes runs in the lab at the tick its replay command
// names.
func probeReplays(t *testing.T, u *url.URL, service bool) *ProbeResult {
	t.Helper()
	var r *ProbeResult
	testlock.Conclusive(t, func(int) string {
		var err error
		r, err = Probe(context.Background(), &Target{URL: u}, ProbeOptions{Log: testLog{t}, Step: 500 * time.Millisecond, Tick: DefaultTick})
		if err != nil {
			t.Fatal(err)
		}
		if r.Inconclusive || service && r.CeilingBy == CeilingMachine {
			return fmt.Sprintf("as the probe reports it (the ceiling is the %s's): %s", r.CeilingBy, r.Why)
		}
		return ""
	})
	t.Logf("capacity %.0f/s (%s: %s), knee %.0f/s, concurrency %.1f, %d workers, at rest %v; %s",
		r.Capacity, r.CeilingBy, r.Why, r.Steps[r.Knee].Rate, r.Concurrency, r.Workers, r.Rest, r.Replay)
	y := r.Scenario()
	sc, err := scenario.Parse("probed.yaml", y)
	if err != nil {
		t.Fatalf("%v\n%s", err, y)
	}
	if !strings.Contains(string(y), "# Measured by retrystorm lab --probe") || !strings.Contains(string(y), "# Replay it: "+r.Replay) {
		t.Errorf("the scenario does not say what was measured:\n%s", y)
	}
	b, err := Bounds(sc)
	if err != nil {
		t.Fatal(err)
	}
	if r.Tick < b.Min || r.Tick > b.Max {
		t.Errorf("the replay's tick %s is outside the lab's bounds [%s, %s]:\n%s", r.Tick, b.Min, b.Max, y)
	}
	return r
}

// testLog writes the lab's progress to the test's log.
type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
