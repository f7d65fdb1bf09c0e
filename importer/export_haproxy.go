package importer

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/retrystorm/retrystorm/scenario"
)

// hapRetryOnWords are retry-on's keywords for each of retry.on's kinds.
var hapRetryOnWords = map[string][]string{
	scenario.RetryOnRefused: {"conn-failure"}, scenario.RetryOnTimeout: {"response-timeout"},
	scenario.RetryOnError: {"500"}, scenario.RetryOnRejection: {"503"},
	scenario.RetryOnGateway: {"502", "504"},
}

// exportHAProxy writes f as the lines of a backend section.
func exportHAProxy(f scenario.Fleet) (string, []string) {
	var b strings.Builder
	var lost []string
	n, unlimited := retries(f)
	if unlimited {
		n = 10
		lost = append(lost, "unlimited retries: HAProxy needs a number; written as 10")
	}
	b.WriteString("# in the backend (or defaults) section:\n")
	fmt.Fprintf(&b, "retries %d\n", n)
	if n > 0 {
		fmt.Fprintf(&b, "retry-on %s\n", strings.Join(kindWords(f.Retry.On, hapRetryOnWords), " "))
	}
	fmt.Fprintf(&b, "timeout server %s\n", ngxDur(f.Timeout))
	lost = append(lost, ngxCannot(f, "HAProxy")...)
	if bo := f.Retry.Backoff; n > 0 && bo.Use != "fixed" && bo.Use != "" && bo.Use != "none" {
		lost = append(lost, "the backoff: HAProxy waits min(timeout connect, 1s) before a retry")
	}
	return b.String(), lost
}

// editHAProxy writes rec into the backend of from: retries, retry-on and
// timeout server, where the section sets them, else added as its first
// lines (a defaults section's value stays for the other backends).
func editHAProxy(srcs []Source, from Fleet, rec scenario.Fleet) ([]Edited, []string, error) {
	loc := parseOrigin(from.Origin)
	src := sourceNamed(srcs, loc.file)
	if src == nil {
		return nil, nil, fmt.Errorf("importer: %s is not among the files given", loc.file)
	}
	secs, err := parseHAProxy(src.Name, src.Data)
	if err != nil {
		return nil, nil, err
	}
	at := lineOf(from.Origin)
	i := slices.IndexFunc(secs, func(s *hapSection) bool { return s.Line == at })
	if i < 0 {
		return nil, nil, fmt.Errorf("%s:%d: no backend there", src.Name, at)
	}
	sec, user, t := secs[i], from.Fleet, newTextFile(*src)
	n, unlimited := retries(rec)
	if unlimited {
		n = 10
	}
	var sets [][2]string
	if n != user.Retry.MaxRetries {
		sets = append(sets, [2]string{"retries", strconv.Itoa(n)})
	}
	if n > 0 && !slices.Equal(rec.Retry.On, user.Retry.On) {
		sets = append(sets, [2]string{"retry-on", strings.Join(kindWords(rec.Retry.On, hapRetryOnWords), " ")})
	}
	if rec.Timeout != user.Timeout {
		sets = append(sets, [2]string{"timeout server", ngxDur(rec.Timeout)})
	}
	for _, kv := range sets {
		t.setLine(sec, kv[0], kv[1])
	}
	notes := ngxCannot(rec, "HAProxy")
	after := t.bytes()
	if string(after) == string(src.Data) {
		return nil, notes, nil
	}
	return []Edited{{Name: src.Name, Before: src.Data, After: after, Diff: Diff(src.Name, src.Data, after)}}, notes, nil
}

// setLine sets key (one or two words: "timeout server") in section sec:
// the line where sec sets it, else a new line after the section's header.
func (t *textFile) setLine(sec *hapSection, key, value string) {
	kw := strings.Fields(key)
	for j := len(sec.Lines) - 1; j >= 0; j-- {
		l := sec.Lines[j]
		if len(l.Words) >= len(kw) && slices.Equal(l.Words[:len(kw)], kw) && l.Line-1 < len(t.lines) {
			nl := ""
			if strings.HasSuffix(t.lines[l.Line-1], "\n") {
				nl = "\n"
			}
			t.lines[l.Line-1] = t.indent(l.Line-1) + key + " " + value + nl
			return
		}
	}
	i := sec.Line - 1
	ind := "    "
	if len(sec.Lines) > 0 && sec.Lines[0].Line-1 < len(t.lines) {
		ind = t.indent(sec.Lines[0].Line - 1)
	}
	if !strings.HasSuffix(t.lines[i], "\n") {
		t.lines[i] += "\n"
	}
	t.lines[i] += ind + key + " " + value + "\n"
}
