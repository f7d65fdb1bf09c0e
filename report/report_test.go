package report

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
)

func TestInt(t *testing.T) {
	for _, c := range []struct {
		n    int64
		want string
	}{{0, "0"}, {999, "999"}, {1000, "1,000"}, {1234567, "1,234,567"}, {-4543, "-4,543"}} {
		if got := Int(c.n); got != c.want {
			t.Errorf("Int(%d) = %q, want %q", c.n, got, c.want)
		}
	}
}

func TestTableRender(t *testing.T) {
	tb := Table{
		Title:   "T",
		Columns: []Column{{Name: "fleet"}, {Name: "n", Align: Right}},
		Rows:    [][]string{{"naive", "4,543"}, {"guarded", "12"}},
	}
	var b bytes.Buffer
	if err := tb.Render(&b, Style{}); err != nil {
		t.Fatal(err)
	}
	want := "T\nfleet        n\n──────────────\nnaive    4,543\nguarded     12\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
	b.Reset()
	tb.Emphasis = map[[2]int]bool{{0, 1}: true}
	tb.Render(&b, Style{Color: true})
	if !strings.Contains(b.String(), "\x1b[31m") {
		t.Error("emphasis is not coloured on a colour terminal")
	}
}

func TestNiceTicks(t *testing.T) {
	for _, c := range []struct {
		lo, hi float64
		n      int
		want   []float64
	}{
		{0, 400, 5, []float64{0, 100, 200, 300, 400}},
		{0, 1, 5, []float64{0, 0.2, 0.4, 0.6, 0.8, 1}},
		{0, 119, 8, []float64{0, 20, 40, 60, 80, 100, 120}},
	} {
		got := niceTicks(c.lo, c.hi, c.n)
		if len(got) != len(c.want) {
			t.Errorf("niceTicks(%g, %g, %d) = %v, want %v", c.lo, c.hi, c.n, got, c.want)
			continue
		}
		for i := range got {
			if math.Abs(got[i]-c.want[i]) > 1e-9 {
				t.Errorf("niceTicks(%g, %g, %d) = %v, want %v", c.lo, c.hi, c.n, got, c.want)
				break
			}
		}
	}
}

// wellFormed parses s as XML to the end.
func wellFormed(t *testing.T, s string) {
	t.Helper()
	d := xml.NewDecoder(strings.NewReader(s))
	for {
		_, err := d.Token()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatalf("not well-formed: %v", err)
		}
	}
}

func TestChartSVG(t *testing.T) {
	c := Chart{
		Title: "Offered <load> & more", XLabel: "time (s)", YLabel: "attempts / s",
		X:     []float64{0, 1, 2, 3},
		Lines: []Line{{Name: "naive", Y: []float64{1, 2, math.NaN(), 4}, Dashed: true}, {Name: "guarded", Y: []float64{1, 1, 1, 1}}},
		Shade: []Span{{From: 1, To: 2, Label: "trigger"}},
	}
	s := c.SVG()
	wellFormed(t, s)
	for _, want := range []string{"Offered &lt;load&gt; &amp; more", "time (s)", "attempts / s", `class="shade"`, "naive", "guarded", "stroke-dasharray", "<title>1 s\nnaive: 2\nguarded: 1</title>", "naive: –"} {
		if !strings.Contains(s, want) {
			t.Errorf("SVG lacks %q", want)
		}
	}
	wellFormed(t, c.StandaloneSVG())
	empty := Chart{Title: "empty"}
	wellFormed(t, empty.SVG())
}

func TestHeatmapSVG(t *testing.T) {
	h := Heatmap{Title: "map", XLabel: "load", YLabel: "dip", X: []float64{0.5, 0.9}, Y: []float64{0.1, 0.5},
		Cells: [][]float64{{0, 3}, {7, math.NaN()}}, Unit: "ticks", Never: "never recovered"}
	s := h.SVG()
	wellFormed(t, s)
	if strings.Count(s, `class="cell"`) != 4 || !strings.Contains(s, "never recovered") {
		t.Errorf("heatmap cells or legend missing:\n%s", s)
	}
	if heatColor(math.NaN(), 1) == heatColor(1, 1) {
		t.Error("never must not look like the slowest recovery")
	}
}

