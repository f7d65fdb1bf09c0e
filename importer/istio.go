package importer

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/retrystorm/retrystorm/giveup"
	"github.com/retrystorm/retrystorm/resil/budget"
	"github.com/retrystorm/retrystorm/scenario"
)

// Istio's documented defaults (istio.io/api networking v1alpha3, the same
// messages as v1 and v1beta1; docs/import.md cites each).
const (
	istioAttempts = 2 // no retries: "retry twice" (Traffic Management, Retries)
	// istioRetryOn is the retry_on Istio gives a route with no retries, or
	// with retries but no retryOn (pilot/pkg/networking/core/route/retry/
	// retry.go, defaultRetryOn, read at Istio 1.31.0-alpha.0).
	// retriable-status-codes comes with no code since 1.24; before, with
	// 503 (istio/istio pull 52111, releasenotes/notes/50506.yaml: "exclude
	// retries on 503"; a mesh on the 1.23 compatibility profile kept it:
	// import it with --istio 1.23).
	istioRetryOn       = "connect-failure,refused-stream,unavailable,cancelled,retriable-status-codes"
	istioBackoff       = 25 * time.Millisecond // HTTPRetry.backoff: "default minimum duration of 25ms"
	istioBudgetPercent = 20.0                  // TrafficPolicy.RetryBudget.percent: "Defaults to 20%"
	istioMinConc       = 3                     // TrafficPolicy.RetryBudget.min_retry_concurrency: "Defaults to 3"
	istioCurrent       = "1.24"                // the first release whose defaults are imported by default
)

// istioRelease reads an Istio release, "1.23" or "1.23.2".
func istioRelease(v string) (major, minor int, err error) {
	parts := strings.Split(strings.TrimPrefix(strings.TrimSpace(v), "v"), ".")
	if len(parts) >= 2 {
		major, err1 := strconv.Atoi(parts[0])
		minor, err2 := strconv.Atoi(parts[1])
		if err1 == nil && err2 == nil && major >= 1 && minor >= 0 {
			return major, minor, nil
		}
	}
	return 0, 0, fmt.Errorf("importer: Istio version %q: want a release such as 1.23", v)
}

// istioDefaultCodes is the retriable status codes of Istio's default
// retry policy in the release o names, and the note saying which release
// was assumed.
func istioDefaultCodes(o Options) ([]uint32, string) {
	if o.IstioVersion == "" {
		return nil, "assumed Istio " + istioCurrent + " or later, whose default retries no 503 (--istio 1.23 for an older release)"
	}
	major, minor, _ := istioRelease(o.IstioVersion)
	if major == 1 && minor < 24 {
		return []uint32{503}, "Istio " + o.IstioVersion + " (given): before 1.24 the default also retries 503 answers"
	}
	return nil, "Istio " + o.IstioVersion + " (given): since 1.24 the default retries no 503"
}

type istioObject struct {
	kind, name, file string
	vs               *networking.VirtualService
	dr               *networking.DestinationRule
	grpcPort         string // a Service's port that speaks gRPC, by name or appProtocol
}

