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

// gRPC's space: a method config's retryPolicy (maxAttempts, or no retry
// policy; initialBackoff and maxBackoff; retryableStatusCodes with
// Conditions), or its hedgingPolicy (maxAttempts and hedgingDelay, or no
// hedging), and the service config's retryThrottling. Keys are written as
// the file spells them (spelling.go). A method config with neither policy
// keeps sending each call once: adding retries where there were none is
// not a change of settings but of the service's contract, left to its
// owner.

// gRPC's grid (docs/check.md says why).
var (
	grpcAttempts    = []int{2, 3, 4, 5}
	grpcBackoffs    = []time.Duration{100 * time.Millisecond, 500 * time.Millisecond}
	grpcThrottles   = []scenario.Budget{{Use: scenario.BudgetGRPC, GRPC: budget.GRPCThrottleSettings{MaxTokens: 10, TokenRatio: 0.1}}, {Use: scenario.BudgetGRPC, GRPC: budget.GRPCThrottleSettings{MaxTokens: 100, TokenRatio: 0.1}}}
	grpcHedges      = []int{2, 3}
	grpcCodeChoices = [][]string{{"UNAVAILABLE"}, {"UNAVAILABLE", "RESOURCE_EXHAUSTED"}, {"UNAVAILABLE", "INTERNAL"}}
)

func grpcSpace(w *writer) (space, error) {
	f, err := w.open(w.loc.file)
	if err != nil {
		return space{}, err
	}
	if len(f.docs) != 1 {
		return space{}, fmt.Errorf("%s: not one JSON document", f.name)
	}
	doc := f.docs[0]
	mc := lookup(doc, w.loc.path)
	if mc == nil {
		return space{}, fmt.Errorf("%s: %s is not there", f.name, w.loc.path)
	}
	user := w.from.Fleet
	var policy []option
	switch rp, hp := child(mc, "retryPolicy"), child(mc, "hedgingPolicy"); {
	case rp != nil:
		policy = grpcRetryOptions(f, mc, rp, user)
		backoff := []option{asIs}
		for _, b := range grpcBackoffs {
			if b != user.Retry.Backoff.Base {
				backoff = append(backoff, grpcBackoff(f, rp, b))
			}
		}
		codes := []option{asIs}
		if w.opts.Conditions {
			for _, c := range grpcCodeChoices {
				codes = append(codes, grpcCodesOption(f, rp, c))
			}
		}
		return space{dims: [][]option{policy, backoff, grpcThrottleOptions(f, doc, user), codes}}, nil
	case hp != nil:
		policy = grpcHedgeOptions(f, mc, hp, user)
		return space{dims: [][]option{policy, grpcThrottleOptions(f, doc, user)}}, nil
	}
	return space{}, nil
}

func grpcRetryOptions(f *yamlFile, mc, rp *yaml.Node, user scenario.Fleet) []option {
	out := []option{asIs, {func(w *writer) (string, error) {
		w.retries = 0
		w.remove(f, mc, "retryPolicy")
		w.expect(func(g scenario.Fleet) string { return unless(g.Retry.MaxRetries == 0, "still retries") })
		return "no retryPolicy (each call sent once)", nil
	}}}
	for _, n := range grpcAttempts {
		if n-1 == user.Retry.MaxRetries {
			continue
		}
		out = append(out, option{func(w *writer) (string, error) {
			w.retries = n - 1
			w.set(f, rp, kv{Key: "maxAttempts", Value: strconv.Itoa(n)})
			w.expect(func(g scenario.Fleet) string {
				return unless(g.Retry.MaxRetries == n-1, fmt.Sprintf("%d retries, not %d", g.Retry.MaxRetries, n-1))
			})
			return fmt.Sprintf("maxAttempts %d", n), nil
		}})
	}
	return out
}

func grpcBackoff(f *yamlFile, rp *yaml.Node, b time.Duration) option {
	return option{func(w *writer) (string, error) {
		if w.retries == 0 {
			return "", errSkip
		}
		w.set(f, rp, kv{Key: "initialBackoff", Value: protoDur(b), Quoted: true}, kv{Key: "maxBackoff", Value: protoDur(10 * b), Quoted: true})
		w.expect(func(g scenario.Fleet) string {
			bo := g.Retry.Backoff
			return unless(bo.Base == b && bo.Cap == 10*b, fmt.Sprintf("backoff %v to %v, not %v to %v", bo.Base, bo.Cap, b, 10*b))
		})
		return fmt.Sprintf("initialBackoff %s, maxBackoff %s", protoDur(b), protoDur(10*b)), nil
	}}
}

