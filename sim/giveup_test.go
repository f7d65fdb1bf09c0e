package sim

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/scenario"
)

// load parses a scenario of testdata.
func load(t testing.TB, name string) *scenario.Scenario {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	sc, err := scenario.Parse(name, b)
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// TestGiveUpAmplifies is issue 36's stack (testdata/grpc-over-envoy.yaml):
// a gRPC app with 5 attempts on UNAVAILABLE over an Envoy sidecar with 2
// retries on connect failures, the origin refusing every connection.
// Envoy's give-up is a local 503 (router.cc, onUpstreamReset), which a
// gRPC caller hears as UNAVAILABLE (status.cc, httpToGrpcStatus): the app
// retries it, 5 × 3 = 15 attempts per intent at the origin. The same
// layer spoken to over HTTP answers 503, an overload rejection, which an
// app retrying only error answers does not retry (3); a tier running an
// application answers 500, which it does (15).
func TestGiveUpAmplifies(t *testing.T) {
	for _, c := range []struct {
		name              string
		protocol          string
		product           string
		on                []string
		atEnvoy, atOrigin float64
	}{
		{"grpc app over envoy", scenario.ProtocolGRPC, "envoy", []string{scenario.RetryOnRejection, scenario.RetryOnRefused}, 5, 15},
		{"http app retrying errors over envoy", scenario.ProtocolHTTP, "envoy", []string{scenario.RetryOnError}, 1, 3},
		{"http app retrying 503 over envoy", scenario.ProtocolHTTP, "envoy", []string{scenario.RetryOnRejection}, 5, 15},
		{"http app retrying errors over an app", scenario.ProtocolHTTP, "app", []string{scenario.RetryOnError}, 5, 15},
		{"grpc app over an app", scenario.ProtocolGRPC, "app", []string{scenario.RetryOnRejection, scenario.RetryOnRefused}, 5, 15},
		{"http app retrying gateway errors over nginx", scenario.ProtocolHTTP, "nginx", []string{scenario.RetryOnGateway}, 5, 15},
		{"http app retrying 503 over nginx", scenario.ProtocolHTTP, "nginx", []string{scenario.RetryOnRejection}, 1, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			sc := load(t, "grpc-over-envoy.yaml")
			sc.Fleets[0].Protocol, sc.Fleets[0].Retry.On = c.protocol, c.on
			sc.Tiers[0].Client.Product = c.product
			if err := sc.Validate(); err != nil {
				t.Fatal(err)
			}
			f := run(t, sc).Fleets[0]
			if f.Summary.Intents != 250 || f.Summary.IntentsLost != 250 {
				t.Fatalf("%d intents, %d lost: want 250 and 250", f.Summary.Intents, f.Summary.IntentsLost)
			}
			if a := f.Tiers[0].Amplification; a != c.atEnvoy {
				t.Errorf("%g attempts per intent at the tier, want %g", a, c.atEnvoy)
			}
			if a := f.Tiers[1].Amplification; a != c.atOrigin {
				t.Errorf("%g attempts per intent at the origin, want %g", a, c.atOrigin)
			}
		})
	}
}

// TestInboundSidecar is issue 36's row 2: Istio 1.24 and later put a
// retry policy on the server sidecar's inbound route,
// reset-before-request with 2 retries (istio/istio
// pilot/pkg/networking/core/route route_test.go, TestInboundHTTPRoute, 1.24
// and later: HTTP routes only), so a connection the application refuses
// is retried on the same pod, and the client sidecar hears the inbound
// Envoy's 503, not a refused connection. With Istio's default outbound
// retries (connect-failure and the like, no 503 since 1.24) the client
// does not retry it: 3 attempts at the application per intent, and an
// intent that meets the refusing replica is lost, where without the
// inbound sidecar its client's retries would go to the healthy
// replicas.
func TestInboundSidecar(t *testing.T) {
	const yaml = `
duration: 20s
traffic: {rate: 100, clients: 4}
origin: {model: capacity, capacity: 10000, replicas: {count: 3}}
triggers:
  - {kind: outage, at: 0s, for: 20s, mode: refuse, replica: 0}
fleets:
  - name: sidecar
    timeout: 1s
    retry: {max_retries: 2, on: [refused]}
    budget: {use: none}
    product: envoy
`
	for _, c := range []struct {
		name    string
		inbound scenario.Inbound
		lost    bool // the intents that met replica 0 are lost
		perHit  int64
	}{
		{"no inbound sidecar", scenario.Inbound{}, false, 0},
		{"istio 1.24 inbound sidecar", scenario.Inbound{Product: "envoy", Retries: 2}, true, 2},
		{"inbound sidecar without retries", scenario.Inbound{Product: "envoy"}, true, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			sc := parse(t, yaml)
			sc.Fleets[0].Inbound = c.inbound
			f := run(t, sc).Fleets[0]
			hits := f.Replicas[0].Attempts
			if hits == 0 {
				t.Fatal("no attempt reached replica 0")
			}
			if got, want := f.Summary.InboundRetries, c.perHit*hits; got != want {
				t.Errorf("%d inbound retries for %d attempts at replica 0, want %d", got, hits, want)
			}
			switch lost := f.Summary.IntentsLost; {
			case c.lost && lost != hits:
				t.Errorf("%d intents lost, want the %d that met replica 0", lost, hits)
			case !c.lost && lost > hits/8: // about a ninth of the intents that met it met it three times
				t.Errorf("%d intents lost of %d that met replica 0: their retries should reach the healthy replicas", lost, hits)
			}
		})
	}
}

