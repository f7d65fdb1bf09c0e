package cli

import (
	"bytes"
	"io"
	"strings"

	"github.com/retrystorm/retrystorm/report"
)

// fit wraps each line of text that is wider than width at spaces; lines
// that start with white space (a command to copy, a table) are left as
// they are.
func fit(text string, width int) string {
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		if report.Width(l) > width && !strings.HasPrefix(l, " ") && !strings.HasPrefix(l, "\t") {
			lines[i] = report.Wrap(l, width, "", "")
		}
	}
	return strings.Join(lines, "\n")
}

// lineFitter is a writer that wraps each line written through it to a
// width, for what others print on our terminal (the lab's log).
type lineFitter struct {
	w     io.Writer
	width int
	buf   []byte
}

func (f *lineFitter) Write(p []byte) (int, error) {
	f.buf = append(f.buf, p...)
	for {
		i := bytes.IndexByte(f.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := fit(string(f.buf[:i]), f.width)
		f.buf = f.buf[i+1:]
		if _, err := io.WriteString(f.w, line+"\n"); err != nil {
			return len(p), err
		}
	}
}

// Log is where a command says what it is doing: standard error, with
// lines wrapped to its width on a terminal and whole when piped; nowhere
// with --json.
func (inv *Invocation) Log() io.Writer {
	if inv.JSON {
		return io.Discard
	}
	if !isTerminal(inv.Stderr) {
		// Piped: a line whole, for grep and while-read (docs/lab.md's
		// recipe); only a terminal's width is worth fitting to.
		return inv.Stderr
	}
	return &lineFitter{w: inv.Stderr, width: textWidth(inv.Stderr)}
}
