package resil_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/retrystorm/retrystorm/resil"
	"github.com/retrystorm/retrystorm/resil/budget"
)

// A breaker that opens after three failures in a row, cools down for five
// seconds, then lets one trial call through. The time is an argument.
func ExampleBreaker() {
	b, err := resil.NewBreaker(resil.BreakerSettings{
		Threshold: 3,
		Cooldown:  5 * time.Second,
		OnStateChange: func(c resil.StateChange) {
			fmt.Printf("%s: %v -> %v\n", c.Name, c.From, c.To)
		},
		Name: "db",
	})
	if err != nil {
		panic(err)
	}
	t := time.Unix(0, 0)
	for range 3 {
		p, _ := b.Allow(t)
		b.Record(t, p, resil.OutcomeFailure, 0)
	}
	_, err = b.Allow(t.Add(time.Second))
	fmt.Println("1s later:", err)
	p, _ := b.Allow(t.Add(5 * time.Second))
	fmt.Println("probe:", p.Probe())
	b.Record(t.Add(5*time.Second), p, resil.OutcomeSuccess, 0)
	// Output:
	// db: closed -> open
	// 1s later: resil: circuit breaker open
	// db: open -> half-open
	// probe: true
	// db: half-open -> closed
}

// A hand-written middleware that has no time at hand: it gives the breaker
// the clock, which a closed breaker never reads on the success path. Here
// two failures in a row open the breaker for a minute.
func ExampleBreaker_AllowFunc() {
	b, err := resil.NewBreaker(resil.BreakerSettings{Threshold: 2, Cooldown: time.Minute})
	if err != nil {
		panic(err)
	}
	guarded := func(fn func() error) error {
		p, err := b.AllowFunc(time.Now)
		if err != nil {
			return err
		}
		err = fn()
		o := resil.OutcomeSuccess
		if err != nil {
			o = resil.OutcomeFailure
		}
		b.RecordFunc(time.Now, p, o, 0)
		return err
	}
	down := errors.New("down")
	for _, fn := range []func() error{
		func() error { return nil },
		func() error { return down },
		func() error { return down },
		func() error { return nil },
	} {
		fmt.Println(guarded(fn))
	}
	// Output:
	// <nil>
	// down
	// down
	// resil: circuit breaker open
}

// Exponential backoff capped at one second, then the same with full jitter
// (applied after the cap). The random source is injected: here a seeded
// one, so the output is stable.
func ExampleBackoff() {
	b := resil.Backoff{
		Schedule: resil.Exponential,
		Base:     100 * time.Millisecond,
		Cap:      time.Second,
	}
	var plain, jittered []time.Duration
	src := rand.NewPCG(1, 2)
	for retry := 1; retry <= 5; retry++ {
		plain = append(plain, b.Delay(retry, 0, nil))
		j := b
		j.Jitter = resil.FullJitter
		jittered = append(jittered, j.Delay(retry, 0, src).Round(time.Millisecond))
	}
	fmt.Println(plain)
	fmt.Println(jittered)
	// Output:
	// [100ms 200ms 400ms 800ms 1s]
	// [68ms 92ms 203ms 344ms 798ms]
}

var errUnavailable = errors.New("unavailable")

// Do retries a flaky idempotent call under a budget; when it gives up, the
// error says why and what the last attempt returned.
func ExampleGuard_Do() {
	budget, _ := budget.NewTokenBucket(budget.TokenBucketSettings{
		Ratio: 0.1, Funding: budget.FundedByRequest, MinTokens: 1,
	})
	g, err := resil.NewGuard(resil.GuardSettings{
		Idempotency: resil.Idempotent,
		Policy: resil.Policy{
			MaxRetries: 3,
			Budget:     budget,
			Backoff:    resil.Backoff{Schedule: resil.Exponential, Base: time.Millisecond, Cap: 10 * time.Millisecond},
		},
	})
	if err != nil {
		panic(err)
	}
	calls := 0
	err = g.Do(context.Background(), func(ctx context.Context) error {
		calls++
		return errUnavailable
	})
	fmt.Println(calls, "calls")
	fmt.Println(errors.Is(err, resil.ErrBudgetExhausted), errors.Is(err, errUnavailable))
	fmt.Println(err)
	s := g.Stats()
	fmt.Printf("intents %d, attempts %d, retries/requests %.1f\n", s.Intents, s.Attempts, s.RetriesPerRequest)
	// Output:
	// 2 calls
	// true true
	// resil: retry budget exhausted: last attempt: unavailable
	// intents 1, attempts 2, retries/requests 1.0
}

// Call passes the attempt to the function, so that a non-idempotent call
// can carry the same idempotency key on every attempt.
func ExampleCallWith() {
	g, err := resil.NewGuard(resil.GuardSettings{
		Idempotency: resil.NotIdempotent, // retried only with a key
		Policy:      resil.Policy{MaxRetries: 2},
		NewKey:      func() string { return "key-42" },
	})
	if err != nil {
		panic(err)
	}
	v, err := resil.CallWith(context.Background(), g, resil.CallOptions[string]{NewKey: true},
		func(ctx context.Context, a resil.Attempt) (string, error) {
			fmt.Println("attempt", a.Number, a.Kind, a.Key)
			if a.Number < 2 {
				return "", errUnavailable
			}
			return "charged once", nil
		})
	fmt.Println(v, err)
	// Output:
	// attempt 1 first key-42
	// attempt 2 retry key-42
	// charged once <nil>
}
