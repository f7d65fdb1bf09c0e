package document

import (
	"bytes"
	"testing"

	"github.com/retrystorm/retrystorm/report"
)

func TestPageHTML(t *testing.T) {
	p := report.Page{Title: "T", Sections: []report.Section{{ID: "s", Title: "S", Intro: []string{"<b>not html</b>"},
		Tables: []report.Table{{Columns: []report.Column{{Name: "a"}}, Rows: [][]string{{"1"}}}},
		Claims: []report.Claim{{Text: "c", Holds: false, Detail: "d"}},
		Charts: []report.Chart{{Title: "c", X: []float64{0, 1}, Lines: []report.Line{{Name: "l", Y: []float64{0, 1}}}}}}}}
	doc, err := HTML(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"&lt;b&gt;not html&lt;/b&gt;", "✗ fails", "<svg"} {
		if !bytes.Contains(doc, []byte(want)) {
			t.Errorf("page lacks %q", want)
		}
	}
	for _, bad := range []string{"<script", "<link", "@import", "url("} {
		if bytes.Contains(doc, []byte(bad)) {
			t.Errorf("page is not self-contained: %q", bad)
		}
	}
}

// A file name with an escape sequence, as `retrystorm run` puts in the
// title, reaches the page escaped: reading the report in a terminal runs
// nothing.
func TestPageEscapesControlCharacters(t *testing.T) {
	name := "\x1b[41mEVIL\x1b[0m\u202e.yaml"
	p := report.Page{Title: "retrystorm run " + name, Command: "retrystorm run " + name,
		Sections: []report.Section{{ID: "s", Title: "S", Notes: []string{"bell\x07"}}}}
	doc, err := HTML(p)
	if err != nil {
		t.Fatal(err)
	}
	if i := bytes.IndexFunc(doc, func(r rune) bool { return r == 0x1b || r == 0x07 || r == 0x202e }); i >= 0 {
		t.Fatalf("the page holds a control character at byte %d: %q", i, doc[max(0, i-20):min(len(doc), i+20)])
	}
	if !bytes.Contains(doc, []byte(`<title>retrystorm run \x1b[41mEVIL\x1b[0m\u202e.yaml</title>`)) {
		t.Errorf("the title does not show the name escaped:\n%s", doc[:min(len(doc), 400)])
	}
}

// TestFiguresAreWrittenAsDrawn: a figure report drew is written into the
// page as its markup, not escaped.
func TestFiguresAreWrittenAsDrawn(t *testing.T) {
	h := report.Heatmap{Title: "map", X: []float64{0.5}, Y: []float64{0.1}, Cells: [][]float64{{1}}}
	doc, err := HTML(report.Page{Title: "T", Sections: []report.Section{{ID: "s", Title: "S", Figures: []report.SVG{report.SVG(h.SVG())}}}})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(doc, []byte(`<svg`)) || bytes.Contains(doc, []byte("&lt;svg")) {
		t.Error("the figure is not written as markup")
	}
}
