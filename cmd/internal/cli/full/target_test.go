package full

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/lab"
)

// startService serves a small stand-in for a user's service on 127.0.0.1
// until the test ends: two requests at a time, 5 ms each (400 per second).
func startService(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	slots := make(chan struct{}, 2)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case slots <- struct{}{}:
		case <-r.Context().Done():
			return
		}
		time.Sleep(5 * time.Millisecond)
		<-slots
		_, _ = io.WriteString(w, "ok\n")
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String() + "/"
}

// TestLabTargetUsage: --target is checked before anything is sent: a
// service off this machine needs --allow-remote, the flags that only
// mean something with a target need one, and a target is HTTP only.
func TestLabTargetUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"lab", "--target", "http://example.com/"}, "--target: the target is not on this machine: example.com"},
		{[]string{"lab", "--target", "http://10.0.0.1:8080/"}, "give --allow-remote"},
		{[]string{"lab", "--target", "ftp://127.0.0.1/"}, "want an http:// or https:// URL with a host"},
		// Issue 27, item 10: accepted, then "fails 9 of 9", exit 1.
		{[]string{"lab", "--target", "http://127.0.0.1:99999/"}, `--target: port "99999": want a port from 1 to 65535`},
		{[]string{"lab", "--target", "http://127.0.0.1:0/"}, `--target: port "0": want a port from 1 to 65535`},
		{[]string{"lab", "--target", "http://user:secret@127.0.0.1/"}, "carries a user name or password"},
		{[]string{"lab", "--target", "http://127.0.0.1:1/", "--protocol", "grpc"}, "--target with --protocol grpc: the lab plays a scenario against an HTTP service only"},
		{[]string{"lab", "--target", "http://127.0.0.1:1/", "--protocol", "grpc", "--probe"}, "--target with --protocol grpc"},
		{[]string{"lab", "--target", "http://127.0.0.1:1/", "--config", "../../../../experiment/scenarios/layers.yaml"}, "--target: layers has tiers (a chain of"},
		{[]string{"lab", "--probe"}, "--probe needs --target URL"},
		{[]string{"lab", "--shard", "1/2"}, "--shard 1/2: a run split over load processes plays against --target"},
		{[]string{"lab", "--target", "http://127.0.0.1:1/", "--shard", "1/2", "--auto-tick"}, "at one tick (no --auto-tick)"},
		{[]string{"lab", "--target", "http://127.0.0.1:1/", "--shard", "3/2"}, "--shard 3/2: i must be in [1, n]"},
		{[]string{"lab", "--target", "http://127.0.0.1:1/", "--shard", "job/2"}, "job/N takes I from JOB_COMPLETION_INDEX"},
		{[]string{"lab", "--impose"}, "--impose needs --target URL"},
		{[]string{"lab", "--allow-remote"}, "--allow-remote needs --target URL"},
		{[]string{"lab", "--target", "http://127.0.0.1:1/", "--probe", "--impose"}, "--probe measures the target: it takes no --config, --impose or --duration"},
		{[]string{"lab", "--target", "http://127.0.0.1:1/", "--config", "../../../../experiment/scenarios/hedge.yaml"}, "--target: hedge's origin has 4 replicas; the fault proxy stands for one"},
	} {
		r := runCLI(t, c.args...)
		if r.code != 2 || !strings.Contains(strings.Join(strings.Fields(r.stderr), " "), c.want) {
			t.Errorf("%q: exit %d, want 2 and %q\n%s", c.args, r.code, c.want, r.stderr)
		}
	}
}

