package outlier

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retrystorm/retrystorm/resil"
	"github.com/retrystorm/retrystorm/resil/internal/entropy"
)

// Flavor is whose rules a [Detector] follows. The zero value is Envoy. A
// plain value, safe to copy and share.
type Flavor uint8

const (
	// Envoy follows Envoy's outlier detection: the consecutive-error rules
	// eject at once, success rate and failure percentage at each interval,
	// ejected hosts come back at the first interval after their time.
	Envoy Flavor = iota
	// GRPC follows gRPC's outlier_detection policy (gRFC A50): success rate
	// and failure percentage only, evaluated at each interval.
	GRPC
)

var flavorNames = [...]string{"envoy", "grpc"}

// String returns "envoy" or "grpc".
func (f Flavor) String() string { return name("Flavor", flavorNames[:], uint8(f)) }

// MaxEjectionRule is how max_ejection_percent is checked before an
// ejection. The zero value is RuleOfFlavor. A plain value, safe to copy and
// share.
type MaxEjectionRule uint8

const (
	// RuleOfFlavor is CheckAfter for Envoy and CheckBefore for GRPC: what
	// each product does today.
	RuleOfFlavor MaxEjectionRule = iota
	// CheckAfter ejects only if the share ejected after this ejection,
	// 100 × (ejected + 1) / hosts, is at most MaxEjectionPercent: Envoy
	// since 2023 (PRs 27624 and 27909, issues 26877 and 27066).
	CheckAfter
	// CheckBefore ejects if the share ejected before this ejection,
	// 100 × ejected / hosts, is below MaxEjectionPercent: Envoy before 2023,
	// and gRPC (A50, grpc-go) still. The first ejection always passes
	// unless the percentage is 0, and the last one can overshoot: 3 hosts
	// at 67% may all be ejected (0%, 33%, 66.7% are each below 67%).
	CheckBefore
)

var ruleNames = [...]string{"of_flavor", "after", "before"}

// String returns "of_flavor", "after" or "before".
func (r MaxEjectionRule) String() string { return name("MaxEjectionRule", ruleNames[:], uint8(r)) }

// Result is how one request to a host ended, as outlier detection sees it.
// The zero value is Success. A plain value, safe to copy and share.
type Result uint8

const (
	// Success is an answer that is not a 5xx (a 4xx included): the host
	// answered. For GRPC, an RPC that ended OK.
	Success Result = iota
	// Error5xx is a 5xx answer other than 502, 503 and 504. For GRPC, any
	// failed RPC: gRPC counts only successes and failures.
	Error5xx
	// GatewayError is a 502, 503 or 504 answer: it counts for both
	// consecutive_5xx and consecutive_gateway_failure.
	GatewayError
	// LocalFailure is no answer: the connection failed, was reset or timed
	// out. With SplitExternalLocalOriginErrors it counts only for the
	// local-origin rules; without, Envoy reports it as a 503 or 504, so it
	// counts as a GatewayError.
	LocalFailure
	// Timeout is no answer in time from a host the connection reached.
	// Envoy records the connection's success when it is made
	// (upstream_request.cc, onPoolReady: LocalOriginConnectSuccess) and
	// the timeout when the per-try timer fires (router.cc:
	// LocalOriginTimeout), so with SplitExternalLocalOriginErrors it is a
	// local-origin success and then a local-origin failure: the
	// consecutive local-origin count starts again at one, and only
	// failures to connect (LocalFailure) run it up. Without the split it
	// is a 504, a GatewayError. For GRPC, a failure.
	Timeout
)

var resultNames = [...]string{"success", "5xx", "gateway_error", "local_failure", "timeout"}

// String returns "success", "5xx", "gateway_error", "local_failure" or
// "timeout".
func (r Result) String() string { return name("Result", resultNames[:], uint8(r)) }

// FromHTTPStatus maps an HTTP status code to a Result, as Envoy's
// Http::CodeUtility::is5xx and isGatewayError do.
func FromHTTPStatus(code int) Result {
	switch {
	case code == 502 || code == 503 || code == 504:
		return GatewayError
	case code >= 500 && code < 600:
		return Error5xx
	}
	return Success
}

// Reason is which rule ejected a host. The zero value is NotEjected.
type Reason uint8

const (
	NotEjected Reason = iota
	Consecutive5xx
	ConsecutiveGatewayFailure
	ConsecutiveLocalOriginFailure
	SuccessRate
	LocalOriginSuccessRate
	FailurePercentage
	LocalOriginFailurePercentage
)

var reasonNames = [...]string{"not_ejected", "consecutive_5xx", "consecutive_gateway_failure",
	"consecutive_local_origin_failure", "success_rate", "success_rate_local_origin",
	"failure_percentage", "failure_percentage_local_origin"}

