// Package servertest runs a real server program for a test (Prometheus,
// HAProxy, nginx) on ports of 127.0.0.1, waits until it answers, and kills
// it when the test ends.
//
// The ports are found free and then given to the program, so another
// process (a parallel test package's server, or an outgoing connection's
// local port from the same ephemeral range) may take one in between. A
// program that exits before it answers is therefore started again on new
// ports, up to three times, instead of failing the test.
package servertest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// Program is a server a test runs.
type Program struct {
	// Name names the program in messages ("haproxy").
	Name string
	// Bin is the path of its executable.
	Bin string
	// Ports is how many ports of 127.0.0.1 it listens on; at least one.
	Ports int
	// Args returns the command's arguments for the addresses (host:port,
	// one per port), after writing any configuration they need. It is
	// called again, with new addresses, for each try.
	Args func(addrs []string) ([]string, error)
	// Ready reports nil once the server answers at addrs.
	Ready func(ctx context.Context, addrs []string) error
	// Wait bounds the wait for Ready on each try: 15 s when zero.
	Wait time.Duration
}

// Need returns the path of program, looked up in PATH and then in
// /usr/sbin and /usr/local/sbin, where Debian installs servers. Without
// it the test skips, and fails under CI=true, which must run it (pkg
// names the Debian package .ci/run installs).
func Need(t testing.TB, program, pkg string) string {
	t.Helper()
	if p, err := exec.LookPath(program); err == nil {
		return p
	}
	for _, dir := range []string{"/usr/sbin", "/usr/local/sbin"} {
		p := filepath.Join(dir, program)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	Missing(t, "%s is not installed (.ci/run installs the Debian package %s: apt-get install %s)", program, pkg, pkg)
	return ""
}

// Missing ends t, which lacks something it needs to check its claim (a
// program, a checkout): it skips, saying why, and fails under CI=true,
// where .ci/run provides everything and no test of a claim may skip.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s; CI=true requires it", msg)
	}
	t.Skip(msg)
}

// Nginx runs nginx, found by Need, with one worker, no daemon, and its
// pid, log and temporary files in dir, and returns its address and the
// nginx.conf it ran. http returns the http block's directives for the
// address nginx listens on (a server block with that listen); ready is a
// path nginx answers 200 on once up.
func Nginx(t testing.TB, dir, ready string, http func(listen string) string) (addr, conf string) {
	t.Helper()
	bin := Need(t, "nginx", "nginx")
	addrs := Start(t, context.Background(), Program{
		Name: "nginx", Bin: bin, Ports: 1,
		Args: func(addrs []string) ([]string, error) {
			conf = fmt.Sprintf(`daemon off;
master_process off;
worker_processes 1;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path %[1]s/body;
    proxy_temp_path %[1]s/proxy;
    fastcgi_temp_path %[1]s/fastcgi;
    uwsgi_temp_path %[1]s/uwsgi;
    scgi_temp_path %[1]s/scgi;
%[2]s
}
`, dir, http(addrs[0]))
			file := filepath.Join(dir, "nginx.conf")
			return []string{"-c", file, "-e", filepath.Join(dir, "error.log")}, os.WriteFile(file, []byte(conf), 0o600)
		},
		Ready: HTTPReady(0, ready),
	})
	return addrs[0], conf
}

// tries is how many times Start starts a program that exits before it
// answers.
const tries = 3

// Start runs p until t ends and returns its addresses once p.Ready says it
// answers. A program that exits first is started again on new ports, up to
// three times; one that neither answers nor exits within p.Wait fails t.
// Its output is logged if t failed.
func Start(t testing.TB, ctx context.Context, p Program) []string {
	t.Helper()
	if p.Ports < 1 {
		t.Fatalf("servertest: %s: Ports is %d, want at least 1", p.Name, p.Ports)
	}
	for try := 1; ; try++ {
		addrs, exited, log := start(t, ctx, p)
		if !exited {
			return addrs
		}
		if try == tries || ctx.Err() != nil {
			t.Fatalf("%s exited before it answered, %d times; its last output:\n%s", p.Name, try, log)
		}
		t.Logf("%s exited before it answered (try %d of %d), starting it on other ports; its output:\n%s", p.Name, try, tries, log)
	}
}

