package calibrate

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/prometheus/common/model"
)

// Selector is a list of label matchers, as PromQL writes them between
// braces: {job="checkout", instance=~"10\\.0\\..*"}. It narrows every
// metric a calibration reads, live (added to each query) and from files
// (applied to the saved series).
type Selector struct {
	Matchers []Matcher
}

// Matcher is one label matcher.
type Matcher struct {
	Name  model.LabelName
	Op    string // =, !=, =~ or !~
	Value string
	re    *regexp.Regexp
}

var matcherRE = regexp.MustCompile(`^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')\s*(?:,|$)`)

// ParseSelector reads {k="v", ...}. The empty string is the empty
// selector, which matches every series.
func ParseSelector(s string) (Selector, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return Selector{}, nil
	}
	if !strings.HasPrefix(t, "{") || !strings.HasSuffix(t, "}") {
		return Selector{}, fmt.Errorf("%q: want label matchers between braces, such as {job=\"checkout\"}", s)
	}
	body := strings.TrimSpace(t[1 : len(t)-1])
	var sel Selector
	for body != "" {
		m := matcherRE.FindStringSubmatch(body)
		if m == nil {
			return Selector{}, fmt.Errorf("%q: cannot read the matcher at %q: write name=\"value\", name!=\"value\", name=~\"regexp\" or name!~\"regexp\", separated by commas", s, body)
		}
		q := m[3]
		if q[0] == '\'' {
			q = `"` + strings.ReplaceAll(q[1:len(q)-1], `"`, `\"`) + `"`
		}
		v, err := strconv.Unquote(q)
		if err != nil {
			return Selector{}, fmt.Errorf("%q: the value %s: %v", s, m[3], err)
		}
		if m[1] == model.MetricNameLabel {
			return Selector{}, fmt.Errorf("%q: the selector narrows the series calibrate reads; it cannot name the metric (__name__)", s)
		}
		mt := Matcher{Name: model.LabelName(m[1]), Op: m[2], Value: v}
		if mt.Op == "=~" || mt.Op == "!~" {
			// Prometheus anchors its regular expressions.
			if mt.re, err = regexp.Compile("^(?:" + v + ")$"); err != nil {
				return Selector{}, fmt.Errorf("%q: the regular expression %q: %v", s, v, err)
			}
		}
		sel.Matchers = append(sel.Matchers, mt)
		body = strings.TrimSpace(body[len(m[0]):])
	}
	return sel, nil
}

// Matches reports whether ls satisfies every matcher; a missing label is
// the empty string, as in Prometheus.
func (s Selector) Matches(ls model.LabelSet) bool {
	for _, m := range s.Matchers {
		v := string(ls[m.Name])
		var ok bool
		switch m.Op {
		case "=":
			ok = v == m.Value
		case "!=":
			ok = v != m.Value
		case "=~":
			ok = m.re.MatchString(v)
		case "!~":
			ok = !m.re.MatchString(v)
		}
		if !ok {
			return false
		}
	}
	return true
}

// For writes the PromQL selector of metric narrowed by s.
func (s Selector) For(metric string) string {
	if len(s.Matchers) == 0 {
		return metric
	}
	parts := make([]string, len(s.Matchers))
	for i, m := range s.Matchers {
		parts[i] = string(m.Name) + m.Op + strconv.Quote(m.Value)
	}
	return metric + "{" + strings.Join(parts, ", ") + "}"
}

// String is the selector as PromQL writes it.
func (s Selector) String() string {
	if len(s.Matchers) == 0 {
		return "{}"
	}
	return s.For("")
}
