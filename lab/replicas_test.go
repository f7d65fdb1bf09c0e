package lab

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/experiment"
	"github.com/retrystorm/retrystorm/report"
	"github.com/retrystorm/retrystorm/scenario"
)

// TestLabReplicasAgreeWithSimulator runs testdata/replicas.yaml (three
// replicas, replica 1 answering only errors, round robin and Envoy's
// outlier detection) in the simulator and in the lab, whose origin is
// three servers on loopback and whose gateway picks and ejects through
// resilhttp.Replicas. Each replica's attempts, successes and failures per
// tick agree within the lab's offered-load tolerance; the bad replica is
// ejected as often (within one ejection) and as long (within two ticks a
// ejection) in both; the lab's result passes the simulator's identities
// (runBoth: CheckMeasured), the per-replica ones included. A loaded machine
// makes a run inconclusive, measured again (runBoth: conclusive), never a
// false verdict.
func TestLabReplicasAgreeWithSimulator(t *testing.T) {
	if testing.Short() {
		t.Skip("three replicas over real HTTP take 7 s: skipped with -short")
	}
	if raceEnabled {
		t.Skip("the race detector slows real HTTP several times over: the lab would measure it")
	}
	if ownProcess(t) {
		return
	}
	sc, err := scenario.Load("testdata/replicas.yaml")
	if err != nil {
		t.Fatal(err)
	}
	simRes, res, tick := runBoth(t, sc, DefaultTick, ProtocolHTTP)
	out := experiment.LabOutcome(sc, simRes, res.Result, experiment.LabOptions{WallTick: tick})
	b := outcomeText(out)
	t.Log("\n" + b.String())
	if !report.AllHold(out.Claims) {
		t.Error("the lab and the simulator disagree (see the claims above)")
	}
	if !strings.Contains(b.String(), "lab: ejecting: replica by replica") {
		t.Error("the lab's section has no table of the replicas")
	}
	ticks := float64(len(simRes.Fleets[0].Series.Tick))
	tol := experiment.LabTolerances.Offered
	sf, lf := simRes.Fleets[0], res.Fleets[0]
	if len(lf.Replicas) != 3 || len(sf.Replicas) != 3 {
		t.Fatalf("replicas: lab %d, simulator %d, want 3 each", len(lf.Replicas), len(sf.Replicas))
	}
	for i := range sf.Replicas {
		s, l := sf.Replicas[i], lf.Replicas[i]
		for _, c := range []struct {
			what     string
			sim, lab int64
		}{
			{"attempts", s.Attempts, l.Attempts},
			{"successes", s.Successes, l.Successes},
			{"failures", s.Failures, l.Failures},
		} {
			sv, lv := float64(c.sim)/ticks, float64(c.lab)/ticks
			if allowed := max(tol.Rel*sv, tol.Abs); math.Abs(sv-lv) > allowed {
				t.Errorf("replica %d: %s per tick: lab %.2f, simulator %.2f (allowed %.2f)", i, c.what, lv, sv, allowed)
			}
		}
		if d := l.Ejections - s.Ejections; d < -1 || d > 1 {
			t.Errorf("replica %d: ejections: lab %d, simulator %d", i, l.Ejections, s.Ejections)
		}
		allowed := 2 * sc.Tick.Seconds() * float64(max(s.Ejections, 1))
		if d := math.Abs(l.EjectedSeconds - s.EjectedSeconds); d > allowed {
			t.Errorf("replica %d: ejected %.0f s in the lab, %.0f s in the simulator (allowed %.0f s)", i, l.EjectedSeconds, s.EjectedSeconds, allowed)
		}
	}
	// The story: the bad replica is out most of the run in both, and its
	// failures are all its own.
	for name, f := range map[string]struct{ ejected, run float64 }{
		"lab":       {lf.Replicas[1].EjectedSeconds, ticks * sc.Tick.Seconds()},
		"simulator": {sf.Replicas[1].EjectedSeconds, ticks * sc.Tick.Seconds()},
	} {
		if f.ejected < f.run/2 {
			t.Errorf("%s: replica 1 ejected %.0f s of %.0f", name, f.ejected, f.run)
		}
	}
	for _, r := range []int{0, 2} {
		if n := lf.Replicas[r].Failures; n > 0 {
			t.Errorf("lab: healthy replica %d failed %d attempts", r, n)
		}
	}
}

// TestLabRunsReplicasWithTheirFaults: a replica's fault and a trigger on
// one replica reach that replica's server alone, and the origin is split
// as the simulator splits it (its share of the capacity and workers each).
func TestLabRunsReplicasWithTheirFaults(t *testing.T) {
	one := 1
	o := scenario.Origin{Model: scenario.ModelQueue, Capacity: 300, Workers: 6, QueueLimit: 30, Replicas: 3,
		Faults: []scenario.Fault{{Replica: 2, Kind: scenario.FaultBlackhole}}}
	triggers := []scenario.Trigger{
		{Kind: scenario.TriggerErrors, At: time.Second, For: time.Second, ErrorRate: 0.5, Replica: &one},
		{Kind: scenario.TriggerCapacity, At: 0, For: time.Second, Capacity: 150},
	}
	set, err := newOriginSet(OriginConfig{Origin: o, Triggers: triggers})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		at      time.Duration
		replica int
		want    env
	}{
		{0, 0, env{capacity: 50, factor: 1}},
		{0, 2, env{capacity: 50, factor: 1, outage: true, mode: scenario.OutageBlackhole}},
		{1500 * time.Millisecond, 0, env{capacity: 100, factor: 1}},
		{1500 * time.Millisecond, 1, env{capacity: 100, errRate: 0.5, factor: 1}},
		{1500 * time.Millisecond, 2, env{capacity: 100, factor: 1, outage: true, mode: scenario.OutageBlackhole}},
	} {
		if got := set.reps[c.replica].envAt(set.reps[c.replica].faults(), c.at); got != c.want {
			t.Errorf("replica %d at %v: %+v, want %+v", c.replica, c.at, got, c.want)
		}
	}
	// One replica's origin stays the origin it was: the same env as
	// before replicas.
	single := scenario.Origin{Model: scenario.ModelQueue, Capacity: 300, Workers: 6, QueueLimit: 30}
	org, err := NewOrigin(OriginConfig{Origin: single, Triggers: triggers[1:]})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := org.envAt(triggers[1:], 0), envAt(&single, triggers[1:], 0); got != want {
		t.Errorf("one replica: %+v, want %+v", got, want)
	}
}

