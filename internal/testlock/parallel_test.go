package testlock

import (
	"flag"
	"runtime"
	"strconv"
	"testing"
)

// TestParallel: Parallel raises -test.parallel to n, never lowers it, and
// leaves a value the command line gave alone. (The running binary read
// the flag before its tests started, so changing it here changes nothing
// else.)
func TestParallel(t *testing.T) {
	f := flag.Lookup("test.parallel")
	before := f.Value.String()
	t.Cleanup(func() { f.Value.Set(before) })
	onCommandLine := false
	flag.Visit(func(g *flag.Flag) { onCommandLine = onCommandLine || g.Name == "test.parallel" })

	Parallel(1)
	if got := f.Value.String(); got != before {
		t.Errorf("Parallel(1): -test.parallel %s, want %s: it never lowers it", got, before)
	}
	n := runtime.GOMAXPROCS(0) + 3
	Parallel(n)
	want := strconv.Itoa(n)
	if onCommandLine {
		want = before
	}
	if got := f.Value.String(); got != want {
		t.Errorf("Parallel(%d): -test.parallel %s, want %s (set on the command line: %v)", n, got, want, onCommandLine)
	}
}
