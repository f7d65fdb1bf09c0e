// Package golden compares what a test produced with a file in testdata,
// and shows the first difference when they disagree; with -update it
// rewrites the file instead. It is for tests only.
package golden

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files instead of comparing with them")

// Updating reports whether the test binary runs with -update.
func Updating() bool { return *update }

// Check compares got with the file at path; with -update it writes got
// there instead. On a difference it fails t with the first differing line
// and the lines before it, so that a reader sees what changed without
// rerunning. how says how to regenerate the file (a go test command).
func Check(t testing.TB, path string, got []byte, how string) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (to write it: %s)", err, how)
		return
	}
	if d := Diff(want, got); d != "" {
		t.Errorf("output differs from %s (%s, if the change is meant, and read the diff):\n%s", path, how, d)
	}
}

// context is how many equal lines Diff shows before the first difference.
const context = 3

// Diff describes the first difference between want and got: the line's
// number, up to three equal lines before it, the line as wanted and as
// got, and the column where they part. It returns "" when they are equal.
func Diff(want, got []byte) string {
	if bytes.Equal(want, got) {
		return ""
	}
	w, g := lines(want), lines(got)
	i := 0
	for i < len(w) && i < len(g) && w[i] == g[i] {
		i++
	}
	var b strings.Builder
	for j := max(0, i-context); j < i; j++ {
		fmt.Fprintf(&b, "  %4d   %s\n", j+1, w[j])
	}
	show := func(sign string, ls []string) {
		if i < len(ls) {
			fmt.Fprintf(&b, "%s %4d   %s\n", sign, i+1, ls[i])
		} else {
			fmt.Fprintf(&b, "%s %4d   (end of file)\n", sign, i+1)
		}
	}
	show("-", w)
	show("+", g)
	if i < len(w) && i < len(g) {
		col := 0
		for col < len(w[i]) && col < len(g[i]) && w[i][col] == g[i][col] {
			col++
		}
		fmt.Fprintf(&b, "(line %d, from byte %d on; - is the file, + is this run; %d lines against %d)\n", i+1, col+1, len(w), len(g))
	} else {
		fmt.Fprintf(&b, "(line %d; - is the file, + is this run; %d lines against %d)\n", i+1, len(w), len(g))
	}
	return b.String()
}

// lines splits b into lines; a final newline ends the last line rather
// than starting an empty one, and its absence is a difference of its own.
func lines(b []byte) []string {
	s := string(b)
	ls := strings.Split(s, "\n")
	if strings.HasSuffix(s, "\n") {
		ls = ls[:len(ls)-1]
	} else if len(ls) > 0 {
		ls[len(ls)-1] += " (no newline at the end)"
	}
	return ls
}
