package importer

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// hapConf is a defaults section and one backend of three servers.
func hapConf(defaults, backend string) []Source {
	return []Source{{Name: "haproxy.cfg", Data: []byte("defaults\n    mode http\n" + defaults + "\nbackend app\n" + backend + "\n    server a 10.0.0.1:80\n    server b 10.0.0.2:80\n    server c 10.0.0.3:80\n")}}
}

// TestHAProxyDecisionTable is HAProxy 2.6's reading of its retry settings
// (doc/configuration.txt at v2.6.0: "retries" (default 3, on the same
// server, "option redispatch" for the last), "retry-on" (default
// conn-failure; not cumulative; all-retryable-errors; only connections
// in mode tcp), the turn-around timer min("timeout connect", 1s) before a
// retry, "timeout server" (no default; a time without a unit is in
// milliseconds: src/tools.c, parse_time_err), "balance" (default
// roundrobin; random draws 2 by default)).
func TestHAProxyDecisionTable(t *testing.T) {
	for _, c := range []struct {
		name              string
		defaults, backend string
		retries           int
		on                string
		backoff           time.Duration
		timeout           time.Duration
		balancer          string
	}{
		{"defaults", "", "", 3, "refused", time.Second, maxTimeout, "round_robin"},
		{"inherited", "    retries 2\n    timeout server 3000\n    timeout connect 200ms", "", 2, "refused", 200 * time.Millisecond, 3 * time.Second, "round_robin"},
		{"the backend wins", "    retries 2", "    retries 5", 5, "refused", time.Second, maxTimeout, "round_robin"},
		{"retries 0", "", "    retries 0", 0, "", 0, maxTimeout, "round_robin"},
		{"retry-on none", "", "    retry-on none", 0, "", 0, maxTimeout, "round_robin"},
		{"statuses", "", "    retry-on 503 504", 3, "rejection gateway", time.Second, maxTimeout, "round_robin"},
		{"not cumulative", "    retry-on 503", "    retry-on conn-failure response-timeout", 3, "timeout refused", time.Second, maxTimeout, "round_robin"},
		{"all-retryable-errors", "", "    retry-on all-retryable-errors", 3, "", time.Second, maxTimeout, "round_robin"},
		{"mode tcp", "", "    mode tcp\n    retry-on 503", 3, "refused", time.Second, maxTimeout, "round_robin"},
		{"leastconn", "", "    balance leastconn", 3, "refused", time.Second, maxTimeout, "least_request"},
		{"random", "", "    balance random", 3, "refused", time.Second, maxTimeout, "p2c"},
		{"random(1)", "", "    balance random(1)", 3, "refused", time.Second, maxTimeout, "random"},
		{"source", "", "    balance source", 3, "refused", time.Second, maxTimeout, "round_robin"},
	} {
		fl, err := Import(hapConf(c.defaults, c.backend), Options{})
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		f := fl[0].Fleet
		if f.Retry.MaxRetries != c.retries || strings.Join(f.Retry.On, " ") != c.on {
			t.Errorf("%s: %d retries on [%s]; want %d on [%s]", c.name, f.Retry.MaxRetries, strings.Join(f.Retry.On, " "), c.retries, c.on)
		}
		if c.retries > 0 && (f.Retry.Backoff.Use != "fixed" || f.Retry.Backoff.Base != c.backoff) {
			t.Errorf("%s: backoff %+v, want fixed %v", c.name, f.Retry.Backoff, c.backoff)
		}
		if f.Timeout != c.timeout || f.Balancer.Use != c.balancer || fl[0].Replicas != 3 || f.Product != "haproxy" {
			t.Errorf("%s: timeout %v, balancer %q, %d replicas, product %q; want %v, %q, 3, haproxy", c.name, f.Timeout, f.Balancer.Use, fl[0].Replicas, f.Product, c.timeout, c.balancer)
		}
	}
}

