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
