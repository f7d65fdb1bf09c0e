// Package giveup says what a layer of a call chain answers its caller when
// it gives up on a call, product by product, and what that answer is to
// the caller's retry conditions.
//
// A proxy that exhausts its retries does not vanish: it answers. Envoy
// sends a local 503 after a refused connection and a 504 after a timeout,
// and to a gRPC caller it sends the grpc-status its HTTP status maps to
// (UNAVAILABLE for 502, 503 and 504); nginx answers 502 and 504, HAProxy
// 503 and 504, Linkerd 502, 503 and 504. The layer above then retries that
// answer if its own conditions say so: a gRPC client that retries
// UNAVAILABLE retries every give-up of an Envoy below it. The simulator's
// tiers, the lab's tiers and the closed form of a stack's amplification
// all take the answer from here, so that they cannot disagree.
//
// Failures are named with the words of a scenario's retry.on ([Error],
// [Rejection], [Gateway], [Timeout], [Refused]). The package imports only
// the standard library: it sits below the scenario package, which
// validates its words against it. docs/semantics.md has the table and the
// sources it was read from.
package giveup

import "slices"

// The failures a caller sees, in the words of a scenario's retry.on.
const (
	// Error is an error answer: an HTTP 5xx that is not 502, 503 or 504
	// (the simulator's is 500); gRPC INTERNAL or UNKNOWN.
	Error = "error"
	// Rejection is an overload answer: HTTP 503 or 429; gRPC UNAVAILABLE
	// or RESOURCE_EXHAUSTED.
	Rejection = "rejection"
	// Gateway is an answer by which a layer below says it gave up: HTTP
	// 502 or 504, or, from a gRPC application whose own deadline passed,
	// gRPC DEADLINE_EXCEEDED. The simulator's origin never sends one: it
	// comes from tiers.
	Gateway = "gateway"
	// Timeout is no answer within the attempt's timeout.
	Timeout = "timeout"
	// Refused is a refused connection.
	Refused = "refused"
)

// Kinds lists the failures in the order a scenario writes them.
var Kinds = []string{Error, Rejection, Gateway, Timeout, Refused}

// Product is what runs at a layer: it decides what the layer answers when
// it gives up. The zero value is [App].
type Product string

// The products whose give-up answers are modelled.
const (
	// App is an application that calls on (a gRPC service config's or
	// an AWS SDK's client): over HTTP it answers 500 whatever its call
	// met; over gRPC it returns the status its call ended with, as a
	// grpc-go handler that returns the client's error does, and
	// DEADLINE_EXCEEDED when its own deadline passed.
	App Product = "app"
	// Envoy is Envoy, and so Istio's sidecars and gateways.
	Envoy Product = "envoy"
	// Linkerd is linkerd2-proxy.
	Linkerd Product = "linkerd"
	// NGINX is nginx's proxy (and grpc) module.
	NGINX Product = "nginx"
	// HAProxy is HAProxy.
	HAProxy Product = "haproxy"
)

// Products lists the products, the default first.
var Products = []Product{App, Envoy, Linkerd, NGINX, HAProxy}

// Valid reports whether p is a product this package knows ("" is App).
func (p Product) Valid() bool { return p == "" || slices.Contains(Products, p) }

// gRPC status codes (google.golang.org/grpc/codes), by number.
const (
	CodeUnknown           = 2
	CodeDeadlineExceeded  = 4
	CodeResourceExhausted = 8
	CodeInternal          = 13
	CodeUnavailable       = 14
)

// Answer is what a layer that gives up sends its caller.
type Answer struct {
	// HTTP is the status a caller speaking HTTP gets.
	HTTP int
	// GRPC is the status code a caller speaking gRPC gets.
	GRPC int
	// Kind is the failure the answer is to the caller: the word of
	// retry.on that retries it. Never Timeout or Refused: a give-up is
	// an answer.
	Kind string
}

// reply is one row of a product's table: the answer to each protocol.
type reply struct{ http, grpc int }

// table is what each product sends after each failure it last saw. A
// failure that was itself an answer (Error, Rejection, Gateway) is passed
// on by the proxies: the HTTP status and the gRPC status the layer below
// sent go up unchanged. The rows that differ are the layer's own replies.
var table = map[Product]map[string]reply{
	// Envoy, router.cc: a reset that is not retried is a local 503 (502
	// for a protocol error), a per-try or route timeout a local 504
	// (timeout_response_code_); an upstream's answer is forwarded once
	// the retries are spent. A local reply to a gRPC request carries
	// the grpc-status status.cc's httpToGrpcStatus gives its HTTP status:
	// UNAVAILABLE for 429, 502, 503 and 504.
	Envoy: {Timeout: {504, CodeUnavailable}, Refused: {503, CodeUnavailable}},
	// linkerd2-proxy: an I/O error (a refused or reset connection) is a
	// 502 (outbound endpoint.rs, ClientRescue), a response or connect
	// timeout a 504 (server.rs, ServerRescue; endpoint.rs), and each is
	// UNAVAILABLE to a gRPC caller (core errors/respond.rs).
	Linkerd: {Timeout: {504, CodeUnavailable}, Refused: {502, CodeUnavailable}},
	// nginx, ngx_http_upstream.c, ngx_http_upstream_next: a timeout is a
	// 504, an error (a refused connection, no live upstream) a 502; an
	// upstream's answer is passed on when its tries are spent. To a gRPC
	// caller (grpc_pass) nginx still sends the HTTP status, which gRPC
	// clients read as UNAVAILABLE (gRPC's http-grpc-status-mapping).
	NGINX: {Timeout: {504, CodeUnavailable}, Refused: {502, CodeUnavailable}},
	// HAProxy: a connection that cannot be made once the retries are
	// spent is a 503, a server timeout a 504 (the errorfiles' 503 and
	// 504); a server's answer is forwarded.
	HAProxy: {Timeout: {504, CodeUnavailable}, Refused: {503, CodeUnavailable}},
}

