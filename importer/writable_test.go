package importer

import (
	"strings"
	"testing"
)

// writableCase is a set of the user's files and the fleet of them whose
// space is searched.
type writableCase struct {
	files []string
	at    string // a part of the fleet's origin; "" for the first fleet
	opts  WritableOptions
	min   int      // at least this many candidates
	names []string // candidates that must be there, by name
}

// writableCases are the project's examples of every format: Envoy (a
// bootstrap, a route and its cluster in two files, lower-case enums),
// Istio (VirtualService with DestinationRule, a route with no rule, a
// kubectl List, a DestinationRule alone), Linkerd (ServiceProfile and
// HTTPRoute annotations), gRPC (both key spellings, hedging) and AWS
// (profiles and environment lines), nginx (a location and its upstream,
// a grpc_pass) and HAProxy (a backend with its defaults, one that
// observes its servers).
var writableCases = []writableCase{
	{files: []string{"envoy/front-proxy.yaml"}, min: 10, names: []string{"num_retries 1", "retry_budget 10%/min 1", "num_retries 2, retry_back_off 500ms to 5s"}},
	{files: []string{"envoy/route.yaml", "envoy/cluster.yaml"}, min: 50, names: []string{"num_retries 1, per_try_timeout 7.5s, max_retries 1", "outlier_detection consecutive_5xx 5"}},
	{files: []string{"envoy/lowercase-enums.yaml"}, min: 20},
	{files: []string{"envoy/route.yaml", "envoy/cluster.yaml"}, opts: WritableOptions{Conditions: true}, min: 100, names: []string{"retry_on 5xx"}},
	{files: []string{"istio/reviews.yaml"}, min: 10, names: []string{"no retries (attempts 0)", "attempts 1, maxRetries 1"}},
	{files: []string{"istio/naive.yaml"}, min: 20, names: []string{"maxRetries 3", "attempts 1, outlierDetection consecutive5xxErrors 5"}},
	{files: []string{"istio/budget.yaml"}, at: "VirtualService", min: 10},
	{files: []string{"istio/kubectl-list.yaml"}, min: 10},
	{files: []string{"istio/destination-rule-reviews.yaml"}, min: 5, names: []string{"attempts 1", "no retries (attempts 0)"}},
	{files: []string{"istio/reviews.yaml"}, opts: WritableOptions{Conditions: true}, min: 30, names: []string{"retryOn gateway-error"}},
	{files: []string{"linkerd/books.yaml"}, min: 10, names: []string{"isRetryable false", "retryRatio 0.1, minRetriesPerSecond 1", "ttl 3s, timeout 10s"}},
	{files: []string{"linkerd/books.yaml"}, at: "routes[1]", min: 2, names: []string{"isRetryable true"}},
	{files: []string{"linkerd/emojivoto-web.yaml"}, min: 10, names: []string{"retryRatio 0.1"}},
	{files: []string{"linkerd/httproute-retries.yaml"}, min: 3, names: []string{"retry.linkerd.io/limit 1"}},
	{files: []string{"linkerd/httproute-retries.yaml"}, at: "Service books", min: 3, names: []string{"retry.linkerd.io/limit 2"}},
	{files: []string{"grpc/service-config.json"}, min: 15, names: []string{"maxAttempts 2, retryThrottling maxTokens 100, tokenRatio 0.1", "no retryPolicy (each call sent once)"}},
	{files: []string{"grpc/capitalised.json"}, min: 20, names: []string{"maxAttempts 2, initialBackoff 0.1s, maxBackoff 1s"}},
	{files: []string{"grpc/hedging.json"}, min: 5, names: []string{"no hedgingPolicy (each call sent once)", "hedgingPolicy maxAttempts 2, hedgingDelay 0.5s"}},
	{files: []string{"grpc/hedging.json"}, at: "methodConfig[1]", opts: WritableOptions{Conditions: true}, min: 20, names: []string{"retryableStatusCodes [UNAVAILABLE, INTERNAL]"}},
	{files: []string{"grpc/hedging-example.json"}, min: 5},
	{files: []string{"aws/config"}, min: 8, names: []string{"retry_mode adaptive, max_attempts 2", "max_attempts 1"}},
	{files: []string{"aws/config"}, at: "batch", min: 8, names: []string{"retry_mode standard"}},
	{files: []string{"aws/env"}, min: 8, names: []string{"retry_mode standard, max_attempts 2"}},
	{files: []string{"nginx/nginx.conf"}, min: 20, names: []string{"proxy_next_upstream_tries 1 (no retries)", "proxy_next_upstream_tries 4", "proxy_next_upstream_tries 2, proxy_next_upstream_timeout 5s, max_fails=1, fail_timeout=10s"}},
	{files: []string{"nginx/nginx.conf"}, at: "line 41", min: 10, names: []string{"grpc_next_upstream_tries 1 (no retries)", "grpc_next_upstream_timeout 2s, max_fails=3"}},
	{files: []string{"nginx/nginx.conf"}, opts: WritableOptions{Conditions: true}, min: 60, names: []string{"proxy_next_upstream error", "proxy_next_upstream_tries 2, proxy_next_upstream error timeout"}},
	{files: []string{"haproxy/haproxy.cfg"}, min: 10, names: []string{"retries 0", "retries 1, observe layer7, error-limit 5, on-error mark-down"}},
	{files: []string{"haproxy/haproxy.cfg"}, at: "backend api", min: 4, names: []string{"retries 3"}},
	{files: []string{"haproxy/haproxy.cfg"}, opts: WritableOptions{Conditions: true}, min: 40, names: []string{"retry-on conn-failure", "retries 1, retry-on conn-failure response-timeout 500 502 503 504"}},
}

