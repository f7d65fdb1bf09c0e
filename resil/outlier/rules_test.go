package outlier

import (
	"errors"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/resil"
)

// The tables below are written from the upstream rules, not from this
// package's code. Sources:
//   - Envoy: source/common/upstream/outlier_detection_impl.cc at commit
//     00c7146d95ff67fc55c78f036d6236689b66e72f (DetectorImpl::ejectHost,
//     putHttpResponseCode, putResultWithLocalExternalSplit,
//     successRateEjectionThreshold, processSuccessRateEjections,
//     checkHostForUneject, onIntervalTimer); the pre-2023 ejectHost (issue
//     26877 links it at 54809a05: ejected_percent = 100 × active / hosts;
//     eject if ejected_percent < max), PRs 27624 and 27909 (2023) and
//     34796 (always_eject_one_host, 2024).
//   - Envoy's panic: source/common/upstream/load_balancer_impl.cc,
//     LoadBalancerBase::isHostSetInPanic and recalculatePerPriorityState
//     (overprovisioning factor 1.4).
//   - gRPC: grpc/proposal A50-xds-outlier-detection.md at 1fd061ad, and
//     grpc-go internal/xds/balancer/outlierdetection/balancer.go at
//     4793ad04 (v1.85.0-dev): successRateAlgorithm,
//     failurePercentageAlgorithm, intervalTimerAlgorithm.

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

// TestMayEjectTable: Envoy's ejectHost check today ((active+1)/hosts <=
// max), before 2023 (active/hosts < max, which gRPC's "percentage of
// ejected addresses >= max_ejection_percent: stop" is the negation of), and
// always_eject_one_host.
func TestMayEjectTable(t *testing.T) {
	tests := []struct {
		name                string
		rule                MaxEjectionRule
		ejected, hosts, max int
		alwaysOne, want     bool
	}{
		// Issue 27066: 3 hosts at 67%.
		{"27066 before 0/3", CheckBefore, 0, 3, 67, false, true},
		{"27066 before 1/3", CheckBefore, 1, 3, 67, false, true},
		{"27066 before 2/3: the third goes too", CheckBefore, 2, 3, 67, false, true},
		{"27066 after 0/3", CheckAfter, 0, 3, 67, false, true},
		{"27066 after 1/3", CheckAfter, 1, 3, 67, false, true},
		{"27066 after 2/3: 100% > 67%", CheckAfter, 2, 3, 67, false, false},
		// Issue 26877: 3 hosts at 50% ejected two.
		{"26877 before 1/3", CheckBefore, 1, 3, 50, false, true},
		{"26877 before 2/3", CheckBefore, 2, 3, 50, false, false},
		{"26877 after 1/3: 66.7% > 50%", CheckAfter, 1, 3, 50, false, false},
		// Issue 3263: 2 hosts at the default 10% still ejected one.
		{"3263 before", CheckBefore, 0, 2, 10, false, true},
		{"3263 after", CheckAfter, 0, 2, 10, false, false},
		{"3263 after, always_eject_one_host", CheckAfter, 0, 2, 10, true, true},
		{"always_eject_one_host only the first", CheckAfter, 1, 2, 10, true, false},
		{"max 0 before", CheckBefore, 0, 5, 0, false, false},
		{"max 0 after", CheckAfter, 0, 5, 0, false, false},
		{"max 0 always one", CheckAfter, 0, 5, 0, true, true},
		{"10 hosts 10% after first", CheckAfter, 0, 10, 10, false, true},
		{"10 hosts 10% after second", CheckAfter, 1, 10, 10, false, false},
		{"10 hosts 10% before second: 10 < 10 false", CheckBefore, 1, 10, 10, false, false},
		{"1 host 100%", CheckAfter, 0, 1, 100, false, true},
		{"1 host 99%", CheckAfter, 0, 1, 99, false, false},
		{"percent above 100 is 100 (Envoy's min(100, …))", CheckAfter, 2, 3, 250, false, true},
		{"no hosts", CheckAfter, 0, 0, 100, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := MayEject(tt.rule, tt.ejected, tt.hosts, tt.max, tt.alwaysOne); got != tt.want {
				t.Errorf("MayEject(%v, %d, %d, %d, %v) = %v, want %v", tt.rule, tt.ejected, tt.hosts, tt.max, tt.alwaysOne, got, tt.want)
			}
		})
	}
}

