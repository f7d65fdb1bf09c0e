package cli

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/retrystorm/retrystorm/internal/servertest"
)

// TestExitStatus runs the built binary, through its launcher: 0 when the
// claims hold, 1 when one does not, 2 for a usage error or a bad
// scenario, and 1, not 2, when the run crashes out of memory (issue 14,
// item 11: the Go runtime exits 2 on a fatal error, the status documented
// for bad input).
func TestExitStatus(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary; skipped with -short")
	}
	if _, err := exec.LookPath("go"); err != nil {
		servertest.Missing(t, "no go command: %v", err)
	}
	bin := buildCommand(t, t.TempDir(), "cmd/retrystorm")
	dir := t.TempDir()
	write := func(name, text string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	storm := runCLI(t, "storm", "--print-config").stdout
	calm := write("calm.yaml", strings.Replace(storm, "capacity: 80}", "capacity: 120}", 1))
	bad := write("bad.yaml", "name: x\nduraton: 10s\n")
	for _, c := range []struct {
		args []string
		code int
	}{
		{[]string{"version"}, 0},
		{[]string{"storm", "--json"}, 0},
		{[]string{"storm", "--json", "--config", calm}, 1},
		{[]string{"--nosuch"}, 2},
		{[]string{"run", bad}, 2},
	} {
		if r := execute(t, dir, nil, bin, c.args...); r.code != c.code {
			t.Errorf("%q: exit %d, want %d\n%s", c.args, r.code, c.code, r.stderr)
		}
	}

	if runtime.GOOS != "linux" {
		return
	}
	sh, err := exec.LookPath("sh")
	if err != nil {
		servertest.Missing(t, "no sh to limit the memory with: %v", err)
	}
	// 20 fleets of 100,000 ticks: about 2 GB, in a process whose address
	// space is limited to 1 GB, of which the Go runtime reserves about 700
	// MB at start.
	var b strings.Builder
	b.WriteString("name: big\nseed: 1\nduration: 100000s\ntick: 1s\ntraffic: {rate: 1, clients: 1}\norigin: {model: capacity, capacity: 10}\nfleets:\n")
	for i := range 20 {
		fmt.Fprintf(&b, "  - {name: f%d, timeout: 1s, retry: {max_retries: 0}, budget: {use: none}}\n", i)
	}
	big := write("big.yaml", b.String())
	r := execute(t, dir, nil, sh, "-c", `ulimit -v 1000000 && exec "$0" run "$1" --json`, bin, big)
	if r.code != 1 || !strings.Contains(r.stderr, "out of memory") || !strings.Contains(oneLine(r.stderr), "retrystorm: the run crashed") {
		t.Errorf("out of memory: exit %d, want 1 and a word on the crash\n%s", r.code, tail(r.stderr, 600))
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// TestChildVerdictPassesInconclusive: a lab run in the child that could
// not measure exits 3, and the parent exits 3 too, not 1 as for a crash.
func TestChildVerdictPassesInconclusive(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		servertest.Missing(t, "no sh: %v", err)
	}
	err = exec.Command(sh, "-c", "exit 3").Run()
	if code, msg := childVerdict(err); code != exitInconclusive || msg != "" {
		t.Errorf("child exit 3: parent %d %q, want %d and nothing to add", code, msg, exitInconclusive)
	}
	if code, _ := verdict(nil, ErrInconclusive); code != exitInconclusive {
		t.Errorf("ErrInconclusive: exit %d, want %d", code, exitInconclusive)
	}
}

// A package named as its command prefixes its errors with that name;
// the message says it once ("retrystorm calibrate: calibrate: ..." before).
func TestUsageErrorNamesTheCommandOnce(t *testing.T) {
	for _, c := range []struct{ cmd, msg, want string }{
		{"calibrate", "calibrate: no requests in the window", "retrystorm calibrate: no requests in the window\n"},
		{"replay", "replay: calibrate: x", "retrystorm replay: calibrate: x\n"},
		{"check", "calibrate: x", "retrystorm check: calibrate: x\n"},
	} {
		code, msg := verdict(nil, &usageError{cmd: c.cmd, msg: c.msg})
		if code != exitUsage || !strings.HasPrefix(msg, c.want) {
			t.Errorf("%s %q: exit %d, %q; want %d, %q", c.cmd, c.msg, code, msg, exitUsage, c.want)
		}
	}
}

// TestTuneGCLeavesWhatIsSet: with GOGC or GOMEMLIMIT set, the collector
// is Go's as those say (tuneGC changes neither); with neither, GOGC 400
// under a 4 GiB soft limit.
func TestTuneGCLeavesWhatIsSet(t *testing.T) {
	const percent, limit = 77, 3 << 30
	oldP, oldL := debug.SetGCPercent(percent), debug.SetMemoryLimit(limit)
	t.Cleanup(func() { debug.SetGCPercent(oldP); debug.SetMemoryLimit(oldL) })
	for _, c := range []struct {
		gogc, gomemlimit string
		percent          int
		limit            int64
	}{
		{"off", "", percent, limit},
		{"100", "", percent, limit},
		{"", "1GiB", percent, limit},
		{"", "", gcPercent, gcMemoryLimit},
	} {
		t.Setenv("GOGC", c.gogc)
		t.Setenv("GOMEMLIMIT", c.gomemlimit)
		debug.SetGCPercent(percent)
		debug.SetMemoryLimit(limit)
		tuneGC()
		p, l := debug.SetGCPercent(percent), debug.SetMemoryLimit(-1)
		if p != c.percent || l != c.limit {
			t.Errorf("GOGC=%q GOMEMLIMIT=%q: GC percent %d, limit %d; want %d, %d", c.gogc, c.gomemlimit, p, l, c.percent, c.limit)
		}
	}
}
