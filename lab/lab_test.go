package lab

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/experiment"
	"github.com/retrystorm/retrystorm/internal/testlock"
	"github.com/retrystorm/retrystorm/report"
	"github.com/retrystorm/retrystorm/scenario"
	"github.com/retrystorm/retrystorm/sim"
)

// stormScenario is the storm experiment's default scenario, with its rates
// and workers divided by div.
func stormScenario(t *testing.T, div float64) *scenario.Scenario {
	t.Helper()
	sc, err := scenario.Load("../experiment/scenarios/storm.yaml")
	if err != nil {
		t.Fatal(err)
	}
	sc.Traffic.Rate /= div
	sc.Origin.Capacity /= div
	sc.Origin.Workers = int(float64(sc.Origin.Workers) / div)
	for i := range sc.Triggers {
		sc.Triggers[i].Capacity /= div
	}
	return sc
}

// TestLabSmoke runs a short storm through every component, over HTTP and
// over gRPC, under the race detector too: both fleets, a trigger, the live
// view, and nothing left behind (TestMain checks for goroutines).
func TestLabSmoke(t *testing.T) {
	if ownProcess(t) {
		return
	}
	for _, p := range []Protocol{ProtocolHTTP, ProtocolGRPC} {
		t.Run(string(p), func(t *testing.T) { smoke(t, p) })
	}
}

func smoke(t *testing.T, protocol Protocol) {
	sc := stormScenario(t, 5) // 20 intents/s, capacity 24/s
	sc.Duration = 20 * time.Second
	sc.Triggers[0].At, sc.Triggers[0].For, sc.Triggers[0].Capacity = 5*time.Second, 4*time.Second, 8
	live := NewLive(sc, nil, 100*time.Millisecond, nil)
	defer live.Close()
	var mu sync.Mutex
	ready := map[string]bool{}
	loopback := func(hostport string) bool { return strings.HasPrefix(hostport, "127.0.0.1:") }
	res, err := runFleets(context.Background(), sc, runOptions{Tick: 100 * time.Millisecond, Live: live, Protocol: protocol,
		Ready: func(fleet string, origin, gateway *url.URL) {
			mu.Lock()
			ready[fleet] = origin.Hostname() == "127.0.0.1" && gateway.Hostname() == "127.0.0.1"
			mu.Unlock()
		},
		ReadyGRPC: func(fleet, origin, gateway string) {
			mu.Lock()
			ready[fleet+" grpc"] = loopback(origin) && loopback(gateway)
			mu.Unlock()
		}})
	if err != nil {
		t.Fatal(err)
	}
	checkTallies(t, res)
	if len(res.Fleets) != 2 || len(res.Lab.Fleets) != 2 || !ready["naive"] || !ready["guarded"] ||
		(protocol == ProtocolGRPC) != (ready["naive grpc"] && ready["guarded grpc"]) {
		t.Fatalf("%d fleets, ready on loopback: %v", len(res.Fleets), ready)
	}
	if res.Fleets[0].Summary.Retries == 0 {
		t.Error("the naive fleet never retried through a dip to a third of its load")
	}
	if res.TickSeconds != 1 || res.Trigger == nil || res.Trigger.End != 9 || res.Lab.Scale != 0.1 {
		t.Errorf("result in scenario time: tick %g, trigger %+v, scale %g", res.TickSeconds, res.Trigger, res.Lab.Scale)
	}
	for i, f := range res.Fleets {
		s, info := f.Summary, res.Lab.Fleets[i]
		t.Logf("%s: intents %d, attempts %d, r/req %.3f, goodput %d, recovered %v; %+v", f.Name, s.Intents, s.Attempts, s.RetriesPerRequest, s.Goodput, s.Recovered, info)
		if len(f.Series.Tick) != 20 || s.Intents < 300 || s.Intents > 500 || info.Load.Shed != 0 {
			t.Errorf("%s: %d ticks, %d intents (want about 400), %d shed", f.Name, len(f.Series.Tick), s.Intents, info.Load.Shed)
		}
		// Every intent sends an attempt, unless the breaker refused it
		// (the guarded fleet's, which a slow machine trips more often:
		// the smoke test does not judge timing).
		if s.Attempts+int64(info.Gateway.BreakerRefusals) < s.Intents*9/10 || s.Goodput == 0 || s.Goodput > s.Successes || s.Failures == 0 {
			t.Errorf("%s: %d attempts, %d refused by the breaker, %d successes, %d goodput, %d failures for %d intents", f.Name, s.Attempts, info.Gateway.BreakerRefusals, s.Successes, s.Goodput, s.Failures, s.Intents)
		}
	}
}

