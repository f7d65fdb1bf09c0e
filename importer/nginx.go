package importer

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/retrystorm/retrystorm/giveup"
	"github.com/retrystorm/retrystorm/scenario"
)

// nginx's retries, read as nginx 1.22 reads them (release-1.22.1):
//
//   - proxy_next_upstream (and grpc_next_upstream): the failures passed to
//     the next server, a bitmask OR'ed over the directive's occurrences at
//     one level and inherited by inner levels that set none; default
//     "error timeout"; "off" wins (ngx_http_proxy_module.c,
//     ngx_http_proxy_merge_loc_conf; ngx_conf_file.c,
//     ngx_conf_set_bitmask_slot);
//   - a request tries each server of the upstream at most once: the tries
//     are the servers not down, primary and backup
//     (ngx_http_upstream_round_robin.c, ngx_http_upstream_tries), capped
//     by proxy_next_upstream_tries (default 0: no cap), and an upstream of
//     one server (or a plain address) is never retried (a single peer's
//     free sets tries to 0);
//   - a failure is passed on only while tries are left, it is in the mask,
//     and proxy_next_upstream_timeout (default 0: none) has not passed
//     since the first try; a POST, LOCK or PATCH already sent is passed on
//     only with non_idempotent (ngx_http_upstream.c, ngx_http_upstream_next
//     and ngx_http_upstream_test_next);
//   - an error and a timeout always count against the server's max_fails
//     (default 1) within fail_timeout (default 10s), a 5xx answer only when
//     it was passed on; a server at max_fails is left out for fail_timeout
//     (ngx_http_upstream_free_round_robin_peer, ngx_http_upstream_get_peer),
//     counted per worker process unless the upstream has a shared zone;
//   - proxy_read_timeout (default 60s) bounds each try's wait for the
//     answer, proxy_connect_timeout (60s) the connection.
//
// The ingress-nginx controller's ConfigMap sets the same directives for
// every Ingress (internal/ingress/controller/config/config.go, NewDefault:
// proxy-next-upstream "error timeout", proxy-next-upstream-tries 3,
// proxy-connect-timeout 5, proxy-read-timeout 60).

// nginx's defaults.
const (
	ngxReadTimeout    = 60 * time.Second
	ngxConnectTimeout = 60 * time.Second
	ngxMaxFails       = 1
	ngxFailTimeout    = 10 * time.Second
	ngxDefaultNext    = "error timeout"
)

// ngxUpstream is an upstream block.
type ngxUpstream struct {
	name, file   string
	line         int
	servers      []ngxServer
	balance      *ngxDirective // least_conn, random, ip_hash, hash: nil for round robin
	zone         bool          // a shared zone: one state for every worker
	worker, keep int
}

// ngxServer is one server line of an upstream.
type ngxServer struct {
	addr               string
	line               int
	maxFails           int
	failTimeout        time.Duration
	backup, down, mark bool
}

// ngxConfig is what the nginx files hold.
type ngxConfig struct {
	upstreams map[string]*ngxUpstream
	workers   *ngxDirective // worker_processes, if set
	locations []ngxLocation
}

// ngxLocation is a location that proxies, with the levels around it,
// outermost first (http, server, the locations it is nested in, itself).
type ngxLocation struct {
	file   string
	path   string
	line   int
	server string
	levels [][]*ngxDirective
	pass   *ngxDirective // proxy_pass or grpc_pass
}

func importNginx(srcs []Source, o Options) ([]Fleet, error) {
	cfg := &ngxConfig{upstreams: map[string]*ngxUpstream{}}
	var maps []Fleet
	for _, s := range srcs {
		if ingressConfigMap(s.Data) {
			fl, err := importIngressNginx(s)
			if err != nil {
				return nil, err
			}
			maps = append(maps, fl...)
			continue
		}
		ds, err := parseNginx(s.Name, s.Data)
		if err != nil {
			return nil, err
		}
		if err := cfg.read(s.Name, ds); err != nil {
			return nil, err
		}
	}
	if err := admit(NGINX, len(cfg.locations), "locations"); err != nil {
		return nil, err
	}
	var out fleetSet
	for _, f := range maps {
		out.add(f)
	}
	for _, l := range cfg.locations {
		f, err := cfg.fleet(l, o)
		if err != nil {
			return nil, err
		}
		out.add(f)
	}
	if len(out.list) == 0 {
		return nil, fmt.Errorf("%s: no location proxies (proxy_pass or grpc_pass): nothing is retried", srcs[0].Name)
	}
	return out.list, nil
}

