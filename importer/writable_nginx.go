package importer

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/retrystorm/retrystorm/giveup"
	"github.com/retrystorm/retrystorm/scenario"
)

// nginx's space, as nginx 1.22 reads it (release-1.22.1; nginx.go says
// where each rule is in the source): at the location,
// proxy_next_upstream_tries, proxy_next_upstream_timeout and, with
// Conditions, proxy_next_upstream (grpc_ for a grpc_pass); on the primary
// servers of its upstream, max_fails and fail_timeout, nginx's passive
// health check (ngx_http_upstream.c, ngx_http_upstream_server). The edits
// are the text edits editNginx makes: a directive replaced on its own
// line, or added as the block's first.

// nginx's grid (docs/check.md says why).
var (
	// ngxRetryCounts are retries, written as tries (one more): 0 writes
	// proxy_next_upstream_tries 1, never 0, which nginx reads as no limit
	// (ngx_http_upstream_next: "u->conf->next_upstream_tries" is checked
	// only when it is not 0). A count above what the upstream's servers
	// allow is not a candidate: each is tried at most once per request.
	ngxRetryCounts = []int{0, 1, 2, 3}
	// ngxMaxFailsGrid are max_fails values: 1 is nginx's default; 0, which
	// turns the accounting off, is never written.
	ngxMaxFailsGrid = []int{1, 3}
	// ngxFailTimeoutGrid are fail_timeout values, whole seconds as nginx
	// takes them (ngx_parse_time with is_sec): 10s is nginx's default.
	ngxFailTimeoutGrid = []time.Duration{10 * time.Second, 30 * time.Second}
	// ngxNextLists are proxy_next_upstream's values: connection errors
	// alone, with timeouts (nginx's default), and with the gateway and
	// overload answers. "off" reads as proxy_next_upstream_tries 1 (each
	// request sent once), which keeps the conditions and is kept instead.
	ngxNextLists = []string{"error", "error timeout", "error timeout http_502 http_503 http_504"}
)

// ngxTarget is where an nginx fleet's settings are in the files.
type ngxTarget struct {
	src    Source
	block  *ngxDirective     // the location block
	levels [][]*ngxDirective // http, server, the locations around it, its own
	prefix string            // "proxy_", or "grpc_" for grpc_pass
	off    bool              // its next_upstream says off: nothing is passed on
	// tries is what a request may have: the upstream's servers, capped by
	// the next_upstream_tries in effect; bound is the servers alone.
	tries, bound int
	up           *ngxUpstream // nil for a plain address
	upSrc        Source
	servers      []*ngxDirective // the upstream's primary server lines; nil unless each is editable
	nested       bool            // a location inside it proxies, and inherits what it sets
}

func findNgxTarget(w *writer) (*ngxTarget, error) {
	if strings.HasPrefix(w.loc.path, "ConfigMap ") {
		return nil, fmt.Errorf("importer: %s: an ingress-nginx ConfigMap's settings are not searched; set data.proxy-next-upstream-tries there", w.loc.file)
	}
	line := lineOf(w.from.Origin)
	cfg := &ngxConfig{upstreams: map[string]*ngxUpstream{}}
	parsed := map[string][]*ngxDirective{}
	for _, s := range w.srcs {
		if ingressConfigMap(s.Data) {
			continue
		}
		ds, err := parseNginx(s.Name, s.Data)
		if err != nil {
			return nil, err
		}
		parsed[s.Name] = ds
		if err := cfg.read(s.Name, ds); err != nil {
			return nil, err
		}
	}
	i := slices.IndexFunc(cfg.locations, func(l ngxLocation) bool { return l.file == w.loc.file && l.line == line })
	if i < 0 {
		return nil, fmt.Errorf("%s:%d: no location there", w.loc.file, line)
	}
	l := cfg.locations[i]
	t := &ngxTarget{src: *sourceNamed(w.srcs, l.file), block: ngxLocationAt(parsed[l.file], line), levels: l.levels, prefix: "proxy_", bound: 1}
	if l.pass.Name == "grpc_pass" {
		t.prefix = "grpc_"
	}
	for _, d := range ngxEffective(l.levels, t.prefix+"next_upstream") {
		t.off = t.off || slices.ContainsFunc(d.Args, func(a string) bool { return strings.EqualFold(a, "off") })
	}
	t.up, _ = cfg.target(l.pass)
	if t.up != nil {
		t.bound = t.up.tries()
		t.upSrc = *sourceNamed(w.srcs, t.up.file)
		t.servers = ngxPrimaryLines(parsed[t.up.file], t.up, t.upSrc)
	}
	t.tries = t.bound
	if ds := ngxEffective(l.levels, t.prefix+"next_upstream_tries"); len(ds) > 0 {
		if n, err := ngxInt(ds[len(ds)-1].Args[0]); err == nil && n > 0 {
			t.tries = min(n, t.bound)
		}
	}
	t.nested = ngxProxiesInside(t.block.Block)
	return t, nil
}