// TestMaxEjectionEndToEnd: 2 of 3 hosts failing at 67% (the issue's
// experiment), through the detector: before 2023 both go, and a third
// failing host would too; today only two.
func TestMaxEjectionEndToEnd(t *testing.T) {
	tests := []struct {
		rule    MaxEjectionRule
		failing int
		want    int
	}{
		{CheckBefore, 2, 2}, {CheckAfter, 2, 2}, {CheckBefore, 3, 3}, {CheckAfter, 3, 2},
	}
	for _, tt := range tests {
		s := EnvoyDefaults(3)
		s.MaxEjectionPercent, s.MaxEjectionRule = 67, tt.rule
		d, err := New(s)
		if err != nil {
			t.Fatal(err)
		}
		for h := 0; h < tt.failing; h++ {
			for k := 0; k < 5; k++ {
				d.Record(t0, h, Error5xx)
			}
		}
		if got := d.EjectedCount(); got != tt.want {
			t.Errorf("%v, %d failing: %d ejected, want %d", tt.rule, tt.failing, got, tt.want)
		}
	}
}

// TestConsecutiveTable: putHttpResponseCode's counters (a 5xx counts for
// consecutive_5xx; 502/503/504 also for the gateway count, any other 5xx
// resets it; a non-5xx resets both), resultToHttpCode without the split
// (timeout 504, connect failure 503) and putResultWithLocalExternalSplit
// with it. Envoy's defaults: thresholds 5, enforcing 100 for 5xx and local
// origin, 0 for gateway failures.
func TestConsecutiveTable(t *testing.T) {
	E, G, L, S := Error5xx, GatewayError, LocalFailure, Success
	rows := []struct {
		name   string
		tweak  func(*Settings)
		seq    []Result
		want   bool
		reason Reason
	}{
		{"five 500s", nil, []Result{E, E, E, E, E}, true, Consecutive5xx},
		{"four 500s", nil, []Result{E, E, E, E}, false, NotEjected},
		{"a success resets", nil, []Result{E, E, E, E, S, E, E, E, E}, false, NotEjected},
		{"a 404 is a success", nil, []Result{E, E, E, E, FromHTTPStatus(404), E}, false, NotEjected},
		{"gateway errors count as 5xx", nil, []Result{G, G, E, G, G}, true, Consecutive5xx},
		{"five 503s, gateway rule not enforced (default 0): the 5xx rule ejects", nil,
			[]Result{G, G, G, G, G}, true, Consecutive5xx},
		{"five 503s, gateway rule enforced: it fires first", func(s *Settings) { s.Enforcing.ConsecutiveGatewayFailure = 100 },
			[]Result{G, G, G, G, G}, true, ConsecutiveGatewayFailure},
		{"a 500 resets the gateway count", func(s *Settings) {
			s.Enforcing.ConsecutiveGatewayFailure = 100
			s.Consecutive5xx = 0
		}, []Result{G, G, G, G, E, G}, false, NotEjected},
		{"no split: timeouts are gateway errors", nil, []Result{L, L, L, L, L}, true, Consecutive5xx},
		{"split: five local failures", func(s *Settings) { s.SplitExternalLocalOriginErrors = true },
			[]Result{L, L, L, L, L}, true, ConsecutiveLocalOriginFailure},
		{"split: an answer resets the local count", func(s *Settings) { s.SplitExternalLocalOriginErrors = true },
			[]Result{L, L, L, L, E, L}, false, NotEjected},
		{"split: a local failure is no 5xx", func(s *Settings) { s.SplitExternalLocalOriginErrors = true },
			[]Result{E, E, E, E, L}, false, NotEjected},
		{"split: nor does it reset the 5xx count", func(s *Settings) { s.SplitExternalLocalOriginErrors = true },
			[]Result{E, E, E, E, L, E}, true, Consecutive5xx},
		{"threshold 0 is off", func(s *Settings) { s.Consecutive5xx = 0 }, []Result{E, E, E, E, E, E}, false, NotEjected},
		{"enforcing 0 detects but does not eject", func(s *Settings) { s.Enforcing.Consecutive5xx = 0 },
			[]Result{E, E, E, E, E}, false, NotEjected},
		{"the count restarts after a detection (here unenforced)", func(s *Settings) { s.Enforcing.Consecutive5xx = 0 },
			[]Result{E, E, E, E, E, E, E, E, E}, false, NotEjected},
	}
	for _, tt := range rows {
		t.Run(tt.name, func(t *testing.T) {
			s := EnvoyDefaults(2)
			s.MaxEjectionPercent = 100
			if tt.tweak != nil {
				tt.tweak(&s)
			}
			d, err := New(s)
			if err != nil {
				t.Fatal(err)
			}
			for k, r := range tt.seq {
				if err := d.Record(at(float64(k)), 0, r); err != nil {
					t.Fatal(err)
				}
			}
			h := d.Host(0)
			if h.Ejected != tt.want || h.Reason != tt.reason {
				t.Errorf("ejected %v (%v), want %v (%v)", h.Ejected, h.Reason, tt.want, tt.reason)
			}
		})
	}
}

