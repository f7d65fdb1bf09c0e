package scenario

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/retrystorm/retrystorm/resil"
	"github.com/retrystorm/retrystorm/resil/balance"
	"github.com/retrystorm/retrystorm/resil/outlier"
)

// Replicas, their faults, and what picks among them (issue 25): the
// origin's replicas may each misbehave on their own, a trigger may hit
// one, and a fleet may choose the replica of each attempt with one of
// resil/balance's pickers and eject the bad ones with resil/outlier's
// detector. Without any of these keys a run is what it always was: a
// random replica per attempt, every replica alike.

// Fault kinds: how one replica misbehaves for the whole run.
const (
	FaultLatency   = "latency"   // its service time multiplied by Factor
	FaultErrors    = "errors"    // an extra error rate ErrorRate on its answers
	FaultBlackhole = "blackhole" // it never answers: its clients time out
)

// Fault is one replica misbehaving for the whole run: a slow one, one that
// answers errors, one that is black-holed. A trigger with a replica does
// the same for a while.
type Fault struct {
	Replica   int     // the replica, from 0; required
	Kind      string  // FaultLatency, FaultErrors or FaultBlackhole; required
	Factor    float64 // latency: the multiplier, >= 1; required there
	ErrorRate float64 // errors: the extra error rate, in (0, 1]; required there
}

// Balancer kinds: resil/balance's pickers, in the file's words.
const (
	BalancerRoundRobin   = "round_robin"
	BalancerRandom       = "random"
	BalancerP2C          = "p2c"
	BalancerLeastRequest = "least_request"
	BalancerEWMA         = "ewma"
)

// Balancer is how a fleet picks the replica of each attempt: Use picks one
// of resil/balance's pickers, shared by the fleet's clients as a proxy's
// is by its callers. Use "" (no balancer key) keeps the simulator's
// default, a random replica per attempt drawn from the intent's own
// stream, which no picker reproduces draw for draw.
type Balancer struct {
	Use string
	// PanicThreshold is Envoy's healthy_panic_threshold, in percent: with
	// fewer hosts healthy than that, the picker ignores ejections. The
	// file's default is 50; 0 turns panic mode off, as in Envoy.
	PanicThreshold int
	Decay          time.Duration // ewma: how fast an estimate forgets; default 10s
	DefaultRTT     time.Duration // ewma: the estimate of a host never measured; default 30ms
}

// Outlier detection flavours.
const (
	OutlierNone  = "none"
	OutlierEnvoy = "envoy"
	OutlierGRPC  = "grpc"
)

// OutlierDetection is a fleet's outlier detector, resil/outlier's in the
// file's words: Use picks the product's rules ("none" or absent: none),
// Settings are outlier.Settings less what the run supplies (Hosts is the
// origin's replicas, Flavor follows Use, Rand is the run's seed). Parse
// fills in the product's defaults (outlier.EnvoyDefaults, GRPCDefaults).
type OutlierDetection struct {
	Use      string
	Settings outlier.Settings
}

var (
	faultKinds     = []string{FaultLatency, FaultErrors, FaultBlackhole}
	balancerKinds  = []string{BalancerRoundRobin, BalancerRandom, BalancerP2C, BalancerLeastRequest, BalancerEWMA}
	outlierKinds   = []string{OutlierNone, OutlierEnvoy, OutlierGRPC}
	ejectionRules  = []string{"after", "before"}
	ejectionRuleOf = map[string]outlier.MaxEjectionRule{"after": outlier.CheckAfter, "before": outlier.CheckBefore}
)

// replicas is origin.replicas: a count, or a map of the count and the
// faults. Marshal writes the count alone when there is no fault, so that a
// file without faults reads as it always did.
type replicas struct{ o *Origin }

func (v replicas) object() *object {
	return &object{
		fields: []field{
			{key: "count", need: true, v: integer{&v.o.Replicas}},
			{key: "faults", v: list[Fault]{&v.o.Faults, faultObject}},
		},
	}
}

func (v replicas) read(d *decoder, n *yaml.Node, path string) error {
	if resolve(n).Kind == yaml.MappingNode {
		return v.object().read(d, n, path)
	}
	return integer{&v.o.Replicas}.read(d, n, path)
}

func (v replicas) write() *yaml.Node {
	if len(v.o.Faults) == 0 {
		return integer{&v.o.Replicas}.write()
	}
	return v.object().write()
}

func (v replicas) zero() bool { return v.o.Replicas == 0 && len(v.o.Faults) == 0 }

