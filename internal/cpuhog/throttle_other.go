//go:build !unix

package cpuhog

import (
	"os"
	"time"
)

func throttle(pid int, stop, period time.Duration, deadline time.Time) {}

const canThrottle = false

// end ends the hog p: it throttles nothing here, so it may be killed.
func end(p *os.Process) { _ = p.Kill() }
