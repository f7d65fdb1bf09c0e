package scenario

import (
	"strconv"
	"strings"

	"github.com/retrystorm/retrystorm/internal/safetext"
	"github.com/retrystorm/retrystorm/internal/suggest"
)

// Error is what Parse, Load and Validate return for a scenario they refuse:
// it names the file, the place in it and the field, so that a user can go
// straight to the line. Test for it with errors.As.
type Error struct {
	File   string // as given to Parse or Load; empty for Validate
	Line   int    // 1-based; 0 when there is no place (Validate, an empty file)
	Column int    // 1-based; 0 when unknown
	// Field is the field's path as written in the file, with list indices
	// from 0: "fleets[1].budget.settings.budget_ratio". Empty when the
	// error is about the whole file.
	Field string
	Msg   string
	Err   error // the underlying error (a read error), if any
}

// Error returns "file:line:col: field: message", leaving out what is
// unknown.
//
// Nothing in it reaches a terminal raw: a file name with a control,
// invisible or direction-changing character is quoted (Go syntax, as %q
// would), and such characters elsewhere are escaped.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(safetext.Name(e.File))
	if e.Line > 0 {
		b.WriteString(":" + strconv.Itoa(e.Line))
		if e.Column > 0 {
			b.WriteString(":" + strconv.Itoa(e.Column))
		}
	}
	if b.Len() == 0 {
		b.WriteString("scenario")
	}
	b.WriteString(": ")
	if e.Field != "" {
		b.WriteString(safetext.Escape(e.Field) + ": ")
	}
	b.WriteString(safetext.Escape(e.Msg))
	return b.String()
}

// Unwrap returns the underlying error, if any.
func (e *Error) Unwrap() error { return e.Err }

// didYouMean returns "; did you mean "x"?" for the closest candidate, or
// the list of candidates when none is close.
func didYouMean(word string, candidates []string) string {
	if s := suggest.Closest(word, candidates); s != "" {
		return `; did you mean "` + s + `"?`
	}
	return " (expected " + oneOf(candidates) + ")"
}

// oneOf returns "a", "a or b", or "a, b or c".
func oneOf(words []string) string { return suggest.OneOf(words) }
