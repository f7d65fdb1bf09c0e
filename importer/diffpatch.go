package importer

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
)

// What Diff needs to write a unified diff that GNU patch applies byte for
// byte: lines compared with their line ends (a file whose last line has
// no newline differs from one whose last line has one), the marker for a
// last line without a newline, a file name quoted as GNU diff quotes one
// with spaces or control characters, and the empty range of a new file
// (-0,0).

// diffLines splits b into lines, each with its "\n" (the last may have
// none).
func diffLines(b []byte) []string {
	s := string(b)
	if s == "" {
		return nil
	}
	lines := strings.SplitAfter(s, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// writeDiffLine writes one line of a hunk: its kind (' ', '-', '+') and
// the line, with GNU diff's marker when it ends without a newline.
func writeDiffLine(b *strings.Builder, kind byte, line string) {
	b.WriteByte(kind)
	b.WriteString(line)
	if !strings.HasSuffix(line, "\n") {
		b.WriteString("\n\\ No newline at end of file\n")
	}
}

// hunkRange is a hunk header's range of the lines after the first from
// up to to: "start,count", where an empty range starts at the line
// before it (a new file's is 0,0).
func hunkRange(from, to int) string {
	if to == from {
		return fmt.Sprintf("%d,0", from)
	}
	return fmt.Sprintf("%d,%d", from+1, to-from)
}

// diffName is a file name as a diff header writes it: /dev/null for a
// file that does not exist yet, and quoted in C's style when it holds
// what would end the name early (a space, a tab) or cannot be printed,
// which GNU patch reads back.
func diffName(name string, absent bool) string {
	if absent {
		return "/dev/null"
	}
	if strings.IndexFunc(name, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) || r == '"' || r == '\\' }) >= 0 {
		return strconv.Quote(name)
	}
	return name
}

// diffOp is one line of a diff: kept (' '), removed ('-') or added ('+').
type diffOp struct {
	kind byte
	line string
}

// lineOps matches the lines of a and b: every line of both, in order,
// each kept, removed or added.
func lineOps(a, b []string) []diffOp {
	// The edits are few and local: trim what both share at either end,
	// then match the middle line by line (a longest common subsequence).
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	ma, mb := a[pre:len(a)-suf], b[pre:len(b)-suf]
	var ops []diffOp
	if len(ma)*len(mb) <= 4_000_000 {
		lcs := make([][]int32, len(ma)+1)
		for i := range lcs {
			lcs[i] = make([]int32, len(mb)+1)
		}
		for i := len(ma) - 1; i >= 0; i-- {
			for j := len(mb) - 1; j >= 0; j-- {
				if ma[i] == mb[j] {
					lcs[i][j] = lcs[i+1][j+1] + 1
				} else {
					lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
				}
			}
		}
		i, j := 0, 0
		for i < len(ma) || j < len(mb) {
			switch {
			case i < len(ma) && j < len(mb) && ma[i] == mb[j]:
				ops = append(ops, diffOp{' ', ma[i]})
				i, j = i+1, j+1
			case i < len(ma) && (j == len(mb) || lcs[i+1][j] >= lcs[i][j+1]):
				ops = append(ops, diffOp{'-', ma[i]})
				i++
			default:
				ops = append(ops, diffOp{'+', mb[j]})
				j++
			}
		}
	} else {
		for _, l := range ma {
			ops = append(ops, diffOp{'-', l})
		}
		for _, l := range mb {
			ops = append(ops, diffOp{'+', l})
		}
	}
	// The lines both share at either end are context.
	all := make([]diffOp, 0, len(a)+len(b))
	for _, l := range a[:pre] {
		all = append(all, diffOp{' ', l})
	}
	all = append(all, ops...)
	for _, l := range a[len(a)-suf:] {
		all = append(all, diffOp{' ', l})
	}
	return all
}