func (v replicas) validate(c *checker, path string) {
	if len(v.o.Faults) > 0 {
		list[Fault]{&v.o.Faults, faultObject}.validate(c, join(path, "faults"))
	}
}

func faultObject(f *Fault) *object {
	return &object{
		selector: "kind", kind: &f.Kind, kinds: faultKinds, what: "kind: %s",
		fields: []field{
			{key: "replica", need: true, v: integer{&f.Replica}},
			{key: "factor", kinds: []string{FaultLatency}, need: true, v: number{&f.Factor}},
			{key: "error_rate", kinds: []string{FaultErrors}, need: true, v: number{&f.ErrorRate}},
		},
		check: f.check,
	}
}

func (f *Fault) check(c *checker, path string) {
	at := func(key string) string { return join(path, key) }
	in(c, at("replica"), f.Replica, 0, maxReplicas-1)
	switch f.Kind {
	case FaultLatency:
		in(c, at("factor"), f.Factor, 1, 1e6)
	case FaultErrors:
		over(c, at("error_rate"), f.ErrorRate, 0, 1)
	}
}

// checkFaults checks the faults against the replicas they name.
func (o *Origin) checkFaults(c *checker, path string) {
	for i, f := range o.Faults {
		p := fmt.Sprintf("%s.faults[%d]", path, i)
		if f.Replica >= o.Replicas {
			c.fail(p+".replica", "replica %d, but the origin has %d (numbered from 0)", f.Replica, o.Replicas)
			return
		}
		if f.Kind == FaultLatency && o.Model == ModelCapacity {
			c.fail(p+".kind", "the capacity model has no latency factor: a slow replica needs the queue or the concurrency model")
			return
		}
		if j := slices.IndexFunc(o.Faults[:i], func(g Fault) bool { return g.Replica == f.Replica && g.Kind == f.Kind }); j >= 0 {
			c.fail(p, "replica %d has a %s fault already (faults[%d]): give one", f.Replica, f.Kind, j)
			return
		}
	}
}

// optReplica is a trigger's replica: absent (nil) means every replica.
type optReplica struct{ p **int }

func (v optReplica) read(d *decoder, n *yaml.Node, path string) error {
	var i int
	if err := (integer{&i}).read(d, n, path); err != nil {
		return err
	}
	*v.p = &i
	return nil
}

func (v optReplica) write() *yaml.Node {
	if *v.p == nil {
		return nil
	}
	return integer{*v.p}.write()
}

func (v optReplica) zero() bool { return *v.p == nil }

// unlessUnset is an optional map written only when set: a fleet without a
// balancer or an outlier detector marshals as it always did.
type unlessUnset struct {
	o   *object
	set func() bool
}

func (v unlessUnset) read(d *decoder, n *yaml.Node, path string) error { return v.o.read(d, n, path) }
func (v unlessUnset) zero() bool                                       { return !v.set() }
func (v unlessUnset) validate(c *checker, path string) {
	switch {
	case v.set():
		v.o.validate(c, path)
	case !v.o.zero():
		// What Marshal would leave out must not be there.
		c.fail(join(path, "use"), "is required when settings are given: %s", oneOf(v.o.kinds))
	case v.o.check != nil:
		v.o.check(c, path) // what the file cannot hold at all
	}
}

func (v unlessUnset) write() *yaml.Node {
	if !v.set() {
		return nil
	}
	return v.o.write()
}

func balancerValue(b *Balancer) value {
	return unlessUnset{o: balancerObject(b), set: func() bool { return b.Use != "" }}
}

func balancerObject(b *Balancer) *object {
	settings := &object{
		kind: &b.Use, what: "use: %s",
		fields: []field{
			{key: "panic_threshold", v: integer{&b.PanicThreshold}},
			{key: "decay", kinds: []string{BalancerEWMA}, v: duration{&b.Decay}},
			{key: "default_rtt", kinds: []string{BalancerEWMA}, v: duration{&b.DefaultRTT}},
		},
		preset: func(use string) {
			b.PanicThreshold = 50
			if use == BalancerEWMA {
				b.Decay, b.DefaultRTT = 10*time.Second, 30*time.Millisecond
			}
		},
	}
	return &object{
		selector: "use", kind: &b.Use, kinds: balancerKinds, what: "use: %s",
		fields: []field{{key: "settings", v: settings}},
		check:  b.check,
	}
}

