package importer

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/scenario"
	"github.com/retrystorm/retrystorm/sim"
)

// Issue 36's decision tables for the importers, each written from the
// product's rule, not from the importer's code.

// TestEnvoyBackOffDoubles: Envoy's JitteredBackOffStrategy
// (source/common/common/backoff_strategy.cc, the version with
// next_interval_, since 2020) starts its interval at base_interval, draws
// each wait from [0, interval), and then doubles the interval, or sets it
// to max_interval once doubling would pass max_interval / 2. The older
// rule, (2^n − 1) × base (the 2019 version of the same file), is gone.
// The imported back-off must allow the same longest wait before each retry.
func TestEnvoyBackOffDoubles(t *testing.T) {
	for _, c := range []struct{ base, max int64 }{{25, 250}, {25, 100}, {30, 100}, {100, 100}, {10, 10_000}} {
		src := []Source{{Name: "route.yaml", Data: []byte(`
name: local
virtual_hosts:
- name: svc
  domains: ["*"]
  routes:
  - match: {prefix: "/"}
    route:
      cluster: svc
      retry_policy: {retry_on: 5xx, num_retries: 8, retry_back_off: {base_interval: ` + ms(c.base) + `, max_interval: ` + ms(c.max) + `}}
`)}}
		fl, err := Import(src, Options{})
		if err != nil {
			t.Fatal(err)
		}
		p, err := fl[0].Fleet.NewPolicy()
		if err != nil {
			t.Fatal(err)
		}
		interval := c.base
		for n := 1; n <= 8; n++ {
			want := time.Duration(interval) * time.Millisecond
			if got := p.Backoff.MaxDelay(n, 0); got != want-1 && got != want {
				t.Errorf("base %dms, max %dms: retry %d waits up to %v, want below %v", c.base, c.max, n, got, want)
			}
			if interval < c.max/2 {
				interval *= 2
			} else {
				interval = c.max
			}
		}
		for _, l := range fl[0].Lost {
			if strings.Contains(l, "2^n") {
				t.Errorf("the fleet still notes the old back-off: %s", l)
			}
		}
	}
}

func ms(n int64) string { return protoDur(time.Duration(n) * time.Millisecond) }

// TestEnvoyV2TypeNoted: Envoy 1.18 removed the v2 API, so a typed_config
// whose @type is a v2 message (envoy.config.filter...v2...) is rejected by
// current Envoy; the importer skips it, as any type it does not read, and
// says so.
func TestEnvoyV2TypeNoted(t *testing.T) {
	src := []Source{{Name: "lds.yaml", Data: []byte(`
static_resources:
  listeners:
  - name: l
    address: {socket_address: {address: 0.0.0.0, port_value: 80}}
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: in
          http_filters:
          - name: envoy.filters.http.router
            typed_config: {"@type": type.googleapis.com/envoy.config.filter.http.router.v2.Router}
          route_config:
            virtual_hosts:
            - name: svc
              domains: ["*"]
              routes:
              - match: {prefix: "/"}
                route: {cluster: svc, retry_policy: {retry_on: 5xx}}
`)}}
	f := importSrcs(t, Options{}, src)
	if !slices.ContainsFunc(f.Lost, func(l string) bool {
		return strings.Contains(l, "envoy.config.filter.http.router.v2.Router") && strings.Contains(l, "v2 API type")
	}) {
		t.Errorf("no note of the v2 @type: %q", f.Lost)
	}
}

