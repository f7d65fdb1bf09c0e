package importer

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/scenario"
)

// TestImportManyRoutes is issue 27's: an Envoy virtual host with ten
// thousand routes that share its retry policy made ten thousand fleets,
// and importing it allocated 1.5 GB (715 MB at the peak) to write 15 MB.
// Identical fleets are now one, which lists the routes it stands for, and
// the import allocates a small multiple of its input.
func TestImportManyRoutes(t *testing.T) {
	const n = 10_000
	data := manyRoutes(n)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fl, err := Import([]Source{{Name: "envoy.yaml", Data: data}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	out, err := Write(fl, storm(t))
	if err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("%d routes (%d bytes): %d fleet(s), %d bytes written, %d allocated", n, len(data), len(fl), len(out), alloc)
	if len(fl) != 1 || len(fl[0].Covers) != n-1 {
		t.Fatalf("%d fleets (the first covers %d more), want 1 covering %d more", len(fl), len(fl[0].Covers), n-1)
	}
	if !strings.Contains(string(out), "The same settings stand for 9999 more:\n  #   - envoy.yaml: virtual_hosts[0].routes[1] (cluster \"c\")") {
		t.Errorf("the fleet's note does not list the routes it stands for:\n%.2000s", out)
	}
	limit := uint64(500 * len(data))
	if raceEnabled {
		limit *= 2 // the race detector's instrumented build allocates more
	}
	if alloc > limit {
		t.Errorf("allocated %d bytes for a %d-byte config: more than %d", alloc, len(data), limit)
	}
}

// TestImportBounds: an import is counted before its fleets are built, and
// refused with the count and what it would cost.
func TestImportBounds(t *testing.T) {
	if err := admit(Envoy, maxItems+1, "routes"); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%d routes, more than the %d", maxItems+1, maxItems)) {
		t.Errorf("admit over the bound: %v", err)
	}
	// Routes of different settings each make a fleet.
	var b strings.Builder
	b.WriteString("virtual_hosts:\n- name: v\n  domains: ['*']\n  routes:\n")
	for i := range maxFleets + 1 {
		fmt.Fprintf(&b, "  - {match: {prefix: /}, route: {cluster: c, retry_policy: {retry_on: 5xx, num_retries: %d}}}\n", i+1)
	}
	_, err := Import([]Source{{Name: "envoy.yaml", Data: []byte(b.String())}}, Options{})
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%d fleets of different settings, more than the %d", maxFleets+1, maxFleets)) {
		t.Errorf("import of %d different routes: %v", maxFleets+1, err)
	}
}

// TestFleetNames: every name a config may give a route or a profile
// becomes a name a scenario takes, and no two fleets share one, even when
// a number added to one name is another's ("a", "a (2)", "a").
func TestFleetNames(t *testing.T) {
	long := strings.Repeat("é", 80) // 160 bytes
	for _, c := range []struct {
		in, want []string
	}{
		{[]string{"a", "a (2)", "a"}, []string{"a", "a (2)", "a (3)"}},
		{[]string{"a", "a", "a (2)"}, []string{"a", "a (2)", "a (2) (2)"}},
		{[]string{"evil\u202eroute", "esc\x1b[2Jx", "zero\u200bwidth", "bad\xffbyte", "  ", "hangul\u115ffill"},
			[]string{`evil\u202eroute`, `esc\x1b[2Jx`, `zero\u200bwidth`, `bad\xffbyte`, "envoy", `hangul\u115ffill`}},
		{[]string{long, long}, []string{strings.Repeat("é", 48) + "…", strings.Repeat("é", 46) + "… (2)"}},
	} {
		var fl []Fleet
		for _, n := range c.in {
			f := Fleet{Fleet: scenario.Fleet{Name: n, Timeout: time.Second, Budget: scenario.Budget{Use: scenario.BudgetNone}, Retry: scenario.Retry{Backoff: noBackoff}}, Format: Envoy}
			fl = append(fl, f)
		}
		nameFleets(fl)
		for i, f := range fl {
			if f.Fleet.Name != c.want[i] {
				t.Errorf("%q: fleet %d named %q, want %q", c.in, i, f.Fleet.Name, c.want[i])
			}
			if err := checkFleet(f.Fleet); err != nil {
				t.Errorf("%q: fleet %d: %v", c.in, i, err)
			}
		}
	}
}