func importIstio(srcs []Source, opts Options) ([]Fleet, error) {
	var objs []istioObject
	for _, s := range srcs {
		docs, err := documents(s.Name, s.Data)
		if err != nil {
			return nil, err
		}
		for _, d := range docs {
			kind := str(d, "kind")
			if kind == "Service" && str(d, "apiVersion") == "v1" {
				// A Kubernetes Service names its ports' protocols: Istio
				// reads grpc and grpc-* (or appProtocol grpc) as gRPC.
				if port := grpcPort(get(get(d, "spec"), "ports")); port != "" {
					objs = append(objs, istioObject{kind: kind, name: str(get(d, "metadata"), "name"), file: s.Name, grpcPort: port})
				}
				continue
			}
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
	routed := map[*istioObject]bool{}
	for _, o := range objs {
		if o.vs == nil {
			continue
		}
		for i, h := range o.vs.GetHttp() {
			f, dr := istioFleet(o, i, h, objs, opts)
			routed[dr] = true
			out.add(f)
		}
	}
	// A DestinationRule without a VirtualService: Istio still gives the
	// host's traffic its default retries.
	for i := range objs {
		if o := &objs[i]; o.dr != nil && !routed[o] {
			out.add(istioRuleFleet(o, objs, opts))
		}
	}
	return out.list, nil
}

// grpcPort returns the name of the first port in ports that speaks gRPC.
func grpcPort(ports *yaml.Node) string {
	if ports == nil || ports.Kind != yaml.SequenceNode {
		return ""
	}
	for _, p := range ports.Content {
		name, app := str(p, "name"), str(p, "appProtocol")
		if name == "grpc" || strings.HasPrefix(name, "grpc-") || app == "grpc" {
			return cmpOr(name, app)
		}
	}
	return ""
}

// istioProtocol says whether host speaks gRPC: a Service of that name
// given with the files says so by its port's name, or the user did.
func istioProtocol(objs []istioObject, host string, o Options) protocol {
	switch o.Protocol {
	case ProtocolGRPC:
		return protocol{true, given(true)}
	case ProtocolHTTP:
		return protocol{false, given(false)}
	}
	short := strings.SplitN(host, ".", 2)[0]
	for _, s := range objs {
		if s.grpcPort != "" && s.name == short {
			return protocol{true, Provenance{File: s.file, Object: Object{"Service", s.name}, Rule: "port " + s.grpcPort + " speaks gRPC", ruleForm: afterColon}}
		}
	}
	return protocol{false, Provenance{Rule: "assumed: no Service given names a grpc port for " + cmpOr(host, "the host") + " (--protocol grpc if it speaks gRPC)"}}
}

// istioRuleFleet is the fleet of a DestinationRule's host that no
// VirtualService routes: Istio's default route, with its default retries
// (pilot's route.retry.DefaultPolicy) and no timeout.
func istioRuleFleet(o *istioObject, objs []istioObject, opts Options) Fleet {
	host := o.dr.GetHost()
	p := &prov{file: o.file}
	f := scenario.Fleet{Name: host}
	path := "DestinationRule " + o.name
	p.note("route", "Istio's default", "no VirtualService for host "+host+" in the files: its traffic takes Istio's default route and retries")
	p.dflt("deadline", "none", path, "no VirtualService: no route timeout")
	f.Timeout = maxTimeout
	p.lose("no timeout at all (Istio's default): attempts are given %s, the longest the simulator takes", fmtDur(maxTimeout))
	attempts := istioRetries(p, &f, "", objs, host, path+" (default route)", opts)
	p.dflt("retry.max_retries", "2", "VirtualService retries", "Istio retries twice by default (Traffic Management: Retries)")
	f.Retry.MaxRetries = attempts
	f.Retry.Backoff = scenario.Backoff{Use: "exponential", Base: istioBackoff, Cap: 10 * istioBackoff, Multiplier: 2, Jitter: "full"}
	p.dflt("retry.backoff", "25ms, cap 250ms", "HTTPRetry.backoff", "HTTPRetry.backoff: 25ms; Envoy: 10 times the base")
	p.lose("retries skip the hosts already tried (retryIgnorePreviousHosts, true by default): the simulator's replicas are interchangeable")
	istioCalls(p, &f, istioProtocol(objs, host, opts), opts)
	pol := istioPolicy(p, o, "")
	istioTraffic(p, &f, pol, attempts > 0)
	istioEjection(p, &f, pol)
	return Fleet{Fleet: f, Format: Istio, File: o.file, Origin: fmt.Sprintf("%s: %s (host %s, no VirtualService)", o.file, path, host), From: p.list, Lost: p.lost,
		at: place{file: o.file, object: Object{"DestinationRule", o.name}}}
}

// istioRetries maps a retryOn ("" for Istio's default) onto f.Retry.On
// and returns the attempts left (0 when nothing the simulator makes is
// retried).
func istioRetries(p *prov, f *scenario.Fleet, retryOnS string, objs []istioObject, host, path string, opts Options) int {
	var codes []uint32
	dflt := ""
	if retryOnS == "" {
		var which string
		codes, which = istioDefaultCodes(opts)
		retryOnS = istioRetryOn
		p.note("istio", cmpOr(strings.TrimPrefix(opts.IstioVersion, "v"), istioCurrent+"+"), which)
		dflt = "HTTPRetry.retry_on: " + istioRetryOn
		if len(codes) > 0 {
			dflt += " with 503"
		}
	}
	some, err := mapRetryOn(p, f, retryOnS, codes, istioProtocol(objs, host, opts), path+".retries.retryOn", "retryOn", dflt)
	if err != nil {
		p.lose("retryOn %q: %v; imported as no retries", retryOnS, err)
		return 0
	}
	if !some {
		return 0
	}
	return istioAttempts
}

func istioFleet(o istioObject, i int, h *networking.HTTPRoute, objs []istioObject, opts Options) (Fleet, *istioObject) {
	path := fmt.Sprintf("spec.http[%d]", i)
	obj := Object{"VirtualService", o.name}
	p := &prov{file: o.file}
	vs := p.of(obj.Kind, obj.Name)
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
	origin := fmt.Sprintf("%s: %s: %s", o.file, obj, path)
	if host != "" {
		origin += fmt.Sprintf(" (host %s)", host)
	}

	deadline := time.Duration(0)
	if h.GetTimeout() != nil {
		deadline = h.GetTimeout().AsDuration()
		vs.set("deadline", fmtDur(deadline), path+".timeout")
	} else {
		vs.dflt("deadline", "none", path+".timeout", "HTTPRoute.timeout: default is disabled")
	}
	if deadline > 0 {
		f.Deadline = p.wait("timeout", deadline, 0)
	}
	attempts := istioRouteRetries(vs, &f, h.GetRetries(), path, deadline, func(retryOn string) int {
		return istioRetries(vs, &f, retryOn, objs, host, path, opts)
	})

	istioCalls(p, &f, istioProtocol(objs, host, opts), opts)
	dr := findRule(objs, host)
	subset := ""
	if rs := h.GetRoute(); len(rs) > 0 {
		subset = rs[0].GetDestination().GetSubset()
	}
	pol := istioPolicy(p, dr, subset)
	istioTraffic(p, &f, pol, attempts > 0)
	istioEjection(p, &f, pol)
	return Fleet{Fleet: f, Format: Istio, File: o.file, Origin: origin, From: p.list, Lost: p.lost, at: place{o.file, obj, path}}, dr
}

// istioRouteRetries maps a route's retries (r; nil for Istio's default),
// at path in the VirtualService (vs, its view), and its timeouts: the
// attempts, and each attempt's timeout (the route's deadline when
// perTryTimeout is unset). on maps the retryOn ("" for the default) and
// returns the attempts it leaves.
func istioRouteRetries(vs *prov, f *scenario.Fleet, r *networking.HTTPRetry, path string, deadline time.Duration, on func(string) int) int {
	attempts, retryOnS, perTry, backoff := istioAttempts, "", time.Duration(0), istioBackoff
	if r == nil {
		vs.dflt("retry.max_retries", "2", path+".retries", "Istio retries twice by default (Traffic Management: Retries)")
	} else {
		attempts = vs.count("attempts", int64(r.GetAttempts()))
		vs.set("retry.max_retries", strconv.Itoa(attempts), path+".retries.attempts")
		if r.GetPerTryTimeout() != nil {
			perTry = r.GetPerTryTimeout().AsDuration()
		}
		if r.GetBackoff() != nil {
			backoff = max(r.GetBackoff().AsDuration(), time.Millisecond)
			vs.set("retry.backoff.base", fmtDur(backoff), path+".retries.backoff")
		}
		if r.GetRetryOn() != "" {
			retryOnS = r.GetRetryOn()
		}
		if r.GetRetryRemoteLocalities() != nil {
			vs.lose("retryRemoteLocalities: the simulator has one locality")
		}
	}
	if r == nil || r.GetBackoff() == nil {
		vs.dflt("retry.backoff.base", fmtDur(backoff), path+".retries.backoff", "HTTPRetry.backoff: 25ms")
	}
	vs.lose("retries skip the hosts already tried (retryIgnorePreviousHosts, true by default): the simulator's replicas are interchangeable")
	if perTry > 0 {
		vs.set("timeout", fmtDur(perTry), path+".retries.perTryTimeout")
	} else {
		perTry = deadline
		if perTry > 0 {
			vs.note("timeout", fmtDur(perTry), "perTryTimeout unset: the route timeout (HTTPRetry.per_try_timeout)")
		}
	}
	if perTry <= 0 {
		perTry = maxTimeout
		vs.lose("no timeout at all (Istio's default): attempts are given %s, the longest the simulator takes", fmtDur(maxTimeout))
	}
	f.Timeout = vs.wait("timeout per attempt", perTry, 0)

	if attempts > 0 && on(retryOnS) == 0 {
		attempts = 0
	}
	f.Retry.MaxRetries = attempts
	f.Retry.Backoff = scenario.Backoff{Use: "exponential", Base: vs.wait("backoff", backoff, 0), Cap: vs.wait("the backoff's cap, 10 times backoff,", 10*min(backoff, maxTimeout), 0), Multiplier: 2, Jitter: "full"}
	vs.base().dflt("retry.backoff.cap", fmtDur(10*min(backoff, maxTimeout)), "Envoy's max_interval", "Envoy: 10 times the base")
	return attempts
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

// istioCalls notes what the route's layer answers when it gives up (it
// runs Envoy), what it speaks, and the server sidecar beside each pod it
// calls, which in Istio 1.24 and later retries a reset before the request
// twice on an HTTP route and not at all on a gRPC one (pilot's default
// inbound route, route.BuildDefaultHTTPInboundRoute; route_test.go,
// TestInboundHTTPRoute: RetryOn reset-before-request, NumRetries 2, for
// protocol.HTTP only) and answers the client sidecar 503 (issue 36, rows
// 1 and 2).
func istioCalls(p *prov, f *scenario.Fleet, pr protocol, o Options) {
	f.Product = string(giveup.Envoy)
	p.note("product", f.Product, "the client sidecar is Envoy: a local 503 after refused connections, 504 after timeouts (router.cc); UNAVAILABLE to a gRPC caller")
	if pr.grpc {
		f.Protocol = scenario.ProtocolGRPC
		p.took("protocol", f.Protocol, pr.why)
	}
	f.Inbound = scenario.Inbound{Product: string(giveup.Envoy)}
	major, minor := 1, 24
	if o.IstioVersion != "" {
		major, minor, _ = istioRelease(o.IstioVersion)
	}
	switch {
	case major == 1 && minor < 24:
		p.note("inbound", "envoy, no retries", "the server sidecar answers 503 when its pod refuses a connection; inbound retries came with Istio 1.24")
	case pr.grpc:
		p.note("inbound", "envoy, no retries", "the server sidecar answers UNAVAILABLE when its pod refuses a connection; Istio's inbound retry policy is for HTTP routes only")
	default:
		f.Inbound.Retries = 2
		p.note("inbound", "envoy, 2 retries", "Istio 1.24 and later: the server sidecar retries a connection its pod refuses twice (reset-before-request), on the same pod, then answers 503")
	}
}

// trafficPolicy is the traffic policy of a route's destination, as pilot
// builds its cluster: the DestinationRule's, with a subset's fields in
// place of the rule's where the subset sets them, and where each field
// was read (its path in the rule; "" when it is not set).
type trafficPolicy struct {
	tp                        *networking.TrafficPolicy
	pool, lb, outlier, budget string // where connectionPool, loadBalancer, outlierDetection, retryBudget came from
	file, name                string // the DestinationRule's; "" for none
}

// in is p's view of the DestinationRule's paths.
func (pol trafficPolicy) in(p *prov) *prov { return p.in(pol.file).of("DestinationRule", pol.name) }

// istioPolicy is the traffic policy pilot builds host's cluster with for
// subset ("" for none): pilot/pkg/networking/core/cluster_builder.go,
// buildSubsetCluster, and MergeSubsetTrafficPolicy (pilot/pkg/networking/
// util/util.go; pilot/pkg/model in the releases with retryBudget): the
// subset's connectionPool, outlierDetection, loadBalancer and retryBudget
// replace the rule's when set (issue 36, row 10).
func istioPolicy(p *prov, dr *istioObject, subset string) trafficPolicy {
	var out trafficPolicy
	if dr == nil {
		return out
	}
	out.file, out.name = dr.file, dr.name
	top := dr.dr.GetTrafficPolicy()
	const at = "spec.trafficPolicy"
	merged := &networking.TrafficPolicy{}
	if top != nil {
		merged.ConnectionPool, merged.LoadBalancer, merged.OutlierDetection, merged.RetryBudget = top.ConnectionPool, top.LoadBalancer, top.OutlierDetection, top.RetryBudget
		out.pool, out.lb, out.outlier, out.budget = at, at, at, at
	}
	if subset != "" {
		i := slices.IndexFunc(dr.dr.GetSubsets(), func(s *networking.Subset) bool { return s.GetName() == subset })
		if i < 0 {
			p.lose("subset %s: DestinationRule %s has no such subset; the rule's own traffic policy is imported", subset, dr.name)
		} else if sp := dr.dr.GetSubsets()[i].GetTrafficPolicy(); sp != nil {
			sat := fmt.Sprintf("spec.subsets[%d].trafficPolicy", i)
			if sp.ConnectionPool != nil {
				merged.ConnectionPool, out.pool = sp.ConnectionPool, sat
			}
			if sp.LoadBalancer != nil {
				merged.LoadBalancer, out.lb = sp.LoadBalancer, sat
			}
			if sp.OutlierDetection != nil {
				merged.OutlierDetection, out.outlier = sp.OutlierDetection, sat
			}
			if sp.RetryBudget != nil {
				merged.RetryBudget, out.budget = sp.RetryBudget, sat
			}
			out.in(p).set("subset", subset, sat).by(afterColon, "its traffic policy replaces the rule's where it sets a field (pilot's MergeSubsetTrafficPolicy)")
		}
	}
	if top != nil || subset != "" {
		out.tp = merged
	}
	if len(top.GetPortLevelSettings()) > 0 {
		p.lose("DestinationRule %s: portLevelSettings are not imported", dr.name)
	}
	return out
}

// istioTraffic maps a destination's traffic policy: its retry budget, or
// connectionPool.http.maxRetries, is the fleet's budget.
func istioTraffic(p *prov, f *scenario.Fleet, pol trafficPolicy, retries bool) {
	if !retries {
		f.Budget = scenario.Budget{Use: scenario.BudgetNone}
		p.note("budget", "none", "the route sends no retries")
		return
	}
	tp := pol.tp
	if http := tp.GetConnectionPool().GetHttp(); http.GetHttp2MaxRequests() > 0 || http.GetHttp1MaxPendingRequests() > 0 {
		p.lose("connectionPool.http limits on requests in flight: the simulator's clients have none")
	}
	if rb := tp.GetRetryBudget(); rb != nil {
		dr := pol.in(p)
		pct, mc := istioBudgetPercent, istioMinConc
		if rb.GetPercent() != nil {
			pct = rb.GetPercent().GetValue()
			dr.set("budget.budget_percent", strconv.FormatFloat(pct, 'g', -1, 64), pol.budget+".retryBudget.percent")
		} else {
			p.dflt("budget.budget_percent", "20", "retryBudget.percent", "TrafficPolicy.RetryBudget.percent: defaults to 20%")
		}
		if rb.GetMinRetryConcurrency() != 0 {
			mc = int(rb.GetMinRetryConcurrency())
			dr.set("budget.min_retry_concurrency", strconv.Itoa(mc), pol.budget+".retryBudget.minRetryConcurrency")
		} else {
			p.dflt("budget.min_retry_concurrency", "3", "retryBudget.minRetryConcurrency", "TrafficPolicy.RetryBudget.min_retry_concurrency: defaults to 3")
		}
		if rb.GetBudgetInterval() != nil && rb.GetBudgetInterval().AsDuration() > 0 {
			p.lose("retryBudget.budgetInterval: requests that ended within it still count; the simulator counts only those in flight")
		}
		f.Budget = scenario.Budget{Use: scenario.BudgetConcurrency, Concurrency: budget.ConcurrencySettings{Percent: pct, MinConcurrency: mc}}
		return
	}
	if mr := tp.GetConnectionPool().GetHttp().GetMaxRetries(); mr > 0 {
		pol.in(p).set("budget.min_retry_concurrency", strconv.Itoa(int(mr)), pol.pool+".connectionPool.http.maxRetries").by(inParens, "at most this many retries active at once")
		f.Budget = scenario.Budget{Use: scenario.BudgetConcurrency, Concurrency: budget.ConcurrencySettings{MinConcurrency: int(min(mr, 1_000_000))}}
		return
	}
	f.Budget = scenario.Budget{Use: scenario.BudgetNone}
	p.dflt("budget", "none", "connectionPool.http.maxRetries and retryBudget", "ConnectionPoolSettings.HTTPSettings.max_retries: defaults to 2^32-1, no limit")
}
