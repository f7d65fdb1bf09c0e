package importer

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/retrystorm/retrystorm/scenario"
)

// HAProxy's space, as HAProxy 2.6 reads it (doc/configuration.txt at
// v2.6.0: "retries" and "retry-on" in 4.2, "observe", "error-limit" and
// "on-error" in 5.2): the backend's retries, its retry-on with
// Conditions (in mode http alone: HAProxy ignores it in mode tcp), and,
// where no server observes its traffic, observe with error-limit and
// on-error mark-down on each server line. The edits are the text edits
// editHAProxy makes: a line of the section replaced, or added after its
// header; a defaults section's line stays for the other backends.
//
// "option redispatch" is not searched: with it or without, the simulator's
// retries pick as the balancer does (haproxy.go), so the two read as one
// fleet; a candidate that retries says so in a note.

// HAProxy's grid (docs/check.md says why).
var (
	hapRetryCounts = []int{0, 1, 2, 3}
	// hapRetryOnLists span the simulator's failures: refused connections
	// alone (HAProxy's default), with 503s, with server timeouts, and
	// every failure all-retryable-errors names.
	hapRetryOnLists = []string{"conn-failure", "conn-failure 503", "conn-failure response-timeout", "conn-failure response-timeout 500 502 503 504"}
	// hapErrorLimits are error-limit values: 10 is HAProxy's default.
	hapErrorLimits = []int{5, 10}
)

// hapTarget is where an HAProxy fleet's settings are in the files.
type hapTarget struct {
	src        Source
	px         *hapProxy
	http       bool   // mode http: retry-on and observe layer7 apply
	none       bool   // its retry-on retries no failure the simulator makes
	retries    int    // its retries setting, default 3
	redispatch bool   // option redispatch is on
	unmodelled string // its retry-on keywords the simulator makes no failure of
	// servers are the section's server lines, when each can take
	// observe's parameters (hapServerLine) and none observes already.
	servers []hapLine
}

func findHapTarget(w *writer) (*hapTarget, error) {
	var mine []Source
	for _, s := range w.srcs {
		if _, err := parseHAProxy(s.Name, s.Data); err == nil {
			mine = append(mine, s)
		}
	}
	proxies, err := hapProxies(mine)
	if err != nil {
		return nil, err
	}
	line := lineOf(w.from.Origin)
	i := slices.IndexFunc(proxies, func(px *hapProxy) bool { return px.file == w.loc.file && px.sec.Line == line })
	if i < 0 {
		return nil, fmt.Errorf("%s:%d: no backend there", w.loc.file, line)
	}
	px := proxies[i]
	t := &hapTarget{src: *sourceNamed(w.srcs, px.file), px: px, retries: hapRetries}
	tcp := false
	if m, ok := px.settings["mode"]; ok && len(m.Words) > 0 {
		t.http, tcp = m.Words[0] == "http", m.Words[0] == "tcp" // HAProxy's default is tcp
	}
	if st, ok := px.settings["retries"]; ok {
		t.retries, _ = strconv.Atoi(strings.Join(st.Words, " "))
	}
	if st, ok := px.settings["redispatch"]; ok {
		t.redispatch = !(len(st.Words) == 1 && st.Words[0] == "0")
	}
	words := []string{hapRetryOn}
	if st, ok := px.settings["retry-on"]; ok {
		words = st.Words
	}
	t.none = !tcp && len(hapKinds(words)) == 0 // as the importer reads it: retry-on unless mode tcp says so
	var keep []string
	for _, wd := range words {
		switch k := hapConditions[wd]; {
		case wd == "all-retryable-errors":
			keep = append(keep, "empty-response", "junk-response", "0rtt-rejected")
		case len(k) == 1 && k[0] == "":
			keep = append(keep, wd)
		}
	}
	t.unmodelled = strings.Join(keep, " ")
	t.servers = hapObservable(t.src, px)
	return t, nil
}

