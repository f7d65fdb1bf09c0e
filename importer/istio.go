package importer

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	networking "istio.io/api/networking/v1alpha3"

	"github.com/retrystorm/retrystorm/scenario"
)

// Istio's documented defaults (istio.io/api networking v1alpha3, the same
// messages as v1 and v1beta1; docs/import.md cites each).
const (
	istioAttempts      = 2                                                      // no retries: "retry twice" (Traffic Management, Retries)
	istioRetryOn       = "connect-failure,refused-stream,unavailable,cancelled" // HTTPRetry.retry_on: "If not specified, this defaults to ..."
	istioBackoff       = 25 * time.Millisecond                                  // HTTPRetry.backoff: "default minimum duration of 25ms"
	istioBudgetPercent = 20.0                                                   // TrafficPolicy.RetryBudget.percent: "Defaults to 20%"
	istioMinConc       = 3                                                      // TrafficPolicy.RetryBudget.min_retry_concurrency: "Defaults to 3"
)

type istioObject struct {
	kind, name, file string
	vs               *networking.VirtualService
	dr               *networking.DestinationRule
}

func importIstio(srcs []Source) ([]Fleet, error) {
	var objs []istioObject
	for _, s := range srcs {
		docs, err := documents(s.Name, s.Data)
		if err != nil {
			return nil, err
		}
		for _, d := range docs {
			kind := str(d, "kind")
			if !strings.Contains(str(d, "apiVersion"), "istio.io") {
				continue
			}
			o := istioObject{kind: kind, name: str(get(d, "metadata"), "name"), file: s.Name}
			spec := get(d, "spec")
			if spec == nil {
				return nil, fmt.Errorf("%s:%d: %s %q has no spec", s.Name, d.Line, kind, o.name)
			}
			switch kind {
			case "VirtualService":
				o.vs = &networking.VirtualService{}
				if _, err = readProto(s.Name, spec, o.vs, true); err == nil {
					err = checkIstioRoutes(s.Name, spec, o.vs)
				}
			case "DestinationRule":
				o.dr = &networking.DestinationRule{}
				_, err = readProto(s.Name, spec, o.dr, true)
			default:
				continue // Gateways, ServiceEntries: no retry settings
			}
			if err != nil {
				return nil, err
			}
			objs = append(objs, o)
		}
	}
	n := 0
	for _, o := range objs {
		n += len(o.vs.GetHttp())
	}
	if err := admit(Istio, n, "HTTP routes"); err != nil {
		return nil, err
	}
	var out fleetSet
	for _, o := range objs {
		if o.vs == nil {
			continue
		}
		for i, h := range o.vs.GetHttp() {
			out.add(istioFleet(o, i, h, objs))
		}
	}
	return out.list, nil
}

func istioFleet(o istioObject, i int, h *networking.HTTPRoute, objs []istioObject) Fleet {
	path := fmt.Sprintf("VirtualService %s: spec.http[%d]", o.name, i)
	p := &prov{file: o.file}
	name := h.GetName()
	if name == "" {
		name = fmt.Sprintf("%s http[%d]", o.name, i)
	}
	f := scenario.Fleet{Name: name}
	host := ""
	if rs := h.GetRoute(); len(rs) > 0 {
		host = rs[0].GetDestination().GetHost()
		if len(rs) > 1 {
			p.lose("%d weighted destinations: only the first (%s) is imported", len(rs), host)
		}
	}
	origin := fmt.Sprintf("%s: %s", o.file, path)
	if host != "" {
		origin += fmt.Sprintf(" (host %s)", host)
	}

	deadline := time.Duration(0)
	if h.GetTimeout() != nil {
		deadline = h.GetTimeout().AsDuration()
		p.set("deadline", fmtDur(deadline), path+".timeout")
	} else {
		p.dflt("deadline", "none", path+".timeout", "HTTPRoute.timeout: default is disabled")
	}
	if deadline > 0 {
		f.Deadline = p.wait("timeout", deadline, 0)
	}

	r := h.GetRetries()
	attempts, retryOnS, perTry, backoff := istioAttempts, istioRetryOn, time.Duration(0), istioBackoff
	if r == nil {
		p.dflt("retry.max_retries", "2", path+".retries", "Istio retries twice by default (Traffic Management: Retries)")
	} else {
		attempts = p.count("attempts", int64(r.GetAttempts()))
		p.set("retry.max_retries", strconv.Itoa(attempts), path+".retries.attempts")
		if r.GetPerTryTimeout() != nil {
			perTry = r.GetPerTryTimeout().AsDuration()
		}
		if r.GetBackoff() != nil {
			backoff = max(r.GetBackoff().AsDuration(), time.Millisecond)
			p.set("retry.backoff.base", fmtDur(backoff), path+".retries.backoff")
		}
		if r.GetRetryOn() != "" {
			retryOnS = r.GetRetryOn()
		}
		if r.GetRetryRemoteLocalities() != nil {
			p.lose("retryRemoteLocalities: the simulator has one locality")
		}
	}
	if r == nil || r.GetBackoff() == nil {
		p.dflt("retry.backoff.base", fmtDur(backoff), path+".retries.backoff", "HTTPRetry.backoff: 25ms")
	}
	p.lose("retries skip the hosts already tried (retryIgnorePreviousHosts, true by default): the simulator's replicas are interchangeable")
	if perTry > 0 {
		p.set("timeout", fmtDur(perTry), path+".retries.perTryTimeout")
	} else {
		perTry = deadline
		if perTry > 0 {
			p.note("timeout", fmtDur(perTry), "perTryTimeout unset: the route timeout (HTTPRetry.per_try_timeout)")
		}
	}
	if perTry <= 0 {
		perTry = maxTimeout
		p.lose("no timeout at all (Istio's default): attempts are given %s, the longest the simulator takes", fmtDur(maxTimeout))
	}
	f.Timeout = p.wait("timeout per attempt", perTry, 0)

	on, unread, err := retryOn(retryOnS, nil)
	if err != nil {
		p.lose("retryOn %q: %v; imported as no retries", retryOnS, err)
		attempts = 0
	}
	if r == nil || r.GetRetryOn() == "" {
		p.dflt("retry.on", "["+strings.Join(on, ", ")+"]", path+".retries.retryOn", "HTTPRetry.retry_on: "+istioRetryOn)
	} else {
		p.set("retry.on", "["+strings.Join(on, ", ")+"]", path+".retries.retryOn")
	}
	for _, u := range unread {
		p.lose("retryOn %s: the simulator makes no such failure", u)
	}
	if len(on) == 0 {
		attempts = 0
	} else if len(on) < 3 {
		f.Retry.On = on
	}
	f.Retry.MaxRetries = attempts
	f.Retry.Backoff = scenario.Backoff{Use: "exponential", Base: p.wait("backoff", backoff, 0), Cap: p.wait("the backoff's cap, 10 times backoff,", 10*min(backoff, maxTimeout), 0), Multiplier: 2, Jitter: "full"}
	p.dflt("retry.backoff.cap", fmtDur(10*min(backoff, maxTimeout)), "Envoy's max_interval", "Envoy: 10 times the base")

	dr := findRule(objs, host)
	istioTraffic(p, &f, dr, attempts > 0)
	return Fleet{Fleet: f, Format: Istio, Origin: origin, From: p.from, Lost: p.lost}
}

