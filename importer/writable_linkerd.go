package importer

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/retrystorm/retrystorm/resil/budget"
	"github.com/retrystorm/retrystorm/scenario"
)

// Linkerd's space. A ServiceProfile route: isRetryable, the profile's
// retryBudget (retryRatio, minRetriesPerSecond, ttl: one setting of
// three values, written whole, as Linkerd's CRD requires all three) and
// the route's timeout. Linkerd 2.16's HTTPRoute (or Service) annotations:
// retry.linkerd.io/limit.

// Linkerd's grid (docs/check.md says why).
var (
	linkerdRatios  = []float64{0.1, 0.2}
	linkerdFloors  = []float64{1, 10}
	linkerdTTLs    = []time.Duration{3 * time.Second, 10 * time.Second}
	linkerdTimeout = 10 * time.Second // the route timeout Linkerd gave before stable-2.9
	linkerdLimits  = []int{1, 2, 3}
)

func linkerdSpace(w *writer) (space, error) {
	if w.loc.object == "" {
		return linkerdRouteSpace(w)
	}
	_, name, _ := strings.Cut(w.loc.object, " ")
	f, sp, _ := findDoc(w.open, w.srcs, func(d *yaml.Node) bool {
		return str(d, "kind") == "ServiceProfile" && str(get(d, "metadata"), "name") == name
	})
	if sp == nil {
		return space{}, fmt.Errorf("%s: %s is not there", w.loc.file, w.loc.object)
	}
	r := lookup(sp, w.loc.path)
	if r == nil {
		return space{}, fmt.Errorf("%s: %s: %s is not there", f.name, w.loc.object, w.loc.path)
	}
	spec := get(sp, "spec")
	user := w.from.Fleet
	retryable := []option{asIs, {func(w *writer) (string, error) {
		v := user.Retry.MaxRetries == 0
		w.retries = map[bool]int{true: -1, false: 0}[v]
		w.set(f, r, kv{Key: "isRetryable", Value: strconv.FormatBool(v)})
		w.expect(func(g scenario.Fleet) string {
			return unless((g.Retry.MaxRetries != 0) == v, fmt.Sprintf("%d retries", g.Retry.MaxRetries))
		})
		return "isRetryable " + strconv.FormatBool(v), nil
	}}}
	// The budget the route has now, Linkerd's defaults where unset.
	have := budget.WindowSettings{Ratio: linkerdRatio, MinRetriesPerSecond: linkerdMinPerSec, TTL: linkerdTTL}
	if user.Budget.Use == scenario.BudgetWindow {
		have = user.Budget.Window
	}
	budget := []option{asIs}
	for _, ratio := range withOwn(linkerdRatios, have.Ratio) {
		for _, floor := range withOwn(linkerdFloors, have.MinRetriesPerSecond) {
			for _, ttl := range withOwn(linkerdTTLs, have.TTL) {
				if ratio != have.Ratio || floor != have.MinRetriesPerSecond || ttl != have.TTL {
					budget = append(budget, linkerdBudget(f, spec, name, have, ratio, floor, ttl))
				}
			}
		}
	}
	timeout := []option{asIs}
	if str(r, "timeout") == "" {
		timeout = append(timeout, option{func(w *writer) (string, error) {
			w.set(f, r, kv{Key: "timeout", Value: fmtDur(linkerdTimeout), Quoted: true})
			w.expect(func(g scenario.Fleet) string {
				return unless(g.Timeout == linkerdTimeout && g.Deadline == linkerdTimeout, fmt.Sprintf("timeout %v", g.Timeout))
			})
			return "timeout " + fmtDur(linkerdTimeout), nil
		}})
	}
	return space{dims: [][]option{retryable, budget, timeout}}, nil
}

// withOwn is grid with own added where it is not in it.
func withOwn[T comparable](grid []T, own T) []T {
	if slices.Contains(grid, own) {
		return grid
	}
	return append([]T{own}, grid...)
}

func linkerdBudget(f *yamlFile, spec *yaml.Node, profile string, have budget.WindowSettings, ratio, floor float64, ttl time.Duration) option {
	return option{func(w *writer) (string, error) {
		if w.retries == 0 {
			return "", errSkip
		}
		w.set(f, spec, kv{Key: "retryBudget", Map: []kv{{Key: "retryRatio", Value: num(ratio)},
			{Key: "minRetriesPerSecond", Value: num(floor)}, {Key: "ttl", Value: fmtDur(ttl), Quoted: true}}})
		w.note("scope: the retry budget is the ServiceProfile's, shared by every route of %s", profile)
		w.expect(func(g scenario.Fleet) string {
			b := g.Budget.Window
			return unless(b.Ratio == ratio && b.MinRetriesPerSecond == floor && b.TTL == ttl, fmt.Sprintf("budget %s", describeBudget(g.Budget)))
		})
		var words []string
		if ratio != have.Ratio {
			words = append(words, "retryRatio "+num(ratio))
		}
		if floor != have.MinRetriesPerSecond {
			words = append(words, "minRetriesPerSecond "+num(floor))
		}
		if ttl != have.TTL {
			words = append(words, "ttl "+fmtDur(ttl))
		}
		return strings.Join(words, ", "), nil
	}}
}

// linkerdRouteSpace is the space of an HTTPRoute's or a Service's retry
// annotations: the limit, where the object retries at all.
func linkerdRouteSpace(w *writer) (space, error) {
	kind, name, _ := strings.Cut(w.loc.path, " ")
	f, d, _ := findDoc(w.open, w.srcs, func(d *yaml.Node) bool {
		return str(d, "kind") == kind && str(get(d, "metadata"), "name") == name && linkerdAnnotated(d)
	})
	if d == nil {
		return space{}, fmt.Errorf("%s: %s is not there", w.loc.file, w.loc.path)
	}
	ann := get(get(d, "metadata"), "annotations")
	limits := []option{asIs}
	if w.from.Fleet.Retry.MaxRetries > 0 {
		for _, n := range linkerdLimits {
			if n != w.from.Fleet.Retry.MaxRetries {
				limits = append(limits, option{func(w *writer) (string, error) {
					w.set(f, ann, kv{Key: "retry.linkerd.io/limit", Value: strconv.Itoa(n), Quoted: true})
					w.expect(func(g scenario.Fleet) string {
						return unless(g.Retry.MaxRetries == n, fmt.Sprintf("%d retries, not %d", g.Retry.MaxRetries, n))
					})
					return fmt.Sprintf("retry.linkerd.io/limit %d", n), nil
				}})
			}
		}
	}
	return space{dims: [][]option{limits}}, nil
}