// String returns the reason's name as Envoy's OutlierEjectionType spells it,
// in lower case.
func (r Reason) String() string { return name("Reason", reasonNames[:], uint8(r)) }

func name(typ string, names []string, v uint8) string {
	if int(v) < len(names) {
		return names[v]
	}
	return fmt.Sprintf("%s(%d)", typ, v)
}

// Errors returned by a Detector's methods. Test for them with errors.Is.
var (
	// ErrNoSuchHost: the host index is outside [0, Settings.Hosts).
	ErrNoSuchHost = errors.New("outlier: no such host")
)

// Settings configures a [Detector]. Counts and percentages mean what they
// say, zero included (a zero threshold turns its rule off, a zero
// enforcement percentage never ejects, a zero MaxEjectionPercent ejects
// nobody unless AlwaysEjectOneHost); durations mean their upstream default
// when zero. The zero value is invalid: Hosts is required. [EnvoyDefaults]
// and [GRPCDefaults] fill in the products' defaults. A plain value: copying
// it is safe (Rand is shared by the copies, and must then be used by one
// Detector only).
type Settings struct {
	// Hosts is how many hosts the detector watches, named 0 to Hosts-1.
	// Required: 1 to 1,000,000.
	Hosts int
	// Flavor chooses the product whose rules apply. Zero means Envoy.
	Flavor Flavor

	// Interval is the time between evaluations (success rate, failure
	// percentage, returns). Zero means 10s. At most 24h.
	Interval time.Duration
	// BaseEjectionTime is how long a first ejection lasts; later ones last
	// a multiple of it (see [Detector]). Zero means 30s.
	BaseEjectionTime time.Duration
	// MaxEjectionTime caps an ejection's length. Zero means the larger of
	// 300s and BaseEjectionTime. Envoy refuses one below BaseEjectionTime,
	// and so does this package for Envoy; gRPC takes the larger of the two.
	MaxEjectionTime time.Duration
	// MaxEjectionTimeJitter (Envoy only) adds a random time in [0, jitter],
	// in whole milliseconds, drawn at each ejection. Zero means none.
	MaxEjectionTimeJitter time.Duration
	// MaxEjectionPercent is the share of hosts that may be ejected at once,
	// 0 to 100, checked as MaxEjectionRule says. Envoy's and gRPC's default
	// is 10.
	MaxEjectionPercent int
	// MaxEjectionRule chooses how MaxEjectionPercent is checked. Zero means
	// the flavor's own rule.
	MaxEjectionRule MaxEjectionRule
	// AlwaysEjectOneHost (Envoy's always_eject_one_host, since 2024) lets an
	// ejection through when no host is ejected, whatever the percentage.
	AlwaysEjectOneHost bool

	// Consecutive5xx (Envoy only) ejects a host at once after this many 5xx
	// answers in a row (gateway errors included). Zero turns it off; Envoy's
	// default is 5.
	Consecutive5xx int
	// ConsecutiveGatewayFailure (Envoy only) ejects after this many 502, 503
	// or 504 in a row. Zero turns it off; Envoy's default is 5.
	ConsecutiveGatewayFailure int
	// SplitExternalLocalOriginErrors (Envoy only) counts failures to reach
	// the host (LocalFailure) apart from its answers: they then feed
	// ConsecutiveLocalOriginFailure and the local-origin success rate and
	// failure percentage, and no longer count as gateway errors.
	SplitExternalLocalOriginErrors bool
	// ConsecutiveLocalOriginFailure (Envoy only, with the split) ejects after
	// this many local failures in a row. Zero turns it off; Envoy's default
	// is 5.
	ConsecutiveLocalOriginFailure int

	// SuccessRateMinimumHosts is how many hosts must each have
	// SuccessRateRequestVolume requests in the interval for the success
	// rate rule to run. Default 5.
	SuccessRateMinimumHosts int
	// SuccessRateRequestVolume is the requests a host needs in the interval
	// to take part in the success rate rule. Default 100.
	SuccessRateRequestVolume int
	// SuccessRateStdevFactor: a host is an outlier when its success rate is
	// below mean − factor × stdev of the hosts taking part. Envoy's
	// success_rate_stdev_factor divided by 1000; default 1.9. At least 0.
	SuccessRateStdevFactor float64

	// FailurePercentageThreshold is the failure percentage, 0 to 100, at
	// which (Envoy: at or above; gRPC: above) a host is an outlier. Default
	// 85.
	FailurePercentageThreshold int
	// FailurePercentageMinimumHosts is as SuccessRateMinimumHosts for the
	// failure percentage rule. Default 5.
	FailurePercentageMinimumHosts int
	// FailurePercentageRequestVolume is as SuccessRateRequestVolume for the
	// failure percentage rule. Default 50.
	FailurePercentageRequestVolume int

	// Enforcing is the chance, in percent (0 to 100), that a detected
	// outlier is ejected, per rule: Envoy's enforcing_* settings, gRPC's
	// enforcement_percentage. For GRPC a rule with 0 is off, as an absent
	// success_rate_ejection or failure_percentage_ejection is.
	Enforcing Enforcing

	// Rand draws the enforcement chances and the jitter. The detector uses
	// it under its lock, so it need not be safe for concurrent use. Nil
	// means a ChaCha8 source seeded from crypto/rand; a simulator passes a
	// seeded source of its own.
	Rand rand.Source
}