// feed records ok successes and bad failures for host h.
func feed(d *Detector, h, ok, bad int) {
	for k := 0; k < ok; k++ {
		d.Record(t0, h, Success)
	}
	for k := 0; k < bad; k++ {
		d.Record(t0, h, Error5xx)
	}
}

// TestSuccessRateTable: Envoy's worked example in
// successRateEjectionThreshold (success rates 50, 100, 100, 100, 100: mean
// 90, stdev 20, threshold 52 at factor 1.9), the minimum hosts and request
// volume, and A50's same rule.
func TestSuccessRateTable(t *testing.T) {
	tests := []struct {
		name   string
		flavor Flavor
		tweak  func(*Settings)
		oks    []int // successes of 100 requests per host
		vols   []int // requests per host, 100 when 0
		want   []bool
	}{
		{"Envoy's example", Envoy, nil, []int{50, 100, 100, 100, 100}, nil, []bool{true, false, false, false, false}},
		{"gRPC, the same", GRPC, nil, []int{50, 100, 100, 100, 100}, nil, []bool{true, false, false, false, false}},
		{"factor 2.6: threshold 38 < 50", Envoy, func(s *Settings) { s.SuccessRateStdevFactor = 2.6 },
			[]int{50, 100, 100, 100, 100}, nil, []bool{false, false, false, false, false}},
		{"one host short of the volume: 4 hosts < minimum 5", Envoy, nil,
			[]int{50, 100, 100, 100, 100}, []int{100, 99, 100, 100, 100}, []bool{false, false, false, false, false}},
		{"minimum hosts 4 (mean 87.5, stdev 21.65, factor 1: 65.8)", Envoy, func(s *Settings) {
			s.SuccessRateMinimumHosts, s.SuccessRateStdevFactor = 4, 1
		},
			[]int{50, 100, 100, 100, 100}, []int{100, 99, 100, 100, 100}, []bool{true, false, false, false, false}},
		{"all equal: stdev 0, nobody below the mean", Envoy, nil, []int{90, 90, 90, 90, 90}, nil, []bool{false, false, false, false, false}},
		{"Envoy, default 10%: (0+1)/5 = 20% > 10%", Envoy, func(s *Settings) { s.MaxEjectionPercent = 10 },
			[]int{50, 100, 100, 100, 100}, nil, []bool{false, false, false, false, false}},
		{"gRPC, default 10%: 0/5 < 10%", GRPC, func(s *Settings) { s.MaxEjectionPercent = 10 },
			[]int{50, 100, 100, 100, 100}, nil, []bool{true, false, false, false, false}},
		{"gRPC, rule off (enforcement 0)", GRPC, func(s *Settings) { s.Enforcing.SuccessRate = 0 },
			[]int{50, 100, 100, 100, 100}, nil, []bool{false, false, false, false, false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := EnvoyDefaults(len(tt.oks))
			if tt.flavor == GRPC {
				s = GRPCDefaults(len(tt.oks))
			}
			s.MaxEjectionPercent = 100
			s.Consecutive5xx = 0
			if tt.tweak != nil {
				tt.tweak(&s)
			}
			d, err := New(s)
			if err != nil {
				t.Fatal(err)
			}
			d.Advance(t0)
			for h, ok := range tt.oks {
				vol := 100
				if tt.vols != nil {
					vol = tt.vols[h]
				}
				feed(d, h, ok*vol/100, vol-ok*vol/100)
			}
			d.Advance(t0.Add(s.Interval))
			for h, w := range tt.want {
				if got := d.Ejected(h); got != w {
					t.Errorf("host %d ejected %v, want %v", h, got, w)
				}
			}
		})
	}
}

