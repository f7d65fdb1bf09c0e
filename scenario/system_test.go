package scenario

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// systemErrorTests are the rules of issue 39's keys, each refused with the
// file's line and column and the field's path, as every other.
var systemErrorTests = []struct {
	name, in, at, field, msg string
}{
	{"rate of a closed loop", "duration: 60s\ntraffic: {rate: 10, arrivals: closed}\norigin: {model: capacity, capacity: 10}\n" + fleet, "2:17", "traffic.rate", "does not apply to arrivals: closed"},
	{"think of an open loop", "duration: 60s\ntraffic: {rate: 10, think: 1s}\norigin: {model: capacity, capacity: 10}\n" + fleet, "2:28", "traffic.think", "applies to arrivals: closed only"},
	{"ramp without for", "duration: 60s\ntraffic: {rate: 10, ramp: {from: 1}}\norigin: {model: capacity, capacity: 10}\n" + fleet, "2:27", "traffic.ramp", "for is required"},
	{"ramp with a closed loop", "duration: 60s\ntraffic: {arrivals: closed, ramp: {for: 5s}}\norigin: {model: capacity, capacity: 10}\n" + fleet, "2:35", "traffic.ramp", "does not apply to arrivals: closed"},
	{"load latency of the capacity model", "duration: 60s\ntraffic: {rate: 10}\norigin: {model: capacity, capacity: 10, load_latency: {curve: linear, factor: 1}}\n" + fleet, "3:41", "origin.load_latency", "load_latency does not apply to the capacity model; it is a setting of the queue model"},
	{"unknown curve", head2 + "  load_latency: {curve: cubic, factor: 1}\n" + fleet, "6:25", "origin.load_latency.curve", "unknown value \"cubic\""},
	{"exponent of an exponential curve", head2 + "  load_latency: {curve: exponential, factor: 1, exponent: 2}\n" + fleet, "6:49", "origin.load_latency.exponent", "exponent does not apply to curve: exponential; it is a setting of curve: power"},
	{"steep exponential", head2 + "  load_latency: {curve: exponential, factor: 30}\n" + fleet, "6:46", "origin.load_latency.factor", "must be in (0, 20], got 30"},
	{"server and cache", head + "tiers:\n  - {name: c, server: {model: capacity, capacity: 5}, cache: {keys: 5}, client: {timeout: 1s, budget: {use: none}}}\n" + fleet, "5:15", "tiers[0].server", "server and cache exclude each other"},
	{"cache without keys", head + "tiers:\n  - {name: c, cache: {ttl: 5s}, client: {timeout: 1s, budget: {use: none}}}\n" + fleet, "5:22", "tiers[0].cache", "keys is required"},
	{"cache capacity above keys", head + "tiers:\n  - {name: c, cache: {keys: 5, capacity: 6}, client: {timeout: 1s, budget: {use: none}}}\n" + fleet, "5:42", "tiers[0].cache.capacity", "must be in [0, 5], got 6"},
	{"cache jitter without ttl", head + "tiers:\n  - {name: c, cache: {keys: 5, ttl_jitter: 0.1}, client: {timeout: 1s, budget: {use: none}}}\n" + fleet, "5:44", "tiers[0].cache.ttl_jitter", "ttl is 0s"},
	{"pool without size", withFleet("    pool: {wait_timeout: 1s}\n"), "8:11", "fleets[0].pool", "size is required"},
	{"pool of none", withFleet("    pool: {size: 0}\n"), "8:18", "fleets[0].pool.size", "must be in [1, 1000000], got 0"},
	{"flush without a cache", head + "triggers: [{kind: flush, at: 5s}]\n" + fleet, "4:19", "triggers[0].kind", "a flush needs a cache"},
	{"flush of no cache", head + "tiers:\n  - {name: c, cache: {keys: 5}, client: {timeout: 1s, budget: {use: none}}}\ntriggers: [{kind: flush, cache: d}]\n" + fleet, "6:33", "triggers[0].cache", "\"d\" is no cache of the scenario"},
	{"flush mode", head + "triggers: [{kind: flush, mode: refuse}]\n" + fleet, "4:32", "triggers[0].mode", "unknown value \"refuse\""},
	{"partition of no link", head + "tiers:\n  - {name: c, cache: {keys: 5}, client: {timeout: 1s, budget: {use: none}}}\ntriggers: [{kind: partition, for: 1s, from: b, to: c}]\n" + fleet, "6:45", "triggers[0].from", "\"b\" is no fleet or layer"},
	{"partition skipping a layer", head + "tiers:\n  - {name: c, cache: {keys: 5}, client: {timeout: 1s, budget: {use: none}}}\ntriggers: [{kind: partition, for: 1s, from: x, to: origin}]\n" + withName("x"), "6:52", "triggers[0].to", "fleet x does not call origin: it calls c"},
	{"cpu of the capacity model", head + "triggers: [{kind: cpu, for: 1s, share: 0.5}]\n" + fleet, "4:19", "triggers[0].kind", "the capacity model has no service to slow"},
	{"cpu share 1", head2 + "triggers: [{kind: cpu, for: 1s, share: 1}]\n" + fleet, "6:40", "triggers[0].share", "must be in (0, 1)"},
	{"burst without count", head + "triggers: [{kind: burst, for: 1s}]\n" + fleet, "4:12", "triggers[0]", "count is required for kind: burst"},
	{"a fleet's traffic without shared", withFleet("    traffic: {rate: 5}\n"), "8:14", "fleets[0].traffic", "needs shared: true"},
	{"a trigger's fleet without shared", head + "triggers: [{kind: load, for: 1s, rate: 5, fleet: a}]\n" + fleet, "4:50", "triggers[0].fleet", "only a shared scenario"},
	{"calls no layer", withFleet("    calls: cache\n"), "8:12", "fleets[0].calls", "\"cache\" is no layer of the scenario"},
	{"shared without traffic", "duration: 60s\nshared: true\norigin: {model: capacity, capacity: 10}\n" + fleet, "5:5", "fleets[0].traffic", "is required: the scenario gives no traffic"},
	{"hedging in a system", withFleet("    hedge: {delay: 100ms}\n    pool: {size: 3}\n"), "8:12", "fleets[0].hedge", "hedging is not simulated together with shared fleets, caches, pools"},
}

