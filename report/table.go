package report

import (
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Align is a column's alignment.
type Align uint8

const (
	Left  Align = iota // text: names
	Right              // numbers, so that their digits line up
)

// Column is one column of a Table.
type Column struct {
	Name  string
	Align Align
}

// Table is a titled grid of cells, already formatted as text.
type Table struct {
	Title   string
	Columns []Column
	Rows    [][]string
	// Emphasis marks cells to draw attention to (bad news), by row and
	// column; only shown in colour.
	Emphasis map[[2]int]bool
}

// Style says how to draw on a terminal.
type Style struct {
	Color bool
	Width int // 0 means 80
}

const (
	ansiBold  = "\x1b[1m"
	ansiDim   = "\x1b[2m"
	ansiRed   = "\x1b[31m"
	ansiGreen = "\x1b[32m"
	ansiReset = "\x1b[0m"
)

func (s Style) wrap(code, text string) string {
	if !s.Color || text == "" {
		return text
	}
	return code + text + ansiReset
}

// textWidth is the width a table's text keeps to where it can.
const textWidth = 80

// Render writes the table as aligned text. Columns are separated by two
// spaces, or by one where that makes the table fit textWidth columns (a
// long cell such as "never healthy" otherwise pushes a table just past
// it); a column that does not fit is not cut: the title and rule still
// fit, and narrow terminals wrap as they must.
func (t Table) Render(w io.Writer, st Style) error {
	widths := make([]int, len(t.Columns))
	for i, c := range t.Columns {
		widths[i] = Width(c.Name)
	}
	for _, r := range t.Rows {
		for i := range widths {
			if i < len(r) {
				widths[i] = max(widths[i], Width(r[i]))
			}
		}
	}
	total := 0
	for _, n := range widths {
		total += n + 2
	}
	total -= 2
	sep := "  "
	if total > textWidth && total-(len(widths)-1) <= textWidth {
		sep, total = " ", total-(len(widths)-1)
	}
	var b strings.Builder
	if t.Title != "" {
		b.WriteString(st.wrap(ansiBold, t.Title))
		b.WriteByte('\n')
	}
	cells := make([]string, len(t.Columns))
	for i, c := range t.Columns {
		cells[i] = pad(c.Name, widths[i], c.Align)
	}
	b.WriteString(st.wrap(ansiDim, strings.TrimRight(strings.Join(cells, sep), " ")))
	b.WriteByte('\n')
	b.WriteString(st.wrap(ansiDim, strings.Repeat("─", total)))
	b.WriteByte('\n')
	for ri, r := range t.Rows {
		for i, c := range t.Columns {
			v := ""
			if i < len(r) {
				v = r[i]
			}
			cell := pad(v, widths[i], c.Align)
			if t.Emphasis[[2]int{ri, i}] {
				cell = st.wrap(ansiRed, cell)
			}
			cells[i] = cell
		}
		b.WriteString(strings.TrimRight(strings.Join(cells, sep), " "))
		b.WriteByte('\n')
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func pad(s string, n int, a Align) string {
	gap := n - Width(s)
	if gap <= 0 {
		return s
	}
	if a == Right {
		return strings.Repeat(" ", gap) + s
	}
	return s + strings.Repeat(" ", gap)
}

// Int formats a count with thousands separators: 12,345.
func Int(n int64) string {
	var buf [32]byte
	return string(appendInt(buf[:0], n))
}

// appendInt appends Int(n) to dst, without fmt: charts write thousands
// of them.
func appendInt(dst []byte, n int64) []byte {
	var buf [20]byte
	s := strconv.AppendInt(buf[:0], n, 10)
	if s[0] == '-' {
		dst = append(dst, '-')
		s = s[1:]
	}
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, c)
	}
	return dst
}

// Float formats x with the given decimals, without a trailing ".0" noise
// for whole numbers when decimals is 0.
func Float(x float64, decimals int) string {
	return fmt.Sprintf("%.*f", decimals, x)
}

// Percent formats a share in [0, 1] as a percentage.
func Percent(x float64, decimals int) string {
	return fmt.Sprintf("%.*f%%", decimals, 100*x)
}
