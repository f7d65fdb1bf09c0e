package giveup

import (
	"fmt"
	"slices"
	"testing"
)

// TestGiveUpAnswers is the decision table of what each product answers
// when it gives up, written from each product's source:
//
//   - Envoy: source/common/router/router.cc (the version with
//     reset-before-request's upstream_request_started and
//     CoreResponseFlag, Envoy ≥ 1.30): onUpstreamReset sends a local
//     ServiceUnavailable (BadGateway only for a protocol error) once
//     maybeRetryReset declines; onPerTryTimeoutCommon and
//     onResponseTimeout send timeout_response_code_, GatewayTimeout by
//     default; onUpstreamHeaders forwards an upstream's answer once it
//     could not be retried. source/common/grpc/status.cc,
//     httpToGrpcStatus: 429, 502, 503, 504 → Unavailable, which a local
//     reply to a gRPC request carries.
//   - Linkerd: linkerd2-proxy linkerd/app/outbound/src/http/endpoint.rs
//     (ClientRescue: an io::Error → bad_gateway, ConnectTimeout →
//     gateway_timeout), server.rs (ServerRescue: ResponseTimeoutError →
//     gateway_timeout), linkerd/app/core/src/errors/respond.rs
//     (bad_gateway 502, gateway_timeout 504, unavailable 503, each with
//     grpc_status Unavailable).
//   - nginx 1.22: src/http/ngx_http_upstream.c, ngx_http_upstream_next:
//     FT_TIMEOUT → NGX_HTTP_GATEWAY_TIME_OUT (504), FT_ERROR and no live
//     upstreams → NGX_HTTP_BAD_GATEWAY (502); a 5xx answer is passed on
//     when tries are spent (ngx_http_upstream_test_next). nginx sends an
//     HTTP status to a gRPC caller too; gRPC's
//     doc/http-grpc-status-mapping.md (and grpc-go's
//     internal/transport/http_util.go) read 502, 503, 504 as UNAVAILABLE.
//   - HAProxy 2.6: a connection still failing after `retries` is a 503,
//     a `timeout server` a 504 (doc/configuration.txt, "1.3.1. The
//     response line" and the errorfiles 503.http and 504.http).
//   - an application: grpc-go returns a handler's status error's code
//     to the caller (status.FromError), so a gRPC app that returns its
//     client's error passes UNAVAILABLE on; its own deadline is
//     DEADLINE_EXCEEDED (codes.go). An HTTP app is taken to answer 500.
//
// The real nginx and HAProxy answers are measured against this table by
// importer's TestRealGiveUp* tests.
func TestGiveUpAnswers(t *testing.T) {
	for _, c := range []struct {
		p          Product
		last       string
		grpc       bool
		http, code int
		kind       string
	}{
		{Envoy, Refused, false, 503, 14, Rejection},
		{Envoy, Refused, true, 503, 14, Rejection},
		{Envoy, Timeout, false, 504, 14, Gateway},
		{Envoy, Timeout, true, 504, 14, Rejection},
		{Envoy, Error, false, 500, 13, Error},
		{Envoy, Error, true, 500, 13, Error},
		{Envoy, Rejection, false, 503, 14, Rejection},
		{Envoy, Gateway, false, 504, 4, Gateway},
		{Envoy, Gateway, true, 504, 4, Gateway},
		{Linkerd, Refused, false, 502, 14, Gateway},
		{Linkerd, Refused, true, 502, 14, Rejection},
		{Linkerd, Timeout, false, 504, 14, Gateway},
		{Linkerd, Timeout, true, 504, 14, Rejection},
		{Linkerd, Error, false, 500, 13, Error},
		{NGINX, Refused, false, 502, 14, Gateway},
		{NGINX, Refused, true, 502, 14, Rejection},
		{NGINX, Timeout, false, 504, 14, Gateway},
		{NGINX, Rejection, false, 503, 14, Rejection},
		{NGINX, Error, false, 500, 13, Error},
		{HAProxy, Refused, false, 503, 14, Rejection},
		{HAProxy, Timeout, false, 504, 14, Gateway},
		{HAProxy, Timeout, true, 504, 14, Rejection},
		{HAProxy, Error, false, 500, 13, Error},
		{App, Refused, false, 500, 2, Error},
		{App, Timeout, false, 500, 2, Error},
		{App, Refused, true, 503, 14, Rejection},
		{App, Timeout, true, 504, 4, Gateway},
		{App, Error, true, 500, 13, Error},
		{"", Rejection, true, 503, 14, Rejection},
		{Envoy, "breaker", false, 503, 14, Rejection}, // a refusal of its own
	} {
		a := Of(c.p, c.last, c.grpc)
		want := Answer{HTTP: c.http, GRPC: c.code, Kind: c.kind}
		if a != want {
			t.Errorf("%s gives up after %s (gRPC caller %v): %+v, want %+v", cmpOr(c.p), c.last, c.grpc, a, want)
		}
	}
}