// envoyRoute is a route configuration with one route whose retry policy
// and timeout are given, and its cluster with the thresholds given.
func envoyRoute(timeout, retry, thresholds string) string {
	s := "virtual_hosts:\n- name: v\n  domains: ['*']\n  routes:\n  - match: {prefix: /}\n    route:\n      cluster: c\n"
	if timeout != "" {
		s += "      timeout: " + timeout + "\n"
	}
	s += "      retry_policy: " + retry + "\n"
	if thresholds != "" {
		s += "---\nname: c\nconnect_timeout: 1s\ncircuit_breakers:\n  thresholds:\n  - " + thresholds + "\n"
	}
	return s
}

func istioRoute(http string) string {
	return "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: r}\nspec:\n  hosts: [r]\n  http:\n  - route: [{destination: {host: r}}]\n" + http
}

func linkerdProfile(budget string) string {
	return "apiVersion: linkerd.io/v1alpha2\nkind: ServiceProfile\nmetadata: {name: books}\nspec:\n  routes:\n  - name: get\n    condition: {method: GET}\n    isRetryable: true\n  retryBudget:\n" + budget
}

func grpcConfig(method string) string {
	return `{"methodConfig": [` + method + `], "retryThrottling": {"maxTokens": 10, "tokenRatio": 0.1}}`
}