// TestFailurePercentageTable: Envoy ejects at 100 − success rate >=
// threshold (processSuccessRateEjections); A50 and grpc-go at failure
// percentage > threshold.
func TestFailurePercentageTable(t *testing.T) {
	tests := []struct {
		name   string
		flavor Flavor
		bad    int // failures of 100 on host 0; the others fail none
		volume int
		hosts  int
		want   bool
	}{
		{"Envoy at the threshold", Envoy, 85, 100, 5, true},
		{"gRPC at the threshold", GRPC, 85, 100, 5, false},
		{"Envoy below", Envoy, 84, 100, 5, false},
		{"gRPC above", GRPC, 86, 100, 5, true},
		{"Envoy, volume 49 < 50", Envoy, 49, 49, 5, false},
		{"gRPC, 4 hosts < minimum 5", GRPC, 90, 100, 4, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := EnvoyDefaults(tt.hosts)
			if tt.flavor == GRPC {
				s = GRPCDefaults(tt.hosts)
			}
			s.MaxEjectionPercent, s.Consecutive5xx = 100, 0
			s.Enforcing.SuccessRate, s.Enforcing.FailurePercentage = 0, 100
			d, err := New(s)
			if err != nil {
				t.Fatal(err)
			}
			d.Advance(t0)
			feed(d, 0, tt.volume-tt.bad, tt.bad)
			for h := 1; h < tt.hosts; h++ {
				feed(d, h, 100, 0)
			}
			d.Advance(t0.Add(s.Interval))
			if got := d.Ejected(0); got != tt.want {
				t.Errorf("ejected %v, want %v", got, tt.want)
			}
		})
	}
}