func (b *Balancer) check(c *checker, path string) {
	at := func(key string) string { return join(path, "settings."+key) }
	in(c, at("panic_threshold"), b.PanicThreshold, 0, 100)
	if b.Use == BalancerEWMA {
		in(c, at("decay"), b.Decay, 0, maxWait)
		in(c, at("default_rtt"), b.DefaultRTT, 0, maxWait)
	}
}

func outlierValue(od *OutlierDetection) value {
	// use: none is written when given, so that it reads back as given.
	return unlessUnset{o: outlierObject(od), set: func() bool { return od.Use != "" }}
}

func outlierObject(od *OutlierDetection) *object {
	s := &od.Settings
	var (
		both  = []string{OutlierEnvoy, OutlierGRPC}
		envoy = []string{OutlierEnvoy}
		e     = &s.Enforcing
	)
	settings := &object{
		kind: &od.Use, absentKind: OutlierNone, what: "use: %s", block: true,
		fields: []field{
			{key: "interval", kinds: both, v: duration{&s.Interval}},
			{key: "base_ejection_time", kinds: both, v: duration{&s.BaseEjectionTime}},
			{key: "max_ejection_time", kinds: both, v: duration{&s.MaxEjectionTime}},
			{key: "max_ejection_time_jitter", kinds: envoy, v: duration{&s.MaxEjectionTimeJitter}},
			{key: "max_ejection_percent", kinds: both, v: integer{&s.MaxEjectionPercent}},
			{key: "max_ejection_rule", kinds: both, v: ejectionRule{&s.MaxEjectionRule}},
			{key: "always_eject_one_host", kinds: envoy, v: boolean{&s.AlwaysEjectOneHost}},
			{key: "consecutive_5xx", kinds: envoy, v: integer{&s.Consecutive5xx}},
			{key: "consecutive_gateway_failure", kinds: envoy, v: integer{&s.ConsecutiveGatewayFailure}},
			{key: "split_external_local_origin_errors", kinds: envoy, v: boolean{&s.SplitExternalLocalOriginErrors}},
			{key: "consecutive_local_origin_failure", kinds: envoy, v: integer{&s.ConsecutiveLocalOriginFailure}},
			{key: "success_rate_minimum_hosts", kinds: both, v: integer{&s.SuccessRateMinimumHosts}},
			{key: "success_rate_request_volume", kinds: both, v: integer{&s.SuccessRateRequestVolume}},
			{key: "success_rate_stdev_factor", kinds: both, v: number{&s.SuccessRateStdevFactor}},
			{key: "failure_percentage_threshold", kinds: both, v: integer{&s.FailurePercentageThreshold}},
			{key: "failure_percentage_minimum_hosts", kinds: both, v: integer{&s.FailurePercentageMinimumHosts}},
			{key: "failure_percentage_request_volume", kinds: both, v: integer{&s.FailurePercentageRequestVolume}},
			{key: "enforcing_consecutive_5xx", kinds: envoy, v: integer{&e.Consecutive5xx}},
			{key: "enforcing_consecutive_gateway_failure", kinds: envoy, v: integer{&e.ConsecutiveGatewayFailure}},
			{key: "enforcing_consecutive_local_origin_failure", kinds: envoy, v: integer{&e.ConsecutiveLocalOriginFailure}},
			{key: "enforcing_success_rate", kinds: both, v: integer{&e.SuccessRate}},
			{key: "enforcing_local_origin_success_rate", kinds: envoy, v: integer{&e.LocalOriginSuccessRate}},
			{key: "enforcing_failure_percentage", kinds: both, v: integer{&e.FailurePercentage}},
			{key: "enforcing_local_origin_failure_percentage", kinds: envoy, v: integer{&e.LocalOriginFailurePercentage}},
		},
		preset: func(use string) {
			switch use {
			case OutlierEnvoy:
				*s = outlier.EnvoyDefaults(0)
			case OutlierGRPC:
				*s = outlier.GRPCDefaults(0)
			}
			s.Hosts, s.Flavor = 0, 0
			if use != OutlierNone && s.MaxEjectionRule == outlier.RuleOfFlavor {
				s.MaxEjectionRule = outlierDefaultRule(use)
			}
		},
	}
	return &object{
		selector: "use", kind: &od.Use, kinds: outlierKinds, absentKind: OutlierNone, what: "use: %s", block: true,
		fields: []field{{key: "settings", v: settings}},
		check:  od.check,
	}
}

