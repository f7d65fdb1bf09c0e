package importer

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/retrystorm/retrystorm/giveup"
	"github.com/retrystorm/retrystorm/scenario"
)

// nginx and HAProxy edits: a recommendation written in their own syntax,
// directives replaced where they stand or added beside their siblings, as
// the YAML edits do (edit.go): every other byte stays as it was.

// ngxWords are proxy_next_upstream's values for each of retry.on's kinds.
var ngxWords = map[string][]string{
	scenario.RetryOnRefused: {"error"}, scenario.RetryOnTimeout: {"timeout"},
	scenario.RetryOnError: {"http_500"}, scenario.RetryOnRejection: {"http_503", "http_429"},
	scenario.RetryOnGateway: {"http_502", "http_504"},
}

// kindWords writes retry.on (every kind when empty) in a product's words.
func kindWords(on []string, words map[string][]string) []string {
	if len(on) == 0 {
		on = giveup.Kinds
	}
	var out []string
	for _, k := range on {
		out = append(out, words[k]...)
	}
	return out
}

// ngxDur writes a duration as nginx reads it: whole seconds as "30s",
// else milliseconds.
func ngxDur(d time.Duration) string {
	if d%time.Second == 0 {
		return strconv.FormatInt(int64(d/time.Second), 10) + "s"
	}
	return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
}

// exportNginx writes f as the directives of a location.
func exportNginx(f scenario.Fleet) (string, []string) {
	var b strings.Builder
	var lost []string
	n, unlimited := retries(f)
	if unlimited {
		n = 10
		lost = append(lost, "unlimited retries: nginx needs a number of tries; written as 11")
	}
	b.WriteString("# in the location (or its server, or http) block:\n")
	if n == 0 {
		b.WriteString("proxy_next_upstream off;\n")
	} else {
		vals := kindWords(f.Retry.On, ngxWords)
		if !f.Retry.IdempotentOnly {
			vals = append(vals, "non_idempotent")
		}
		fmt.Fprintf(&b, "proxy_next_upstream %s;\nproxy_next_upstream_tries %d;\n", strings.Join(vals, " "), n+1)
		lost = append(lost, "the tries are also bounded by the upstream's servers: nginx tries each at most once per request")
	}
	fmt.Fprintf(&b, "proxy_read_timeout %s;\n", ngxDur(f.Timeout))
	if f.Deadline > 0 {
		fmt.Fprintf(&b, "proxy_next_upstream_timeout %s;\n", ngxDur(f.Deadline))
	}
	return b.String(), append(lost, ngxCannot(f, "nginx")...)
}

// ngxCannot says what nginx and HAProxy cannot write of f: a budget, a
// breaker, a back-off, hedges.
func ngxCannot(f scenario.Fleet, product string) []string {
	var lost []string
	if u := f.Budget.Use; u != "" && u != scenario.BudgetNone && f.Retry.MaxRetries != 0 {
		lost = append(lost, fmt.Sprintf("the %s budget: %s has no retry budget; only the tries bound the retries", u, product))
	}
	lost = append(lost, breakerLost(f, product)...)
	if f.Retry.MaxRetries != 0 && product == "nginx" && f.Retry.Backoff.Use != "" && f.Retry.Backoff.Use != "none" {
		lost = append(lost, "the backoff: nginx passes a request to the next server at once")
	}
	if f.Hedge.Delay > 0 {
		lost = append(lost, fmt.Sprintf("hedging: %s does not hedge", product))
	}
	return lost
}

// lineOf reads the "(line N" an nginx or HAProxy fleet's Origin ends with.
func lineOf(origin string) int {
	_, rest, ok := strings.Cut(origin, "(line ")
	if !ok {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimRight(strings.FieldsFunc(rest, func(r rune) bool { return r == ',' || r == ')' })[0], " "))
	return n
}

// textFile is a file edited line by line.
type textFile struct {
	name  string
	lines []string // each with its newline
}

func newTextFile(s Source) *textFile {
	return &textFile{name: s.Name, lines: strings.SplitAfter(string(s.Data), "\n")}
}

func (t *textFile) bytes() []byte { return []byte(strings.Join(t.lines, "")) }

// indent is line i's leading white space.
func (t *textFile) indent(i int) string {
	l := t.lines[i]
	return l[:len(l)-len(strings.TrimLeft(l, " \t"))]
}