// What the lab still does not play with replicas is refused by its key,
// rather than run as something the scenario does not say; what it plays
// now (a fault, a trigger on one replica, a balancer, outlier detection)
// is not.
func TestLabRefusesReplicaSettings(t *testing.T) {
	zero := 0
	load := func(t *testing.T) *scenario.Scenario {
		sc, err := scenario.Load("testdata/replicas.yaml")
		if err != nil {
			t.Fatal(err)
		}
		return sc
	}
	for _, c := range []struct {
		name     string
		change   func(sc *scenario.Scenario)
		protocol Protocol
		target   bool
		want     string // "": played
	}{
		{"a fault, a balancer, outlier detection", func(*scenario.Scenario) {}, ProtocolHTTP, false, ""},
		{"a trigger on one replica", func(sc *scenario.Scenario) {
			sc.Triggers = []scenario.Trigger{{Kind: scenario.TriggerErrors, At: time.Second, For: time.Second, ErrorRate: 1, Replica: &zero}}
		}, ProtocolHTTP, false, ""},
		{"over gRPC", func(*scenario.Scenario) {}, ProtocolGRPC, false, "--protocol grpc"},
		{"against a target", func(*scenario.Scenario) {}, ProtocolHTTP, true, "--target"},
		{"a hedge", func(sc *scenario.Scenario) {
			sc.Fleets[0].Hedge = scenario.Hedge{Delay: 200 * time.Millisecond, Max: 1}
		}, ProtocolHTTP, false, "fleets[0].hedge"},
		{"a consecutive gateway failure rule", func(sc *scenario.Scenario) {
			sc.Fleets[0].OutlierDetection.Settings.Enforcing.ConsecutiveGatewayFailure = 100
		}, ProtocolHTTP, false, "fleets[0].outlier_detection.enforcing_consecutive_gateway_failure"},
		// A tier's own balancer (issue 25, on tiers in the simulator): the
		// lab's tiers call one server each, so it is refused, not dropped.
		{"a tier's balancer", func(sc *scenario.Scenario) {
			sc.Origin.Replicas, sc.Origin.Faults, sc.Fleets[0].Balancer, sc.Fleets[0].OutlierDetection = 1, nil, scenario.Balancer{}, scenario.OutlierDetection{}
			sc.Tiers = []scenario.Tier{{Name: "edge", Client: scenario.Client{Balancer: scenario.Balancer{Use: scenario.BalancerP2C}}}}
		}, ProtocolHTTP, false, "tiers[0].client.balancer"},
	} {
		t.Run(c.name, func(t *testing.T) {
			sc := load(t)
			c.change(sc)
			var target *Target
			if c.target {
				target = &Target{}
			}
			errs := []error{refuse(sc, c.protocol, target)}
			if c.protocol == ProtocolHTTP && !c.target {
				errs = append(errs, Check(sc))
			}
			for _, err := range errs {
				switch {
				case c.want == "" && err != nil:
					t.Errorf("refused: %v", err)
				case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
					t.Errorf("got %v, want an error naming %s", err, c.want)
				}
			}
		})
	}
	// Tiers with replicas: the storm's chain (stack) with three replicas.
	sc := load(t)
	sc.Tiers = []scenario.Tier{{Name: "edge"}}
	if err := refuseReplicas(sc); err == nil || !strings.Contains(err.Error(), "origin.replicas with tiers") {
		t.Errorf("tiers: got %v", err)
	}
}

// TestLabReplicasSmoke runs testdata/replicas.yaml for 20 ticks through
// every component, under the race detector too: three origin servers, the
// gateway's picks and ejections, the per-replica counts and their
// identities (CheckMeasured), and nothing left behind (TestMain).
func TestLabReplicasSmoke(t *testing.T) {
	sc, err := scenario.Load("testdata/replicas.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// A third of the load, as TestLabSmoke's: the race detector slows
	// real HTTP several times over.
	sc.Duration, sc.Traffic.Rate = 20*time.Second, 20
	res, err := runFleets(t.Context(), sc, runOptions{Tick: DefaultTick})
	if err != nil {
		t.Fatal(err)
	}
	checkTallies(t, res)
	f := res.Fleets[0]
	if len(f.Replicas) != 3 {
		t.Fatalf("%d replicas in the result, want 3", len(f.Replicas))
	}
	t.Logf("%+v, none for %d", f.Replicas, f.NoHealthyReplica)
	if r := f.Replicas[1]; r.Successes != 0 || r.Failures == 0 || r.Ejections == 0 {
		t.Errorf("replica 1, which answers only errors: %+v", r)
	}
	for _, r := range []int{0, 2} {
		if got := f.Replicas[r]; got.Successes == 0 || got.Ejections != 0 {
			t.Errorf("healthy replica %d: %+v", r, got)
		}
	}
}
