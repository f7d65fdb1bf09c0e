package scenario

import (
	"encoding"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/retrystorm/retrystorm/resil"
)

// TestDocsExamples parses every complete scenario in docs/scenario.md (the
// YAML blocks that start with "name:"), so the page cannot drift from the
// loader.
func TestDocsExamples(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "scenario.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```yaml\n(name:.*?)```").FindAllSubmatch(doc, -1)
	if len(blocks) < 2 {
		t.Fatalf("found %d complete examples in docs/scenario.md, want at least 2", len(blocks))
	}
	for _, b := range blocks {
		if _, err := Parse("docs/scenario.md", b[1]); err != nil {
			t.Errorf("%v\n%s", err, b[1])
		}
	}
}

// vocabulary is every word-valued key of the file with its words: the
// selectors (model, kind, use) and the word fields, from the schema's
// tables.
func vocabulary() map[string][][]string {
	out := map[string][][]string{}
	var walk func(o *object)
	walk = func(o *object) {
		if o.selector != "" {
			out[o.selector] = append(out[o.selector], o.kinds)
		}
		for _, f := range o.fields {
			v := f.v
			if z, ok := v.(omitZero); ok {
				v = z.value
			}
			switch v := v.(type) {
			case word:
				out[f.key] = append(out[f.key], v.words)
			case enumWord:
				out[f.key] = append(out[f.key], v.words)
			case trafficValue:
				walk(v.object())
			case tierServer:
				walk(v.object())
			case cacheValue:
				walk(cacheObject(new(Cache)))
			case fleetTraffic:
				walk(trafficObject(new(Traffic)))
			case *object:
				walk(v)
			case unlessUnset:
				walk(v.o)
			case replicas:
				walk(v.object())
				var ft Fault
				walk(faultObject(&ft))
			case serviceTime:
				walk(serviceTimeObject(v.st))
			}
		}
	}
	var (
		s  Scenario
		tr Trigger
		f  Fleet
		ti Tier
	)
	// The lists' items are not reached from the top: walk them too.
	for _, o := range []*object{scenarioObject(&s), triggerObject(&tr), fleetObject(&f), tierObject(&ti)} {
		walk(o)
	}
	return out
}

// TestDocsVocabulary: docs/scenario.md lists exactly the words the loader
// takes, for every word-valued key: in its table row ("| `jitter` | word |
// `none`, `full`, ... |"), or, for a kind documented by a heading per kind,
// as "`use: token_bucket`". The words come from the schema's tables, and
// resil's own for resil's enums (TestVocabularyIsResils), so the page
// cannot drift from either.
func TestDocsVocabulary(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "scenario.md"))
	if err != nil {
		t.Fatal(err)
	}
	ticked := regexp.MustCompile("`([^`]+)`")
	for key, lists := range vocabulary() {
		rows := regexp.MustCompile("(?m)^\\| `"+regexp.QuoteMeta(key)+"` \\| word \\| ([^|]*) \\|").FindAllSubmatch(doc, -1)
		var documented [][]string
		for _, r := range rows {
			var ws []string
			for _, m := range ticked.FindAllSubmatch(r[1], -1) {
				ws = append(ws, string(m[1]))
			}
			documented = append(documented, ws)
		}
		for _, words := range lists {
			if slices.ContainsFunc(documented, func(ws []string) bool { return slices.Equal(ws, words) }) {
				continue
			}
			var missing []string
			for _, w := range words {
				if !strings.Contains(string(doc), "`"+key+": "+w+"`") {
					missing = append(missing, w)
				}
			}
			if len(missing) > 0 {
				t.Errorf("docs/scenario.md: no row for %s lists %s (its rows list %v), and no heading documents %s: %s",
					key, strings.Join(words, ", "), documented, key, strings.Join(missing, ", "))
			}
		}
	}
}

// TestVocabularyIsResils: the words of resil's enums in the file are
// resil's own (MarshalText), none is empty, and the scenario's exported
// names for them spell the same words.
func TestVocabularyIsResils(t *testing.T) {
	for _, ws := range [][]string{breakerRules, schedules, jitters, fundings, scopes} {
		if slices.Contains(ws, "") {
			t.Errorf("an empty word in %q", ws)
		}
	}
	for name, c := range map[string]struct {
		constant string
		v        encoding.TextMarshaler
	}{
		"BreakerConsecutive": {BreakerConsecutive, resil.ConsecutiveFailures},
		"BreakerCountWindow": {BreakerCountWindow, resil.CountWindow},
		"BreakerTimeWindow":  {BreakerTimeWindow, resil.TimeWindow},
	} {
		if w := resilWord(c.v); w != c.constant {
			t.Errorf("%s = %q, but resil says %q", name, c.constant, w)
		}
	}
	if got := strings.Join(jitters, " "); got != "none full equal decorrelated factor" {
		t.Errorf("jitters %q", got)
	}
}
