package golden

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDiff(t *testing.T) {
	for _, c := range []struct {
		name, want, got string
		has             []string // in the description, in order
	}{
		{"equal", "a\nb\n", "a\nb\n", nil},
		{"a line changed", "1\n2\n3\n4\n5\n6\n", "1\n2\n3\n4\nfive\n6\n",
			[]string{"     2   2\n", "     3   3\n", "     4   4\n", "-    5   5\n", "+    5   five\n", "line 5, from byte 1"}},
		{"a change in the line", "the storm recovers\n", "the storm never recovers\n",
			[]string{"-    1   the storm recovers", "+    1   the storm never recovers", "from byte 11"}},
		{"a line more", "a\n", "a\nb\n", []string{"     1   a\n", "-    2   (end of file)", "+    2   b", "1 lines against 2"}},
		{"a line less", "a\nb\n", "a\n", []string{"-    2   b", "+    2   (end of file)"}},
		{"the last newline", "a\n", "a", []string{"-    1   a\n", "+    1   a (no newline at the end)"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := Diff([]byte(c.want), []byte(c.got))
			if (d == "") != (c.has == nil) {
				t.Fatalf("Diff = %q", d)
			}
			rest := d
			for _, h := range c.has {
				i := strings.Index(rest, h)
				if i < 0 {
					t.Fatalf("the diff lacks %q (in order):\n%s", h, d)
				}
				rest = rest[i+len(h):]
			}
		})
	}
}

// TestDiffShowsOnlyThreeLinesBefore keeps a diff short on a long file.
func TestDiffShowsOnlyThreeLinesBefore(t *testing.T) {
	want := strings.Repeat("same\n", 100) + "old\n"
	got := strings.Repeat("same\n", 100) + "new\n"
	d := Diff([]byte(want), []byte(got))
	if n := strings.Count(d, "same"); n != context {
		t.Errorf("%d lines of context, want %d:\n%s", n, context, d)
	}
	if !strings.Contains(d, "-  101   old") || !strings.Contains(d, "+  101   new") {
		t.Errorf("diff:\n%s", d)
	}
}

// TestCheck fails a test on a difference, and not on equal output.
func TestCheck(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.golden")
	if err := os.WriteFile(path, []byte("one\ntwo\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var same, differs recorder
	Check(&same, path, []byte("one\ntwo\n"), "go test -update")
	Check(&differs, path, []byte("one\n2\n"), "go test -update")
	if same.failed {
		t.Errorf("equal output failed: %s", same.msg)
	}
	if !differs.failed || !strings.Contains(differs.msg, "+    2   2") || !strings.Contains(differs.msg, "go test -update") {
		t.Errorf("a difference was reported as %q", differs.msg)
	}
}

// recorder is a testing.TB that records a failure instead of failing.
type recorder struct {
	testing.TB
	failed bool
	msg    string
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.failed = true
	r.msg = fmt.Sprintf(format, args...)
}
func (r *recorder) Fatalf(format string, args ...any) { r.Errorf(format, args...) }
func (r *recorder) Fatal(args ...any)                 { r.Errorf("%v", args...) }