// TestNoHealthyUpstream is issue 36's row 6: Envoy's router answers a
// local 503 when the cluster has no healthy host and does not retry it
// (router.cc, doRetry and decodeHeaders: sendNoHealthyUpstreamResponse,
// no further attempt). One replica, ejected at its first 5xx, no panic
// mode: an Envoy fleet stops at the first "no healthy upstream"; another
// product retries it as any refused connection.
func TestNoHealthyUpstream(t *testing.T) {
	const yaml = `
duration: 5s
traffic: {rate: 10, clients: 1}
origin: {model: capacity, capacity: 1000, error_rate: 1}
fleets:
  - name: f
    timeout: 1s
    retry: {max_retries: 3}
    budget: {use: none}
    balancer: {use: round_robin, settings: {panic_threshold: 0}}
    outlier_detection: {use: envoy, settings: {consecutive_5xx: 1, max_ejection_percent: 100, base_ejection_time: 1h, max_ejection_time: 1h}}
`
	for _, c := range []struct {
		product string
		retries int64
	}{{"envoy", 1}, {"app", 3 + 3*49}} {
		sc := parse(t, yaml)
		sc.Fleets[0].Product = c.product
		f := run(t, sc).Fleets[0]
		// The first intent: an error answer, ejected; its retry finds no
		// host. Then every attempt finds none.
		if f.Summary.Retries != c.retries {
			t.Errorf("product %s: %d retries, want %d", c.product, f.Summary.Retries, c.retries)
		}
	}
}

// TestHedgeFatalStatus is issue 36's row 7: a status that is not among
// hedgingPolicy's nonFatalStatusCodes ends the call and cancels the hedges
// still out (gRFC A6, "Hedging Policy"), as resil's hedging round ends on
// a failure it does not retry. The origin answers every attempt with an
// error (INTERNAL) after 50ms; the fleet hedges at 10ms, up to two, and
// takes UNAVAILABLE as non-fatal: the first answer ends the call, and the
// two hedges are served for nobody.
func TestHedgeFatalStatus(t *testing.T) {
	const yaml = `
duration: 5s
traffic: {rate: 10, clients: 1}
origin: {model: capacity, capacity: 1000, latency: 50ms, error_rate: 1}
fleets:
  - name: hedged
    timeout: 1s
    retry: {on: [rejection]}
    hedge: {delay: 10ms, max: 2}
    budget: {use: none}
    protocol: grpc
`
	f := run(t, parse(t, yaml)).Fleets[0]
	s := f.Summary
	if s.Hedges != 2*s.Intents || s.IntentsLost != s.Intents {
		t.Fatalf("%d hedges, %d lost, for %d intents: want two hedges each, all lost", s.Hedges, s.IntentsLost, s.Intents)
	}
	if s.WastedWork != 2*s.Intents {
		t.Errorf("%d answers served for nobody, want the %d hedges cancelled by the fatal answer", s.WastedWork, 2*s.Intents)
	}
}

