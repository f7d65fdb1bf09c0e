package importer

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/retrystorm/retrystorm/giveup"
	"github.com/retrystorm/retrystorm/scenario"
)

// HAProxy's retries, read as HAProxy 2.6 reads them (doc/configuration.txt
// at v2.6.0, sections 4.2 and 5.2; src/backend.c and src/stream.c):
//
//   - retries (default 3): the retries of a request, to the same server,
//     on the failures retry-on names; "option redispatch" sends the last
//     one to another server;
//   - retry-on (default conn-failure): conn-failure (the connection was
//     refused or timed out before the request was sent), response-timeout
//     (timeout server struck), empty-response, junk-response,
//     0rtt-rejected, the statuses 401, 403, 404, 408, 425, 500, 501, 502,
//     503, 504, all-retryable-errors; a later retry-on replaces an earlier
//     one; in mode tcp only connections are retried;
//   - a turn-around timer of min(timeout connect, 1s) before each retry;
//   - timeout server (no default: none) bounds each try's wait for the
//     answer, timeout connect (no default) the connection;
//   - balance (default roundrobin); random draws 2 and takes the less
//     loaded by default;
//   - observe layer4|layer7 on a server with check: error-limit (default
//     10) consecutive errors trigger on-error (default fail-check):
//     fastinter, fail-check, sudden-death or mark-down; a server marked
//     down comes back after rise (default 2) good checks, inter (2s)
//     apart.
//
// HAProxy gives up with 503 when no connection could be made and 504 on a
// server timeout, and forwards a server's answer.

// HAProxy's defaults.
const (
	hapRetries    = 3
	hapRetryOn    = "conn-failure"
	hapErrorLimit = 10
	hapInter      = 2 * time.Second
	hapRise       = 2
)

// hapSetting is one setting of a proxy and where it was read; At is nil
// for a default.
type hapSetting struct {
	Words []string
	At    *hapLine
	File  string
}

// hapProxy is a backend or a listen section, with the settings of its
// defaults section and its own, the later replacing the earlier.
type hapProxy struct {
	sec      *hapSection
	file     string
	settings map[string]hapSetting // by key: "retries", "retry-on", "redispatch", "timeout connect", ...
	servers  []hapServer
}

// hapServer is one server line, with default-server's parameters first.
type hapServer struct {
	name, addr string
	line       int
	params     map[string]string // check, backup, disabled: ""; the others their value
}

func importHAProxy(srcs []Source, o Options) ([]Fleet, error) {
	proxies, err := hapProxies(srcs)
	if err != nil {
		return nil, err
	}
	if err := admit(HAProxy, len(proxies), "backends"); err != nil {
		return nil, err
	}
	var out fleetSet
	for _, px := range proxies {
		f, err := px.fleet(o)
		if err != nil {
			return nil, err
		}
		out.add(f)
	}
	if len(out.list) == 0 {
		return nil, fmt.Errorf("%s: no backend or listen section has a server: nothing is retried", srcs[0].Name)
	}
	return out.list, nil
}

// hapProxies reads the backend and listen sections of the files that have
// servers, each with the settings of its defaults section and its own.
func hapProxies(srcs []Source) ([]*hapProxy, error) {
	var proxies []*hapProxy
	defs := map[string]map[string]hapSetting{}
	var last map[string]hapSetting
	for _, s := range srcs {
		secs, err := parseHAProxy(s.Name, s.Data)
		if err != nil {
			return nil, err
		}
		for _, sec := range secs {
			switch sec.Kind {
			case "defaults":
				base := last
				if sec.From != "" {
					base = defs[sec.From]
				}
				d := hapApply(s.Name, base, sec)
				last = d
				if sec.Name != "" {
					defs[sec.Name] = d
				}
			case "backend", "listen":
				base := last
				if sec.From != "" {
					if base = defs[sec.From]; base == nil {
						return nil, fmt.Errorf("%s:%d: %s %s: no defaults section named %q (HAProxy refuses it)", s.Name, sec.Line, sec.Kind, sec.Name, sec.From)
					}
				}
				px := &hapProxy{sec: sec, file: s.Name, settings: hapApply(s.Name, base, sec)}
				if err := px.readServers(); err != nil {
					return nil, err
				}
				if len(px.servers) > 0 {
					proxies = append(proxies, px)
				}
			}
		}
	}
	return proxies, nil
}

