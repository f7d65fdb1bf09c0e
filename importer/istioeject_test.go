package importer

import (
	"strings"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/resil/outlier"
	"github.com/retrystorm/retrystorm/scenario"
)

// TestIstioEjection is the decision table of a DestinationRule's
// trafficPolicy.loadBalancer and outlierDetection, written from istio/istio
// pilot/pkg/networking/core/cluster_traffic_policy.go (commit 011b88bb):
// applyLoadBalancer (LEAST_REQUEST when unspecified) and
// applyOutlierDetection (success rate off; a consecutive threshold sets its
// enforcement to 100, or 0 for a threshold of 0; healthy_panic_threshold
// = minHealthPercent, 0 by default), Envoy's defaults for the rest.
func TestIstioEjection(t *testing.T) {
	dr := func(policy string) string {
		return "apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {name: api}\nspec:\n  host: api\n  trafficPolicy:\n" + policy
	}
	base := outlier.EnvoyDefaults(0)
	base.Flavor, base.MaxEjectionRule, base.Enforcing.SuccessRate = 0, outlier.CheckAfter, 0
	for _, c := range []struct {
		name, dr string
		balancer scenario.Balancer
		outlier  func(s *outlier.Settings)
		lost     string
	}{
		{name: "neither: the simulator's default", dr: dr("    connectionPool: {tcp: {maxConnections: 10}}\n")},
		{name: "round robin", dr: dr("    loadBalancer: {simple: ROUND_ROBIN}\n"), balancer: scenario.Balancer{Use: scenario.BalancerRoundRobin, PanicThreshold: 50}},
		{name: "least conn is least request", dr: dr("    loadBalancer: {simple: LEAST_CONN}\n"), balancer: scenario.Balancer{Use: scenario.BalancerP2C, PanicThreshold: 50}},
		{name: "consistent hash", dr: dr("    loadBalancer: {consistentHash: {httpHeaderName: x}}\n"), balancer: scenario.Balancer{Use: scenario.BalancerRoundRobin, PanicThreshold: 50}, lost: "consistent hashing"},
		{name: "outlier detection alone: least request, panic off", dr: dr("    outlierDetection: {}\n"),
			balancer: scenario.Balancer{Use: scenario.BalancerP2C}, outlier: func(*outlier.Settings) {}},
		{name: "every field", dr: dr(`    loadBalancer: {simple: RANDOM}
    outlierDetection:
      consecutive5xxErrors: 3
      consecutiveGatewayErrors: 2
      interval: 5s
      baseEjectionTime: 1m
      maxEjectionPercent: 67
      minHealthPercent: 40
      splitExternalLocalOriginErrors: true
      consecutiveLocalOriginFailures: 4
`), balancer: scenario.Balancer{Use: scenario.BalancerRandom, PanicThreshold: 40},
			outlier: func(s *outlier.Settings) {
				s.Consecutive5xx, s.ConsecutiveGatewayFailure, s.Enforcing.ConsecutiveGatewayFailure = 3, 2, 100
				s.Interval, s.BaseEjectionTime, s.MaxEjectionPercent = 5*time.Second, time.Minute, 67
				s.SplitExternalLocalOriginErrors, s.ConsecutiveLocalOriginFailure, s.Enforcing.LocalOriginSuccessRate = true, 4, 0
			}},
		{name: "a threshold of 0 turns its rule off", dr: dr("    outlierDetection: {consecutive5xxErrors: 0}\n"),
			balancer: scenario.Balancer{Use: scenario.BalancerP2C}, outlier: func(s *outlier.Settings) { s.Consecutive5xx, s.Enforcing.Consecutive5xx = 0, 0 }},
		{name: "a long base ejection time lifts the max", dr: dr("    outlierDetection: {baseEjectionTime: 15m}\n"),
			balancer: scenario.Balancer{Use: scenario.BalancerP2C}, outlier: func(s *outlier.Settings) { s.BaseEjectionTime, s.MaxEjectionTime = 15*time.Minute, 15*time.Minute }},
	} {
		t.Run(c.name, func(t *testing.T) {
			fl, err := Import([]Source{{Name: "dr.yaml", Data: []byte(c.dr)}}, Options{Timeout: time.Second})
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
				if f.OutlierDetection.Use != scenario.OutlierEnvoy || f.OutlierDetection.Settings != want {
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
}
