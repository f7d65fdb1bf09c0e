package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/retrystorm/retrystorm/experiment"
	"github.com/retrystorm/retrystorm/report"
)

// printSection writes an experiment's outcome for a terminal: title,
// intro, tables, claims and notes, wrapped to 80 columns.
func printSection(w io.Writer, o *experiment.Outcome, st report.Style) error {
	s := o.Section
	title := s.Title
	if st.Color {
		title = "\x1b[1m" + title + "\x1b[0m"
	}
	fmt.Fprintln(w, title)
	for _, p := range s.Intro {
		fmt.Fprintln(w, wrap(p, 80))
	}
	for _, t := range s.Tables {
		fmt.Fprintln(w)
		if err := t.Render(w, st); err != nil {
			return err
		}
	}
	if len(s.Claims) > 0 {
		fmt.Fprintln(w)
		if err := report.RenderClaims(w, s.Claims, st); err != nil {
			return err
		}
	}
	for _, n := range s.Notes {
		fmt.Fprintln(w)
		fmt.Fprintln(w, wrap(n, 80))
	}
	return nil
}

// wrap breaks text into lines of at most width runes, at spaces.
func wrap(text string, width int) string {
	var b strings.Builder
	n := 0
	for i, word := range strings.Fields(text) {
		l := len([]rune(word))
		if i > 0 {
			if n+1+l > width {
				b.WriteByte('\n')
				n = 0
			} else {
				b.WriteByte(' ')
				n++
			}
		}
		b.WriteString(word)
		n += l
	}
	return b.String()
}
