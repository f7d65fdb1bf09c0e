package importer

import (
	"strconv"

	networking "istio.io/api/networking/v1alpha3"

	"github.com/retrystorm/retrystorm/resil/outlier"
	"github.com/retrystorm/retrystorm/scenario"
)

// A DestinationRule's trafficPolicy.loadBalancer and outlierDetection
// (issue 25), as pilot turns them into an Envoy cluster: istio/istio
// pilot/pkg/networking/core/cluster_traffic_policy.go, applyLoadBalancer
// and applyOutlierDetection (commit 011b88bb). What pilot does not set is
// Envoy's default (outlier.EnvoyDefaults); what it does:
//
//   - success rate ejection off (enforcing_success_rate 0, and the local
//     origin one with the split);
//   - consecutive5xxErrors and consecutiveGatewayErrors, when set, set
//     the threshold and its enforcement: 100, or 0 with a threshold of 0;
//   - maxEjectionPercent only when above 0;
//   - consecutiveLocalOriginFailures only with the split, enforcing 100;
//   - healthy_panic_threshold = minHealthPercent whenever outlierDetection
//     is set: 0 by default, which turns panic mode off;
//   - the simple load balancer LEAST_REQUEST (and LEAST_CONN), RANDOM,
//     ROUND_ROBIN, and LEAST_REQUEST when unspecified (defaultLBAlgorithm).

var istioSimpleLB = map[networking.LoadBalancerSettings_SimpleLB]string{
	networking.LoadBalancerSettings_UNSPECIFIED:   scenario.BalancerP2C,
	networking.LoadBalancerSettings_LEAST_CONN:    scenario.BalancerP2C,
	networking.LoadBalancerSettings_LEAST_REQUEST: scenario.BalancerP2C,
	networking.LoadBalancerSettings_RANDOM:        scenario.BalancerRandom,
	networking.LoadBalancerSettings_ROUND_ROBIN:   scenario.BalancerRoundRobin,
}

// istioEjection maps a destination's traffic policy to f's balancer and
// outlier detection. Without a loadBalancer or an outlierDetection the
// fleet keeps the simulator's default, a random replica per attempt.
func istioEjection(p *prov, f *scenario.Fleet, pol trafficPolicy) {
	tp := pol.tp
	lb, od := tp.GetLoadBalancer(), tp.GetOutlierDetection()
	if lb == nil && od == nil {
		return
	}
	p = p.in(pol.file) // the rule's file, which may not be the route's (issue 36, row 9)
	dr := pol.in(p)
	use, ok := istioSimpleLB[lb.GetSimple()]
	switch {
	case lb.GetConsistentHash() != nil || lb.GetBackendUtilization() != nil || !ok:
		p.lose("loadBalancer (DestinationRule %s): consistent hashing, backend utilization and PASSTHROUGH are not modelled; the fleet picks round robin", pol.name)
		use = scenario.BalancerRoundRobin
	case lb.GetSimple() == networking.LoadBalancerSettings_UNSPECIFIED:
		p.dflt("balancer.use", use, "spec.trafficPolicy.loadBalancer.simple", "pilot's defaultLBAlgorithm: LEAST_REQUEST")
	default:
		dr.set("balancer.use", use, pol.lb+".loadBalancer.simple")
	}
	if lb.GetWarmupDurationSecs() != nil || lb.GetWarmup() != nil {
		p.lose("loadBalancer warmup (slow start) is not modelled")
	}
	f.Balancer = scenario.Balancer{Use: use, PanicThreshold: 50}
	if od == nil {
		return
	}
	s := outlier.EnvoyDefaults(0)
	s.Flavor, s.MaxEjectionRule = 0, outlier.CheckAfter
	s.Enforcing.SuccessRate = 0
	p.note("outlier_detection.settings.enforcing_success_rate", "0", "pilot turns success rate ejection off")
	at := pol.outlier + ".outlierDetection."
	const key = "outlier_detection.settings."
	enforce := func(v uint32) int {
		if v > 0 {
			return 100
		}
		return 0
	}
	if v := od.GetConsecutive_5XxErrors(); v != nil {
		s.Consecutive5xx, s.Enforcing.Consecutive5xx = p.count("consecutive5xxErrors", int64(v.GetValue())), enforce(v.GetValue())
		dr.set(key+"consecutive_5xx", strconv.Itoa(s.Consecutive5xx), at+"consecutive5xxErrors")
	}
	if v := od.GetConsecutiveGatewayErrors(); v != nil {
		s.ConsecutiveGatewayFailure, s.Enforcing.ConsecutiveGatewayFailure = p.count("consecutiveGatewayErrors", int64(v.GetValue())), enforce(v.GetValue())
		dr.set(key+"consecutive_gateway_failure", strconv.Itoa(s.ConsecutiveGatewayFailure), at+"consecutiveGatewayErrors")
	}
	if v := od.GetInterval(); v != nil {
		s.Interval = dur(v)
		dr.set(key+"interval", fmtDur(s.Interval), at+"interval")
	}
	if v := od.GetBaseEjectionTime(); v != nil {
		s.BaseEjectionTime = dur(v)
		s.MaxEjectionTime = max(s.MaxEjectionTime, s.BaseEjectionTime)
		dr.set(key+"base_ejection_time", fmtDur(s.BaseEjectionTime), at+"baseEjectionTime")
	}
	if v := od.GetMaxEjectionPercent(); v > 0 {
		s.MaxEjectionPercent = int(min(v, 100))
		dr.set(key+"max_ejection_percent", strconv.Itoa(s.MaxEjectionPercent), at+"maxEjectionPercent")
	}
	if od.GetSplitExternalLocalOriginErrors() {
		s.SplitExternalLocalOriginErrors, s.Enforcing.LocalOriginSuccessRate = true, 0
		dr.set(key+"split_external_local_origin_errors", "true", at+"splitExternalLocalOriginErrors")
		if v := od.GetConsecutiveLocalOriginFailures().GetValue(); v > 0 {
			s.ConsecutiveLocalOriginFailure, s.Enforcing.ConsecutiveLocalOriginFailure = p.count("consecutiveLocalOriginFailures", int64(v)), 100
			dr.set(key+"consecutive_local_origin_failure", strconv.Itoa(s.ConsecutiveLocalOriginFailure), at+"consecutiveLocalOriginFailures")
		}
	}
	if od.GetConsecutiveErrors() != 0 || od.GetFailurePercentageThreshold() != nil || len(od.GetOutlierDetectionHttpErrorCodes()) > 0 {
		p.lose("outlierDetection.consecutiveErrors, failurePercentageThreshold and outlierDetectionHttpErrorCodes are not imported: pilot (istio commit 011b88bb) does not read them")
	}
	f.Balancer.PanicThreshold = int(max(0, min(od.GetMinHealthPercent(), 100)))
	dr.set("balancer.settings.panic_threshold", strconv.Itoa(f.Balancer.PanicThreshold), at+"minHealthPercent").by(afterColon, "pilot sets healthy_panic_threshold to it, 0 (panic mode off) by default")
	det := scenario.OutlierDetection{Use: scenario.OutlierEnvoy, Settings: s}
	dr.set("outlier_detection.use", scenario.OutlierEnvoy, pol.outlier+".outlierDetection").by(afterSemicolon, "Envoy's max ejection rule since 2023 (after); the simulator's origin has the replicas of the scenario, one unless changed")
	f.OutlierDetection = det
}
