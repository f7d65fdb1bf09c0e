package resil

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"
)

// The benchmarks come in pairs: serial, and RunParallel (contended). Run
// them at -cpu 1,2 with -benchmem; BENCHMARKS.md records the figures.

func BenchmarkTokenBucket(b *testing.B) {
	for _, funding := range []Funding{FundedBySuccess, FundedByRequest} {
		tb := mustTB(b, TokenBucketSettings{Ratio: 0.5, Funding: funding, MinTokens: 50})
		// One withdraw and two deposits per op: the balance stays put.
		op := func(now time.Time) {
			if _, ok := tb.Withdraw(now, OutcomeFailure); !ok {
				b.Fatal("refused")
			}
			tb.Begin(now)
			tb.Record(now, OutcomeSuccess, 0)
			tb.Begin(now)
			tb.Record(now, OutcomeSuccess, 0)
		}
		b.Run("withdraw+deposit/"+funding.String(), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				op(t0)
			}
		})
		b.Run("withdraw+deposit/"+funding.String()+"/parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					op(t0)
				}
			})
		})
	}
	tb := mustTB(b, TokenBucketSettings{Ratio: 0.5, Funding: FundedBySuccess, MinTokens: 100})
	b.Run("deposit-at-max", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			tb.Record(t0, OutcomeSuccess, 0)
		}
	})
}

func BenchmarkWindowBudget(b *testing.B) {
	w, _ := NewWindowBudget(WindowBudgetSettings{Ratio: 0.5, Funding: FundedByRequest, MinRetriesPerSecond: 1e6})
	b.Run("withdraw+deposit", func(b *testing.B) {
		b.ReportAllocs()
		now := t0
		for b.Loop() {
			now = now.Add(time.Microsecond)
			w.Begin(now)
			if _, ok := w.Withdraw(now, OutcomeFailure); ok {
				w.Refund(now, 1)
			}
		}
	})
}

// BenchmarkConcurrencyBudget is one intent's whole life under Envoy's
// rule: a first attempt sent and ended, a retry withdrawn, sent and ended.
func BenchmarkConcurrencyBudget(b *testing.B) {
	cb := mustConc(b, ConcurrencyBudgetSettings{Percent: 20, MinConcurrency: 3})
	op := func(now time.Time) {
		cb.Begin(now)
		cb.Record(now, OutcomeFailure, 0)
		c, ok := cb.Withdraw(now, OutcomeFailure)
		if !ok {
			b.Fatal("refused")
		}
		cb.Sent(now, KindRetry)
		cb.Record(now, OutcomeSuccess, c)
	}
	b.Run("intent+retry", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			op(t0)
		}
	})
	b.Run("intent+retry/parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				op(t0)
			}
		})
	})
}

// BenchmarkClientRateLimiter is one paced attempt: Acquire and the
// response's Update, on a clock that moves 1ms per attempt, throttled
// once so that the bucket applies.
func BenchmarkClientRateLimiter(b *testing.B) {
	l := mustRateLimiter(b, ClientRateLimiterSettings{})
	now := t0
	for range 1000 {
		now = now.Add(time.Millisecond)
		l.Update(now, false)
	}
	l.Update(now, true)
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(time.Millisecond)
		l.Acquire(now)
		l.Update(now, false)
	}
}

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

// benchGuard is the guard of the Do benchmarks: a full policy (budget,
// breaker, backoff) around a call that succeeds.
func benchGuard(b testing.TB, timeout time.Duration) *Guard {
	tb := mustTB(b, TokenBucketSettings{Ratio: 0.1, Funding: FundedBySuccess, MinTokens: 10})
	br := mustBreaker(b, BreakerSettings{Threshold: 5})
	return mustGuard(b, GuardSettings{Idempotency: Idempotent, AttemptTimeout: timeout, Policy: Policy{
		MaxRetries: 3, Budget: tb, Breaker: br,
		Backoff: Backoff{Schedule: Exponential, Base: time.Millisecond, Cap: time.Second, Jitter: FullJitter},
	}})
}

func BenchmarkDo(b *testing.B) {
	ok := func(context.Context) error { return nil }
	ctx := context.Background()
	for _, c := range []struct {
		name    string
		timeout time.Duration
	}{{"success", 0}, {"success-attempt-timeout", time.Second}} {
		g := benchGuard(b, c.timeout)
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := g.Do(ctx, ok); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(c.name+"/parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := g.Do(ctx, ok); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
	// A call that fails once and succeeds on an immediate retry: the
	// failure path (clock reads, budget withdrawal, StopError not built).
	g := mustGuard(b, GuardSettings{Idempotency: Idempotent, Policy: Policy{MaxRetries: 1,
		Budget: mustTB(b, TokenBucketSettings{Ratio: 1, Funding: FundedByRequest, MinTokens: 10})}})
	b.Run("retry-once", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			n := 0
			if err := g.Do(ctx, func(context.Context) error {
				n++
				if n == 1 {
					return errBoom
				}
				return nil
			}); err != nil {
				b.Fatal(err)
			}
		}
	})
	// Call with a value and the attempt, the generic path.
	g = benchGuard(b, 0)
	b.Run("call-success", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Call(ctx, g, func(ctx context.Context, a Attempt) (int, error) { return a.Number, nil }); err != nil {
				b.Fatal(err)
			}
		}
	})
}
