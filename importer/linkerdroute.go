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
	r := linkerdAnnotations{file: file, obj: Object{kind, name}, ann: map[string]awsValue{}}
	a := get(get(d, "metadata"), "annotations")
	for i := 0; i+1 < len(a.Content); i += 2 {
		r.ann[a.Content[i].Value] = awsValue{a.Content[i+1].Value, a.Content[i+1].Line}
	}
	p := &prov{file: file}
	r.p = p.of(kind, name)
	f := scenario.Fleet{Name: name, Retry: scenario.Retry{Backoff: noBackoff}}
	f.Product = string(giveup.Linkerd)
	p.note("linkerd", "HTTPRoute retries", "retry.linkerd.io annotations: Linkerd 2.16's retries, which have no retry budget")
	perTry, err := r.timeouts(&f, d)
	if err == nil {
		err = r.retries(&f, perTry)
	}
	if err != nil {
		return Fleet{}, false, err
	}
	return Fleet{Fleet: f, Format: Linkerd, File: file, Origin: fmt.Sprintf("%s: %s", file, r.obj), From: p.list, Lost: p.lost, at: place{file: file, object: r.obj}}, true, nil
}

// linkerdAnnotations are an object's annotations, with the provenance
// (p, the object's view) of the fleet made of them.
type linkerdAnnotations struct {
	file string
	obj  Object
	ann  map[string]awsValue
	p    *prov
}

// set notes that setting took value from annotation k.
func (r *linkerdAnnotations) set(setting, value, k string) *Provenance {
	return r.p.set(setting, value, "metadata.annotations["+k+"]").atLine(r.ann[k].line, lineAfter)
}

// bad is the error of annotation k, which wants what want says.
func (r *linkerdAnnotations) bad(k, want string) error {
	return fmt.Errorf("%s:%d: %s: %q: %s", r.file, r.ann[k].line, k, r.ann[k].v, want)
}

// duration reads annotation k as a duration (0 when it is not there).
func (r *linkerdAnnotations) duration(k string) (time.Duration, error) {
	v, ok := r.ann[k]
	if !ok {
		return 0, nil
	}
	d, err := time.ParseDuration(v.v)
	if err != nil || d < 0 {
		return 0, r.bad(k, "want a duration")
	}
	return d, nil
}

// timeouts maps the request timeout, which bounds the request, retries
// included, and the per-try timeout, which it returns.
func (r *linkerdAnnotations) timeouts(f *scenario.Fleet, d *yaml.Node) (time.Duration, error) {
	if dl, err := r.duration("timeout.linkerd.io/request"); err != nil {
		return 0, err
	} else if dl > 0 {
		f.Deadline = min(dl, 720*time.Hour)
		r.set("deadline", fmtDur(dl), "timeout.linkerd.io/request")
	}
	// A Gateway API rule's timeout, when no annotation sets one (GEP-1742;
	// http.rs, convert_gateway_rule): read for the first rule.
	if rules := get(get(d, "spec"), "rules"); f.Deadline == 0 && rules != nil && rules.Kind == yaml.SequenceNode && len(rules.Content) > 0 {
		if rt := str(get(rules.Content[0], "timeouts"), "request"); rt != "" {
			dl, err := time.ParseDuration(rt)
			if err != nil || dl < 0 {
				return 0, fmt.Errorf("%s: %s: spec.rules[0].timeouts.request: %q: want a duration", r.file, r.obj, rt)
			}
			if dl > 0 { // zero means no timeout (GEP-1742)
				f.Deadline = min(dl, 720*time.Hour)
				r.p.set("deadline", fmtDur(dl), "spec.rules[0].timeouts.request")
			}
			if len(rules.Content) > 1 {
				r.p.lose("the timeouts of rules after the first: one fleet per route")
			}
		}
	}
	if f.Deadline == 0 {
		r.p.base().dflt("deadline", "none", "timeout.linkerd.io/request", "Linkerd sets no request timeout by default")
	}
	f.Timeout = maxTimeout
	if f.Deadline > 0 {
		f.Timeout = min(f.Deadline, maxTimeout)
	}
	perTry, err := r.duration("retry.linkerd.io/timeout")
	if err != nil {
		return 0, err
	}
	if perTry > 0 {
		f.Timeout = min(perTry, f.Timeout)
		r.set("timeout", fmtDur(perTry), "retry.linkerd.io/timeout").by(afterColon, "a response that has not begun by then is retried")
		r.p.lose("the last attempt has no per-try timeout in Linkerd (retry.rs removes it once retries are exhausted), only the request timeout; the simulator gives it the per-try timeout")
	} else if f.Deadline == 0 {
		r.p.lose("no timeout at all: attempts are given %s, the longest the simulator takes", fmtDur(maxTimeout))
	}
	return perTry, nil
}

