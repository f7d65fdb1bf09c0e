package report

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/retrystorm/retrystorm/internal/safetext"
)

// Section is one experiment's part of a report.
type Section struct {
	ID     string
	Title  string
	Intro  []string // paragraphs, plain text
	Tables []Table
	Claims []Claim
	Charts []Chart
	// Figures are pre-rendered SVG (heatmaps and other non-line charts).
	Figures []template.HTML
	Notes   []string
}

// Page is a whole report.
type Page struct {
	Title    string
	Subtitle string
	Command  string // the command line that produced it
	Findings []string
	Sections []Section
}

//go:embed report.html.tmpl
var pageTemplate string

// The template is parsed on first use, not at init: a template parsed at
// package level would link the whole template engine (and, through its
// reflection, every exported method) into any binary importing report, such
// as the page's WebAssembly module, which renders no HTML.
var (
	tmplOnce sync.Once
	tmpl     *template.Template
)

func parseTemplate() {
	tmpl = template.Must(template.New("report").Funcs(template.FuncMap{
		"svg":    func(c Chart) template.HTML { return template.HTML(c.SVG()) },
		"right":  func(a Align) bool { return a == Right },
		"emph":   func(t Table, r, c int) bool { return t.Emphasis[[2]int{r, c}] },
		"allok":  AllHold,
		"plural": func(n int) string { return map[bool]string{true: "", false: "s"}[n == 1] },
	}).Parse(pageTemplate))
}

// HTML renders the page as one self-contained HTML document: inline style,
// inline SVG, no script, nothing fetched.
//
// Text from outside (a file name in the title or the command) is printed
// with its control and invisible characters escaped (\x1b), so that
// reading the file in a terminal cannot run an escape sequence; any other
// control character is replaced.
func (p Page) HTML() ([]byte, error) {
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

// Write renders the page to dir/index.html and returns that path. The file
// is written to a temporary name first and renamed, so a failed run never
// leaves half a report.
func Write(dir string, p Page) (string, error) {
	doc, err := p.HTML()
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("report: %w", err)
	}
	path := filepath.Join(dir, "index.html")
	return path, WriteFileAtomic(path, doc)
}

// WriteFileAtomicMkdir is WriteFileAtomic, making path's directory first.
func WriteFileAtomicMkdir(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return WriteFileAtomic(path, data)
}

// WriteFileAtomic writes data to a temporary file beside path and renames
// it over path. Its errors name path, never the temporary file.
func WriteFileAtomic(path string, data []byte) error {
	fail := func(err error) error {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return fmt.Errorf("report: writing %s: %w", path, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fail(err)
	}
	defer os.Remove(tmp.Name()) // a no-op after the rename
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fail(err)
	}
	if err := tmp.Close(); err != nil {
		return fail(err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return fail(err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		var le *os.LinkError
		if errors.As(err, &le) {
			err = le.Err
		}
		return fail(err)
	}
	return nil
}
