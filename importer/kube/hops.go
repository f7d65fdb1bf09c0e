package kube

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/retrystorm/retrystorm/scenario"
)

// This file follows a call from one Service to the next through what the
// manifests name explicitly, so that a chain goes on past a pod's client
// config (docs/stack.md, "--manifests"):
//
//   - a route's destination: a VirtualService's http route
//     destination.host (and its subset, the DestinationRule's labels), an
//     HTTPRoute's backendRefs;
//   - a pod's own calls: a container's env values, args and command that
//     hold a URL or host:port naming a Service of the manifests
//     (http://payments.shop.svc.cluster.local:8080, payments:8080,
//     dns:///payments:50051);
//   - a client config's target: a value beside the config in its
//     ConfigMap (a gRPC channel's target, a base URL) naming a Service.
//
// Nothing else is matched: a gRPC service config names a gRPC service
// (shop.Payments), not the Kubernetes Service that serves it, so it
// names no hop by itself.

// ref is a Service named somewhere in the manifests, and where.
type ref struct {
	name, ns string // ns is empty when the name does not say it
	subset   string // a VirtualService destination's subset
	at       string // file:line, and what names it ("env PAYMENTS_URL")
}

// routeInfo is what the chains need of a route object that the importer
// does not keep: the hosts callers use, whether it applies to the mesh's
// own calls (a sidecar's route) or only at a gateway, its destinations and
// its line.
type routeInfo struct {
	kind, name, ns, file string
	line                 int
	into                 []string // the short names of the Services whose callers it applies to
	mesh                 bool
	dests                [][]ref // per http route (VirtualService) or for the whole route
	lines                []int   // the line of each http route
}

// subsetKey is a DestinationRule subset: host's short name and subset.
type subsetKey struct{ host, subset string }

// kubeIndex is the routes, subsets and named targets of the manifests.
type kubeIndex struct {
	routes  []routeInfo
	subsets map[subsetKey]map[string]string // labels
	// cmTargets are the Services a ConfigMap's other values name:
	// "namespace/name" → refs.
	cmTargets map[string][]ref
	// lines are the objects' lines: file, kind and name → line.
	lines map[[3]string]int
}

// describe completes route layer l (the importer's fleet from obj, "Kind
// name", in file) with what the chains need: the Services its callers
// call, whether the mesh's own calls take it, its destinations and its
// line. A route the index does not know (a ServiceProfile, a Service's
// annotations) applies to calls into its host and sends them there.
func (ix *kubeIndex) describe(l *manifestLayer, file, obj, origin string) {
	kind, name, _ := strings.Cut(obj, " ")
	l.layer.Line = ix.lines[[3]string{file, kind, name}]
	for _, r := range ix.routes {
		if r.file != file || r.kind != kind || r.name != name {
			continue
		}
		l.into, l.mesh = r.into, r.mesh
		k := 0
		if _, rest, ok := strings.Cut(origin, "spec.http["); ok {
			idx, _, _ := strings.Cut(rest, "]")
			if n, err := strconv.Atoi(idx); err == nil {
				k = n
			}
		}
		if k < len(r.dests) {
			l.dests = r.dests[k]
		}
		if k < len(r.lines) && r.kind == "VirtualService" {
			l.layer.Line = r.lines[k]
		}
		if kind == "HTTPRoute" {
			l.host = ""
			if len(r.into) > 0 {
				l.host = r.into[0]
			} else if len(l.dests) > 0 {
				l.host = l.dests[0].name // a gateway's route: into its backends
			}
		}
		return
	}
	if l.host != "" {
		l.into, l.mesh = []string{l.host}, true
		l.dests = []ref{{name: l.host, at: fmt.Sprintf("%s:%d: %s", file, l.layer.Line, obj)}}
	}
}

// indexObjects reads the routes, DestinationRule subsets and ConfigMap
// targets of one manifest file into ix.
func (ix *kubeIndex) indexObjects(name string, data []byte) error {
	docs, err := decodeDocs(name, data)
	if err != nil {
		return err
	}
	ix.indexDocs(name, headsOf(docs))
	return nil
}