// Enforcing holds the enforcement percentages of [Settings], one per rule,
// each 0 to 100. The zero value enforces nothing.
type Enforcing struct {
	// Consecutive5xx: Envoy's default 100.
	Consecutive5xx int
	// ConsecutiveGatewayFailure: Envoy's default 0.
	ConsecutiveGatewayFailure int
	// ConsecutiveLocalOriginFailure: Envoy's default 100.
	ConsecutiveLocalOriginFailure int
	// SuccessRate: Envoy's and gRPC's default 100.
	SuccessRate int
	// LocalOriginSuccessRate: Envoy's default 100.
	LocalOriginSuccessRate int
	// FailurePercentage: Envoy's default 0, and gRPC's 0 too, even once
	// failure_percentage_ejection is configured (grpc-go v1.85.0,
	// internal/xds/balancer/outlierdetection/config.go).
	FailurePercentage int
	// LocalOriginFailurePercentage: Envoy's default 0.
	LocalOriginFailurePercentage int
}

// EnvoyDefaults returns Envoy's defaults (api/envoy/config/cluster/v3/
// outlier_detection.proto) for hosts hosts.
func EnvoyDefaults(hosts int) Settings {
	return Settings{
		Hosts: hosts, Flavor: Envoy,
		Interval: 10 * time.Second, BaseEjectionTime: 30 * time.Second,
		MaxEjectionTime: 300 * time.Second, MaxEjectionPercent: 10,
		Consecutive5xx: 5, ConsecutiveGatewayFailure: 5, ConsecutiveLocalOriginFailure: 5,
		SuccessRateMinimumHosts: 5, SuccessRateRequestVolume: 100, SuccessRateStdevFactor: 1.9,
		FailurePercentageThreshold: 85, FailurePercentageMinimumHosts: 5, FailurePercentageRequestVolume: 50,
		Enforcing: Enforcing{Consecutive5xx: 100, ConsecutiveLocalOriginFailure: 100,
			SuccessRate: 100, LocalOriginSuccessRate: 100},
	}
}

// GRPCDefaults returns gRPC's defaults (gRFC A50) for hosts hosts, with
// success rate ejection on and failure percentage ejection off, as an xDS
// cluster with only outlier_detection: {} maps to.
func GRPCDefaults(hosts int) Settings {
	return Settings{
		Hosts: hosts, Flavor: GRPC,
		Interval: 10 * time.Second, BaseEjectionTime: 30 * time.Second,
		MaxEjectionTime: 300 * time.Second, MaxEjectionPercent: 10,
		SuccessRateMinimumHosts: 5, SuccessRateRequestVolume: 100, SuccessRateStdevFactor: 1.9,
		FailurePercentageThreshold: 85, FailurePercentageMinimumHosts: 5, FailurePercentageRequestVolume: 50,
		Enforcing: Enforcing{SuccessRate: 100},
	}
}

func bad(field string, value any, reason string) error {
	return &resil.SettingError{Field: "outlier.Settings." + field, Value: value, Reason: reason}
}

// normalize checks s and fills in the defaults.
func (s Settings) normalize() (Settings, error) {
	if s.Hosts < 1 || s.Hosts > 1_000_000 {
		return s, bad("Hosts", s.Hosts, "must be 1 to 1,000,000")
	}
	if s.Flavor > GRPC {
		return s, bad("Flavor", s.Flavor, "unknown flavor")
	}
	if s.MaxEjectionRule > CheckBefore {
		return s, bad("MaxEjectionRule", s.MaxEjectionRule, "unknown rule")
	}
	if err := s.normalizeTimes(); err != nil {
		return s, err
	}
	if s.MaxEjectionRule == RuleOfFlavor {
		s.MaxEjectionRule = CheckAfter
		if s.Flavor == GRPC {
			s.MaxEjectionRule = CheckBefore
		}
	}
	if err := s.checkBounds(); err != nil {
		return s, err
	}
	if s.Flavor == GRPC {
		// gRPC implements only the two interval rules (A50, "Rationale").
		if err := s.checkGRPC(); err != nil {
			return s, err
		}
	}
	if s.Rand == nil {
		var seed [32]byte
		entropy.Read(seed[:])
		s.Rand = rand.NewChaCha8(seed)
	}
	return s, nil
}

