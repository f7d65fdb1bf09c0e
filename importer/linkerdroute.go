package importer

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/retrystorm/retrystorm/giveup"
	"github.com/retrystorm/retrystorm/scenario"
)

// Linkerd's newer retries (stable-2.16 on) are annotations on an HTTPRoute
// or on a Service, read by the policy controller (linkerd/linkerd2,
// policy-controller/k8s/index/src/outbound/index/http.rs, parse_http_retry
// and index.rs, parse_timeouts) and run by the proxy
// (linkerd2-proxy, linkerd/app/outbound/src/http/logical/policy/route/
// retry.rs). Unlike a ServiceProfile's, these retries have no budget: the
// limit alone bounds them.
const (
	linkerdRouteLimit       = 1                      // retry.linkerd.io/limit unset, with another retry annotation
	linkerdRouteBackoffBase = 25 * time.Millisecond  // convert_retry: min_backoff 25ms
	linkerdRouteBackoffCap  = 250 * time.Millisecond // max_backoff 250ms, jitter_ratio 1
)

// linkerdAnnotated reports whether a Kubernetes object carries Linkerd's
// retry or timeout annotations.
func linkerdAnnotated(d *yaml.Node) bool {
	a := get(get(d, "metadata"), "annotations")
	if a == nil || a.Kind != yaml.MappingNode {
		return false
	}
	for i := 0; i < len(a.Content); i += 2 {
		k := a.Content[i].Value
		if strings.HasPrefix(k, "retry.linkerd.io/") || strings.HasPrefix(k, "timeout.linkerd.io/") {
			return true
		}
	}
	return false
}

