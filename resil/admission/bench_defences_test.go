package admission

import (
	"context"
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

// BenchmarkLimiter: Acquire and Release of one request, for each
// algorithm. The time passes in the serial runs (1ms per op), so the
// gradient closes a window every ten samples.
func BenchmarkLimiter(b *testing.B) {
	for _, s := range []LimitSettings{
		FixedLimit{Limit: 1000},
		AIMDLimit{MaxLimit: 1000},
		GradientLimit{MaxLimit: 1000, Window: time.Millisecond},
		VegasLimit{MaxLimit: 1000},
	} {
		l := mustLimiter(b, s)
		b.Run("acquire+release/"+s.Algorithm().String(), func(b *testing.B) {
			b.ReportAllocs()
			now := t0
			for b.Loop() {
				p, ok := l.Acquire(now)
				if !ok {
					b.Fatal("refused")
				}
				now = now.Add(time.Millisecond)
				l.Release(now, p, false)
			}
		})
		b.Run("acquire+release/"+s.Algorithm().String()+"/parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if p, ok := l.Acquire(t0); ok {
						l.Release(t0.Add(time.Millisecond), p, false)
					}
				}
			})
		})
	}
}

// BenchmarkWaitQueue: one entry through the queue, in and out.
func BenchmarkWaitQueue(b *testing.B) {
	q, _ := NewWaitQueue[int](QueueSettings{MaxLen: 64, Discipline: AdaptiveLIFO, MaxWait: time.Second})
	b.ReportAllocs()
	for b.Loop() {
		q.Push(t0, 1)
		q.Push(t0, 2)
		q.Next(t0)
		q.Next(t0)
	}
}

// BenchmarkShedder: a request admitted without waiting and ended, as a
// transport drives it: with no limit, a fixed limit, a deadline to check,
// and an adaptive limit with a learned estimate (these read the clock).
func BenchmarkShedder(b *testing.B) {
	ctx := context.Background()
	fixed := func() *Limiter { return mustLimiter(b, FixedLimit{Limit: 1000}) }
	for _, c := range []struct {
		name     string
		s        ShedderSettings
		deadline bool
	}{
		{"no-limit", ShedderSettings{}, false},
		{"fixed", ShedderSettings{Limiter: fixed()}, false},
		{"fixed+deadline", ShedderSettings{Limiter: fixed(), Deadline: DeadlineSettings{ServiceTime: time.Millisecond}}, true},
		{"gradient+learn+deadline", ShedderSettings{
			Limiter:  mustLimiter(b, GradientLimit{MaxLimit: 1000}),
			Deadline: DeadlineSettings{Learn: true}}, true},
	} {
		sh := mustShedder(b, c.s)
		var deadline time.Time
		if c.deadline {
			deadline = time.Now().Add(time.Hour)
		}
		op := func(time.Time) {
			t, err := sh.Admit(ctx, deadline)
			if err != nil {
				b.Fatal(err)
			}
			sh.Done(t, false)
		}
		serialParallel(b, "admit+done/"+c.name, op)
	}
	sh := mustShedder(b, ShedderSettings{Limiter: mustLimiter(b, FixedLimit{Limit: 1})})
	hold, _ := sh.Admit(ctx, time.Time{})
	b.Run("refuse/limit", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := sh.Admit(ctx, time.Time{}); err == nil {
				b.Fatal("admitted")
			}
		}
	})
	sh.Done(hold, false)
}