// normalizeTimes checks the durations (0 to 24h), fills in the interval's
// and the ejection times' defaults, and makes the longest ejection at
// least the base one: Envoy refuses one shorter, gRPC raises it (A50).
func (s *Settings) normalizeTimes() error {
	for _, d := range []struct {
		f string
		v time.Duration
	}{{"Interval", s.Interval}, {"BaseEjectionTime", s.BaseEjectionTime},
		{"MaxEjectionTime", s.MaxEjectionTime}, {"MaxEjectionTimeJitter", s.MaxEjectionTimeJitter}} {
		if d.v < 0 || d.v > 24*time.Hour {
			return bad(d.f, d.v, "must be 0 to 24h")
		}
	}
	if s.Interval == 0 {
		s.Interval = 10 * time.Second
	}
	if s.Interval < time.Millisecond {
		return bad("Interval", s.Interval, "must be at least 1ms")
	}
	if s.BaseEjectionTime == 0 {
		s.BaseEjectionTime = 30 * time.Second
	}
	if s.MaxEjectionTime == 0 {
		s.MaxEjectionTime = max(300*time.Second, s.BaseEjectionTime)
	}
	if s.MaxEjectionTime < s.BaseEjectionTime {
		if s.Flavor == Envoy {
			return bad("MaxEjectionTime", s.MaxEjectionTime, "cannot be smaller than BaseEjectionTime")
		}
		s.MaxEjectionTime = s.BaseEjectionTime // A50: max(base, max)
	}
	return nil
}

// checkBounds checks the percentages (0 to 100), the counts (0 to
// 2^31-1) and the success rate's stdev factor (0 to 1e6).
func (s *Settings) checkBounds() error {
	percents := []struct {
		f string
		v int
	}{{"MaxEjectionPercent", s.MaxEjectionPercent}, {"FailurePercentageThreshold", s.FailurePercentageThreshold},
		{"Enforcing.Consecutive5xx", s.Enforcing.Consecutive5xx},
		{"Enforcing.ConsecutiveGatewayFailure", s.Enforcing.ConsecutiveGatewayFailure},
		{"Enforcing.ConsecutiveLocalOriginFailure", s.Enforcing.ConsecutiveLocalOriginFailure},
		{"Enforcing.SuccessRate", s.Enforcing.SuccessRate},
		{"Enforcing.LocalOriginSuccessRate", s.Enforcing.LocalOriginSuccessRate},
		{"Enforcing.FailurePercentage", s.Enforcing.FailurePercentage},
		{"Enforcing.LocalOriginFailurePercentage", s.Enforcing.LocalOriginFailurePercentage}}
	for _, p := range percents {
		if p.v < 0 || p.v > 100 {
			return bad(p.f, p.v, "must be 0 to 100 (percent)")
		}
	}
	counts := []struct {
		f string
		v int
	}{{"Consecutive5xx", s.Consecutive5xx}, {"ConsecutiveGatewayFailure", s.ConsecutiveGatewayFailure},
		{"ConsecutiveLocalOriginFailure", s.ConsecutiveLocalOriginFailure},
		{"SuccessRateMinimumHosts", s.SuccessRateMinimumHosts}, {"SuccessRateRequestVolume", s.SuccessRateRequestVolume},
		{"FailurePercentageMinimumHosts", s.FailurePercentageMinimumHosts},
		{"FailurePercentageRequestVolume", s.FailurePercentageRequestVolume}}
	for _, c := range counts {
		if c.v < 0 || c.v > math.MaxInt32 {
			return bad(c.f, c.v, "must be 0 to 2^31-1")
		}
	}
	if !(s.SuccessRateStdevFactor >= 0 && s.SuccessRateStdevFactor <= 1e6) {
		return bad("SuccessRateStdevFactor", s.SuccessRateStdevFactor, "must be 0 to 1e6")
	}
	return nil
}

// checkGRPC refuses, for Flavor GRPC, a setting of one of the rules only
// Envoy has.
func (s *Settings) checkGRPC() error {
	envoyOnly := []struct {
		f  string
		on bool
	}{{"Consecutive5xx", s.Consecutive5xx != 0}, {"ConsecutiveGatewayFailure", s.ConsecutiveGatewayFailure != 0},
		{"ConsecutiveLocalOriginFailure", s.ConsecutiveLocalOriginFailure != 0},
		{"SplitExternalLocalOriginErrors", s.SplitExternalLocalOriginErrors},
		{"MaxEjectionTimeJitter", s.MaxEjectionTimeJitter != 0},
		{"AlwaysEjectOneHost", s.AlwaysEjectOneHost},
		{"Enforcing.Consecutive5xx", s.Enforcing.Consecutive5xx != 0},
		{"Enforcing.ConsecutiveGatewayFailure", s.Enforcing.ConsecutiveGatewayFailure != 0},
		{"Enforcing.ConsecutiveLocalOriginFailure", s.Enforcing.ConsecutiveLocalOriginFailure != 0},
		{"Enforcing.LocalOriginSuccessRate", s.Enforcing.LocalOriginSuccessRate != 0},
		{"Enforcing.LocalOriginFailurePercentage", s.Enforcing.LocalOriginFailurePercentage != 0}}
	for _, e := range envoyOnly {
		if e.on {
			return bad(e.f, nil, "applies to Flavor Envoy only; gRPC (A50) has no such rule")
		}
	}
	return nil
}

