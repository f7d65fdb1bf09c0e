package importer

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/giveup"
	"github.com/retrystorm/retrystorm/internal/servertest"
	"github.com/retrystorm/retrystorm/scenario"
	"github.com/retrystorm/retrystorm/sim"
)

// nginxHTTP is the http block of an nginx.conf: a server on listen
// whose location / proxies to the upstream app (servers, one line each)
// with the directives loc, and reports the tries it made in
// X-Upstream-Addr ($upstream_addr lists every server tried,
// comma-separated).
func nginxHTTP(listen string, servers []string, upstream, loc string) string {
	var ups strings.Builder
	for _, s := range servers {
		fmt.Fprintf(&ups, "        server %s;\n", s)
	}
	return fmt.Sprintf(`    upstream app {
%[2]s%[3]s
    }
    server {
        listen %[1]s;
        location = /healthz { return 200; }
        location / {
            proxy_pass http://app;
            add_header X-Upstream-Addr $upstream_addr always;
%[4]s
        }
    }`, listen, ups.String(), upstream, loc)
}

// runNginx starts nginx with nginxHTTP's configuration for its address,
// imports the same configuration, and returns nginx's URL and the fleet.
func runNginx(t *testing.T, servers []string, upstream, loc string) (string, Fleet) {
	t.Helper()
	addr, conf := servertest.Nginx(t, t.TempDir(), "/healthz", func(listen string) string {
		return nginxHTTP(listen, servers, upstream, loc)
	})
	return "http://" + addr + "/", importReal(t, "nginx.conf", conf)
}

// tries counts the servers each $upstream_addr names.
func tries(headers []string) []int {
	out := make([]int, len(headers))
	for i, h := range headers {
		if h != "" {
			out[i] = len(strings.Split(h, ", "))
		}
	}
	return out
}

// each checks that every request made want tries and got status.
func each(t *testing.T, name string, statuses, got []int, status, want int) {
	t.Helper()
	for i := range got {
		if got[i] != want || statuses[i] != status {
			t.Errorf("%s: request %d: %d tries, status %d; want %d tries, status %d", name, i, got[i], statuses[i], want, status)
		}
	}
}

// TestRealNginxNextUpstream checks, against nginx, every proxy_next_upstream
// condition and limit the importer reads (nginx 1.22,
// ngx_http_upstream_next and ngx_http_upstream_test_next): error (refused
// connections: 502 once every server was tried), tries, timeout (504),
// the timeout on passing on, http_503 (the last 503 passed on), an
// unlisted http_500 (not passed on), non_idempotent for a POST, and a
// backup server tried after the primaries. The tries nginx made
// ($upstream_addr) must equal the simulator's attempts per intent for the
// imported file, and its answer the give-up answer package giveup gives
// for nginx.
func TestRealNginxNextUpstream(t *testing.T) {
	refused := func(n int) []string {
		var s []string
		for range n {
			s = append(s, servertest.Refusing(t)+" max_fails=0")
		}
		return s
	}
	with := func(n, status int, delay time.Duration) []string {
		var s []string
		for range n {
			s = append(s, newBackend(t, status, delay).addr+" max_fails=0")
		}
		return s
	}
	const refuse = "  - {kind: outage, at: 0s, for: 5m, mode: refuse}\n"
	const reject = "  - {kind: capacity, at: 0s, for: 5m, capacity: 0}\n"
	capacity := "{model: capacity, capacity: 1000}"
	slow := "{model: concurrency, base: 10m}"
	for _, c := range []struct {
		name            string
		servers         []string
		loc, method     string
		origin, trigger string
		status, tries   int
	}{
		{"error", refused(3), "", "GET", capacity, refuse, 502, 3},
		{"tries", refused(3), "proxy_next_upstream_tries 2;", "GET", capacity, refuse, 502, 2},
		{"timeout", with(3, 200, 300*time.Millisecond), "proxy_read_timeout 100ms;", "GET", slow, "", 504, 3},
		{"next_upstream_timeout", with(3, 200, 300*time.Millisecond), "proxy_read_timeout 100ms;\nproxy_next_upstream_timeout 150ms;", "GET", slow, "", 504, 2},
		{"http_503", with(3, 503, 0), "proxy_next_upstream error timeout http_503;", "GET", capacity, reject, 503, 3},
		{"http_500 unlisted", with(3, 500, 0), "", "GET", "{model: capacity, capacity: 1000, error_rate: 1}", "", 500, 1},
		{"POST, not non_idempotent", with(3, 503, 0), "proxy_next_upstream error timeout http_503;", "POST", capacity, reject, 503, 1},
		{"POST, non_idempotent", with(3, 503, 0), "proxy_next_upstream error timeout http_503 non_idempotent;", "POST", capacity, reject, 503, 3},
		{"backup", append(refused(1), newBackend(t, 200, 0).addr+" backup"), "", "GET", capacity, refuse, 200, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			url, f := runNginx(t, c.servers, "", c.loc)
			statuses, headers := send(t, c.method, url, 3, "X-Upstream-Addr")
			each(t, "nginx", statuses, tries(headers), c.status, c.tries)
			per, _ := simulate(t, f.Fleet, f.Replicas, c.origin, c.trigger, 10, c.method == "GET")
			if per != float64(c.tries) {
				t.Errorf("the simulator makes %g attempts per intent of the imported file; nginx made %d", per, c.tries)
			}
			t.Logf("%s: nginx %d tries a request, simulated %g", c.name, c.tries, per)
		})
	}
}