// head2 is head with a queue origin in block style, whose map the test
// continues on line 6.
const head2 = "duration: 60s\ntraffic: {rate: 10}\norigin:\n  model: queue\n  capacity: 10\n"

func withName(name string) string {
	return strings.Replace(fleet, "name: a", "name: "+name, 1)
}

func TestSystemErrors(t *testing.T) {
	for _, tt := range systemErrorTests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Parse("t.yaml", []byte(tt.in))
			if s != nil {
				t.Fatalf("Parse returned a scenario with the error %v", err)
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Parse error = %#v, want an *Error", err)
			}
			if tt.at != "" && position(e) != tt.at {
				t.Errorf("at %q, want %q: %v", position(e), tt.at, e)
			}
			if e.Field != tt.field || !strings.Contains(e.Msg, tt.msg) {
				t.Errorf("%v: want field %q and a message with %q", e, tt.field, tt.msg)
			}
		})
	}
}

// TestSystemRoundTrip: the file of every new key reads, validates, is a
// system, and marshals back to what it read (TestRoundTrip's checkValid);
// a file without them is no system.
func TestSystemRoundTrip(t *testing.T) {
	s, err := Load("testdata/system.yaml")
	if err != nil {
		t.Fatal(err)
	}
	checkValid(t, s)
	if !s.System() {
		t.Error("testdata/system.yaml is not a system")
	}
	if s.Entry(1) != 1 || s.TrafficOf(1).Think == 0 || s.TrafficOf(0) != &s.Traffic {
		t.Errorf("fleets: entries %d, %d; workers' traffic %+v", s.Entry(0), s.Entry(1), s.TrafficOf(1))
	}
	plain, err := Load("testdata/storm.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if plain.System() {
		t.Error("the storm is a system")
	}
}

// TestRampAndBurstRates: a ramp's rate at each tick's start, and a burst
// added to a load trigger's rate whatever their order.
func TestRampAndBurstRates(t *testing.T) {
	tr := Traffic{Rate: 100, Ramp: Ramp{From: 20, At: 2e9, For: 4e9}}
	for at, want := range map[int64]float64{0: 20, 1e9: 20, 2e9: 20, 3e9: 40, 3.5e9: 40, 5e9: 80, 6e9: 100, 9e9: 100} {
		if got := tr.RateAt(timeOf(at), 1e9); got != want {
			t.Errorf("ramp at %v: %v, want %v", timeOf(at), got, want)
		}
	}
	burst := Trigger{Kind: TriggerBurst, At: 0, For: 1e9, Count: 50}
	load := Trigger{Kind: TriggerLoad, At: 0, For: 1e9, Rate: 10}
	for _, order := range [][]Trigger{{burst, load}, {load, burst}} {
		if c := At(Conditions{Rate: 100}, order, 5e8); c.Rate != 60 {
			t.Errorf("a load of 10 and a burst of 50/s: rate %v, want 60", c.Rate)
		}
	}
}

func timeOf(ns int64) time.Duration { return time.Duration(ns) }