// host is one host's state. The counters are atomics written by Record
// without the lock; the rest is written under Detector.mu.
type host struct {
	// the current interval's answers: external origin, then local origin
	extTotal, extOK, locTotal, locOK atomic.Uint64
	cons5xx, consGW, consLocal       atomic.Uint32
	ejected                          atomic.Bool

	// under mu
	since     time.Time     // last ejection
	back      time.Time     // last return, if returned
	returned  bool          // back is set
	mult      int           // Envoy's ejectTimeBackoff, gRPC's ejection time multiplier
	jitter    time.Duration // drawn at the last ejection
	ejections int
	reason    Reason
}

// Detector is an outlier detector: it watches the answers of a fixed set of
// hosts and ejects the ones that fail more than the others, for a time that
// grows with each ejection, as Envoy's and gRPC's outlier detection do (see
// the package documentation for the rules).
//
// Drive it with [Detector.Record] after every request and
// [Detector.Advance] with the time, as often as convenient: Advance runs
// every evaluation whose interval has ended. A balancer asks
// [Detector.Ejected] and [Detector.EjectedCount]. Time is an argument: the
// detector reads no clock.
//
// Make one with [New]. The zero Detector fails closed: Record and Advance
// return [resil.ErrNotBuilt], every host reads as ejected and EjectedCount
// is 0 of 0 hosts, so a balancer has no host to pick. A Detector is safe for
// concurrent use; Record and the reads take no lock unless a consecutive
// rule fires.
type Detector struct {
	mu    sync.Mutex
	s     Settings
	hosts []host
	n     atomic.Int64 // hosts ejected
	// ver grows by one before and one after each ejection and return
	// (under mu): odd while one is under way. See Version.
	ver   atomic.Uint64
	next  time.Time // the next evaluation
	begun bool      // next is set
	built bool

	src  rand.Source // s.Rand, under mu
	rate []float64   // scratch for an evaluation, under mu: success %, -1 for none
	vol  []uint64    // requests in the interval
	take []int       // hosts taking part in a rule

	ejections, overflows, unenforced uint64
}

// New returns a Detector for s, or a *resil.SettingError naming the first
// invalid field.
func New(s Settings) (*Detector, error) {
	s, err := s.normalize()
	if err != nil {
		return nil, err
	}
	return &Detector{s: s, hosts: make([]host, s.Hosts), built: true, src: s.Rand,
		rate: make([]float64, s.Hosts), vol: make([]uint64, s.Hosts), take: make([]int, 0, s.Hosts)}, nil
}

// Settings returns the settings the detector runs with, defaults filled in.
func (d *Detector) Settings() Settings { return d.s }

// Hosts returns how many hosts the detector watches; 0 for the zero Detector.
func (d *Detector) Hosts() int { return len(d.hosts) }

// Ejected reports whether host i is ejected now. It is true for a host out
// of range and for every host of the zero Detector.
func (d *Detector) Ejected(i int) bool {
	if uint(i) >= uint(len(d.hosts)) {
		return true
	}
	return d.hosts[i].ejected.Load()
}

// EjectedCount returns how many hosts are ejected now.
func (d *Detector) EjectedCount() int { return int(d.n.Load()) }

// Version returns the detector's version of its ejections: it grows by two
// with every ejection and every return, and is odd while one is under way.
// EjectedCount and Ejected, read one after the other, may each see a
// different moment; a reader that gets the same even Version before and
// after reading them read one state of the detector, in which the count
// is the number of hosts Ejected reports (a sequence lock, without a
// lock: pickers read it on every pick). 0 for the zero Detector.
func (d *Detector) Version() uint64 { return d.ver.Load() }

