package scenario

import (
	"strings"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/resil/outlier"
)

const replicasFile = `duration: 60s
traffic: {rate: 100}
origin:
  model: queue
  capacity: 500
  workers: 50
  replicas:
    count: 5
    faults:
      - {replica: 0, kind: latency, factor: 10}
      - {replica: 1, kind: errors, error_rate: 0.5}
      - {replica: 2, kind: blackhole}
triggers:
  - {kind: errors, at: 10s, for: 5s, error_rate: 1, replica: 3}
  - {kind: outage, at: 20s, for: 5s, mode: refuse, replica: 4}
fleets:
  - name: a
    timeout: 1s
    budget: {use: none}
    balancer: {use: ewma}
    outlier_detection: {use: envoy, settings: {max_ejection_percent: 67, max_ejection_rule: before, always_eject_one_host: true}}
  - name: b
    timeout: 1s
    budget: {use: none}
    outlier_detection: {use: grpc, settings: {enforcing_failure_percentage: 100, failure_percentage_minimum_hosts: 3}}
`

// TestParseReplicas: origin.replicas as a map of count and faults, triggers
// on one replica, a balancer and an outlier detector with each product's
// defaults filled in; and Marshal writes them back.
func TestParseReplicas(t *testing.T) {
	s, err := Parse("r.yaml", []byte(replicasFile))
	if err != nil {
		t.Fatal(err)
	}
	o := s.Origin
	if o.Replicas != 5 || len(o.Faults) != 3 || o.Faults[0] != (Fault{Replica: 0, Kind: FaultLatency, Factor: 10}) ||
		o.Faults[1] != (Fault{Replica: 1, Kind: FaultErrors, ErrorRate: 0.5}) || o.Faults[2] != (Fault{Replica: 2, Kind: FaultBlackhole}) {
		t.Errorf("origin %+v", o)
	}
	if r := s.Triggers[0].Replica; r == nil || *r != 3 {
		t.Errorf("trigger 0's replica %v", r)
	}
	a, b := s.Fleets[0], s.Fleets[1]
	if a.Balancer != (Balancer{Use: BalancerEWMA, PanicThreshold: 50, Decay: 10 * time.Second, DefaultRTT: 30 * time.Millisecond}) {
		t.Errorf("balancer %+v", a.Balancer)
	}
	want := outlier.EnvoyDefaults(0)
	want.Flavor, want.MaxEjectionPercent, want.MaxEjectionRule, want.AlwaysEjectOneHost = 0, 67, outlier.CheckBefore, true
	if a.OutlierDetection.Use != OutlierEnvoy || a.OutlierDetection.Settings != want {
		t.Errorf("envoy outlier detection %+v\nwant %+v", a.OutlierDetection.Settings, want)
	}
	g := b.OutlierDetection.Settings
	if b.Balancer.Use != "" || g.MaxEjectionRule != outlier.CheckBefore || g.Consecutive5xx != 0 || g.Enforcing.FailurePercentage != 100 || g.FailurePercentageMinimumHosts != 3 {
		t.Errorf("grpc outlier detection %+v", g)
	}
	out := checkValid(t, s)
	for _, w := range []string{"count: 5", "kind: blackhole", "replica: 3", "use: ewma", "max_ejection_rule: before"} {
		if !strings.Contains(string(out), w) {
			t.Errorf("Marshal left out %q:\n%s", w, out)
		}
	}
}

// TestReplicasAbsentMarshalsAsBefore: without faults, balancer or outlier
// detection, Marshal writes what it always wrote: replicas as a number,
// no balancer, no outlier_detection.
func TestReplicasAbsentMarshalsAsBefore(t *testing.T) {
	s, err := Parse("r.yaml", []byte("duration: 60s\ntraffic: {rate: 100}\norigin: {model: capacity, capacity: 100, replicas: 3}\n"+fleet))
	if err != nil {
		t.Fatal(err)
	}
	out := string(checkValid(t, s))
	if !strings.Contains(out, "replicas: 3") || strings.Contains(out, "balancer") || strings.Contains(out, "outlier") || strings.Contains(out, "count") {
		t.Errorf("Marshal:\n%s", out)
	}
}

