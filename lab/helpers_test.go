package lab

import (
	"bytes"
	"context"
	"flag"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/retrystorm/retrystorm/internal/cpuhog"
	"github.com/retrystorm/retrystorm/internal/testlock"
	"github.com/retrystorm/retrystorm/scenario"
)

func TestMain(m *testing.M) {
	// These tests time real servers. Their verdicts do not rest on a
	// quiet machine: the lab watches itself, and a run it reports
	// inconclusive skips the test that ran it, saying why (conclusive).
	// The lock only makes a measurement likelier (fewer skips), not a
	// verdict truer: no CPU-heavy test package runs beside them (see
	// internal/testlock; TestLabStarvedFromOutside runs without its
	// protection, beside a busy process of its own).
	// A process of busy loops for a test (cpuhog.Start) goes no further.
	cpuhog.Main()
	if os.Getenv(shardHelperEnv) == "" && os.Getenv(stormEnv) == "" { // a shard's or a storm's process: its parent holds it
		testlock.Exclusive()
	}
	// As the lab command does: the lab is measured at its GC target.
	debug.SetGCPercent(GCPercent)
	flag.Parse()
	testlock.Parallel(3) // three storms at a time, each in its own process (ownProcess)
	goleak.VerifyTestMain(m)
}

// stormEnv, when set to a test's name, makes this process that test's
// own (ownProcess): it runs the test and nothing else.
const stormEnv = "RETRYSTORM_LAB_STORM"

// ownProcess runs t's storm in a test process of its own, three at a
// time: it marks t parallel (TestMain sets -parallel to 3) and runs this
// test binary again for t alone, then reports what that process said and
// returns true: the caller returns. In the process of t's own it returns
// false: the caller runs the storm.
//
// A storm keeps about a quarter of a core busy, so three side by side
// leave the machine mostly idle, and the package, whose lock (TestMain)
// keeps the other test slot of go test ./... waiting, takes 115 s (145 s
// two at a time, 228 s one at a time). In processes of their own, a storm is to the other what any
// program of a busy machine is: load its watch sees (timer lateness, the
// scheduler's waits, the machine's busy share), so a run the other
// spoiled is measured again (testlock.Conclusive), and fails in CI when
// it stays spoiled. In one process they shared a scheduler, a collector
// and sockets, which the watch does not see whole: run three at a time
// there, two failed a claim in runs their watch called conclusive (a
// guarded fleet recovered 29 ticks late after five stray failures; a
// shedding origin's adaptive limit did not recover). The lab command,
// likewise, runs one experiment per process.
func ownProcess(t *testing.T) bool {
	t.Helper()
	if os.Getenv(stormEnv) == t.Name() {
		return false
	}
	t.Parallel()
	ctx := context.Background()
	run := "^" + regexp.QuoteMeta(t.Name()) + "$"
	if f := flag.Lookup("test.run"); f != nil {
		// -run TestLabSmoke/http: the same subtests there.
		if _, sub, ok := strings.Cut(f.Value.String(), "/"); ok {
			run += "/" + sub
		}
	}
	args := []string{"-test.run=" + run, "-test.count=1", "-test.v"}
	if testing.Short() {
		args = append(args, "-test.short")
	}
	if d, ok := t.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d)
		defer cancel()
		args = append(args, "-test.timeout="+time.Until(d).Round(time.Second).String())
	}
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = append(os.Environ(), stormEnv+"="+t.Name())
	out, err := cmd.CombinedOutput()
	// Its log is this test's: shown with -v, or when it fails, so that
	// go test -v ./lab | grep -c 'inconclusive, as the lab reports it'
	// still counts the runs a loaded machine spoiled.
	t.Logf("in a process of its own (%s=%s):\n%s", stormEnv, t.Name(), out)
	switch {
	case err != nil:
		t.Fatalf("its process: %v", err)
	case bytes.Contains(out, []byte("--- SKIP: "+t.Name()+" ")):
		t.Skip("skipped in its process (above)")
	case !bytes.Contains(out, []byte("--- PASS: "+t.Name()+" ")):
		t.Fatal("its process ran no such test")
	}
	return true
}

// checkTallies fails t with every accounting identity the lab's tallies
// break: the simulator's checker, on what the lab measured (the two
// identities that compare two processes' clocks within sim.MeasuredSlack).
func checkTallies(t *testing.T, res *Result) {
	t.Helper()
	if err := res.Result.CheckMeasured(); err != nil {
		t.Error(err)
	}
}

// startOrigin runs an origin on loopback until the test ends.
func startOrigin(t *testing.T, cfg OriginConfig) (*Origin, string) {
	t.Helper()
	o, err := NewOrigin(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return o, startRunning(t, o.Run, o.Handler())
}

// startRunning serves h on loopback and calls run until the test ends,
// and returns the server's URL.
func startRunning(t *testing.T, run func(context.Context), h http.Handler) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		run(ctx)
	}()
	srv, err := Listen("127.0.0.1:0", h)
	if err != nil {
		cancel()
		<-done
		t.Fatal(err)
	}
	t.Cleanup(func() {
		srv.Close()
		cancel()
		<-done
	})
	return srv.URL().String()
}

// startServer serves h on loopback until the test ends.
func startServer(t *testing.T, h http.Handler) string {
	t.Helper()
	srv, err := Listen("127.0.0.1:0", h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return srv.URL().String()
}

// testClient is an HTTP/1.1 client whose connections are closed when the
// test ends (a client that gives up closes its connection, which is how the
// servers hear of it).
func testClient(t *testing.T) *http.Client {
	tr := &http.Transport{MaxIdleConnsPerHost: 256}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// reply is what a test request got.
type reply struct {
	status int
	header http.Header
	body   string
	took   time.Duration
	err    error
}

// send makes one request that gives up after timeout; headers are name,
// value pairs.
func send(c *http.Client, method, url string, timeout time.Duration, headers ...string) reply {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		return reply{err: err}
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	start := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		return reply{err: err, took: time.Since(start)}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{status: resp.StatusCode, header: resp.Header, body: string(b), took: time.Since(start)}
}

// queueOrigin is a queue origin of workers serving capacity per second.
func queueOrigin(workers int, capacity float64) scenario.Origin {
	return scenario.Origin{Model: scenario.ModelQueue, Workers: workers, Capacity: capacity, Discipline: "fifo", Replicas: 1}
}

// slow reports whether timing assertions should be lenient: under the race
// detector, or when asked (a loaded machine).
func slow() bool { return raceEnabled || os.Getenv("RETRYSTORM_SLOW") != "" }

func contains(s string, subs ...string) (missing []string) {
	for _, x := range subs {
		if !strings.Contains(s, x) {
			missing = append(missing, x)
		}
	}
	return missing
}