// ngxProxiesInside reports whether a location among ds, or inside one,
// proxies.
func ngxProxiesInside(ds []*ngxDirective) bool {
	for _, l := range ngxFind(ds, "location") {
		if ngxLast(l.Block, "proxy_pass") != nil || ngxLast(l.Block, "grpc_pass") != nil || ngxProxiesInside(l.Block) {
			return true
		}
	}
	return false
}

// ngxPrimaryLines are the server lines of upstream up that are neither
// backup nor down, when there are two or more (nginx's passive health is
// modelled for those alone: ngxPassive) and each is one directive on its
// own line, which setServerParam can edit; else nil.
func ngxPrimaryLines(ds []*ngxDirective, up *ngxUpstream, src Source) []*ngxDirective {
	var block *ngxDirective
	ups := ngxFind(ds, "upstream")
	for _, h := range ngxFind(ds, "http") {
		ups = append(ups, ngxFind(h.Block, "upstream")...)
	}
	for _, u := range ups {
		if u.Line == up.line {
			block = u
		}
	}
	if block == nil {
		return nil
	}
	lines := strings.SplitAfter(string(src.Data), "\n")
	var out []*ngxDirective
	for _, d := range ngxFind(block.Block, "server") {
		s, err := readServer(up.file, d)
		if err != nil {
			return nil
		}
		if s.backup || s.down {
			continue
		}
		if d.Line > len(lines) || !oneDirective(lines[d.Line-1], "server") {
			return nil
		}
		out = append(out, d)
	}
	if len(out) < 2 {
		return nil
	}
	return out
}