// TestEjectionTimeTable: Envoy's checkHostForUneject (back at the first
// interval where min(base × backoff, max) + jitter <= now − ejected at),
// its backoff (incremented at an ejection while base × backoff < max +
// base; decremented at an interval once back for an Interval), and A50
// step 5 (back when now is after ejected at + min(base × m, max(base,
// max)); m decremented at every interval not ejected).
func TestEjectionTimeTable(t *testing.T) {
	type ev struct {
		at    float64 // seconds
		fail  bool    // five 5xx (Envoy) at at; else Advance to at
		eject bool    // want ejected after it
	}
	tests := []struct {
		name string
		evs  []ev
	}{
		{"ejected at 0, back at the 30s interval", []ev{{0, true, true}, {29, false, true}, {30, false, false}}},
		{"ejected at 5, back at 40 (35 is no interval)", []ev{{5, true, true}, {39, false, true}, {40, false, false}}},
		{"second ejection at once: 60s, back at the 100s interval", []ev{{0, true, true}, {30, false, false}, {31, true, true}, {99, false, true}, {100, false, false}}},
		{"second ejection after the backoff fell to 0: 30s", []ev{{0, true, true}, {30, false, false}, {40, false, false}, {41, true, true}, {71, false, true}, {80, false, false}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := EnvoyDefaults(2)
			s.MaxEjectionPercent = 100
			d, _ := New(s)
			d.Advance(t0) // intervals at 10, 20, 30...
			for _, e := range tt.evs {
				if e.fail {
					for k := 0; k < 5; k++ {
						d.Record(at(e.at), 0, Error5xx)
					}
				} else {
					d.Advance(at(e.at))
				}
				if got := d.Ejected(0); got != e.eject {
					t.Fatalf("at %vs: ejected %v, want %v", e.at, got, e.eject)
				}
			}
		})
	}
	// The multiplier's cap: base 30s, max 300s: base × m < 330s lets m grow
	// to 11, and the time is min(330, 300) = 300s.
	s := EnvoyDefaults(1)
	s.MaxEjectionPercent = 100
	d, _ := New(s)
	now := t0
	d.Advance(now)
	for k := 1; k <= 13; k++ {
		for j := 0; j < 5; j++ {
			d.Record(now, 0, Error5xx)
		}
		h := d.Host(0)
		if want := min(k, 11); h.Multiplier != want {
			t.Fatalf("ejection %d: multiplier %d, want %d", k, h.Multiplier, want)
		}
		want := time.Duration(min(30*k, 300)) * time.Second
		d.Advance(now.Add(want - time.Second))
		if !d.Ejected(0) {
			t.Fatalf("ejection %d: back before %v", k, want)
		}
		// Back at the interval its time ends on; ejected again at once, so
		// that the backoff has no interval to fall.
		now = now.Add(want)
		d.Advance(now)
		if d.Ejected(0) {
			t.Fatalf("ejection %d: not back after %v", k, want)
		}
	}
}

// TestGRPCReturnTable: A50 step 5 with the interval at 10s: an address
// ejected at the 10s evaluation (m = 1, base 30s) comes back at the first
// evaluation strictly after 40s, that is 50s; ejected again at once (m is
// not lowered while ejected, 2 after), it stays 60s.
func TestGRPCReturnTable(t *testing.T) {
	s := GRPCDefaults(5)
	s.MaxEjectionPercent = 100
	d, _ := New(s)
	d.Advance(t0)
	bad := func() {
		feed(d, 0, 0, 100)
		for h := 1; h < 5; h++ {
			feed(d, h, 100, 0)
		}
	}
	bad()
	steps := []struct {
		at    float64
		feed  bool
		eject bool
		mult  int
	}{
		{10, true, true, 1}, {40, false, true, 1}, {50, true, false, 1}, {60, false, true, 2},
		{120, false, true, 2}, {130, false, false, 2}, {140, false, false, 1}, {150, false, false, 0},
	}
	for _, st := range steps {
		d.Advance(at(st.at))
		if st.feed {
			bad()
		}
		h := d.Host(0)
		if h.Ejected != st.eject || h.Multiplier != st.mult {
			t.Fatalf("at %vs: ejected %v m %d, want %v m %d", st.at, h.Ejected, h.Multiplier, st.eject, st.mult)
		}
	}
}

// stub is a rand.Source that returns v.
type stub struct{ v uint64 }

func (s stub) Uint64() uint64 { return s.v }