// TestRealNginxMaxFails: a server that failed max_fails times (default 1)
// is left out for fail_timeout (default 10s): of ten requests round robin
// over a refusing server and a good one, with no retries, one fails
// (ngx_http_upstream_free_round_robin_peer, ngx_http_upstream_get_peer).
// The simulator's detector, as imported, loses as many intents.
func TestRealNginxMaxFails(t *testing.T) {
	servers := []string{servertest.Refusing(t), newBackend(t, 200, 0).addr}
	url, f := runNginx(t, servers, "", "proxy_next_upstream off;")
	statuses, _ := send(t, "GET", url, 10, "X-Upstream-Addr")
	failed := failures(statuses)
	origin := "{model: capacity, capacity: 1000, replicas: {count: 2}}"
	_, lost := simulate(t, f.Fleet, 2, origin, "  - {kind: outage, at: 0s, for: 5m, mode: refuse, replica: 0}\n", 10, true)
	if failed != 1 || lost != int64(failed) {
		t.Errorf("nginx failed %d of 10 requests (want 1), the simulator lost %d intents", failed, lost)
	}
	t.Logf("max_fails: nginx failed %d of 10, simulated %d", failed, lost)
}

// TestRealGiveUpNginx is issue 36's row 1 against nginx: nginx gives up
// with 502 after refused connections and 504 after timeouts
// (ngx_http_upstream_next), as package giveup says, and a caller that
// retries 502 and 504 twice retries each give-up: 3 requests × 3 tries =
// 9 at the servers per intent, as the simulator's chain of the caller
// over the imported nginx counts at its origin.
func TestRealGiveUpNginx(t *testing.T) {
	for _, c := range []struct {
		name    string
		servers []string
		loc     string
		last    string
		origin  string
		trigger string
	}{
		{"refused", []string{servertest.Refusing(t) + " max_fails=0", servertest.Refusing(t) + " max_fails=0", servertest.Refusing(t) + " max_fails=0"}, "", giveup.Refused, "{model: capacity, capacity: 1000}", "  - {kind: outage, at: 0s, for: 5m, mode: refuse}\n"},
		{"timeout", []string{newBackend(t, 200, 300*time.Millisecond).addr + " max_fails=0"}, "proxy_read_timeout 100ms;", giveup.Timeout, "{model: concurrency, base: 10m}", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			url, f := runNginx(t, c.servers, "", c.loc)
			want := giveup.Of(giveup.NGINX, c.last, false)
			total := 0
			for range 3 { // the caller: 1 + 2 retries of 502 and 504
				statuses, headers := send(t, "GET", url, 1, "X-Upstream-Addr")
				total += tries(headers)[0]
				if statuses[0] != want.HTTP {
					t.Fatalf("nginx answered %d after %s, giveup says %d", statuses[0], c.last, want.HTTP)
				}
			}
			per := chainPerIntent(t, f, c.origin, c.trigger)
			if per != float64(total) {
				t.Errorf("a caller retrying twice over nginx: %d tries at the servers, simulated %g", total, per)
			}
			t.Logf("give-up %s: nginx answered %d; %d tries at the servers, simulated %g", c.name, want.HTTP, total, per)
		})
	}
}

// chainPerIntent runs an HTTP caller that retries gateway answers (502,
// 504) twice over the imported proxy f as a tier, and returns the
// attempts per intent at the origin.
func chainPerIntent(t *testing.T, f Fleet, origin, trigger string) float64 {
	t.Helper()
	sc, err := scenario.Parse("chain.yaml", []byte("name: chain\nduration: 10m\ntraffic: {rate: 1, clients: 1}\norigin: "+origin+"\n"+
		"triggers:\n  - {kind: load, at: 3s, for: 9m57s, rate: 0}\n"+trigger+
		"fleets: [{name: caller, timeout: 1h, retry: {max_retries: 2, on: [gateway]}, budget: {use: none}}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	client := f.Fleet.Client()
	client.Timeout = max(client.Timeout, time.Millisecond)
	sc.Origin.Replicas = max(f.Replicas, 1)
	sc.Tiers = []scenario.Tier{{Name: "proxy", Server: scenario.Origin{Model: scenario.ModelConcurrency, Base: time.Millisecond, Replicas: 1}, Client: client}}
	if err := sc.Validate(); err != nil {
		t.Fatal(err)
	}
	r, err := sim.RunWith(context.Background(), sc, sim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tiers := r.Fleets[0].Tiers
	return tiers[len(tiers)-1].Amplification
}