func grpcCodesOption(f *yamlFile, rp *yaml.Node, codes []string) option {
	return option{func(w *writer) (string, error) {
		old := child(rp, "retryableStatusCodes")
		if w.retries == 0 || old == nil {
			return "", errSkip
		}
		var have []string
		for _, c := range listOf(old) {
			have = append(have, strings.ToUpper(c.Value))
		}
		if slices.Equal(have, codes) {
			return "", errSkip
		}
		q := make([]string, len(codes))
		for i, c := range codes {
			q[i] = strconv.Quote(c)
		}
		w.replace(f, old, "["+strings.Join(q, ", ")+"]")
		w.expect(func(g scenario.Fleet) string { return unless(g.Retry.MaxRetries > 0, "no retries") })
		return "retryableStatusCodes [" + strings.Join(codes, ", ") + "]", nil
	}}
}

// grpcThrottleOptions are retryThrottling buckets other than the
// user's. The throttle is the whole service config's.
func grpcThrottleOptions(f *yamlFile, doc *yaml.Node, user scenario.Fleet) []option {
	out := []option{asIs}
	for _, b := range grpcThrottles {
		if b.Equal(user.Budget) {
			continue
		}
		out = append(out, option{func(w *writer) (string, error) {
			if w.retries == 0 {
				return "", errSkip
			}
			w.set(f, doc, kv{Key: "retryThrottling", Map: []kv{{Key: "maxTokens", Value: num(b.GRPC.MaxTokens)}, {Key: "tokenRatio", Value: num(b.GRPC.TokenRatio)}}})
			w.note("scope: retryThrottling is the whole service config's, for every method of %s", f.name)
			w.expect(func(g scenario.Fleet) string {
				return unless(g.Budget.Equal(b), fmt.Sprintf("budget %s, not %s", describeBudget(g.Budget), describeBudget(b)))
			})
			return fmt.Sprintf("retryThrottling maxTokens %s, tokenRatio %s", num(b.GRPC.MaxTokens), num(b.GRPC.TokenRatio)), nil
		}})
	}
	return out
}

// grpcHedgeOptions are hedging policies other than the user's: fewer
// attempts, a longer delay, or no hedging. A delay as long as the call's
// timeout sends no hedge, and is not a candidate.
func grpcHedgeOptions(f *yamlFile, mc, hp *yaml.Node, user scenario.Fleet) []option {
	out := []option{asIs, {func(w *writer) (string, error) {
		w.retries = 0
		w.remove(f, mc, "hedgingPolicy")
		w.expect(func(g scenario.Fleet) string { return unless(g.Hedge.Delay == 0, "still hedges") })
		return "no hedgingPolicy (each call sent once)", nil
	}}}
	delay := user.Hedge.Delay
	for _, m := range withOwn(grpcHedges, user.Hedge.Max+1) {
		for _, d := range []time.Duration{delay, 2 * delay} {
			if (m == user.Hedge.Max+1 && d == delay) || d == 0 || d >= user.Timeout {
				continue
			}
			out = append(out, option{func(w *writer) (string, error) {
				w.retries = m - 1
				w.set(f, hp, kv{Key: "maxAttempts", Value: strconv.Itoa(m)}, kv{Key: "hedgingDelay", Value: protoDur(d), Quoted: true})
				w.expect(func(g scenario.Fleet) string {
					return unless(g.Hedge.Max == m-1 && g.Hedge.Delay == d, fmt.Sprintf("hedge %d after %v, not %d after %v", g.Hedge.Max, g.Hedge.Delay, m-1, d))
				})
				var words []string
				if m != user.Hedge.Max+1 {
					words = append(words, fmt.Sprintf("maxAttempts %d", m))
				}
				if d != delay {
					words = append(words, "hedgingDelay "+protoDur(d))
				}
				return "hedgingPolicy " + strings.Join(words, ", "), nil
			}})
		}
	}
	return out
}
