package cli

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// isTerminal reports whether w is a character device (a terminal), using
// nothing but the standard library.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// useColor says whether to colour output on w: only on a terminal, and
// never when NO_COLOR is set (https://no-color.org).
func useColor(w io.Writer) bool {
	return isTerminal(w) && os.Getenv("NO_COLOR") == "" && os.Getenv("TERM") != "dumb"
}

// progress draws a one-line progress bar on a terminal and nothing
// elsewhere. It is safe for concurrent use.
type progress struct {
	mu    sync.Mutex
	w     io.Writer
	on    bool
	lines bool // a line every few seconds (--progress when piped), not a bar
	label string
	start time.Time
	last  time.Time
	drawn bool
}

func newProgress(w io.Writer, on bool, label string) *progress {
	return &progress{w: w, on: on && isTerminal(w), label: label, start: time.Now()}
}

// update is the callback experiments call; it redraws at most ten times a
// second.
func (p *progress) update(done, total int) {
	if p == nil || !p.on || total <= 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	every := 100 * time.Millisecond
	if p.lines {
		every = 5 * time.Second
	}
	if done < total && now.Sub(p.last) < every {
		return
	}
	p.last = now
	if p.lines {
		left := ""
		if done > 0 && done < total {
			left = fmt.Sprintf(", ~%s left", time.Duration(float64(now.Sub(p.start))*float64(total-done)/float64(done)).Round(time.Second))
		}
		fmt.Fprintf(p.w, "%s: %d%% (%d/%d)%s\n", p.label, 100*done/total, done, total, left)
		return
	}
	const width = 30
	filled := width * done / total
	eta := ""
	if done > 0 && done < total {
		left := time.Duration(float64(now.Sub(p.start)) * float64(total-done) / float64(done))
		eta = fmt.Sprintf(" ~%s left", left.Round(time.Second))
	}
	fmt.Fprintf(p.w, "\r%s [%s%s] %d/%d%s\x1b[K", p.label, strings.Repeat("█", filled), strings.Repeat("·", width-filled), done, total, eta)
	p.drawn = true
}

// clear removes the bar.
func (p *progress) clear() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.drawn && !p.lines {
		fmt.Fprint(p.w, "\r\x1b[K")
		p.drawn = false
	}
}

// Text is wrapped to the terminal's width, but never wider than maxWidth
// (long lines are hard to read) nor narrower than minWidth; off a terminal,
// to 80 columns.
const (
	pipeWidth = 80
	maxWidth  = 100
	minWidth  = 40
)

// textWidth is the width to wrap text written to w at: the terminal's
// (COLUMNS when set, as shells export it, or what the terminal says),
// within [minWidth, maxWidth]; pipeWidth when w is not a terminal.
func textWidth(w io.Writer) int {
	if !isTerminal(w) {
		return pipeWidth
	}
	n, err := strconv.Atoi(os.Getenv("COLUMNS"))
	if err != nil || n <= 0 {
		n = terminalColumns(w.(*os.File))
	}
	if n <= 0 {
		return pipeWidth
	}
	return min(max(n, minWidth), maxWidth)
}
