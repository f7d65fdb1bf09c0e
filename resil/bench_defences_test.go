package resil

import (
	"math/rand/v2"
	"testing"
	"time"
)

// serialParallel runs op in a loop and under RunParallel, reporting
// allocations.
func serialParallel(b *testing.B, name string, op func(now time.Time)) {
	b.Run(name, func(b *testing.B) {
		b.ReportAllocs()
		now := t0
		for b.Loop() {
			op(now)
		}
	})
	b.Run(name+"/parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				op(t0)
			}
		})
	})
}

// BenchmarkThrottler: one attempt's two steps, Allow and Record. Healthy:
// the probability is zero and Allow takes no lock. Throttling: half the
// attempts fail, so every Allow locks, draws and decides.
func BenchmarkThrottler(b *testing.B) {
	th := mustThrottler(b, ThrottlerSettings{Rand: rand.NewPCG(1, 2)})
	serialParallel(b, "allow+record/healthy", func(now time.Time) {
		if th.Allow(now) == nil {
			th.Record(now, OutcomeSuccess)
		}
	})
	th = mustThrottler(b, ThrottlerSettings{K: 1.1, Rand: rand.NewPCG(1, 2)})
	i := 0
	b.Run("allow+record/throttling", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			i++
			if th.Allow(t0) == nil {
				o := OutcomeSuccess
				if i%2 == 0 {
					o = OutcomeFailure
				}
				th.Record(t0, o)
			}
		}
		b.ReportMetric(th.Probability(t0), "p")
	})
}
