package scenario

import (
	"strconv"
	"strings"

	"github.com/retrystorm/retrystorm/internal/safetext"
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

// suggest returns the candidate that word was most likely meant to be, or
// "" when none is close. Case, '-' and '_' are ignored first, so that
// "maxRetries" and "max-retries" find max_retries; then an edit distance of
// at most a third of the word (and at least 1) is a typo.
func suggest(word string, candidates []string) string {
	norm := func(s string) string {
		return strings.NewReplacer("_", "", "-", "").Replace(strings.ToLower(s))
	}
	if len(word) > 64 { // not a typo, and too long to compare cheaply
		return ""
	}
	best, bestDist := "", max(1, len(word)/3)+1
	for _, c := range candidates {
		if norm(c) == norm(word) {
			return c
		}
		if d := editDistance(strings.ToLower(word), c); d < bestDist {
			best, bestDist = c, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// didYouMean returns "; did you mean "x"?" for the closest candidate, or
// the list of candidates when none is close.
func didYouMean(word string, candidates []string) string {
	if s := suggest(word, candidates); s != "" {
		return `; did you mean "` + s + `"?`
	}
	return " (expected " + oneOf(candidates) + ")"
}

// oneOf returns "a", "a or b", or "a, b or c".
func oneOf(words []string) string {
	switch len(words) {
	case 0:
		return "nothing"
	case 1:
		return words[0]
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}
