package importer

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/scenario"
)

// nginxConf wraps an upstream block and a location's directives into a
// configuration.
func nginxConf(upstream, http, location string) []Source {
	return []Source{{Name: "nginx.conf", Data: []byte("events {}\nhttp {\n" + http + "\n    upstream app {\n" + upstream + "\n    }\n    server {\n        listen 80;\n        location / {\n            proxy_pass http://app;\n" + location + "\n        }\n    }\n}\n")}}
}

const threeServers = "server 10.0.0.1; server 10.0.0.2; server 10.0.0.3;"

// TestNginxDecisionTable is nginx 1.22's reading of its retry directives
// (release-1.22.1): ngx_http_proxy_module.c, ngx_http_proxy_merge_loc_conf
// (proxy_next_upstream defaults to "error timeout", an inner level
// replaces an outer one, "off" wins; proxy_read_timeout 60s;
// proxy_next_upstream_tries and _timeout 0); ngx_conf_file.c,
// ngx_conf_set_bitmask_slot (values at one level OR'ed) and ngx_parse_time
// (a number alone is seconds); ngx_http_upstream_round_robin.c,
// ngx_http_upstream_init_round_robin (tries: the servers not down, backups
// after the primaries) and ngx_http_upstream_free_round_robin_peer (one
// server: no retry); ngx_http_upstream.c, ngx_http_upstream_next (a POST
// already sent is passed on only with non_idempotent) and
// ngx_http_upstream_server (max_fails 1, fail_timeout 10s). Balancing:
// ngx_http_upstream_least_conn_module.c, ngx_http_upstream_random_module.c.
func TestNginxDecisionTable(t *testing.T) {
	for _, c := range []struct {
		name                string
		upstream, http, loc string
		retries             int
		on                  string
		idem                bool
		timeout, deadline   time.Duration
		balancer            string
		replicas            int
	}{
		{"defaults", threeServers, "", "", 2, "timeout refused", true, 60 * time.Second, 0, "round_robin", 3},
		{"off", threeServers, "", "proxy_next_upstream off;", 0, "", false, 60 * time.Second, 0, "round_robin", 3},
		{"tries 2", threeServers, "", "proxy_next_upstream_tries 2;", 1, "timeout refused", true, 60 * time.Second, 0, "round_robin", 3},
		{"tries above the servers", threeServers, "", "proxy_next_upstream_tries 9;", 2, "timeout refused", true, 60 * time.Second, 0, "round_robin", 3},
		{"one server", "server 10.0.0.1;", "", "proxy_next_upstream_tries 5;", 0, "", false, 60 * time.Second, 0, "", 1},
		{"down and backup", "server a:1; server b:1; server c:1 down; server d:1 backup;", "", "", 2, "timeout refused", true, 60 * time.Second, 0, "round_robin", 2},
		{"answers, non_idempotent", threeServers, "", "proxy_next_upstream error http_500 http_503 http_504 non_idempotent;", 2, "error rejection gateway refused", false, 60 * time.Second, 0, "round_robin", 3},
		{"one level ORs", threeServers, "", "proxy_next_upstream error;\nproxy_next_upstream http_503;", 2, "rejection refused", true, 60 * time.Second, 0, "round_robin", 3},
		{"inner replaces outer", threeServers, "proxy_next_upstream error timeout http_503;", "proxy_next_upstream error;", 2, "refused", true, 60 * time.Second, 0, "round_robin", 3},
		{"outer inherited", threeServers, "proxy_next_upstream error http_502;\nproxy_read_timeout 2;", "", 2, "gateway refused", true, 2 * time.Second, 0, "round_robin", 3},
		{"timeouts", threeServers, "", "proxy_read_timeout 250ms;\nproxy_next_upstream_timeout 1m30s;", 2, "timeout refused", true, 250 * time.Millisecond, 90 * time.Second, "round_robin", 3},
		{"least_conn", "least_conn;\n" + threeServers, "", "", 2, "timeout refused", true, 60 * time.Second, 0, "least_request", 3},
		{"random two", "random two least_conn;\n" + threeServers, "", "", 2, "timeout refused", true, 60 * time.Second, 0, "p2c", 3},
		{"random", "random;\n" + threeServers, "", "", 2, "timeout refused", true, 60 * time.Second, 0, "random", 3},
		{"ip_hash", "ip_hash;\n" + threeServers, "", "", 2, "timeout refused", true, 60 * time.Second, 0, "round_robin", 3},
	} {
		fl, err := Import(nginxConf(c.upstream, c.http, c.loc), Options{})
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		f := fl[0].Fleet
		if f.Retry.MaxRetries != c.retries || strings.Join(f.Retry.On, " ") != c.on || (c.retries > 0 && f.Retry.IdempotentOnly != c.idem) {
			t.Errorf("%s: %d retries on [%s], idempotent only %v; want %d on [%s], %v", c.name, f.Retry.MaxRetries, strings.Join(f.Retry.On, " "), f.Retry.IdempotentOnly, c.retries, c.on, c.idem)
		}
		if f.Timeout != c.timeout || f.Deadline != c.deadline {
			t.Errorf("%s: timeout %v, deadline %v; want %v, %v", c.name, f.Timeout, f.Deadline, c.timeout, c.deadline)
		}
		if f.Balancer.Use != c.balancer || fl[0].Replicas != c.replicas {
			t.Errorf("%s: balancer %q over %d replicas; want %q over %d", c.name, f.Balancer.Use, fl[0].Replicas, c.balancer, c.replicas)
		}
		if f.Product != "nginx" || f.Budget.Use != scenario.BudgetNone {
			t.Errorf("%s: product %q, budget %q", c.name, f.Product, f.Budget.Use)
		}
	}
}

