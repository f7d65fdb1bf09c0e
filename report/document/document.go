// Package document renders a report.Page as one self-contained HTML
// document (inline style and SVG, no script, nothing fetched) and writes
// it. It is apart from package report so that a program that draws
// reports without writing HTML (the page's WebAssembly module) does not
// link the template engine, which with its reflection weighs about a
// tenth of that module.
package document

import (
	"bytes"
	_ "embed"
	"fmt"
	"html/template"
	"os"
	"path/filepath"
	"sync"

	"github.com/retrystorm/retrystorm/internal/safetext"
	"github.com/retrystorm/retrystorm/report"
)

//go:embed report.html.tmpl
var pageTemplate string

// The template is parsed on first use, not at init.
var (
	tmplOnce sync.Once
	tmpl     *template.Template
)

func parseTemplate() {
	tmpl = template.Must(template.New("report").Funcs(template.FuncMap{
		"svg":    func(c report.Chart) template.HTML { return template.HTML(c.SVG()) },
		"figure": func(s report.SVG) template.HTML { return template.HTML(s) }, // drawn by report: trusted
		"right":  func(a report.Align) bool { return a == report.Right },
		"emph":   func(t report.Table, r, c int) bool { return t.Emphasis[[2]int{r, c}] },
		"allok":  report.AllHold,
		"plural": func(n int) string { return map[bool]string{true: "", false: "s"}[n == 1] },
	}).Parse(pageTemplate))
}

// HTML renders p as one self-contained HTML document.
//
// Text from outside (a file name in the title or the command) is printed
// with its control and invisible characters escaped (\x1b), so that
// reading the file in a terminal cannot run an escape sequence; any other
// control character is replaced.
func HTML(p report.Page) ([]byte, error) {
	p.Title, p.Subtitle, p.Command = safetext.Escape(p.Title), safetext.Escape(p.Subtitle), safetext.Escape(p.Command)
	var b bytes.Buffer
	tmplOnce.Do(parseTemplate)
	if err := tmpl.Execute(&b, p); err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	return scrub(b.Bytes()), nil
}

// scrub replaces the C0 control characters other than tab, newline and
// carriage return, and DEL, with U+FFFD: HTML allows none of them, and a
// terminal would obey them.
func scrub(doc []byte) []byte {
	if !bytes.ContainsFunc(doc, control) {
		return doc
	}
	return bytes.Map(func(r rune) rune {
		if control(r) {
			return '\uFFFD'
		}
		return r
	}, doc)
}

func control(r rune) bool { return (r < 0x20 && r != '\t' && r != '\n' && r != '\r') || r == 0x7f }

// Write renders p to dir/index.html and returns that path. The file is
// written to a temporary name first and renamed, so a failed run never
// leaves half a report.
func Write(dir string, p report.Page) (string, error) {
	doc, err := HTML(p)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("report: %w", err)
	}
	path := filepath.Join(dir, "index.html")
	return path, report.WriteFileAtomic(path, doc)
}