// decodeDocs decodes the documents of manifest file name, for indexDocs:
// the part of indexObjects that reads no index, so that files decode side
// by side.
func decodeDocs(name string, data []byte) ([]*yaml.Node, error) {
	var docs []*yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %v", name, strings.TrimPrefix(err.Error(), "yaml: "))
		}
		if len(doc.Content) > 0 {
			docs = append(docs, doc.Content[0])
		}
	}
}

// docHead is what the index takes of a document: its kind, name and
// line, and the document itself only for the kinds it reads, so that the
// documents of every other kind (CRDs, Deployments) are not all kept
// while the files are read side by side.
type docHead struct {
	kind, name string
	line       int
	root       *yaml.Node // nil but for a VirtualService, HTTPRoute, DestinationRule or ConfigMap
}

// headsOf returns the heads of docs, in their order.
func headsOf(docs []*yaml.Node) []docHead {
	hs := make([]docHead, len(docs))
	for i, root := range docs {
		h := docHead{kind: scalar(field(root, "kind")), name: scalar(field(field(root, "metadata"), "name")), line: root.Line}
		switch h.kind {
		case "VirtualService", "HTTPRoute", "DestinationRule", "ConfigMap":
			h.root = root
		}
		hs[i] = h
	}
	return hs
}

// indexDocs indexes the documents of manifest file name (headsOf).
func (ix *kubeIndex) indexDocs(name string, docs []docHead) {
	for _, h := range docs {
		if ix.lines == nil {
			ix.lines = map[[3]string]int{}
		}
		if _, ok := ix.lines[[3]string{name, h.kind, h.name}]; !ok {
			ix.lines[[3]string{name, h.kind, h.name}] = h.line
		}
		if h.root == nil {
			continue
		}
		o := indexedObject{file: name, kind: h.kind, root: h.root, spec: field(h.root, "spec"),
			name: h.name, ns: cmp.Or(scalar(field(field(h.root, "metadata"), "namespace")), "default")}
		switch o.kind {
		case "VirtualService":
			ix.routes = append(ix.routes, o.virtualService())
		case "HTTPRoute":
			ix.routes = append(ix.routes, o.httpRoute())
		case "DestinationRule":
			ix.destinationRule(o)
		case "ConfigMap":
			ix.configMap(o)
		}
	}
}

// indexedObject is one object of a manifest file as indexObjects reads
// it: its file, kind, name and namespace (default when unsaid), its root
// node and its spec.
type indexedObject struct {
	file, kind, name, ns string
	root, spec           *yaml.Node
}

// virtualService is an Istio VirtualService's route: the hosts it applies
// to, whether the mesh's own calls take it (no gateways, or "mesh"), and
// each http route's destinations.
func (o indexedObject) virtualService() routeInfo {
	r := routeInfo{kind: o.kind, name: o.name, ns: o.ns, file: o.file, line: o.root.Line}
	gws := seq(field(o.spec, "gateways"))
	r.mesh = len(gws) == 0
	for _, g := range gws {
		r.mesh = r.mesh || scalar(g) == "mesh"
	}
	for _, h := range seq(field(o.spec, "hosts")) {
		r.into = append(r.into, shortHost(scalar(h)))
	}
	for _, h := range seq(field(o.spec, "http")) {
		var ds []ref
		for _, rt := range seq(field(h, "route")) {
			d := field(rt, "destination")
			if host := scalar(field(d, "host")); host != "" {
				rf := hostRef(host, o.ns)
				rf.subset = scalar(field(d, "subset"))
				rf.at = fmt.Sprintf("%s:%d: destination.host", o.file, d.Line)
				ds = append(ds, rf)
			}
		}
		r.dests = append(r.dests, ds)
		r.lines = append(r.lines, h.Line)
	}
	return r
}

