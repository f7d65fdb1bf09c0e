package servertest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The test binary is the server program: run as "serve ADDR" it serves
// 200 on ADDR for a few seconds, or exits 1 if it cannot bind it, as a
// real server does when its port was taken.
func TestMain(m *testing.M) {
	if len(os.Args) == 3 && os.Args[1] == "serve" {
		l, err := net.Listen("tcp", os.Args[2])
		if err != nil {
			fmt.Fprintln(os.Stderr, "cannot bind:", err)
			os.Exit(1)
		}
		go func() { _ = http.Serve(l, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})) }()
		time.Sleep(20 * time.Second) // killed by Start's cleanup long before
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// program is the test binary as a server on one port; take, when true for
// a try, takes the port first, as another process would between
// FreeAddrs and the program's bind.
func program(t *testing.T, take func(try int) bool) (Program, *[]net.Listener) {
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var taken []net.Listener
	t.Cleanup(func() {
		for _, l := range taken {
			l.Close()
		}
	})
	try := 0
	return Program{
		Name:  "server",
		Bin:   bin,
		Ports: 1,
		Args: func(addrs []string) ([]string, error) {
			try++
			if take(try) {
				l, err := net.Listen("tcp", addrs[0])
				if err != nil {
					return nil, err
				}
				taken = append(taken, l)
			}
			return []string{"serve", addrs[0]}, nil
		},
		Ready: HTTPReady(0, "/"),
	}, &taken
}

func TestStartAgainOnATakenPort(t *testing.T) {
	p, taken := program(t, func(try int) bool { return try == 1 })
	addrs := Start(t, context.Background(), p)
	if len(*taken) != 1 {
		t.Fatalf("%d ports taken, want the first try's", len(*taken))
	}
	if addrs[0] == (*taken)[0].Addr().String() {
		t.Fatalf("started on %s, the port that was taken", addrs[0])
	}
	if err := HTTPReady(0, "/")(context.Background(), addrs); err != nil {
		t.Fatal(err)
	}
}

// fakeTB records a fatal failure and ends its goroutine, as testing.T does.
type fakeTB struct {
	testing.TB
	mu    sync.Mutex
	fatal string
}

func (f *fakeTB) Helper() {}

func (f *fakeTB) Fatalf(format string, args ...any) {
	f.mu.Lock()
	f.fatal = fmt.Sprintf(format, args...)
	f.mu.Unlock()
	runtime.Goexit()
}

func (f *fakeTB) Fatal(args ...any) { f.Fatalf("%s", fmt.Sprint(args...)) }

func (f *fakeTB) Logf(string, ...any) {}

func TestStartGivesUpAfterThreeTries(t *testing.T) {
	p, taken := program(t, func(int) bool { return true })
	f := &fakeTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Start(f, context.Background(), p)
	}()
	<-done
	if len(*taken) != tries {
		t.Errorf("%d tries, want %d", len(*taken), tries)
	}
	if !strings.Contains(f.fatal, "exited before it answered, 3 times") || !strings.Contains(f.fatal, "cannot bind") {
		t.Errorf("the failure says %q, want the count and the program's output", f.fatal)
	}
}

func TestFreeAddrsDiffer(t *testing.T) {
	addrs, err := FreeAddrs(5)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, a := range addrs {
		if !strings.HasPrefix(a, "127.0.0.1:") || seen[a] {
			t.Fatalf("addresses %v: want distinct ones on 127.0.0.1", addrs)
		}
		seen[a] = true
	}
}

// TestMissing: what a test needs and lacks skips it outside CI and fails
// it under CI=true, saying what is missing either way.
func TestMissing(t *testing.T) {
	for _, c := range []struct{ ci, want string }{{"", "skip"}, {"1", "skip"}, {"true", "fail"}} {
		t.Setenv("CI", c.ci)
		how, msg := Ended(t, func(tb testing.TB) { Need(tb, "retrystorm-no-such-program", "nosuch") })
		if how != c.want || !strings.Contains(msg, "retrystorm-no-such-program is not installed") {
			t.Errorf("CI=%q: %s %q, want a %s that names the program", c.ci, how, msg, c.want)
		}
	}
}

// TestRefusing: the address refuses a connection, and a server cannot
// take its port while the test lasts (on Linux), which an address
// FreeAddrs found free does not promise.
func TestRefusing(t *testing.T) {
	addr := Refusing(t)
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err == nil {
		c.Close()
		t.Fatalf("%s accepted a connection", addr)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("dialing %s: %v, want the connection refused", addr, err)
	}
	if runtime.GOOS != "linux" {
		return
	}
	if l, err := net.Listen("tcp", addr); err == nil {
		l.Close()
		t.Errorf("a server took %s", addr)
	}
}