// editNginx writes rec into the location of from: proxy_next_upstream,
// proxy_next_upstream_tries and proxy_read_timeout, where the location
// sets them, else added as its first directives.
func editNginx(srcs []Source, from Fleet, rec scenario.Fleet) ([]Edited, []string, error) {
	loc := parseOrigin(from.Origin)
	src := sourceNamed(srcs, loc.file)
	if src == nil || strings.HasPrefix(loc.path, "ConfigMap ") {
		return nil, []string{"an ingress-nginx ConfigMap: set data.proxy-next-upstream, -tries and proxy-read-timeout there"}, nil
	}
	ds, err := parseNginx(src.Name, src.Data)
	if err != nil {
		return nil, nil, err
	}
	at := lineOf(from.Origin)
	l := ngxLocationAt(ds, at)
	if l == nil {
		return nil, nil, fmt.Errorf("%s:%d: no location there", src.Name, at)
	}
	user := from.Fleet
	t := newTextFile(*src)
	var sets [][2]string
	n, unlimited := retries(rec)
	if unlimited {
		n = 10
	}
	prefix := "proxy_"
	if ngxLast(l.Block, "grpc_pass") != nil {
		prefix = "grpc_"
	}
	switch {
	case n == 0 && user.Retry.MaxRetries != 0:
		sets = append(sets, [2]string{prefix + "next_upstream_tries", "1"})
	case n != user.Retry.MaxRetries:
		sets = append(sets, [2]string{prefix + "next_upstream_tries", strconv.Itoa(n + 1)})
	}
	if n != 0 && !slices.Equal(rec.Retry.On, user.Retry.On) {
		vals := kindWords(rec.Retry.On, ngxWords)
		if d := ngxLast(l.Block, prefix+"next_upstream"); d != nil {
			for _, v := range d.Args {
				if k, ok := ngxConditions[strings.ToLower(v)]; ok && k == "" && v != "off" {
					vals = append(vals, v) // kept: what the simulator does not model
				}
			}
		} else if !user.Retry.IdempotentOnly {
			vals = append(vals, "non_idempotent")
		}
		sets = append(sets, [2]string{prefix + "next_upstream", strings.Join(vals, " ")})
	}
	if rec.Timeout != user.Timeout {
		sets = append(sets, [2]string{prefix + "read_timeout", ngxDur(rec.Timeout)})
	}
	notes := ngxCannot(rec, "nginx")
	for _, kv := range sets {
		if !t.setDirective(l, kv[0], kv[1]) {
			notes = append(notes, fmt.Sprintf("%s:%d: the location is not one directive a line: set %s %s; there yourself", src.Name, l.Line, kv[0], kv[1]))
		}
	}
	if n > 0 {
		notes = append(notes, "the tries are also bounded by the upstream's servers: nginx tries each at most once per request")
	}
	after := t.bytes()
	if string(after) == string(src.Data) {
		return nil, notes, nil
	}
	return []Edited{{Name: src.Name, Before: src.Data, After: after, Diff: Diff(src.Name, src.Data, after)}}, notes, nil
}

// setDirective sets name's arguments in block l: on its own line where l
// sets it, else as a new line after the block's opening line. It reports
// false, and changes nothing, when that line holds more than the one
// directive (or the block opens on a line that holds more).
func (t *textFile) setDirective(l *ngxDirective, name, args string) bool {
	if d := ngxLast(l.Block, name); d != nil {
		i := d.Line - 1
		if i >= len(t.lines) {
			return false
		}
		body := strings.TrimSpace(t.lines[i])
		if k := strings.IndexByte(body, '#'); k >= 0 {
			body = strings.TrimSpace(body[:k])
		}
		if !strings.HasPrefix(body, name+" ") || strings.Count(body, ";") != 1 || !strings.HasSuffix(body, ";") {
			return false
		}
		nl := ""
		if strings.HasSuffix(t.lines[i], "\n") {
			nl = "\n"
		}
		t.lines[i] = t.indent(i) + name + " " + args + ";" + nl
		return true
	}
	i := l.Line - 1
	if i >= len(t.lines) {
		return false
	}
	if opening, _, _ := strings.Cut(t.lines[i], "\n"); !strings.HasSuffix(strings.TrimSpace(opening), "{") {
		return false // the directives added before this one follow the opening line
	}
	ind := t.indent(i) + "    "
	if len(l.Block) > 0 && l.Block[0].Line-1 < len(t.lines) && l.Block[0].Line > l.Line {
		ind = t.indent(l.Block[0].Line - 1)
	}
	if !strings.HasSuffix(t.lines[i], "\n") {
		t.lines[i] += "\n"
	}
	t.lines[i] += ind + name + " " + args + ";\n"
	return true
}

// ngxLocationAt finds the location block that begins at line.
func ngxLocationAt(ds []*ngxDirective, line int) *ngxDirective {
	for _, d := range ds {
		if d.Name == "location" && d.Line == line && d.block {
			return d
		}
		if l := ngxLocationAt(d.Block, line); l != nil {
			return l
		}
	}
	return nil
}

func sourceNamed(srcs []Source, name string) *Source {
	for i := range srcs {
		if srcs[i].Name == name {
			return &srcs[i]
		}
	}
	return nil
}
