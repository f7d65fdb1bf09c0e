package report

import (
	"bytes"
	"fmt"
	"html"
	"math"
	"strconv"
	"strings"
)

// Line is one named series of a Chart.
type Line struct {
	Name string
	Y    []float64
	// Dashed draws the line dashed: for controls and counterfactuals.
	Dashed bool
}

// Span is a shaded stretch of the X axis, such as a trigger window.
type Span struct {
	From, To float64
	Label    string
}

// Chart is a line chart: one metric, several series over a shared X.
type Chart struct {
	Title  string
	XLabel string // with its unit, e.g. "time (s)"
	YLabel string // with its unit, e.g. "attempts / tick"
	X      []float64
	Lines  []Line
	Shade  []Span
	// YMax, when positive, fixes the top of the Y axis (e.g. 1 for a
	// share); otherwise it fits the data.
	YMax float64
	// Percent labels the Y axis as percentages of shares in [0, 1].
	Percent bool
}

// Palette is Okabe and Ito's colour-blind-safe palette, control first.
var Palette = []string{"#222222", "#D55E00", "#0072B2", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#8C6D31"}

const (
	svgW, svgH                     = 720, 300
	padL, padR, padT, padB float64 = 64, 16, 52, 46
)

// SVG renders the chart as a standalone <svg> element. Each X position
// carries a tooltip with every series' value there, so hovering reads the
// chart without any script.
func (c Chart) SVG() string {
	var b strings.Builder
	// About what a column's tooltip and each line's point take.
	b.Grow(2048 + len(c.X)*(80+30*len(c.Lines)))
	pw := float64(svgW) - padL - padR
	ph := float64(svgH) - padT - padB
	xmin, xmax := bounds(c.X)
	if xmax == xmin {
		xmax = xmin + 1
	}
	yticks := niceTicks(0, c.yMax(), 5)
	ytop := yticks[len(yticks)-1]
	sx := func(x float64) float64 { return padL + (x-xmin)/(xmax-xmin)*pw }
	sy := func(y float64) float64 { return padT + ph - min(max(y, 0), ytop)/ytop*ph }

	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" role="img" aria-label="%s" class="chart">`, svgW, svgH, esc(c.Title))
	fmt.Fprintf(&b, `<title>%s</title>`, esc(c.Title))
	fmt.Fprintf(&b, `<text x="%g" y="20" class="ct">%s</text>`, padL, esc(c.Title))
	c.frame(&b, sx, sy, xmin, xmax, yticks, pw, ph)
	c.polylines(&b, sx, sy)
	c.legend(&b, pw)
	c.hover(&b, sx, pw, ph)
	b.WriteString(`</svg>`)
	return b.String()
}

// yMax is the top of the data the Y axis must reach: YMax when set, else
// the largest finite value of the lines (1 when there is none above 0).
func (c Chart) yMax() float64 {
	ymax := c.YMax
	if ymax <= 0 {
		for _, l := range c.Lines {
			for _, y := range l.Y {
				if !math.IsNaN(y) && !math.IsInf(y, 0) {
					ymax = max(ymax, y)
				}
			}
		}
		if ymax == 0 {
			ymax = 1
		}
	}
	return ymax
}

// frame draws what is behind the lines: the shaded spans, the Y grid and
// its labels, the X ticks within [xmin, xmax], the axes and their labels.
// sx and sy map data to the plot of pw × ph.
func (c Chart) frame(b *strings.Builder, sx, sy func(float64) float64, xmin, xmax float64, yticks []float64, pw, ph float64) {
	for _, s := range c.Shade {
		x0, x1 := sx(max(s.From, xmin)), sx(min(s.To, xmax))
		fmt.Fprintf(b, `<rect x="%.1f" y="%g" width="%.1f" height="%g" class="shade"><title>%s</title></rect>`, x0, padT, max(x1-x0, 1), ph, esc(s.Label))
		if s.Label != "" {
			fmt.Fprintf(b, `<text x="%.1f" y="%g" class="sl">%s</text>`, x0+3, padT+11, esc(s.Label))
		}
	}
	for _, t := range yticks {
		y := sy(t)
		fmt.Fprintf(b, `<line x1="%g" x2="%g" y1="%.1f" y2="%.1f" class="grid"/>`, padL, padL+pw, y, y)
		fmt.Fprintf(b, `<text x="%g" y="%.1f" class="yt">%s</text>`, padL-6, y+4, c.yLabel(t))
	}
	for _, t := range niceTicks(xmin, xmax, 8) {
		if t < xmin || t > xmax {
			continue
		}
		x := sx(t)
		fmt.Fprintf(b, `<line x1="%.1f" x2="%.1f" y1="%g" y2="%g" class="tick"/>`, x, x, padT+ph, padT+ph+4)
		fmt.Fprintf(b, `<text x="%.1f" y="%g" class="xt">%s</text>`, x, padT+ph+16, trimFloat(t))
	}
	fmt.Fprintf(b, `<line x1="%g" x2="%g" y1="%g" y2="%g" class="axis"/>`, padL, padL+pw, padT+ph, padT+ph)
	fmt.Fprintf(b, `<line x1="%g" x2="%g" y1="%g" y2="%g" class="axis"/>`, padL, padL, padT, padT+ph)
	fmt.Fprintf(b, `<text x="%g" y="%d" class="xl">%s</text>`, padL+pw/2, svgH-8, esc(c.XLabel))
	fmt.Fprintf(b, `<text transform="translate(14 %g) rotate(-90)" class="yl">%s</text>`, padT+ph/2, esc(c.YLabel))
}

// polylines draws each line as a polyline in its palette colour (dashed
// when the line is), its points mapped by sx and sy, NaNs left out.
func (c Chart) polylines(b *strings.Builder, sx, sy func(float64) float64) {
	var num []byte // scratch for the numbers, reused
	for i, l := range c.Lines {
		b.WriteString(`<polyline points="`)
		first := true
		for j, y := range l.Y {
			if j >= len(c.X) || math.IsNaN(y) {
				continue
			}
			if !first {
				b.WriteByte(' ')
			}
			first = false
			num = appendF1(num[:0], sx(c.X[j]))
			num = append(num, ',')
			num = appendF1(num, sy(y))
			b.Write(num)
		}
		b.WriteString(`" fill="none" stroke="`)
		b.WriteString(Palette[i%len(Palette)])
		b.WriteString(`" stroke-width="2"`)
		if l.Dashed {
			b.WriteString(` stroke-dasharray="6 4"`)
		}
		b.WriteString(`><title>`)
		b.WriteString(esc(l.Name))
		b.WriteString(`</title></polyline>`)
	}
}

// legend draws one row under the title, left-aligned with the plot.
func (c Chart) legend(b *strings.Builder, pw float64) {
	x, y := padL, float64(38)
	widths := make([]float64, len(c.Lines))
	for i, l := range c.Lines {
		widths[i] = 22 + 6.6*float64(Width(l.Name)) + 14
	}
	for i, l := range c.Lines {
		if x+widths[i] > padL+pw && x > padL {
			break // no room: the tooltips still name every line
		}
		dash := ""
		if l.Dashed {
			dash = ` stroke-dasharray="6 4"`
		}
		fmt.Fprintf(b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="%s" stroke-width="3"%s/>`, x, x+16, y-4, y-4, Palette[i%len(Palette)], dash)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" class="lg">%s</text>`, x+20, y, esc(l.Name))
		x += widths[i]
	}
}

// standaloneStyle is what an SVG needs when it is not inside the HTML
// report, whose style sheet otherwise colours it: for a README or a file.
const standaloneStyle = `<style>
text { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; fill: #1b1b1b; }
.ct { font-weight: 600; font-size: 14px; }
.grid { stroke: #ddd; stroke-width: 1; }
.axis, .tick { stroke: #666; stroke-width: 1; }
.yt { font-size: 11px; text-anchor: end; fill: #666; }
.xt { font-size: 11px; text-anchor: middle; fill: #666; }
.xl, .yl { font-size: 12px; text-anchor: middle; fill: #666; }
.lg { font-size: 12px; }
.sl { font-size: 11px; fill: #666; }
.shade { fill: #f6d5cc; opacity: .7; }
.hover rect { fill: transparent; }
</style>`

// StandaloneSVG is SVG with its own style sheet and a white background,
// for use outside the HTML report.
func (c Chart) StandaloneSVG() string {
	s := c.SVG()
	i := strings.Index(s, ">") + 1
	return s[:i] + standaloneStyle + fmt.Sprintf(`<rect width="%d" height="%d" fill="#fff"/>`, svgW, svgH) + s[i:]
}

// hover lays an invisible column over each X with a tooltip of the values.
// It writes the bytes fmt would, with strconv: a chart has hundreds of
// columns, and a slider step on the page draws several charts.
func (c Chart) hover(b *strings.Builder, sx func(float64) float64, pw, ph float64) {
	if len(c.X) == 0 {
		return
	}
	step := pw / float64(max(len(c.X)-1, 1))
	unit := shortUnit(c.XLabel)
	// The same for every column: y, width and height.
	rest := `" y="` + strconv.FormatFloat(padT, 'g', -1, 64) + `" width="` + strconv.FormatFloat(step, 'f', 1, 64) +
		`" height="` + strconv.FormatFloat(ph, 'g', -1, 64) + `"><title>`
	var tip, num []byte
	b.WriteString(`<g class="hover">`)
	for j, x := range c.X {
		tip = append(tip[:0], trimFloat(x)...)
		tip = append(tip, ' ')
		tip = append(tip, unit...)
		for _, l := range c.Lines {
			if j < len(l.Y) {
				tip = append(tip, '\n')
				tip = append(tip, l.Name...)
				tip = append(tip, ": "...)
				tip = c.appendValue(tip, l.Y[j])
			}
		}
		b.WriteString(`<rect x="`)
		num = appendF1(num[:0], sx(x)-step/2)
		b.Write(num)
		b.WriteString(rest)
		b.WriteString(esc(string(tip)))
		b.WriteString(`</title></rect>`)
	}
	b.WriteString(`</g>`)
}

// appendF1 appends v as fmt's %.1f writes it (fmt calls strconv so).
func appendF1(dst []byte, v float64) []byte {
	return strconv.AppendFloat(dst, v, 'f', 1, 64)
}

func (c Chart) yLabel(v float64) string {
	if c.Percent {
		return trimFloat(100*v) + "%"
	}
	return compact(v)
}

func (c Chart) value(v float64) string {
	return string(c.appendValue(nil, v))
}

// appendValue appends value(v) to dst.
func (c Chart) appendValue(dst []byte, v float64) []byte {
	switch {
	case math.IsNaN(v):
		return append(dst, "–"...)
	case c.Percent:
		return append(strconv.AppendFloat(dst, 100*v, 'f', 1, 64), '%')
	case v == math.Trunc(v):
		return appendInt(dst, int64(v))
	}
	return strconv.AppendFloat(dst, v, 'g', 3, 64)
}

// shortUnit pulls "s" out of "time (s)".
func shortUnit(label string) string {
	if i, j := strings.LastIndex(label, "("), strings.LastIndex(label, ")"); i >= 0 && j > i {
		return label[i+1 : j]
	}
	return ""
}

func bounds(xs []float64) (lo, hi float64) {
	if len(xs) == 0 {
		return 0, 1
	}
	lo, hi = xs[0], xs[0]
	for _, x := range xs {
		lo, hi = min(lo, x), max(hi, x)
	}
	return lo, hi
}

// niceTicks returns about n round tick values (steps of 1, 2 or 5 times a
// power of ten) covering [lo, hi].
func niceTicks(lo, hi float64, n int) []float64 {
	if hi <= lo {
		hi = lo + 1
	}
	raw := (hi - lo) / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	start := math.Floor(lo/step) * step
	var ts []float64
	for t := start; t <= hi+step*0.999; t += step {
		ts = append(ts, math.Round(t/step)*step)
		if len(ts) > 50 {
			break
		}
	}
	return ts
}

// trimFloat writes v as fmt's %.6g does, or as %g where that takes an
// exponent.
func trimFloat(v float64) string {
	var buf [32]byte
	s := strconv.AppendFloat(buf[:0], v, 'g', 6, 64)
	if bytes.IndexByte(s, 'e') >= 0 {
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	return string(s)
}

// compact writes 1500 as 1.5k and 2000000 as 2M.
func compact(v float64) string {
	switch a := math.Abs(v); {
	case a >= 1e6:
		return trimFloat(v/1e6) + "M"
	case a >= 1e4:
		return trimFloat(v/1e3) + "k"
	}
	return trimFloat(v)
}

func esc(s string) string { return html.EscapeString(s) }
