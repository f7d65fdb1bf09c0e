package importer

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/retrystorm/retrystorm/resil/outlier"
	"github.com/retrystorm/retrystorm/scenario"
)

// A gRPC service config's loadBalancingConfig (and the older
// loadBalancingPolicy) (issue 25): the fleet's balancer and, for
// outlier_detection_experimental, its outlier detection with gRPC's rules
// (gRFC A50). The channel uses the first policy of the list it knows
// (grpc-go v1.85.0, internal/serviceconfig); the outlier detection config,
// its defaults and its checks are grpc-go's
// internal/xds/balancer/outlierdetection (config.go, ParseConfig): interval
// 10s, baseEjectionTime 30s, maxEjectionTime 300s (or the base if larger),
// maxEjectionPercent 10; success rate ejection only when
// successRateEjection is given (stdevFactor 1900, enforcementPercentage
// 100, minimumHosts 5, requestVolume 100), failure percentage only when
// failurePercentageEjection is (threshold 85, enforcementPercentage 0,
// minimumHosts 5, requestVolume 50). gRPC has no panic threshold.

// grpcLB is the part of a service config read here.
type grpcLB struct {
	LoadBalancingConfig []map[string]json.RawMessage `json:"loadBalancingConfig"`
	LoadBalancingPolicy string                       `json:"loadBalancingPolicy"`
}

type grpcOutlier struct {
	Interval            *string `json:"interval"`
	BaseEjectionTime    *string `json:"baseEjectionTime"`
	MaxEjectionTime     *string `json:"maxEjectionTime"`
	MaxEjectionPercent  *uint32 `json:"maxEjectionPercent"`
	SuccessRateEjection *struct {
		StdevFactor           *uint32 `json:"stdevFactor"`
		EnforcementPercentage *uint32 `json:"enforcementPercentage"`
		MinimumHosts          *uint32 `json:"minimumHosts"`
		RequestVolume         *uint32 `json:"requestVolume"`
	} `json:"successRateEjection"`
	FailurePercentageEjection *struct {
		Threshold             *uint32 `json:"threshold"`
		EnforcementPercentage *uint32 `json:"enforcementPercentage"`
		MinimumHosts          *uint32 `json:"minimumHosts"`
		RequestVolume         *uint32 `json:"requestVolume"`
	} `json:"failurePercentageEjection"`
	ChildPolicy []map[string]json.RawMessage `json:"childPolicy"`
}

// grpcPickers maps the policies whose pick the simulator has.
var grpcPickers = map[string]string{
	"round_robin":                scenario.BalancerRoundRobin,
	"least_request_experimental": scenario.BalancerP2C,
}

// grpcEjection reads data's load-balancing policy into f, noting it in p.
// A config without one leaves the simulator's default (a random replica
// per attempt; grpc-go's own default, pick_first, sends every call to one).
func grpcEjection(p *prov, f *scenario.Fleet, data []byte) error {
	var lb grpcLB
	if json.Unmarshal(data, &lb) != nil {
		return nil // grpcconfig read the file: not JSON it would take is not ours to judge
	}
	policies := lb.LoadBalancingConfig
	if len(policies) == 0 && lb.LoadBalancingPolicy != "" {
		policies = []map[string]json.RawMessage{{lb.LoadBalancingPolicy: nil}}
	}
	name, cfg, at := firstPolicy(policies)
	if _, ok := grpcPickers[name]; !ok && name != "outlier_detection_experimental" {
		if name != "" {
			p.lose("loadBalancingConfig[%d].%s: the channel's policy, which the simulator does not model (it has round_robin, least_request_experimental and outlier_detection_experimental); each attempt goes to a random replica", at, name)
		}
		return nil
	}
	path := fmt.Sprintf("loadBalancingConfig[%d].%s", at, name)
	if name != "outlier_detection_experimental" {
		f.Balancer = scenario.Balancer{Use: grpcPickers[name]}
		p.set("balancer.use", f.Balancer.Use, path)
		p.note("balancer.settings.panic_threshold", "0", "gRPC has no panic threshold")
		return nil
	}
	var od grpcOutlier
	if err := json.Unmarshal(cfg, &od); err != nil {
		return fmt.Errorf("%s: %v", path, err)
	}
	child, _, _ := firstPolicy(od.ChildPolicy)
	use := grpcPickers[child]
	if use == "" {
		p.lose("%s.childPolicy: none the simulator models; the fleet picks round robin", path)
		use = scenario.BalancerRoundRobin
	} else {
		p.set("balancer.use", use, path+".childPolicy")
	}
	f.Balancer = scenario.Balancer{Use: use}
	p.note("balancer.settings.panic_threshold", "0", "gRPC has no panic threshold")
	s, err := grpcOutlierSettings(p, &od, path)
	if err != nil {
		return err
	}
	det := scenario.OutlierDetection{Use: scenario.OutlierGRPC, Settings: s}
	if _, err := det.NewDetector(1, nil); err != nil {
		return fmt.Errorf("%s: %v (grpc-go refuses it too)", path, err)
	}
	p.note("outlier_detection.use", scenario.OutlierGRPC, path+"; max_ejection_percent is checked before the ejection, as grpc-go does; the simulator's origin has the replicas of the scenario, one unless changed")
	f.OutlierDetection = det
	return nil
}

