package importer

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/retrystorm/retrystorm/scenario"
)

// hapWritableConf is a whole haproxy.cfg: a defaults section with the lines
// defaults, a frontend, and backend app with the lines backend.
func hapWritableConf(defaults, backend string) string {
	return fmt.Sprintf(`global
    maxconn 100
defaults
%s    timeout connect 1s
    timeout client 10s
    timeout server 5s
frontend fe
    bind 127.0.0.1:8080
    default_backend app
backend app
%s`, defaults, backend)
}

const (
	hapHTTP = "    mode http\n"
	hapTwo  = "    server s1 10.0.0.1:8080\n    server s2 10.0.0.2:8080\n"
)

func hapCandidates(t *testing.T, conf string, cond bool) (Fleet, map[string]Candidate) {
	t.Helper()
	return writableOf(t, []Source{{Name: "haproxy.cfg", Data: []byte(conf)}}, "backend app", WritableOptions{Conditions: cond})
}

// hapRetryOnKinds is retry-on's keywords as the simulator's failures,
// from HAProxy's configuration manual (doc/configuration.txt, version 2.6,
// "retry-on"): conn-failure is a connection that failed before the
// request was sent, response-timeout timeout server, and the statuses.
var hapRetryOnKinds = map[string]string{"conn-failure": scenario.RetryOnRefused, "response-timeout": scenario.RetryOnTimeout,
	"500": scenario.RetryOnError, "502": scenario.RetryOnGateway, "503": scenario.RetryOnRejection, "504": scenario.RetryOnGateway}

// hapReadsAsNamed checks that c's fleet is what its name says, by
// HAProxy's manual (version 2.6): "retries N" is N retries of what
// retry-on names (4.2, "retries"); "retry-on" replaces the list (it is
// not cumulative); "observe layer7" counts a status outside 100-499, 501
// and 505, a timeout or a failed connection as an error, "layer4" failed
// connections alone, and error-limit errors in a row take the server down
// with on-error mark-down (5.2).
func hapReadsAsNamed(t *testing.T, c Candidate) {
	t.Helper()
	f := c.Fleet.Fleet
	observe := ""
	for _, part := range strings.Split(c.Name, ", ") {
		words := strings.Fields(part)
		switch words[0] {
		case "retries":
			if n, _ := strconv.Atoi(words[1]); f.Retry.MaxRetries != n {
				t.Errorf("%q: %d retries, want %d", c.Name, f.Retry.MaxRetries, n)
			}
		case "retry-on":
			retriesOnNamed(t, c, words[1:], hapRetryOnKinds)
		case "observe":
			observe = words[1]
		case "error-limit":
			st := f.OutlierDetection.Settings
			got := st.Consecutive5xx
			if observe == "layer4" {
				got = st.ConsecutiveLocalOriginFailure * b2i(st.SplitExternalLocalOriginErrors)
			}
			if n, _ := strconv.Atoi(words[1]); f.OutlierDetection.Use != scenario.OutlierEnvoy || got != n {
				t.Errorf("%q: ejects after %d errors, want %d", c.Name, got, n)
			}
		case "on-error":
			if words[1] != "mark-down" {
				t.Errorf("%q: on-error %s", c.Name, words[1])
			}
		default:
			if part != AsItIs {
				t.Errorf("%q: %q is no setting of HAProxy's space", c.Name, part)
			}
		}
	}
}