// TestImportEdges is issue 27's list of valid or odd settings that gave
// "the imported scenario is invalid (a bug: please report it)". What the
// product refuses is refused, naming the file's line and the product's
// rule; what it takes is imported, brought into the simulator's range with
// a note. The rules followed, by product and version:
//
//   - Envoy v1.36 (envoyproxy/envoy main, Aug 2026): the PGV rules of its
//     API (go-control-plane v1.40.0's generated Validate: RetryBackOff's
//     base_interval and max_interval "gt: 0s",
//     envoy/config/route/v3/route_components.proto; RetryBudget's
//     budget_percent a type.v3.Percent in [0, 100],
//     envoy/type/v3/percent.proto), and
//     source/common/router/retry_policy_impl.cc: "retry_policy.max_interval
//     must greater than or equal to the base_interval".
//   - Istio (istio/istio master 86c9f01, 1.31 dev):
//     pkg/config/validation/agent/validation.go, ValidateHTTPRetry:
//     "attempts cannot be negative"; ValidateDuration: backoff and
//     perTryTimeout at least 1ms, whole milliseconds.
//   - Linkerd (linkerd/linkerd2 edge-26.8.3): pkg/profiles/profiles.go
//     Validate ("RetryRatio must be non-negative"), and
//     controller/gen/apis/serviceprofile/v1alpha2/types.go:
//     minRetriesPerSecond is a uint32, retryRatio a float32, read from
//     JSON (sigs.k8s.io/yaml), which has no NaN.
//   - gRPC: grpcconfig, which reads service configs as grpc-go does.
//   - AWS: aws/aws-sdk-go-v2 internal/ini (845d42e), parse.go and
//     tokenize.go: an indented "key = value" under a key with no value is
//     that key's sub-property; sections of one name merge.
func TestImportEdges(t *testing.T) {
	longName := strings.Repeat("service.with.a.rather.long.name.", 2)
	for _, c := range []struct {
		name, file, data string
		wantErr          string // the error holds it; "" for none
		wantNote         string // the scenario's notes hold it
		check            func(t *testing.T, f scenario.Fleet)
	}{
		// gRPC
		{name: "grpc names past 100 bytes", file: "sc.json",
			data:     grpcConfig(`{"name": [{"service": "` + longName + `a"}, {"service": "` + longName + `b"}], "retryPolicy": {"maxAttempts": 3, "initialBackoff": "0.1s", "maxBackoff": "1s", "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]}}`),
			wantNote: "shortened to 100 bytes"},
		{name: "grpc hedgingDelay not shorter than timeout", file: "sc.json",
			data:     grpcConfig(`{"name": [{"service": "s"}], "timeout": "1s", "hedgingPolicy": {"maxAttempts": 3, "hedgingDelay": "2s", "nonFatalStatusCodes": ["UNAVAILABLE"]}}`),
			wantNote: "no hedge is ever sent",
			check: func(t *testing.T, f scenario.Fleet) {
				if f.Hedge.Delay != 0 {
					t.Errorf("hedge %+v, want none", f.Hedge)
				}
			}},
		{name: "grpc timeout over 24h", file: "sc.json",
			data:     grpcConfig(`{"name": [{"service": "s"}], "timeout": "90000s", "retryPolicy": {"maxAttempts": 3, "initialBackoff": "0.1s", "maxBackoff": "1s", "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]}}`),
			wantNote: "25h: the simulator's longest is 24h"},
		{name: "grpc maxBackoff over 24h", file: "sc.json",
			data:     grpcConfig(`{"name": [{"service": "s"}], "retryPolicy": {"maxAttempts": 3, "initialBackoff": "90000s", "maxBackoff": "90000s", "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]}}`),
			wantNote: "25h: the simulator's longest is 24h"},
		{name: "grpc tokenRatio under 0.001", file: "sc.json",
			data:     `{"methodConfig": [{"name": [{"service": "s"}], "retryPolicy": {"maxAttempts": 3, "initialBackoff": "0.1s", "maxBackoff": "1s", "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]}}], "retryThrottling": {"maxTokens": 10, "tokenRatio": 0.0007}}`,
			wantNote: "token_ratio 0.001",
			check: func(t *testing.T, f scenario.Fleet) {
				if f.Budget.GRPC.TokenRatio != 0.001 {
					t.Errorf("token ratio %v, want 0.001", f.Budget.GRPC.TokenRatio)
				}
			}},

		// Envoy
		{name: "envoy route timeout 90000s", file: "e.yaml",
			data:     envoyRoute("90000s", "{retry_on: 5xx}", ""),
			wantNote: "25h: the simulator's longest is 24h"},
		{name: "envoy max_interval negative", file: "e.yaml",
			data:    envoyRoute("", "{retry_on: 5xx, retry_back_off: {base_interval: 1s, max_interval: -1s}}", ""),
			wantErr: "e.yaml:8: virtual_hosts[0].routes[0].route.retry_policy.retry_back_off.max_interval: value must be greater than 0s"},
		{name: "envoy max_interval below base_interval", file: "e.yaml",
			data:    envoyRoute("", "{retry_on: 5xx, retry_back_off: {base_interval: 1s, max_interval: 0.5s}}", ""),
			wantErr: "e.yaml:8: virtual_hosts[0].routes[0].route.retry_policy.retry_back_off.max_interval: 500ms is below base_interval 1s: Envoy refuses it"},
		{name: "envoy budget_percent NaN", file: "e.yaml",
			data:    envoyRoute("", "{retry_on: 5xx}", "retry_budget: {budget_percent: {value: NaN}}"),
			wantErr: "e.yaml:14: circuit_breakers.thresholds[0].retry_budget.budget_percent: NaN"},
		{name: "envoy budget_percent -5", file: "e.yaml",
			data:    envoyRoute("", "{retry_on: 5xx}", "retry_budget: {budget_percent: {value: -5}}"),
			wantErr: "e.yaml:14: circuit_breakers.thresholds[0].retry_budget.budget_percent.value: value must be inside range [0, 100]"},
		{name: "envoy budget_percent 150", file: "e.yaml",
			data:    envoyRoute("", "{retry_on: 5xx}", "retry_budget: {budget_percent: {value: 150}}"),
			wantErr: "e.yaml:14: circuit_breakers.thresholds[0].retry_budget.budget_percent.value: value must be inside range [0, 100]"},
		{name: "envoy budget_percent 1e300", file: "e.yaml",
			data:    envoyRoute("", "{retry_on: 5xx}", "retry_budget: {budget_percent: {value: 1e300}}"),
			wantErr: "value must be inside range [0, 100]"},
		{name: "envoy min_retry_concurrency 4e9", file: "e.yaml",
			data:     envoyRoute("", "{retry_on: 5xx}", "retry_budget: {min_retry_concurrency: 4000000000}"),
			wantNote: "min_retry_concurrency 4000000000: the simulator's largest is 1000000",
			check: func(t *testing.T, f scenario.Fleet) {
				if f.Budget.Concurrency.MinConcurrency != 1_000_000 {
					t.Errorf("min concurrency %d, want 1000000", f.Budget.Concurrency.MinConcurrency)
				}
			}},
		{name: "envoy route name with an escape", file: "e.yaml",
			data:     strings.Replace(envoyRoute("", "{retry_on: 5xx}", ""), "  - match:", "  - name: \"a\\e[2Jb\\u202ec\"\n    match:", 1),
			wantNote: `control or invisible characters escaped`,
			check: func(t *testing.T, f scenario.Fleet) {
				if f.Name != `a\x1b[2Jb\u202ec` {
					t.Errorf("name %q", f.Name)
				}
			}},
		{name: "envoy route name of 150 bytes", file: "e.yaml",
			data:     strings.Replace(envoyRoute("", "{retry_on: 5xx}", ""), "  - match:", "  - name: "+strings.Repeat("r", 150)+"\n    match:", 1),
			wantNote: "shortened to 100 bytes"},

		// Istio
		{name: "istio attempts -5", file: "vs.yaml",
			data:    istioRoute("    retries: {attempts: -5}\n"),
			wantErr: "vs.yaml:8: spec.http[0].retries.attempts: -5: attempts cannot be negative (Istio refuses it)"},
		{name: "istio attempts -1 (issue 27, item 6)", file: "vs.yaml",
			data:    istioRoute("    retries:\n      attempts: -1\n      retryOn: 5xx\n"),
			wantErr: "vs.yaml:9: spec.http[0].retries.attempts: -1: attempts cannot be negative (Istio refuses it)"},
		{name: "istio attempts 2e9", file: "vs.yaml",
			data:     istioRoute("    retries: {attempts: 2000000000, retryOn: 5xx}\n"),
			wantNote: "attempts 2000000000: the simulator's largest is 1000000",
			check: func(t *testing.T, f scenario.Fleet) {
				if f.Retry.MaxRetries != 1_000_000 {
					t.Errorf("max retries %d", f.Retry.MaxRetries)
				}
			}},
		{name: "istio backoff 3h", file: "vs.yaml",
			data:     istioRoute("    retries: {attempts: 3, retryOn: 5xx, backoff: 3h}\n"),
			wantNote: "30h: the simulator's longest is 24h"},
		{name: "istio backoff under 1ms", file: "vs.yaml",
			data:    istioRoute("    retries: {attempts: 3, retryOn: 5xx, backoff: 0.5ms}\n"),
			wantErr: "vs.yaml:8: spec.http[0].retries.backoff: duration must be greater than 1ms (Istio refuses it)"},

		// Linkerd
		{name: "linkerd retryRatio 5", file: "sp.yaml",
			data:     linkerdProfile("    retryRatio: 5\n    minRetriesPerSecond: 10\n    ttl: 10s\n"),
			wantNote: "retryRatio 5: the simulator's budget_ratio is at most 1",
			check: func(t *testing.T, f scenario.Fleet) {
				if f.Budget.Ratio() != 1 {
					t.Errorf("ratio %v, want 1", f.Budget.Ratio())
				}
			}},
		{name: "linkerd retryRatio NaN", file: "sp.yaml",
			data:    linkerdProfile("    retryRatio: .nan\n    minRetriesPerSecond: 10\n    ttl: 10s\n"),
			wantErr: "sp.yaml:10: spec.retryBudget.retryRatio: .nan: is not a number Linkerd can read"},
		{name: "linkerd retryRatio 1e-300", file: "sp.yaml",
			data:     linkerdProfile("    retryRatio: 1e-300\n    minRetriesPerSecond: 10\n    ttl: 10s\n"),
			wantNote: "retryRatio 1e-300 is 0 as the float32 Linkerd holds it",
			check: func(t *testing.T, f scenario.Fleet) {
				if f.Retry.MaxRetries != 0 {
					t.Errorf("max retries %d, want 0", f.Retry.MaxRetries)
				}
			}},
		{name: "linkerd minRetriesPerSecond -10", file: "sp.yaml",
			data:    linkerdProfile("    retryRatio: 0.2\n    minRetriesPerSecond: -10\n    ttl: 10s\n"),
			wantErr: "sp.yaml:11: spec.retryBudget.minRetriesPerSecond: -10: Linkerd holds it as a whole number from 0 to 4294967295"},
		{name: "linkerd ttl 1000h", file: "sp.yaml",
			data:     linkerdProfile("    retryRatio: 0.2\n    minRetriesPerSecond: 10\n    ttl: 1000h\n"),
			wantNote: "ttl 1000h is outside 1s to 60s: Linkerd's proxy drops the budget"},
		{name: "linkerd ttl 1ns", file: "sp.yaml",
			data:     linkerdProfile("    retryRatio: 0.2\n    minRetriesPerSecond: 10\n    ttl: 1ns\n"),
			wantNote: "ttl 1ns is outside 1s to 60s: Linkerd's proxy drops the budget"},

		// AWS
		{name: "aws profile name of 120 bytes", file: "config",
			data:     "[profile " + strings.Repeat("p", 120) + "]\nmax_attempts = 3\n",
			wantNote: "shortened to 100 bytes"},
		{name: "aws profile name with a control character", file: "config",
			data:     "[profile a\x01b]\nmax_attempts = 3\n",
			wantNote: "control or invisible characters escaped"},
		{name: "aws duplicate names after renaming", file: "config",
			data: "[profile a]\nmax_attempts = 2\n[profile a (2)]\nmax_attempts = 3\n[profile a]\nretry_mode = adaptive\n",
			check: func(t *testing.T, f scenario.Fleet) {
				// [a] twice is one profile (the SDK merges them): adaptive,
				// with 2 attempts.
				if f.Name == "aws a" && (f.Budget.Use != scenario.BudgetAWSAdaptive || f.Retry.MaxRetries != 1) {
					t.Errorf("profile a: %+v", f)
				}
			}},
		{name: "aws max_attempts under a service (issue 27, item 10)", file: "config",
			data:     "[default]\nretry_mode = standard\ns3 =\n  max_attempts = 5\n",
			wantNote: "s3: max_attempts = 5 (line 4): settings for that service's clients only",
			check: func(t *testing.T, f scenario.Fleet) {
				if f.Retry.MaxRetries != 2 {
					t.Errorf("max retries %d, want the SDK's default 2: the s3 setting applied to the profile", f.Retry.MaxRetries)
				}
			}},
		{name: "aws indented setting after a value", file: "config",
			data: "[default]\nregion = us-east-1\n  max_attempts = 5\n",
			check: func(t *testing.T, f scenario.Fleet) {
				// The SDK promotes an "orphaned" sub-property to a property.
				if f.Retry.MaxRetries != 4 {
					t.Errorf("max retries %d, want 4", f.Retry.MaxRetries)
				}
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			fl, err := Import([]Source{{Name: c.file, Data: []byte(c.data)}}, Options{Timeout: time.Second})
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err = %v\nwant it to hold %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			out, err := Write(fl, storm(t))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(out), c.wantNote) {
				t.Errorf("the notes do not say %q:\n%s", c.wantNote, out)
			}
			if _, err := scenario.Parse("out.yaml", out); err != nil {
				t.Errorf("the scenario does not load: %v", err)
			}
			if c.check != nil {
				for _, f := range fl {
					c.check(t, f.Fleet)
				}
			}
		})
	}
}
