package importer

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/retrystorm/retrystorm/giveup"
	"github.com/retrystorm/retrystorm/resil/outlier"
	"github.com/retrystorm/retrystorm/scenario"
)

// ngxConditions maps proxy_next_upstream's values to the simulator's
// failures (ngx_http_upstream_next: error is a failure to connect, send
// or read, which a refused connection is; timeout the connect or read
// timeout; http_5xx an answer of that status): an error answer is 500,
// an overload rejection 503 or 429, a gateway answer 502 or 504 (a tier
// below that gave up). "" for a value the simulator makes no failure of.
var ngxConditions = map[string]string{
	"error": scenario.RetryOnRefused, "timeout": scenario.RetryOnTimeout,
	"http_500": scenario.RetryOnError, "http_502": scenario.RetryOnGateway, "http_503": scenario.RetryOnRejection,
	"http_504": scenario.RetryOnGateway, "http_429": scenario.RetryOnRejection,
	"invalid_header": "", "http_403": "", "http_404": "", "updating": "", "non_idempotent": "", "off": "",
}

// ngxNext reads proxy_next_upstream at the innermost level that sets it
// (the values of its occurrences there OR'ed), or its default, "error
// timeout": the failures retried, and non_idempotent.
func ngxNext(p *prov, l ngxLocation, prefix string) (on []string, nonIdem bool, err error) {
	name := prefix + "next_upstream"
	ds := ngxEffective(l.levels, name)
	var values []string
	where := Provenance{Default: true, Path: name, Rule: "nginx's default, " + ngxDefaultNext}
	if len(ds) == 0 {
		values = strings.Fields(ngxDefaultNext)
	} else {
		for _, d := range ds {
			if len(d.Args) == 0 {
				return nil, false, fmt.Errorf("%s:%d: %s: want one or more values", l.file, d.Line, name)
			}
			values = append(values, d.Args...)
		}
		d := ds[len(ds)-1]
		where = Provenance{File: l.file, Path: d.Name, Line: d.Line}
	}
	set := map[string]bool{}
	for _, v := range values {
		k, ok := ngxConditions[strings.ToLower(v)] // nginx compares case-insensitively
		if !ok {
			return nil, false, fmt.Errorf("%s:%d: %s: invalid value %q (nginx refuses it)", l.file, ds[0].Line, name, v)
		}
		switch strings.ToLower(v) {
		case "off":
			p.took("retry.max_retries", "0", where).by(afterColon, "off")
			return nil, false, nil
		case "non_idempotent":
			nonIdem = true
		case "invalid_header", "http_403", "http_404", "updating":
			p.lose("%s %s: the simulator's origin makes no such failure", name, v)
		}
		if k != "" {
			set[k] = true
		}
	}
	for _, k := range giveup.Kinds {
		if set[k] {
			on = append(on, k)
		}
	}
	p.took("retry.on", "["+strings.Join(on, ", ")+"]", where)
	return on, nonIdem, nil
}

// ngxTries is how many tries a request may have: the servers of the
// upstream not down (primary and backup), capped by
// proxy_next_upstream_tries; one for an upstream of one server or a plain
// address.
func ngxTries(p *prov, l ngxLocation, prefix string, up *ngxUpstream, target string) (int, error) {
	servers := 1
	switch {
	case up == nil && strings.Contains(target, "$"):
		p.lose("%s %s: the upstream is chosen per request by a variable; one try is imported", l.pass.Name, l.pass.Args[0])
	case up == nil:
		p.set("retry.max_retries", "0", l.pass.Name+" "+l.pass.Args[0]).atLine(l.pass.Line, lineUnwritten).
			by(afterSpace, "is one address, not an upstream: one try (a name that resolves to several addresses is tried at each)")
	default:
		servers = up.tries()
		p.in(up.file).set("tries", strconv.Itoa(servers), "upstream "+up.name).atLine(up.line, lineAfter).by(afterColon, "its servers not down, each tried at most once per request")
	}
	name := prefix + "next_upstream_tries"
	ds := ngxEffective(l.levels, name)
	if len(ds) == 0 {
		p.dflt("retry.max_retries", strconv.Itoa(max(servers-1, 0)), name, "nginx's default, 0: the servers bound the tries")
		return servers, nil
	}
	d := ds[len(ds)-1]
	if len(ds) > 1 || len(d.Args) != 1 {
		return 0, fmt.Errorf("%s:%d: %s: want one number, once (nginx refuses a duplicate)", l.file, d.Line, name)
	}
	n, err := ngxInt(d.Args[0])
	if err != nil {
		return 0, fmt.Errorf("%s:%d: %s: %q is not a number (nginx refuses it)", l.file, d.Line, name, d.Args[0])
	}
	if n > 0 && n < servers {
		servers = n
	}
	ngxSet(p, "retry.max_retries", strconv.Itoa(max(servers-1, 0)), d).by(afterComma, "less the first try")
	return servers, nil
}

// tries is how many tries up's servers allow a request: those not down,
// primary and backup, each tried once; one for an upstream of one server
// or of backups alone (ngx_http_upstream_round_robin.c,
// ngx_http_upstream_init_round_robin and ngx_http_upstream_tries).
func (up *ngxUpstream) tries() int {
	primary, servers := 0, 0
	for _, s := range up.servers {
		if !s.down {
			servers++
		}
		if !s.backup {
			primary++
		}
	}
	if len(up.servers) == 1 || primary == 0 {
		servers = min(servers, 1)
	}
	return servers
}