// TestWriteFileAtomicNamesNoTemporaryFile: an error names the file asked
// for, not the temporary one beside it (issue 14, item 19).
func TestWriteFileAtomicNamesNoTemporaryFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing", "index.html")
	err := WriteFileAtomic(path, []byte("x"))
	if err == nil || !strings.Contains(err.Error(), "writing "+path+":") || strings.Contains(err.Error(), ".index.html.") {
		t.Errorf("got %v", err)
	}
}

func TestWrap(t *testing.T) {
	for _, c := range []struct {
		text          string
		width         int
		first, indent string
		want          string
	}{
		{"a b c", 80, "", "", "a b c"},
		{"aaa bbb ccc", 7, "", "", "aaa bbb\nccc"},
		{"aaa bbb ccc", 7, "", "  ", "aaa bbb\n  ccc"},
		{"aaa bbb", 7, "- ", "  ", "- aaa\n  bbb"},
		{"a  \n b", 80, "", "", "a b"},
		{"toolongword x", 4, "", "", "toolongword\nx"},
		{"東京 東京 東京", 10, "", "", "東京 東京\n東京"}, // two columns each
	} {
		if got := Wrap(c.text, c.width, c.first, c.indent); got != c.want {
			t.Errorf("Wrap(%q, %d, %q, %q) = %q, want %q", c.text, c.width, c.first, c.indent, got, c.want)
		}
	}
}

func TestRenderClaimsWraps(t *testing.T) {
	cs := []Claim{{Text: strings.Repeat("word ", 20), Holds: true, Detail: "some evidence in words"}}
	var plain, colour strings.Builder
	if err := RenderClaims(&plain, cs, Style{Width: 40}); err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(strings.TrimSuffix(plain.String(), "\n"), "\n") {
		if Width(l) > 40 {
			t.Errorf("a line of %d columns: %q", Width(l), l)
		}
	}
	if !strings.HasPrefix(plain.String(), "✓ holds word") || !strings.Contains(plain.String(), "\n        word") {
		t.Errorf("claim:\n%s", plain.String())
	}
	if err := RenderClaims(&colour, cs, Style{Width: 40, Color: true}); err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(strings.TrimSuffix(colour.String(), "\n"), "\n") {
		if n := visibleWidth(l); n > 40 {
			t.Errorf("a coloured line of %d columns: %q", n, l)
		}
	}
	if !strings.Contains(colour.String(), ansiDim+"(some") {
		t.Errorf("the evidence is not dim:\n%q", colour.String())
	}
}

// TestNumbersAsFmt: the chart writes its numbers with strconv, for speed,
// and must write the very bytes fmt wrote, which the golden SVGs hold.
func TestNumbersAsFmt(t *testing.T) {
	values := []float64{0, math.Copysign(0, -1), 0.05, 0.15, 0.25, 1, 1.5, -2.25, 52, 99.95, 123456.789, 1e-7, 3e21, 1e6,
		2.5e-5, math.MaxFloat64, math.SmallestNonzeroFloat64, math.Inf(1), math.Inf(-1), math.NaN()}
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		values = append(values, (r.Float64()-0.3)*math.Pow(10, float64(r.IntN(24)-8)))
	}
	c, pc := Chart{}, Chart{Percent: true}
	for _, v := range values {
		if got, want := string(appendF1(nil, v)), fmt.Sprintf("%.1f", v); got != want {
			t.Errorf("appendF1(%v) = %q, fmt %q", v, got, want)
		}
		want := fmt.Sprintf("%.6g", v)
		if strings.Contains(want, "e") {
			want = fmt.Sprintf("%g", v)
		}
		if got := trimFloat(v); got != want {
			t.Errorf("trimFloat(%v) = %q, fmt %q", v, got, want)
		}
		if math.IsNaN(v) || v != math.Trunc(v) {
			want := fmt.Sprintf("%.3g", v)
			if math.IsNaN(v) {
				want = "–"
			}
			if got := c.value(v); got != want {
				t.Errorf("value(%v) = %q, fmt %q", v, got, want)
			}
		}
		if !math.IsNaN(v) {
			if got, want := pc.value(v), fmt.Sprintf("%.1f%%", 100*v); got != want {
				t.Errorf("percent value(%v) = %q, fmt %q", v, got, want)
			}
		}
	}
}
