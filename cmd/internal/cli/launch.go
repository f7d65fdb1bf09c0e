package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime/debug"
	"syscall"
)

// A Go program that runs out of memory, or panics, dies with exit status 2,
// which is also retrystorm's status for a usage error; a script could not
// tell "you typed it wrong" from "it crashed". So a retrystorm binary runs
// the command line in a child process of itself: the child exits
// childUsage for a usage error, and this process, which does nothing that
// could crash, turns that into 2 and anything the runtime does into 1,
// saying what happened.

// childEnv marks the child process.
const childEnv = "RETRYSTORM_CHILD"

// childUsage is the child's status for a usage error (EX_USAGE), which
// its parent turns into exitUsage.
const childUsage = 64

// Launch runs the command line of this process (os.Args) with the heavy
// commands h has, in a child process of this binary, and returns the exit
// status for main to exit with.
func Launch(h Heavy) int {
	args := os.Args[1:]
	if os.Getenv(childEnv) != "" {
		return runHere(args, h, childUsage)
	}
	self, err := os.Executable()
	if err != nil {
		return runHere(args, h, exitUsage)
	}
	cmd := exec.Command(self, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), childEnv+"=1")
	// The terminal's interrupt reaches the child too, and it stops cleanly;
	// signals sent to this process alone are passed on.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		signal.Stop(sigs)
		return runHere(args, h, exitUsage)
	}
	done := make(chan struct{})
	go func() {
		for {
			select {
			case s := <-sigs:
				cmd.Process.Signal(s)
			case <-done:
				return
			}
		}
	}()
	err = cmd.Wait()
	close(done)
	code, msg := childVerdict(err)
	if msg != "" {
		io.WriteString(os.Stderr, fit(msg, textWidth(os.Stderr))+"\n")
	}
	return code
}

// runHere runs the command line in this process, with usage as the status
// for a usage error.
func runHere(args []string, h Heavy, usage int) int {
	tuneGC()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return mainWith(ctx, args, os.Stdout, os.Stderr, h, usage)
}

// The collector of the process that runs the command: GOGC 400, under a
// soft limit of 4 GiB, unless GOGC or GOMEMLIMIT is set (either: then Go
// reads both as usual). A run raised past the default --max-memory whose
// live heap nears the limit collects often; GOMEMLIMIT=off lifts it. The
// simulator's heap is small and short-lived (a check of 1,000 services
// peaks near 130 MB), and at Go's default the collector took 9% of
// check --manifests' time (BENCHMARKS.md); the limit is what the default
// would reach for the largest run sim.DefaultLimits admits (2 GiB, twice).
const (
	gcPercent     = 400
	gcMemoryLimit = 4 << 30
)

func tuneGC() {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	debug.SetGCPercent(gcPercent)
	debug.SetMemoryLimit(gcMemoryLimit)
}

// childVerdict is the exit status for how the child ended, and what to
// add to what it said.
func childVerdict(err error) (int, string) {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return exitOK, ""
	case !errors.As(err, &ee):
		return exitFailed, fmt.Sprintf("retrystorm: %v", err)
	case ee.Exited():
		switch code := ee.ExitCode(); code {
		case exitOK, exitFailed, exitInconclusive:
			return code, ""
		case childUsage:
			return exitUsage, ""
		default:
			// 2 is the Go runtime's status for a fatal error (out of
			// memory) or a panic; it printed why above.
			return exitFailed, fmt.Sprintf("retrystorm: the run crashed (exit status %d): see the runtime's message above; when it says out of memory, the run needs more memory than this machine gives it", code)
		}
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		switch s := ws.Signal(); s {
		case syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP:
			return exitFailed, "retrystorm: interrupted"
		case syscall.SIGKILL:
			return exitFailed, "retrystorm: the run was killed (SIGKILL): by the kernel when the machine runs out of memory, or by someone"
		default:
			return exitFailed, fmt.Sprintf("retrystorm: the run was killed by %v", s)
		}
	}
	return exitFailed, fmt.Sprintf("retrystorm: the run ended: %v", err)
}
