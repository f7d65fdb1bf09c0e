package importer

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/durationpb"
	_ "google.golang.org/protobuf/types/known/emptypb" // the stand-in for typed configs not read

	"github.com/retrystorm/retrystorm/giveup"
	"github.com/retrystorm/retrystorm/resil/budget"
	"github.com/retrystorm/retrystorm/scenario"
)

// Envoy's documented defaults, each with its source (docs/import.md cites
// them too).
const (
	envoyNumRetries     = 1                        // RetryPolicy.num_retries: "defaults to 1"
	envoyRouteTimeout   = 15 * time.Second         // RouteAction.timeout: "If not specified, the default is 15s"
	envoyBackoffBase    = 25 * time.Millisecond    // RetryPolicy.RetryBackOff / x-envoy-max-retries: 25ms
	envoyMaxRetries     = 3                        // CircuitBreakers.Thresholds.max_retries: default 3
	envoyBudgetPercent  = 20.0                     // RetryBudget.budget_percent: "Defaults to 20%"
	envoyMinConcurrency = 3                        // RetryBudget.min_retry_concurrency: "Defaults to 3"
	envoyMaxRequests    = 1024                     // Thresholds.max_requests: default 1024
	envoyConsecutive5xx = 5                        // OutlierDetection.consecutive_5xx: default 5
	envoyEjectionTime   = 30 * time.Second         // OutlierDetection.base_ejection_time: default 30000ms
	envoyMaxEjection    = 10                       // OutlierDetection.max_ejection_percent: default 10%
	envoyDocs           = "Envoy v3 API reference" // where the defaults are documented
)

// v2Type matches the type URL of a v2 API message (envoy.api.v2.*,
// envoy.config.*.v2.*, v2alpha), which Envoy 1.18 removed.
var v2Type = regexp.MustCompile(`envoy\.(api\.v2|[a-z_.]+\.v2(alpha\d*)?)\.`)

// strict reads a message and refuses unknown fields: a typo in a retry
// setting must not pass as a default.
var strict = protojson.UnmarshalOptions{}

// knownType reports whether an Any's type is linked into this binary; the
// others (filters, transport sockets) are not needed for retries and are
// replaced, with a note.
func knownType(url string) bool {
	_, err := protoregistry.GlobalTypes.FindMessageByURL(url)
	return err == nil
}

// envoyRoutes is what the Envoy files hold: route configurations (and bare
// virtual hosts) and clusters, each with the file and path it came from.
type envoyPiece[M proto.Message] struct {
	msg     M
	file    string
	path    string
	dropped []string // typed configs skipped in it
	v2      []string // v2 API fields it was found under
}

type envoyConfig struct {
	routes   []envoyPiece[*routev3.RouteConfiguration]
	clusters []envoyPiece[*clusterv3.Cluster]
	v2       []string            // the v2 API fields around the node find is in
	v2Types  map[string][]string // by file: the typed configs of a v2 type anywhere in it
}

func importEnvoy(srcs []Source, o Options) ([]Fleet, error) {
	var cfg envoyConfig
	for _, s := range srcs {
		docs, err := documents(s.Name, s.Data)
		if err != nil {
			return nil, err
		}
		for _, d := range docs {
			if err := cfg.find(s.Name, d, ""); err != nil {
				return nil, err
			}
			cfg.findV2Types(s.Name, d, "")
		}
	}
	n := 0
	for _, rc := range cfg.routes {
		for _, vh := range rc.msg.GetVirtualHosts() {
			n += len(vh.GetRoutes())
		}
	}
	if err := admit(Envoy, n, "routes"); err != nil {
		return nil, err
	}
	var out fleetSet
	for _, rc := range cfg.routes {
		for vi, vh := range rc.msg.GetVirtualHosts() {
			for ri, r := range vh.GetRoutes() {
				if r.GetRoute() == nil {
					continue // a redirect or a direct response sends nothing upstream
				}
				path := fmt.Sprintf("%s.virtual_hosts[%d].routes[%d]", rc.path, vi, ri)
				if rc.path == "" {
					path = fmt.Sprintf("virtual_hosts[%d].routes[%d]", vi, ri)
				}
				if rc.path == "." { // a bare virtual host
					path = fmt.Sprintf("routes[%d]", ri)
				}
				f, err := cfg.fleet(rc.file, path, vh, r, rc.dropped, rc.v2, o)
				if err != nil {
					return nil, err
				}
				out.add(f)
			}
		}
	}
	if len(out.list) == 0 && len(cfg.clusters) > 0 {
		return nil, fmt.Errorf("%s: Envoy clusters but no route: retries are set on routes (give the route configuration too)", cfg.clusters[0].file)
	}
	return out.list, nil
}

