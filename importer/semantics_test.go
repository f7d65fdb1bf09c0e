package importer

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/resil/budget"
	"github.com/retrystorm/retrystorm/scenario"
	"github.com/retrystorm/retrystorm/sim"
)

// importOne imports files and wants exactly one fleet.
func importOne(t *testing.T, o Options, files ...string) Fleet {
	t.Helper()
	fl, err := Import(sources(t, files...), o)
	if err != nil {
		t.Fatal(err)
	}
	if len(fl) != 1 {
		t.Fatalf("%d fleets, want 1", len(fl))
	}
	return fl[0]
}

// TestLinkerdSemantics: a retryable ServiceProfile route without timeout
// or retryBudget. Linkerd sets no route timeout unless the route has one
// (linkerd/linkerd2 pull 4958, stable-2.9,
// controller/api/destination/profile_translator.go), and its proxy
// (linkerd2-proxy v2.366, linkerd/app/outbound/src/http/retry.rs) pays
// tower's TpsBudget (tower 0.5.3, tower/src/retry/budget/tps_budget.rs,
// default ttl 10s, 10 per second, ratio 0.2) for every answer it does not
// retry: in a total outage, where every answer is a retryable failure,
// only the floor, 10 retries per second per proxy, gets through, whatever
// the request rate.
func TestLinkerdSemantics(t *testing.T) {
	f := importOne(t, Options{}, "linkerd/emojivoto-web.yaml").Fleet
	if f.Deadline != 0 || f.Timeout != maxTimeout {
		t.Errorf("timeout %v, deadline %v: want none (no default route timeout)", f.Timeout, f.Deadline)
	}
	b := f.Budget
	if w := b.Window; b.Use != scenario.BudgetWindow || w.Funding != budget.FundedByAnswer || !w.Tower || w.Ratio != 0.2 || w.MinRetriesPerSecond != 10 || w.TTL != 10*time.Second {
		t.Fatalf("budget %+v: want Linkerd's default TpsBudget", b)
	}

	// One proxy, 100 requests per second, and 30 s in which every answer
	// is a 5xx after 20 s of health: retries in the outage's last 20 s
	// (past the window that still holds healthy deposits) are the floor's
	// 10 per second.
	f.Timeout = time.Second
	base, err := scenario.Parse("outage.yaml", []byte(`
name: linkerd-outage
seed: 1
duration: 60s
traffic: {rate: 100, clients: 1}
origin: {model: capacity, capacity: 1000}
triggers:
  - {kind: errors, at: 20s, for: 30s, error_rate: 1}
fleets:
  - {name: x, timeout: 1s, budget: {use: none}}
`))
	if err != nil {
		t.Fatal(err)
	}
	sc, _, err := Scenario([]Fleet{{Fleet: f}}, base)
	if err != nil {
		t.Fatal(err)
	}
	res, err := sim.RunWith(context.Background(), sc, sim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := res.Fleets[0].Series
	var retries int64
	for k := 30; k < 50; k++ {
		retries += s.Retries[k]
	}
	if perSec := float64(retries) / 20; perSec < 9 || perSec > 11 {
		t.Errorf("%.1f retries per second in the outage, want the floor's 10 (not 20%% of 100 requests)", perSec)
	}
}

// TestAWSGoV2Semantics is the decision table of aws-sdk-go-v2 (aws/retry
// at c213f6605dbc): the wait before retry n (n = 1 for the first) is
// rand × 2^n seconds, and 20s once 2^n passes DefaultMaxBackoff
// (jitter_backoff.go, ExponentialJitterBackoff.BackoffDelay;
// standard.go); in adaptive mode a first attempt that succeeds adds
// nothing to the retry quota (adaptive.go, GetAttemptToken; aws-sdk-go-v2
// issue 3550), in standard mode it adds 1; a retry that succeeds gets its
// cost back and, in standard mode, adds 1 as well (issue 36, row 8:
// middleware.go, handleAttempt, releases both the retry token and the
// attempt token on success).
func TestAWSGoV2Semantics(t *testing.T) {
	for _, c := range []struct {
		mode      string
		increment float64 // tokens an attempt's success adds back
	}{{"standard", 1}, {"adaptive", 0}} {
		t.Run(c.mode, func(t *testing.T) {
			src := Source{Name: "config", Data: []byte("[profile app]\nregion = eu-west-1\nretry_mode = " + c.mode + "\nmax_attempts = 8\n")}
			fl, err := Import([]Source{src}, Options{Timeout: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			p, err := fl[0].Fleet.NewPolicy()
			if err != nil {
				t.Fatal(err)
			}
			for n, want := range map[int]time.Duration{1: 2 * time.Second, 2: 4 * time.Second, 3: 8 * time.Second, 4: 16 * time.Second, 5: 20 * time.Second, 7: 20 * time.Second} {
				// MaxDelay is the least upper bound of [0, want): want less 1ns.
				if got := p.Backoff.MaxDelay(n, 0); got != want-1 {
					t.Errorf("retry %d: waits up to %v, want below %v", n, got, want)
				}
			}
			now := time.Unix(0, 0)
			if _, ok := p.Budget.Withdraw(now, 0); !ok {
				t.Fatal("no retry from a full quota")
			}
			before := tokens(t, p.Budget, now)
			p.Budget.Record(now, 0, 0) // a first attempt that succeeds
			if got := tokens(t, p.Budget, now) - before; got != c.increment {
				t.Errorf("a first attempt's success added %v, want %v", got, c.increment)
			}
			if _, ok := p.Budget.Withdraw(now, 0); !ok {
				t.Fatal("no second retry")
			}
			before = tokens(t, p.Budget, now)
			p.Budget.Record(now, 0, 5) // a retry that paid 5 and succeeded
			if got := tokens(t, p.Budget, now) - before; got != 5+c.increment {
				t.Errorf("a retry's success added %v, want its 5 back and %v", got, c.increment)
			}
		})
	}
}

func tokens(t *testing.T, b any, now time.Time) float64 {
	t.Helper()
	tb, ok := b.(interface{ Tokens(time.Time) float64 })
	if !ok {
		t.Fatalf("%T has no balance", b)
	}
	return tb.Tokens(now)
}

// TestEnvoyRetryOn is the decision table of Envoy's router, read at
// envoyproxy/envoy e78906c5 and again (issue 36) at the version with
// RetryDecision and reset-before-request's upstream_request_started (Envoy
// ≥ 1.22; the index's newest, 2024-2025) (source/common/router/
// retry_state_impl.cc: wouldRetryFromHeaders reads a 5xx, a gateway error
// (502, 503, 504), the retriable status codes and, for unavailable,
// resource-exhausted, internal, cancelled and deadline-exceeded, the
// answer's grpc-status; wouldRetryFromReset retries a connection failure
// under connect-failure, any reset before the request started under
// reset-before-request, every reset under reset, 5xx and gateway-error,
// and a refused stream under refused-stream; router.cc,
// onPerTryTimeoutCommon: a per-try timeout resets the stream locally
// (LocalReset) after the request started, so it is a reset, not a 504
// answer, and not one before the request). On a gRPC route, an error
// answer is HTTP 200 with its grpc-status (Envoy's own local replies to a
// gRPC request too: http/utility.cc, sendLocalReply), so 5xx,
// gateway-error and retriable-status-codes see no failed answer (issue
// 36, row 5). The simulator's failures: an error answer (500; gRPC
// INTERNAL), an overload rejection (503; gRPC UNAVAILABLE), a gateway
// answer from a tier below (502, 504; gRPC DEADLINE_EXCEEDED), a per-try
// timeout, a refused connection.
func TestEnvoyRetryOn(t *testing.T) {
	for _, c := range []struct {
		retryOn string
		codes   []uint32
		grpc    bool
		want    string // the failures retried
	}{
		{"5xx", nil, false, "error rejection gateway timeout refused"},
		{"gateway-error", nil, false, "rejection gateway timeout refused"},
		{"5xx", nil, true, "timeout refused"},
		{"gateway-error", nil, true, "timeout refused"},
		{"retriable-status-codes", []uint32{503}, true, ""},
		{"5xx,unavailable", nil, true, "rejection timeout refused"},
		{"reset", nil, false, "timeout refused"},
		{"reset-before-request", nil, false, "refused"},
		{"connect-failure", nil, false, "refused"},
		{"refused-stream", nil, false, "refused"},
		{"retriable-status-codes", []uint32{503}, false, "rejection"},
		{"retriable-status-codes", []uint32{504}, false, "gateway"},
		{"retriable-status-codes", []uint32{500, 502}, false, "error gateway"},
		{"retriable-status-codes", []uint32{404}, false, ""},
		{"unavailable", nil, false, ""},
		{"unavailable", nil, true, "rejection"},
		{"resource-exhausted", nil, true, "rejection"},
		{"internal", nil, false, ""},
		{"internal", nil, true, "error"},
		{"cancelled", nil, true, ""},
		{"deadline-exceeded", nil, true, "gateway"},
		{"deadline-exceeded", nil, false, ""},
		{"envoy-ratelimited", nil, false, ""},
		{"retriable-4xx", nil, false, ""},
		{"connect-failure,refused-stream,unavailable,cancelled,retriable-status-codes", nil, false, "refused"},
		{"connect-failure,refused-stream,unavailable,cancelled,retriable-status-codes", nil, true, "rejection refused"},
		{"connect-failure,refused-stream,unavailable,cancelled,retriable-status-codes", []uint32{503}, false, "rejection refused"},
	} {
		on, _, err := retryOn(c.retryOn, c.codes, c.grpc)
		if err != nil {
			t.Errorf("%s %v: %v", c.retryOn, c.codes, err)
			continue
		}
		if got := strings.Join(on, " "); got != c.want {
			t.Errorf("retry_on %s, codes %v, gRPC %v: retries [%s], want [%s]", c.retryOn, c.codes, c.grpc, got, c.want)
		}
	}
}

// TestEnvoyProtocolFromRoute: a route that matches gRPC requests is a
// gRPC service, whose unavailable condition retries rejections; the same
// route without the match is taken as HTTP, and says so.
func TestEnvoyProtocolFromRoute(t *testing.T) {
	cfg := func(match string) []Source {
		return []Source{{Name: "route.yaml", Data: []byte(`
name: local
virtual_hosts:
- name: svc
  domains: ["*"]
  routes:
  - match: {prefix: "/"` + match + `}
    route:
      cluster: svc
      retry_policy: {retry_on: unavailable, num_retries: 2}
`)}}
	}
	for _, c := range []struct {
		match string
		o     Options
		want  int // retries
		note  string
	}{
		{"", Options{}, 0, "protocol: http  <- assumed"},
		{", grpc: {}", Options{}, 2, "protocol: grpc  <- route.yaml: virtual_hosts[0].routes[0].match.grpc"},
		{"", Options{Protocol: ProtocolGRPC}, 2, "protocol: grpc  <- given"},
	} {
		fl, err := Import(cfg(c.match), c.o)
		if err != nil {
			t.Fatal(err)
		}
		f := fl[0]
		if f.Fleet.Retry.MaxRetries != c.want || !strings.Contains(f.Note(), c.note) {
			t.Errorf("match %q, %+v: %d retries, want %d, and a note %q in:\n%s", c.match, c.o, f.Fleet.Retry.MaxRetries, c.want, c.note, f.Note())
		}
	}
}

// TestIstioDefaultRetries is the decision table of Istio's default retry
// policy (pilot/pkg/networking/core/route/retry/retry.go, read at
// 1.31.0-alpha.0: 2 retries on connect-failure, refused-stream,
// unavailable, cancelled and retriable-status-codes with no code; before
// 1.24 the codes held 503, releasenotes/notes/50506.yaml). On an HTTP
// service only the refused connections are retried; on a gRPC one,
// UNAVAILABLE too; before 1.24, 503 answers too.
func TestIstioDefaultRetries(t *testing.T) {
	for _, c := range []struct {
		name  string
		files []string
		o     Options
		on    string
		notes []string
	}{
		{"HTTP, current", []string{"istio/kubectl-list.yaml"}, Options{Protocol: ProtocolHTTP}, "refused", []string{"istio: 1.24+", "protocol: http  <- given"}},
		{"gRPC from the Service's port name", []string{"istio/kubectl-list.yaml"}, Options{}, "rejection refused", []string{"port grpc-web speaks gRPC"}},
		{"HTTP, Istio 1.23", []string{"istio/kubectl-list.yaml"}, Options{Protocol: ProtocolHTTP, IstioVersion: "1.23"}, "rejection refused", []string{"istio: 1.23", "before 1.24"}},
		{"a DestinationRule alone", []string{"istio/destination-rule-reviews.yaml"}, Options{}, "refused", []string{"no VirtualService for host reviews", "protocol: http  <- assumed"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := importOne(t, c.o, c.files...)
			if f.Fleet.Retry.MaxRetries != 2 {
				t.Errorf("%d retries, want Istio's 2", f.Fleet.Retry.MaxRetries)
			}
			if got := strings.Join(f.Fleet.Retry.On, " "); got != c.on {
				t.Errorf("retries [%s], want [%s]", got, c.on)
			}
			for _, n := range c.notes {
				if !strings.Contains(f.Note(), n) {
					t.Errorf("no %q in the note:\n%s", n, f.Note())
				}
			}
		})
	}
	if _, err := Import(sources(t, "istio/kubectl-list.yaml"), Options{IstioVersion: "latest"}); err == nil {
		t.Error("IstioVersion latest: want an error naming it")
	}
}

// TestGRPCHedgingImported: the hedging example's service config (the
// shape of grpc-java's examples/src/main/resources/io/grpc/examples/
// hedging/hedging_service_config.json: maxAttempts 3, hedgingDelay 1s, no
// nonFatalStatusCodes) hedges: under gRFC A6 hedges go out on the delay
// whatever the status, and the retryThrottling beside it throttles them.
func TestGRPCHedgingImported(t *testing.T) {
	f := importOne(t, Options{}, "grpc/hedging-example.json").Fleet
	if f.Hedge.Delay != time.Second || f.Hedge.Max != 2 {
		t.Errorf("hedge %+v, want delay 1s, max 2", f.Hedge)
	}
	if f.Retry.MaxRetries != 0 {
		t.Errorf("%d retries: a hedging policy retries nothing after a failure", f.Retry.MaxRetries)
	}
	if f.Budget.Use != scenario.BudgetGRPC || f.Budget.GRPC.MaxTokens != 10 || f.Budget.GRPC.TokenRatio != 0.1 {
		t.Errorf("budget %+v, want the retryThrottling beside the hedging policy", f.Budget)
	}
}

// TestEnvoyEnumsAnyCase: Envoy reads enums case-insensitively
// (source/common/protobuf/utility.cc, MessageUtil::loadFromJson sets
// case_insensitive_enum_parsing), so a config with type: strict_dns and
// priority: default is valid, and its DEFAULT thresholds apply; a value
// that names no enum value in any case is still refused.
func TestEnvoyEnumsAnyCase(t *testing.T) {
	f := importOne(t, Options{}, "envoy/lowercase-enums.yaml").Fleet
	if f.Budget.Use != scenario.BudgetConcurrency || f.Budget.Concurrency.MinConcurrency != 5 {
		t.Errorf("budget %+v: want the DEFAULT priority's max_retries 5", f.Budget)
	}
	_, err := Import([]Source{{Name: "c.yaml", Data: []byte("name: c\nconnect_timeout: 1s\ntype: strict_dnz\n")}}, Options{})
	if err == nil || !strings.Contains(err.Error(), "c.yaml:3") {
		t.Errorf("a misspelt enum: err = %v, want one naming c.yaml:3", err)
	}
}

// TestEnvoyV2Fields: a v2-era config (a filter's untyped config, which the
// v3 API dropped; Envoy 1.18 removed the v2 API) is imported, saying that
// Envoy 1.18 and later reject it; a v2 cluster's hosts is refused with the
// v3 field to write instead.
func TestEnvoyV2Fields(t *testing.T) {
	f := importOne(t, Options{}, "envoy/v2-front-proxy.yaml")
	if !strings.Contains(f.Note(), "Envoy 1.18 and later read only the v3 API and reject it") {
		t.Errorf("no word of the v2 field in the note:\n%s", f.Note())
	}
	src := []Source{{Name: "c.yaml", Data: []byte("name: c\nconnect_timeout: 1s\nhosts:\n- socket_address: {address: c, port_value: 80}\n")}}
	if _, err := Import(src, Options{}); err == nil || !strings.Contains(err.Error(), "load_assignment") {
		t.Errorf("a v2 cluster's hosts: err = %v, want one naming load_assignment", err)
	}
}

// TestAWSInvalidUnusedProfile: the AWS SDKs read a profile only when a
// client selects it (aws-sdk-go-v2 config/shared_config.go loads the
// selected profile's section), so a file with one invalid profile still
// configures the others; the export keeps the profile's name.
func TestAWSInvalidUnusedProfile(t *testing.T) {
	f := importOne(t, Options{Timeout: time.Second}, "aws/config-invalid-profile")
	if f.Fleet.Name != "aws batch" || !strings.Contains(f.Note(), `retry_mode "fast"`) {
		t.Errorf("fleet %q, note:\n%s\nwant the batch profile, and word of the broken one", f.Fleet.Name, f.Note())
	}
	text, _, err := Export(f.Fleet, AWS)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(text, "[profile batch]\n") {
		t.Errorf("export:\n%s\nwant the [profile batch] section", text)
	}
	src := []Source{{Name: "config", Data: []byte("[profile broken]\nretry_mode = fast\n")}}
	if _, err := Import(src, Options{Timeout: time.Second}); err == nil || !strings.Contains(err.Error(), "config:") {
		t.Errorf("only an invalid profile: err = %v, want one naming the file", err)
	}
}

// TestLinkerdRouteAnnotations is the decision table of Linkerd's
// HTTPRoute retries, read at linkerd/linkerd2 edge-26.8.3
// (policy-controller/k8s/index/src/outbound/index/http.rs,
// parse_http_retry: limit 1 when unset, 5xx is 500-599, gateway-error
// 502-504; grpc/src/outbound/http.rs, convert_retry: backoff 25ms to
// 250ms) and linkerd2-proxy v2.366 (linkerd/app/outbound/src/http/logical/
// policy/route/retry.rs: a response-headers timeout is retried; there is
// no retry budget).
func TestLinkerdRouteAnnotations(t *testing.T) {
	fl, err := Import(sources(t, "linkerd/httproute-retries.yaml"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		retries           int
		on                string
		timeout, deadline time.Duration
	}{
		"schlep-default": {2, "error rejection gateway timeout", 300 * time.Millisecond, 2 * time.Second},
		"books":          {1, "rejection gateway", maxTimeout, 0},
	}
	if len(fl) != len(want) {
		t.Fatalf("%d fleets, want %d", len(fl), len(want))
	}
	for _, f := range fl {
		w := want[f.Fleet.Name]
		got := f.Fleet
		if got.Retry.MaxRetries != w.retries || strings.Join(got.Retry.On, " ") != w.on || got.Timeout != w.timeout || got.Deadline != w.deadline {
			t.Errorf("%s: %d retries on [%s], timeout %v, deadline %v; want %d on [%s], %v, %v",
				got.Name, got.Retry.MaxRetries, strings.Join(got.Retry.On, " "), got.Timeout, got.Deadline, w.retries, w.on, w.timeout, w.deadline)
		}
		if got.Budget.Use != scenario.BudgetNone {
			t.Errorf("%s: budget %q: HTTPRoute retries have none", got.Name, got.Budget.Use)
		}
	}
	for _, c := range []struct {
		ann   string
		retry bool
	}{
		{`retry.linkerd.io/limit: "0"`, false},
		{`retry.linkerd.io/limit: "3"`, false}, // no status and no timeout: nothing the simulator makes is retried
		{`retry.linkerd.io/http: "503"`, true},
	} {
		src := []Source{{Name: "r.yaml", Data: []byte("apiVersion: policy.linkerd.io/v1beta3\nkind: HTTPRoute\nmetadata:\n  name: r\n  annotations:\n    " + c.ann + "\nspec: {}\n")}}
		fl, err := Import(src, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if got := fl[0].Fleet.Retry.MaxRetries > 0; got != c.retry {
			t.Errorf("%s: retries = %v, want %v", c.ann, got, c.retry)
		}
	}
}
