package importer

import (
	"context"
	"encoding/csv"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/giveup"
	"github.com/retrystorm/retrystorm/internal/servertest"
)

// haproxyConfig is a whole haproxy.cfg: a frontend on addrs[0] to the
// backend app (its directives, then its servers), and a stats listener on
// addrs[1], whose CSV counts the backend's retries (wretr).
func haproxyConfig(addrs []string, backend string, servers []string) string {
	var b strings.Builder
	for i, s := range servers {
		fmt.Fprintf(&b, "    server s%d %s\n", i, s)
	}
	return fmt.Sprintf(`global
    maxconn 256
defaults
    mode http
    timeout connect 50ms
    timeout client 10s
    timeout server 10s
frontend fe
    bind %s
    default_backend app
listen stats
    bind %s
    stats enable
    stats uri /stats
backend app
%s
%s`, addrs[0], addrs[1], backend, b.String())
}

// runHAProxy starts HAProxy with the backend, imports the same
// configuration, and returns HAProxy's URL, its stats URL and the fleet.
func runHAProxy(t *testing.T, backend string, servers []string) (string, string, Fleet) {
	t.Helper()
	bin := servertest.Need(t, "haproxy", "haproxy")
	dir := t.TempDir()
	var text string
	addrs := servertest.Start(t, context.Background(), servertest.Program{
		Name: "haproxy", Bin: bin, Ports: 2,
		Args: func(addrs []string) ([]string, error) {
			text = haproxyConfig(addrs, backend, servers)
			file := filepath.Join(dir, "haproxy.cfg")
			return []string{"-db", "-f", file}, os.WriteFile(file, []byte(text), 0o600)
		},
		Ready: servertest.HTTPReady(1, "/stats"),
	})
	fl, err := Import([]Source{{Name: "haproxy.cfg", Data: []byte(text)}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(fl, func(f Fleet) bool { return f.Fleet.Name == "backend app" })
	if i < 0 {
		t.Fatalf("no backend app among %d fleets", len(fl))
	}
	return "http://" + addrs[0] + "/", "http://" + addrs[1] + "/stats;csv", fl[i]
}

// retried reads the backend's retries (wretr) from HAProxy's stats CSV
// (doc/management.txt, 9.1, field 15).
func retried(t *testing.T, stats string) int {
	t.Helper()
	resp, err := http.Get(stats)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := csv.NewReader(resp.Body)
	r.FieldsPerRecord = -1
	rows, err := r.ReadAll()
	if err != nil || len(rows) == 0 {
		t.Fatalf("stats: %v", err)
	}
	col := slices.Index(rows[0], "wretr")
	for _, row := range rows[1:] {
		if len(row) > col && row[0] == "app" && row[1] == "BACKEND" {
			n, _ := strconv.Atoi(row[col])
			return n
		}
	}
	t.Fatalf("stats: no backend app in %q", rows)
	return 0
}

// TestRealHAProxyRetries checks, against HAProxy, the retry settings the
// importer reads (HAProxy 2.6, doc/configuration.txt: retries, retry-on
// conn-failure, its status codes and response-timeout, the default
// conn-failure only): the attempts HAProxy made per request (its
// connections retried, wretr, and the requests its server counted) must
// equal the simulator's attempts per intent for the imported file, and
// its answer the give-up answer package giveup gives for HAProxy.
func TestRealHAProxyRetries(t *testing.T) {
	const refuse = "  - {kind: outage, at: 0s, for: 5m, mode: refuse}\n"
	const reject = "  - {kind: capacity, at: 0s, for: 5m, capacity: 0}\n"
	capacity, slow := "{model: capacity, capacity: 1000}", "{model: concurrency, base: 10m}"
	for _, c := range []struct {
		name            string
		backend         string
		status          int           // the server's answer; 0: a refusing server
		delay           time.Duration // the server's wait before it answers
		origin, trigger string
		answer, tries   int
	}{
		{"conn-failure", "", 0, 0, capacity, refuse, 503, 4},
		{"retries 1", "    retries 1", 0, 0, capacity, refuse, 503, 2},
		{"retry-on 503", "    retry-on conn-failure 503", 503, 0, capacity, reject, 503, 4},
		{"503 not retried by default", "", 503, 0, capacity, reject, 503, 1},
		{"response-timeout", "    retry-on response-timeout\n    timeout server 100ms", 200, 300 * time.Millisecond, slow, "", 504, 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			server, be := serverFor(t, c.status, c.delay)
			url, stats, f := runHAProxy(t, c.backend, []string{server})
			const n = 3
			statuses, _ := send(t, "GET", url, n, "")
			attempts := n + retried(t, stats)
			if be != nil {
				attempts = int(be.hits.Load())
			}
			for _, s := range statuses {
				if s != c.answer {
					t.Errorf("HAProxy answered %d, want %d", s, c.answer)
				}
			}
			if attempts != n*c.tries {
				t.Errorf("HAProxy made %d attempts for %d requests, want %d each", attempts, n, c.tries)
			}
			per, _ := simulate(t, f.Fleet, f.Replicas, c.origin, c.trigger, 10, true)
			if per != float64(c.tries) {
				t.Errorf("the simulator makes %g attempts per intent of the imported file; HAProxy made %d", per, c.tries)
			}
			t.Logf("%s: HAProxy %d attempts a request, simulated %g", c.name, attempts/n, per)
		})
	}
}

// TestRealHAProxyObserve: with observe layer7, error-limit 3 and
// on-error mark-down, a server that answers 500 is marked down after
// three errors in a row and stays down while its checks (inter 10s, rise
// 2) cannot bring it back: of twelve requests round robin with no
// retries, three fail. The simulator's detector, as imported, loses as
// many intents.
func TestRealHAProxyObserve(t *testing.T) {
	bad, good := newBackend(t, 500, 0), newBackend(t, 200, 0)
	backend := "    retries 0\n    default-server check inter 10s rise 2 observe layer7 error-limit 3 on-error mark-down"
	url, _, f := runHAProxy(t, backend, []string{bad.addr, good.addr})
	statuses, _ := send(t, "GET", url, 12, "")
	failed := failures(statuses)
	origin := "{model: capacity, capacity: 1000, replicas: {count: 2, faults: [{replica: 0, kind: errors, error_rate: 1}]}}"
	_, lost := simulate(t, f.Fleet, 2, origin, "", 12, true)
	if failed != 3 || lost != int64(failed) {
		t.Errorf("HAProxy failed %d of 12 requests (want 3), the simulator lost %d intents", failed, lost)
	}
	t.Logf("observe: HAProxy failed %d of 12, simulated %d", failed, lost)
}

// TestRealGiveUpHAProxy is issue 36's row 1 against HAProxy: HAProxy
// gives up with 503 when no connection can be made and 504 on a server
// timeout, as package giveup says, and a caller that retries 502 and 504
// twice retries the 504s (3 × 4 attempts at the server) and not the 503s
// (4), as the simulator's chain of the caller over the imported HAProxy
// counts at its origin.
func TestRealGiveUpHAProxy(t *testing.T) {
	for _, c := range []struct {
		name, backend   string
		status          int
		delay           time.Duration
		last            string
		origin, trigger string
	}{
		{"refused", "", 0, 0, giveup.Refused, "{model: capacity, capacity: 1000}", "  - {kind: outage, at: 0s, for: 5m, mode: refuse}\n"},
		{"timeout", "    retry-on response-timeout\n    timeout server 100ms", 200, 300 * time.Millisecond, giveup.Timeout, "{model: concurrency, base: 10m}", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			server, be := serverFor(t, c.status, c.delay)
			url, stats, f := runHAProxy(t, c.backend, []string{server})
			want := giveup.Of(giveup.HAProxy, c.last, false)
			requests := 0
			for range 3 { // the caller: 1 + 2 retries of 502 and 504
				statuses, _ := send(t, "GET", url, 1, "")
				requests++
				if statuses[0] != want.HTTP {
					t.Fatalf("HAProxy answered %d after %s, giveup says %d", statuses[0], c.last, want.HTTP)
				}
				if giveup.KindOfHTTP(statuses[0]) != giveup.Gateway {
					break // the caller retries 502 and 504 only
				}
			}
			attempts := requests + retried(t, stats)
			if be != nil {
				attempts = int(be.hits.Load())
			}
			per := chainPerIntent(t, f, c.origin, c.trigger)
			if per != float64(attempts) {
				t.Errorf("a caller retrying 502 and 504 twice over HAProxy: %d attempts at the server, simulated %g", attempts, per)
			}
			t.Logf("give-up %s: HAProxy answered %d; %d attempts at the server, simulated %g", c.name, want.HTTP, attempts, per)
		})
	}
}
