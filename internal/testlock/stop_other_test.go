//go:build !unix

package testlock

import (
	"testing"
	"time"
)

func canStop() bool { return false }

func stopper() {}

func stopMe(*testing.T, time.Duration) {}