// read collects the upstreams and the proxying locations of one file. A
// file may be a whole nginx.conf (an http block) or a part of one (the
// server and upstream blocks of conf.d/*.conf).
func (c *ngxConfig) read(file string, ds []*ngxDirective) error {
	if w := ngxLast(ds, "worker_processes"); w != nil {
		c.workers = w
	}
	top := ds
	for _, h := range ngxFind(ds, "http") {
		top = append(top, h.Block...)
		if err := c.readHTTP(file, h.Block); err != nil {
			return err
		}
	}
	if len(ngxFind(ds, "http")) == 0 {
		return c.readHTTP(file, top)
	}
	return nil
}

func (c *ngxConfig) readHTTP(file string, http []*ngxDirective) error {
	for _, u := range ngxFind(http, "upstream") {
		up, err := readUpstream(file, u)
		if err != nil {
			return err
		}
		c.upstreams[up.name] = up
	}
	for _, srv := range ngxFind(http, "server") {
		if !srv.block {
			continue
		}
		name := "_"
		if sn := ngxLast(srv.Block, "server_name"); sn != nil && len(sn.Args) > 0 {
			name = sn.Args[0]
		}
		c.readLocations(file, name, [][]*ngxDirective{http, srv.Block}, srv.Block)
	}
	return nil
}

// readLocations collects the proxying locations among ds, nested ones
// included, each with its levels.
func (c *ngxConfig) readLocations(file, server string, levels [][]*ngxDirective, ds []*ngxDirective) {
	for _, l := range ngxFind(ds, "location") {
		if !l.block || len(l.Args) == 0 {
			continue
		}
		lv := append(append([][]*ngxDirective(nil), levels...), l.Block)
		pass := ngxLast(l.Block, "proxy_pass")
		if g := ngxLast(l.Block, "grpc_pass"); g != nil {
			pass = g
		}
		if pass != nil && len(pass.Args) > 0 {
			c.locations = append(c.locations, ngxLocation{file: file, path: strings.Join(l.Args, " "), line: l.Line, server: server, levels: lv, pass: pass})
		}
		c.readLocations(file, server, lv, l.Block)
	}
}

// readUpstream reads an upstream block's servers and balancing.
func readUpstream(file string, u *ngxDirective) (*ngxUpstream, error) {
	if len(u.Args) != 1 || !u.block {
		return nil, fmt.Errorf("%s:%d: upstream: want a name and a block", file, u.Line)
	}
	up := &ngxUpstream{name: u.Args[0], file: file, line: u.Line}
	for _, d := range u.Block {
		switch d.Name {
		case "server":
			s, err := readServer(file, d)
			if err != nil {
				return nil, err
			}
			up.servers = append(up.servers, s)
		case "least_conn", "random", "ip_hash", "hash", "least_time":
			up.balance = d
		case "zone":
			up.zone = true
		}
	}
	if len(up.servers) == 0 {
		return nil, fmt.Errorf("%s:%d: upstream %s: no servers (nginx refuses it: \"no servers in upstream\")", file, u.Line, up.name)
	}
	return up, nil
}

// readServer reads an upstream's server line as ngx_http_upstream_server
// does: max_fails=N (default 1), fail_timeout=T (seconds, default 10s),
// weight=N, max_conns=N, backup, down; anything else is refused.
func readServer(file string, d *ngxDirective) (ngxServer, error) {
	if len(d.Args) == 0 {
		return ngxServer{}, fmt.Errorf("%s:%d: server: want an address", file, d.Line)
	}
	s := ngxServer{addr: d.Args[0], line: d.Line, maxFails: ngxMaxFails, failTimeout: ngxFailTimeout}
	for _, a := range d.Args[1:] {
		k, v, _ := strings.Cut(a, "=")
		var err error
		switch k {
		case "max_fails":
			s.maxFails, err = ngxInt(v)
		case "fail_timeout":
			s.failTimeout, err = ngxTime(v, true)
		case "weight":
			var w int
			if w, err = ngxInt(v); err == nil && w == 0 {
				err = fmt.Errorf("0")
			}
		case "max_conns":
			_, err = ngxInt(v)
		case "backup":
			s.backup = true
		case "down":
			s.down = true
		default:
			err = fmt.Errorf("unknown")
		}
		if err != nil {
			return ngxServer{}, fmt.Errorf("%s:%d: server %s: invalid parameter %q (nginx refuses it)", file, d.Line, s.addr, a)
		}
	}
	return s, nil
}