// httpRoute is a Gateway API HTTPRoute's route: the Services it is
// attached to (GAMMA, the mesh's calls into them) and its backends, or
// its parent Service when it names none.
func (o indexedObject) httpRoute() routeInfo {
	r := routeInfo{kind: o.kind, name: o.name, ns: o.ns, file: o.file, line: o.root.Line}
	for _, p := range seq(field(o.spec, "parentRefs")) {
		switch scalar(field(p, "kind")) {
		case "Service":
			r.mesh = true // GAMMA: the route applies to calls into this Service
			r.into = append(r.into, scalar(field(p, "name")))
		}
	}
	var ds []ref
	for _, rule := range seq(field(o.spec, "rules")) {
		for _, b := range seq(field(rule, "backendRefs")) {
			if k := scalar(field(b, "kind")); k != "" && k != "Service" {
				continue
			}
			ds = append(ds, ref{name: scalar(field(b, "name")), ns: cmp.Or(scalar(field(b, "namespace")), o.ns), at: fmt.Sprintf("%s:%d: backendRefs", o.file, b.Line)})
		}
	}
	if len(ds) == 0 { // no backendRefs: the parent Service serves it
		for _, s := range r.into {
			ds = append(ds, ref{name: s, ns: o.ns, at: fmt.Sprintf("%s:%d: parentRefs", o.file, o.root.Line)})
		}
	}
	r.dests = [][]ref{ds}
	return r
}

// destinationRule indexes an Istio DestinationRule's subsets: host and
// subset name → the pods' labels.
func (ix *kubeIndex) destinationRule(o indexedObject) {
	host := shortHost(scalar(field(o.spec, "host")))
	for _, s := range seq(field(o.spec, "subsets")) {
		labels := map[string]string{}
		if l := field(s, "labels"); l != nil && l.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(l.Content); i += 2 {
				labels[l.Content[i].Value] = l.Content[i+1].Value
			}
		}
		if ix.subsets == nil {
			ix.subsets = map[subsetKey]map[string]string{}
		}
		ix.subsets[subsetKey{host, scalar(field(s, "name"))}] = labels
	}
}

// configMap indexes the Services a ConfigMap's data values name (a
// channel's target, a base URL), under its namespace and name.
func (ix *kubeIndex) configMap(o indexedObject) {
	d := field(o.root, "data")
	if d == nil || d.Kind != yaml.MappingNode {
		return
	}
	for i := 0; i+1 < len(d.Content); i += 2 {
		v := d.Content[i+1]
		if rf, ok := targetRef(v.Value, o.ns); ok {
			rf.at = fmt.Sprintf("%s:%d: ConfigMap %s data.%s", o.file, v.Line, o.name, d.Content[i].Value)
			if ix.cmTargets == nil {
				ix.cmTargets = map[string][]ref{}
			}
			ix.cmTargets[o.ns+"/"+o.name] = append(ix.cmTargets[o.ns+"/"+o.name], rf)
		}
	}
}

// podTargets are the Services a pod template's containers name in their
// env values, args and command.
func podTargets(file string, tmplSpec *yaml.Node, ns string) []ref {
	var out []ref
	for _, group := range []string{"initContainers", "containers"} {
		for _, c := range seq(field(tmplSpec, group)) {
			for _, e := range seq(field(c, "env")) {
				v := field(e, "value")
				if rf, ok := targetRef(scalar(v), ns); ok {
					rf.at = fmt.Sprintf("%s:%d: env %s", file, v.Line, scalar(field(e, "name")))
					out = append(out, rf)
				}
			}
			for _, key := range []string{"command", "args"} {
				for _, a := range seq(field(c, key)) {
					// --target=payments:8080 as well as a bare value.
					v := a.Value
					if _, after, ok := strings.Cut(v, "="); ok && strings.HasPrefix(v, "-") {
						v = after
					}
					if rf, ok := targetRef(v, ns); ok {
						rf.at = fmt.Sprintf("%s:%d: %s", file, a.Line, key)
						out = append(out, rf)
					}
				}
			}
		}
	}
	return out
}

// targetRef reads a value as a call to a Kubernetes Service: a URL
// (http, https, grpc, h2c) or a gRPC target (dns:///host:port) whose host
// is a cluster name, or host:port. A cluster name is a bare DNS label
// (the Service in the pod's namespace) or name.namespace[.svc[.domain]].
// Anything else (an external host, a path, a word) is not one.
func targetRef(v, ns string) (ref, bool) {
	v = strings.TrimSpace(v)
	if v == "" || strings.ContainsAny(v, " \t\n") {
		return ref{}, false
	}
	hostport := ""
	switch {
	case strings.HasPrefix(v, "dns:///"):
		hostport = strings.TrimPrefix(v, "dns:///")
	case strings.Contains(v, "://"):
		u, err := url.Parse(v)
		if err != nil || !slices.Contains([]string{"http", "https", "grpc", "grpcs", "h2c"}, u.Scheme) {
			return ref{}, false
		}
		hostport = u.Host
		if u.Port() == "" {
			hostport = net.JoinHostPort(u.Hostname(), "0")
		}
	default:
		hostport = v
	}
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return ref{}, false
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return ref{}, false
	}
	labels := strings.Split(host, ".")
	for _, l := range labels {
		if !dnsLabel(l) {
			return ref{}, false
		}
	}
	switch {
	case len(labels) == 1:
		return ref{name: labels[0], ns: ns}, true
	case len(labels) == 2, len(labels) >= 3 && labels[2] == "svc":
		return ref{name: labels[0], ns: labels[1]}, true
	}
	return ref{}, false // an external host: not a Service of the cluster
}

