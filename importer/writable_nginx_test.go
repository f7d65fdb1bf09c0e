package importer

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/scenario"
)

// ngxConf is a whole nginx.conf: upstream app of servers (one server line
// each, as written), a server block with the directives srv, and its
// location / proxying to app (to a plain address when servers is empty)
// with the directives loc.
func ngxConf(servers []string, srv, loc string) string {
	var ups strings.Builder
	pass := "http://10.0.9.1:8080"
	if len(servers) > 0 {
		pass = "http://app"
		ups.WriteString("    upstream app {\n")
		for _, s := range servers {
			fmt.Fprintf(&ups, "        %s\n", s)
		}
		ups.WriteString("    }\n")
	}
	return fmt.Sprintf(`events { worker_connections 64; }
http {
%s    server {
        listen 8080;
%s
        location / {
            proxy_pass %s;
%s
        }
    }
}
`, ups.String(), srv, pass, loc)
}

func servers(n int, params string) []string {
	var out []string
	for i := range n {
		out = append(out, strings.TrimSpace(fmt.Sprintf("server 10.0.0.%d:8080 %s", i+1, params))+";")
	}
	return out
}

// ngxCandidates imports conf as nginx.conf and returns its location's
// space, each candidate checked as TestWritable checks them.
func ngxCandidates(t *testing.T, conf string, cond bool) (Fleet, map[string]Candidate) {
	t.Helper()
	return writableOf(t, []Source{{Name: "nginx.conf", Data: []byte(conf)}}, "location /", WritableOptions{Conditions: cond})
}

// ngxNextKinds is proxy_next_upstream's values as the simulator's
// failures, written from nginx's ngx_http_upstream_next_errors (release
// 1.22.1, ngx_http_upstream.c) and docs/semantics.md's nginx table: error
// is a failed connection, timeout the read timeout, 502 and 504 a gateway
// that gave up, 503 an overload rejection.
var ngxNextKinds = map[string]string{"error": scenario.RetryOnRefused, "timeout": scenario.RetryOnTimeout,
	"http_502": scenario.RetryOnGateway, "http_504": scenario.RetryOnGateway, "http_503": scenario.RetryOnRejection}

// ngxReadsAsNamed checks that c's fleet is what its name says, by nginx's
// rules (release-1.22.1): proxy_next_upstream_tries N allows N tries, but
// a request tries each server at most once
// (ngx_http_upstream_round_robin.c), so min(N, servers) - 1 retries;
// proxy_next_upstream_timeout T passes nothing on after T (the fleet's
// deadline); max_fails=N takes a server out after N failures for
// fail_timeout (ngx_http_upstream_free_round_robin_peer); the values of
// proxy_next_upstream are what is passed on.
func ngxReadsAsNamed(t *testing.T, c Candidate, servers int) {
	t.Helper()
	f := c.Fleet.Fleet
	od := f.OutlierDetection.Settings
	for _, part := range strings.Split(strings.TrimSuffix(c.Name, " (no retries)"), ", ") {
		words := strings.Fields(part)
		switch {
		case strings.HasSuffix(words[0], "_next_upstream_tries"):
			n, _ := strconv.Atoi(words[1])
			if want := min(n, servers) - 1; f.Retry.MaxRetries != want {
				t.Errorf("%q: %d retries, want %d", c.Name, f.Retry.MaxRetries, want)
			}
		case strings.HasSuffix(words[0], "_next_upstream_timeout"):
			d, _ := time.ParseDuration(words[1])
			if f.Deadline != d {
				t.Errorf("%q: deadline %v, want %v", c.Name, f.Deadline, d)
			}
		case strings.HasSuffix(words[0], "_next_upstream"):
			retriesOnNamed(t, c, words[1:], ngxNextKinds)
		case strings.HasPrefix(part, "max_fails="):
			n, _ := strconv.Atoi(strings.TrimPrefix(part, "max_fails="))
			if got := max(od.Consecutive5xx, od.ConsecutiveLocalOriginFailure*b2i(od.SplitExternalLocalOriginErrors)); f.OutlierDetection.Use != scenario.OutlierEnvoy || got != n {
				t.Errorf("%q: ejects after %d failures, want %d", c.Name, got, n)
			}
		case strings.HasPrefix(part, "fail_timeout="):
			d, _ := time.ParseDuration(strings.TrimPrefix(part, "fail_timeout="))
			if od.BaseEjectionTime != d || od.MaxEjectionTime != d {
				t.Errorf("%q: ejects for %v to %v, want %v", c.Name, od.BaseEjectionTime, od.MaxEjectionTime, d)
			}
		case part != AsItIs:
			t.Errorf("%q: %q is no setting of nginx's space", c.Name, part)
		}
	}
}