// balance maps an upstream's balancing method and its servers' max_fails
// and fail_timeout, and returns its primary servers (the replicas).
func (c *ngxConfig) balance(p *prov, f *scenario.Fleet, up *ngxUpstream) int {
	p = p.in(up.file)
	primary := 0
	var backups []string
	for _, s := range up.servers {
		switch {
		case s.backup:
			backups = append(backups, s.addr)
		case !s.down:
			primary++
		}
	}
	at := "upstream " + up.name
	p.set("origin.replicas", strconv.Itoa(primary), at).atLine(up.line, lineAfter).by(afterColon, "its servers not down or backup")
	if len(backups) > 0 {
		p.lose("backup servers (%s): nginx sends to them only once every primary is unavailable; the simulator's replicas are all primary", strings.Join(backups, ", "))
	}
	if primary < 2 {
		return primary
	}
	use := scenario.BalancerRoundRobin
	if b := up.balance; b == nil {
		p.dflt("balancer.use", use, at, "nginx's weighted round robin").atLine(up.line, lineAfter)
	} else {
		switch args := strings.Join(b.Args, " "); {
		case b.Name == "least_conn":
			use = scenario.BalancerLeastRequest
		case b.Name == "random" && strings.HasPrefix(args, "two"):
			use = scenario.BalancerP2C
		case b.Name == "random":
			use = scenario.BalancerRandom
		default:
			p.lose("%s (line %d): not modelled; the fleet picks round robin", b.Name, b.Line)
		}
		ngxSet(p, "balancer.use", use, b)
	}
	f.Balancer = scenario.Balancer{Use: use}
	p.note("balancer.settings.panic_threshold", "0", "nginx has no panic mode: with every server unavailable it answers 502 (no live upstreams)")
	ngxPassive(p, f, up)
	return primary
}

// ngxPassive maps max_fails and fail_timeout (the first server's: the
// simulator has one detector setting) to resil/outlier's Envoy rules: a
// server at max_fails failures is ejected for fail_timeout, never longer;
// with the default proxy_next_upstream only errors and timeouts count, so
// they alone feed the count (local-origin failures), else every 5xx does.
func ngxPassive(p *prov, f *scenario.Fleet, up *ngxUpstream) {
	var primary []ngxServer
	for _, s := range up.servers {
		if !s.backup && !s.down {
			primary = append(primary, s)
		}
	}
	s0 := primary[0]
	for _, s := range primary[1:] {
		if s.maxFails != s0.maxFails || s.failTimeout != s0.failTimeout {
			p.lose("servers with other max_fails or fail_timeout than the first (%s): the first's apply to every server", s0.addr)
			break
		}
	}
	at := "server " + s0.addr
	if s0.maxFails == 0 {
		p.set("outlier_detection", "none", at).atLine(s0.line, lineAfter).by(afterColon, "max_fails=0 turns the accounting off")
		return
	}
	connects := !slices.Contains(f.Retry.On, scenario.RetryOnError) && !slices.Contains(f.Retry.On, scenario.RetryOnRejection) && !slices.Contains(f.Retry.On, scenario.RetryOnGateway)
	st := inARow(s0.maxFails, s0.failTimeout, connects)
	p.set("outlier_detection.settings", fmt.Sprintf("%d failures eject for %s", s0.maxFails, fmtDur(s0.failTimeout)), at).atLine(s0.line, lineAfter).by(afterColon, "max_fails and fail_timeout (defaults 1 and 10s)")
	p.lose("max_fails counts failures within fail_timeout of each other, not in a row, and a server back from fail_timeout is left out again at its next failure; the simulator's detector counts them in a row")
	if up.zone {
		p.note("outlier_detection (scope)", "per nginx", fmt.Sprintf("upstream %s has a shared zone: one count for the workers of each nginx; each of the scenario's clients is one nginx", up.name))
	} else {
		p.note("outlier_detection (scope)", "per worker", fmt.Sprintf("upstream %s has no zone: each worker process counts on its own; each of the scenario's clients is one worker", up.name))
	}
	f.OutlierDetection = scenario.OutlierDetection{Use: scenario.OutlierEnvoy, Settings: st}
}

// inARow is a passive health check as resil/outlier's Envoy rules: n
// failures in a row (failures to connect alone when connects, else every
// 5xx and failure) eject a server for back, never longer, up to every
// server, evaluated at least each second; nothing else ejects. nginx's
// max_fails and HAProxy's observe are both this.
func inARow(n int, back time.Duration, connects bool) outlier.Settings {
	back = max(back, time.Millisecond)
	st := outlier.EnvoyDefaults(0)
	st.Flavor, st.MaxEjectionRule = 0, outlier.CheckAfter
	st.MaxEjectionPercent, st.Interval = 100, min(time.Second, back)
	st.BaseEjectionTime, st.MaxEjectionTime = back, back
	st.ConsecutiveGatewayFailure, st.Enforcing.ConsecutiveGatewayFailure = 0, 0
	st.Enforcing.SuccessRate, st.Enforcing.LocalOriginSuccessRate = 0, 0
	if connects {
		st.Consecutive5xx, st.Enforcing.Consecutive5xx = 0, 0
		st.SplitExternalLocalOriginErrors, st.ConsecutiveLocalOriginFailure = true, n
	} else {
		st.Consecutive5xx = n
	}
	return st
}
