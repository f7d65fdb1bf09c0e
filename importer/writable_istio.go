package importer

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/retrystorm/retrystorm/resil/budget"
	"github.com/retrystorm/retrystorm/scenario"
)

// Istio's space: the VirtualService route's retries (attempts,
// perTryTimeout, retryOn with Conditions) and its host's DestinationRule
// (connectionPool.http.maxRetries, outlierDetection). Where the files
// have no VirtualService for the host (a DestinationRule alone) or no
// DestinationRule, the candidate adds one, as a new file.

// istioTarget is where an Istio fleet's settings are in the files.
type istioTarget struct {
	f       *yamlFile
	vs      *yaml.Node // nil: the host has no VirtualService (Istio's default route)
	route   *yaml.Node // the VS's HTTP route
	retries *yaml.Node // its retries block; nil for Istio's default
	df      *yamlFile
	dr      *yaml.Node // the host's DestinationRule; nil for none
	host    string
	grpc    bool
}

func findIstioTarget(w *writer) (*istioTarget, error) {
	t := &istioTarget{host: w.loc.host, grpc: w.opts.Import.Protocol == ProtocolGRPC}
	kind, name, _ := strings.Cut(w.loc.object, " ")
	if defaultRoute(w.from.Origin) {
		t.df, t.dr, _ = findDoc(w.open, w.srcs, istioKind("DestinationRule", name))
		if t.dr == nil {
			return nil, fmt.Errorf("%s: %s is not there", w.loc.file, w.loc.object)
		}
		t.host = str(get(t.dr, "spec"), "host")
		return t, nil
	}
	t.f, t.vs, _ = findDoc(w.open, w.srcs, istioKind(kind, name))
	if t.vs == nil {
		return nil, fmt.Errorf("%s: %s is not there", w.loc.file, w.loc.object)
	}
	if t.route = lookup(t.vs, w.loc.path); t.route == nil {
		return nil, fmt.Errorf("%s: %s: %s is not there", t.f.name, w.loc.object, w.loc.path)
	}
	t.retries = child(t.route, "retries")
	short := func(s string) string { return strings.SplitN(s, ".", 2)[0] }
	t.df, t.dr, _ = findDoc(w.open, w.srcs, func(d *yaml.Node) bool {
		h := str(get(d, "spec"), "host")
		return str(d, "kind") == "DestinationRule" && h != "" && t.host != "" && (h == t.host || short(h) == short(t.host))
	})
	return t, nil
}

// writeRetries writes kvs into the route's retries block: a block that is
// not there yet says its attempts (Istio reads a block without them as 0,
// and refuses perTryTimeout and retryOn beside 0).
func (t *istioTarget) writeRetries(w *writer, kvs ...kv) {
	if t.vs == nil || t.retries == nil {
		kvs = mergeKVs([]kv{{Key: "attempts", Value: strconv.Itoa(w.retries)}}, kvs)
	}
	if t.vs == nil {
		w.doc("virtualservice", kvs...)
		return
	}
	w.set(t.f, t.route, kv{Key: "retries", Map: kvs})
}

// writeTraffic writes kvs into the DestinationRule's trafficPolicy, or a
// new DestinationRule's.
func (t *istioTarget) writeTraffic(w *writer, kvs ...kv) {
	if t.dr == nil {
		w.doc("destinationrule", kvs...)
		return
	}
	w.set(t.df, get(t.dr, "spec"), kv{Key: "trafficPolicy", Map: kvs})
	w.note("scope: the trafficPolicy of DestinationRule %s applies to every route to host %s", str(get(t.dr, "metadata"), "name"), t.host)
}

// Istio's grid (docs/check.md says why).
var (
	istioRetryCounts = []int{0, 1, 2, 3}
	istioMaxRetries  = []int{1, 3}
	istioConditions  = []string{"5xx", "gateway-error", "connect-failure,refused-stream,503", "connect-failure,refused-stream"}
)

func istioSpace(w *writer) (space, error) {
	t, err := findIstioTarget(w)
	if err != nil {
		return space{}, err
	}
	user := w.from.Fleet
	attempts, zero := countOptions(istioRetryCounts, user.Retry.MaxRetries, func(n int) option { return istioAttemptsOption(t, n) })
	perTry := []option{asIs}
	if user.Deadline > 0 && t.vs != nil {
		perTry = append(perTry, istioPerTry(t, user.Deadline))
	}
	limit := []option{asIs}
	if t.dr == nil || child(child(t.dr, "spec"), "trafficPolicy") == nil || child(child(get(t.dr, "spec"), "trafficPolicy"), "retryBudget") == nil {
		for _, m := range istioMaxRetries {
			if b := (scenario.Budget{Use: scenario.BudgetConcurrency, Concurrency: budget.ConcurrencySettings{MinConcurrency: m}}); !b.Equal(user.Budget) {
				limit = append(limit, istioLimit(t, b))
			}
		}
	}
	outlier := []option{asIs}
	if t.dr == nil || child(child(get(t.dr, "spec"), "trafficPolicy"), "outlierDetection") == nil {
		outlier = append(outlier, option{func(w *writer) (string, error) {
			t.writeTraffic(w, kv{Key: "outlierDetection", Map: []kv{{Key: "consecutive5xxErrors", Value: "5"}}})
			expectOutlier(w)
			return "outlierDetection consecutive5xxErrors 5", nil
		}})
	}
	conds := conditionsOptions(w, istioConditions, t.grpc, str(t.retries, "retryOn"), func(c string) option { return istioRetryOnOption(t, c) })
	const dAttempts, dPerTry, dLimit, dConds = 0, 1, 2, 4
	return space{
		dims: [][]option{attempts, perTry, limit, outlier, conds},
		skip: func(p []int) bool {
			return p[dAttempts] == zero && (p[dPerTry] > 0 || p[dLimit] > 0 || p[dConds] > 0)
		},
		finish: t.finish,
	}, nil
}