// TestLabStormAgreesWithSimulator is the lab's check on the simulator (and
// the simulator's on the lab): the storm scenario, run in both, must tell
// the same story: the naive fleet collapses and never recovers, the guarded
// fleet recovers, the naive fleet against the origin behind resilhttp.Shed
// (deadline shedding) recovers,
// and offered load and retries/requests agree within LabTolerances.
//
// It runs the storm with its rates halved at 50 ms a tick: 18 s in all,
// with the same wall-clock load (1,000 intents per second, 4,000 attempts
// per second in the collapse) as `retrystorm lab` at its default 100 ms;
// RETRYSTORM_LAB_FULL=1 runs exactly what `retrystorm lab` runs instead.
func TestLabStormAgreesWithSimulator(t *testing.T) {
	if testing.Short() {
		t.Skip("the storm over real HTTP takes 18 s: skipped with -short")
	}
	if raceEnabled {
		t.Skip("the race detector slows real HTTP several times over: the lab would measure it; TestLabSmoke runs under it")
	}
	if ownProcess(t) {
		return
	}
	stormAgrees(t, ProtocolHTTP)
}

// TestLabStormOverGRPCAgreesWithSimulator is the same check over gRPC:
// the origin, the gateway (resilgrpc's client interceptors) and the load
// generator speak gRPC, and must tell the simulator's story within the
// same tolerances.
func TestLabStormOverGRPCAgreesWithSimulator(t *testing.T) {
	if testing.Short() {
		t.Skip("the storm over real gRPC takes 18 s: skipped with -short")
	}
	if raceEnabled {
		t.Skip("the race detector slows real gRPC several times over: the lab would measure it; TestLabSmoke runs under it")
	}
	if ownProcess(t) {
		return
	}
	stormAgrees(t, ProtocolGRPC)
}

// stormAgrees runs the storm, its rates halved, at 50 ms a tick (the
// default with RETRYSTORM_LAB_FULL=1) in the simulator and in the lab over
// protocol, with the counterfactual of deadline shedding, and checks the
// claims.
func stormAgrees(t *testing.T, protocol Protocol) {
	sc, tick := stormScenario(t, 2), 50*time.Millisecond
	if os.Getenv("RETRYSTORM_LAB_FULL") != "" {
		sc, tick = stormScenario(t, 1), DefaultTick
	}
	ctx := context.Background()
	simRes, err := sim.Run(ctx, sc)
	if err != nil {
		t.Fatal(err)
	}
	cf, cfName := experiment.ShedCounterfactual(sc)
	cf.Fleets[0].Name = cfName
	cfSim, err := sim.Run(ctx, cf)
	if err != nil {
		t.Fatal(err)
	}
	simRes.Fleets = append(simRes.Fleets, cfSim.Fleets...)
	res, tick := conclusive(t, tick, func(tick time.Duration) (*Result, *Inconclusive) {
		res, err := runFleets(ctx, sc, runOptions{Tick: tick, Protocol: protocol})
		if err != nil {
			t.Fatal(err)
		}
		f, info, err := runFleet(ctx, cf, 0, runOptions{Tick: tick, Protocol: protocol})
		if err != nil {
			t.Fatal(err)
		}
		res.Fleets = append(res.Fleets, f)
		res.Lab.Fleets = append(res.Lab.Fleets, info)
		res.judge(sc, tick)
		logWatch(t, res)
		return res, res.Lab.Inconclusive
	})
	checkTallies(t, res)

	out := experiment.LabOutcome(sc, simRes, res.Result, experiment.LabOptions{WallTick: tick, Storm: true, CounterfactualName: cfName, Protocol: string(protocol)})
	b := outcomeText(out)
	for _, f := range res.Lab.Fleets {
		fmt.Fprintf(b, "%s: %d intents sent, %d shed, late p99 %.1f ms, max %.1f ms; %.1f s\n",
			f.Name, f.Load.Sent, f.Load.Shed, 1000*f.Load.LateP99, 1000*f.Load.LateMax, f.WallSeconds)
	}
	t.Log("\n" + b.String())
	if !report.AllHold(out.Claims) {
		t.Error("the lab and the simulator disagree (see the claims above)")
	}
}