// passed is the answer an answer of kind k is when a proxy passes it on.
var passed = map[string]reply{
	Error:     {500, CodeInternal},
	Rejection: {503, CodeUnavailable},
	Gateway:   {504, CodeDeadlineExceeded},
}

// Of returns what a layer running p answers its caller when it gives up on
// a call whose last failure was last (one of [Kinds]); grpc says whether
// the caller speaks gRPC. A last it does not know is taken as a refusal
// the layer made itself (an open breaker, no host to send to): a 503.
func Of(p Product, last string, grpc bool) Answer {
	if p == App || p == "" {
		return app(last, grpc)
	}
	r, ok := table[p][last]
	if !ok {
		if r, ok = passed[last]; !ok {
			r = passed[Rejection]
		}
	}
	return answer(r, grpc)
}

// app is an application's answer: 500 to an HTTP caller; the status its
// call ended with to a gRPC caller.
func app(last string, grpc bool) Answer {
	if !grpc {
		return answer(reply{500, CodeUnknown}, false)
	}
	switch last {
	case Timeout:
		return answer(reply{504, CodeDeadlineExceeded}, true)
	case Refused:
		return answer(reply{503, CodeUnavailable}, true)
	}
	if r, ok := passed[last]; ok {
		return answer(r, true)
	}
	return answer(passed[Rejection], true)
}

func answer(r reply, grpc bool) Answer {
	a := Answer{HTTP: r.http, GRPC: r.grpc}
	if grpc {
		a.Kind = KindOfGRPC(r.grpc)
	} else {
		a.Kind = KindOfHTTP(r.http)
	}
	return a
}

// KindOfHTTP is the failure an HTTP answer of status code is: 503 and 429
// a Rejection, 502 and 504 a Gateway answer, any other 5xx an Error; ""
// for a status that is not a failure of these kinds.
func KindOfHTTP(code int) string {
	switch {
	case code == 503 || code == 429:
		return Rejection
	case code == 502 || code == 504:
		return Gateway
	case code >= 500 && code <= 599:
		return Error
	}
	return ""
}

// KindOfGRPC is the failure a gRPC status code is: UNAVAILABLE and
// RESOURCE_EXHAUSTED a Rejection, DEADLINE_EXCEEDED a Gateway answer,
// INTERNAL and UNKNOWN an Error; "" for the others.
func KindOfGRPC(code int) string {
	switch code {
	case CodeUnavailable, CodeResourceExhausted:
		return Rejection
	case CodeDeadlineExceeded:
		return Gateway
	case CodeInternal, CodeUnknown:
		return Error
	}
	return ""
}

// Layer is one layer of a call chain as its give-up answers see it.
type Layer struct {
	// Product runs at the layer: what it answers the layer above when it
	// gives up.
	Product Product
	// GRPC says whether the layer speaks gRPC to the layer it calls, and
	// so hears that layer's give-up as a gRPC status.
	GRPC bool
	// Inbound is the proxy beside each replica of the layer it calls
	// (an Istio server sidecar: Envoy), or "" for none: a connection its
	// replica refuses reaches the layer as that proxy's answer.
	Inbound Product
}

// Sees returns the failure l hears when the layer it calls fails with
// below: a refusal behind an inbound proxy is that proxy's answer.
func (l Layer) Sees(below string) string {
	if l.Inbound != "" && below == Refused {
		return Of(l.Inbound, Refused, l.GRPC).Kind
	}
	return below
}

// Seen returns, for a chain outermost first, the failure each layer sees
// when the layer the last one calls fails every attempt with atOrigin and
// every layer gives up in turn: the last layer sees atOrigin (through its
// inbound proxy, if any), each other the answer of the layer below it.
// This is what a closed form of a stack's amplification asks of each
// layer: does it retry what it sees?
func Seen(chain []Layer, atOrigin string) []string {
	out := make([]string, len(chain))
	below := atOrigin
	for i := len(chain) - 1; i >= 0; i-- {
		out[i] = chain[i].Sees(below)
		below = Of(chain[i].Product, out[i], i > 0 && chain[i-1].GRPC).Kind
	}
	return out
}