// TestEnforcementTable: Envoy's featureEnabled(key, percent) and grpc-go's
// rand.Int32N(100) < enforcement_percentage: a draw in [0, 100) below the
// percentage ejects.
func TestEnforcementTable(t *testing.T) {
	tests := []struct {
		percent int
		draw    uint64
		want    bool
	}{
		{50, 49, true}, {50, 50, false}, {50, 149, true}, {1, 0, true}, {99, 99, false}, {100, 99, true}, {0, 0, false},
	}
	for _, tt := range tests {
		s := EnvoyDefaults(2)
		s.MaxEjectionPercent = 100
		s.Enforcing.Consecutive5xx = tt.percent
		s.Rand = stub{tt.draw}
		d, err := New(s)
		if err != nil {
			t.Fatal(err)
		}
		feed(d, 0, 0, 5)
		if got := d.Ejected(0); got != tt.want {
			t.Errorf("percent %d draw %d: ejected %v, want %v", tt.percent, tt.draw, got, tt.want)
		}
	}
}

// TestPanicTable: isHostSetInPanic with one priority and no degraded
// hosts; never in panic when min(100, 140 × healthy / hosts) is 100.
func TestPanicTable(t *testing.T) {
	tests := []struct {
		healthy, hosts, threshold int
		want                      bool
	}{
		{1, 2, 50, false}, // 50% is not below 50%
		{0, 2, 50, true},
		{1, 3, 50, true},
		{2, 3, 50, false},
		{3, 4, 80, false}, // 75% < 80% but availability 105 → 100
		{2, 4, 80, true},
		{7, 10, 71, true}, // availability 98
		{0, 3, 0, false},  // threshold 0: panic off
		{5, 5, 100, false},
		{0, 0, 50, false},
	}
	for _, tt := range tests {
		if got := Panic(tt.healthy, tt.hosts, tt.threshold); got != tt.want {
			t.Errorf("Panic(%d, %d, %d) = %v, want %v", tt.healthy, tt.hosts, tt.threshold, got, tt.want)
		}
	}
}

func TestSettingsErrors(t *testing.T) {
	tests := []struct {
		name  string
		s     Settings
		field string
	}{
		{"zero", Settings{}, "outlier.Settings.Hosts"},
		{"percent", Settings{Hosts: 3, MaxEjectionPercent: 101}, "outlier.Settings.MaxEjectionPercent"},
		{"max below base", Settings{Hosts: 3, BaseEjectionTime: time.Minute, MaxEjectionTime: time.Second}, "outlier.Settings.MaxEjectionTime"},
		{"grpc consecutive", Settings{Hosts: 3, Flavor: GRPC, Consecutive5xx: 5}, "outlier.Settings.Consecutive5xx"},
		{"enforcing", Settings{Hosts: 3, Enforcing: Enforcing{SuccessRate: -1}}, "outlier.Settings.Enforcing.SuccessRate"},
		{"stdev", Settings{Hosts: 3, SuccessRateStdevFactor: -1}, "outlier.Settings.SuccessRateStdevFactor"},
		{"negative interval", Settings{Hosts: 3, Interval: -1}, "outlier.Settings.Interval"},
	}
	for _, tt := range tests {
		_, err := New(tt.s)
		var se *resil.SettingError
		if !errors.As(err, &se) || se.Field != tt.field {
			t.Errorf("%s: error %v, want one naming %s", tt.name, err, tt.field)
		}
	}
	// gRPC takes max(base, max) where Envoy refuses.
	if _, err := New(Settings{Hosts: 3, Flavor: GRPC, BaseEjectionTime: time.Minute, MaxEjectionTime: time.Second}); err != nil {
		t.Errorf("gRPC max below base: %v", err)
	}
}

func TestZeroDetectorFailsClosed(t *testing.T) {
	var d Detector
	if err := d.Record(t0, 0, Success); !errors.Is(err, resil.ErrNotBuilt) {
		t.Errorf("Record: %v", err)
	}
	if err := d.Advance(t0); !errors.Is(err, resil.ErrNotBuilt) {
		t.Errorf("Advance: %v", err)
	}
	if !d.Ejected(0) || d.Hosts() != 0 {
		t.Errorf("zero detector: host 0 not ejected, or hosts %d", d.Hosts())
	}
	real, _ := New(EnvoyDefaults(2))
	if err := real.Record(t0, 2, Success); !errors.Is(err, ErrNoSuchHost) {
		t.Errorf("Record(host 2 of 2): %v", err)
	}
}

