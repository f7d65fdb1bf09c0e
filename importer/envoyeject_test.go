package importer

import (
	"strings"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/resil/outlier"
	"github.com/retrystorm/retrystorm/scenario"
)

// TestEnvoyEjection is the decision table of a cluster's lb_policy,
// common_lb_config.healthy_panic_threshold and outlier_detection, read
// from api/envoy/config/cluster/v3/cluster.proto and outlier_detection.proto
// (go-control-plane envoy v1.40.0: the defaults in the fields' comments):
// lb_policy defaults to ROUND_ROBIN, LEAST_REQUEST draws choice_count (2)
// hosts, healthy_panic_threshold defaults to 50%, and every
// outlier_detection field has the default of outlier.EnvoyDefaults
// (consecutive_5xx 5, interval 10s, base_ejection_time 30s,
// max_ejection_percent 10, success_rate_stdev_factor 1900 / 1000, ...).
func TestEnvoyEjection(t *testing.T) {
	const route = `virtual_hosts:
  - name: api
    domains: ["*"]
    routes:
      - match: {prefix: /}
        route: {cluster: api, retry_policy: {retry_on: 5xx, num_retries: 2}}
`
	cluster := func(extra string) string {
		return "name: api\nconnect_timeout: 1s\n" + extra
	}
	defaults := outlier.EnvoyDefaults(0)
	defaults.Flavor, defaults.MaxEjectionRule = 0, outlier.CheckAfter
	for _, c := range []struct {
		name, cluster string
		balancer      scenario.Balancer
		outlier       func(s *outlier.Settings) // nil: no outlier detection
		lost          string
	}{
		{name: "nothing: the simulator's default", cluster: cluster("")},
		{name: "lb_policy alone", cluster: cluster("lb_policy: LEAST_REQUEST\n"), balancer: scenario.Balancer{Use: scenario.BalancerP2C, PanicThreshold: 50}},
		{name: "random", cluster: cluster("lb_policy: RANDOM\n"), balancer: scenario.Balancer{Use: scenario.BalancerRandom, PanicThreshold: 50}},
		{name: "ring hash is not modelled", cluster: cluster("lb_policy: RING_HASH\n"), balancer: scenario.Balancer{Use: scenario.BalancerRoundRobin, PanicThreshold: 50}, lost: "lb_policy RING_HASH"},
		{name: "choice_count 3", cluster: cluster("lb_policy: LEAST_REQUEST\nleast_request_lb_config: {choice_count: 3}\n"), balancer: scenario.Balancer{Use: scenario.BalancerP2C, PanicThreshold: 50}, lost: "choice_count 3"},
		{name: "panic threshold", cluster: cluster("common_lb_config: {healthy_panic_threshold: {value: 0}}\n"), balancer: scenario.Balancer{Use: scenario.BalancerRoundRobin, PanicThreshold: 0}},
		{name: "outlier_detection: {} is every default", cluster: cluster("outlier_detection: {}\n"), balancer: scenario.Balancer{Use: scenario.BalancerRoundRobin, PanicThreshold: 50},
			outlier: func(*outlier.Settings) {}},
		{name: "every field", cluster: cluster(`lb_policy: ROUND_ROBIN
outlier_detection:
  consecutive_5xx: 3
  interval: 5s
  base_ejection_time: 10s
  max_ejection_time: 60s
  max_ejection_time_jitter: 1s
  max_ejection_percent: 67
  enforcing_consecutive_5xx: 90
  enforcing_success_rate: 80
  success_rate_minimum_hosts: 3
  success_rate_request_volume: 20
  success_rate_stdev_factor: 1000
  consecutive_gateway_failure: 4
  enforcing_consecutive_gateway_failure: 100
  split_external_local_origin_errors: true
  consecutive_local_origin_failure: 2
  enforcing_consecutive_local_origin_failure: 50
  enforcing_local_origin_success_rate: 40
  failure_percentage_threshold: 60
  enforcing_failure_percentage: 100
  enforcing_failure_percentage_local_origin: 30
  failure_percentage_minimum_hosts: 2
  failure_percentage_request_volume: 10
  always_eject_one_host: true
`), balancer: scenario.Balancer{Use: scenario.BalancerRoundRobin, PanicThreshold: 50},
			outlier: func(s *outlier.Settings) {
				s.Consecutive5xx, s.Interval, s.BaseEjectionTime, s.MaxEjectionTime, s.MaxEjectionTimeJitter = 3, 5*time.Second, 10*time.Second, time.Minute, time.Second
				s.MaxEjectionPercent, s.Enforcing.Consecutive5xx, s.Enforcing.SuccessRate = 67, 90, 80
				s.SuccessRateMinimumHosts, s.SuccessRateRequestVolume, s.SuccessRateStdevFactor = 3, 20, 1
				s.ConsecutiveGatewayFailure, s.Enforcing.ConsecutiveGatewayFailure = 4, 100
				s.SplitExternalLocalOriginErrors, s.ConsecutiveLocalOriginFailure = true, 2
				s.Enforcing.ConsecutiveLocalOriginFailure, s.Enforcing.LocalOriginSuccessRate = 50, 40
				s.FailurePercentageThreshold, s.Enforcing.FailurePercentage, s.Enforcing.LocalOriginFailurePercentage = 60, 100, 30
				s.FailurePercentageMinimumHosts, s.FailurePercentageRequestVolume, s.AlwaysEjectOneHost = 2, 10, true
			}},
		{name: "a base ejection time past the max ejection time's default", cluster: cluster("outlier_detection: {base_ejection_time: 600s}\n"), balancer: scenario.Balancer{Use: scenario.BalancerRoundRobin, PanicThreshold: 50},
			outlier: func(s *outlier.Settings) { s.BaseEjectionTime, s.MaxEjectionTime = 10*time.Minute, 10*time.Minute }},
		{name: "a max below the base: Envoy refuses it", cluster: cluster("outlier_detection: {base_ejection_time: 60s, max_ejection_time: 30s}\n"),
			balancer: scenario.Balancer{Use: scenario.BalancerRoundRobin, PanicThreshold: 50}, lost: "Envoy refuses it"},
		{name: "health checks uneject", cluster: cluster("outlier_detection: {successful_active_health_check_uneject_host: true}\n"), balancer: scenario.Balancer{Use: scenario.BalancerRoundRobin, PanicThreshold: 50},
			outlier: func(*outlier.Settings) {}, lost: "no active health checks"},
	} {
		t.Run(c.name, func(t *testing.T) {
			fl, err := Import([]Source{{Name: "route.yaml", Data: []byte(route)}, {Name: "cluster.yaml", Data: []byte(c.cluster)}}, Options{Timeout: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			f := fl[0].Fleet
			if f.Balancer != c.balancer {
				t.Errorf("balancer %+v, want %+v", f.Balancer, c.balancer)
			}
			switch {
			case c.outlier == nil && f.OutlierDetection.Detects():
				t.Errorf("outlier detection %+v, want none", f.OutlierDetection)
			case c.outlier != nil:
				want := defaults
				c.outlier(&want)
				if f.OutlierDetection.Use != scenario.OutlierEnvoy || f.OutlierDetection.Settings != want {
					t.Errorf("outlier detection %+v\nwant %+v", f.OutlierDetection.Settings, want)
				}
			}
			lost := strings.Join(fl[0].Lost, "\n")
			if c.lost != "" && !strings.Contains(lost, c.lost) {
				t.Errorf("notes %q lack %q", lost, c.lost)
			}
			if strings.Contains(lost, "is not imported as one") {
				t.Errorf("the old note: %q", lost)
			}
			// Every imported fleet runs.
			sc, _, err := Scenario(fl, storm(t))
			if err != nil {
				t.Fatal(err)
			}
			if err := sc.Validate(); err != nil {
				t.Fatal(err)
			}
		})
	}
}