// TestNginxPassiveHealth: max_fails and fail_timeout (defaults 1 and 10s,
// ngx_http_upstream_server) take a server out for fail_timeout once it has
// failed max_fails times; with the default proxy_next_upstream only errors
// and timeouts count (a 5xx answer is passed on, and counts, only when the
// mask lists it: ngx_http_upstream_test_next); max_fails=0 turns it off.
func TestNginxPassiveHealth(t *testing.T) {
	for _, c := range []struct {
		upstream, loc  string
		detects, split bool
		threshold      int
		eject          time.Duration
	}{
		{threeServers, "", true, true, 1, 10 * time.Second},
		{"server a:1 max_fails=3 fail_timeout=30s; server b:1 max_fails=3 fail_timeout=30s;", "", true, true, 3, 30 * time.Second},
		{"server a:1 max_fails=2; server b:1 max_fails=2;", "proxy_next_upstream error http_503;", true, false, 2, 10 * time.Second},
		{"server a:1 max_fails=0; server b:1 max_fails=0;", "", false, false, 0, 0},
	} {
		fl, err := Import(nginxConf(c.upstream, "", c.loc), Options{})
		if err != nil {
			t.Fatal(err)
		}
		od := fl[0].Fleet.OutlierDetection
		if od.Detects() != c.detects {
			t.Errorf("%s: detects %v, want %v", c.upstream, od.Detects(), c.detects)
			continue
		}
		if !c.detects {
			continue
		}
		s := od.Settings
		got := s.Consecutive5xx
		if c.split {
			got = s.ConsecutiveLocalOriginFailure
		}
		if s.SplitExternalLocalOriginErrors != c.split || got != c.threshold || s.BaseEjectionTime != c.eject || s.MaxEjectionTime != c.eject || s.MaxEjectionPercent != 100 {
			t.Errorf("%s %s: split %v, threshold %d, ejection %v-%v, max %d%%; want %v, %d, %v", c.upstream, c.loc, s.SplitExternalLocalOriginErrors, got, s.BaseEjectionTime, s.MaxEjectionTime, s.MaxEjectionPercent, c.split, c.threshold, c.eject)
		}
	}
}

// TestNginxRefuses: what nginx refuses to start with is an error naming
// the file, the line and the directive.
func TestNginxRefuses(t *testing.T) {
	for _, c := range []struct {
		srcs []Source
		want string
	}{
		{nginxConf(threeServers, "", "proxy_next_upstream error http_418;"), "nginx.conf:11: proxy_next_upstream: invalid value \"http_418\""},
		{nginxConf("server a:1 max_fail=2;", "", ""), "nginx.conf:5: server a:1: invalid parameter \"max_fail=2\""},
		{nginxConf("server a:1 fail_timeout=500ms;", "", ""), "nginx.conf:5: server a:1: invalid parameter \"fail_timeout=500ms\""},
		{nginxConf(threeServers, "", "proxy_read_timeout 5s;\nproxy_read_timeout 6s;"), "nginx.conf:12: proxy_read_timeout: is duplicate"},
		{nginxConf(threeServers, "", "proxy_read_timeout 5x;"), "nginx.conf:11: proxy_read_timeout: \"5x\""},
		{nginxConf(threeServers, "", "proxy_next_upstream_tries two;"), "nginx.conf:11: proxy_next_upstream_tries: \"two\" is not a number"},
		{nginxConf("", "", ""), "upstream app: no servers"},
		{[]Source{{Name: "n.conf", Data: []byte("http {\n  server {\n")}}, "n.conf:3: unexpected end of file, expecting \"}\""},
		{[]Source{{Name: "n.conf", Data: []byte("http { proxy_pass \"http://a ; }")}}, "n.conf:1: unexpected end of file in a quoted string"},
	} {
		_, err := Import(c.srcs, Options{Format: NGINX})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("err = %v, want it to contain %q", err, c.want)
		}
	}
	if _, err := parseNginx("x.conf", []byte("a }")); !errors.Is(err, errNginxSyntax) {
		t.Errorf("a stray }: %v, want a syntax error", err)
	}
}

