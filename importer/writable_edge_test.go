package importer

import (
	"strings"
	"testing"
)

// writableOf imports srcs and returns the space of the fleet at at,
// checking each candidate as TestWritable does.
func writableOf(t *testing.T, srcs []Source, at string, o WritableOptions) (Fleet, map[string]Candidate) {
	t.Helper()
	fl, err := Import(srcs, o.Import)
	if err != nil {
		t.Fatal(err)
	}
	from := findFleet(t, fl, at)
	cands, err := Writable(srcs, from, o)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]Candidate{}
	for _, c := range cands {
		checkCandidate(t, srcs, fl, from, c, o.Import)
		byName[c.Name] = c
	}
	return from, byName
}

// TestWritableUnboundedEnvoy: issue 35's Envoy route, five retries under
// max_retries 1000000 (issue 34's UNSAFE example), gets what Envoy can
// write: fewer retries, a per-try timeout that fits the route timeout, and
// a real limit.
func TestWritableUnboundedEnvoy(t *testing.T) {
	src := Source{Name: "envoy.yaml", Data: []byte(`virtual_hosts:
- name: api
  domains: ["*"]
  routes:
  - match: {prefix: "/"}
    route:
      cluster: api
      timeout: 10s
      retry_policy:
        retry_on: 5xx,reset
        num_retries: 5
        per_try_timeout: 1s
---
name: api
connect_timeout: 1s
circuit_breakers:
  thresholds:
  - max_retries: 1000000
`)}
	_, cands := writableOf(t, []Source{src}, "", WritableOptions{})
	for _, n := range []string{"num_retries 1, retry_budget 10%/min 1", "num_retries 2, max_retries 3", "num_retries 3, retry_back_off 100ms to 1s, retry_budget 20%/min 3"} {
		c, ok := cands[n]
		if !ok {
			t.Errorf("no candidate %q", n)
			continue
		}
		if c.Fleet.Fleet.Budget.Use != "concurrency" {
			t.Errorf("%q: budget %s", n, c.Fleet.Fleet.Budget.Use)
		}
	}
}

// TestWritableEnvoyWithoutRetries: a route with no retry policy sends
// each request once; its retry conditions are the user's (none), so only
// with Conditions is a retry policy written, and then whole.
func TestWritableEnvoyWithoutRetries(t *testing.T) {
	srcs := []Source{{Name: "route.yaml", Data: []byte("virtual_hosts:\n- name: api\n  domains: [\"*\"]\n  routes:\n  - match: {prefix: \"/\"}\n    route: {cluster: api, timeout: 2s}\n")},
		{Name: "cluster.yaml", Data: []byte("name: api\nconnect_timeout: 1s\ncircuit_breakers:\n  thresholds:\n  - priority: DEFAULT\n    max_retries: 3\n")}}
	_, cands := writableOf(t, srcs, "", WritableOptions{})
	for n, c := range cands {
		if c.Fleet.Fleet.Retry.MaxRetries != 0 {
			t.Errorf("%q retries, without --conditions", n)
		}
	}
	if _, ok := cands["outlier_detection consecutive_5xx 5"]; !ok {
		t.Error("outlier detection is writable whatever the route retries")
	}
	_, cands = writableOf(t, srcs, "", WritableOptions{Conditions: true})
	c, ok := cands["num_retries 1, per_try_timeout 1s, retry_on gateway-error"]
	if !ok {
		t.Fatalf("no retry policy written with --conditions; %d candidates", len(cands))
	}
	if after := string(c.Edited[0].After); !strings.Contains(after, "retry_policy") || c.Fleet.Fleet.Retry.MaxRetries != 1 {
		t.Errorf("read back %d retries from\n%s", c.Fleet.Fleet.Retry.MaxRetries, after)
	}
}

// TestWritableIstioFlowRetries: a retries block written inline, as many
// do, loses perTryTimeout and retryOn (and their commas) when it goes to
// attempts: 0, which Istio requires.
func TestWritableIstioFlowRetries(t *testing.T) {
	src := Source{Name: "vs.yaml", Data: []byte(`apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: ratings}
spec:
  hosts: [ratings]
  http:
  - route:
    - destination: {host: ratings}
    retries: {attempts: 40, perTryTimeout: 2s, retryOn: "5xx,connect-failure"}
`)}
	_, cands := writableOf(t, []Source{src}, "", WritableOptions{})
	c, ok := cands["no retries (attempts 0)"]
	if !ok {
		t.Fatal("no candidate without retries")
	}
	if got := string(c.Edited[0].After); !strings.Contains(got, "retries: {attempts: 0}\n") {
		t.Errorf("the retries block:\n%s", c.Edited[0].Diff)
	}
	if _, ok := cands["attempts 2, maxRetries 3"]; !ok {
		t.Error("no candidate with a limit in a new DestinationRule")
	}
}

// TestWritableSaysWhatItCovers: one fleet stands for routes with the same
// settings. An edit of a virtual host's retry policy changes them all
// alike; an edit of one route's own policy leaves the others, and each
// says so.
func TestWritableSaysWhatItCovers(t *testing.T) {
	shared := Source{Name: "vh.yaml", Data: manyRoutes(3)}
	own := Source{Name: "own.yaml", Data: []byte("virtual_hosts:\n- name: v\n  domains: ['*']\n  routes:\n" +
		"  - {route: {cluster: c, retry_policy: {retry_on: 5xx, num_retries: 2}}}\n" +
		"  - {route: {cluster: c, retry_policy: {retry_on: 5xx, num_retries: 2}}}\n")}
	for _, tc := range []struct {
		src  Source
		says string
	}{{shared, "changes 2 other objects with the same settings alike"}, {own, "1 other object with the same settings left as they are"}} {
		_, cands := writableOf(t, []Source{tc.src}, "", WritableOptions{})
		c, ok := cands["retry_back_off 100ms to 1s"]
		if !ok {
			t.Fatalf("%s: no candidate with a backoff", tc.src.Name)
		}
		if !strings.Contains(strings.Join(c.Notes, "\n"), tc.says) {
			t.Errorf("%s: the notes do not say %q: %q", tc.src.Name, tc.says, c.Notes)
		}
	}
}

// TestWritableEnvoyJSON: Envoy reads JSON too; an edit into JSON writes
// JSON (keys quoted, a new mapping inline), and Envoy's parser takes it.
func TestWritableEnvoyJSON(t *testing.T) {
	srcs := []Source{{Name: "route.json", Data: []byte(`{"virtual_hosts": [{"name": "orders", "domains": ["*"],
  "routes": [{"match": {"prefix": "/"}, "route": {"cluster": "orders", "timeout": "3s", "retry_policy": {"retry_on": "5xx", "num_retries": 2}}}]}]}
`)}, {Name: "cluster.json", Data: []byte(`{"name": "orders", "connect_timeout": "1s", "type": "STRICT_DNS"}
`)}}
	_, cands := writableOf(t, srcs, "", WritableOptions{Conditions: true})
	c, ok := cands["num_retries 1, per_try_timeout 1.5s, retry_budget 10%/min 1"]
	if !ok {
		t.Fatalf("%d candidates, not the one looked for", len(cands))
	}
	for _, e := range c.Edited {
		if !strings.Contains(string(e.After), `"per_try_timeout": "1.5s"`) && !strings.Contains(string(e.After), `"retry_budget": {"budget_percent": {"value": 10}`) {
			t.Errorf("%s is not edited as JSON:\n%s", e.Name, e.Diff)
		}
	}
}
