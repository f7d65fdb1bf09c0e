package replay_test

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/retrystorm/retrystorm/internal/promtest"
	"github.com/retrystorm/retrystorm/replay"
	"github.com/retrystorm/retrystorm/report"
)

// evil is what must not reach a terminal: ESC (a colour, a clear screen),
// BEL and U+202E (right-to-left override).
const evil = "\x1b[2J\x07\u202e"

// TestNoEscapesReachTheTerminal: a window whose file name and label
// values hold ESC, BEL and U+202E replays with them escaped in every text
// it prints (the title, the conclusion, the tables, the claims, the
// notes) and in its JSON (issue 37: the file name and the layers' names,
// label values, went out raw).
func TestNoEscapesReachTheTerminal(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ name, from string }{
		{"file name", "testdata/storm.json"},
		{"label values", "testdata/layers.json"},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := promtest.ReadAnswer(t, c.from)
			file := filepath.Join(dir, "window.json")
			if c.name == "file name" {
				file = filepath.Join(dir, "window"+evil+".json")
			} else {
				a = a.Edited(func(s promtest.AnswerSeries) promtest.AnswerSeries {
					for _, k := range []string{"job", "envoy_cluster_name"} {
						if v, ok := s.Metric[k]; ok {
							s.Metric[k] = v + evil
						}
					}
					return s
				})
			}
			a.Write(t, file)
			r, err := replay.Replay(context.Background(), readWindow(t, file), replay.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if c.name == "label values" && len(r.Loops) < 2 {
				t.Fatalf("%d layers: the test wants the layers' names printed", len(r.Loops))
			}
			o := r.Outcome()
			var text bytes.Buffer
			text.WriteString(o.Section.Title + "\n" + strings.Join(o.Section.Intro, "\n") + "\n" + strings.Join(o.Section.Notes, "\n") + "\n" + strings.Join(o.Findings, "\n"))
			for _, tb := range o.Section.Tables {
				if err := tb.Render(&text, report.Style{Width: 200}); err != nil {
					t.Fatal(err)
				}
			}
			if err := report.RenderClaims(&text, o.Claims, report.Style{}); err != nil {
				t.Fatal(err)
			}
			js, err := json.Marshal(r)
			if err != nil {
				t.Fatal(err)
			}
			for what, b := range map[string][]byte{"text": text.Bytes(), "JSON": js} {
				if i := bytes.IndexAny(b, "\x1b\x07\u202e"); i >= 0 {
					t.Errorf("the %s carries a control or direction character raw: %q", what, b[max(0, i-60):min(len(b), i+20)])
				}
			}
			if !bytes.Contains(text.Bytes(), []byte(`\x1b[2J\a\u202e`)) {
				t.Errorf("the text does not show the escaped name:\n%s", text.Bytes())
			}
		})
	}
}