// TestNginxParser: nginx's tokens (ngx_conf_read_token): quotes, escapes,
// comments at the start of a word, lines.
func TestNginxParser(t *testing.T) {
	ds, err := parseNginx("t.conf", []byte("a 'b c' \"d\\\"e\" f#g; # comment\n\nh {\n  i j\\ k;\n}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 2 || ds[0].Name != "a" || strings.Join(ds[0].Args, "|") != "b c|d\"e|f#g" || ds[0].Line != 1 {
		t.Fatalf("a: %+v", ds[0])
	}
	if ds[1].Name != "h" || ds[1].Line != 3 || len(ds[1].Block) != 1 || strings.Join(ds[1].Block[0].Args, "|") != "j k" || ds[1].Block[0].Line != 4 {
		t.Fatalf("h: %+v, %+v", ds[1], ds[1].Block)
	}
}

// TestIngressNginxConfigMap: ingress-nginx's ConfigMap keys
// (internal/ingress/controller/config/config.go, NewDefault: 3 tries,
// "error timeout", read timeout 60s, all in seconds) for every Ingress.
func TestIngressNginxConfigMap(t *testing.T) {
	f := importOne(t, Options{}, "nginx/ingress-configmap.yaml").Fleet
	if f.Retry.MaxRetries != 4 || strings.Join(f.Retry.On, " ") != "rejection timeout refused" || f.Timeout != 10*time.Second {
		t.Errorf("%d retries on %v, timeout %v: want 4 on [rejection timeout refused], 10s", f.Retry.MaxRetries, f.Retry.On, f.Timeout)
	}
	src := []Source{{Name: "cm.yaml", Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata:\n  proxy-next-upstream: \"error\"\n")}}
	fl, err := Import(src, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if g := fl[0].Fleet; g.Retry.MaxRetries != 2 || g.Timeout != 60*time.Second || fl[0].Format != NGINX {
		t.Errorf("%d retries, timeout %v, format %s: want the controller's 3 tries and 60s, nginx", g.Retry.MaxRetries, g.Timeout, fl[0].Format)
	}
}

// TestNginxEdit: advise writes a recommendation into the location, in
// nginx's syntax, changing only its directives; the file imports back as
// the recommendation.
func TestNginxEdit(t *testing.T) {
	editOneRetry(t, "nginx/nginx.conf", "+            proxy_next_upstream_tries 2;", "+            proxy_next_upstream error;", "+            proxy_read_timeout 3s;")
	rec := scenario.Fleet{Retry: scenario.Retry{MaxRetries: 1, On: []string{scenario.RetryOnRefused}}, Timeout: 3 * time.Second}
	if _, cannot, err := Export(rec, NGINX); err != nil || len(cannot) == 0 {
		t.Errorf("export: %v, %q", err, cannot)
	}
}

// editOneRetry edits file's first fleet to one retry of refused connections
// with a 3s timeout, checks that the diff, of that one file, has the lines
// want, and that the edited file reads back as the recommendation; it
// returns the diff.
func editOneRetry(t *testing.T, file string, want ...string) string {
	t.Helper()
	srcs := sources(t, file)
	fl, err := Import(srcs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	rec := fl[0].Fleet
	rec.Retry.MaxRetries, rec.Retry.On, rec.Timeout = 1, []string{scenario.RetryOnRefused}, 3*time.Second
	edited, notes, err := Edit(srcs, fl[0], rec)
	if err != nil {
		t.Fatal(err)
	}
	if len(edited) != 1 {
		t.Fatalf("%d files edited, notes %q", len(edited), notes)
	}
	for _, w := range want {
		if !strings.Contains(edited[0].Diff, w) {
			t.Errorf("diff lacks %q:\n%s", w, edited[0].Diff)
		}
	}
	for _, n := range notes {
		if strings.Contains(n, "differs") || strings.Contains(n, "no longer") {
			t.Errorf("read back: %s", n)
		}
	}
	return edited[0].Diff
}

// FuzzParseNginx: any bytes parse or are refused with a syntax error; the
// lines a parse gives are in the file.
func FuzzParseNginx(f *testing.F) {
	for _, file := range []string{"nginx/nginx.conf"} {
		d, err := os.ReadFile(filepath.Join("testdata", file))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(d)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ds, err := parseNginx("fuzz", data)
		if err != nil {
			return
		}
		lines := strings.Count(string(data), "\n") + 1
		var walk func([]*ngxDirective)
		walk = func(ds []*ngxDirective) {
			for _, d := range ds {
				if d.Line < 1 || d.Line > lines {
					t.Fatalf("%s at line %d of %d", d.Name, d.Line, lines)
				}
				walk(d.Block)
			}
		}
		walk(ds)
	})
}

func FuzzImportNginx(f *testing.F) {
	fuzzFormat(f, NGINX, "nginx/nginx.conf", "nginx/ingress-configmap.yaml")
}