// start runs p once, on ports found free.
func start(t testing.TB, ctx context.Context, p Program) (addrs []string, exited bool, log string) {
	t.Helper()
	addrs, err := FreeAddrs(p.Ports)
	if err != nil {
		t.Fatal(err)
	}
	args, err := p.Args(addrs)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, p.Bin, args...)
	out := new(syncBuilder)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	stop := func() {
		_ = cmd.Process.Kill()
		<-done
	}
	wait := p.Wait
	if wait <= 0 {
		wait = 15 * time.Second
	}
	for deadline := time.Now().Add(wait); ; {
		select {
		case <-done:
			return nil, true, out.String()
		case <-ctx.Done():
			stop()
			t.Fatalf("%s: %v before it answered\n%s", p.Name, ctx.Err(), out.String())
		case <-time.After(50 * time.Millisecond):
		}
		err := p.Ready(ctx, addrs)
		if err == nil {
			t.Cleanup(func() {
				stop()
				if t.Failed() {
					t.Logf("%s's output:\n%s", p.Name, out.String())
				}
			})
			return addrs, false, ""
		}
		if time.Now().After(deadline) {
			stop()
			t.Fatalf("%s at %s did not answer within %v: %v\n%s", p.Name, strings.Join(addrs, ", "), wait, err, out.String())
		}
	}
}

// FreeAddrs returns n distinct host:port addresses of 127.0.0.1 that
// nothing listens on now.
func FreeAddrs(n int) ([]string, error) {
	ls := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	addrs := make([]string, n)
	for i := range addrs {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("servertest: a free port: %w", err)
		}
		ls = append(ls, l) // held until all are found, so they differ
		addrs[i] = l.Addr().String()
	}
	return addrs, nil
}

// HTTPReady is a Program's Ready that asks GET http://addrs[i]+path and
// wants 200.
func HTTPReady(i int, path string) func(context.Context, []string) error {
	c := &http.Client{Timeout: time.Second}
	return func(ctx context.Context, addrs []string) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addrs[i]+path, nil)
		if err != nil {
			return err
		}
		resp, err := c.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s", req.URL, resp.Status)
		}
		return nil
	}
}

// syncBuilder is a strings.Builder the program's output may write while
// the test reads it.
type syncBuilder struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuilder) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuilder) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Ended runs f with a testing.TB that records how f ended it, for the
// tests of helpers that skip or fail: how is "skip" or "fail" ("" when f
// returned), and msg what it said. Like testing.T, a skip or a fatal
// failure ends f's goroutine; the TB's other methods are t's.
func Ended(t testing.TB, f func(testing.TB)) (how, msg string) {
	e := &ending{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(e)
	}()
	<-done
	return e.how, e.msg
}

// ending is Ended's testing.TB.
type ending struct {
	testing.TB
	how, msg string
}

func (e *ending) Helper() {}

func (e *ending) end(how, msg string) {
	e.how, e.msg = how, msg
	runtime.Goexit()
}

func (e *ending) Skip(args ...any)                 { e.end("skip", fmt.Sprint(args...)) }
func (e *ending) Skipf(format string, args ...any) { e.end("skip", fmt.Sprintf(format, args...)) }
func (e *ending) SkipNow()                         { e.end("skip", "") }
func (e *ending) Fatal(args ...any)                { e.end("fail", fmt.Sprint(args...)) }
func (e *ending) Fatalf(format string, args ...any) {
	e.end("fail", fmt.Sprintf(format, args...))
}
func (e *ending) FailNow() { e.end("fail", "") }