// TestSplitTimeoutsKeepAStalledReplica is issue 36's row 4: with
// split_external_local_origin_errors, Envoy records the connection's
// success before an attempt can time out (upstream_request.cc,
// onPoolReady), so the consecutive local-origin count of a replica that
// takes connections but answers too late never reaches its threshold,
// while one that never answers (a black hole: the connection is never
// made) is ejected. Without the split both are 504s, five in a row eject.
func TestSplitTimeoutsKeepAStalledReplica(t *testing.T) {
	const yaml = `
duration: 30s
traffic: {rate: 40, clients: 1}
origin:
  model: concurrency
  base: 10ms
  replicas: {count: 4, faults: [{replica: 0, kind: %s}]}
fleets:
  - name: envoy
    timeout: 200ms
    budget: {use: none}
    balancer: {use: round_robin, settings: {panic_threshold: 0}}
    outlier_detection: {use: envoy, settings: {split_external_local_origin_errors: %v, consecutive_5xx: 5, consecutive_local_origin_failure: 5, max_ejection_percent: 100, enforcing_success_rate: 0}}
`
	for _, c := range []struct {
		fault   string
		split   bool
		ejected bool
	}{
		{"{replica: 0, kind: latency, factor: 1000}", true, false},
		{"{replica: 0, kind: blackhole}", true, true},
		{"{replica: 0, kind: latency, factor: 1000}", false, true},
		{"{replica: 0, kind: blackhole}", false, true},
	} {
		y := strings.Replace(fmt.Sprintf(yaml, "X", c.split), "[{replica: 0, kind: X}]", "["+c.fault+"]", 1)
		f := run(t, parse(t, y)).Fleets[0]
		if got := f.Replicas[0].Ejections > 0; got != c.ejected {
			t.Errorf("%s, split %v: %d ejections, want ejected %v", c.fault, c.split, f.Replicas[0].Ejections, c.ejected)
		}
	}
}

// TestDetectorPerClient is issue 36's row 3: Envoy runs an outlier detector
// and a load balancer for each cluster in each proxy (the cluster manager
// makes one per cluster: source/common/upstream/outlier_detection_impl.cc,
// DetectorImpl::create, fed by that proxy's router), and grpc-go one per
// channel (the outlier_detection balancer under each ClientConn): each
// sees its own requests. testdata/replicas-per-client.yaml: 20 sidecars,
// each sending 1.25 attempts per second to a replica that fails them all,
// eject it after 5 in a row, about 4 s in; one detector fed by the whole
// fleet ejected it within the first second.
func TestDetectorPerClient(t *testing.T) {
	first := func(shared bool) int {
		r, err := RunWith(t.Context(), load(t, "replicas-per-client.yaml"), Options{sharedReplicas: shared})
		if err != nil {
			t.Fatal(err)
		}
		bad := r.Fleets[0].Replicas[0]
		for k, e := range bad.Series.Ejected {
			if e {
				return k
			}
		}
		return -1
	}
	if k := first(false); k < 3 || k > 5 {
		t.Errorf("per client: most sidecars ejected the bad replica in tick %d, want 3 to 5 (5 errors at 1.25 per second each)", k)
	}
	if k := first(true); k != 0 {
		t.Errorf("one shared detector: ejected in tick %d, want 0", k)
	}
}

// BenchmarkReplicaInstances measures what a picker and a detector per
// client instance cost against one shared by the fleet, side by side in
// one run: testdata/replicas-per-client.yaml (4 replicas, round robin,
// Envoy's outlier detection) with 20 and with 200 clients. It reports each
// one's run time and their ratio.
func BenchmarkReplicaInstances(b *testing.B) {
	for _, clients := range []int{20, 200} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			sc := load(b, "replicas-per-client.yaml")
			sc.Traffic.Clients = clients
			b.ReportAllocs()
			var per, shared time.Duration
			for b.Loop() {
				for _, s := range []bool{false, true} {
					start := time.Now()
					if _, err := RunWith(context.Background(), sc, Options{sharedReplicas: s}); err != nil {
						b.Fatal(err)
					}
					if s {
						shared += time.Since(start)
					} else {
						per += time.Since(start)
					}
				}
			}
			n := float64(b.N)
			b.ReportMetric(float64(per.Microseconds())/n, "per-client-µs/run")
			b.ReportMetric(float64(shared.Microseconds())/n, "shared-µs/run")
			b.ReportMetric(float64(per)/float64(shared), "ratio")
			b.ReportMetric(0, "ns/op")
		})
	}
}
