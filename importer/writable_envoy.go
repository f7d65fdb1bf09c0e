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

// Envoy's space: the route's retry policy (num_retries, per_try_timeout,
// retry_back_off, retry_on with Conditions) and its cluster's DEFAULT
// circuit breaker (max_retries, or a retry_budget) and outlier_detection.

// envoyTarget is where an Envoy fleet's settings are in the files.
type envoyTarget struct {
	f       *yamlFile
	action  *yaml.Node // the route's route action
	policy  *yaml.Node // the retry policy that applies: the route's, or its virtual host's; nil for none
	vhScope bool       // the policy is the virtual host's
	grpc    bool       // the route's service speaks gRPC

	cf      *yamlFile  // the cluster's file
	cluster *yaml.Node // nil when the cluster is in none of the files
	entry   *yaml.Node // its DEFAULT thresholds; nil for none
	cb      *yaml.Node // its circuit_breakers; nil for none
}

func findEnvoyTarget(w *writer) (*envoyTarget, error) {
	f, err := w.open(w.loc.file)
	if err != nil {
		return nil, err
	}
	t := &envoyTarget{f: f}
	vhPath, _, _ := strings.Cut(w.loc.path, ".routes[")
	if strings.HasPrefix(w.loc.path, "routes[") {
		vhPath = ""
	}
	var route, vh *yaml.Node
	for _, d := range f.docs {
		if r := lookup(d, w.loc.path); r != nil && child(r, "route") != nil {
			route, vh = r, lookup(d, vhPath)
			break
		}
	}
	if route == nil {
		return nil, fmt.Errorf("%s: %s is not there", f.name, w.loc.path)
	}
	t.action = child(route, "route")
	t.policy = child(t.action, "retry_policy")
	if t.policy == nil && vh != nil && child(vh, "retry_policy") != nil {
		t.policy, t.vhScope = child(vh, "retry_policy"), true
	}
	t.grpc = w.opts.Import.Protocol == ProtocolGRPC || (w.opts.Import.Protocol == "" && child(child(route, "match"), "grpc") != nil)
	isIt := func(m *yaml.Node) bool { return str(m, "name") == w.loc.cluster && isCluster(m) }
	cf, doc, _ := findDoc(w.open, w.srcs, func(d *yaml.Node) bool { return walk(d, isIt) != nil })
	if doc != nil {
		t.cf, t.cluster = cf, walk(doc, isIt)
		t.cb = child(t.cluster, "circuit_breakers")
		for _, e := range listOf(child(t.cb, "thresholds")) {
			if p := str(e, "priority"); p == "" || strings.EqualFold(p, "DEFAULT") {
				t.entry = e
				break
			}
		}
	}
	return t, nil
}

// listOf is a sequence's items, or none.
func listOf(n *yaml.Node) []*yaml.Node {
	n = deref(n)
	if n == nil || n.Kind != yaml.SequenceNode {
		return nil
	}
	return n.Content
}

// writePolicy writes kvs into the retry policy that applies, or a new one
// on the route.
func (t *envoyTarget) writePolicy(w *writer, kvs ...kv) {
	if t.policy != nil {
		w.set(t.f, t.policy, kvs...)
		if t.vhScope {
			w.note("scope: the retry policy is the virtual host's, so the edit applies to every route of it that has none of its own")
		}
		return
	}
	w.set(t.f, t.action, kv{Key: "retry_policy", Map: kvs})
}

// Envoy's grid, per setting (docs/check.md says why):
var (
	envoyRetryCounts = []int{0, 1, 2, 3}
	envoyBackoffs    = []time.Duration{100 * time.Millisecond, 500 * time.Millisecond}
	envoyRetryLimits = []int{1, 3}
	envoyBudgets     = []scenario.Budget{{Use: scenario.BudgetConcurrency, Concurrency: budget.ConcurrencySettings{Percent: 20, MinConcurrency: 3}}, {Use: scenario.BudgetConcurrency, Concurrency: budget.ConcurrencySettings{Percent: 10, MinConcurrency: 1}}}
	// envoyConditions span the simulator's failures: every one; answers
	// and resets but no 500; refused connections and 503s; refused
	// connections alone.
	envoyConditions = []string{"5xx", "gateway-error", "connect-failure,refused-stream,retriable-status-codes", "connect-failure,refused-stream"}
)