// hapApply returns base's settings with those of sec's lines in place.
func hapApply(file string, base map[string]hapSetting, sec *hapSection) map[string]hapSetting {
	out := make(map[string]hapSetting, len(base)+8)
	for k, v := range base {
		out[k] = v
	}
	for i := range sec.Lines {
		l := &sec.Lines[i]
		w := l.Words
		set := func(key string, words []string) { out[key] = hapSetting{Words: words, At: l, File: file} }
		switch {
		case w[0] == "retries" || w[0] == "retry-on" || w[0] == "balance" || w[0] == "mode" || w[0] == "default-server":
			set(w[0], w[1:])
		case w[0] == "timeout" && len(w) > 1:
			set("timeout "+w[1], w[2:])
		case w[0] == "option" && len(w) > 1 && w[1] == "redispatch":
			set("redispatch", w[2:])
		case w[0] == "no" && len(w) > 2 && w[1] == "option" && w[2] == "redispatch":
			set("redispatch", []string{"0"})
		}
	}
	return out
}

// readServers reads the proxy's server lines, each after default-server.
func (px *hapProxy) readServers() error {
	var defaults []string
	if d, ok := px.settings["default-server"]; ok {
		defaults = d.Words
	}
	for _, l := range px.sec.Lines {
		if l.Words[0] != "server" {
			continue
		}
		if len(l.Words) < 2 {
			return fmt.Errorf("%s:%d: server: want a name and an address", px.file, l.Line)
		}
		s := hapServer{name: l.Words[1], line: l.Line, params: map[string]string{}}
		if len(l.Words) > 2 {
			s.addr = l.Words[2]
		}
		for _, ws := range [][]string{defaults, l.Words[min(3, len(l.Words)):]} {
			for i := 0; i < len(ws); i++ {
				switch k := ws[i]; k {
				case "check", "backup", "disabled", "no-check", "enabled":
					s.params[k] = ""
				case "inter", "fastinter", "rise", "fall", "observe", "error-limit", "on-error", "weight":
					if i+1 >= len(ws) {
						return fmt.Errorf("%s:%d: server %s: %s needs a value (HAProxy refuses it)", px.file, l.Line, s.name, k)
					}
					s.params[k] = ws[i+1]
					i++
				}
			}
		}
		if _, ok := s.params["no-check"]; ok {
			delete(s.params, "check")
		}
		px.servers = append(px.servers, s)
	}
	return nil
}

// at is where a setting came from: its file, its line, and the line's
// words.
func (st hapSetting) at() Provenance {
	return Provenance{File: st.File, Path: strings.Join(st.At.Words, " "), Line: st.At.Line}
}

// fleet builds the fleet of one backend.
func (px *hapProxy) fleet(o Options) (Fleet, error) {
	p := &prov{file: px.file}
	f := scenario.Fleet{Name: px.sec.Kind + " " + px.sec.Name, Retry: scenario.Retry{Backoff: noBackoff}}
	f.Product = string(giveup.HAProxy)
	p.note("product", "haproxy", "HAProxy gives up with 503 when no connection could be made and 504 on a server timeout, and forwards a server's answer")
	origin := fmt.Sprintf("%s: %s %s (line %d)", px.file, px.sec.Kind, px.sec.Name, px.sec.Line)
	if err := px.timeouts(p, &f); err != nil {
		return Fleet{}, err
	}
	if err := px.retries(p, &f); err != nil {
		return Fleet{}, err
	}
	f.Budget = scenario.Budget{Use: scenario.BudgetNone}
	p.note("budget", "none", "HAProxy has no retry budget: retries bounds the retries")
	replicas, err := px.balance(p, &f)
	if err != nil {
		return Fleet{}, err
	}
	return Fleet{Fleet: f, Format: HAProxy, File: px.file, Origin: origin, From: p.list, Lost: p.lost, Replicas: replicas}, nil
}

// timeouts maps timeout server (each try's wait) and timeout connect.
func (px *hapProxy) timeouts(p *prov, f *scenario.Fleet) error {
	st, ok := px.settings["timeout server"]
	if !ok {
		f.Timeout = maxTimeout
		p.dflt("timeout", "none", "timeout server", "HAProxy has none: a try waits as long as the server takes")
		p.lose("no timeout server: attempts are given %s, the longest the simulator takes", fmtDur(maxTimeout))
		return nil
	}
	if len(st.Words) != 1 {
		return fmt.Errorf("%s:%d: timeout server: want one time", st.File, st.At.Line)
	}
	d, err := hapTime(st.Words[0])
	if err != nil {
		return fmt.Errorf("%s:%d: timeout server: %v (HAProxy refuses it)", st.File, st.At.Line, err)
	}
	f.Timeout = p.wait("timeout server", max(d, time.Millisecond), 0)
	p.took("timeout", fmtDur(d), st.at())
	if c, ok := px.settings["timeout connect"]; ok {
		p.lose("timeout connect (%s:%d): the simulator's connections are made at once; a black-holed server is waited for until timeout server", c.File, c.At.Line)
	}
	return nil
}