func TestReplicaErrors(t *testing.T) {
	const start = "duration: 60s\ntraffic: {rate: 10}\n" // lines 1-2
	origin := func(replicas string) string {
		return "origin: {model: capacity, capacity: 10, replicas: " + replicas + "}\n" // line 3
	}
	fl := func(extra string) string {
		return "fleets:\n  - {name: a, timeout: 1s, budget: {use: none}, " + extra + "}\n" // line 6, after a blank line
	}
	for _, tt := range []struct {
		name, in, at, field, msg string
	}{
		{"fault beyond count", start + origin("{count: 2, faults: [{replica: 2, kind: blackhole}]}") + fleet, "", "origin.replicas.faults[0].replica", "replica 2, but the origin has 2"},
		{"fault twice", start + origin("{count: 2, faults: [{replica: 1, kind: blackhole}, {replica: 1, kind: blackhole}]}") + fleet, "", "origin.replicas.faults[1]", "has a blackhole fault already"},
		{"fault unknown kind", start + origin("{count: 2, faults: [{replica: 1, kind: slow}]}") + fleet, "3:90", "origin.replicas.faults[0].kind", `unknown value "slow"`},
		{"fault without factor", start + origin("{count: 2, faults: [{replica: 1, kind: latency}]}") + fleet, "3:71", "origin.replicas.faults[0]", "factor is required for kind: latency"},
		{"latency fault on the capacity model", start + origin("{count: 2, faults: [{replica: 1, kind: latency, factor: 5}]}") + fleet, "3:90", "origin.replicas.faults[0].kind", "the capacity model has no latency factor"},
		{"fault factor below 1", start + "origin: {model: concurrency, base: 10ms, replicas: {count: 2, faults: [{replica: 1, kind: latency, factor: 0.5}]}}\n" + fleet,
			"3:108", "origin.replicas.faults[0].factor", "must be in [1, 1000000]"},
		{"count missing", start + origin("{faults: []}") + fleet, "3:51", "origin.replicas", "count is required"},
		{"trigger replica beyond", start + origin("2") + "triggers: [{kind: errors, for: 1s, error_rate: 1, replica: 2}]\n" + fleet, "", "triggers[0].replica", "replica 2, but the origin has 2"},
		{"trigger replica on load", start + origin("2") + "triggers: [{kind: load, for: 1s, rate: 1, replica: 0}]\n" + fleet, "4:43", "triggers[0].replica", "replica does not apply to kind: load"},
		{"replica and replicas", start + origin("2") + "triggers: [{kind: latency, for: 1s, factor: 2, replicas: 1, replica: 0}]\n" + fleet, "4:61", "triggers[0].replica", "exclude each other"},
		{"stall one replica", start + origin("2") + "triggers: [{kind: outage, for: 1s, mode: stall, replica: 0}]\n" + fleet, "", "triggers[0].mode", "a stall of one replica"},
		{"unknown balancer", start + origin("2") + "\n" + fl("balancer: {use: fastest}"), "6:65", "fleets[0].balancer.use", `unknown value "fastest"`},
		{"decay for p2c", start + origin("2") + "\n" + fl("balancer: {use: p2c, settings: {decay: 1s}}"), "6:81", "fleets[0].balancer.settings.decay", "decay does not apply to use: p2c"},
		{"panic above 100", start + origin("2") + "\n" + fl("balancer: {use: p2c, settings: {panic_threshold: 101}}"), "", "fleets[0].balancer.settings.panic_threshold", "must be in [0, 100]"},
		{"percent above 100", start + origin("2") + "\n" + fl("outlier_detection: {use: envoy, settings: {max_ejection_percent: 150}}"), "", "fleets[0].outlier_detection.settings.max_ejection_percent", "must be 0 to 100"},
		{"grpc consecutive", start + origin("2") + "\n" + fl("outlier_detection: {use: grpc, settings: {consecutive_5xx: 5}}"), "6:91", "fleets[0].outlier_detection.settings.consecutive_5xx", "does not apply to use: grpc"},
		{"max below base", start + origin("2") + "\n" + fl("outlier_detection: {use: envoy, settings: {base_ejection_time: 60s, max_ejection_time: 30s}}"), "", "fleets[0].outlier_detection.settings.max_ejection_time", "cannot be smaller than BaseEjectionTime"},
		{"unknown rule", start + origin("2") + "\n" + fl("outlier_detection: {use: envoy, settings: {max_ejection_rule: sometimes}}"), "", "fleets[0].outlier_detection.settings.max_ejection_rule", `unknown value "sometimes"`},
		// Issue 37: a key given as 0 became the default (10s, 30s, 300s).
		{"interval 0", start + origin("2") + "\n" + fl("outlier_detection: {use: envoy, settings: {interval: 0s}}"), "6:102", "fleets[0].outlier_detection.settings.interval", "must be more than 0"},
		{"grpc interval 0", start + origin("2") + "\n" + fl("outlier_detection: {use: grpc, settings: {interval: 0ms}}"), "6:101", "fleets[0].outlier_detection.settings.interval", "must be more than 0"},
		{"base ejection time 0", start + origin("2") + "\n" + fl("outlier_detection: {use: envoy, settings: {base_ejection_time: 0s}}"), "", "fleets[0].outlier_detection.settings.base_ejection_time", "must be more than 0"},
		{"max ejection time 0", start + origin("2") + "\n" + fl("outlier_detection: {use: grpc, settings: {max_ejection_time: 0s}}"), "", "fleets[0].outlier_detection.settings.max_ejection_time", "must be more than 0"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Parse("t.yaml", []byte(tt.in))
			if s != nil {
				t.Fatal("a scenario with an error")
			}
			e, ok := err.(*Error)
			if !ok {
				t.Fatalf("error %v (%T)", err, err)
			}
			if e.Field != tt.field || !strings.Contains(e.Msg, tt.msg) || (tt.at != "" && !strings.Contains(err.Error(), ":"+tt.at+":")) {
				t.Errorf("error %q (field %q), want field %q, %q at %s", err, e.Field, tt.field, tt.msg, tt.at)
			}
		})
	}
}