// hapObservable are px's server lines, when none observes already (by its
// own parameters or default-server's), none says no-check (which the
// check observe needs would not undo), and each is one line without quotes
// or escapes; else nil.
func hapObservable(src Source, px *hapProxy) []hapLine {
	for _, s := range px.servers {
		if _, ok := s.params["observe"]; ok {
			return nil
		}
		if _, ok := s.params["no-check"]; ok {
			return nil
		}
	}
	lines := strings.SplitAfter(string(src.Data), "\n")
	var out []hapLine
	for _, l := range px.sec.Lines {
		if l.Words[0] != "server" {
			continue
		}
		if l.Line > len(lines) || strings.ContainsAny(lines[l.Line-1], `"'\`) {
			return nil
		}
		out = append(out, l)
	}
	return out
}

// hapKinds are the simulator's failures retry-on's keywords retry.
func hapKinds(words []string) []string {
	var out []string
	for _, w := range words {
		for _, k := range hapConditions[w] {
			if k != "" && !slices.Contains(out, k) {
				out = append(out, k)
			}
		}
	}
	return out
}

func hapSpace(w *writer) (space, error) {
	t, err := findHapTarget(w)
	if err != nil {
		return space{}, err
	}
	user := w.from.Fleet
	retries, zero := []option{asIs}, -1
	if !t.none || w.opts.Conditions {
		retries, zero = countOptions(hapRetryCounts, user.Retry.MaxRetries, func(n int) option { return t.retriesOption(n) })
	}
	conds := []option{asIs}
	if w.opts.Conditions && t.http {
		for _, c := range hapRetryOnLists {
			if t.none || user.Retry.MaxRetries == 0 || !sameKinds(hapKinds(strings.Fields(c)), user.Retry.On) {
				conds = append(conds, t.retryOn(c))
			}
		}
	}
	observe := []option{asIs}
	if t.servers != nil {
		for _, n := range hapErrorLimits {
			observe = append(observe, t.observe(n))
		}
	}
	const dRetries, dConds = 0, 1
	return space{
		dims: [][]option{retries, conds, observe},
		skip: func(p []int) bool {
			return (p[dRetries] == zero && p[dConds] > 0) || (t.none && p[dConds] == 0 && p[dRetries] > 0)
		},
		finish: t.finish,
	}, nil
}

func (t *hapTarget) retriesOption(n int) option {
	return option{func(w *writer) (string, error) {
		w.retries = n
		w.doc("section", kv{Key: "retries", Value: strconv.Itoa(n)})
		w.expect(func(g scenario.Fleet) string {
			return unless(g.Retry.MaxRetries == n, fmt.Sprintf("%d retries, not %d", g.Retry.MaxRetries, n))
		})
		return fmt.Sprintf("retries %d", n), nil
	}}
}

// retryOn writes retry-on c with the user's keywords the simulator makes
// no failure of (empty-response, junk-response, ...); it replaces the
// whole list, as HAProxy's retry-on does.
func (t *hapTarget) retryOn(c string) option {
	return option{func(w *writer) (string, error) {
		if t.none && w.retries == 0 {
			w.retries = t.retries // retry-on none no more: the retries in effect
		}
		if w.retries == 0 {
			return "", errSkip
		}
		words := strings.TrimSpace(c + " " + t.unmodelled)
		w.doc("section", kv{Key: "retry-on", Value: words})
		want := hapKinds(strings.Fields(c))
		w.expect(func(g scenario.Fleet) string {
			return unless(g.Retry.MaxRetries > 0 && sameKinds(g.Retry.On, want), fmt.Sprintf("retries on %v, not %v", g.Retry.On, want))
		})
		return "retry-on " + c, nil
	}}
}

// observe adds to each server line check (where it has none: observing
// needs health checks) and observe (layer7 in mode http, where HAProxy
// allows it; layer4 else), error-limit n and on-error mark-down: n errors
// in a row take the server out until its health checks pass again.
func (t *hapTarget) observe(n int) option {
	mode := "layer4"
	if t.http {
		mode = "layer7"
	}
	return option{func(w *writer) (string, error) {
		w.doc("observe", kv{Key: mode, Value: strconv.Itoa(n)})
		w.expect(func(g scenario.Fleet) string {
			st := g.OutlierDetection.Settings
			got := st.Consecutive5xx
			if !t.http {
				got = st.ConsecutiveLocalOriginFailure // layer4: failed connections alone (observe in haproxybalance.go)
			}
			return unless(g.OutlierDetection.Use == scenario.OutlierEnvoy && got == n, fmt.Sprintf("ejects after %d errors, not %d", got, n))
		})
		w.note("observing needs health checks: a server line without check gets one (HAProxy checks a connection every 2s unless inter says otherwise)")
		return fmt.Sprintf("observe %s, error-limit %d, on-error mark-down", mode, n), nil
	}}
}

// finish writes the section's lines and the servers' parameters the
// options chose, as editHAProxy writes its own.
func (t *hapTarget) finish(w *writer) error {
	f := newTextFile(t.src)
	for _, e := range w.docs["section"] {
		f.setLine(t.px.sec, e.Key, e.Value)
	}
	for _, e := range w.docs["observe"] {
		for i, l := range t.servers {
			add := " observe " + e.Key + " error-limit " + e.Value + " on-error mark-down"
			if _, ok := t.px.servers[i].params["check"]; !ok {
				add = " check" + add
			}
			f.lines[l.Line-1] = appendWords(f.lines[l.Line-1], add)
		}
	}
	if w.retries > 0 && !t.redispatch {
		w.note("option redispatch is not searched (the simulator's retries pick as the balancer does with it or without): without it HAProxy retries the same server, which a dead server fails every time; \"option redispatch 1\" sends each retry to another")
	}
	if after := f.bytes(); string(after) != string(t.src.Data) {
		w.added = append(w.added, Edited{Name: t.src.Name, Before: t.src.Data, After: after, Diff: Diff(t.src.Name, t.src.Data, after)})
	}
	return nil
}

// appendWords adds words at the end of an HAProxy line, before its
// comment and its line end.
func appendWords(line, words string) string {
	body, end := line, ""
	if i := strings.IndexAny(line, "#\r\n"); i >= 0 {
		body, end = line[:i], line[i:]
	}
	trimmed := strings.TrimRight(body, " \t")
	return trimmed + words + body[len(trimmed):] + end
}
