package cli

import (
	"fmt"
	"io"

	"github.com/retrystorm/retrystorm/experiment"
	"github.com/retrystorm/retrystorm/report"
)

// printSection writes an experiment's outcome for a terminal: title,
// intro, tables, claims and notes, wrapped to st.Width.
func printSection(w io.Writer, o *experiment.Outcome, st report.Style) error {
	s := o.Section
	title := s.Title
	if st.Color {
		title = "\x1b[1m" + title + "\x1b[0m"
	}
	fmt.Fprintln(w, title)
	for _, p := range s.Intro {
		fmt.Fprintln(w, report.Wrap(p, st.Width, "", ""))
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
		fmt.Fprintln(w, report.Wrap(n, st.Width, "", ""))
	}
	return nil
}
