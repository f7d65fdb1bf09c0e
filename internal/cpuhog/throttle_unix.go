//go:build unix

package cpuhog

import (
	"os"
	"os/signal"
	"syscall"
	"time"
)

// throttle stops process pid for stop out of every period until deadline,
// as a container's CPU quota (cgroup cpu.max) throttles it: busy loops
// alone leave a quiet machine's scheduler enough slack that the lab's
// timers stay within their bounds, so the lab would measure, not starve.
// It always lets pid go on before it returns, and on SIGTERM or SIGINT.
func throttle(pid int, stop, period time.Duration, deadline time.Time) {
	quit := make(chan os.Signal, 1)
	signal.Notify(quit, syscall.SIGTERM, syscall.SIGINT)
	defer syscall.Kill(pid, syscall.SIGCONT)
	for time.Now().Before(deadline) {
		if syscall.Kill(pid, syscall.SIGSTOP) != nil {
			return // the test is gone
		}
		select {
		case <-quit:
			return
		case <-time.After(stop):
		}
		syscall.Kill(pid, syscall.SIGCONT)
		select {
		case <-quit:
			return
		case <-time.After(period - stop):
		}
	}
}

const canThrottle = true

// end asks the hog p to end: it lets the throttled process go on first.
func end(p *os.Process) { _ = p.Signal(syscall.SIGTERM) }
