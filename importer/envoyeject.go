package importer

import (
	"math/rand/v2"
	"strconv"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/retrystorm/retrystorm/resil/outlier"
	"github.com/retrystorm/retrystorm/scenario"
)

// A cluster's outlier_detection and lb_policy (issue 25): the fleet's
// outlier_detection (resil/outlier with Envoy's rules) and balancer
// (resil/balance). The fields and their defaults are
// api/envoy/config/cluster/v3/outlier_detection.proto and cluster.proto
// (go-control-plane envoy v1.40.0), the rules
// source/common/upstream/outlier_detection_impl.cc (envoyproxy/envoy
// commit 00c7146d), as resil/outlier reads them.

// envoyLbPolicies maps lb_policy to a balancer; "" is not modelled.
var envoyLbPolicies = map[clusterv3.Cluster_LbPolicy]string{
	clusterv3.Cluster_ROUND_ROBIN:   scenario.BalancerRoundRobin,
	clusterv3.Cluster_LEAST_REQUEST: scenario.BalancerP2C,
	clusterv3.Cluster_RANDOM:        scenario.BalancerRandom,
}

// ejection maps cluster cl's outlier_detection, lb_policy and
// common_lb_config.healthy_panic_threshold to f's outlier detection and
// balancer, noting each field in p. A setting Envoy would refuse (a
// max_ejection_time below base_ejection_time) leaves outlier detection out,
// with a note.
func (c *envoyConfig) ejection(p *prov, f *scenario.Fleet, cl *envoyPiece[*clusterv3.Cluster]) {
	msg := cl.msg
	at := func(s string) string { return joinPath(cl.path, s) }
	// The cluster's settings are read from the cluster's file, which may
	// not be the route's (issue 36, row 9).
	p = p.in(cl.file)
	if msg.GetLbPolicy() != clusterv3.Cluster_ROUND_ROBIN || msg.GetOutlierDetection() != nil || msg.GetCommonLbConfig().GetHealthyPanicThreshold() != nil {
		// Without any of them the fleet keeps the simulator's default.
		f.Balancer = envoyBalancer(p, cl, at)
	}
	od := msg.GetOutlierDetection()
	if od == nil {
		return
	}
	s := envoyOutlier(p, od, at)
	if od.GetSuccessfulActiveHealthCheckUnejectHost().GetValue() {
		p.lose("outlier_detection.successful_active_health_check_uneject_host: the simulator has no active health checks")
	}
	if len(od.GetMonitors()) > 0 {
		p.lose("outlier_detection.monitors: extension monitors are not modelled")
	}
	if od.GetDetectDegradedHosts().GetValue() {
		p.lose("outlier_detection.detect_degraded_hosts: the simulator has no degraded hosts")
	}
	det := scenario.OutlierDetection{Use: scenario.OutlierEnvoy, Settings: s}
	if _, err := det.NewDetector(1, rand.NewPCG(1, 1)); err != nil {
		p.lose("outlier_detection (cluster in %s): Envoy refuses it (%v); not imported", cl.file, err)
		return
	}
	p.set("outlier_detection.use", scenario.OutlierEnvoy, at("outlier_detection")).by(afterSemicolon, "max_ejection_percent is checked as Envoy does since 2023 (max_ejection_rule: after), and the simulator's origin has the replicas of the scenario, one unless changed")
	f.OutlierDetection = det
}

// envoyBalancer maps cluster cl's lb_policy and healthy_panic_threshold
// (at says where a field is in the cluster's file).
func envoyBalancer(p *prov, cl *envoyPiece[*clusterv3.Cluster], at func(string) string) scenario.Balancer {
	msg := cl.msg
	use, ok := envoyLbPolicies[msg.GetLbPolicy()]
	switch {
	case !ok:
		p.lose("lb_policy %s (cluster in %s): not modelled; the fleet picks round robin", msg.GetLbPolicy(), cl.file)
		use = scenario.BalancerRoundRobin
	case msg.GetLbPolicy() == clusterv3.Cluster_LEAST_REQUEST:
		if n := msg.GetLeastRequestLbConfig().GetChoiceCount(); n != nil && n.GetValue() != 2 {
			p.lose("least_request_lb_config.choice_count %d: the simulator's least request draws two (p2c)", n.GetValue())
		}
	}
	b := scenario.Balancer{Use: use, PanicThreshold: 50}
	if msg.GetLbPolicy() == clusterv3.Cluster_ROUND_ROBIN {
		p.dflt("balancer.use", use, at("lb_policy"), "Cluster.lb_policy: defaults to ROUND_ROBIN")
	} else {
		p.set("balancer.use", use, at("lb_policy"))
	}
	if th := msg.GetCommonLbConfig().GetHealthyPanicThreshold(); th != nil {
		b.PanicThreshold = int(th.GetValue())
		p.set("balancer.settings.panic_threshold", strconv.Itoa(b.PanicThreshold), at("common_lb_config.healthy_panic_threshold"))
	}
	return b
}

