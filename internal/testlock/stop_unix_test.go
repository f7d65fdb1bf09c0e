//go:build unix

package testlock

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// canStop: a process can stop this one here (SIGSTOP).
func canStop() bool { return true }

// stopperEnv, set to "pid ms" in a child of this test binary, makes the
// child stop process pid for ms milliseconds and exit (stopper).
const stopperEnv = "TESTLOCK_STOP"

// stopper is the child's part: it always lets pid go on.
func stopper() {
	v := os.Getenv(stopperEnv)
	if v == "" {
		return
	}
	var pid, ms int
	if _, err := fmt.Sscan(v, &pid, &ms); err != nil || pid < 2 || ms < 1 || ms > 1000 {
		os.Exit(2)
	}
	defer os.Exit(0)
	defer syscall.Kill(pid, syscall.SIGCONT)
	if syscall.Kill(pid, syscall.SIGSTOP) == nil {
		time.Sleep(time.Duration(ms) * time.Millisecond)
	}
}

// stopMe has a child stop this process for d, and returns once it goes on.
func stopMe(t *testing.T, d time.Duration) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), stopperEnv+"="+strconv.Itoa(os.Getpid())+" "+strconv.Itoa(int(d.Milliseconds())))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the stopper: %v %s", err, out)
	}
}