// TestVersion: the version grows by two with each ejection and each
// return, and not with what changes no ejection (a success, an error
// short of the threshold, an evaluation that returns nobody); the zero
// Detector's is 0.
func TestVersion(t *testing.T) {
	if v := (&Detector{}).Version(); v != 0 {
		t.Fatalf("the zero Detector's version is %d, want 0", v)
	}
	s := EnvoyDefaults(4)
	s.MaxEjectionPercent = 50
	d, err := New(s)
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		what string
		do   func()
		want uint64
	}{
		{"a success", func() { d.Record(t0, 0, Success) }, 0},
		{"four 5xx on host 0", func() {
			for range 4 {
				d.Record(t0, 0, Error5xx)
			}
		}, 0},
		{"the fifth ejects it", func() { d.Record(t0, 0, Error5xx) }, 2},
		{"five on host 1 eject it", func() {
			for range 5 {
				d.Record(t0, 1, Error5xx)
			}
		}, 4},
		{"five on host 2: past 50%, refused", func() {
			for range 5 {
				d.Record(t0, 2, Error5xx)
			}
		}, 4},
		{"an evaluation before their time", func() { d.Evaluate(at(10)) }, 4},
		{"an evaluation after it returns both", func() { d.Evaluate(at(31)) }, 8},
	}
	for _, st := range steps {
		st.do()
		if v := d.Version(); v != st.want {
			t.Fatalf("after %s: version %d, want %d", st.what, v, st.want)
		}
	}
}

// TestTimeoutAfterConnect is issue 36's row 4, written from Envoy: the
// router's upstream request records LocalOriginConnectSuccess when its
// pool is ready (source/common/router/upstream_request.cc, onPoolReady,
// the version with route-level upstream_rq_total stats, 2024), before any
// per-try timeout can fire (router.cc, onPerTryTimeoutCommon:
// LocalOriginTimeout); with the split, the first is localOriginNoFailure,
// which resets consecutive_local_origin_failure, the second
// localOriginFailure (outlier_detection_impl.cc at 00c7146d,
// putResultWithLocalExternalSplit). So with the split, timeouts after a
// connection never run the consecutive count past one; failures to
// connect do. Without it, each is a 504 (resultToHttpCode).
func TestTimeoutAfterConnect(t *testing.T) {
	for _, c := range []struct {
		name    string
		split   bool
		results []Result
		ejected bool
	}{
		{"split: 5 timeouts after connecting", true, []Result{Timeout, Timeout, Timeout, Timeout, Timeout}, false},
		{"split: 5 connect failures", true, []Result{LocalFailure, LocalFailure, LocalFailure, LocalFailure, LocalFailure}, true},
		{"split: 4 connect failures, a timeout", true, []Result{LocalFailure, LocalFailure, LocalFailure, LocalFailure, Timeout}, false},
		{"split: a timeout then 5 connect failures", true, []Result{Timeout, LocalFailure, LocalFailure, LocalFailure, LocalFailure, LocalFailure}, true},
		{"no split: 5 timeouts are 5 504s", false, []Result{Timeout, Timeout, Timeout, Timeout, Timeout}, true},
	} {
		s := EnvoyDefaults(3)
		s.MaxEjectionPercent, s.SplitExternalLocalOriginErrors = 100, c.split
		s.Consecutive5xx, s.ConsecutiveLocalOriginFailure = 5, 5
		d, err := New(s)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range c.results {
			if err := d.Record(at(float64(i)), 0, r); err != nil {
				t.Fatal(err)
			}
		}
		if got := d.Ejected(0); got != c.ejected {
			t.Errorf("%s: ejected %v, want %v", c.name, got, c.ejected)
		}
	}
}