func cmpOr(p Product) Product {
	if p == "" {
		return "(none)"
	}
	return p
}

// TestChainSeen is the issue's stack: a gRPC application retrying
// UNAVAILABLE over an Envoy sidecar that retries connect failures. In an
// outage whose connections are refused, Envoy sees the refusals and the
// app sees Envoy's UNAVAILABLE (a rejection): both retry, so the
// attempts multiply (5 × 3 = 15 at the origin). Over HTTP the app would
// see Envoy's 503; behind an Istio server sidecar, Envoy sees the
// inbound Envoy's 503, not a refusal.
func TestChainSeen(t *testing.T) {
	for _, c := range []struct {
		name  string
		chain []Layer
		want  []string
	}{
		{"grpc app over envoy", []Layer{{Product: App, GRPC: true}, {Product: Envoy, GRPC: true}}, []string{Rejection, Refused}},
		{"http app over envoy", []Layer{{Product: App}, {Product: Envoy}}, []string{Rejection, Refused}},
		{"over nginx", []Layer{{Product: App}, {Product: NGINX}}, []string{Gateway, Refused}},
		{"over haproxy over nginx", []Layer{{Product: App}, {Product: HAProxy}, {Product: NGINX}}, []string{Gateway, Gateway, Refused}},
		{"istio sidecars", []Layer{{Product: App}, {Product: Envoy, Inbound: Envoy}}, []string{Rejection, Rejection}},
		{"app in the middle", []Layer{{Product: Envoy}, {Product: App}, {Product: Envoy}}, []string{Error, Rejection, Refused}},
		{"one layer", []Layer{{Product: App}}, []string{Refused}},
	} {
		if got := Seen(c.chain, Refused); !slices.Equal(got, c.want) {
			t.Errorf("%s: sees %v, want %v", c.name, got, c.want)
		}
	}
}

// TestKinds: every answer a product sends reads back as the kind it was
// given, through its HTTP status and its gRPC status alike.
func TestKinds(t *testing.T) {
	for _, p := range Products {
		if !p.Valid() {
			t.Errorf("%s: not valid", p)
		}
		for _, k := range Kinds {
			for _, g := range []bool{false, true} {
				a := Of(p, k, g)
				if a.Kind == Timeout || a.Kind == Refused || a.Kind == "" {
					t.Errorf("%s after %s: kind %q, want an answer", p, k, a.Kind)
				}
				if g && KindOfGRPC(a.GRPC) != a.Kind || !g && KindOfHTTP(a.HTTP) != a.Kind {
					t.Errorf("%s after %s (gRPC %v): %+v reads back otherwise", p, k, g, a)
				}
			}
		}
	}
	if Product("istio").Valid() {
		t.Error("istio is valid: Istio runs Envoy")
	}
	for code, want := range map[int]string{200: "", 404: "", 429: Rejection, 500: Error, 501: Error, 502: Gateway, 503: Rejection, 504: Gateway} {
		if got := KindOfHTTP(code); got != want {
			t.Errorf("HTTP %d: %q, want %q", code, got, want)
		}
	}
}

func ExampleSeen() {
	// A gRPC app (5 attempts on UNAVAILABLE) over an Envoy sidecar (2
	// retries on connect-failure), in an outage that refuses connections.
	chain := []Layer{{Product: App, GRPC: true}, {Product: Envoy, GRPC: true}}
	fmt.Println(Seen(chain, Refused))
	fmt.Println(Of(Envoy, Refused, true))
	// Output:
	// [rejection refused]
	// {503 14 rejection}
}
