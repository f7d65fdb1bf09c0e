package report

import (
	"fmt"
	"math"
	"strings"
)

// Heatmap is a grid of values over two axes, such as recovery time over
// base load and trigger size. A NaN cell is "never" and is drawn dark.
type Heatmap struct {
	Title  string
	XLabel string
	YLabel string
	X, Y   []float64   // cell centres
	Cells  [][]float64 // Cells[y][x]
	Unit   string      // of a cell's value, for tooltips ("ticks")
	Max    float64     // value drawn at the hot end of the scale; 0 means fit
	XFmt   func(float64) string
	YFmt   func(float64) string
	Never  string // what a NaN cell means, e.g. "never recovered"
}

const hmW, hmH = 360, 356

// SVG renders the heatmap with a colour legend. Each cell carries a
// tooltip with its coordinates and value.
func (h Heatmap) SVG() string {
	var b strings.Builder
	const l, r, t, bot = 58.0, 14.0, 30.0, 74.0
	pw, ph := hmW-l-r, hmH-t-bot
	nx, ny := len(h.X), len(h.Y)
	if nx == 0 || ny == 0 {
		return ""
	}
	top := h.Max
	if top <= 0 {
		for _, row := range h.Cells {
			for _, v := range row {
				if !math.IsNaN(v) {
					top = max(top, v)
				}
			}
		}
		top = max(top, 1)
	}
	xf, yf := h.XFmt, h.YFmt
	if xf == nil {
		xf = trimFloat
	}
	if yf == nil {
		yf = trimFloat
	}
	cw, ch := pw/float64(nx), ph/float64(ny)
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" role="img" aria-label="%s" class="chart heatmap">`, hmW, hmH, esc(h.Title))
	fmt.Fprintf(&b, `<text x="%g" y="18" class="ct">%s</text>`, l, esc(h.Title))
	for j := range ny {
		for i := range nx {
			v := h.Cells[j][i]
			x := l + float64(i)*cw
			y := t + ph - float64(j+1)*ch // the first Y value at the bottom
			tip := fmt.Sprintf("%s %s, %s %s: ", h.XLabel, xf(h.X[i]), h.YLabel, yf(h.Y[j]))
			if math.IsNaN(v) {
				tip += h.Never
			} else {
				tip += fmt.Sprintf("%s %s", trimFloat(v), h.Unit)
			}
			fmt.Fprintf(&b, `<rect x="%.2f" y="%.2f" width="%.2f" height="%.2f" fill="%s" class="cell"><title>%s</title></rect>`,
				x, y, cw+0.3, ch+0.3, heatColor(v, top), esc(tip))
		}
	}
	fmt.Fprintf(&b, `<rect x="%g" y="%g" width="%g" height="%g" fill="none" class="axis"/>`, l, t, pw, ph)
	for _, i := range axisPicks(nx) {
		x := l + (float64(i)+0.5)*cw
		fmt.Fprintf(&b, `<text x="%.1f" y="%g" class="xt">%s</text>`, x, t+ph+14, esc(xf(h.X[i])))
	}
	for _, j := range axisPicks(ny) {
		y := t + ph - (float64(j)+0.5)*ch
		fmt.Fprintf(&b, `<text x="%g" y="%.1f" class="yt">%s</text>`, l-5, y+4, esc(yf(h.Y[j])))
	}
	fmt.Fprintf(&b, `<text x="%g" y="%g" class="xl">%s</text>`, l+pw/2, t+ph+32, esc(h.XLabel))
	fmt.Fprintf(&b, `<text transform="translate(12 %g) rotate(-90)" class="yl">%s</text>`, t+ph/2, esc(h.YLabel))
	// Legend: a gradient in steps, then "never".
	ly := float64(hmH) - 36
	steps := 8
	for k := range steps {
		v := top * float64(k) / float64(steps-1)
		fmt.Fprintf(&b, `<rect x="%g" y="%g" width="18" height="10" fill="%s"/>`, l+float64(k)*18, ly, heatColor(v, top))
	}
	fmt.Fprintf(&b, `<text x="%g" y="%g" class="lg">0 → %s %s</text>`, l, ly+24, trimFloat(top), esc(h.Unit))
	nxl := l + float64(steps)*18 + 12
	fmt.Fprintf(&b, `<rect x="%g" y="%g" width="18" height="10" fill="%s"/><text x="%g" y="%g" class="lg">%s</text>`,
		nxl, ly, heatColor(math.NaN(), top), nxl+22, ly+9, esc(h.Never))
	b.WriteString(`</svg>`)
	return b.String()
}

// axisPicks chooses up to five evenly spaced labels.
func axisPicks(n int) []int {
	if n <= 5 {
		out := make([]int, n)
		for i := range out {
			out[i] = i
		}
		return out
	}
	var out []int
	for k := range 5 {
		out = append(out, k*(n-1)/4)
	}
	return out
}

// heatColor runs from green (0) through yellow to red (top); NaN is a dark
// purple-black, so "never" stands apart from "slow".
func heatColor(v, top float64) string {
	if math.IsNaN(v) {
		return "#2b1a33"
	}
	f := min(max(v/top, 0), 1)
	// Two segments: green (#1a9850) → yellow (#fee08b) → red (#d73027).
	lerp := func(a, b int, f float64) int { return a + int(math.Round(f*float64(b-a))) }
	var rgb [3]int
	if f < 0.5 {
		g := f / 0.5
		rgb = [3]int{lerp(0x1a, 0xfe, g), lerp(0x98, 0xe0, g), lerp(0x50, 0x8b, g)}
	} else {
		g := (f - 0.5) / 0.5
		rgb = [3]int{lerp(0xfe, 0xd7, g), lerp(0xe0, 0x30, g), lerp(0x8b, 0x27, g)}
	}
	return fmt.Sprintf("#%02x%02x%02x", rgb[0], rgb[1], rgb[2])
}