// check refuses what the file cannot say: the run supplies the hosts, the
// flavour (from Use) and the randomness.
func (od *OutlierDetection) check(c *checker, path string) {
	if s := od.Settings; s.Hosts != 0 || s.Flavor != 0 || s.Rand != nil {
		c.fail(path, "settings' Hosts, Flavor and Rand must be left zero: the run supplies the origin's replicas, use's rules and the seed")
	}
	if !od.Detects() {
		return
	}
	if od.Settings.MaxEjectionRule == outlier.RuleOfFlavor {
		// Every word spelled out, as Parse leaves it.
		c.fail(join(path, "settings.max_ejection_rule"), "must be %s", oneOf(ejectionRules))
	}
	// resil reads a zero as the product's default, but a file that gives
	// 0 must not get 10s (issue 37), and code spells them out as Parse
	// leaves them. Envoy refuses 0 for all three (outlier_detection.proto:
	// duration gt 0); gRPC's 0 (grpc-go's ParseConfig takes it: a timer
	// that never waits) is not one the detector runs.
	for _, d := range []struct {
		key string
		v   time.Duration
	}{{"interval", od.Settings.Interval}, {"base_ejection_time", od.Settings.BaseEjectionTime}, {"max_ejection_time", od.Settings.MaxEjectionTime}} {
		if d.v == 0 {
			c.fail(join(path, "settings."+d.key), "must be more than 0 (at least 1ms): leave the key out for the default")
		}
	}
}

// outlierDefaultRule is the max ejection rule each product applies today.
func outlierDefaultRule(use string) outlier.MaxEjectionRule {
	if use == OutlierGRPC {
		return outlier.CheckBefore
	}
	return outlier.CheckAfter
}

// ejectionRule is max_ejection_rule: after (Envoy since 2023) or before
// (Envoy before 2023, and gRPC).
type ejectionRule struct{ p *outlier.MaxEjectionRule }

func (v ejectionRule) read(d *decoder, n *yaml.Node, path string) error {
	var w string
	if err := (word{p: &w, words: ejectionRules}).read(d, n, path); err != nil {
		return err
	}
	*v.p = ejectionRuleOf[w]
	return nil
}

func (v ejectionRule) write() *yaml.Node {
	for w, r := range ejectionRuleOf {
		if r == *v.p {
			return plain(w)
		}
	}
	return nil
}

func (v ejectionRule) zero() bool { return *v.p == outlier.RuleOfFlavor }

// outlierKeys maps outlier.Settings' fields to the file's keys, for
// resil's errors to name the key.
var outlierKeys = map[string]string{
	"Interval": "interval", "BaseEjectionTime": "base_ejection_time", "MaxEjectionTime": "max_ejection_time",
	"MaxEjectionTimeJitter": "max_ejection_time_jitter", "MaxEjectionPercent": "max_ejection_percent",
	"MaxEjectionRule": "max_ejection_rule", "AlwaysEjectOneHost": "always_eject_one_host",
	"Consecutive5xx": "consecutive_5xx", "ConsecutiveGatewayFailure": "consecutive_gateway_failure",
	"SplitExternalLocalOriginErrors": "split_external_local_origin_errors",
	"ConsecutiveLocalOriginFailure":  "consecutive_local_origin_failure",
	"SuccessRateMinimumHosts":        "success_rate_minimum_hosts", "SuccessRateRequestVolume": "success_rate_request_volume",
	"SuccessRateStdevFactor":     "success_rate_stdev_factor",
	"FailurePercentageThreshold": "failure_percentage_threshold", "FailurePercentageMinimumHosts": "failure_percentage_minimum_hosts",
	"FailurePercentageRequestVolume":          "failure_percentage_request_volume",
	"Enforcing.Consecutive5xx":                "enforcing_consecutive_5xx",
	"Enforcing.ConsecutiveGatewayFailure":     "enforcing_consecutive_gateway_failure",
	"Enforcing.ConsecutiveLocalOriginFailure": "enforcing_consecutive_local_origin_failure",
	"Enforcing.SuccessRate":                   "enforcing_success_rate",
	"Enforcing.LocalOriginSuccessRate":        "enforcing_local_origin_success_rate",
	"Enforcing.FailurePercentage":             "enforcing_failure_percentage",
	"Enforcing.LocalOriginFailurePercentage":  "enforcing_local_origin_failure_percentage",
}

// balancerKeys maps balance.Settings' fields to the file's keys.
var balancerKeys = map[string]string{"PanicThreshold": "panic_threshold", "Decay": "decay", "DefaultRTT": "default_rtt"}