// Record records how a request to host i ended, at now. A consecutive rule
// (Envoy) may eject the host at once. It returns ErrNoSuchHost for a host
// out of range, and resil.ErrNotBuilt for the zero Detector. It allocates
// nothing.
func (d *Detector) Record(now time.Time, i int, r Result) error {
	if !d.built {
		return resil.ErrNotBuilt
	}
	if uint(i) >= uint(len(d.hosts)) {
		return ErrNoSuchHost
	}
	h := &d.hosts[i]
	if d.s.Flavor == GRPC {
		h.extTotal.Add(1)
		if r == Success {
			h.extOK.Add(1)
		}
		return nil
	}
	s := &d.s
	if (r == LocalFailure || r == Timeout) && !s.SplitExternalLocalOriginErrors {
		// Envoy maps a connect failure to 503 and a timeout to 504
		// (resultToHttpCode): gateway errors both.
		r = GatewayError
	}
	if r == Timeout {
		// The connection's success first (localOriginNoFailure), then
		// the timeout, a local-origin failure.
		h.locTotal.Add(1)
		h.locOK.Add(1)
		h.consLocal.Store(0)
		r = LocalFailure
	}
	if r == LocalFailure {
		h.locTotal.Add(1)
		if t := s.ConsecutiveLocalOriginFailure; t > 0 && h.consLocal.Add(1) == uint32(t) {
			d.consecutive(now, i, ConsecutiveLocalOriginFailure)
		}
		return nil
	}
	// The host answered.
	h.extTotal.Add(1)
	if s.SplitExternalLocalOriginErrors {
		// Reaching the host is a local-origin success (Envoy reports
		// LocalOriginConnectSuccess before the answer).
		h.locTotal.Add(1)
		h.locOK.Add(1)
		if h.consLocal.Load() != 0 {
			h.consLocal.Store(0)
		}
	}
	if r == Success {
		h.extOK.Add(1)
		if h.cons5xx.Load() != 0 {
			h.cons5xx.Store(0)
		}
		if h.consGW.Load() != 0 {
			h.consGW.Store(0)
		}
		return nil
	}
	if r == GatewayError {
		if t := s.ConsecutiveGatewayFailure; t > 0 && h.consGW.Add(1) == uint32(t) {
			d.consecutive(now, i, ConsecutiveGatewayFailure)
		}
	} else if h.consGW.Load() != 0 {
		h.consGW.Store(0)
	}
	if t := s.Consecutive5xx; t > 0 && h.cons5xx.Add(1) == uint32(t) {
		d.consecutive(now, i, Consecutive5xx)
	}
	return nil
}

// consecutive handles a consecutive rule reaching its threshold, as
// Envoy's onConsecutiveErrorWorker: nothing for a host already ejected,
// else an ejection attempt and the rule's counter reset.
func (d *Detector) consecutive(now time.Time, i int, why Reason) {
	d.mu.Lock()
	defer d.mu.Unlock()
	h := &d.hosts[i]
	if h.ejected.Load() {
		return
	}
	d.eject(now, i, why)
	switch why {
	case Consecutive5xx:
		h.cons5xx.Store(0)
	case ConsecutiveGatewayFailure:
		h.consGW.Store(0)
	case ConsecutiveLocalOriginFailure:
		h.consLocal.Store(0)
	}
}

// enforcing returns the enforcement percentage of a rule.
func (d *Detector) enforcing(why Reason) int {
	e := &d.s.Enforcing
	switch why {
	case Consecutive5xx:
		return e.Consecutive5xx
	case ConsecutiveGatewayFailure:
		return e.ConsecutiveGatewayFailure
	case ConsecutiveLocalOriginFailure:
		return e.ConsecutiveLocalOriginFailure
	case SuccessRate:
		return e.SuccessRate
	case LocalOriginSuccessRate:
		return e.LocalOriginSuccessRate
	case FailurePercentage:
		return e.FailurePercentage
	case LocalOriginFailurePercentage:
		return e.LocalOriginFailurePercentage
	}
	return 0
}

// MayEject reports whether one more host may be ejected when ejected of
// hosts are, under rule (CheckAfter or CheckBefore; RuleOfFlavor is taken
// as CheckAfter), maxPercent and alwaysOne. It is the check Envoy's
// DetectorImpl::ejectHost makes, before 2023 and since, and gRPC's.
func MayEject(rule MaxEjectionRule, ejected, hosts, maxPercent int, alwaysOne bool) bool {
	if hosts <= 0 {
		return false
	}
	maxPercent = min(maxPercent, 100)
	var ok bool
	if rule == CheckBefore {
		ok = 100*float64(ejected)/float64(hosts) < float64(maxPercent)
	} else {
		ok = 100*float64(ejected+1)/float64(hosts) <= float64(maxPercent)
	}
	return ok || (alwaysOne && ejected == 0)
}

