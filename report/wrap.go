package report

import "strings"

// Wrap breaks text into lines of at most width columns (as Width counts
// them), at spaces (runs of white space become one space). The first line starts with first, as it
// is, and every other line with indent; both count towards the width. A
// word longer than a line stands on a line of its own. A width under 1
// means 80.
func Wrap(text string, width int, first, indent string) string {
	return wrapWords(strings.Fields(text), nil, width, first, indent, Style{})
}

// wrapWords lays words out as Wrap does, after first on the first line and
// indent on the others. Words i with dim[i] set are drawn dim in colour.
func wrapWords(words []string, dim []bool, width int, first, indent string, st Style) string {
	if width < 1 {
		width = 80
	}
	var b strings.Builder
	b.WriteString(first)
	col := visibleWidth(first)
	start := col // the column where this line's first word goes
	run := false // inside a dim run on this line
	for i, w := range words {
		n := Width(w)
		d := st.Color && i < len(dim) && dim[i]
		if col > start {
			if col+1+n > width {
				if run {
					b.WriteString(ansiReset)
					run = false
				}
				b.WriteByte('\n')
				b.WriteString(indent)
				col = Width(indent)
				start = col
			} else {
				b.WriteByte(' ')
				col++
			}
		}
		if d && !run {
			b.WriteString(ansiDim)
			run = true
		} else if !d && run {
			b.WriteString(ansiReset)
			run = false
		}
		b.WriteString(w)
		col += n
	}
	if run {
		b.WriteString(ansiReset)
	}
	return b.String()
}

// visibleWidth is the columns s takes on a terminal (Width), less the
// colour codes (ESC [ ... m).
func visibleWidth(s string) int {
	n := 0
	for {
		i := strings.IndexByte(s, 0x1b)
		j := strings.IndexByte(s[max(i, 0):], 'm')
		if i < 0 || j < 0 {
			return n + Width(s)
		}
		n += Width(s[:i])
		s = s[i+j+1:]
	}
}
