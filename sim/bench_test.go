package sim

import (
	"context"
	"os"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/scenario"
)

func loadScenario(tb testing.TB, path string) *scenario.Scenario {
	tb.Helper()
	sc, err := scenario.Load(path)
	if err != nil {
		tb.Fatal(err)
	}
	return sc
}

// benchRun runs sc b.N times on one goroutine per fleet and reports
// simulated attempts per second of wall time, and the process's CPU time
// per attempt (user and system, GC included): on a machine shared with
// other work, CPU time moves much less than wall time, which counts the
// time others ran.
func benchRun(b *testing.B, sc *scenario.Scenario) { benchRunWith(b, sc, Options{}) }

// benchRunWith is benchRun with RunWith's options.
func benchRunWith(b *testing.B, sc *scenario.Scenario, opts Options) {
	b.ReportAllocs()
	var attempts int64
	cpu := cpuTime()
	for b.Loop() {
		r, err := RunWith(context.Background(), sc, opts)
		if err != nil {
			b.Fatal(err)
		}
		for _, f := range r.Fleets {
			attempts += f.Summary.Attempts
			for _, t := range f.Tiers[min(1, len(f.Tiers)):] {
				attempts += t.Summary.Attempts // a chain's hops past the fleet's
			}
		}
	}
	b.ReportMetric(float64(attempts)/b.Elapsed().Seconds(), "attempts/s")
	b.ReportMetric(float64(cpuTime()-cpu)/float64(attempts), "cpu-ns/attempt")
	b.ReportMetric(0, "ns/op") // a run's wall time says little; attempts/s does
}

// cpuTime is the process's user and system CPU time, in nanoseconds.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// BenchmarkStorm is the storm scenario, naive and guarded. Run it with
// -cpu 1 for the one-core figure: the fleets then share one core.
func BenchmarkStorm(b *testing.B) { benchRun(b, loadScenario(b, "testdata/storm.yaml")) }

// BenchmarkStormFleet runs each fleet of the storm on its own, the unit the
// simulator parallelises over.
func BenchmarkStormFleet(b *testing.B) {
	sc := loadScenario(b, "testdata/storm.yaml")
	for i := range sc.Fleets {
		one := *sc
		one.Fleets = sc.Fleets[i : i+1]
		b.Run(sc.Fleets[i].Name, func(b *testing.B) { benchRun(b, &one) })
	}
}

// BenchmarkChain is a chain of three tiers (every server model, retries,
// a budget, a breaker and deadline propagation) through a capacity dip: its
// attempts are every hop's, the fleet's and each tier's.
func BenchmarkChain(b *testing.B) { benchRun(b, loadScenario(b, "../scenario/testdata/tiers.yaml")) }

// BenchmarkStackIstio10 is one collapsed cell of issue 40's check
// --stack: two Istio layers of attempts: 10, a burst of rejections at 70%
// load; 363 attempts per intent at the origin at most, 70 over the fault.
func BenchmarkStackIstio10(b *testing.B) {
	benchRun(b, loadScenario(b, "testdata/istio10-stack.yaml"))
}

// BenchmarkConcurrency is the concurrency model in deep collapse (latency
// that grows with the requests in flight), naive and guarded.
func BenchmarkConcurrency(b *testing.B) { benchRun(b, loadScenario(b, "testdata/concurrency.yaml")) }

// BenchmarkCollapsed is the storm's naive fleet for an hour of virtual
// time: its queue origin never recovers, and about a million requests wait
// in the queue at the end, nearly all of them for clients that gave up
// long ago. It reports, beside attempts/s, the memory per waiting request:
// the process's peak resident memory (getrusage's maxrss, so run it alone,
// with -benchtime 1x) and the heap obtained from the system (MemStats.Sys),
// each divided by the requests waiting at the end.
//
//	go test -run '^$' -bench Collapsed -benchtime 1x -cpu 1 ./sim
func BenchmarkCollapsed(b *testing.B) {
	sc := loadScenario(b, "testdata/storm.yaml")
	sc.Duration = time.Hour
	sc.Fleets = sc.Fleets[:1]
	b.ReportAllocs()
	var attempts, waiting int64
	for b.Loop() {
		r, err := Run(context.Background(), sc)
		if err != nil {
			b.Fatal(err)
		}
		f := r.Fleets[0]
		attempts += f.Summary.Attempts
		waiting = f.Series.Queue[len(f.Series.Queue)-1]
	}
	b.ReportMetric(float64(attempts)/b.Elapsed().Seconds(), "attempts/s")
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(float64(waiting), "waiting")
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil && waiting > 0 {
		b.ReportMetric(float64(ru.Maxrss)*1024/float64(waiting), "maxrss-B/waiting")
	}
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	if waiting > 0 {
		b.ReportMetric(float64(m.Sys)/float64(waiting), "sys-B/waiting")
	}
}

// BenchmarkLong is a long virtual run at 10,000 intents/s, to show that
// memory stays flat in run length: run it with SIM_MINUTES=6 and with
// SIM_MINUTES=60 under /usr/bin/time -v and compare the peak resident
// memory. It reports the heap in use at the end. Skipped without
// SIM_MINUTES, since an hour simulates 36 million intents.
func BenchmarkLong(b *testing.B) {
	minutes, err := strconv.Atoi(os.Getenv("SIM_MINUTES"))
	if err != nil || minutes <= 0 {
		b.Skip("set SIM_MINUTES (e.g. 60) to run the long, 10,000 intents/s benchmark")
	}
	sc := loadScenario(b, "testdata/storm.yaml")
	sc.Duration = time.Duration(minutes) * time.Minute
	sc.Traffic.Rate = 10000
	sc.Origin.Capacity = 12000
	sc.Origin.Workers = 1200
	sc.Triggers[0].Capacity = 8000
	sc.Fleets = sc.Fleets[1:]
	// Estimate bounds the worst case, a queue that grows for the whole
	// run (about 2 GiB for the hour); this fleet's queue does not, and the
	// benchmark measures what the run takes.
	benchRunWith(b, sc, Options{Limits: Limits{Memory: 8 << 30}})
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	b.ReportMetric(float64(m.HeapInuse)/(1<<20), "heap-MiB")
	b.ReportMetric(float64(m.Sys)/(1<<20), "sys-MiB")
}
