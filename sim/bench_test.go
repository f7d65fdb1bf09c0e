package sim

import (
	"context"
	"os"
	"runtime"
	"testing"

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
// simulated attempts per second of wall time.
func benchRun(b *testing.B, sc *scenario.Scenario) {
	b.ReportAllocs()
	var attempts int64
	for b.Loop() {
		r, err := Run(context.Background(), sc)
		if err != nil {
			b.Fatal(err)
		}
		for _, f := range r.Fleets {
			attempts += f.Summary.Attempts
		}
	}
	b.ReportMetric(float64(attempts)/b.Elapsed().Seconds(), "attempts/s")
	b.ReportMetric(0, "ns/op") // a run's wall time says little; attempts/s does
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

// BenchmarkHour is a one-hour virtual run at 10,000 intents/s: memory
// must stay flat in run length. It reports the heap in use at the end and
// the peak heap seen by the runtime. Skipped unless SIM_HOUR=1, since one
// iteration simulates 36 million intents.
func BenchmarkHour(b *testing.B) {
	if os.Getenv("SIM_HOUR") == "" {
		b.Skip("set SIM_HOUR=1 to run the one-hour, 10,000 intents/s benchmark")
	}
	sc := loadScenario(b, "testdata/storm.yaml")
	sc.Duration = 3600e9
	sc.Traffic.Rate = 10000
	sc.Origin.Capacity = 12000
	sc.Origin.Workers = 1200
	sc.Triggers[0].Capacity = 8000
	sc.Fleets = sc.Fleets[1:]
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	benchRun(b, sc)
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(after.HeapInuse)/(1<<20), "heap-MiB")
	b.ReportMetric(float64(after.Sys)/(1<<20), "sys-MiB")
}