// ngxInt is ngx_atoi: digits only.
func ngxInt(s string) (int, error) {
	if s == "" || strings.TrimLeft(s, "0123456789") != "" || len(s) > 9 {
		return 0, fmt.Errorf("not a whole number")
	}
	return strconv.Atoi(s)
}

// ngxTime is ngx_parse_time: numbers with units, "1m30s"; a number alone
// is seconds; sec refuses milliseconds (fail_timeout is whole seconds).
func ngxTime(s string, sec bool) (time.Duration, error) {
	if s == "" {
		return 0, fmt.Errorf("empty")
	}
	units := map[string]time.Duration{"ms": time.Millisecond, "s": time.Second, "m": time.Minute, "h": time.Hour,
		"d": 24 * time.Hour, "w": 7 * 24 * time.Hour, "M": 30 * 24 * time.Hour, "y": 365 * 24 * time.Hour}
	var total time.Duration
	for s != "" {
		i := 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == 0 || i > 9 {
			return 0, fmt.Errorf("invalid time %q", s)
		}
		n, _ := strconv.Atoi(s[:i])
		s = s[i:]
		j := 0
		for j < len(s) && (s[j] < '0' || s[j] > '9') {
			j++
		}
		unit := time.Second
		if j > 0 {
			u, ok := units[s[:j]]
			if !ok || (sec && u == time.Millisecond) {
				return 0, fmt.Errorf("invalid unit %q", s[:j])
			}
			unit = u
		}
		if float64(total)+float64(n)*float64(unit) > math.MaxInt64/2 {
			return 0, fmt.Errorf("too long")
		}
		total += time.Duration(n) * unit
		s = s[j:]
	}
	return total, nil
}

// ngxEffective returns the directives called name at the innermost level
// of levels that has any: nginx's inheritance, an inner level replacing
// an outer one.
func ngxEffective(levels [][]*ngxDirective, names ...string) []*ngxDirective {
	for i := len(levels) - 1; i >= 0; i-- {
		var out []*ngxDirective
		for _, n := range names {
			out = append(out, ngxFind(levels[i], n)...)
		}
		if len(out) > 0 {
			return out
		}
	}
	return nil
}

// ngxSet notes that setting took value from directive d, in p's file.
func ngxSet(p *prov, setting, value string, d *ngxDirective) *Provenance {
	return p.set(setting, value, d.Name).atLine(d.Line, lineAfter)
}

