package kube

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/retrystorm/retrystorm/importer"
)

// TestRouteHosts: the Service each kind of route calls into, as the
// chains match it: a VirtualService's destination host, a
// ServiceProfile's name, a Linkerd-annotated Service, an HTTPRoute's
// parent Service.
func TestRouteHosts(t *testing.T) {
	for origin, want := range map[string]string{
		"a.yaml: VirtualService orders: spec.http[0] (host orders.shop.svc.cluster.local)": "orders",
		"b.yaml: ServiceProfile authors.booksapp.svc.cluster.local: spec.routes[0]":        "authors",
		"c.yaml: Service books": "books",
	} {
		if got := shortHost(routeHost(origin)); got != want {
			t.Errorf("%s: %q, want %q", origin, got, want)
		}
	}
	data, err := os.ReadFile("../testdata/linkerd/httproute-retries.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ix := &kubeIndex{}
	if err := ix.indexObjects("r.yaml", data); err != nil {
		t.Fatal(err)
	}
	l := manifestLayer{}
	ix.describe(&l, "r.yaml", "HTTPRoute schlep-default", "r.yaml: HTTPRoute schlep-default")
	if l.host != "schlep" || !l.mesh || len(l.dests) != 1 || l.dests[0].name != "schlep" || l.layer.Line != 4 {
		t.Errorf("HTTPRoute schlep-default: host %q, mesh %v, destinations %+v, line %d: want schlep (its parent Service, no backendRefs), mesh, line 4", l.host, l.mesh, l.dests, l.layer.Line)
	}
}

// TestHTTPRouteBackends: an HTTPRoute sends its calls to its backendRefs
// (Services only; a namespace given there wins), applies to the calls
// into its parent Service (GAMMA, as Linkerd reads it), and, attached to
// a Gateway only, applies at the gateway: a route into its first backend.
func TestHTTPRouteBackends(t *testing.T) {
	data := []byte(`apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: split, namespace: shop}
spec:
  parentRefs: [{name: orders, kind: Service, group: core}]
  rules:
  - backendRefs:
    - {name: orders-v1, port: 80, weight: 90}
    - {name: orders-v2, namespace: canary, port: 80, weight: 10}
    - {name: bucket, kind: S3Bucket}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: edge, namespace: shop}
spec:
  parentRefs: [{name: public, kind: Gateway}]
  rules:
  - backendRefs: [{name: frontend, port: 8080}]
`)
	ix := &kubeIndex{}
	if err := ix.indexObjects("r.yaml", data); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, host string
		mesh       bool
		dests      []string
	}{
		{"split", "orders", true, []string{"shop/orders-v1", "canary/orders-v2"}},
		{"edge", "frontend", false, []string{"shop/frontend"}},
	} {
		l := manifestLayer{}
		ix.describe(&l, "r.yaml", "HTTPRoute "+c.name, "r.yaml: HTTPRoute "+c.name)
		var got []string
		for _, d := range l.dests {
			got = append(got, d.ns+"/"+d.name)
		}
		if l.host != c.host || l.mesh != c.mesh || !slices.Equal(got, c.dests) {
			t.Errorf("HTTPRoute %s: host %q, mesh %v, destinations %q; want %q, %v, %q", c.name, l.host, l.mesh, got, c.host, c.mesh, c.dests)
		}
	}
}

// TestTargetRef: what names a Service of the cluster, and what does not
// (an external host, a word, a path, a port out of range).
func TestTargetRef(t *testing.T) {
	for _, c := range []struct {
		v        string
		name, ns string
	}{
		{"http://payments.default.svc.cluster.local:8080", "payments", "default"},
		{"payments:8080", "payments", "pod"},
		{"https://payments.shop/v1/charge", "payments", "shop"},
		{"dns:///ledger.shop.svc.cluster.local:50051", "ledger", "shop"},
		{"ledger.shop.svc:50051", "ledger", "shop"},
		{"grpc://orders:9090", "orders", "pod"},
		{"https://api.stripe.com:443", "", ""},
		{"postgres://db:5432/x", "", ""},
		{"payments", "", ""},
		{"payments:http", "", ""},
		{"payments:70000", "", ""},
		{"/etc/grpc/config.json", "", ""},
		{"Payments:80", "", ""},
		{"a b:80", "", ""},
	} {
		r, ok := targetRef(c.v, "pod")
		if ok != (c.name != "") || r.name != c.name || r.ns != c.ns {
			t.Errorf("%q: %+v %v, want %q in %q", c.v, r, ok, c.name, c.ns)
		}
	}
}