// eject tries to eject host i for why, at now. Caller holds mu.
func (d *Detector) eject(now time.Time, i int, why Reason) bool {
	s := &d.s
	if !MayEject(s.MaxEjectionRule, int(d.n.Load()), len(d.hosts), s.MaxEjectionPercent, s.AlwaysEjectOneHost) {
		d.overflows++
		return false
	}
	if !d.draw(d.enforcing(why)) {
		d.unenforced++
		return false
	}
	h := &d.hosts[i]
	d.ver.Add(1)
	h.ejected.Store(true)
	d.n.Add(1)
	d.ver.Add(1)
	d.ejections++
	h.ejections++
	h.since = now
	h.reason = why
	if s.Flavor == GRPC {
		h.mult++
		return true
	}
	h.jitter = 0
	if j := s.MaxEjectionTimeJitter; j > 0 {
		ms := uint64(j / time.Millisecond)
		h.jitter = time.Duration(d.src.Uint64()%(ms+1)) * time.Millisecond
	}
	// Envoy grows the multiplier only while base × multiplier is below
	// max + base, so that it stays bounded however often a host fails.
	if time.Duration(h.mult)*s.BaseEjectionTime < s.MaxEjectionTime+s.BaseEjectionTime {
		h.mult++
	}
	return true
}

// draw reports whether an event of chance percent happens: a draw in
// [0, 100) below percent, as Envoy's featureEnabled and grpc-go's
// rand.Int32N(100) < percent. 0 and 100 draw nothing.
func (d *Detector) draw(percent int) bool {
	if percent <= 0 {
		return false
	}
	if percent >= 100 {
		return true
	}
	return int(d.src.Uint64()%100) < percent
}