// TestLabShedAgreesWithSimulator runs the storm's naive fleet against the
// origin with both of the shed experiment's defences, deadline shedding
// and an adaptive (gradient) concurrency limit, behind resilhttp.Shed over
// HTTP and resilgrpc's server interceptor over gRPC (one resil Shedder
// either way). It must recover in both the lab and the simulator, and
// offered load and retries/requests agree.
func TestLabShedAgreesWithSimulator(t *testing.T) {
	if testing.Short() {
		t.Skip("the storm over real HTTP and gRPC takes 12 s: skipped with -short")
	}
	if raceEnabled {
		t.Skip("the race detector slows real HTTP several times over: the lab would measure it")
	}
	if ownProcess(t) {
		return
	}
	for _, p := range []Protocol{ProtocolHTTP, ProtocolGRPC} {
		t.Run(string(p), func(t *testing.T) { shedAgrees(t, p, false) })
	}
}

// shedAgrees runs the shed storm over protocol and holds the lab to the
// simulator. A lab starved on purpose measures once, and an inconclusive
// run is its answer (logged); otherwise the run must be conclusive.
func shedAgrees(t *testing.T, protocol Protocol, starved bool) {
	sc, tick := stormScenario(t, 2), 50*time.Millisecond
	sc.Origin.DropExpired = false
	sc.Origin.Shed = scenario.Shed{Deadline: true}
	sc.Origin.Limit = scenario.DefaultLimit(scenario.LimitGradient)
	sc.Fleets = sc.Fleets[:1]
	if err := sc.Validate(); err != nil {
		t.Fatal(err)
	}
	var (
		simRes *sim.Result
		res    *Result
	)
	if starved {
		var in *Inconclusive
		simRes = simRun(t, sc)
		if res, in = stormRun(t, sc, protocol)(tick); in != nil {
			t.Logf("inconclusive, as the lab reports it: %s", strings.Join(in.Reasons, "; "))
			return
		}
		t.Log("conclusive beside the busy loops: the lab is held to the simulator")
		checkTallies(t, res)
	} else {
		simRes, res, tick = runBoth(t, sc, tick, protocol)
	}
	out := experiment.LabOutcome(sc, simRes, res.Result, experiment.LabOptions{WallTick: tick, Protocol: string(protocol)})
	b := outcomeText(out)
	t.Log("\n" + b.String())
	if !report.AllHold(out.Claims) {
		t.Error("the lab and the simulator disagree (see the claims above)")
	}
	if s := res.Fleets[0].Summary; !s.Recovered {
		t.Error("the naive fleet did not recover against the shedding origin in the lab")
	}
	if c := res.Lab.Fleets[0].Origin; c.Wasted > c.Dropped {
		t.Errorf("the shedding origin served %d requests for nobody (dropped %d)", c.Wasted, c.Dropped)
	}
}