// oneDirective reports whether line holds directive name and nothing
// else but a comment, with no quotes: one an edit can rewrite.
func oneDirective(line, name string) bool {
	code, _, _ := strings.Cut(line, "#")
	code = strings.TrimSpace(code)
	return strings.HasPrefix(code, name+" ") && strings.HasSuffix(code, ";") && strings.Count(code, ";") == 1 && !strings.ContainsAny(line, `"'\`)
}

// setServerParam sets key=value on an upstream's server line (checked by
// oneDirective): where the line has key, in its place; else before the ";".
func setServerParam(line, key, value string) string {
	semi := strings.IndexByte(line, ';')
	body, rest := line[:semi], line[semi:]
	start := -1
	for i := 0; i <= len(body); i++ {
		if i < len(body) && body[i] != ' ' && body[i] != '\t' {
			if start < 0 {
				start = i
			}
			continue
		}
		if start >= 0 && strings.HasPrefix(body[start:i], key+"=") {
			return body[:start] + key + "=" + value + body[i:] + rest
		}
		start = -1
	}
	return strings.TrimRight(body, " \t") + " " + key + "=" + value + rest
}

// can reports whether name can be written into the location: where it
// sets name, on one line of its own and once; else as a new first line.
func (t *ngxTarget) can(name string) bool {
	if len(ngxFind(t.block.Block, name)) > 1 {
		return false
	}
	return newTextFile(t.src).setDirective(t.block, name, "1")
}

func ngxSpace(w *writer) (space, error) {
	t, err := findNgxTarget(w)
	if err != nil {
		return space{}, err
	}
	user := w.from.Fleet
	var grid []int
	for _, n := range ngxRetryCounts {
		if n < t.bound {
			grid = append(grid, n) // the servers allow n+1 tries
		}
	}
	retries, zero := []option{asIs}, -1
	if t.can(t.prefix+"next_upstream_tries") && (!t.off || w.opts.Conditions) {
		retries, zero = countOptions(grid, user.Retry.MaxRetries, func(n int) option { return t.retries(n) })
	}
	conds := []option{asIs}
	if w.opts.Conditions && t.can(t.prefix+"next_upstream") {
		for _, c := range ngxNextLists {
			if t.off || !sameKinds(ngxKinds(strings.Fields(c)), user.Retry.On) || user.Retry.MaxRetries == 0 {
				conds = append(conds, t.conditions(c))
			}
		}
	}
	next := []option{asIs}
	if d := user.Timeout; t.can(t.prefix+"next_upstream_timeout") && (user.Deadline == 0 || user.Deadline > d) && d >= time.Millisecond {
		next = append(next, t.nextTimeout(d))
	}
	maxFails, failTimeouts := []option{asIs}, []option{asIs}
	userFails, userBack := t.passive()
	if t.servers != nil {
		for _, n := range ngxMaxFailsGrid {
			if n != userFails {
				maxFails = append(maxFails, t.maxFails(n))
			}
		}
		for _, d := range ngxFailTimeoutGrid {
			if d != userBack {
				failTimeouts = append(failTimeouts, t.failTimeout(d))
			}
		}
	}
	const dRetries, dConds, dNext, dFails, dBack = 0, 1, 2, 3, 4
	return space{
		dims: [][]option{retries, conds, next, maxFails, failTimeouts},
		skip: func(p []int) bool {
			return (p[dRetries] == zero && (p[dConds] > 0 || p[dNext] > 0)) ||
				(t.off && p[dConds] == 0 && (p[dRetries] > 0 || p[dNext] > 0)) ||
				(userFails == 0 && p[dFails] == 0 && p[dBack] > 0)
		},
		finish: t.finish,
	}, nil
}

// passive is the max_fails and fail_timeout of the upstream's first
// primary server, which the importer reads (ngxPassive).
func (t *ngxTarget) passive() (int, time.Duration) {
	if t.up == nil {
		return 0, 0
	}
	for _, s := range t.up.servers {
		if !s.backup && !s.down {
			return s.maxFails, s.failTimeout
		}
	}
	return 0, 0
}

// ngxKinds are the simulator's failures proxy_next_upstream's values
// pass on.
func ngxKinds(values []string) []string {
	var out []string
	for _, v := range values {
		if k := ngxConditions[strings.ToLower(v)]; k != "" && !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

// sameKinds reports whether a and b retry the same failures (empty: all).
func sameKinds(a, b []string) bool {
	all := func(s []string) []string {
		if len(s) == 0 {
			return giveup.Kinds
		}
		return s
	}
	a, b = slices.Clone(all(a)), slices.Clone(all(b))
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

func (t *ngxTarget) retries(n int) option {
	return option{func(w *writer) (string, error) {
		w.retries = n
		name := t.prefix + "next_upstream_tries"
		w.doc("location", kv{Key: name, Value: strconv.Itoa(n + 1)})
		w.expect(func(g scenario.Fleet) string {
			return unless(g.Retry.MaxRetries == n, fmt.Sprintf("%d retries, not %d", g.Retry.MaxRetries, n))
		})
		if n == 0 {
			return name + " 1 (no retries)", nil
		}
		return fmt.Sprintf("%s %d", name, n+1), nil
	}}
}

// conditions writes next_upstream c, keeping the user's values the
// simulator makes no failure of (non_idempotent, invalid_header, http_403,
// http_404, updating).
func (t *ngxTarget) conditions(c string) option {
	return option{func(w *writer) (string, error) {
		if t.off && w.retries == 0 {
			w.retries = t.tries - 1 // off no more: the tries in effect
		}
		if w.retries == 0 {
			return "", errSkip
		}
		vals := strings.Fields(c)
		for _, d := range ngxEffective(t.levels, t.prefix+"next_upstream") {
			for _, v := range d.Args {
				if k, ok := ngxConditions[strings.ToLower(v)]; ok && k == "" && !strings.EqualFold(v, "off") && !slices.Contains(vals, v) {
					vals = append(vals, v)
				}
			}
		}
		w.doc("location", kv{Key: t.prefix + "next_upstream", Value: strings.Join(vals, " ")})
		want := ngxKinds(vals)
		w.expect(func(g scenario.Fleet) string {
			return unless(g.Retry.MaxRetries > 0 && sameKinds(g.Retry.On, want), fmt.Sprintf("retries on %v, not %v", g.Retry.On, want))
		})
		return t.prefix + "next_upstream " + c, nil
	}}
}

// nextTimeout writes next_upstream_timeout d, the read timeout: no new
// try once one has timed out, while errors and 5xx answers, which come
// sooner, are still passed on (ngx_http_upstream_next compares the time
// since the first try with it before each new one).
func (t *ngxTarget) nextTimeout(d time.Duration) option {
	return option{func(w *writer) (string, error) {
		if w.retries == 0 {
			return "", errSkip
		}
		name := t.prefix + "next_upstream_timeout"
		w.doc("location", kv{Key: name, Value: ngxDur(d)})
		w.expect(func(g scenario.Fleet) string {
			return unless(g.Deadline == d, fmt.Sprintf("deadline %v, not %v", g.Deadline, d))
		})
		return name + " " + ngxDur(d), nil
	}}
}

func (t *ngxTarget) maxFails(n int) option {
	return option{func(w *writer) (string, error) {
		w.doc("servers", kv{Key: "max_fails", Value: strconv.Itoa(n)})
		t.scopeNote(w)
		w.expect(func(g scenario.Fleet) string {
			st := g.OutlierDetection.Settings
			got := st.Consecutive5xx
			if st.SplitExternalLocalOriginErrors {
				got = st.ConsecutiveLocalOriginFailure // errors and timeouts alone count (ngxPassive)
			}
			return unless(g.OutlierDetection.Use == scenario.OutlierEnvoy && got == n, fmt.Sprintf("ejects after %d failures, not %d", got, n))
		})
		return fmt.Sprintf("max_fails=%d", n), nil
	}}
}

func (t *ngxTarget) failTimeout(d time.Duration) option {
	return option{func(w *writer) (string, error) {
		w.doc("servers", kv{Key: "fail_timeout", Value: ngxDur(d)})
		t.scopeNote(w)
		w.expect(func(g scenario.Fleet) string {
			st := g.OutlierDetection.Settings
			return unless(g.OutlierDetection.Use == scenario.OutlierEnvoy && st.BaseEjectionTime == d, fmt.Sprintf("ejects for %v, not %v", st.BaseEjectionTime, d))
		})
		return "fail_timeout=" + ngxDur(d), nil
	}}
}

func (t *ngxTarget) scopeNote(w *writer) {
	w.note("scope: max_fails and fail_timeout are set on the servers of upstream %s (%s), for every location that proxies to it; without a zone each worker process counts on its own", t.up.name, t.up.file)
}

// finish writes the location's directives and the servers' parameters
// the options chose, as editNginx writes its own.
func (t *ngxTarget) finish(w *writer) error {
	files := map[string]*textFile{}
	var order []string
	open := func(s Source) *textFile {
		if f, ok := files[s.Name]; ok {
			return f
		}
		files[s.Name] = newTextFile(s)
		order = append(order, s.Name)
		return files[s.Name]
	}
	if loc := w.docs["location"]; len(loc) > 0 {
		f := open(t.src)
		for _, e := range loc {
			if !f.setDirective(t.block, e.Key, e.Value) {
				return fmt.Errorf("%s:%d: %s cannot be written into the location", t.src.Name, t.block.Line, e.Key)
			}
		}
		if t.nested {
			w.note("scope: the location's directives are inherited by the locations inside it that set none")
		}
	}
	if sv := w.docs["servers"]; len(sv) > 0 {
		f := open(t.upSrc)
		for _, d := range t.servers {
			for _, e := range sv {
				f.lines[d.Line-1] = setServerParam(f.lines[d.Line-1], e.Key, e.Value)
			}
		}
	}
	for _, name := range order {
		f := files[name]
		src := sourceNamed(w.srcs, name)
		if after := f.bytes(); string(after) != string(src.Data) {
			w.added = append(w.added, Edited{Name: name, Before: src.Data, After: after, Diff: Diff(name, src.Data, after)})
		}
	}
	return nil
}