// TestLabProbeWritesAScenario: --probe measures a service and prints a
// scenario file that `retrystorm run` accepts.
func TestLabProbeWritesAScenario(t *testing.T) {
	r := runCLI(t, "lab", "--target", startService(t), "--probe")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	if !strings.Contains(r.stdout, "# Measured by retrystorm lab --probe") || !strings.Contains(r.stderr, "lab: probing http://127.0.0.1:") {
		t.Errorf("the scenario does not say what was measured, or the log what was sent:\n%s\n%s", r.stdout, r.stderr)
	}
	path := filepath.Join(t.TempDir(), "probed.yaml")
	if err := os.WriteFile(path, []byte(r.stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	if run := runCLI(t, "run", path, "--json"); run.code != 0 {
		t.Errorf("run on the probed scenario: exit %d\n%s\n%s", run.code, run.stderr, r.stdout)
	}
	// The replay command it prints works as printed (issue 26: it
	// named a tick the lab refused).
	var replay []string
	for _, line := range strings.Split(r.stdout, "\n") {
		if cmd, ok := strings.CutPrefix(line, "# Replay it: retrystorm "); ok {
			replay = strings.Fields(strings.ReplaceAll(cmd, "FILE", path))
		}
	}
	if len(replay) == 0 {
		t.Fatalf("no replay command:\n%s", r.stdout)
	}
	if testing.Short() {
		return
	}
	run := runCLI(t, append(replay, "--out", t.TempDir())...)
	if run.code != 0 && run.code != 1 && run.code != lab.ExitInconclusive {
		t.Errorf("%q: exit %d\n%s", replay, run.code, run.stderr)
	}
}

// TestLabAgainstATarget: the tiny storm against a service, with the
// scenario's origin imposed: the lab's JSON names the target and every
// fleet ran against it.
func TestLabAgainstATarget(t *testing.T) {
	r := runCLI(t, "lab", "--config", writeTiny(t), "--tick", "50ms", "--target", startService(t), "--impose", "--json")
	if r.code != 0 && r.code != 1 && r.code != lab.ExitInconclusive {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	var out struct {
		Fleets []struct{ Name string } `json:"fleets"`
		Lab    struct {
			Target string  `json:"target"`
			Rest   float64 `json:"target_rest_seconds"`
			Fleets []struct {
				Settle float64 `json:"settle_seconds"`
			} `json:"fleets"`
		} `json:"lab"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("%v\n%s", err, r.stdout)
	}
	if !strings.HasPrefix(out.Lab.Target, "http://127.0.0.1:") || out.Lab.Rest <= 0 || len(out.Fleets) != 3 || len(out.Lab.Fleets) != 3 {
		t.Errorf("JSON: target %q at rest %g s, %d fleets, %d lab fleets", out.Lab.Target, out.Lab.Rest, len(out.Fleets), len(out.Lab.Fleets))
	}
}

// TestLabTargetThatCannotServe: a target that is not there, or answers
// garbage, is bad input: exit 2, with what went wrong underneath (issue 27,
// item 10: it was "fails 9 of 9" and exit 1).
func TestLabTargetThatCannotServe(t *testing.T) {
	dead := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		return "http://" + addr + "/"
	}()
	garbage := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				// Read the request first: garbage written before it comes
				// reaches an idle connection, and the client's error is
				// then a race, not "malformed HTTP response".
				c.SetDeadline(time.Now().Add(10 * time.Second))
				br := bufio.NewReader(c)
				for {
					l, err := br.ReadString('\n')
					if err != nil || l == "\r\n" {
						break
					}
				}
				_, _ = io.WriteString(c, "SSH-2.0-not-http\r\n\r\n")
				c.Close()
			}
		}()
		return "http://" + ln.Addr().String() + "/"
	}()
	for _, c := range []struct {
		name, url, want string
	}{
		{"dead", dead, "connection refused"},
		{"garbage", garbage, "malformed HTTP"},
	} {
		for _, mode := range [][]string{{"--config", writeTiny(t)}, {"--probe"}} {
			args := append([]string{"lab", "--target", c.url}, mode...)
			r := runCLI(t, args...)
			msg := strings.Join(strings.Fields(r.stderr), " ")
			if r.code != 2 || !strings.Contains(msg, "fails 9 of 9 requests at rest") || !strings.Contains(msg, c.want) {
				t.Errorf("%s %q: exit %d, want 2 and %q\n%s", c.name, mode, r.code, c.want, r.stderr)
			}
		}
	}
}