func envoySpace(w *writer) (space, error) {
	t, err := findEnvoyTarget(w)
	if err != nil {
		return space{}, err
	}
	user := w.from.Fleet
	retries, zero := []option{asIs}, -1
	switch {
	case t.policy != nil:
		retries, zero = countOptions(envoyRetryCounts, user.Retry.MaxRetries, func(n int) option { return envoyRetries(t, n) })
	case w.opts.Conditions:
		// A new retry policy: retries from 1, with conditions.
		retries, _ = countOptions(envoyRetryCounts[1:], 0, func(n int) option { return envoyRetries(t, n) })
	}
	perTry := []option{asIs}
	if user.Deadline > 0 {
		perTry = append(perTry, envoyPerTry(t, user.Deadline))
	}
	backoff := []option{asIs}
	for _, b := range envoyBackoffs {
		if b != user.Retry.Backoff.Base {
			backoff = append(backoff, envoyBackoff(t, b))
		}
	}
	limit := envoyLimits(t, user)
	outlier := []option{asIs}
	if t.cluster != nil && child(t.cluster, "outlier_detection") == nil {
		outlier = append(outlier, option{func(w *writer) (string, error) {
			w.set(t.cf, t.cluster, kv{Key: "outlier_detection", Map: []kv{{Key: "consecutive_5xx", Value: "5"}}})
			w.note("scope: outlier_detection is cluster %q's, for every route to it", w.loc.cluster)
			expectOutlier(w)
			return "outlier_detection consecutive_5xx 5", nil
		}})
	}
	conds := conditionsOptions(w, envoyConditions, t.grpc, str(t.policy, "retry_on"), func(c string) option { return envoyRetryOnOption(t, c) })
	const dRetries, dBackoff, dLimit, dOutlier, dConds = 0, 2, 3, 4, 5
	return space{
		dims: [][]option{retries, perTry, backoff, limit, outlier, conds},
		skip: func(p []int) bool {
			return (p[dRetries] == zero && (p[dBackoff] > 0 || p[dLimit] > 0 || p[dConds] > 0)) ||
				(p[dConds] > 0 && (p[dBackoff] > 0 || p[dOutlier] > 0)) ||
				(t.policy == nil && p[dConds] == 0 && p[dRetries] > 0)
		},
	}, nil
}

// unless is what differs when ok does not hold.
func unless(ok bool, what string) string {
	if ok {
		return ""
	}
	return what
}

func envoyRetries(t *envoyTarget, n int) option {
	return option{func(w *writer) (string, error) {
		w.retries = n
		t.writePolicy(w, kv{Key: "num_retries", Value: strconv.Itoa(n)})
		w.expect(func(g scenario.Fleet) string {
			return unless(g.Retry.MaxRetries == n, fmt.Sprintf("%d retries, not %d", g.Retry.MaxRetries, n))
		})
		return fmt.Sprintf("num_retries %d", n), nil
	}}
}

// envoyPerTry gives each attempt its share of the route timeout
// (perTryShare).
func envoyPerTry(t *envoyTarget, deadline time.Duration) option {
	return option{func(w *writer) (string, error) {
		d, ok := perTryShare(w, deadline)
		if !ok || (t.policy == nil && w.retries == 0) {
			return "", errSkip
		}
		t.writePolicy(w, kv{Key: "per_try_timeout", Value: protoDur(d), Quoted: true})
		return "per_try_timeout " + nameDur(d), nil
	}}
}

// perTryShare is an equal share of the route timeout for each attempt,
// deadline / (retries + 1) in whole 10ms, so that every retry has time to
// run: a candidate only where that is shorter than the attempts have now.
// The imported fleet must have it as its attempt timeout.
func perTryShare(w *writer, deadline time.Duration) (time.Duration, bool) {
	d := (deadline / time.Duration(w.retries+1)).Truncate(10 * time.Millisecond)
	if d < 10*time.Millisecond || d >= w.from.Fleet.Timeout {
		return 0, false
	}
	w.expect(func(g scenario.Fleet) string {
		return unless(g.Timeout == d, fmt.Sprintf("timeout %v, not %v", g.Timeout, d))
	})
	return d, true
}

