package resil

import (
	"math/rand/v2"
	"testing"
	"time"
)

// The benchmarks come in pairs: serial, and RunParallel (contended). Run
// them at -cpu 1,2 with -benchmem; BENCHMARKS.md records the figures.

func BenchmarkBreaker(b *testing.B) {
	for _, c := range []struct {
		name string
		s    BreakerSettings
	}{
		{"consecutive", BreakerSettings{Threshold: 5}},
		{"count_window", BreakerSettings{Rule: CountWindow, WindowSize: 100, FailureRate: 0.5}},
		{"time_window", BreakerSettings{Rule: TimeWindow, WindowPeriod: 10 * time.Second, FailureRate: 0.5}},
	} {
		br := mustBreaker(b, c.s)
		b.Run("allow+record/"+c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				p, err := br.Allow(t0)
				if err != nil {
					b.Fatal(err)
				}
				br.Record(t0, p, OutcomeSuccess, time.Millisecond)
			}
		})
		b.Run("allow+record/"+c.name+"/parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					p, err := br.Allow(t0)
					if err != nil {
						b.Fatal(err)
					}
					br.Record(t0, p, OutcomeSuccess, time.Millisecond)
				}
			})
		})
	}
	// A streak of failures below the threshold: the locked path.
	br := mustBreaker(b, BreakerSettings{Threshold: 1_000_000})
	b.Run("allow+record/consecutive-failure", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			p, _ := br.Allow(t0)
			br.Record(t0, p, OutcomeFailure, 0)
		}
	})
}

func BenchmarkBackoff(b *testing.B) {
	for _, j := range []Jitter{NoJitter, FullJitter, EqualJitter, DecorrelatedJitter, FactorJitter} {
		bo := Backoff{Schedule: Exponential, Base: 10 * time.Millisecond, Cap: 10 * time.Second, Jitter: j}
		if j == FactorJitter {
			bo.Factor = 0.2
		}
		b.Run("delay/"+j.String(), func(b *testing.B) {
			b.ReportAllocs()
			src := rand.NewPCG(1, 2)
			var prev time.Duration
			i := 0
			for b.Loop() {
				i++
				prev = bo.Delay(i%12+1, prev, src)
			}
		})
		b.Run("delay/"+j.String()+"/parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				src := rand.NewPCG(1, 2) // one source per goroutine: a Source is not shared
				var prev time.Duration
				i := 0
				for pb.Next() {
					i++
					prev = bo.Delay(i%12+1, prev, src)
				}
			})
		})
	}
}