// Advance runs every evaluation due by now: the first is one Interval after
// the first call to Advance, the next ones every Interval after that, each
// at its own time (so a caller that calls Advance late gets the missed
// evaluations, with the data of the first). It returns resil.ErrNotBuilt
// for the zero Detector.
func (d *Detector) Advance(now time.Time) error {
	if !d.built {
		return resil.ErrNotBuilt
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.begun {
		d.begun = true
		d.next = now.Add(d.s.Interval)
		return nil
	}
	for k := 0; !now.Before(d.next); k++ {
		if k == 1000 {
			// Far behind: skip ahead rather than run a million empty
			// evaluations; the returns still happen at the next one.
			missed := now.Sub(d.next) / d.s.Interval
			d.next = d.next.Add(missed * d.s.Interval)
		}
		d.evaluate(d.next)
		d.next = d.next.Add(d.s.Interval)
	}
	return nil
}

// Evaluate runs one evaluation at now, whatever the interval: what
// Advance runs when an interval ends. It is for drivers that keep their own
// timer, as Envoy and grpc-go do.
func (d *Detector) Evaluate(now time.Time) error {
	if !d.built {
		return resil.ErrNotBuilt
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.evaluate(now)
	return nil
}

// evaluate is one interval timer: Envoy's DetectorImpl::onIntervalTimer or
// grpc-go's intervalTimerAlgorithm. Caller holds mu.
func (d *Detector) evaluate(now time.Time) {
	s := &d.s
	if s.Flavor == GRPC {
		d.interval(now, false, SuccessRate, FailurePercentage)
		// A50 step 5: lower the multiplier of the hosts not ejected, return
		// the ejected ones whose time is over.
		for i := range d.hosts {
			h := &d.hosts[i]
			if !h.ejected.Load() {
				if h.mult > 0 {
					h.mult--
				}
				continue
			}
			t := min(time.Duration(h.mult)*s.BaseEjectionTime, max(s.BaseEjectionTime, s.MaxEjectionTime))
			if now.After(h.since.Add(t)) {
				d.release(now, i)
			}
		}
		return
	}
	for i := range d.hosts {
		h := &d.hosts[i]
		if h.ejected.Load() {
			t := min(time.Duration(h.mult)*s.BaseEjectionTime, s.MaxEjectionTime) + h.jitter
			if now.Sub(h.since) >= t {
				d.release(now, i)
			}
		}
	}
	d.interval(now, false, SuccessRate, FailurePercentage)
	d.interval(now, true, LocalOriginSuccessRate, LocalOriginFailurePercentage)
	for i := range d.hosts {
		h := &d.hosts[i]
		if !h.ejected.Load() && h.returned && now.Sub(h.back) >= s.Interval && h.mult > 0 {
			h.mult--
		}
	}
}

// release returns host i to service. Caller holds mu.
func (d *Detector) release(now time.Time, i int) {
	h := &d.hosts[i]
	d.ver.Add(1)
	h.ejected.Store(false)
	d.n.Add(-1)
	d.ver.Add(1)
	h.back, h.returned = now, true
	h.reason = NotEjected
	// Envoy resets the consecutive counters, so that a host does not come
	// back one error away from its next ejection.
	h.cons5xx.Store(0)
	h.consGW.Store(0)
	h.consLocal.Store(0)
}

// interval swaps one origin's counters and runs the success rate and
// failure percentage rules over them. Caller holds mu.
func (d *Detector) interval(now time.Time, local bool, sr, fp Reason) {
	s := &d.s
	// Take this interval's counts; a Record racing with the swap lands in
	// the next interval.
	for i := range d.hosts {
		h := &d.hosts[i]
		var total, ok uint64
		if local {
			total, ok = h.locTotal.Swap(0), h.locOK.Swap(0)
		} else {
			total, ok = h.extTotal.Swap(0), h.extOK.Swap(0)
		}
		d.rate[i] = -1
		if total > 0 && !h.ejected.Load() {
			ok = min(ok, total)
			d.rate[i] = 100 * float64(ok) / float64(total)
		}
		d.vol[i] = total
	}
	srOn := d.enforcing(sr) > 0 || s.Flavor == Envoy
	fpOn := d.enforcing(fp) > 0 || s.Flavor == Envoy
	if srOn {
		d.take = d.valid(d.take[:0], s.SuccessRateRequestVolume)
		if len(d.take) > 0 && len(d.take) >= s.SuccessRateMinimumHosts {
			var sum float64
			for _, i := range d.take {
				sum += d.rate[i]
			}
			mean := sum / float64(len(d.take))
			var v float64
			for _, i := range d.take {
				v += (d.rate[i] - mean) * (d.rate[i] - mean)
			}
			limit := mean - s.SuccessRateStdevFactor*math.Sqrt(v/float64(len(d.take)))
			for _, i := range d.take {
				if d.rate[i] < limit && !d.hosts[i].ejected.Load() {
					d.eject(now, i, sr)
				}
			}
		}
	}
	if fpOn {
		d.take = d.valid(d.take[:0], s.FailurePercentageRequestVolume)
		if len(d.take) > 0 && len(d.take) >= s.FailurePercentageMinimumHosts {
			th := float64(s.FailurePercentageThreshold)
			for _, i := range d.take {
				f := 100 - d.rate[i]
				out := f >= th // Envoy
				if s.Flavor == GRPC {
					out = f > th // A50: "greater than"
				}
				if out && !d.hosts[i].ejected.Load() {
					d.eject(now, i, fp)
				}
			}
		}
	}
}

// valid appends to dst the hosts with a success rate and at least volume
// requests in the interval. Caller holds mu.
func (d *Detector) valid(dst []int, volume int) []int {
	for i, r := range d.rate {
		if r >= 0 && d.vol[i] >= uint64(volume) {
			dst = append(dst, i)
		}
	}
	return dst
}

// Stats counts what a Detector did. The zero value is no activity.
type Stats struct {
	// Ejected is how many hosts are ejected now.
	Ejected int
	// Ejections counts the hosts ejected so far.
	Ejections uint64
	// Overflows counts the ejections the max ejection percentage refused
	// (Envoy's ejections_overflow).
	Overflows uint64
	// Unenforced counts the outliers the enforcement percentage spared.
	Unenforced uint64
}

// Stats returns the detector's counts.
func (d *Detector) Stats() Stats {
	d.mu.Lock()
	defer d.mu.Unlock()
	return Stats{Ejected: int(d.n.Load()), Ejections: d.ejections, Overflows: d.overflows, Unenforced: d.unenforced}
}

// Host describes one host's state, for reports and tests. The zero value
// describes a host never ejected.
type Host struct {
	// Ejected reports whether the host is ejected now, Reason why and
	// Since from when.
	Ejected bool
	Reason  Reason
	Since   time.Time
	// Ejections counts the host's ejections so far.
	Ejections int
	// Multiplier is the ejection time multiplier: Envoy's backoff or
	// gRPC's ejection_time_multiplier.
	Multiplier int
}

// Host returns host i's state; the zero Host for one out of range.
func (d *Detector) Host(i int) Host {
	if uint(i) >= uint(len(d.hosts)) {
		return Host{}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	h := &d.hosts[i]
	e := h.ejected.Load()
	out := Host{Ejected: e, Ejections: h.ejections, Multiplier: h.mult}
	if e {
		out.Reason, out.Since = h.reason, h.since
	}
	return out
}

// Panic reports whether Envoy's load balancer runs in panic mode, sending
// to every host, ejected or not, when healthy of hosts are healthy and the
// healthy panic threshold is thresholdPercent (Envoy's
// healthy_panic_threshold, default 50; 0 turns panic mode off). It is
// LoadBalancerBase's rule for one priority with no degraded or excluded
// hosts: never in panic while the priority's availability,
// min(100, 140 × healthy / hosts) with the default overprovisioning factor
// 1.4, is 100; else in panic when 100 × healthy / hosts is below the
// threshold.
func Panic(healthy, hosts, thresholdPercent int) bool {
	if hosts <= 0 || thresholdPercent <= 0 {
		return false
	}
	healthy = max(0, min(healthy, hosts))
	if min(100, 140*healthy/hosts) == 100 {
		return false
	}
	return 100*float64(healthy)/float64(hosts) < float64(min(thresholdPercent, 100))
}