// fleet builds the fleet of one proxying location.
func (c *ngxConfig) fleet(l ngxLocation, o Options) (Fleet, error) {
	p := &prov{file: l.file}
	grpc := l.pass.Name == "grpc_pass"
	prefix := "proxy_"
	if grpc {
		prefix = "grpc_"
	}
	f := scenario.Fleet{Name: strings.TrimSpace(strings.TrimPrefix(l.server+" ", "_ ") + l.path), Retry: scenario.Retry{Backoff: noBackoff}}
	f.Product = string(giveup.NGINX)
	p.note("product", "nginx", "nginx gives up with 502 after an error and 504 after a timeout, and passes a failed answer on (ngx_http_upstream.c, ngx_http_upstream_next)")
	if grpc {
		f.Protocol = scenario.ProtocolGRPC
		ngxSet(p, "protocol", "grpc", l.pass)
	}
	up, target := c.target(l.pass)
	origin := fmt.Sprintf("%s: location %s (line %d)", l.file, l.path, l.line)
	if up != nil {
		origin = fmt.Sprintf("%s: location %s (line %d, upstream %s)", l.file, l.path, l.line, up.name)
	}
	if err := ngxTimeouts(p, &f, l, prefix); err != nil {
		return Fleet{}, err
	}
	on, nonIdem, err := ngxNext(p, l, prefix)
	if err != nil {
		return Fleet{}, err
	}
	tries, err := ngxTries(p, l, prefix, up, target)
	if err != nil {
		return Fleet{}, err
	}
	if len(on) > 0 && tries > 1 {
		f.Retry.MaxRetries = tries - 1
		if len(on) < len(giveup.Kinds) {
			f.Retry.On = on
		}
		f.Retry.IdempotentOnly = !nonIdem
		p.note("retry.idempotent_only", strconv.FormatBool(!nonIdem), "a POST, LOCK or PATCH already sent is passed on only with non_idempotent (ngx_http_upstream_next)")
		p.lose("a request that was not sent yet (a refused connection) is passed on whatever its method; the simulator's idempotent_only holds back every retry of a non-idempotent intent")
		p.lose("nginx passes each try to a server not tried yet for the request; the simulator's retries pick as the balancer does and may go back to one")
	}
	f.Budget = scenario.Budget{Use: scenario.BudgetNone}
	p.note("budget", "none", "nginx has no retry budget: the tries bound the retries")
	p.note("retry.backoff", "none", "nginx passes a request to the next server at once")
	replicas := 0
	if up != nil {
		replicas = c.balance(p, &f, up)
	}
	return Fleet{Fleet: f, Format: NGINX, File: l.file, Origin: origin, From: p.list, Lost: p.lost, Replicas: replicas}, nil
}

// target is the upstream a proxy_pass names, or else the plain address.
func (c *ngxConfig) target(pass *ngxDirective) (*ngxUpstream, string) {
	u := pass.Args[0]
	if _, rest, ok := strings.Cut(u, "://"); ok {
		u = rest
	}
	host, _, _ := strings.Cut(u, "/")
	if up := c.upstreams[host]; up != nil {
		return up, host
	}
	return nil, host
}

// ngxTimeouts maps proxy_read_timeout (each try's wait for the answer)
// and proxy_next_upstream_timeout (no new try after it).
func ngxTimeouts(p *prov, f *scenario.Fleet, l ngxLocation, prefix string) error {
	read, err := ngxDuration(p, l, prefix+"read_timeout", "timeout", ngxReadTimeout, "60s")
	if err != nil {
		return err
	}
	f.Timeout = p.wait(prefix+"read_timeout", max(read, time.Millisecond), 0)
	if d := ngxEffective(l.levels, prefix+"connect_timeout"); d != nil {
		p.lose("%s (line %d): the simulator's connections are made at once; a black-holed server is waited for until the read timeout", prefix+"connect_timeout", d[0].Line)
	}
	next, err := ngxDuration(p, l, prefix+"next_upstream_timeout", "deadline", 0, "0: no limit")
	if err != nil {
		return err
	}
	if next > 0 {
		f.Deadline = p.wait(prefix+"next_upstream_timeout", next, 0)
		p.lose("%snext_upstream_timeout stops passing the request on once it has passed, and lets the try in flight finish; the simulator's deadline also ends that try", prefix)
	}
	return nil
}

// ngxDuration reads a time directive's effective value, noting it as
// setting, or its default.
func ngxDuration(p *prov, l ngxLocation, name, setting string, dflt time.Duration, shown string) (time.Duration, error) {
	ds := ngxEffective(l.levels, name)
	if len(ds) == 0 {
		p.dflt(setting, fmtDur(dflt), name, "nginx's default, "+shown)
		return dflt, nil
	}
	d := ds[len(ds)-1]
	if len(ds) > 1 {
		return 0, fmt.Errorf("%s:%d: %s: is duplicate (nginx refuses it)", l.file, d.Line, name)
	}
	if len(d.Args) != 1 {
		return 0, fmt.Errorf("%s:%d: %s: want one time", l.file, d.Line, name)
	}
	v, err := ngxTime(d.Args[0], false)
	if err != nil {
		return 0, fmt.Errorf("%s:%d: %s: %q: %v (nginx refuses it)", l.file, d.Line, name, d.Args[0], err)
	}
	ngxSet(p, setting, fmtDur(v), d)
	return v, nil
}