// hapConditions maps retry-on's keywords to the simulator's failures; ""
// for one it makes no failure of.
var hapConditions = map[string][]string{
	"none": nil, "conn-failure": {scenario.RetryOnRefused}, "response-timeout": {scenario.RetryOnTimeout},
	"500": {scenario.RetryOnError}, "502": {scenario.RetryOnGateway}, "503": {scenario.RetryOnRejection}, "504": {scenario.RetryOnGateway},
	"empty-response": {""}, "junk-response": {""}, "0rtt-rejected": {""},
	"401": {""}, "403": {""}, "404": {""}, "408": {""}, "425": {""}, "501": {""},
	"all-retryable-errors": {scenario.RetryOnRefused, scenario.RetryOnTimeout, scenario.RetryOnError, scenario.RetryOnGateway, scenario.RetryOnRejection, ""},
}

// retries maps retries, retry-on, option redispatch and the turn-around
// timer.
func (px *hapProxy) retries(p *prov, f *scenario.Fleet) error {
	n := hapRetries
	if st, ok := px.settings["retries"]; ok {
		v, err := strconv.Atoi(strings.Join(st.Words, " "))
		if err != nil || v < 0 || len(st.Words) != 1 {
			return fmt.Errorf("%s:%d: retries: want a whole number (HAProxy refuses %q)", st.File, st.At.Line, strings.Join(st.Words, " "))
		}
		n = p.count("retries", int64(v))
		p.took("retry.max_retries", strconv.Itoa(n), st.at())
	} else {
		p.dflt("retry.max_retries", "3", "retries", "HAProxy's default, 3")
	}
	words, where := []string{hapRetryOn}, Provenance{Default: true, Path: "retry-on", Rule: "HAProxy's default, conn-failure"}
	if st, ok := px.settings["retry-on"]; ok {
		words, where = st.Words, st.at()
	}
	// HAProxy's default mode is tcp (configuration.txt, "mode"): a proxy
	// that never says mode http forwards bytes, and retries connections
	// alone whatever retry-on says.
	if m, ok := px.settings["mode"]; !ok || len(m.Words) == 0 {
		words, where = []string{"conn-failure"}, Provenance{Default: true, Path: "mode", Rule: "mode unset; HAProxy's default, tcp: only connections are retried in mode tcp"}
	} else if m.Words[0] == "tcp" {
		words, where = []string{"conn-failure"}, m.at()
		where.by(afterColon, "only connections are retried in mode tcp")
	}
	set := map[string]bool{}
	for _, w := range words {
		kinds, ok := hapConditions[w]
		if !ok {
			return fmt.Errorf("%s: retry-on: unknown keyword %q (HAProxy refuses it)", px.file, w)
		}
		for _, k := range kinds {
			if k == "" {
				p.lose("retry-on %s: the simulator's origin makes no such failure", w)
				continue
			}
			set[k] = true
		}
	}
	var on []string
	for _, k := range giveup.Kinds {
		if set[k] {
			on = append(on, k)
		}
	}
	p.took("retry.on", "["+strings.Join(on, ", ")+"]", where)
	if len(on) == 0 || n == 0 {
		p.note("retry.max_retries", "0", "nothing is retried")
		return nil
	}
	f.Retry.MaxRetries = n
	if len(on) < len(giveup.Kinds) {
		f.Retry.On = on
	}
	turn := time.Second
	if c, ok := px.settings["timeout connect"]; ok && len(c.Words) == 1 {
		if d, err := hapTime(c.Words[0]); err == nil {
			turn = max(min(d, time.Second), time.Millisecond)
		}
	}
	f.Retry.Backoff = scenario.Backoff{Use: "fixed", Base: turn, Jitter: "none"}
	p.note("retry.backoff", "fixed "+fmtDur(turn), "HAProxy's turn-around timer, min(timeout connect, 1s), before a retry")
	if len(on) > 1 || on[0] != scenario.RetryOnRefused {
		p.lose("the turn-around timer paces the retries of connections; HAProxy 2.6 retries a status or a server timeout at once (measured: importer's TestRealHAProxyRetries), where the simulator waits it for every retry")
	}
	p.lose("conn-failure also retries a connection that timed out (timeout connect); the simulator's black-holed replica times out at timeout server, a timeout")
	if st, ok := px.settings["redispatch"]; ok && !(len(st.Words) == 1 && st.Words[0] == "0") {
		p.lose("option redispatch (%s:%d): the last retry goes to another server, the others to the same; the simulator's retries pick as the balancer does", st.File, st.At.Line)
	} else {
		p.lose("without option redispatch HAProxy retries the same server; the simulator's retries pick as the balancer does")
	}
	return nil
}
