package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Stability Sim (marcbrooker/stability-sim) side by side with
// retrystorm's simulator, both as whole processes: the peer's engine, run
// headless by peer/driver.mjs from a bundle the user builds from their
// own checkout, and retrystorm's command. BENCHMARKS.md ("Stability Sim,
// side by side") has the commands and the figures:
//
//	STABILITY_SIM_ENGINE=/path/to/stability-engine.mjs go test -run Peer -v
//
// Without STABILITY_SIM_ENGINE both tests skip: nothing here is fetched
// or built of the peer's.

// peerEngine returns the bundle of the peer's engine, or skips.
func peerEngine(t *testing.T) string {
	t.Helper()
	p := os.Getenv("STABILITY_SIM_ENGINE")
	if p == "" {
		t.Skip("STABILITY_SIM_ENGINE is not set: see BENCHMARKS.md, Stability Sim, side by side")
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("no node on the PATH")
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

// process is one whole process's cost.
type process struct {
	cpu    time.Duration // user + system
	maxRSS int64         // KiB
	out    []byte
}

func run(t *testing.T, dir string, name string, args ...string) process {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	err := cmd.Run()
	if code := cmd.ProcessState.ExitCode(); err != nil && code != 1 { // 1: a scenario's claims, not an error here
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, stderr.Bytes())
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	return process{cpu: cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime(), maxRSS: ru.Maxrss, out: out.Bytes()}
}

// ours builds retrystorm's command (with its profile, as go build does).
func ours(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "retrystorm")
	if out, err := exec.Command("go", "build", "-C", "..", "-o", bin, "./cmd/retrystorm").CombinedOutput(); err != nil {
		t.Fatalf("building retrystorm: %v\n%s", err, out)
	}
	return bin
}

// TestPeerSpeed: the retry storm (the peer's metastable-retry, and
// examples/metastable-retry.yaml) for an hour of virtual time, five rounds
// alternated: attempts per CPU-second of the whole process, and its peak
// memory.
func TestPeerSpeed(t *testing.T) {
	engine := peerEngine(t)
	bin := ours(t)
	long := filepath.Join(t.TempDir(), "long.yaml")
	y, err := os.ReadFile("../examples/metastable-retry.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(long, bytes.Replace(y, []byte("duration: 60s"), []byte("duration: 1h"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	for round := range 5 {
		p := run(t, ".", "node", "peer/driver.mjs", engine, "bench", "metastable-retry", "42", "3600")
		var pj struct {
			Clients map[string]struct{ Attempts float64 } `json:"clients"`
		}
		if err := json.Unmarshal(p.out, &pj); err != nil {
			t.Fatal(err)
		}
		o := run(t, ".", bin, "run", long, "--json", "--long")
		var oj struct {
			Fleets []struct {
				Summary struct{ Attempts float64 } `json:"summary"`
			} `json:"fleets"`
		}
		if err := json.Unmarshal(o.out, &oj); err != nil {
			t.Fatal(err)
		}
		pa, oa := pj.Clients["client-1"].Attempts, oj.Fleets[0].Summary.Attempts
		t.Logf("round %d: peer %.0f attempts in %.2f s of CPU (%.3g/s), %d MiB; retrystorm %.0f in %.2f s (%.3g/s), %d MiB; %.0f×",
			round+1, pa, p.cpu.Seconds(), pa/p.cpu.Seconds(), p.maxRSS>>10, oa, o.cpu.Seconds(), oa/o.cpu.Seconds(), o.maxRSS>>10,
			(oa/o.cpu.Seconds())/(pa/p.cpu.Seconds()))
	}
}

// TestPeerExamples: each of the peer's eight examples in both simulators,
// over ten seeds: the mean attempts, answers in time and failures, and
// the answers in time over the last ten seconds, as a Markdown table.
func TestPeerExamples(t *testing.T) {
	engine := peerEngine(t)
	bin := ours(t)
	seeds := 10
	if s := os.Getenv("SEEDS"); s != "" {
		if seeds, _ = strconv.Atoi(s); seeds < 1 {
			t.Fatalf("SEEDS=%q", s)
		}
	}
	names := []string{"metastable-retry", "gc-death-spiral", "connection-pool-exhaustion", "cache-stampede",
		"cache-flush", "timeout-cascade", "lb-sinkholing", "goodput-collapse"}
	var b strings.Builder
	b.WriteString("| example | attempts: retrystorm / peer | answered in time | failures | answered in time, last 10 s |\n|---|---|---|---|---|\n")
	for _, name := range names {
		var o, p [4]float64
		for seed := 1; seed <= seeds; seed++ {
			add(&o, oursCounts(t, bin, name, seed))
			add(&p, peerCounts(t, engine, name, seed))
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", name, cell(o[0], p[0], seeds), cell(o[1], p[1], seeds), cell(o[2], p[2], seeds), cell(o[3], p[3], seeds))
	}
	t.Logf("over %d seeds:\n%s", seeds, b.String())
}

func add(sum *[4]float64, v [4]float64) {
	for i := range sum {
		sum[i] += v[i]
	}
}

func cell(o, p float64, n int) string {
	o, p = o/float64(n), p/float64(n)
	d := "—"
	if p != 0 {
		d = fmt.Sprintf("%+.0f%%", 100*(o-p)/p)
	}
	return fmt.Sprintf("%s / %s (%s)", thousands(o), thousands(p), d)
}

func thousands(x float64) string {
	s := strconv.FormatInt(int64(math.Round(x)), 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// oursCounts are retrystorm's attempts, answers in time, failures and
// answers in time over the last ten seconds, every fleet together.
func oursCounts(t *testing.T, bin, name string, seed int) [4]float64 {
	o := run(t, ".", bin, "run", "../examples/"+name+".yaml", "--json", "--seed", strconv.Itoa(seed))
	var r struct {
		Fleets []struct {
			Summary struct {
				Attempts        float64 `json:"attempts"`
				Goodput         float64 `json:"goodput"`
				FailedAttempts  float64 `json:"failed_attempts"`
				BreakerRefusals float64 `json:"breaker_refusals"`
			} `json:"summary"`
			Series struct {
				Goodput []float64 `json:"goodput"`
			} `json:"series"`
		} `json:"fleets"`
	}
	if err := json.Unmarshal(o.out, &r); err != nil {
		t.Fatal(err)
	}
	var c [4]float64
	for _, f := range r.Fleets {
		s := f.Summary
		c[0], c[1], c[2] = c[0]+s.Attempts, c[1]+s.Goodput, c[2]+s.FailedAttempts+s.BreakerRefusals
		for _, g := range f.Series.Goodput[len(f.Series.Goodput)-10:] {
			c[3] += g
		}
	}
	return c
}

// peerCounts are the same of the peer's engine: its clients' attempts,
// completions and failures (a timeout is one).
func peerCounts(t *testing.T, engine, name string, seed int) [4]float64 {
	p := run(t, ".", "node", "peer/driver.mjs", engine, "series", name, strconv.Itoa(seed))
	var r struct {
		Clients map[string]struct {
			Attempts       float64 `json:"attempts"`
			CompletedCount float64 `json:"completedCount"`
			FailedCount    float64 `json:"failedCount"`
		} `json:"clients"`
		Seconds []map[string]struct {
			CompletedCount float64 `json:"completedCount"`
		} `json:"seconds"`
	}
	if err := json.Unmarshal(p.out, &r); err != nil {
		t.Fatal(err)
	}
	var c [4]float64
	for _, m := range r.Clients {
		c[0], c[1], c[2] = c[0]+m.Attempts, c[1]+m.CompletedCount, c[2]+m.FailedCount
	}
	for _, s := range r.Seconds[len(r.Seconds)-10:] {
		for _, m := range s {
			c[3] += m.CompletedCount
		}
	}
	return c
}
