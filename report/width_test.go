package report

import (
	"strings"
	"testing"
)

func TestWidth(t *testing.T) {
	for _, c := range []struct {
		s    string
		want int
	}{
		{"", 0},
		{"naive", 5},
		{"tempête", 7},       // é as one precomposed character
		{"tempe\u0302te", 7}, // ê as e + a combining circumflex
		{"嵐", 2},             // CJK ideograph
		{"リトライ", 8},          // katakana
		{"재시도", 6},           // Hangul syllables
		{"ＡＢ", 4},            // fullwidth Latin
		{"🌀 storm", 8},       // an emoji is wide
		{"a\u200bb", 2},      // zero-width space
		{"\u202eab", 2},      // a bidi override takes no column
		{"\xff", 1},          // not UTF-8: one column a byte
		{"Ω≈ç√", 4},          // ambiguous and narrow: one each
		{"\U0002A6D6", 2},    // an ideograph of plane 2
	} {
		if got := Width(c.s); got != c.want {
			t.Errorf("Width(%q) = %d, want %d", c.s, got, c.want)
		}
	}
}

// Columns line up by display width, not by the number of runes: a name in
// Japanese takes two columns a character.
func TestTableAlignsWideNames(t *testing.T) {
	tb := Table{
		Columns: []Column{{Name: "fleet"}, {Name: "lost", Align: Right}},
		Rows:    [][]string{{"naive", "1"}, {"リトライ", "22"}, {"tempe\u0302te", "333"}},
	}
	var b strings.Builder
	if err := tb.Render(&b, Style{}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
	want := Width(lines[0])
	for _, l := range lines[2:] {
		if Width(l) != want {
			t.Errorf("row %q is %d columns wide, the header %d:\n%s", l, Width(l), want, b.String())
		}
	}
}

// A table a long cell pushes just past 80 columns closes its gaps to one
// space and fits (issue 40's CI: the lab's storm table with a fleet "never
// healthy" was 84 columns); one that cannot fit keeps two.
func TestTableFitsEightyColumns(t *testing.T) {
	storm := Table{
		Columns: []Column{{Name: "fleet"}, {Name: "peak", Align: Right}, {Name: "r/req", Align: Right},
			{Name: "goodput", Align: Right}, {Name: "failures", Align: Right},
			{Name: "after", Align: Right}, {Name: "recovery", Align: Right}, {Name: "lost", Align: Right}},
		Rows: [][]string{
			{"naive", "107", "2.211", "64", "1,217", "1,122", "never", "335"},
			{"guarded", "35", "0.040", "245", "213", "61", "never healthy", "154"},
			{"naive, deadline shedding", "48", "0.424", "389", "179", "121", "never", "10"},
		},
	}
	wide := Table{Columns: []Column{{Name: strings.Repeat("a", 50)}, {Name: strings.Repeat("b", 40)}}}
	for _, c := range []struct {
		name  string
		t     Table
		width int
	}{{"storm", storm, 77}, {"too wide", wide, 92}} {
		var b strings.Builder
		if err := c.t.Render(&b, Style{}); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
		if got := Width(lines[1]); got != c.width {
			t.Errorf("%s: the rule is %d columns, want %d:\n%s", c.name, got, c.width, b.String())
		}
		for _, l := range lines {
			if Width(l) > c.width {
				t.Errorf("%s: a line of %d columns: %q", c.name, Width(l), l)
			}
		}
	}
}
