package importer

import (
	"strings"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/resil/outlier"
	"github.com/retrystorm/retrystorm/scenario"
)

// TestGRPCEjection is the decision table of a service config's
// loadBalancingConfig, written from grpc-go v1.85.0: the channel takes the
// first policy it knows; internal/xds/balancer/outlierdetection config.go
// and ParseConfig give outlier_detection_experimental's defaults (interval
// 10s, baseEjectionTime 30s, maxEjectionTime 300s or the base, percent
// 10; successRateEjection's stdevFactor 1900, enforcementPercentage 100,
// minimumHosts 5, requestVolume 100, only when given;
// failurePercentageEjection's threshold 85, enforcementPercentage 0,
// minimumHosts 5, requestVolume 50, only when given).
func TestGRPCEjection(t *testing.T) {
	conf := func(lb string) string {
		return `{"methodConfig": [{"name": [{"service": "shop.Cart"}], "timeout": "2s",
  "retryPolicy": {"maxAttempts": 3, "initialBackoff": "0.1s", "maxBackoff": "1s", "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]}}]` + lb + `}`
	}
	base := outlier.GRPCDefaults(0)
	base.Flavor, base.MaxEjectionRule, base.Enforcing.SuccessRate = 0, outlier.CheckBefore, 0
	for _, c := range []struct {
		name, conf string
		balancer   scenario.Balancer
		outlier    func(s *outlier.Settings)
		lost       string
	}{
		{name: "none: the simulator's default", conf: conf("")},
		{name: "round robin", conf: conf(`, "loadBalancingConfig": [{"round_robin": {}}]`), balancer: scenario.Balancer{Use: scenario.BalancerRoundRobin}},
		{name: "the old field", conf: conf(`, "loadBalancingPolicy": "round_robin"`), balancer: scenario.Balancer{Use: scenario.BalancerRoundRobin}},
		{name: "pick_first comes first", conf: conf(`, "loadBalancingConfig": [{"pick_first": {}}, {"round_robin": {}}]`), lost: "pick_first"},
		{name: "an unknown policy is skipped", conf: conf(`, "loadBalancingConfig": [{"my_policy": {}}, {"least_request_experimental": {}}]`), balancer: scenario.Balancer{Use: scenario.BalancerP2C}},
		{name: "outlier detection, defaults", conf: conf(`, "loadBalancingConfig": [{"outlier_detection_experimental": {"childPolicy": [{"round_robin": {}}]}}]`),
			balancer: scenario.Balancer{Use: scenario.BalancerRoundRobin}, outlier: func(*outlier.Settings) {}},
		{name: "outlier detection, every field", conf: conf(`, "loadBalancingConfig": [{"outlier_detection_experimental": {
  "interval": "5s", "baseEjectionTime": "10s", "maxEjectionTime": "100s", "maxEjectionPercent": 67,
  "successRateEjection": {"stdevFactor": 1000, "minimumHosts": 3, "requestVolume": 20},
  "failurePercentageEjection": {"threshold": 50, "enforcementPercentage": 100, "minimumHosts": 2, "requestVolume": 10},
  "childPolicy": [{"least_request_experimental": {}}]}}]`),
			balancer: scenario.Balancer{Use: scenario.BalancerP2C}, outlier: func(s *outlier.Settings) {
				s.Interval, s.BaseEjectionTime, s.MaxEjectionTime, s.MaxEjectionPercent = 5*time.Second, 10*time.Second, 100*time.Second, 67
				s.Enforcing.SuccessRate, s.SuccessRateStdevFactor, s.SuccessRateMinimumHosts, s.SuccessRateRequestVolume = 100, 1, 3, 20
				s.FailurePercentageThreshold, s.Enforcing.FailurePercentage, s.FailurePercentageMinimumHosts, s.FailurePercentageRequestVolume = 50, 100, 2, 10
			}},
		{name: "failure percentage without enforcement never ejects", conf: conf(`, "loadBalancingConfig": [{"outlier_detection_experimental": {"failurePercentageEjection": {}, "childPolicy": [{"round_robin": {}}]}}]`),
			balancer: scenario.Balancer{Use: scenario.BalancerRoundRobin}, outlier: func(*outlier.Settings) {}, lost: "default is 0"},
		{name: "a long base lifts the max", conf: conf(`, "loadBalancingConfig": [{"outlier_detection_experimental": {"baseEjectionTime": "600s", "childPolicy": [{"round_robin": {}}]}}]`),
			balancer: scenario.Balancer{Use: scenario.BalancerRoundRobin}, outlier: func(s *outlier.Settings) { s.BaseEjectionTime, s.MaxEjectionTime = 10*time.Minute, 10*time.Minute }},
	} {
		t.Run(c.name, func(t *testing.T) {
			fl, err := Import([]Source{{Name: "sc.json", Data: []byte(c.conf)}}, Options{Timeout: time.Second})
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
				want := base
				c.outlier(&want)
				if f.OutlierDetection.Use != scenario.OutlierGRPC || f.OutlierDetection.Settings != want {
					t.Errorf("outlier detection %+v\nwant %+v", f.OutlierDetection.Settings, want)
				}
			}
			if lost := strings.Join(fl[0].Lost, "\n"); c.lost != "" && !strings.Contains(lost, c.lost) {
				t.Errorf("notes %q lack %q", lost, c.lost)
			}
			sc, _, err := Scenario(fl, storm(t))
			if err != nil {
				t.Fatal(err)
			}
			if err := sc.Validate(); err != nil {
				t.Fatal(err)
			}
		})
	}
	// A value grpc-go refuses is refused.
	if _, err := Import([]Source{{Name: "sc.json", Data: []byte(conf(`, "loadBalancingConfig": [{"outlier_detection_experimental": {"maxEjectionPercent": 150}}]`))}}, Options{Timeout: time.Second}); err == nil || !strings.Contains(err.Error(), "MaxEjectionPercent") {
		t.Errorf("maxEjectionPercent 150: %v", err)
	}
}
