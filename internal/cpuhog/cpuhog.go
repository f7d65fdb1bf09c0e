// Package cpuhog starves a test of CPU from outside its process, as the
// other programs of a loaded machine do: the test binary runs itself again
// as a process of busy loops that never sleep, which the test's process
// can neither slow down nor see, only suffer; and, on Unix, that process
// also stops the test's process for 30 ms out of every 100 ms (SIGSTOP,
// SIGCONT), as a container's CPU quota throttles it, because busy loops
// alone left a quiet CI machine's scheduler slack enough for the lab to
// measure. The lab's tests use it to
// prove that a starved lab reports its runs inconclusive rather than
// calling false verdicts (docs/lab.md, "When the lab is not measuring").
//
// A test package that uses it calls Main first in its TestMain:
//
//	func TestMain(m *testing.M) {
//		cpuhog.Main()
//		...
//	}
package cpuhog

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// env, when set to a count of loops, makes the process a hog; envPID,
// when set, names the process it throttles.
const (
	env    = "RETRYSTORM_CPUHOG"
	envPID = "RETRYSTORM_CPUHOG_THROTTLE"
)

// Stop and Period are the throttle's: the test's process is stopped for
// Stop out of every Period.
const (
	Stop   = 30 * time.Millisecond
	Period = 100 * time.Millisecond
)

// Life bounds a hog's life, should its test die without killing it.
const Life = 2 * time.Minute

// ready is what a hog writes once its loops spin.
const ready = "spinning\n"

// Main makes this process a hog, and never returns, when Start started
// it; otherwise it does nothing.
func Main() {
	v := os.Getenv(env)
	if v == "" {
		return
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 256 {
		fmt.Fprintf(os.Stderr, "cpuhog: %s=%q: want a count of loops in [1, 256]\n", env, v)
		os.Exit(2)
	}
	runtime.GOMAXPROCS(n)
	var stop atomic.Bool
	for range n {
		go func() {
			for x := 0; !stop.Load(); x++ {
			}
		}()
	}
	fmt.Print(ready)
	if pid, err := strconv.Atoi(os.Getenv(envPID)); err == nil && pid > 1 {
		throttle(pid, Stop, Period, time.Now().Add(Life))
	} else {
		time.Sleep(Life)
	}
	os.Exit(0)
}

// Active reports whether this process is a hog (its TestMain should do
// nothing else, and take no lock its test holds).
func Active() bool { return os.Getenv(env) != "" }

// Start runs, until t ends, a hog of twice as many loops as the cores:
// it inherits this process's CPU affinity, so it is pinned beside the
// test as taskset would pin it. It returns the hog's process id once the
// loops spin; the hog is killed when t ends (or dies by itself after
// Life).
func Start(t testing.TB) int {
	t.Helper()
	n := 2 * runtime.NumCPU()
	cmd := exec.Command(os.Args[0], "-test.run=^$", "-test.count=1")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d", env, n), fmt.Sprintf("%s=%d", envPID, os.Getpid()))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// The hog is asked to end, not killed: a hog killed between its
		// SIGSTOP and its SIGCONT left this process stopped for good
		// (and every test binary waiting on the test lock behind it). On
		// SIGTERM it lets this process go on, then exits.
		done := make(chan struct{})
		go func() {
			_ = cmd.Wait()
			close(done)
		}()
		end(cmd.Process)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill() // a hog that would not end: nothing else is left
			<-done
		}
	})
	said := make(chan error, 1)
	go func() {
		line, err := bufio.NewReader(out).ReadString('\n')
		if err == nil && line != ready {
			err = fmt.Errorf("cpuhog: the hog said %q", line)
		}
		said <- err
		_, _ = io.Copy(io.Discard, out)
	}()
	select {
	case err := <-said:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("cpuhog: the hog did not start spinning in 30 s")
	}
	if canThrottle {
		t.Logf("%d busy loops in process %d beside the test, which stops this one for %v of every %v", n, cmd.Process.Pid, Stop, Period)
	} else {
		t.Logf("%d busy loops in process %d beside the test", n, cmd.Process.Pid)
	}
	return cmd.Process.Pid
}