// dnsLabel reports whether s is an RFC 1123 label, as a Service's name is.
func dnsLabel(s string) bool {
	if s == "" || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// hostRef is a route destination's host as a Service: its first label,
// and its namespace when the host says it (else the route's).
func hostRef(host, ns string) ref {
	labels := strings.Split(host, ".")
	if len(labels) >= 2 {
		return ref{name: labels[0], ns: labels[1]}
	}
	return ref{name: labels[0], ns: ns}
}

func scalar(n *yaml.Node) string {
	if n == nil || n.Kind != yaml.ScalarNode {
		return ""
	}
	return n.Value
}

func seq(n *yaml.Node) []*yaml.Node {
	if n == nil || n.Kind != yaml.SequenceNode {
		return nil
	}
	return n.Content
}

// chainer builds the chains of any depth from the layers and the hops.
type chainer struct {
	layers   []manifestLayer
	loads    []workload
	services []service
	ix       *kubeIndex
	by       *chainIndex

	chains    [][]Layer
	unmatched []string
	used      map[string]bool // the layers in a chain: file and origin
	noted     map[string]bool
	// maxChains bounds the chains (paths through a graph of many
	// branches grow fast): past it the check is refused.
	maxChains int
}

func (c *chainer) note(s string) {
	if !c.noted[s] {
		c.noted[s] = true
		c.unmatched = append(c.unmatched, s)
	}
}

// buildChains finds every chain: from each route no pod of the manifests
// calls (a gateway's, or a route whose callers are elsewhere), and from
// each workload no route or pod leads to, through every hop named
// explicitly, to where the manifests name no further hop. A chain that
// comes back to a Service it passed is refused with the loop.
func buildChains(layers []manifestLayer, loads []workload, services []service, ix *kubeIndex) ([][]Layer, []string, error) {
	c := &chainer{layers: layers, loads: loads, services: services, ix: ix, by: newChainIndex(layers, loads, services),
		used: map[string]bool{}, noted: map[string]bool{}, maxChains: 100_000}
	// A loop anywhere is refused, with the loop: one the chains would
	// meet from their starts, and a ring of Services nothing enters
	// (each called by another), which no chain starts in.
	if err := c.anyLoop(); err != nil {
		return nil, nil, err
	}
	// The Services something in the manifests calls: a pod's own call
	// enters through the mesh's routes into that Service.
	called := map[string]bool{}
	for _, w := range loads {
		for _, e := range c.edges(w, false) {
			if e.next != nil {
				called[e.next.name] = true
			}
		}
	}
	for i := range layers {
		r := &layers[i]
		if r.host == "" || (r.mesh && anyCalled(r.into, called)) {
			continue // not a route, or one the chains reach from their callers
		}
		if err := c.fromRoute(nil, i, nil, ""); err != nil {
			return nil, nil, err
		}
	}
	// Workloads nothing in the manifests calls are where calls start.
	for _, w := range loads {
		if c.reached(w, called) {
			continue
		}
		if err := c.fromWorkload(nil, w, nil, ""); err != nil {
			return nil, nil, err
		}
	}
	for _, l := range layers {
		if l.cm == "" || c.used[l.layer.File+"\x00"+l.layer.Origin] || c.mounted(l.cm) {
			continue // in a chain, or listed with the pods that mount it
		}
		c.note(fmt.Sprintf("%s (%s): no pod in the manifests mounts it", l.layer.Name, fileLine(l.layer.File, l.layer.Line)))
	}
	return c.chains, c.unmatched, nil
}

func anyCalled(into []string, called map[string]bool) bool {
	for _, s := range into {
		if called[s] {
			return true
		}
	}
	return false
}

// mounted reports whether a workload mounts ConfigMap cm.
func (c *chainer) mounted(cm string) bool { return c.by.mounted[cm] }

// reached reports whether a route or another pod leads into w.
func (c *chainer) reached(w workload, called map[string]bool) bool {
	for _, i := range c.by.svcByNS[w.ns] {
		s := c.services[i]
		if len(s.selector) == 0 || !selects(s.selector, w.labels) {
			continue
		}
		if called[s.name] || c.by.hosts[s.name] {
			return true
		}
	}
	return false
}

// edge is one call out of a workload: through its client config (nil:
// the pod calls with no retries of its own) to the next Service (nil: the
// manifests name none).
type edge struct {
	cfg  int // index in c.layers; -1: none
	next *ref
}

// edges are w's calls out. A client config names its next Service in its
// ConfigMap, or through the pod's own targets when it is the pod's only
// client config; with several configs and no ConfigMap target, which
// config calls which Service is not said, and is listed.
func (c *chainer) edges(w workload, report bool) []edge {
	cfgs := c.by.configsOf(w)
	var out []edge
	if len(cfgs) == 0 {
		for k := range w.targets {
			out = append(out, edge{cfg: -1, next: &w.targets[k]})
		}
		return out
	}
	for _, i := range cfgs {
		ts := c.ix.cmTargets[c.layers[i].cm]
		if len(ts) == 0 && len(cfgs) == 1 {
			ts = w.targets
		}
		if len(ts) == 0 && len(cfgs) > 1 && len(w.targets) > 0 && report {
			c.note(fmt.Sprintf("%s %s (%s:%d): %d client configs and %d Services named in its containers: which config calls which is not said (name the target in the config's ConfigMap)", w.kind, w.name, w.file, w.line, len(cfgs), len(w.targets)))
		}
		if len(ts) == 0 {
			out = append(out, edge{cfg: i})
			continue
		}
		for k := range ts {
			out = append(out, edge{cfg: i, next: &ts[k]})
		}
	}
	return out
}

// step is one Service on the way, for a loop's message.
type step struct{ svc, at string }

func loopError(path []step, s ref) error {
	var names []string
	start := 0
	for i, p := range path {
		if p.svc == s.ns+"/"+s.name {
			start = i
			break
		}
	}
	for _, p := range path[start:] {
		names = append(names, p.svc+" ("+p.at+")")
	}
	names = append(names, s.ns+"/"+s.name+" ("+s.at+")")
	return fmt.Errorf("--manifests: the chain loops: %s: a Service cannot call itself through the others", strings.Join(names, " → "))
}

// emit adds a chain of two layers or more; a shorter one is listed.
func (c *chainer) emit(chain []Layer, why string) error {
	switch {
	case len(chain) >= 2 && len(chain) <= scenario.MaxTiers+1:
		if len(c.chains) >= c.maxChains {
			return fmt.Errorf("--manifests: more than %d chains: split the directory", c.maxChains)
		}
		c.chains = append(c.chains, slices.Clone(chain))
		for _, l := range chain {
			c.used[l.File+"\x00"+l.Origin] = true
		}
	case len(chain) > scenario.MaxTiers+1:
		return fmt.Errorf("--manifests: the chain %s has %d layers, more than the %d a chain may have (nine layers retrying three times each send 262,144 attempts per intent): check it in parts with --stack", chainName(chain), len(chain), scenario.MaxTiers+1)
	case len(chain) == 1:
		c.note(why)
	}
	return nil
}

// fromRoute follows route i: into each Service it names as destination.
func (c *chainer) fromRoute(chain []Layer, i int, path []step, via string) error {
	r := c.layers[i]
	l := r.layer
	l.Via = via
	chain = append(slices.Clone(chain), l)
	dests := r.dests
	if len(dests) == 0 {
		dests = []ref{{name: r.host, at: r.layer.File}}
	}
	for _, d := range dests {
		if err := c.intoService(chain, d, path, r); err != nil {
			return err
		}
	}
	return nil
}

// intoService follows a call into Service s: to the workloads it selects
// (a subset's labels too), then each one's calls out.
func (c *chainer) intoService(chain []Layer, s ref, path []step, via manifestLayer) error {
	key := s.ns + "/" + s.name
	for _, p := range path {
		if p.svc == key || (s.ns == "" && strings.HasSuffix(p.svc, "/"+s.name)) {
			return loopError(path, s)
		}
	}
	var sel []service
	for _, i := range c.by.svcByName[s.name] {
		if sv := c.services[i]; s.ns == "" || sv.ns == s.ns {
			sel = append(sel, sv)
		}
	}
	if len(sel) == 0 {
		if len(chain) == 1 && via.layer.Name != "" {
			return c.emit(chain, fmt.Sprintf("%s (%s): no Service %q in the manifests", via.layer.Name, via.layer.File, s.name))
		}
		c.note(fmt.Sprintf("%s: calls %s, no Service in the manifests: the chain ends there", s.at, s.name))
		return c.emit(chain, "")
	}
	var extra map[string]string
	if s.subset != "" {
		var ok bool
		if extra, ok = c.ix.subsets[subsetKey{s.name, s.subset}]; !ok {
			c.note(fmt.Sprintf("%s: subset %q of %s: no DestinationRule in the manifests defines it", s.at, s.subset, s.name))
			return c.emit(chain, "")
		}
	}
	found := false
	for _, sv := range sel {
		for _, i := range c.by.loadsByNS[sv.ns] {
			w := c.loads[i]
			if len(sv.selector) == 0 || !selects(sv.selector, w.labels) || !selects(extra, w.labels) {
				continue
			}
			found = true
			next := append(slices.Clone(path), step{svc: sv.ns + "/" + sv.name, at: s.at})
			sub := ""
			if s.subset != "" {
				sub = fmt.Sprintf(" (subset %s)", s.subset)
			}
			into := fmt.Sprintf("%s → Service %s%s selects %s %s (%s:%d)", s.at, sv.name, sub, w.kind, w.name, w.file, w.line)
			if err := c.fromWorkload(chain, w, next, into); err != nil {
				return err
			}
		}
	}
	if !found {
		if len(chain) == 1 {
			return c.emit(chain, fmt.Sprintf("%s (%s): the pods of Service %q mount no client config: nothing below it to multiply", via.layer.Name, via.layer.File, s.name))
		}
		return c.emit(chain, "")
	}
	return nil
}

// fromWorkload follows w's calls out: its client config as the next
// layer, then the mesh's routes into the Service it calls, then on.
func (c *chainer) fromWorkload(chain []Layer, w workload, path []step, via string) error {
	es := c.edges(w, true)
	if len(es) == 0 {
		if len(chain) == 1 {
			return c.emit(chain, fmt.Sprintf("%s (%s): the pods of Service %q mount no client config: nothing below it to multiply", chain[0].Name, chain[0].File, shortSvc(path)))
		}
		return c.emit(chain, "")
	}
	for _, e := range es {
		ch := chain
		if e.cfg >= 0 {
			below := c.layers[e.cfg].layer
			below.Instances = w.replicas
			below.Name = fmt.Sprintf("%s of %s %s", below.Name, w.kind, w.name)
			below.Via = via
			ch = append(slices.Clone(chain), below)
		}
		if e.next == nil {
			why := ""
			if len(ch) == 1 {
				why = fmt.Sprintf("%s (%s): no route or pod in the manifests leads to the pods that mount it", ch[0].Name, ch[0].File)
			}
			if err := c.emit(ch, why); err != nil {
				return err
			}
			continue
		}
		if len(path) == 0 {
			// A workload where calls start: its own Services are on
			// the path, so that a call back into it is a loop.
			for _, i := range c.by.svcByNS[w.ns] {
				if s := c.services[i]; len(s.selector) > 0 && selects(s.selector, w.labels) {
					path = append(path, step{svc: s.ns + "/" + s.name, at: fmt.Sprintf("%s:%d: %s %s", w.file, w.line, w.kind, w.name)})
				}
			}
		}
		// The mesh's routes into the Service called: a sidecar's layer.
		routed := false
		for _, i := range c.by.meshInto[e.next.name] {
			routed = true
			if err := c.fromRoute(ch, i, path, e.next.at); err != nil {
				return err
			}
		}
		if !routed {
			if err := c.intoService(ch, *e.next, path, manifestLayer{}); err != nil {
				return err
			}
		}
	}
	return nil
}

func shortSvc(path []step) string {
	if len(path) == 0 {
		return ""
	}
	_, n, _ := strings.Cut(path[len(path)-1].svc, "/")
	return n
}

// chainName names a chain by its layers, outermost first.
func chainName(ch []Layer) string {
	var names []string
	for _, l := range ch {
		names = append(names, l.Name)
	}
	return strings.Join(names, " → ")
}

// anyLoop looks for a loop in the graph of Services the manifests name:
// Service S calls Service T when a workload S selects calls T (in its
// containers or its client config's ConfigMap), or calls a Service whose
// mesh route sends to T. It returns the first loop found as loopError's
// message, or nil.
func (c *chainer) anyLoop() error {
	g := &callGraph{services: c.services, calls: c.serviceCalls(), routed: c.meshRoutes(), state: map[string]int{}}
	// Depth-first, in a fixed order: white, grey (on the path), black.
	keys := make([]string, 0, len(g.calls))
	for k := range g.calls {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if g.state[k] == 0 {
			if err := g.visit(k, "the manifests"); err != nil {
				return err
			}
		}
	}
	return nil
}

// serviceKey is a Service's node in the call graph: "namespace/name".
func serviceKey(s service) string { return s.ns + "/" + s.name }

// serviceCalls are the calls of each Service's workloads, by the
// Service's key: what the workloads it selects name as their next hop.
func (c *chainer) serviceCalls() map[string][]ref {
	calls := map[string][]ref{}
	for _, w := range c.loads {
		for _, i := range c.by.svcByNS[w.ns] {
			sv := c.services[i]
			if len(sv.selector) == 0 || !selects(sv.selector, w.labels) {
				continue
			}
			for _, e := range c.edges(w, false) {
				if e.next != nil {
					calls[serviceKey(sv)] = append(calls[serviceKey(sv)], *e.next)
				}
			}
		}
	}
	return calls
}

// meshRoutes are the destinations of the mesh routes into each Service,
// by its short name: a call into it is a call to them (a route into
// payments that sends to payments is no call of its own).
func (c *chainer) meshRoutes() map[string][]ref {
	routed := map[string][]ref{}
	for _, l := range c.layers {
		if l.host == "" || !l.mesh {
			continue
		}
		for _, into := range l.into {
			routed[into] = append(routed[into], l.dests...)
		}
	}
	return routed
}

// callGraph is anyLoop's search: the Services, their calls and the mesh
// routes, and the depth-first search's state: 0 white, 1 grey (on the
// path), 2 black.
type callGraph struct {
	services []service
	calls    map[string][]ref
	routed   map[string][]ref
	state    map[string]int
	path     []step
}

// resolve is the keys of the Services r names (every namespace's, when
// r does not say one).
func (g *callGraph) resolve(r ref) []string {
	var out []string
	for _, sv := range g.services {
		if sv.name == r.name && (r.ns == "" || sv.ns == r.ns) {
			out = append(out, serviceKey(sv))
		}
	}
	return out
}

// targets is the Services a call to r reaches: a mesh route's
// destinations when one goes into r's Service, else r's Service.
func (g *callGraph) targets(r ref) []string {
	dests, ok := g.routed[r.name]
	if !ok {
		return g.resolve(r)
	}
	var out []string
	for _, d := range dests {
		if d.at == "" {
			d.at = r.at
		}
		out = append(out, g.resolve(d)...)
	}
	return out
}

// visit searches from svc, reached by the call at at, and returns
// loopError for the first call back to a Service on the path.
func (g *callGraph) visit(svc, at string) error {
	g.state[svc] = 1
	g.path = append(g.path, step{svc: svc, at: at})
	for _, r := range g.calls[svc] {
		for _, next := range g.targets(r) {
			switch g.state[next] {
			case 1:
				ns, name, _ := strings.Cut(next, "/")
				return loopError(g.path, ref{name: name, ns: ns, at: r.at})
			case 0:
				if err := g.visit(next, r.at); err != nil {
					return err
				}
			}
		}
	}
	g.path = g.path[:len(g.path)-1]
	g.state[svc] = 2
	return nil
}