// retriesOnNamed checks that c retries the failures that words name, each
// word's failure in kinds.
func retriesOnNamed(t *testing.T, c Candidate, words []string, kinds map[string]string) {
	t.Helper()
	var want []string
	for _, w := range words {
		if !slices.Contains(want, kinds[w]) {
			want = append(want, kinds[w])
		}
	}
	if f := c.Fleet.Fleet; f.Retry.MaxRetries == 0 || !sameKinds(f.Retry.On, want) {
		t.Errorf("%q: %d retries on %v, want retries on %v", c.Name, f.Retry.MaxRetries, f.Retry.On, want)
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// ngxKeepsLimits checks that no candidate removes a limit the user has:
// proxy_next_upstream_tries 0 (no limit) and max_fails=0 (no accounting)
// are never written, a next_upstream_timeout stays or gets shorter, and
// passive health stays.
func ngxKeepsLimits(t *testing.T, from Fleet, cands map[string]Candidate) {
	t.Helper()
	for n, c := range cands {
		for _, e := range c.Edited {
			if s := string(e.After); strings.Contains(s, "_tries 0;") || strings.Contains(s, "max_fails=0") && !strings.Contains(string(e.Before), "max_fails=0") {
				t.Errorf("%q writes a limit off:\n%s", n, e.Diff)
			}
		}
		f := c.Fleet.Fleet
		if d := from.Fleet.Deadline; d > 0 && (f.Deadline == 0 || f.Deadline > d) {
			t.Errorf("%q: deadline %v, yours %v", n, f.Deadline, d)
		}
		if from.Fleet.OutlierDetection.Use == scenario.OutlierEnvoy && f.OutlierDetection.Use != scenario.OutlierEnvoy {
			t.Errorf("%q removes max_fails", n)
		}
	}
}

// TestWritableNginxTries: the retries nginx can be told are bounded by the
// upstream's servers, each tried at most once per request
// (ngx_http_upstream_round_robin.c, ngx_http_upstream_tries: the servers
// not down, backups included; one for a single server); "off" passes
// nothing on, so only --conditions makes a candidate that retries.
func TestWritableNginxTries(t *testing.T) {
	for _, c := range []struct {
		name    string
		servers []string
		loc     string
		cond    bool
		tries   int   // the tries the servers allow
		retries []int // the retry counts of the candidates, the user's among them
	}{
		{"six servers", servers(6, ""), "", false, 6, []int{0, 1, 2, 3, 5}},
		{"two servers", servers(2, ""), "", false, 2, []int{0, 1}},
		{"three and a backup", append(servers(3, ""), "server 10.0.0.9:8080 backup;"), "proxy_next_upstream_tries 3;", false, 4, []int{0, 1, 2, 3}},
		{"one of three down", append(servers(2, ""), "server 10.0.0.3:8080 down;"), "", false, 2, []int{0, 1}},
		{"one server", servers(1, ""), "", false, 1, []int{0}},
		{"a plain address", nil, "", false, 1, []int{0}},
		{"off", servers(6, ""), "proxy_next_upstream off;", false, 6, []int{0}},
		{"off, with conditions", servers(6, ""), "proxy_next_upstream off;", true, 6, []int{0, 1, 2, 3, 5}},
	} {
		t.Run(c.name, func(t *testing.T) {
			from, cands := ngxCandidates(t, ngxConf(c.servers, "", c.loc), c.cond)
			var got []int
			for _, x := range cands {
				if !slices.Contains(got, x.Fleet.Fleet.Retry.MaxRetries) {
					got = append(got, x.Fleet.Fleet.Retry.MaxRetries)
				}
				ngxReadsAsNamed(t, x, c.tries)
			}
			slices.Sort(got)
			if !slices.Equal(got, c.retries) {
				t.Errorf("retry counts %v, want %v (%d candidates)", got, c.retries, len(cands))
			}
			ngxKeepsLimits(t, from, cands)
		})
	}
}

// TestWritableNginxPassive: max_fails and fail_timeout are written on
// every primary server of the upstream (backups and down servers stay as
// they are), in place of the values a line has, beside its comment; 0 is
// never written, a fail_timeout alone is no candidate where max_fails=0
// turns the accounting off (ngx_http_upstream.c, ngx_http_upstream_server;
// nginx's defaults max_fails=1 fail_timeout=10s), and a line the edit
// cannot rewrite whole (two directives) takes none.
func TestWritableNginxPassive(t *testing.T) {
	for _, c := range []struct {
		name    string
		servers []string
		want    []string // candidates by name
		absent  []string
		line    string // a line the edit of want[0] writes
	}{
		{"nginx's defaults", servers(3, ""), []string{"max_fails=3", "fail_timeout=30s", "max_fails=3, fail_timeout=30s"}, []string{"max_fails=1", "fail_timeout=10s"}, "server 10.0.0.2:8080 max_fails=3;"},
		{"accounting off", servers(3, "max_fails=0"), []string{"max_fails=1", "max_fails=3, fail_timeout=30s"}, []string{"fail_timeout=30s", "fail_timeout=10s"}, "server 10.0.0.1:8080 max_fails=1;"},
		{"a comment and a backup", []string{"server 10.0.0.1:8080 max_fails=2 fail_timeout=5s; # primary", "server 10.0.0.2:8080 max_fails=2 fail_timeout=5s; # primary", "server 10.0.0.9:8080 backup;"}, []string{"max_fails=3", "max_fails=1, fail_timeout=30s"}, nil, "server 10.0.0.1:8080 max_fails=3 fail_timeout=5s; # primary"},
		{"two on a line", []string{"server 10.0.0.1:8080; server 10.0.0.2:8080;", "server 10.0.0.3:8080;"}, nil, []string{"max_fails=3", "fail_timeout=30s"}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			from, cands := ngxCandidates(t, ngxConf(c.servers, "", ""), false)
			for _, n := range c.want {
				x, ok := cands[n]
				if !ok {
					t.Errorf("no candidate %q", n)
					continue
				}
				ngxReadsAsNamed(t, x, 3)
				if !strings.Contains(strings.Join(x.Notes, "\n"), "scope: max_fails and fail_timeout are set on the servers of upstream app") {
					t.Errorf("%q does not say its scope: %q", n, x.Notes)
				}
			}
			for _, n := range c.absent {
				if _, ok := cands[n]; ok {
					t.Errorf("a candidate %q", n)
				}
			}
			if c.line != "" {
				after := string(cands[c.want[0]].Edited[0].After)
				if !strings.Contains(after, c.line+"\n") || strings.Contains(after, "server 10.0.0.9:8080 backup max_fails") {
					t.Errorf("%q writes:\n%s", c.want[0], cands[c.want[0]].Edited[0].Diff)
				}
			}
			ngxKeepsLimits(t, from, cands)
		})
	}
}

// TestWritableNginxConditions: with --conditions, proxy_next_upstream is
// written at the location whole (nginx ORs the values of one level and an
// inner level replaces an outer one: ngx_conf_set_bitmask_slot,
// ngx_http_proxy_merge_loc_conf), keeping the values the simulator makes
// no failure of (non_idempotent, invalid_header); without, the user's
// stay. A directive set at the server level is overridden at the
// location, and the server's line stays.
func TestWritableNginxConditions(t *testing.T) {
	conf := ngxConf(servers(4, ""), "        proxy_next_upstream error timeout http_500 non_idempotent invalid_header;\n        proxy_next_upstream_tries 4;", "")
	_, cands := ngxCandidates(t, conf, false)
	for n := range cands {
		if strings.Contains(n, "proxy_next_upstream ") {
			t.Errorf("%q changes the conditions without --conditions", n)
		}
	}
	_, cands = ngxCandidates(t, conf, true)
	c, ok := cands["proxy_next_upstream_tries 2, proxy_next_upstream error"]
	if !ok {
		t.Fatalf("no candidate with conditions; %d candidates", len(cands))
	}
	ngxReadsAsNamed(t, c, 4)
	after := string(c.Edited[0].After)
	for _, want := range []string{"            proxy_next_upstream error non_idempotent invalid_header;\n", "            proxy_next_upstream_tries 2;\n",
		"        proxy_next_upstream error timeout http_500 non_idempotent invalid_header;\n", "        proxy_next_upstream_tries 4;\n"} {
		if !strings.Contains(after, want) {
			t.Errorf("the edit has no line %q:\n%s", want, c.Edited[0].Diff)
		}
	}
	if c.Fleet.Fleet.Retry.IdempotentOnly {
		t.Error("non_idempotent was lost")
	}
}

// TestWritableNginxScope: a location inside the edited one inherits what
// it does not set (ngx_http_proxy_merge_loc_conf), and the candidate says
// so; an ingress-nginx ConfigMap is not searched (advise writes its
// recommendation there as the format says it), and says why.
func TestWritableNginxScope(t *testing.T) {
	conf := ngxConf(servers(4, ""), "", "            location /inner/ { proxy_pass http://app; }")
	_, cands := ngxCandidates(t, conf, false)
	c, ok := cands["proxy_next_upstream_tries 2"]
	if !ok {
		t.Fatal("no candidate with 2 tries")
	}
	if !strings.Contains(strings.Join(c.Notes, "\n"), "scope: the location's directives are inherited by the locations inside it") {
		t.Errorf("no scope note: %q", c.Notes)
	}

	srcs := readSources(t, "nginx/ingress-configmap.yaml")
	fl, err := Import(srcs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = Writable(srcs, fl[0], WritableOptions{})
	if err == nil || errors.Is(err, ErrReadBack) || errors.Is(err, ErrNotAccepted) || !strings.Contains(err.Error(), "ConfigMap") {
		t.Errorf("a ConfigMap: %v", err)
	}
}