// TestWritableHAProxy: retries 0 to 3 with the user's; retry-on only with
// --conditions and only in mode http (HAProxy ignores it otherwise, and
// its default mode is tcp: 4.2, "mode"), written whole with the user's
// keywords the simulator makes no failure of; observe (layer7 in mode
// http, where alone HAProxy allows it; else layer4) with check added
// where a server has none, only where no server observes or says
// no-check; a retry-on none retries nothing, so only --conditions makes
// a candidate that retries.
func TestWritableHAProxy(t *testing.T) {
	for _, c := range []struct {
		name          string
		defaults, be  string
		cond          bool
		retries       []int
		want, absent  []string
		line, notLine string // a line the edit of want[0] writes, and one it must not
	}{
		{"http, every failure", hapHTTP, "    retries 5\n    retry-on all-retryable-errors\n" + hapTwo, false, []int{0, 1, 2, 3, 5},
			[]string{"observe layer7, error-limit 5, on-error mark-down", "retries 1, observe layer7, error-limit 10, on-error mark-down"}, []string{"retry-on conn-failure"},
			"    server s2 10.0.0.2:8080 check observe layer7 error-limit 5 on-error mark-down\n", ""},
		{"http, every failure, conditions", hapHTTP, "    retries 5\n    retry-on all-retryable-errors\n" + hapTwo, true, []int{0, 1, 2, 3, 5},
			[]string{"retry-on conn-failure", "retries 2, retry-on conn-failure 503"}, nil,
			"    retry-on conn-failure empty-response junk-response 0rtt-rejected\n", "    retry-on all-retryable-errors\n"},
		{"tcp", "    mode tcp\n", hapTwo, true, []int{0, 1, 2, 3},
			[]string{"observe layer4, error-limit 5, on-error mark-down", "retries 0"}, []string{"retry-on conn-failure 503", "observe layer7, error-limit 5, on-error mark-down"}, "", ""},
		{"no mode: tcp", "", hapTwo, true, []int{0, 1, 2, 3},
			[]string{"observe layer4, error-limit 10, on-error mark-down"}, []string{"retry-on conn-failure 503"}, "", ""},
		{"retry-on none", hapHTTP, "    retry-on none\n" + hapTwo, false, []int{0}, []string{"observe layer7, error-limit 5, on-error mark-down"}, []string{"retries 1"}, "", ""},
		{"retry-on none, conditions", hapHTTP, "    retry-on none\n" + hapTwo, true, []int{0, 1, 2, 3}, []string{"retry-on conn-failure", "retries 1, retry-on conn-failure 503"}, []string{"retries 1"}, "", ""},
		{"observes already", hapHTTP, "    default-server check observe layer4\n" + hapTwo, false, []int{0, 1, 2, 3}, []string{"retries 1"}, []string{"observe layer7, error-limit 5, on-error mark-down"}, "", ""},
		{"a no-check server", hapHTTP, "    server s1 10.0.0.1:8080 check\n    server s2 10.0.0.2:8080 no-check\n", false, []int{0, 1, 2, 3}, []string{"retries 1"}, []string{"observe layer7, error-limit 5, on-error mark-down"}, "", ""},
		{"checked, with a comment", hapHTTP, "    server s1 10.0.0.1:8080 check inter 1s # first\n    server s2 10.0.0.2:8080 check\n", false, []int{0, 1, 2, 3},
			[]string{"observe layer7, error-limit 5, on-error mark-down"}, nil, "    server s1 10.0.0.1:8080 check inter 1s observe layer7 error-limit 5 on-error mark-down # first\n", "check check"},
		{"retries in defaults", hapHTTP + "    retries 2\n", hapTwo, false, []int{0, 1, 2, 3}, []string{"retries 1"}, nil, "backend app\n    retries 1\n", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, cands := hapCandidates(t, hapWritableConf(c.defaults, c.be), c.cond)
			var got []int
			for _, x := range cands {
				if !slices.Contains(got, x.Fleet.Fleet.Retry.MaxRetries) {
					got = append(got, x.Fleet.Fleet.Retry.MaxRetries)
				}
				hapReadsAsNamed(t, x)
			}
			slices.Sort(got)
			if !slices.Equal(got, c.retries) {
				t.Errorf("retry counts %v, want %v (%d candidates)", got, c.retries, len(cands))
			}
			for _, n := range c.want {
				if _, ok := cands[n]; !ok {
					t.Errorf("no candidate %q", n)
				}
			}
			for _, n := range c.absent {
				if _, ok := cands[n]; ok {
					t.Errorf("a candidate %q", n)
				}
			}
			if x, ok := cands[c.want[0]]; ok && c.line != "" {
				after := string(x.Edited[0].After)
				if !strings.Contains(after, c.line) || (c.notLine != "" && strings.Contains(after, c.notLine)) {
					t.Errorf("%q writes:\n%s", c.want[0], x.Edited[0].Diff)
				}
			}
		})
	}
}

// TestWritableHAProxyRedispatch: option redispatch is not searched (the
// simulator's retries pick as the balancer does either way), and a
// candidate that retries without it says what it would change.
func TestWritableHAProxyRedispatch(t *testing.T) {
	for _, c := range []struct {
		be   string
		says bool
	}{{hapTwo, true}, {"    option redispatch\n" + hapTwo, false}} {
		_, cands := hapCandidates(t, hapWritableConf(hapHTTP, c.be), false)
		for n, x := range cands {
			says := strings.Contains(strings.Join(x.Notes, "\n"), "option redispatch is not searched")
			if n != AsItIs && x.Fleet.Fleet.Retry.MaxRetries > 0 && says != c.says {
				t.Errorf("option redispatch %v: %q notes %q", !c.says, n, x.Notes)
			}
			if strings.Contains(n, "redispatch") {
				t.Errorf("a candidate %q", n)
			}
		}
	}
}