// TestClusterProvenance is issue 36's row 9: a cluster in a file of its
// own is the source of its settings, so its lb_policy, outlier detection
// and budget are located in its file and at its lines, not the route's.
// The same for a DestinationRule beside its VirtualService.
func TestClusterProvenance(t *testing.T) {
	srcs := []Source{
		{Name: "route.yaml", Data: []byte("name: r\nvirtual_hosts:\n- name: v\n  domains: [\"*\"]\n  routes:\n  - match: {prefix: /}\n    route: {cluster: c, retry_policy: {retry_on: 5xx, num_retries: 2}}\n")},
		{Name: "cluster.yaml", Data: []byte("name: c\n\nlb_policy: LEAST_REQUEST\noutlier_detection:\n  consecutive_5xx: 3\ncircuit_breakers:\n  thresholds:\n  - priority: DEFAULT\n    retry_budget: {budget_percent: {value: 10}}\n")},
	}
	fl, err := Import(srcs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Setting{
		"balancer.use": {File: "cluster.yaml", Line: 3},
		"outlier_detection.settings.consecutive_5xx": {File: "cluster.yaml", Line: 5},
		"budget.budget_percent":                      {File: "cluster.yaml", Line: 9},
		"retry.max_retries":                          {File: "route.yaml", Line: 7},
	}
	got := map[string]Setting{}
	for _, s := range Settings(srcs, fl[0]) {
		got[s.Name] = s
	}
	for name, w := range want {
		if g := got[name]; g.File != w.File || g.Line != w.Line {
			t.Errorf("%s: %s:%d, want %s:%d", name, g.File, g.Line, w.File, w.Line)
		}
	}

	istio := []Source{
		{Name: "vs.yaml", Data: []byte("apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: r}\nspec:\n  hosts: [r]\n  http:\n  - route: [{destination: {host: r}}]\n")},
		{Name: "dr.yaml", Data: []byte("apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {name: r}\nspec:\n  host: r\n  trafficPolicy:\n    loadBalancer: {simple: RANDOM}\n")},
	}
	fl, err = Import(istio, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range Settings(istio, fl[0]) {
		if s.Name == "balancer.use" && (s.File != "dr.yaml" || s.Line != 7) {
			t.Errorf("balancer.use at %s:%d, want dr.yaml:7", s.File, s.Line)
		}
	}
}

// TestEndpointsAndSubsets is issue 36's row 10: an Envoy cluster's
// load_assignment endpoints are the replicas it balances over (the
// written scenario's origin has as many), and an Istio route to a subset
// takes the subset's trafficPolicy fields over the rule's, as pilot's
// MergeSubsetTrafficPolicy does (connectionPool, loadBalancer,
// outlierDetection, retryBudget).
func TestEndpointsAndSubsets(t *testing.T) {
	eps := "load_assignment:\n  cluster_name: c\n  endpoints:\n  - lb_endpoints:\n" + strings.Repeat("    - endpoint: {address: {socket_address: {address: 10.0.0.1, port_value: 80}}}\n", 3) +
		"  - lb_endpoints:\n    - endpoint: {address: {socket_address: {address: 10.0.1.1, port_value: 80}}}\n"
	srcs := []Source{
		{Name: "route.yaml", Data: []byte("name: r\nvirtual_hosts:\n- name: v\n  domains: [\"*\"]\n  routes:\n  - match: {prefix: /}\n    route: {cluster: c, retry_policy: {retry_on: 5xx}}\n")},
		{Name: "cluster.yaml", Data: []byte("name: c\ntype: STATIC\n" + eps)},
	}
	fl, err := Import(srcs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if fl[0].Replicas != 4 {
		t.Errorf("%d replicas, want the cluster's 4 endpoints", fl[0].Replicas)
	}
	sc, _, err := Scenario(fl, storm(t))
	if err != nil {
		t.Fatal(err)
	}
	if sc.Origin.Replicas != 4 {
		t.Errorf("the scenario's origin has %d replicas, want 4", sc.Origin.Replicas)
	}

	istio := []Source{{Name: "mesh.yaml", Data: []byte(`apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: r}
spec:
  hosts: [r]
  http:
  - route: [{destination: {host: r, subset: v2}}]
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: r}
spec:
  host: r
  trafficPolicy:
    loadBalancer: {simple: RANDOM}
    outlierDetection: {consecutive5xxErrors: 7}
  subsets:
  - name: v1
    labels: {version: v1}
  - name: v2
    labels: {version: v2}
    trafficPolicy:
      outlierDetection: {consecutive5xxErrors: 2, maxEjectionPercent: 50}
`)}}
	f := importSrcs(t, Options{}, istio).Fleet
	if f.Balancer.Use != scenario.BalancerRandom {
		t.Errorf("balancer %q, want the rule's random (the subset sets none)", f.Balancer.Use)
	}
	if s := f.OutlierDetection.Settings; s.Consecutive5xx != 2 || s.MaxEjectionPercent != 50 {
		t.Errorf("consecutive 5xx %d, max ejection %d%%: want the subset's 2 and 50", s.Consecutive5xx, s.MaxEjectionPercent)
	}
}

// TestIstioInboundSidecar is issue 36's row 2, importer side: Istio 1.24
// and later give the server sidecar's inbound HTTP route a retry policy of
// reset-before-request with 2 retries (pilot, route.BuildDefaultHTTPInboundRoute;
// route_test.go TestInboundHTTPRoute: none for gRPC), so a fleet imported
// from Istio calls replicas behind an Envoy that retries a refused
// connection twice, on HTTP, and once (no retries) on gRPC or before 1.24.
// Run, the client sidecar with Istio's default retries (connect-failure,
// no 503) then hears a 503 it does not retry: 3 attempts reach each
// refusing pod per intent, and none goes to another pod.
func TestIstioInboundSidecar(t *testing.T) {
	vs := "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: r}\nspec:\n  hosts: [r]\n  http:\n  - route: [{destination: {host: r}}]\n"
	for _, c := range []struct {
		o       Options
		retries int
	}{{Options{}, 2}, {Options{IstioVersion: "1.23"}, 0}, {Options{Protocol: ProtocolGRPC}, 0}} {
		f := importSrcs(t, c.o, []Source{{Name: "vs.yaml", Data: []byte(vs)}}).Fleet
		if f.Inbound.Product != "envoy" || f.Inbound.Retries != c.retries || f.Product != "envoy" {
			t.Errorf("%+v: product %q, inbound %+v; want envoy, envoy with %d retries", c.o, f.Product, f.Inbound, c.retries)
		}
	}
	f := importSrcs(t, Options{}, []Source{{Name: "vs.yaml", Data: []byte(vs)}}).Fleet
	f.Timeout = time.Second
	base, err := scenario.Parse("out.yaml", []byte("duration: 10s\ntraffic: {rate: 50, clients: 1}\norigin: {model: capacity, capacity: 1000}\ntriggers: [{kind: outage, at: 0s, for: 10s, mode: refuse}]\nfleets: [{name: x, timeout: 1s, budget: {use: none}}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	sc, _, err := Scenario([]Fleet{{Fleet: f}}, base)
	if err != nil {
		t.Fatal(err)
	}
	r, err := sim.RunWith(context.Background(), sc, sim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := r.Fleets[0].Summary
	if s.Retries != 0 || s.InboundRetries != 2*s.Attempts {
		t.Errorf("%d retries by the client sidecar, %d by the server sidecar for %d attempts: want 0 and 2 each", s.Retries, s.InboundRetries, s.Attempts)
	}
}

// TestGiveUpCalls: each format's fleet says what its layer runs and
// speaks, for the give-up answers of a stack (issue 36, row 1): Envoy and
// Istio run Envoy, Linkerd linkerd2-proxy; a gRPC service config's
// channel speaks gRPC and is an application.
func TestGiveUpCalls(t *testing.T) {
	for _, c := range []struct {
		files             []string
		product, protocol string
	}{
		{[]string{"envoy/route.yaml", "envoy/cluster.yaml"}, "envoy", ""},
		{[]string{"istio/reviews.yaml"}, "envoy", ""},
		{[]string{"linkerd/books.yaml"}, "linkerd", ""},
		{[]string{"grpc/service-config.json"}, "", "grpc"},
		{[]string{"aws/config"}, "", ""},
	} {
		fl, err := Import(sources(t, c.files...), Options{Timeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fl {
			if f.Fleet.Product != c.product || f.Fleet.Protocol != c.protocol {
				t.Errorf("%s: product %q, protocol %q; want %q, %q", f.Origin, f.Fleet.Product, f.Fleet.Protocol, c.product, c.protocol)
			}
		}
	}
}

// importSrcs imports srcs and wants exactly one fleet.
func importSrcs(t *testing.T, o Options, srcs []Source) Fleet {
	t.Helper()
	fl, err := Import(srcs, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(fl) != 1 {
		t.Fatalf("%d fleets, want 1", len(fl))
	}
	return fl[0]
}