// grpcOutlierSettings maps an outlier_detection_experimental policy's
// config od (at path) to resil/outlier's settings, grpc-go's defaults
// where a field is unset.
func grpcOutlierSettings(p *prov, od *grpcOutlier, path string) (outlier.Settings, error) {
	s := outlier.GRPCDefaults(0)
	s.Flavor, s.MaxEjectionRule = 0, outlier.CheckBefore
	s.Enforcing.SuccessRate = 0 // on only with successRateEjection
	const key = "outlier_detection.settings."
	for _, d := range []struct {
		k, json string
		v       *string
		p       *time.Duration
	}{
		{"interval", "interval", od.Interval, &s.Interval},
		{"base_ejection_time", "baseEjectionTime", od.BaseEjectionTime, &s.BaseEjectionTime},
		{"max_ejection_time", "maxEjectionTime", od.MaxEjectionTime, &s.MaxEjectionTime},
	} {
		if d.v == nil {
			continue
		}
		t, err := time.ParseDuration(*d.v)
		if err != nil || t < 0 {
			return outlier.Settings{}, fmt.Errorf("%s.%s: %q is not a duration such as \"10s\"", path, d.json, *d.v)
		}
		*d.p = p.wait(d.json, t, time.Millisecond)
		p.set(key+d.k, fmtDur(*d.p), path+"."+d.json)
	}
	if od.MaxEjectionTime == nil {
		s.MaxEjectionTime = max(s.MaxEjectionTime, s.BaseEjectionTime)
	}
	ints := func(sub string, pairs ...any) {
		for i := 0; i < len(pairs); i += 3 {
			v, k, dst := pairs[i].(*uint32), pairs[i+1].(string), pairs[i+2].(*int)
			if v != nil {
				*dst = p.count(k, int64(*v))
				p.set(key+k, strconv.Itoa(*dst), path+sub)
			}
		}
	}
	ints(".maxEjectionPercent", od.MaxEjectionPercent, "max_ejection_percent", &s.MaxEjectionPercent)
	if sr := od.SuccessRateEjection; sr != nil {
		s.Enforcing.SuccessRate = 100
		p.note(key+"enforcing_success_rate", "100", path+".successRateEjection given (enforcementPercentage defaults to 100)")
		if sr.StdevFactor != nil {
			s.SuccessRateStdevFactor = float64(*sr.StdevFactor) / 1000
			p.set(key+"success_rate_stdev_factor", strconv.FormatFloat(s.SuccessRateStdevFactor, 'g', -1, 64), path+".successRateEjection.stdevFactor").by(afterSpace, "/ 1000")
		}
		ints(".successRateEjection", sr.EnforcementPercentage, "enforcing_success_rate", &s.Enforcing.SuccessRate,
			sr.MinimumHosts, "success_rate_minimum_hosts", &s.SuccessRateMinimumHosts, sr.RequestVolume, "success_rate_request_volume", &s.SuccessRateRequestVolume)
	}
	if fp := od.FailurePercentageEjection; fp != nil {
		ints(".failurePercentageEjection", fp.Threshold, "failure_percentage_threshold", &s.FailurePercentageThreshold,
			fp.EnforcementPercentage, "enforcing_failure_percentage", &s.Enforcing.FailurePercentage,
			fp.MinimumHosts, "failure_percentage_minimum_hosts", &s.FailurePercentageMinimumHosts, fp.RequestVolume, "failure_percentage_request_volume", &s.FailurePercentageRequestVolume)
		if fp.EnforcementPercentage == nil {
			p.lose("%s.failurePercentageEjection without enforcementPercentage: grpc-go's default is 0, so the rule never ejects", path)
		}
	}
	return s, nil
}

// grpcKnown are the policies grpc-go registers (with its xds package
// imported): the channel takes the first of the list it knows.
var grpcKnown = map[string]bool{
	"pick_first": true, "round_robin": true, "least_request_experimental": true, "weighted_round_robin": true,
	"outlier_detection_experimental": true, "ring_hash_experimental": true, "rls_experimental": true,
	"priority_experimental": true, "weighted_target_experimental": true, "xds_cluster_impl_experimental": true,
	"cds_experimental": true, "xds_cluster_manager_experimental": true, "grpclb": true,
}

// firstPolicy returns the first policy of list that grpc-go knows, its
// config and its index; "" when none.
func firstPolicy(list []map[string]json.RawMessage) (string, json.RawMessage, int) {
	for i, m := range list {
		for name, cfg := range m {
			if grpcKnown[name] {
				return name, cfg, i
			}
		}
	}
	return "", nil, 0
}