// linkerdRoute imports an HTTPRoute's or a Service's Linkerd annotations,
// or returns false when d is neither or has none.
func linkerdRoute(file string, d *yaml.Node) (Fleet, bool, error) {
	kind, api := str(d, "kind"), str(d, "apiVersion")
	isRoute := kind == "HTTPRoute" && (strings.Contains(api, "gateway.networking.k8s.io") || strings.Contains(api, "policy.linkerd.io"))
	isService := kind == "Service" && api == "v1"
	if !(isRoute || isService) || !linkerdAnnotated(d) {
		return Fleet{}, false, nil
	}
	name := str(get(d, "metadata"), "name")
	path := fmt.Sprintf("%s %s: metadata.annotations", kind, name)
	ann := map[string]awsValue{}
	a := get(get(d, "metadata"), "annotations")
	for i := 0; i+1 < len(a.Content); i += 2 {
		ann[a.Content[i].Value] = awsValue{a.Content[i+1].Value, a.Content[i+1].Line}
	}
	at := func(k string) string { return fmt.Sprintf("%s[%s] (line %d)", path, k, ann[k].line) }
	bad := func(k, want string) error {
		return fmt.Errorf("%s:%d: %s: %q: %s", file, ann[k].line, k, ann[k].v, want)
	}
	p := &prov{file: file}
	f := scenario.Fleet{Name: name, Retry: scenario.Retry{Backoff: noBackoff}}
	f.Product = string(giveup.Linkerd)
	p.note("linkerd", "HTTPRoute retries", "retry.linkerd.io annotations: Linkerd 2.16's retries, which have no retry budget")

	// The request timeout bounds the request, retries included.
	if v, ok := ann["timeout.linkerd.io/request"]; ok {
		d, err := time.ParseDuration(v.v)
		if err != nil || d < 0 {
			return Fleet{}, false, bad("timeout.linkerd.io/request", "want a duration")
		}
		if d > 0 {
			f.Deadline = min(d, 720*time.Hour)
			p.set("deadline", fmtDur(d), at("timeout.linkerd.io/request"))
		}
	}
	// A Gateway API rule's timeout, when no annotation sets one (GEP-1742;
	// http.rs, convert_gateway_rule): read for the first rule.
	if rules := get(get(d, "spec"), "rules"); f.Deadline == 0 && rules != nil && rules.Kind == yaml.SequenceNode && len(rules.Content) > 0 {
		if rt := str(get(rules.Content[0], "timeouts"), "request"); rt != "" {
			d, err := time.ParseDuration(rt)
			if err != nil || d < 0 {
				return Fleet{}, false, fmt.Errorf("%s: %s %s: spec.rules[0].timeouts.request: %q: want a duration", file, kind, name, rt)
			}
			if d > 0 { // zero means no timeout (GEP-1742)
				f.Deadline = min(d, 720*time.Hour)
				p.set("deadline", fmtDur(d), fmt.Sprintf("%s %s: spec.rules[0].timeouts.request", kind, name))
			}
			if len(rules.Content) > 1 {
				p.lose("the timeouts of rules after the first: one fleet per route")
			}
		}
	}
	if f.Deadline == 0 {
		p.dflt("deadline", "none", "timeout.linkerd.io/request", "Linkerd sets no request timeout by default")
	}
	f.Timeout = maxTimeout
	if f.Deadline > 0 {
		f.Timeout = min(f.Deadline, maxTimeout)
	}
	var perTry time.Duration
	if v, ok := ann["retry.linkerd.io/timeout"]; ok {
		d, err := time.ParseDuration(v.v)
		if err != nil || d < 0 {
			return Fleet{}, false, bad("retry.linkerd.io/timeout", "want a duration")
		}
		perTry = d
	}
	if perTry > 0 {
		f.Timeout = min(perTry, f.Timeout)
		p.set("timeout", fmtDur(perTry), at("retry.linkerd.io/timeout")+": a response that has not begun by then is retried")
		p.lose("the last attempt has no per-try timeout in Linkerd (retry.rs removes it once retries are exhausted), only the request timeout; the simulator gives it the per-try timeout")
	} else if f.Deadline == 0 {
		p.lose("no timeout at all: attempts are given %s, the longest the simulator takes", fmtDur(maxTimeout))
	}

	// A limit of 0 and a timeout of 0 count as unset (parse_http_retry).
	limit := 0
	if v, ok := ann["retry.linkerd.io/limit"]; ok {
		n, err := strconv.ParseUint(v.v, 10, 16)
		if err != nil {
			return Fleet{}, false, bad("retry.linkerd.io/limit", "want a whole number from 0 to 65535")
		}
		limit = int(n)
	}
	_, hasHTTP := ann["retry.linkerd.io/http"]
	if limit == 0 && !hasHTTP && perTry == 0 {
		p.note("retry.max_retries", "0", "no retry.linkerd.io annotation that sets anything: Linkerd does not retry")
		f.Budget = scenario.Budget{Use: scenario.BudgetNone}
		return Fleet{Fleet: f, Format: Linkerd, Origin: fmt.Sprintf("%s: %s %s", file, kind, name), From: p.from, Lost: p.lost}, true, nil
	}
	if limit > 0 {
		p.set("retry.max_retries", strconv.Itoa(limit), at("retry.linkerd.io/limit"))
	} else {
		limit = linkerdRouteLimit
		p.dflt("retry.max_retries", "1", "retry.linkerd.io/limit", "parse_http_retry: limit 1 when another retry annotation is set")
	}

	// Which answers are retried: status ranges, none when unset (the
	// policy controller then sends an empty list, and the proxy retries no
	// status). A per-try timeout is always retried, as a response-headers
	// timeout; a refused connection is not inspected (retry.rs).
	var on []string
	if v, ok := ann["retry.linkerd.io/http"]; ok {
		kinds := map[string]bool{}
		for _, c := range strings.Split(v.v, ",") {
			lo, hi, ok := linkerdStatusRange(c)
			if !ok {
				return Fleet{}, false, bad("retry.linkerd.io/http", "want 5xx, gateway-error, a status or a range of statuses, comma-separated")
			}
			if lo <= 500 && 500 <= hi {
				kinds[scenario.RetryOnError] = true
			}
			if (lo <= 503 && 503 <= hi) || (lo <= 429 && 429 <= hi) {
				kinds[scenario.RetryOnRejection] = true
			}
			if (lo <= 502 && 502 <= hi) || (lo <= 504 && 504 <= hi) {
				kinds[scenario.RetryOnGateway] = true // a tier's give-up (package giveup)
			}
		}
		for _, k := range []string{scenario.RetryOnError, scenario.RetryOnRejection, scenario.RetryOnGateway} {
			if kinds[k] {
				on = append(on, k)
			}
		}
		p.set("retry.on", "["+strings.Join(on, ", ")+"]", at("retry.linkerd.io/http"))
	} else {
		p.dflt("retry.on", "no answer", "retry.linkerd.io/http", "no status is retried without it")
	}
	if perTry > 0 {
		on = append(on, scenario.RetryOnTimeout)
	}
	p.lose("a refused connection: Linkerd's HTTPRoute retries do not inspect connection errors (retry.rs)")
	f.Retry.On, f.Retry.MaxRetries = on, limit
	if len(on) == 0 {
		f.Retry.On, f.Retry.MaxRetries = nil, 0
		p.note("retry.max_retries", "0", "no failure the simulator makes is retried")
	} else {
		f.Retry.Backoff = scenario.Backoff{Use: "exponential", Base: linkerdRouteBackoffBase, Cap: linkerdRouteBackoffCap, Multiplier: 2, Jitter: "full"}
		p.note("retry.backoff", "exponential from 25ms, full jitter, cap 250ms", "the policy controller's backoff (convert_retry)")
	}
	f.Budget = scenario.Budget{Use: scenario.BudgetNone}
	p.note("budget", "none", "HTTPRoute retries have no retry budget: only the limit bounds them")
	return Fleet{Fleet: f, Format: Linkerd, Origin: fmt.Sprintf("%s: %s %s", file, kind, name), From: p.from, Lost: p.lost}, true, nil
}

// linkerdStatusRange reads one retry.linkerd.io/http condition as the
// policy controller does: 5xx, gateway-error (502 to 504), a status, or a
// range lo-hi, each status in [100, 600).
func linkerdStatusRange(c string) (lo, hi int, ok bool) {
	code := func(s string) (int, bool) {
		n, err := strconv.Atoi(s)
		return n, err == nil && n >= 100 && n < 600
	}
	switch {
	case strings.EqualFold(c, "5xx"):
		return 500, 599, true
	case strings.EqualFold(c, "gateway-error"):
		return 502, 504, true
	}
	if n, ok := code(c); ok {
		return n, n, true
	}
	if a, b, found := strings.Cut(c, "-"); found {
		lo, ok1 := code(a)
		hi, ok2 := code(b)
		if ok1 && ok2 && lo <= hi {
			return lo, hi, true
		}
	}
	return 0, 0, false
}