func envoyBackoff(t *envoyTarget, b time.Duration) option {
	return option{func(w *writer) (string, error) {
		if w.retries == 0 {
			return "", errSkip
		}
		t.writePolicy(w, kv{Key: "retry_back_off", Map: []kv{{Key: "base_interval", Value: protoDur(b), Quoted: true}, {Key: "max_interval", Value: protoDur(10 * b), Quoted: true}}})
		w.expect(func(g scenario.Fleet) string {
			bo := g.Retry.Backoff
			return unless(bo.Base == b && bo.Cap == 10*b, fmt.Sprintf("backoff %v to %v, not %v to %v", bo.Base, bo.Cap, b, 10*b))
		})
		return fmt.Sprintf("retry_back_off %s to %s", nameDur(b), nameDur(10*b)), nil
	}}
}

// envoyLimits are the cluster's retry limits: max_retries (where no
// retry_budget overrides it) and retry budgets, each other than the
// user's. A cluster in none of the files, or with thresholds but none of
// priority DEFAULT, keeps its own.
func envoyLimits(t *envoyTarget, user scenario.Fleet) []option {
	out := []option{asIs}
	if t.cluster == nil || (t.entry == nil && child(t.cb, "thresholds") != nil) {
		return out
	}
	if t.entry == nil || child(t.entry, "retry_budget") == nil {
		for _, m := range envoyRetryLimits {
			b := scenario.Budget{Use: scenario.BudgetConcurrency, Concurrency: budget.ConcurrencySettings{MinConcurrency: m}}
			if !b.Equal(user.Budget) {
				out = append(out, envoyLimit(t, b, fmt.Sprintf("max_retries %d", m), kv{Key: "max_retries", Value: strconv.Itoa(m)}))
			}
		}
	}
	for _, b := range envoyBudgets {
		if c := b.Concurrency; !b.Equal(user.Budget) {
			out = append(out, envoyLimit(t, b, fmt.Sprintf("retry_budget %s%%/min %d", num(c.Percent), c.MinConcurrency),
				kv{Key: "retry_budget", Map: []kv{{Key: "budget_percent", Map: []kv{{Key: "value", Value: num(c.Percent)}}}, {Key: "min_retry_concurrency", Value: strconv.Itoa(c.MinConcurrency)}}}))
		}
	}
	return out
}

func envoyLimit(t *envoyTarget, b scenario.Budget, name string, set kv) option {
	return option{func(w *writer) (string, error) {
		if w.retries == 0 {
			return "", errSkip
		}
		switch {
		case t.entry != nil:
			w.set(t.cf, t.entry, set)
			if set.Key == "retry_budget" && child(t.entry, "max_retries") != nil {
				w.note("the budget: your max_retries stays as it is; Envoy ignores it beside a retry_budget")
			}
		default:
			list := "[{" + t.cf.flow([]kv{{Key: "priority", Value: "DEFAULT", Quoted: true}, set}) + "}]"
			if t.cb != nil {
				w.set(t.cf, t.cb, kv{Key: "thresholds", Value: list})
			} else {
				w.set(t.cf, t.cluster, kv{Key: "circuit_breakers", Map: []kv{{Key: "thresholds", Value: list}}})
			}
		}
		w.note("scope: the circuit breaker is cluster %q's, for every route to it", w.loc.cluster)
		w.expect(func(g scenario.Fleet) string {
			return unless(g.Retry.MaxRetries == 0 || g.Budget.Equal(b), fmt.Sprintf("budget %s, not %s", describeBudget(g.Budget), describeBudget(b)))
		})
		return name, nil
	}}
}

// envoyRetryOnOption writes retry_on c (keeping the user's conditions the
// simulator does not model); retriable-status-codes comes with 503.
func envoyRetryOnOption(t *envoyTarget, c string) option {
	return option{func(w *writer) (string, error) {
		if w.retries == 0 {
			return "", errSkip
		}
		t.writePolicy(w, kv{Key: "retry_on", Value: keepUnmodelled(c, child(t.policy, "retry_on")), Quoted: true})
		name := "retry_on " + c
		if strings.Contains(c, "retriable-status-codes") {
			if old := child(t.policy, "retriable_status_codes"); old != nil {
				w.replace(t.f, old, "[503]")
			} else {
				t.writePolicy(w, kv{Key: "retriable_status_codes", Value: "[503]"})
			}
			name += " [503]"
		}
		w.expect(func(g scenario.Fleet) string { return unless(g.Retry.MaxRetries > 0, "no retries") })
		return name, nil
	}}
}
