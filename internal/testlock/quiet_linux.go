package testlock

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// othersBusy samples, over d, the share of the machine's cores that
// processes other than this one kept busy: the busy time /proc/stat
// counts for every core (steal included: a virtual machine's host gave
// the time to others), less this process's own CPU time.
func othersBusy(d time.Duration) (float64, bool) {
	b0, ok0 := busyTicks()
	own0, ok1 := ownCPU()
	t0 := time.Now()
	time.Sleep(d)
	b1, ok2 := busyTicks()
	own1, ok3 := ownCPU()
	wall := time.Since(t0)
	if !(ok0 && ok1 && ok2 && ok3) || b1 < b0 || wall <= 0 {
		return 0, false
	}
	const userHZ = 100 // /proc/stat's unit, USER_HZ, on every Linux ABI
	cores := float64(runtime.NumCPU())
	busy := float64(b1-b0) / userHZ / (wall.Seconds() * cores)
	own := (own1 - own0).Seconds() / (wall.Seconds() * cores)
	return max(0, busy-own), true
}

// busyTicks is the CPU time of every core that was not idle or waiting
// for I/O, from /proc/stat's first line, in USER_HZ ticks.
func busyTicks() (uint64, bool) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, false
	}
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, false
	}
	var busy uint64
	// user nice system idle iowait irq softirq steal (guest time is in
	// user's already)
	for _, i := range []int{1, 2, 3, 6, 7, 8} {
		n, err := strconv.ParseUint(f[i], 10, 64)
		if err != nil {
			return 0, false
		}
		busy += n
	}
	return busy, true
}

// ownCPU is this process's CPU time, user and system.
func ownCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