// find walks a document for route configurations and clusters.
func (c *envoyConfig) find(file string, n *yaml.Node, path string) error {
	n = deref(n)
	switch n.Kind {
	case yaml.MappingNode:
		if path == "" && get(n, "routes") != nil && get(n, "virtual_hosts") == nil {
			// A bare virtual host: read it as a route configuration of one.
			vh := &routev3.VirtualHost{}
			dropped, err := readProto(file, n, vh, false)
			if err != nil {
				return err
			}
			rc := &routev3.RouteConfiguration{VirtualHosts: []*routev3.VirtualHost{vh}}
			if err := checkEnvoyRoutes(file, n, rc, "."); err != nil {
				return err
			}
			c.routes = append(c.routes, envoyPiece[*routev3.RouteConfiguration]{msg: rc, file: file, path: ".", dropped: dropped})
			return nil
		}
		if get(n, "virtual_hosts") != nil {
			rc := &routev3.RouteConfiguration{}
			dropped, err := readProto(file, n, rc, false)
			if err != nil {
				return err
			}
			if err := checkEnvoyRoutes(file, n, rc, path); err != nil {
				return err
			}
			c.routes = append(c.routes, envoyPiece[*routev3.RouteConfiguration]{msg: rc, file: file, path: path, dropped: dropped, v2: slices.Clone(c.v2)})
			return nil
		}
		if cfg := get(n, "config"); cfg != nil && get(n, "name") != nil && get(n, "typed_config") == nil && deref(cfg).Kind == yaml.MappingNode {
			// A filter's untyped config: the v2 API's, gone from v3.
			c.v2 = append(c.v2, joinPath(path, "config"))
			defer func() { c.v2 = c.v2[:len(c.v2)-1] }()
		}
		if path == "" && isCluster(n) {
			return c.cluster(file, n, path)
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			key, v := n.Content[i].Value, deref(n.Content[i+1])
			p := joinPath(path, key)
			if key == "clusters" && v.Kind == yaml.SequenceNode {
				for j, cn := range v.Content {
					if err := c.cluster(file, cn, fmt.Sprintf("%s[%d]", p, j)); err != nil {
						return err
					}
				}
				continue
			}
			if err := c.find(file, v, p); err != nil {
				return err
			}
		}
	case yaml.SequenceNode:
		for i, v := range n.Content {
			if err := c.find(file, v, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	}
	return nil
}

// findV2Types lists the typed configs of a v2 API type in n (an @type
// such as envoy.config.filter.http.router.v2.Router): Envoy 1.18 and later
// reject the whole file for one.
func (c *envoyConfig) findV2Types(file string, n *yaml.Node, path string) {
	n = deref(n)
	if n == nil {
		return
	}
	switch n.Kind {
	case yaml.MappingNode:
		if t := get(n, "@type"); t != nil && v2Type.MatchString(t.Value) {
			if c.v2Types == nil {
				c.v2Types = map[string][]string{}
			}
			c.v2Types[file] = append(c.v2Types[file], fmt.Sprintf("%s (%s, line %d)", cmpOr(path, "."), t.Value, t.Line))
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			c.findV2Types(file, n.Content[i+1], joinPath(path, n.Content[i].Value))
		}
	case yaml.SequenceNode:
		for i, v := range n.Content {
			c.findV2Types(file, v, fmt.Sprintf("%s[%d]", path, i))
		}
	}
}

func isCluster(n *yaml.Node) bool {
	for _, k := range []string{"circuit_breakers", "outlier_detection", "connect_timeout", "load_assignment", "lb_policy"} {
		if get(n, k) != nil {
			return true
		}
	}
	return false
}

func (c *envoyConfig) cluster(file string, n *yaml.Node, path string) error {
	if h := get(n, "hosts"); h != nil {
		return fmt.Errorf("%s:%d: %s: hosts is the v2 API's field; Envoy 1.18 and later read only the v3 API and reject it: write load_assignment", file, h.Line, joinPath(path, "hosts"))
	}
	cl := &clusterv3.Cluster{}
	if _, err := readProto(file, n, cl, false); err != nil {
		return err
	}
	if err := checkEnvoyCluster(file, n, cl, path); err != nil {
		return err
	}
	c.clusters = append(c.clusters, envoyPiece[*clusterv3.Cluster]{msg: cl, file: file, path: path})
	return nil
}

// readProto reads a YAML node into m with the project's own protobuf
// definitions, strictly (an unknown field is an error naming the YAML
// line). Typed configs of types not linked in are skipped and listed.
func readProto(file string, n *yaml.Node, m proto.Message, goDurations bool) (dropped []string, err error) {
	if !goDurations {
		// Envoy's own configs: Envoy reads their enums in any case.
		foldEnums(n, m.ProtoReflect().Descriptor())
	}
	j, err := toJSON(n, knownType, goDurations)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", file, err)
	}
	if err := strict.Unmarshal(j.buf.Bytes(), m); err != nil {
		return nil, j.yamlError(file, err)
	}
	return j.dropped, nil
}

func (c *envoyConfig) findCluster(name string) *envoyPiece[*clusterv3.Cluster] {
	for i := range c.clusters {
		if c.clusters[i].msg.GetName() == name {
			return &c.clusters[i]
		}
	}
	return nil
}

func dur(d *durationpb.Duration) time.Duration {
	if d == nil {
		return 0
	}
	return d.AsDuration()
}

// fleet builds the fleet of one route, with its virtual host's retry
// policy when it has none of its own, and its cluster's thresholds.
func (c *envoyConfig) fleet(file, path string, vh *routev3.VirtualHost, r *routev3.Route, dropped, v2 []string, o Options) (Fleet, error) {
	p := &prov{file: file}
	act := r.GetRoute()
	clusterName := routeCluster(p, act)
	f := scenario.Fleet{Name: envoyRouteName(vh, r), Retry: scenario.Retry{Backoff: noBackoff}}
	origin := fmt.Sprintf("%s: %s", file, path)
	if clusterName != "" {
		origin += fmt.Sprintf(" (cluster %q)", clusterName)
	}
	rp, rpPath := envoyTimeouts(p, &f, act, vh, path)
	pr := envoyProtocol(r, file, path, o)
	envoyCalls(p, &f, pr)
	if rp == nil {
		p.note("retry.max_retries", "0", "no retry_policy on the route or its virtual host: Envoy does not retry")
	} else if err := envoyRetry(p, &f, rp, rpPath, pr); err != nil {
		return Fleet{}, err
	}
	if act.GetHedgePolicy() != nil || vh.GetHedgePolicy() != nil {
		p.lose("hedge_policy: Envoy hedges on per-try timeouts inside one request; not imported")
	}

	c.thresholds(p, &f, clusterName, rp != nil && f.Retry.MaxRetries > 0)
	if len(dropped) > 0 {
		p.lose("typed configs of types this tool does not read were skipped (they hold no retry setting): %s", strings.Join(dropped, ", "))
	}
	for _, d := range c.v2Types[file] {
		p.lose("%s: %s is a v2 API type; Envoy 1.18 and later read only the v3 API and reject it (write the v3 type)", file, d)
	}
	for _, v := range v2 {
		p.lose("%s: %s is the v2 API's untyped filter config; Envoy 1.18 and later read only the v3 API and reject it (write typed_config with an @type): imported as v3 would read the same fields", file, v)
	}
	var replicas int
	if cl := c.findCluster(clusterName); cl != nil {
		replicas = endpoints(p.in(cl.file), cl)
	}
	return Fleet{Fleet: f, Format: Envoy, File: file, Origin: origin, From: p.list, Lost: p.lost, Replicas: replicas, at: place{file: file, path: path}}, nil
}

// routeCluster is the cluster a route sends to: the first of weighted
// clusters, none for a cluster chosen by a header.
func routeCluster(p *prov, act *routev3.RouteAction) string {
	name := act.GetCluster()
	switch {
	case act.GetWeightedClusters() != nil:
		wc := act.GetWeightedClusters().GetClusters()
		if len(wc) > 0 {
			name = wc[0].GetName()
		}
		p.lose("weighted_clusters: only the first cluster (%q) is imported", name)
	case act.GetClusterHeader() != "":
		p.lose("cluster_header %q: the cluster is chosen per request; Envoy's default thresholds are used", act.GetClusterHeader())
	}
	return name
}

// envoyRouteName is the fleet's name: the route's, or its virtual host's
// and its match's.
func envoyRouteName(vh *routev3.VirtualHost, r *routev3.Route) string {
	name := r.GetName()
	if name == "" {
		name = vh.GetName()
		if m := r.GetMatch(); m.GetPrefix() != "" {
			name += " " + m.GetPrefix()
		} else if m.GetPath() != "" {
			name += " " + m.GetPath()
		}
	}
	return cmpOr(strings.TrimSpace(name), "route")
}

// envoyTimeouts maps the route's timeout (the whole request's, retries
// included: the deadline) and the retry policy's per_try_timeout, and
// returns the retry policy (the route's, or else its virtual host's) and
// its path.
func envoyTimeouts(p *prov, f *scenario.Fleet, act *routev3.RouteAction, vh *routev3.VirtualHost, path string) (*routev3.RetryPolicy, string) {
	routeTimeout := envoyRouteTimeout
	if act.GetTimeout() != nil {
		routeTimeout = dur(act.GetTimeout())
		p.set("deadline", fmtDur(routeTimeout), path+".route.timeout")
	} else {
		p.dflt("deadline", fmtDur(routeTimeout), path+".route.timeout", "RouteAction.timeout, 15s")
	}
	if routeTimeout > 0 {
		f.Deadline = p.wait("route.timeout", routeTimeout, 0)
	} else {
		p.lose("route.timeout 0s disables the request timeout: no deadline")
	}

	rp, rpPath := act.GetRetryPolicy(), path+".route.retry_policy"
	if rp == nil && vh.GetRetryPolicy() != nil {
		vhPath := path // the route's path, less its ".routes[i]"
		if i := strings.LastIndex(path, ".routes["); i >= 0 {
			vhPath = path[:i]
		}
		rp, rpPath = vh.GetRetryPolicy(), vhPath+".retry_policy"
	}
	perTry := routeTimeout
	if rp != nil && rp.GetPerTryTimeout() != nil {
		perTry = dur(rp.GetPerTryTimeout())
		p.set("timeout", fmtDur(perTry), rpPath+".per_try_timeout")
	} else {
		p.note("timeout", fmtDur(perTry), "per_try_timeout unset: each attempt may take the whole route timeout (RetryPolicy.per_try_timeout)")
	}
	if perTry <= 0 {
		perTry = maxTimeout
		p.lose("no timeout at all: attempts are given %s, the longest the simulator takes", fmtDur(maxTimeout))
	}
	f.Timeout = p.wait("timeout per attempt", perTry, 0)
	return rp, rpPath
}

// endpoints counts the hosts of a cluster's load_assignment (issue 36,
// row 10): each lb_endpoint of each locality is a replica the cluster
// balances over. A DNS cluster's one address may resolve to more, which
// the config does not say.
func endpoints(p *prov, cl *envoyPiece[*clusterv3.Cluster]) int {
	la := cl.msg.GetLoadAssignment()
	n := 0
	for _, e := range la.GetEndpoints() {
		n += len(e.GetLbEndpoints())
	}
	if n == 0 {
		return 0
	}
	p.set("origin.replicas", strconv.Itoa(n), joinPath(cl.path, "load_assignment.endpoints"))
	if t := cl.msg.GetType(); t == clusterv3.Cluster_STRICT_DNS || t == clusterv3.Cluster_LOGICAL_DNS {
		p.lose("cluster type %s: each address may resolve to more hosts than the endpoints written (%d)", t, n)
	}
	return n
}

// envoyCalls notes what the fleet's layer answers when it gives up (it
// runs Envoy) and what it speaks (issue 36: package giveup).
func envoyCalls(p *prov, f *scenario.Fleet, pr protocol) {
	f.Product = string(giveup.Envoy)
	p.note("product", f.Product, "Envoy gives up with a local 503 after a reset or a refused connection, a 504 after a timeout, and forwards an upstream's failed answer (router.cc); UNAVAILABLE to a gRPC caller (status.cc, httpToGrpcStatus)")
	if pr.grpc {
		f.Protocol = scenario.ProtocolGRPC
		p.took("protocol", f.Protocol, pr.why)
	}
}

// protocol is what a route's service speaks, and why it is taken to.
type protocol struct {
	grpc bool
	why  Provenance
}

// given and assumed are the reasons for a protocol the user gave, or the
// importer assumed.
func given(grpc bool) Provenance {
	if grpc {
		return Provenance{Rule: "given (--protocol grpc)"}
	}
	return Provenance{Rule: "given (--protocol http)"}
}

// envoyProtocol says whether the route's service (at path in file)
// speaks gRPC: the route matches only gRPC requests, or the user said so.
func envoyProtocol(r *routev3.Route, file, path string, o Options) protocol {
	switch {
	case o.Protocol == ProtocolGRPC:
		return protocol{true, given(true)}
	case o.Protocol == ProtocolHTTP:
		return protocol{false, given(false)}
	case r.GetMatch().GetGrpc() != nil:
		return protocol{true, Provenance{File: file, Path: path + ".match.grpc", Rule: "the route matches gRPC requests", ruleForm: afterColon}}
	}
	return protocol{false, Provenance{Rule: "assumed: the route does not match on gRPC (--protocol grpc if the service speaks it)"}}
}

// mapRetryOn maps retry conditions to the fleet's retry.on, with notes;
// it returns false when none of the simulator's failures is retried.
func mapRetryOn(p *prov, f *scenario.Fleet, s string, codes []uint32, pr protocol, path, key string, dflt string) (bool, error) {
	on, unread, err := retryOn(s, codes, pr.grpc)
	if err != nil {
		return false, err
	}
	if grpcConditions(s) {
		name := "http"
		if pr.grpc {
			name = "grpc"
		}
		p.took("protocol", name, pr.why)
	}
	for _, u := range unread {
		p.lose("%s %s", key, u)
	}
	all := "every failure"
	if len(on) > 0 && len(on) < len(giveup.Kinds) {
		f.Retry.On = on
		all = "[" + strings.Join(on, ", ") + "]"
	}
	switch {
	case len(on) == 0:
		p.note("retry.max_retries", "0", fmt.Sprintf("%s %q retries none of the failures the simulator makes", key, s))
	case dflt != "":
		p.dflt("retry.on", all, path, dflt)
	default:
		p.set("retry.on", all, path)
	}
	return len(on) > 0, nil
}

// grpcConditions reports whether s holds a condition on a gRPC status.
func grpcConditions(s string) bool {
	for _, c := range strings.Split(s, ",") {
		switch strings.TrimSpace(c) {
		case "unavailable", "resource-exhausted", "internal", "cancelled", "deadline-exceeded":
			return true
		}
	}
	return false
}

// envoyRetry maps a RetryPolicy.
func envoyRetry(p *prov, f *scenario.Fleet, rp *routev3.RetryPolicy, path string, pr protocol) error {
	n := envoyNumRetries
	if rp.GetNumRetries() != nil {
		n = p.count("num_retries", int64(rp.GetNumRetries().GetValue()))
		p.set("retry.max_retries", strconv.Itoa(n), path+".num_retries")
	} else {
		p.dflt("retry.max_retries", "1", path+".num_retries", "RetryPolicy.num_retries: defaults to 1")
	}
	some, err := mapRetryOn(p, f, rp.GetRetryOn(), rp.GetRetriableStatusCodes(), pr, path+".retry_on", "retry_on", "")
	if err != nil {
		return fmt.Errorf("%s: %s.retry_on: %v", p.file, path, err)
	}
	if !some {
		n = 0
	}
	f.Retry.MaxRetries = n

	base, maxB := envoyBackoffBase, time.Duration(0)
	if bo := rp.GetRetryBackOff(); bo != nil {
		// Envoy reads both intervals in whole milliseconds, at least 1ms
		// (source/common/router/retry_policy_impl.cc).
		base = max(dur(bo.GetBaseInterval()).Truncate(time.Millisecond), time.Millisecond)
		p.set("retry.backoff.base", fmtDur(base), path+".retry_back_off.base_interval")
		if bo.GetMaxInterval() != nil {
			maxB = max(dur(bo.GetMaxInterval()).Truncate(time.Millisecond), time.Millisecond)
			p.set("retry.backoff.cap", fmtDur(maxB), path+".retry_back_off.max_interval")
		}
	} else {
		p.dflt("retry.backoff.base", fmtDur(base), path+".retry_back_off", "25ms, router filter x-envoy-max-retries")
	}
	if maxB == 0 {
		maxB = 10 * base
		p.dflt("retry.backoff.cap", fmtDur(maxB), path+".retry_back_off.max_interval", "10 times base_interval")
	}
	base, maxB = p.wait("retry_back_off.base_interval", base, 0), p.wait("retry_back_off.max_interval", maxB, 0)
	// Envoy's back-off doubles an interval from base, capped at max, and
	// draws each wait from [0, interval) (source/common/common/
	// backoff_strategy.cc, JitteredBackOffStrategy::nextBackOffMs, since
	// 2020): the simulator's exponential full jitter.
	f.Retry.Backoff = scenario.Backoff{Use: "exponential", Base: base, Cap: maxB, Multiplier: 2, Jitter: "full"}
	if len(rp.GetRetryHostPredicate()) > 0 {
		var names []string
		for _, h := range rp.GetRetryHostPredicate() {
			names = append(names, h.GetName())
		}
		p.lose("retry_host_predicate (%s): the simulator's replicas are interchangeable", strings.Join(names, ", "))
	}
	if rp.GetRetryPriority() != nil {
		p.lose("retry_priority: the simulator has one priority")
	}
	if rp.GetRateLimitedRetryBackOff() != nil {
		p.lose("rate_limited_retry_back_off: the simulator's rejections carry no reset headers")
	}
	if len(rp.GetRetriableHeaders()) > 0 || len(rp.GetRetriableRequestHeaders()) > 0 {
		p.lose("retriable_headers / retriable_request_headers: the simulator's answers carry no headers")
	}
	if rp.GetPerTryIdleTimeout() != nil {
		p.lose("per_try_idle_timeout: the simulator's answers do not stream")
	}
	return nil
}

// retryOn maps Envoy's retry_on conditions (also Istio's retryOn, which
// adds bare status codes) to the simulator's failures, as Envoy's router
// decides them (source/common/router/retry_state_impl.cc,
// wouldRetryFromHeaders and wouldRetryFromReset; router.cc,
// onPerTryTimeoutCommon): an error answer (a 500; gRPC INTERNAL), an
// overload rejection (a 503; gRPC UNAVAILABLE or RESOURCE_EXHAUSTED), a
// gateway answer (a 502 or 504 from a tier below that gave up; gRPC
// DEADLINE_EXCEEDED), a per-try timeout (Envoy resets the stream locally:
// a reset, not a 504 answer) and a refused connection (a connection
// failure). The gRPC conditions read the grpc-status of an answer, so they
// act only when the service speaks gRPC; and on a gRPC service the HTTP
// conditions (5xx, gateway-error, retriable-status-codes) see no failed
// answer at all, since a gRPC error comes with HTTP status 200 and its
// grpc-status (Envoy's own local replies to a gRPC request too): they act
// only on resets. It returns the failures retried, in the scenario's
// order, and, for each condition that matches none of them, why.
func retryOn(s string, codes []uint32, grpc bool) (on, unread []string, err error) {
	r := retryConditions{grpc: grpc, set: map[string]bool{}}
	for _, c := range strings.Split(s, ",") {
		if c = strings.TrimSpace(c); c == "" {
			continue
		}
		if err := r.condition(c, codes); err != nil {
			return nil, nil, err
		}
	}
	for _, k := range giveup.Kinds {
		if r.set[k] {
			on = append(on, k)
		}
	}
	return on, r.unread, nil
}

// retryConditions collects the failures retry conditions retry, on a
// service that speaks gRPC or not, and why a condition retries none.
type retryConditions struct {
	grpc   bool
	set    map[string]bool
	unread []string
}

// The simulator's failures, as retryOn names them.
const (
	errorK   = scenario.RetryOnError
	rejectK  = scenario.RetryOnRejection
	gatewayK = scenario.RetryOnGateway
	timeoutK = scenario.RetryOnTimeout
	refusedK = scenario.RetryOnRefused
)

func (r *retryConditions) add(kinds ...string) {
	for _, k := range kinds {
		r.set[k] = true
	}
}

func (r *retryConditions) skip(why string) { r.unread = append(r.unread, why) }

// answers adds the answers an HTTP condition c retries: none on gRPC.
func (r *retryConditions) answers(c string, kinds ...string) {
	if r.grpc {
		r.skip(c + ": on a gRPC service every answer has HTTP status 200 (the error is its grpc-status), so it acts on resets only")
		return
	}
	r.add(kinds...)
}

// code adds the answer of status c (from names the condition).
func (r *retryConditions) code(c int, from string) {
	switch {
	case r.grpc:
		r.skip(fmt.Sprintf("%s %d: on a gRPC service every answer has HTTP status 200 (the error is its grpc-status)", from, c))
	case c == 500:
		r.add(errorK)
	case c == 503, c == 429:
		r.add(rejectK)
	case c == 502, c == 504:
		r.add(gatewayK) // a tier below that gave up: the origin never answers them
	default:
		r.skip(fmt.Sprintf("%s %d: the simulator's origin never answers %d", from, c, c))
	}
}

// grpcOnly adds what a condition c on a gRPC status retries, on gRPC.
func (r *retryConditions) grpcOnly(c string, kinds ...string) {
	if r.grpc {
		r.add(kinds...)
		return
	}
	r.skip(c + ": acts only on a gRPC status in the answer, and the service is taken to speak HTTP")
}

// condition adds what condition c retries (codes are the
// retriable_status_codes).
func (r *retryConditions) condition(c string, codes []uint32) error {
	switch c {
	case "5xx":
		r.add(timeoutK, refusedK) // every reset
		r.answers(c, errorK, rejectK, gatewayK)
	case "gateway-error":
		r.add(timeoutK, refusedK)       // every reset
		r.answers(c, rejectK, gatewayK) // 502, 503, 504 answers
	case "reset":
		r.add(timeoutK, refusedK) // every reset: a per-try timeout, a refused connection
	case "reset-before-request":
		r.add(refusedK) // a per-try timeout resets a request already sent
	case "connect-failure":
		r.add(refusedK)
	case "refused-stream":
		r.add(refusedK) // a stream refused before any work: the simulator's refusal stands in
	case "unavailable", "resource-exhausted":
		r.grpcOnly(c, rejectK)
	case "internal":
		r.grpcOnly(c, errorK)
	case "deadline-exceeded":
		r.grpcOnly(c, gatewayK) // a gRPC application below that gave up on its deadline
	case "cancelled":
		if r.grpc {
			r.skip(c + ": the simulator's origin never answers this gRPC status (a per-try timeout is a local reset)")
		} else {
			r.grpcOnly(c)
		}
	case "envoy-ratelimited":
		r.skip(c + ": acts only on an answer with x-envoy-ratelimited, which the simulator's origin never sends")
	case "retriable-status-codes":
		for _, n := range codes {
			r.code(int(n), "retriable_status_codes")
		}
	case "retriable-4xx":
		r.skip(c + ": retries 409 answers, which the simulator's origin never sends")
	case "retriable-headers":
		r.skip(c + ": the simulator's answers carry no headers")
	case "http3-post-connect-failure":
		r.skip(c + ": the simulator has no HTTP/3")
	default:
		if n, err := strconv.Atoi(c); err == nil && n >= 100 && n <= 599 {
			r.code(n, "status")
			return nil
		}
		return fmt.Errorf("unknown retry condition %q", c)
	}
	return nil
}

// thresholds maps the cluster's DEFAULT priority circuit breaker: the
// retry budget, or max_retries, is the fleet's budget.
func (c *envoyConfig) thresholds(p *prov, f *scenario.Fleet, name string, retries bool) {
	cl := c.findCluster(name)
	var th *clusterv3.CircuitBreakers_Thresholds
	thPath := ""
	if cl == nil {
		p.note("budget", "Envoy's default circuit breaker", fmt.Sprintf("cluster %q is not in the files given", name))
	} else {
		for i, t := range cl.msg.GetCircuitBreakers().GetThresholds() {
			if t.GetPriority() == corev3.RoutingPriority_DEFAULT {
				th, thPath = t, fmt.Sprintf("%s.circuit_breakers.thresholds[%d]", cl.path, i)
				break // Envoy uses the first Thresholds of a priority
			}
		}
		if cl.path == "" {
			thPath = strings.TrimPrefix(thPath, ".")
		}
		c.ejection(p, f, cl)
		file := cl.file
		maxReq := uint32(envoyMaxRequests)
		if th.GetMaxRequests() != nil {
			maxReq = th.GetMaxRequests().GetValue()
		}
		p.lose("max_requests %d, max_pending_requests and max_connections (cluster %q in %s): limits on requests in flight per Envoy; the simulator's clients have none", maxReq, name, file)
	}
	if !retries {
		f.Budget = scenario.Budget{Use: scenario.BudgetNone}
		p.note("budget", "none", "the route sends no retries")
		return
	}
	cp := p // the cluster's file, which may not be the route's
	if cl != nil {
		cp = p.in(cl.file)
	}
	if rb := th.GetRetryBudget(); rb != nil {
		envoyRetryBudget(p, cp, f, th, thPath)
		return
	}
	mr := uint32(envoyMaxRetries)
	if th.GetMaxRetries() != nil {
		mr = th.GetMaxRetries().GetValue()
		cp.set("budget.min_retry_concurrency", strconv.Itoa(int(mr)), thPath+".max_retries").by(inParens, "the retry circuit breaker: at most this many retries active at once")
	} else {
		p.dflt("budget.min_retry_concurrency", "3", "circuit_breakers max_retries", "CircuitBreakers.Thresholds.max_retries: default 3 retries active at once")
	}
	switch {
	case mr == 0:
		f.Retry.MaxRetries = 0
		f.Budget = scenario.Budget{Use: scenario.BudgetNone}
		p.note("retry.max_retries", "0", "max_retries 0 allows no retry")
	case mr > 1_000_000:
		f.Budget = scenario.Budget{Use: scenario.BudgetNone}
		p.note("budget", "none", fmt.Sprintf("max_retries %d: no limit in practice", mr))
	default:
		f.Budget = scenario.Budget{Use: scenario.BudgetConcurrency, Concurrency: budget.ConcurrencySettings{Percent: 0, MinConcurrency: int(mr)}}
	}
}

// envoyRetryBudget maps a DEFAULT threshold's retry_budget (at thPath in
// the cluster's file, cp's view; p is the route's) to f's budget.
func envoyRetryBudget(p, cp *prov, f *scenario.Fleet, th *clusterv3.CircuitBreakers_Thresholds, thPath string) {
	rb := th.GetRetryBudget()
	pct, min := envoyBudgetPercent, envoyMinConcurrency
	if rb.GetBudgetPercent() != nil {
		pct = rb.GetBudgetPercent().GetValue()
		cp.set("budget.budget_percent", strconv.FormatFloat(pct, 'g', -1, 64), thPath+".retry_budget.budget_percent")
	} else {
		p.dflt("budget.budget_percent", "20", thPath+".retry_budget.budget_percent", "RetryBudget.budget_percent: defaults to 20%")
	}
	if rb.GetMinRetryConcurrency() != nil {
		min = p.count("min_retry_concurrency", int64(rb.GetMinRetryConcurrency().GetValue()))
		cp.set("budget.min_retry_concurrency", strconv.Itoa(min), thPath+".retry_budget.min_retry_concurrency")
	} else {
		p.dflt("budget.min_retry_concurrency", "3", thPath+".retry_budget.min_retry_concurrency", "RetryBudget.min_retry_concurrency: defaults to 3")
	}
	if rb.GetBudgetInterval() != nil && dur(rb.GetBudgetInterval()) > 0 {
		p.lose("retry_budget.budget_interval %s: requests that ended within it still count; the simulator counts only those in flight", fmtDur(dur(rb.GetBudgetInterval())))
	}
	if th.GetMaxRetries() != nil {
		p.lose("max_retries %d is ignored: Envoy's retry budget overrides the retry circuit breaker", th.GetMaxRetries().GetValue())
	}
	if pct == 0 && min == 0 {
		f.Retry.MaxRetries = 0
		f.Budget = scenario.Budget{Use: scenario.BudgetNone}
		p.note("retry.max_retries", "0", "a retry budget of 0% with min_retry_concurrency 0 allows no retry")
		return
	}
	f.Budget = scenario.Budget{Use: scenario.BudgetConcurrency, Concurrency: budget.ConcurrencySettings{Percent: pct, MinConcurrency: min}}
}