func findFleet(t *testing.T, fl []Fleet, at string) Fleet {
	t.Helper()
	for _, f := range fl {
		if strings.Contains(f.Origin, at) {
			return f
		}
	}
	t.Fatalf("no fleet at %q", at)
	return Fleet{}
}

// TestWritable: every candidate of every example is written into the
// user's files, passes the product's parser, imports back as the
// candidate's fleet, differs from every other candidate, keeps every
// limit the user has, and leaves the other fleets of the files as they
// were.
func TestWritable(t *testing.T) {
	for _, tc := range writableCases {
		name := strings.Join(tc.files, "+")
		if tc.opts.Conditions {
			name += " conditions"
		}
		t.Run(name, func(t *testing.T) {
			srcs := readSources(t, tc.files...)
			fl, err := Import(srcs, tc.opts.Import)
			if err != nil {
				t.Fatal(err)
			}
			from := findFleet(t, fl, tc.at)
			cands, err := Writable(srcs, from, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%d candidates for %s", len(cands), from.Origin)
			if len(cands) < tc.min {
				t.Errorf("%d candidates, want at least %d", len(cands), tc.min)
			}
			if cands[0].Name != AsItIs || len(cands[0].Edited) != 0 || fleetKey(cands[0].Fleet.Fleet) != fleetKey(from.Fleet) {
				t.Errorf("the first candidate is not the user's own: %s", cands[0].Name)
			}
			seen := map[string]string{}
			names := map[string]bool{}
			for _, c := range cands {
				names[c.Name] = true
				k := fleetKey(c.Fleet.Fleet)
				if other, ok := seen[k]; ok {
					t.Errorf("%q and %q read the same", c.Name, other)
				}
				seen[k] = c.Name
				if g := c.Fleet.Fleet; from.Fleet.Budget.Use != "none" && g.Retry.MaxRetries != 0 && g.Budget.Use == "none" {
					t.Errorf("%q removes the limit on retries", c.Name)
				}
				if from.Fleet.OutlierDetection.Use != "" && c.Fleet.Fleet.OutlierDetection.Use != from.Fleet.OutlierDetection.Use {
					t.Errorf("%q removes outlier detection", c.Name)
				}
				checkCandidate(t, srcs, fl, from, c, tc.opts.Import)
			}
			for _, n := range tc.names {
				if !names[n] {
					t.Errorf("no candidate %q", n)
				}
			}
		})
	}
}

// checkCandidate checks one candidate's edit as a user would apply it:
// the product's parser takes each edited file, and the files, imported
// again, hold the candidate's fleet and the other fleets as they were.
func checkCandidate(t *testing.T, srcs []Source, fl []Fleet, from Fleet, c Candidate, o Options) {
	t.Helper()
	if err := ValidateEdited(from.Format, c.Edited); err != nil {
		t.Errorf("%q: %v", c.Name, err)
		return
	}
	again := applyEdits(srcs, c.Edited)
	o.Format = from.Format
	fl2, err := Import(again, o)
	if err != nil {
		t.Errorf("%q: the edited files do not import: %v", c.Name, err)
		return
	}
	found := false
	for _, f := range fl2 {
		if f.Origin == c.Fleet.Origin {
			found = true
			if fleetKey(f.Fleet) != fleetKey(c.Fleet.Fleet) {
				t.Errorf("%q: imported again, the fleet differs from the candidate's", c.Name)
			}
		}
	}
	if !found {
		t.Errorf("%q: the edited files hold no fleet at %s", c.Name, c.Fleet.Origin)
	}
	// The other fleets stay as they were, unless a note says the edit's
	// scope is wider than the route.
	wider := strings.Contains(strings.Join(c.Notes, "\n"), "scope:")
	for _, f := range fl {
		if f.Origin == from.Origin || wider {
			continue
		}
		for _, g := range fl2 {
			if g.Origin == f.Origin && fleetKey(g.Fleet) != fleetKey(f.Fleet) {
				t.Errorf("%q changed another fleet, %s, and says nothing of its scope", c.Name, f.Origin)
			}
		}
	}
	for _, e := range c.Edited {
		if e.Diff != Diff(e.Name, e.Before, e.After) {
			t.Errorf("%q: %s: the diff is not the file's", c.Name, e.Name)
		}
	}
}

// applyEdits is srcs with the edited files' bytes, and the new files
// after them.
func applyEdits(srcs []Source, edited []Edited) []Source {
	out := append([]Source(nil), srcs...)
	for _, e := range edited {
		found := false
		for i := range out {
			if out[i].Name == e.Name {
				out[i].Data, found = e.After, true
			}
		}
		if !found {
			out = append(out, Source{Name: e.Name, Data: e.After})
		}
	}
	return out
}
