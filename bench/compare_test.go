package bench

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/circuitbreaker"
	"github.com/failsafe-go/failsafe-go/retrypolicy"
	"github.com/sony/gobreaker/v2"

	"github.com/retrystorm/retrystorm/resil"
)

// Every breaker trips after 5 consecutive failures and is fed successes
// only, so each op is the closed-state success path: admit, run, record.

func newOurs(b *testing.B) *resil.Breaker {
	br, err := resil.NewBreaker(resil.BreakerSettings{Threshold: 5, Cooldown: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	return br
}

func gobreakerSettings() gobreaker.Settings {
	return gobreaker.Settings{Name: "bench", Timeout: time.Minute,
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= 5 }}
}

func failsafeBreaker() circuitbreaker.CircuitBreaker[any] {
	return circuitbreaker.NewBuilder[any]().WithFailureThreshold(5).WithDelay(time.Minute).Build()
}

// serialAndParallel runs op in a plain loop and under RunParallel.
func serialAndParallel(b *testing.B, name string, op func()) {
	b.Run(name, func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			op()
		}
	})
	b.Run(name+"/parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				op()
			}
		})
	})
}

// BenchmarkBreakerAllowRecord: the two-step API middleware uses. gobreaker
// and failsafe-go read the clock inside; resil takes the time as an
// argument, so it is measured three ways: given time.Now as its clock
// (AllowFunc and RecordFunc: the like-for-like figure, clock included, read
// only when the decision needs it), reading time.Now for each step before
// the call (a naive middleware), and with a time the caller already has
// (how the Guard and the simulator drive it).
func BenchmarkBreakerAllowRecord(b *testing.B) {
	lazy := newOurs(b)
	serialAndParallel(b, "resil/clock", func() {
		p, err := lazy.AllowFunc(time.Now)
		if err != nil {
			b.Fatal(err)
		}
		lazy.RecordFunc(time.Now, p, resil.OutcomeSuccess, 0)
	})
	ours := newOurs(b)
	serialAndParallel(b, "resil/time.Now", func() {
		p, err := ours.Allow(time.Now())
		if err != nil {
			b.Fatal(err)
		}
		ours.Record(time.Now(), p, resil.OutcomeSuccess, 0)
	})
	now := time.Now()
	ours2 := newOurs(b)
	serialAndParallel(b, "resil/given-time", func() {
		p, err := ours2.Allow(now)
		if err != nil {
			b.Fatal(err)
		}
		ours2.Record(now, p, resil.OutcomeSuccess, 0)
	})
	gb := gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreakerSettings())
	serialAndParallel(b, "gobreaker", func() {
		done, err := gb.Allow()
		if err != nil {
			b.Fatal(err)
		}
		done(nil)
	})
	fs := failsafeBreaker()
	serialAndParallel(b, "failsafe-go", func() {
		if !fs.TryAcquirePermit() {
			b.Fatal("refused")
		}
		fs.RecordSuccess()
	})
}

var ok = func(context.Context) error { return nil }

// BenchmarkGuardedCall: a successful call through a circuit breaker, with
// each library's one-call API.
func BenchmarkGuardedCall(b *testing.B) {
	ctx := context.Background()
	g, err := resil.NewGuard(resil.GuardSettings{Policy: resil.Policy{Breaker: newOurs(b)}})
	if err != nil {
		b.Fatal(err)
	}
	serialAndParallel(b, "resil", func() {
		if err := g.Do(ctx, ok); err != nil {
			b.Fatal(err)
		}
	})
	gb := gobreaker.NewCircuitBreaker[struct{}](gobreakerSettings())
	serialAndParallel(b, "gobreaker", func() {
		if _, err := gb.Execute(func() (struct{}, error) { return struct{}{}, nil }); err != nil {
			b.Fatal(err)
		}
	})
	fs := failsafe.With[any](failsafeBreaker())
	serialAndParallel(b, "failsafe-go", func() {
		if err := fs.Run(func() error { return nil }); err != nil {
			b.Fatal(err)
		}
	})
}

var errOnce = errors.New("transient")

// BenchmarkRetry: retry policies (3 retries, no delay) around a breaker.
// "success" never retries; "fail-once" fails the first attempt and
// succeeds on the retry. gobreaker has no retry policy.
func BenchmarkRetry(b *testing.B) {
	ctx := context.Background()
	g, err := resil.NewGuard(resil.GuardSettings{Idempotency: resil.Idempotent, Policy: resil.Policy{MaxRetries: 3, Breaker: newOurs(b)}})
	if err != nil {
		b.Fatal(err)
	}
	fs := failsafe.With[any](retrypolicy.NewBuilder[any]().WithMaxRetries(3).Build(), failsafeBreaker())
	serialAndParallel(b, "success/resil", func() {
		if err := g.Do(ctx, ok); err != nil {
			b.Fatal(err)
		}
	})
	serialAndParallel(b, "success/failsafe-go", func() {
		if err := fs.Run(func() error { return nil }); err != nil {
			b.Fatal(err)
		}
	})
	serialAndParallel(b, "fail-once/resil", func() {
		n := 0
		if err := g.Do(ctx, func(context.Context) error {
			if n++; n == 1 {
				return errOnce
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	})
	serialAndParallel(b, "fail-once/failsafe-go", func() {
		n := 0
		if err := fs.Run(func() error {
			if n++; n == 1 {
				return errOnce
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	})
}
