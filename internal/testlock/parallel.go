package testlock

import (
	"flag"
	"fmt"
	"runtime"
	"strconv"
)

// Parallel lets n of a package's parallel tests run at once, where go
// test's default (-parallel, GOMAXPROCS) would run fewer: for real-time
// tests that wait on their ticks most of the time, so that n of them
// still leave most of the machine idle. A -test.parallel on the command
// line wins. Call it from TestMain after flag.Parse and before m.Run.
func Parallel(n int) {
	if !flag.Parsed() {
		panic("testlock.Parallel before flag.Parse")
	}
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if set || n <= runtime.GOMAXPROCS(0) {
		return
	}
	if err := flag.Set("test.parallel", strconv.Itoa(n)); err != nil {
		panic(fmt.Sprintf("testlock.Parallel: %v", err)) // testing defines the flag before TestMain runs
	}
}
