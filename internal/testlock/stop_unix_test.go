//go:build unix

package testlock

// canStop: a hog can stop this process here (cpuhog's throttle).
func canStop() bool { return true }