// envoyOutlier maps the fields of an outlier_detection to resil/outlier's
// settings with Envoy's rules, Envoy's defaults where a field is unset.
func envoyOutlier(p *prov, od *clusterv3.OutlierDetection, at func(string) string) outlier.Settings {
	s := outlier.EnvoyDefaults(0)
	s.Flavor, s.MaxEjectionRule = 0, outlier.CheckAfter
	ints := []struct {
		key, path string
		v         *wrapperspb.UInt32Value
		p         *int
	}{
		{"consecutive_5xx", "consecutive_5xx", od.GetConsecutive_5Xx(), &s.Consecutive5xx},
		{"max_ejection_percent", "max_ejection_percent", od.GetMaxEjectionPercent(), &s.MaxEjectionPercent},
		{"enforcing_consecutive_5xx", "enforcing_consecutive_5xx", od.GetEnforcingConsecutive_5Xx(), &s.Enforcing.Consecutive5xx},
		{"enforcing_success_rate", "enforcing_success_rate", od.GetEnforcingSuccessRate(), &s.Enforcing.SuccessRate},
		{"success_rate_minimum_hosts", "success_rate_minimum_hosts", od.GetSuccessRateMinimumHosts(), &s.SuccessRateMinimumHosts},
		{"success_rate_request_volume", "success_rate_request_volume", od.GetSuccessRateRequestVolume(), &s.SuccessRateRequestVolume},
		{"consecutive_gateway_failure", "consecutive_gateway_failure", od.GetConsecutiveGatewayFailure(), &s.ConsecutiveGatewayFailure},
		{"enforcing_consecutive_gateway_failure", "enforcing_consecutive_gateway_failure", od.GetEnforcingConsecutiveGatewayFailure(), &s.Enforcing.ConsecutiveGatewayFailure},
		{"consecutive_local_origin_failure", "consecutive_local_origin_failure", od.GetConsecutiveLocalOriginFailure(), &s.ConsecutiveLocalOriginFailure},
		{"enforcing_consecutive_local_origin_failure", "enforcing_consecutive_local_origin_failure", od.GetEnforcingConsecutiveLocalOriginFailure(), &s.Enforcing.ConsecutiveLocalOriginFailure},
		{"enforcing_local_origin_success_rate", "enforcing_local_origin_success_rate", od.GetEnforcingLocalOriginSuccessRate(), &s.Enforcing.LocalOriginSuccessRate},
		{"failure_percentage_threshold", "failure_percentage_threshold", od.GetFailurePercentageThreshold(), &s.FailurePercentageThreshold},
		{"enforcing_failure_percentage", "enforcing_failure_percentage", od.GetEnforcingFailurePercentage(), &s.Enforcing.FailurePercentage},
		{"enforcing_local_origin_failure_percentage", "enforcing_failure_percentage_local_origin", od.GetEnforcingFailurePercentageLocalOrigin(), &s.Enforcing.LocalOriginFailurePercentage},
		{"failure_percentage_minimum_hosts", "failure_percentage_minimum_hosts", od.GetFailurePercentageMinimumHosts(), &s.FailurePercentageMinimumHosts},
		{"failure_percentage_request_volume", "failure_percentage_request_volume", od.GetFailurePercentageRequestVolume(), &s.FailurePercentageRequestVolume},
	}
	const key = "outlier_detection.settings."
	for _, n := range ints {
		if n.v != nil {
			*n.p = p.count(n.path, int64(n.v.GetValue()))
			p.set(key+n.key, strconv.Itoa(*n.p), at("outlier_detection."+n.path))
		}
	}
	if v := od.GetSuccessRateStdevFactor(); v != nil {
		s.SuccessRateStdevFactor = float64(v.GetValue()) / 1000
		p.set(key+"success_rate_stdev_factor", strconv.FormatFloat(s.SuccessRateStdevFactor, 'g', -1, 64), at("outlier_detection.success_rate_stdev_factor")).by(afterSpace, "/ 1000")
	}
	durations := []struct {
		key string
		v   *durationpb.Duration
		p   *time.Duration
	}{
		{"interval", od.GetInterval(), &s.Interval},
		{"base_ejection_time", od.GetBaseEjectionTime(), &s.BaseEjectionTime},
		{"max_ejection_time", od.GetMaxEjectionTime(), &s.MaxEjectionTime},
		{"max_ejection_time_jitter", od.GetMaxEjectionTimeJitter(), &s.MaxEjectionTimeJitter},
	}
	for _, d := range durations {
		if d.v != nil {
			*d.p = dur(d.v)
			p.set(key+d.key, fmtDur(*d.p), at("outlier_detection."+d.key))
		}
	}
	if od.GetMaxEjectionTime() == nil && s.BaseEjectionTime > s.MaxEjectionTime {
		s.MaxEjectionTime = s.BaseEjectionTime
	}
	if od.GetSplitExternalLocalOriginErrors() {
		s.SplitExternalLocalOriginErrors = true
		p.set(key+"split_external_local_origin_errors", "true", at("outlier_detection.split_external_local_origin_errors"))
	}
	if v := od.GetAlwaysEjectOneHost(); v != nil && v.GetValue() {
		s.AlwaysEjectOneHost = true
		p.set(key+"always_eject_one_host", "true", at("outlier_detection.always_eject_one_host"))
	}
	return s
}
