//go:build !unix

package cpuhog

import "time"

func throttle(pid int, stop, period time.Duration, deadline time.Time) {}

const canThrottle = false
