package cli

import (
	"bytes"
	"flag"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Issue 27, "small things a new user hit".

// retrystorm --version is the version command, as most commands take it.
func TestVersionFlag(t *testing.T) {
	for _, arg := range []string{"--version", "-version"} {
		r := runCLI(t, arg)
		if r.code != exitOK || !strings.HasPrefix(r.stdout, "retrystorm ") || r.stdout != runCLI(t, "version").stdout {
			t.Errorf("%s: exit %d, %q %q, want what version prints", arg, r.code, r.stdout, r.stderr)
		}
	}
}

// help strom suggests storm, and points at the list of commands, not at
// "retrystorm help help".
func TestHelpUnknownCommand(t *testing.T) {
	r := runCLI(t, "help", "strom")
	if r.code != exitUsage || !strings.Contains(r.stderr, `did you mean "storm"?`) || strings.Contains(r.stderr, "help help") ||
		!strings.Contains(r.stderr, "Run 'retrystorm help' for usage.") {
		t.Errorf("exit %d, stderr %q", r.code, r.stderr)
	}
}

// Every command writes its report in a directory of its own: check no
// longer overwrites the demo's report. The demo's stays where the README
// says, and each command's help says where its own goes.
func TestReportDirPerCommand(t *testing.T) {
	seen := map[string]string{}
	for _, c := range table(Heavy{}) {
		inv := &Invocation{Name: c.Name, typed: true, table: table(Heavy{})}
		if err := parse(c, nil, inv); err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		if inv.flags.Lookup("out") == nil {
			continue
		}
		dir := inv.ReportDir()
		if other, ok := seen[dir]; ok {
			t.Errorf("%s and %s both write their report in %s", c.Name, other, dir)
		}
		seen[dir] = c.Name
		want := filepath.Join("retrystorm-report", c.Name)
		if c.Name == "demo" {
			want = "retrystorm-report"
		}
		if dir != want {
			t.Errorf("%s writes its report in %s, want %s", c.Name, dir, want)
		}
		if u := inv.flags.Lookup("out").Usage; !strings.Contains(u, "(default "+want+";") {
			t.Errorf("%s's --out does not say its default, %s: %q", c.Name, want, u)
		}
	}
	if len(seen) < 10 {
		t.Errorf("only %d commands write a report", len(seen))
	}
}

// The companion built from a checkout is stamped with its revision and
// version, as .ci/release stamps both binaries, even where GOFLAGS says
// -buildvcs=false: retrystorm-full version said "(devel)".
func TestCompanionBuildStampsVersion(t *testing.T) {
	args := goBuildArgs("/tmp/x")
	if !slices.Contains(args, "-buildvcs=auto") || args[0] != "build" || !slices.Contains(args, "./cmd/"+CompanionName) {
		t.Errorf("go %s", strings.Join(args, " "))
	}
}

// check and advise take --max-memory with their own flags; a command
// that also takes every cost flag defines it once.
func TestMemoryFlagOnce(t *testing.T) {
	fs := flag.NewFlagSet("", flag.ContinueOnError)
	inv := &Invocation{}
	checkFlags(fs, inv)
	costFlags(fs, inv)
	if fs.Lookup("max-memory") == nil || fs.Lookup("long") == nil {
		t.Fatal("a flag is missing")
	}
	if err := fs.Parse([]string{"--max-memory", "1GiB"}); err != nil || inv.Limits().Memory != 1<<30 {
		t.Errorf("--max-memory 1GiB: %v, limit %d", err, inv.Limits().Memory)
	}
}

// TestLogWholeWhenPiped: the log's lines reach a pipe whole, so that
// docs/lab.md's `while read` recipe finds the gateway's address on one
// line (issue 37: they were wrapped at 80 columns).
func TestLogWholeWhenPiped(t *testing.T) {
	var errb bytes.Buffer
	inv := &Invocation{Stderr: &errb}
	long := "gateway http://127.0.0.1:40000/ " + strings.Repeat("and a very long tail of words ", 5)
	fmt.Fprintln(inv.Log(), long)
	if got := strings.TrimSuffix(errb.String(), "\n"); got != long {
		t.Errorf("piped log line:\n%q\nwant it whole:\n%q", got, long)
	}
}
