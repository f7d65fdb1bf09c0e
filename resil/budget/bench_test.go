package budget

import (
	"context"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/resil"
)

func BenchmarkTokenBucket(b *testing.B) {
	for _, funding := range []Funding{FundedBySuccess, FundedByRequest} {
		tb := mustTB(b, TokenBucketSettings{Ratio: 0.5, Funding: funding, MinTokens: 50})
		// One withdraw and two deposits per op: the balance stays put.
		op := func(now time.Time) {
			if _, ok := tb.Withdraw(now, resil.OutcomeFailure); !ok {
				b.Fatal("refused")
			}
			tb.Begin(now)
			tb.Record(now, resil.OutcomeSuccess, 0)
			tb.Begin(now)
			tb.Record(now, resil.OutcomeSuccess, 0)
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
			tb.Record(t0, resil.OutcomeSuccess, 0)
		}
	})
}

func BenchmarkWindowBudget(b *testing.B) {
	w, _ := NewWindow(WindowSettings{Ratio: 0.5, Funding: FundedByRequest, MinRetriesPerSecond: 1e6})
	b.Run("withdraw+deposit", func(b *testing.B) {
		b.ReportAllocs()
		now := t0
		for b.Loop() {
			now = now.Add(time.Microsecond)
			w.Begin(now)
			if _, ok := w.Withdraw(now, resil.OutcomeFailure); ok {
				w.Refund(now, 1)
			}
		}
	})
}

// BenchmarkConcurrencyBudget is one intent's whole life under Envoy's
// rule: a first attempt sent and ended, a retry withdrawn, sent and ended.
func BenchmarkConcurrencyBudget(b *testing.B) {
	cb := mustConc(b, ConcurrencySettings{Percent: 20, MinConcurrency: 3})
	op := func(now time.Time) {
		cb.Begin(now)
		cb.Record(now, resil.OutcomeFailure, 0)
		c, ok := cb.Withdraw(now, resil.OutcomeFailure)
		if !ok {
			b.Fatal("refused")
		}
		cb.Sent(now, resil.KindRetry)
		cb.Record(now, resil.OutcomeSuccess, c)
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

// benchGuard is the guard of the Do benchmarks (and of
// TestGuardSuccessAllocatesNothing): a full policy (budget, breaker,
// backoff, and th if not nil) around a call that succeeds. They live here,
// beside the token bucket, so that they measure the Guard with a real
// budget.
func benchGuard(b testing.TB, timeout time.Duration, th *resil.Throttler) *resil.Guard {
	tb := mustTB(b, TokenBucketSettings{Ratio: 0.1, Funding: FundedBySuccess, MinTokens: 10})
	br, err := resil.NewBreaker(resil.BreakerSettings{Threshold: 5})
	if err != nil {
		b.Fatal(err)
	}
	p := resil.Policy{
		MaxRetries: 3, Budget: tb, Breaker: br,
		Backoff: resil.Backoff{Schedule: resil.Exponential, Base: time.Millisecond, Cap: time.Second, Jitter: resil.FullJitter},
	}
	if th != nil {
		p.Throttle = th
	}
	return mustGuard(b, resil.GuardSettings{Idempotency: resil.Idempotent, AttemptTimeout: timeout, Policy: p})
}

func BenchmarkDo(b *testing.B) {
	ok := func(context.Context) error { return nil }
	ctx := context.Background()
	for _, c := range []struct {
		name    string
		timeout time.Duration
	}{{"success", 0}, {"success-attempt-timeout", time.Second}} {
		g := benchGuard(b, c.timeout, nil)
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
	g := mustGuard(b, resil.GuardSettings{Idempotency: resil.Idempotent, Policy: resil.Policy{MaxRetries: 1,
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
	g = benchGuard(b, 0, nil)
	b.Run("call-success", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := resil.Call(ctx, g, func(ctx context.Context, a resil.Attempt) (int, error) { return a.Number, nil }); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkDoThrottled: a successful guarded call with a throttler beside
// the budget and the breaker (compare with BenchmarkDo/success): the
// throttler needs the time, so the Guard reads the clock at both ends.
func BenchmarkDoThrottled(b *testing.B) {
	th, err := resil.NewThrottler(resil.ThrottlerSettings{})
	if err != nil {
		b.Fatal(err)
	}
	g := benchGuard(b, 0, th)
	ok := func(context.Context) error { return nil }
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := g.Do(ctx, ok); err != nil {
			b.Fatal(err)
		}
	}
}