// TestChainsAreNotGuessed: a pod with two client configs that names a
// Service in its env, with no target in either ConfigMap, makes no chain:
// which config calls it is not said, and the list says so; a ConfigMap
// no pod mounts is listed too.
func TestChainsAreNotGuessed(t *testing.T) {
	cfg := func(name string) manifestLayer {
		return manifestLayer{cm: "shop/" + name, ns: "shop", layer: Layer{Name: "ConfigMap " + name, File: "x.yaml", Line: 3, Origin: "x.yaml#" + name}}
	}
	layers := []manifestLayer{cfg("a"), cfg("b"), cfg("orphan")}
	loads := []workload{{kind: "Deployment", name: "w", ns: "shop", file: "x.yaml", line: 1, replicas: 1, labels: map[string]string{"app": "w"},
		configMaps: []string{"shop/a", "shop/b"}, targets: []ref{{name: "p", ns: "shop", at: "x.yaml:9: env P"}}}}
	chains, unmatched, err := buildChains(layers, loads, nil, &kubeIndex{})
	if err != nil {
		t.Fatal(err)
	}
	all := strings.Join(unmatched, "\n")
	if len(chains) != 0 || !strings.Contains(all, "2 client configs and 1 Services named in its containers: which config calls which is not said") ||
		!strings.Contains(all, "ConfigMap orphan (x.yaml:3): no pod in the manifests mounts it") {
		t.Errorf("%d chains, unmatched:\n%s", len(chains), all)
	}
}

// TestLoopsAnywhere is issue 37's third defect: three Services calling
// each other in a ring with no route into them, or one calling itself,
// found "0 chains" and passed; a loop anywhere is refused, with the loop.
func TestLoopsAnywhere(t *testing.T) {
	service := func(name, calls string) string {
		return `apiVersion: v1
kind: Service
metadata: {name: ` + name + `, namespace: shop}
spec: {selector: {app: ` + name + `}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: ` + name + `, namespace: shop}
spec:
  replicas: 2
  selector: {matchLabels: {app: ` + name + `}}
  template:
    metadata: {labels: {app: ` + name + `}}
    spec:
      containers:
      - name: app
        image: x
        env:
        - {name: NEXT, value: "http://` + calls + `.shop.svc.cluster.local:8080"}
---
`
	}
	for _, c := range []struct {
		name, manifests, want string
	}{
		{"a ring with no entry", service("a", "b") + service("b", "c") + service("c", "a"), "shop/a"},
		{"a Service calling itself", service("solo", "solo"), "shop/solo"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "shop.yaml"), []byte(c.manifests), 0o644); err != nil {
				t.Fatal(err)
			}
			r, err := Find(dir, Options{Read: os.ReadFile})
			if err == nil || !strings.Contains(err.Error(), "the chain loops") || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("%v (%+v), want the loop through %s", err, r, c.want)
			}
			t.Log(err)
		})
	}
}

// TestFirstErrorByFile: of a file that does not parse and a later one
// that cannot be read (or passes the bytes Find reads), the earlier
// file's error is the one reported, as when the files were read one
// after another; the files are parsed side by side now.
func TestFirstErrorByFile(t *testing.T) {
	dir := t.TempDir()
	for name, text := range map[string]string{"a.yaml": "kind: [unclosed\n", "b.yaml": "kind: Service\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	unreadable := func(name string) ([]byte, error) {
		if filepath.Base(name) == "b.yaml" {
			return nil, errors.New("b.yaml: larger than the limit")
		}
		return os.ReadFile(name)
	}
	_, err := Find(dir, Options{Read: unreadable})
	if err == nil || !strings.Contains(err.Error(), "a.yaml") {
		t.Errorf("%v, want a.yaml's parse error, the first by file", err)
	}
	// Alone, the unreadable file's error is the one.
	if err := os.WriteFile(filepath.Join(dir, "a.yaml"), []byte("kind: Service\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Find(dir, Options{Read: unreadable}); err == nil || !strings.Contains(err.Error(), "b.yaml") {
		t.Errorf("%v, want b.yaml's read error", err)
	}
}

// TestOnlyIndexedDocumentsAreKept: of a file's documents, the files read
// side by side keep whole only those the index reads (routes,
// DestinationRules, ConfigMaps); of the others, the kind, name and line
// for blame. Kept whole, 13 MB of CRDs took 1.9 GB before any was indexed.
func TestOnlyIndexedDocumentsAreKept(t *testing.T) {
	text := `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: things.example.com}
spec: {group: example.com}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: cfg}
data: {a: b}
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: vs}
spec: {hosts: [a]}
`
	f := readObjects("x.yaml", []byte(text), importer.Options{})
	if f.err != nil {
		t.Fatal(f.err)
	}
	var got []string
	for _, h := range f.docs {
		got = append(got, fmt.Sprintf("%s %s line %d whole %v", h.kind, h.name, h.line, h.root != nil))
	}
	want := []string{"CustomResourceDefinition things.example.com line 1 whole false", "ConfigMap cfg line 6 whole true", "VirtualService vs line 11 whole true"}
	if !slices.Equal(got, want) {
		t.Errorf("kept %q, want %q", got, want)
	}
}