// Detects reports whether the fleet has an outlier detector.
func (od *OutlierDetection) Detects() bool { return od.Use == OutlierEnvoy || od.Use == OutlierGRPC }

// NewDetector returns the fleet's outlier detector for hosts replicas,
// drawing from src; nil and no error when it has none.
func (od *OutlierDetection) NewDetector(hosts int, src rand.Source) (*outlier.Detector, error) {
	if !od.Detects() {
		return nil, nil
	}
	s := od.Settings
	s.Hosts, s.Rand, s.Flavor = hosts, src, outlier.Envoy
	if od.Use == OutlierGRPC {
		s.Flavor = outlier.GRPC
	}
	return outlier.New(s)
}

// NewPicker returns the fleet's picker for hosts replicas, asking det (nil:
// none) which are ejected, drawing its seed from src. Use "" with a
// detector picks round robin, Envoy's and gRPC's default; Use "" without
// one returns nil: the simulator's own random draw.
func (b *Balancer) NewPicker(hosts int, det *outlier.Detector, src rand.Source) (balance.Picker, error) {
	use := b.Use
	if use == "" {
		if det == nil {
			return nil, nil
		}
		use = BalancerRoundRobin
	}
	s := balance.Settings{Hosts: hosts, Detector: det, PanicThreshold: b.PanicThreshold, Rand: src}
	if b.Use == "" {
		s.PanicThreshold = 50
	}
	if s.PanicThreshold == 0 {
		s.PanicThreshold = balance.NoPanic
	}
	kind := balance.Kind(use)
	switch use {
	case BalancerRoundRobin:
		s.Rand = nil // it draws nothing
	case BalancerEWMA:
		kind, s.Decay, s.DefaultRTT = balance.KindPeakEWMA, b.Decay, b.DefaultRTT
	}
	return balance.New(kind, s)
}

// checkReplicaPolicy checks fleet i's balancer and outlier detector
// against the layer it calls (the first tier's replicas, or the origin's):
// resil's constructors are the last word, and their errors are reported
// under the file's key.
func (s *Scenario) checkReplicaPolicy(c *checker, i int) {
	f := &s.Fleets[i]
	s.checkPicker(c, fmt.Sprintf("fleets[%d]", i), &f.Balancer, &f.OutlierDetection, s.layerReplicas(s.Entry(i)))
}

// checkTierPicker checks tier l's client's balancer and outlier detector
// against the layer it calls.
func (s *Scenario) checkTierPicker(c *checker, l int) {
	cl := &s.Tiers[l].Client
	s.checkPicker(c, fmt.Sprintf("tiers[%d].client", l), &cl.Balancer, &cl.OutlierDetection, s.layerReplicas(l+1))
}

// layerReplicas is how many replicas layer l has: tier l's server's, the
// origin's past the tiers.
func (s *Scenario) layerReplicas(l int) int {
	if l < len(s.Tiers) {
		return max(s.Tiers[l].Server.Replicas, 1)
	}
	return max(s.Origin.Replicas, 1)
}

func (s *Scenario) checkPicker(c *checker, p string, b *Balancer, od *OutlierDetection, hosts int) {
	if b.Use == "" && !od.Detects() {
		return
	}
	det, err := od.NewDetector(hosts, rand.NewPCG(1, 1))
	if err != nil {
		c.fail(settingPath(join(p, "outlier_detection"), err, "outlier.Settings.", outlierKeys), "%s", settingReason(err))
		return
	}
	if _, err := b.NewPicker(hosts, det, rand.NewPCG(1, 1)); err != nil {
		c.fail(settingPath(join(p, "balancer"), err, "balance.Settings.", balancerKeys), "%s", settingReason(err))
	}
}

// settingPath is the file's path of the setting a resil error names.
func settingPath(path string, err error, prefix string, keys map[string]string) string {
	if se, ok := errors.AsType[*resil.SettingError](err); ok {
		if k, ok := keys[strings.TrimPrefix(se.Field, prefix)]; ok {
			return join(path, "settings."+k)
		}
	}
	return path
}

// settingReason is what a resil error says is wrong.
func settingReason(err error) string {
	if se, ok := errors.AsType[*resil.SettingError](err); ok && se.Reason != "" {
		if se.Value != nil {
			return fmt.Sprintf("%s, got %v", se.Reason, se.Value)
		}
		return se.Reason
	}
	return err.Error()
}