// retries maps the retry limit and the statuses retried; a per-try
// timeout (perTry above 0) is always retried.
func (r *linkerdAnnotations) retries(f *scenario.Fleet, perTry time.Duration) error {
	p := r.p.base()
	// A limit of 0 and a timeout of 0 count as unset (parse_http_retry).
	limit := 0
	if v, ok := r.ann["retry.linkerd.io/limit"]; ok {
		n, err := strconv.ParseUint(v.v, 10, 16)
		if err != nil {
			return r.bad("retry.linkerd.io/limit", "want a whole number from 0 to 65535")
		}
		limit = int(n)
	}
	_, hasHTTP := r.ann["retry.linkerd.io/http"]
	if limit == 0 && !hasHTTP && perTry == 0 {
		p.note("retry.max_retries", "0", "no retry.linkerd.io annotation that sets anything: Linkerd does not retry")
		f.Budget = scenario.Budget{Use: scenario.BudgetNone}
		return nil
	}
	if limit > 0 {
		r.set("retry.max_retries", strconv.Itoa(limit), "retry.linkerd.io/limit")
	} else {
		limit = linkerdRouteLimit
		p.dflt("retry.max_retries", "1", "retry.linkerd.io/limit", "parse_http_retry: limit 1 when another retry annotation is set")
	}
	on, err := r.statuses()
	if err != nil {
		return err
	}
	if perTry > 0 {
		on = append(on, scenario.RetryOnTimeout)
	}
	// The note says the list the fleet retries on, timeouts included: one
	// value, read from one place.
	if hasHTTP {
		v := r.set("retry.on", onText(on), "retry.linkerd.io/http")
		if perTry > 0 {
			v.by(afterComma, "and timeouts, as retry.linkerd.io/timeout is set")
		}
	} else {
		why := "no status is retried without it"
		if perTry > 0 {
			why += "; timeouts are, as retry.linkerd.io/timeout is set"
		}
		p.dflt("retry.on", onText(on), "retry.linkerd.io/http", why)
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
	return nil
}

// statuses maps retry.linkerd.io/http, the answers retried: status
// ranges, none when unset (the policy controller then sends an empty
// list, and the proxy retries no status). A refused connection is not
// inspected (retry.rs).
func (r *linkerdAnnotations) statuses() ([]string, error) {
	v, ok := r.ann["retry.linkerd.io/http"]
	if !ok {
		return nil, nil
	}
	kinds := map[string]bool{}
	for _, c := range strings.Split(v.v, ",") {
		lo, hi, ok := linkerdStatusRange(c)
		if !ok {
			return nil, r.bad("retry.linkerd.io/http", "want 5xx, gateway-error, a status or a range of statuses, comma-separated")
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
	var on []string
	for _, k := range []string{scenario.RetryOnError, scenario.RetryOnRejection, scenario.RetryOnGateway} {
		if kinds[k] {
			on = append(on, k)
		}
	}
	return on, nil
}

// onText is a retry.on list as a note writes it: "[error, gateway]", or
// "no answer" for none.
func onText(on []string) string {
	if len(on) == 0 {
		return "no answer"
	}
	return "[" + strings.Join(on, ", ") + "]"
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