// findRule returns the DestinationRule for host: the same name, or the
// same short name (reviews and reviews.default.svc.cluster.local).
func findRule(objs []istioObject, host string) *istioObject {
	short := func(h string) string { return strings.SplitN(h, ".", 2)[0] }
	for i := range objs {
		if objs[i].dr != nil && objs[i].dr.GetHost() == host {
			return &objs[i]
		}
	}
	for i := range objs {
		if objs[i].dr != nil && host != "" && short(objs[i].dr.GetHost()) == short(host) {
			return &objs[i]
		}
	}
	return nil
}

// istioTraffic maps a DestinationRule's traffic policy: its retry budget,
// or connectionPool.http.maxRetries, is the fleet's budget.
func istioTraffic(p *prov, f *scenario.Fleet, dr *istioObject, retries bool) {
	if !retries {
		f.Budget = scenario.Budget{Use: scenario.BudgetNone}
		p.note("budget", "none", "the route sends no retries")
		return
	}
	var tp *networking.TrafficPolicy
	path := ""
	if dr != nil {
		tp = dr.dr.GetTrafficPolicy()
		path = fmt.Sprintf("%s: DestinationRule %s: spec.trafficPolicy", dr.file, dr.name)
		if len(dr.dr.GetSubsets()) > 0 {
			p.lose("DestinationRule subsets' own traffic policies are not imported")
		}
	}
	if od := tp.GetOutlierDetection(); od != nil {
		p.lose("outlierDetection: it ejects hosts (at most maxEjectionPercent, 10%% by default), not the dependency: not a breaker in front of the whole service, and not imported as one")
	}
	if http := tp.GetConnectionPool().GetHttp(); http.GetHttp2MaxRequests() > 0 || http.GetHttp1MaxPendingRequests() > 0 {
		p.lose("connectionPool.http limits on requests in flight: the simulator's clients have none")
	}
	if rb := tp.GetRetryBudget(); rb != nil {
		pct, mc := istioBudgetPercent, istioMinConc
		if rb.GetPercent() != nil {
			pct = rb.GetPercent().GetValue()
			p.note("budget.budget_percent", strconv.FormatFloat(pct, 'g', -1, 64), path+".retryBudget.percent")
		} else {
			p.dflt("budget.budget_percent", "20", "retryBudget.percent", "TrafficPolicy.RetryBudget.percent: defaults to 20%")
		}
		if rb.GetMinRetryConcurrency() != 0 {
			mc = int(rb.GetMinRetryConcurrency())
			p.note("budget.min_retry_concurrency", strconv.Itoa(mc), path+".retryBudget.minRetryConcurrency")
		} else {
			p.dflt("budget.min_retry_concurrency", "3", "retryBudget.minRetryConcurrency", "TrafficPolicy.RetryBudget.min_retry_concurrency: defaults to 3")
		}
		if rb.GetBudgetInterval() != nil && rb.GetBudgetInterval().AsDuration() > 0 {
			p.lose("retryBudget.budgetInterval: requests that ended within it still count; the simulator counts only those in flight")
		}
		f.Budget = scenario.Budget{Use: scenario.BudgetConcurrency, Percent: pct, MinConcurrency: mc}
		return
	}
	if mr := tp.GetConnectionPool().GetHttp().GetMaxRetries(); mr > 0 {
		p.note("budget.min_retry_concurrency", strconv.Itoa(int(mr)), path+".connectionPool.http.maxRetries (at most this many retries active at once)")
		f.Budget = scenario.Budget{Use: scenario.BudgetConcurrency, MinConcurrency: int(min(mr, 1_000_000))}
		return
	}
	f.Budget = scenario.Budget{Use: scenario.BudgetNone}
	p.dflt("budget", "none", "connectionPool.http.maxRetries and retryBudget", "ConnectionPoolSettings.HTTPSettings.max_retries: defaults to 2^32-1, no limit")
}