// TestHAProxyDefaultModeIsTCP: a proxy that never says mode http is in
// mode tcp, HAProxy's default (doc/configuration.txt at v2.6.0, "mode":
// "tcp ... default mode"), and retries connections alone, whatever
// retry-on says; the import read it as http and retried 503s.
func TestHAProxyDefaultModeIsTCP(t *testing.T) {
	src := []Source{{Name: "haproxy.cfg", Data: []byte("defaults\n    retry-on 503 504\n\nbackend app\n    server a 10.0.0.1:80\n    server b 10.0.0.2:80\n")}}
	fl, err := Import(src, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if on := strings.Join(fl[0].Fleet.Retry.On, " "); on != "refused" {
		t.Errorf("retries on [%s], want [refused]: mode tcp retries connections alone", on)
	}
	if !strings.Contains(fmt.Sprint(fl[0].From), "HAProxy's default, tcp") {
		t.Errorf("provenance %q does not say the mode is HAProxy's default", fl[0].From)
	}
}

// TestHAProxyObserve: observe layer7 on servers with check counts
// error-limit (default 10) consecutive errors, then on-error (default
// fail-check; mark-down at once; fastinter only checks sooner); a server
// marked down is back after rise (2) checks inter (2s) apart
// (doc/configuration.txt, 5.2: observe, error-limit, on-error, rise,
// inter).
func TestHAProxyObserve(t *testing.T) {
	for _, c := range []struct {
		server    string
		detects   bool
		threshold int
		back      time.Duration
	}{
		{"check observe layer7 error-limit 3 on-error mark-down rise 2 inter 500ms", true, 3, time.Second},
		{"check observe layer7", true, 10, 4 * time.Second},
		{"check observe layer7 on-error fastinter", false, 0, 0},
		{"observe layer7", false, 0, 0},
	} {
		fl, err := Import(hapConf("", "    default-server "+c.server), Options{})
		if err != nil {
			t.Fatal(err)
		}
		od := fl[0].Fleet.OutlierDetection
		if od.Detects() != c.detects {
			t.Errorf("%s: detects %v, want %v", c.server, od.Detects(), c.detects)
			continue
		}
		if c.detects && (od.Settings.Consecutive5xx != c.threshold || od.Settings.BaseEjectionTime != c.back) {
			t.Errorf("%s: %d in a row eject for %v; want %d, %v", c.server, od.Settings.Consecutive5xx, od.Settings.BaseEjectionTime, c.threshold, c.back)
		}
	}
}

// TestHAProxyRefuses: what HAProxy refuses to start with is an error
// naming the file and line.
func TestHAProxyRefuses(t *testing.T) {
	for _, c := range []struct {
		srcs []Source
		want string
	}{
		{hapConf("", "    retry-on 418"), "retry-on: unknown keyword \"418\""},
		{hapConf("", "    retries many"), "haproxy.cfg:5: retries"},
		{hapConf("    timeout server 5x", ""), "haproxy.cfg:3: timeout server"},
		{hapConf("", "    default-server check observe layer3"), "observe \"layer3\""},
		{[]Source{{Name: "h.cfg", Data: []byte("global\n  log \"127.0.0.1 local0\n")}}, "h.cfg:2: unmatched quote"},
		{[]Source{{Name: "h.cfg", Data: []byte("backend b from nowhere\n  server a 1.2.3.4:80\n")}}, "no defaults section named \"nowhere\""},
	} {
		_, err := Import(c.srcs, Options{Format: HAProxy})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("err = %v, want it to contain %q", err, c.want)
		}
	}
	if _, err := parseHAProxy("x.cfg", []byte("retries 3\n")); !errors.Is(err, errHAProxySyntax) {
		t.Errorf("a keyword out of any section: %v, want a syntax error", err)
	}
}

// TestHAProxyEdit: advise writes the recommendation into the backend,
// in HAProxy's syntax, and the file imports back as it.
func TestHAProxyEdit(t *testing.T) {
	diff := editOneRetry(t, "haproxy/haproxy.cfg", "+    retries 1", "+    retry-on conn-failure", "+    timeout server 3s")
	if strings.Contains(diff, "-    retries 2") {
		t.Errorf("the defaults section was edited:\n%s", diff)
	}
}

// FuzzParseHAProxy: any bytes parse or are refused with a syntax error;
// the lines a parse gives are in the file.
func FuzzParseHAProxy(f *testing.F) {
	d, err := os.ReadFile(filepath.Join("testdata", "haproxy", "haproxy.cfg"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(d)
	f.Fuzz(func(t *testing.T, data []byte) {
		secs, err := parseHAProxy("fuzz", data)
		if err != nil {
			return
		}
		lines := strings.Count(string(data), "\n") + 1
		for _, s := range secs {
			for _, l := range s.Lines {
				if l.Line < s.Line || l.Line > lines || len(l.Words) == 0 {
					t.Fatalf("line %d (%q) in section at %d of %d lines", l.Line, l.Words, s.Line, lines)
				}
			}
		}
	})
}

func FuzzImportHAProxy(f *testing.F) { fuzzFormat(f, HAProxy, "haproxy/haproxy.cfg") }