// TestReplicaPolicyWithTiers: a fleet that calls tiers balances among the
// first tier's replicas and a tier's client among the next layer's, each
// checked against that layer (an error names the key), and a file with
// them survives Marshal. (Before issue 25's tiers, both were refused.)
func TestReplicaPolicyWithTiers(t *testing.T) {
	file := strings.NewReplacer(
		"hedge: {delay: 100ms}}", "hedge: {delay: 100ms}, balancer: {use: least_request}, outlier_detection: {use: grpc}}",
		"workers: 15}", "workers: 15, replicas: 3}",
		"capacity: 20}", "capacity: 20}\n  - {kind: errors, at: 60s, for: 10s, error_rate: 1, replica: 0}",
		"full}}\n    budget: {use: none}\n", "full}}\n    budget: {use: none}\n    balancer: {use: p2c}\n",
	).Replace(string(readTestdata(t, "tiers.yaml")))
	s, err := Parse("r.yaml", []byte(file))
	if err != nil {
		t.Fatalf("%v\n%s", err, file)
	}
	if s.Fleets[0].Balancer.Use != BalancerP2C || s.Triggers[1].Replica == nil {
		t.Fatalf("the edits did not apply:\n%s", file)
	}
	back, err := Parse("back.yaml", Marshal(s))
	if err != nil {
		t.Fatal(err)
	}
	if back.Tiers[2].Client.Balancer.Use != BalancerLeastRequest || !back.Tiers[2].Client.OutlierDetection.Detects() {
		t.Errorf("the tier's balancer and detector did not survive Marshal: %+v", back.Tiers[2].Client)
	}
	s.Tiers[1].Client.OutlierDetection = OutlierDetection{Use: OutlierEnvoy}
	s.Tiers[1].Client.OutlierDetection.Settings.Consecutive5xx = -1
	if e, ok := s.Validate().(*Error); !ok || !strings.HasPrefix(e.Field, "tiers[1].client.outlier_detection") {
		t.Errorf("Validate = %v, want an error on tiers[1].client.outlier_detection", s.Validate())
	}
}

// TestReplicaPolicyInCode: settings without use, and what the run
// supplies, are refused, so that what passes Validate survives Marshal.
func TestReplicaPolicyInCode(t *testing.T) {
	for _, tt := range []struct {
		name  string
		set   func(f *Fleet)
		field string
	}{
		{"panic threshold without use", func(f *Fleet) { f.Balancer.PanicThreshold = 5 }, "fleets[0].balancer.use"},
		{"outlier settings without use", func(f *Fleet) { f.OutlierDetection.Settings.Consecutive5xx = 5 }, "fleets[0].outlier_detection.use"},
		{"hosts given", func(f *Fleet) {
			f.OutlierDetection = OutlierDetection{Use: OutlierEnvoy, Settings: outlier.EnvoyDefaults(3)}
		}, "fleets[0].outlier_detection"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Parse("r.yaml", []byte("duration: 60s\ntraffic: {rate: 100}\norigin: {model: capacity, capacity: 100, replicas: 3}\n"+fleet))
			if err != nil {
				t.Fatal(err)
			}
			tt.set(&s.Fleets[0])
			e, ok := s.Validate().(*Error)
			if !ok || e.Field != tt.field {
				t.Errorf("Validate = %v, want an error on %s", s.Validate(), tt.field)
			}
		})
	}
}

// TestOutlierRuleSpelledOut: in code, as in a parsed file, the max
// ejection rule is spelled out (the fuzzer found a scenario whose rule
// Marshal could not write), and so are the interval and the ejection
// times (a file's 0 is refused, not read as the default).
func TestOutlierRuleSpelledOut(t *testing.T) {
	s, err := Parse("r.yaml", []byte("duration: 60s\ntraffic: {rate: 100}\norigin: {model: capacity, capacity: 100, replicas: 3}\n"+fleet))
	if err != nil {
		t.Fatal(err)
	}
	s.Fleets[0].OutlierDetection.Use = OutlierGRPC
	if e, ok := s.Validate().(*Error); !ok || e.Field != "fleets[0].outlier_detection.settings.max_ejection_rule" {
		t.Errorf("Validate = %v", s.Validate())
	}
	s.Fleets[0].OutlierDetection.Settings.MaxEjectionRule = outlier.CheckBefore
	if e, ok := s.Validate().(*Error); !ok || e.Field != "fleets[0].outlier_detection.settings.interval" {
		t.Errorf("Validate = %v, want the zero interval refused", s.Validate())
	}
	g := outlier.GRPCDefaults(0)
	s.Fleets[0].OutlierDetection.Settings.Interval, s.Fleets[0].OutlierDetection.Settings.BaseEjectionTime, s.Fleets[0].OutlierDetection.Settings.MaxEjectionTime = g.Interval, g.BaseEjectionTime, g.MaxEjectionTime
	checkValid(t, s)
}