// TestLabConcurrencyAgreesWithSimulator runs a concurrency-model origin in
// deep collapse (testdata/concurrency.yaml: latency 1 s + 10 ms per
// request in flight, a 3 s timeout, three attempts with full jitter, 40
// intents/s with a spike to 80/s) in both: every attempt times out after
// the spike, so offered load tends to 3 × 40 = 120 per tick in each. The
// lab once saw a fifth less: requests whose client had left held the HTTP/2
// server's handlers, and attempts queued behind them vanished unseen when
// their client gave up.
func TestLabConcurrencyAgreesWithSimulator(t *testing.T) {
	if testing.Short() {
		t.Skip("the collapse over real HTTP takes 8 s: skipped with -short")
	}
	if raceEnabled {
		t.Skip("the race detector slows real HTTP several times over: the lab would measure it")
	}
	if ownProcess(t) {
		return
	}
	sc, err := scenario.Load("testdata/concurrency.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// 40 ticks after the spike are plenty to see the collapse hold, at
	// the lab's default tick: 8 s.
	sc.Duration = 80 * time.Second
	simRes, res, tick := runBoth(t, sc, DefaultTick, ProtocolHTTP)
	out := experiment.LabOutcome(sc, simRes, res.Result, experiment.LabOptions{WallTick: tick})
	b := outcomeText(out)
	t.Log("\n" + b.String())
	if !report.AllHold(out.Claims) {
		t.Error("the lab and the simulator disagree (see the claims above)")
	}
}

// runBoth runs sc in the simulator, and in the lab over protocol until a
// run is conclusive (conclusive: from tick, longer if the machine needs
// it), and returns both results and the lab's tick.
func runBoth(t *testing.T, sc *scenario.Scenario, tick time.Duration, protocol Protocol) (*sim.Result, *Result, time.Duration) {
	t.Helper()
	simRes := simRun(t, sc)
	res, tick := conclusive(t, tick, stormRun(t, sc, protocol))
	checkTallies(t, res)
	return simRes, res, tick
}

// simRun runs sc in the simulator.
func simRun(t *testing.T, sc *scenario.Scenario) *sim.Result {
	t.Helper()
	r, err := sim.Run(context.Background(), sc)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// stormRun is a run of sc's fleets in the lab over protocol, for
// conclusive: it logs what the lab's watch saw.
func stormRun(t *testing.T, sc *scenario.Scenario, protocol Protocol) func(time.Duration) (*Result, *Inconclusive) {
	return func(tick time.Duration) (*Result, *Inconclusive) {
		t.Helper()
		res, err := runFleets(context.Background(), sc, runOptions{Tick: tick, Protocol: protocol})
		if err != nil {
			t.Fatal(err)
		}
		logWatch(t, res)
		return res, res.Lab.Inconclusive
	}
}

// outcomeText is the comparison's tables and claims, as the command
// prints them.
func outcomeText(out *experiment.Outcome) *strings.Builder {
	var b strings.Builder
	for _, tb := range out.Section.Tables {
		_ = tb.Render(&b, report.Style{})
		b.WriteString("\n")
	}
	_ = report.RenderClaims(&b, out.Claims, report.Style{})
	return &b
}

// TestLabHoldsOverload drives the lab at ten times its origin's capacity,
// with the naive fleet's retries on top (up to forty times in attempts),
// and checks that the lab itself holds: the load generator keeps its
// schedule, memory stays flat, and nothing is left running (TestMain). It
// runs for 5 s; RETRYSTORM_LAB_SOAK=60s runs it for a minute (or any
// other duration).
func TestLabHoldsOverload(t *testing.T) {
	if testing.Short() {
		t.Skip("the overload run takes 5 s: skipped with -short")
	}
	if raceEnabled {
		t.Skip("under the race detector the lab would measure the detector at 4,000 attempts per second")
	}
	if ownProcess(t) {
		return
	}
	d := 5 * time.Second
	if v := os.Getenv("RETRYSTORM_LAB_SOAK"); v != "" {
		var err error
		if d, err = time.ParseDuration(v); err != nil || d < time.Second {
			t.Fatalf("RETRYSTORM_LAB_SOAK=%q: want a duration of at least 1s", v)
		}
	}
	d = d.Truncate(time.Second)
	fleet := naiveFleet(200 * time.Millisecond)
	fleet.Retry.Backoff.Base = 10 * time.Millisecond
	sc := &scenario.Scenario{
		Name: "overload", Seed: 1, Duration: d, Tick: time.Second,
		Traffic: scenario.Traffic{Rate: 1000, Arrivals: "poisson", Clients: 20, Idempotent: 1},
		Origin:  queueOrigin(10, 100), // 100 requests per second
		Fleets:  []scenario.Fleet{fleet},
	}

	// A generator that fell behind its schedule is the lab's verdict on
	// its machine, which the watch gives: then neither the overload nor
	// the memory is measured (a starved lab's backlog of requests in
	// flight grows with the run, as a leak would: 27 MiB to 50 MiB on a
	// loaded machine, issue 26), and the run is measured again (at the
	// same tick: the overload is the load per wall second).
	var o overload
	testlock.Conclusive(t, func(int) string {
		if o = overloadRun(t, sc); o.in != nil {
			return "as the lab reports it: " + strings.Join(o.in.Reasons, "; ") + "; " + o.in.Suggestion
		}
		return ""
	})
	if s := o.f.Summary; s.Attempts < int64(25*100*d.Seconds()) {
		t.Errorf("only %d attempts reached the origin: the overload did not happen", s.Attempts)
	}

	// Memory: the second half of the run must not hold more than the first
	// (a leak grows with time; a bounded lab plateaus once it is full).
	var first, second memSample
	for _, m := range o.samples {
		half := &first
		if m.at > d/2 {
			half = &second
		}
		half.heap = max(half.heap, m.heap)
		half.goroutines = max(half.goroutines, m.goroutines)
	}
	t.Logf("peak live heap %.1f MiB in the first half, %.1f MiB in the second; peak goroutines %d, %d",
		mib(first.heap), mib(second.heap), first.goroutines, second.goroutines)
	if second.heap > first.heap*3/2+8<<20 {
		t.Errorf("the heap grew from %.1f MiB to %.1f MiB", mib(first.heap), mib(second.heap))
	}
	if second.goroutines > first.goroutines*3/2+500 {
		t.Errorf("goroutines grew from %d to %d", first.goroutines, second.goroutines)
	}
}

// overload is one run of TestLabHoldsOverload: the fleet's result, the
// lab's view of it, the memory sampled as it ran, and why the run is
// inconclusive (nil: it is not).
type overload struct {
	f       sim.FleetResult
	info    FleetInfo
	samples []memSample
	in      *Inconclusive
}

// overloadRun runs sc's fleet at a tick of a second, sampling the live
// heap and the goroutines every 250 ms, and checks the generator's books.
func overloadRun(t *testing.T, sc *scenario.Scenario) overload {
	t.Helper()
	var mu sync.Mutex
	var samples []memSample
	stop := make(chan struct{})
	var sampler sync.WaitGroup
	// The live heap as the last collection found it: what the lab holds,
	// not the garbage a raised GOGC lets pile up between collections.
	live := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	sampler.Go(func() {
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		start := time.Now()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			metrics.Read(live)
			mu.Lock()
			samples = append(samples, memSample{time.Since(start), live[0].Value.Uint64(), runtime.NumGoroutine()})
			mu.Unlock()
		}
	})
	f, info, err := runFleet(context.Background(), sc, 0, runOptions{Tick: time.Second})
	close(stop)
	sampler.Wait()
	if err != nil {
		t.Fatal(err)
	}
	s, d := f.Summary, sc.Duration
	t.Logf("%v at 10× capacity: %d intents, %d attempts reached the origin (%.1f× its capacity), %d served for nobody; generator late p99 %.1f ms, max %.1f ms, %d shed",
		d, s.Intents, s.Attempts, float64(s.Attempts)/(100*d.Seconds()), info.Origin.Wasted, 1000*info.Load.LateP99, 1000*info.Load.LateMax, info.Load.Shed)
	if info.Load.Shed != 0 || info.Load.Sent != s.Intents {
		t.Errorf("the generator shed %d intents and sent %d of %d", info.Load.Shed, info.Load.Sent, s.Intents)
	}
	res := &Result{Result: &sim.Result{}, Lab: Info{Fleets: []FleetInfo{info}}}
	res.judge(sc, time.Second)
	return overload{f: f, info: info, samples: samples, in: res.Lab.Inconclusive}
}

type memSample struct {
	at         time.Duration
	heap       uint64
	goroutines int
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

// TestRunStopsWhenCancelled: Ctrl-C cancels the command's context; the run
// stops at once, shuts every server down, and leaves nothing running.
func TestRunStopsWhenCancelled(t *testing.T) {
	sc := stormScenario(t, 5)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := runFleets(ctx, sc, runOptions{Tick: 100 * time.Millisecond})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Run returned %v, want the context's error", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("Run took %v to stop", took)
	}
}