func istioAttemptsOption(t *istioTarget, n int) option {
	return option{func(w *writer) (string, error) {
		w.retries = n
		t.writeRetries(w, kv{Key: "attempts", Value: strconv.Itoa(n)})
		if n == 0 && t.retries != nil {
			// Istio refuses them beside attempts 0 (validateistio.go).
			w.remove(t.f, t.retries, "perTryTimeout", "retryOn", "retryRemoteLocalities")
			if child(t.retries, "perTryTimeout") != nil || child(t.retries, "retryOn") != nil {
				w.note("no retries: perTryTimeout and retryOn removed, which Istio refuses beside attempts: 0; each request has the route's timeout alone")
			}
		}
		w.expect(func(g scenario.Fleet) string {
			return unless(g.Retry.MaxRetries == n, fmt.Sprintf("%d retries, not %d", g.Retry.MaxRetries, n))
		})
		if n == 0 {
			return "no retries (attempts 0)", nil
		}
		return fmt.Sprintf("attempts %d", n), nil
	}}
}

// istioPerTry gives each attempt its share of the route timeout
// (perTryShare).
func istioPerTry(t *istioTarget, deadline time.Duration) option {
	return option{func(w *writer) (string, error) {
		d, ok := perTryShare(w, deadline)
		if !ok || w.retries == 0 {
			return "", errSkip
		}
		t.writeRetries(w, kv{Key: "perTryTimeout", Value: fmtDur(d), Quoted: true})
		return "perTryTimeout " + nameDur(d), nil
	}}
}

func istioLimit(t *istioTarget, b scenario.Budget) option {
	return option{func(w *writer) (string, error) {
		if w.retries == 0 {
			return "", errSkip
		}
		t.writeTraffic(w, kv{Key: "connectionPool", Map: []kv{{Key: "http", Map: []kv{{Key: "maxRetries", Value: strconv.Itoa(b.Concurrency.MinConcurrency)}}}}})
		w.expect(func(g scenario.Fleet) string {
			return unless(g.Budget.Equal(b), fmt.Sprintf("budget %s, not %s", describeBudget(g.Budget), describeBudget(b)))
		})
		return fmt.Sprintf("maxRetries %d", b.Concurrency.MinConcurrency), nil
	}}
}

func istioRetryOnOption(t *istioTarget, c string) option {
	return option{func(w *writer) (string, error) {
		if w.retries == 0 {
			return "", errSkip
		}
		t.writeRetries(w, kv{Key: "retryOn", Value: keepUnmodelled(c, child(t.retries, "retryOn")), Quoted: true})
		w.expect(func(g scenario.Fleet) string { return unless(g.Retry.MaxRetries > 0, "no retries") })
		return "retryOn " + c, nil
	}}
}

// finish writes the documents the candidate adds: a VirtualService for a
// host that had none, a DestinationRule for one that had none.
func (t *istioTarget) finish(w *writer) error {
	if kvs := w.docs["virtualservice"]; len(kvs) > 0 {
		name := str(get(t.dr, "metadata"), "name")
		text := newVirtualService(t.dr, kvs)
		file := newFileName(w.srcs, t.df.name, "virtualservice-"+fileSafe(name)+".yaml")
		w.added = append(w.added, Edited{Name: file, After: text, Diff: Diff(file, nil, text)})
		w.note("a new file, %s: host %s had no VirtualService; apply it beside DestinationRule %s (in its namespace). A VirtualService of that name already in the cluster would be replaced", file, t.host, name)
	}
	if kvs := w.docs["destinationrule"]; len(kvs) > 0 {
		text := newDestinationRule(t.vs, t.host, kvs)
		file := newFileName(w.srcs, t.f.name, "destinationrule-"+fileSafe(strings.SplitN(t.host, ".", 2)[0])+".yaml")
		w.added = append(w.added, Edited{Name: file, After: text, Diff: Diff(file, nil, text)})
		w.note("a new file, %s: host %s had no DestinationRule in the files given; apply it beside VirtualService %s (in its namespace). If the host has one in the cluster, put this trafficPolicy in it instead: Istio uses one DestinationRule per host", file, t.host, str(get(t.vs, "metadata"), "name"))
	}
	return nil
}

// fileSafe is s with what a file name should not hold replaced.
func fileSafe(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '/' || r == '\\' || r < ' ' || r == ':' || r == '*' {
			return '-'
		}
		return r
	}, s)
}

// newDestinationRule writes a DestinationRule for host, in the namespace
// and API version of VirtualService vs, with trafficPolicy tp.
func newDestinationRule(vs *yaml.Node, host string, tp []kv) []byte {
	meta := get(vs, "metadata")
	var b strings.Builder
	fmt.Fprintf(&b, "# Written by retrystorm advise: host %s had no DestinationRule in the files given.\n", host)
	fmt.Fprintf(&b, "apiVersion: %s\nkind: DestinationRule\nmetadata:\n  name: %s\n", cmpOr(str(vs, "apiVersion"), "networking.istio.io/v1"), yamlScalar(strings.SplitN(host, ".", 2)[0]))
	if ns := str(meta, "namespace"); ns != "" {
		fmt.Fprintf(&b, "  namespace: %s\n", yamlScalar(ns))
	}
	fmt.Fprintf(&b, "spec:\n  host: %s\n  trafficPolicy:\n", yamlScalar(host))
	(&yamlFile{}).writeBlock(&b, tp, 4)
	return []byte(b.String())
}
