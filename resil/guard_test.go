package resil

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

var errBoom = errors.New("boom")

func mustGuard(t testing.TB, s GuardSettings) *Guard {
	t.Helper()
	g, err := NewGuard(s)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// failing returns fn that fails n times with err, then succeeds.
func failing(n int, err error) (fn func(context.Context) error, calls *atomic.Int32) {
	calls = new(atomic.Int32)
	return func(context.Context) error {
		if int(calls.Add(1)) <= n {
			return err
		}
		return nil
	}, calls
}

func TestGuardSuccess(t *testing.T) {
	g := mustGuard(t, GuardSettings{})
	if err := g.Do(context.Background(), func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	s := g.Stats()
	if s.Intents != 1 || s.Attempts != 1 || s.Retries != 0 || s.Failures != 0 || s.HasBudgetTokens {
		t.Fatalf("stats = %+v", s)
	}
}

func TestGuardRetriesWithBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tb := newBucket(bucketSpec{ratio: 0.5, min: 5})
		g := mustGuard(t, GuardSettings{Idempotency: Idempotent, Policy: Policy{
			MaxRetries: 3, Budget: tb,
			Backoff: Backoff{Schedule: Exponential, Base: 100 * ms, Cap: time.Second},
		}})
		fn, calls := failing(2, errBoom)
		start := time.Now()
		if err := g.Do(context.Background(), fn); err != nil {
			t.Fatal(err)
		}
		if waited := time.Since(start); waited != 300*ms {
			t.Fatalf("waited %v, want 100ms + 200ms", waited)
		}
		s := g.Stats()
		if calls.Load() != 3 || s.Attempts != 3 || s.Retries != 2 || s.RetriesPerRequest != 2 || !s.HasBudgetTokens || s.BudgetTokens != 3.5 {
			t.Fatalf("calls %d, stats %+v", calls.Load(), s)
		}
	})
}

func TestGuardStopReasons(t *testing.T) {
	{
		idem := func(p Policy) GuardSettings { return GuardSettings{Idempotency: Idempotent, Policy: p} }
		for _, c := range []struct {
			name   string
			s      GuardSettings
			err    error // what fn returns
			ctx    func() (context.Context, context.CancelFunc)
			reason error
			calls  int32
		}{
			{"retries exhausted", idem(Policy{MaxRetries: 2}), errBoom, nil, ErrRetriesExhausted, 3},
			{"budget", idem(Policy{MaxRetries: 5, Budget: newBucket(bucketSpec{ratio: 0.1, min: 1})}),
				errBoom, nil, ErrBudgetExhausted, 2},
			{"not idempotent", GuardSettings{Idempotency: NotIdempotent, Policy: Policy{MaxRetries: 5}}, errBoom, nil, ErrNotIdempotent, 1},
			{"not retryable", idem(Policy{MaxRetries: 5}), Permanent(errBoom), nil, ErrNotRetryable, 1},
			{"pushback", idem(Policy{MaxRetries: 5}), RetryAfter(errBoom, -1), nil, ErrPushback, 1},
			{"breaker", idem(Policy{MaxRetries: 5, Breaker: mustBreaker(t, BreakerSettings{Threshold: 2})}), errBoom, nil, ErrBreakerOpen, 2},
			{"no time left", GuardSettings{Idempotency: Idempotent, MinAttempt: 100 * ms, Policy: Policy{MaxRetries: 5, Backoff: Backoff{Schedule: Fixed, Base: 100 * ms}}},
				errBoom, func() (context.Context, context.CancelFunc) { return context.WithTimeout(context.Background(), 350*ms) },
				ErrNoTimeLeft, 3}, // at 0, 100ms, 200ms; a retry at 300ms would start after 350ms - 100ms
		} {
			t.Run(c.name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					g := mustGuard(t, c.s)
					calls := int32(0)
					ctx := context.Background()
					if c.ctx != nil {
						var cancel context.CancelFunc
						ctx, cancel = c.ctx()
						defer cancel()
					}
					err := g.Do(ctx, func(context.Context) error { calls++; return c.err })
					if !errors.Is(err, c.reason) || !errors.Is(err, errBoom) {
						t.Fatalf("err = %v: want it to wrap %v and the last error", err, c.reason)
					}
					var se *StopError
					if !errors.As(err, &se) || se.Attempts != int(c.calls) || se.Reason != c.reason && !errors.Is(se.Reason, c.reason) {
						t.Fatalf("StopError = %+v", se)
					}
					if calls != c.calls {
						t.Fatalf("%d calls, want %d", calls, c.calls)
					}
					if !strings.Contains(err.Error(), "boom") {
						t.Fatalf("message %q lacks the last error", err)
					}
					if g.Stats().Failures != 1 {
						t.Fatalf("failures = %d", g.Stats().Failures)
					}
				})
			})
		}
	}
}

func TestGuardNeverSleepsPastDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tb := newBucket(bucketSpec{ratio: 0.1, min: 5})
		g := mustGuard(t, GuardSettings{Idempotency: Idempotent, Policy: Policy{MaxRetries: 3, Budget: tb,
			Backoff: Backoff{Schedule: Fixed, Base: 5 * time.Second}}})
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		start := time.Now()
		err := g.Do(ctx, func(context.Context) error { return errBoom })
		if !errors.Is(err, ErrNoTimeLeft) || time.Since(start) != 0 {
			t.Fatalf("err = %v after %v: a retry that cannot start in time must be refused at once", err, time.Since(start))
		}
		if tb.Tokens(time.Now()) != 5 {
			t.Fatal("the refused retry was charged")
		}
	})
}

func TestGuardAttemptTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var outcomes []Outcome
		var mu sync.Mutex
		g := mustGuard(t, GuardSettings{Idempotency: Idempotent, AttemptTimeout: time.Second,
			Policy: Policy{MaxRetries: 1, Backoff: Backoff{Schedule: Fixed, Base: 10 * ms}},
			OnEvent: func(e Event) {
				if e.Kind == EventAttempt {
					mu.Lock()
					outcomes = append(outcomes, e.Outcome)
					mu.Unlock()
				}
			}})
		start := time.Now()
		var causes []error
		err := g.Do(context.Background(), func(ctx context.Context) error {
			<-ctx.Done()
			causes = append(causes, context.Cause(ctx))
			return ctx.Err()
		})
		if !errors.Is(err, ErrRetriesExhausted) || !errors.Is(err, ErrAttemptTimeout) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v", err)
		}
		if d := time.Since(start); d != 2010*ms {
			t.Fatalf("took %v, want 2 × 1s + 10ms", d)
		}
		if len(outcomes) != 2 || outcomes[0] != OutcomeTimeout || outcomes[1] != OutcomeTimeout {
			t.Fatalf("outcomes = %v", outcomes)
		}
		if causes[0] != ErrAttemptTimeout {
			t.Fatalf("cause = %v", causes[0])
		}
	})
}

func TestGuardTimeoutCostsMore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tb := newBucket(bucketSpec{ratio: 0.1, min: 5, timeout: 3})
		g := mustGuard(t, GuardSettings{Idempotency: Idempotent, AttemptTimeout: 100 * ms, Policy: Policy{MaxRetries: 1, Budget: tb}})
		g.Do(context.Background(), func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() })
		if got := tb.Tokens(time.Now()); got != 2 {
			t.Fatalf("tokens = %v: a retry after a timeout must cost TimeoutCost", got)
		}
	})
}

func TestGuardCallerCancelIsIgnored(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		br := mustBreaker(t, BreakerSettings{Threshold: 1})
		g := mustGuard(t, GuardSettings{Idempotency: Idempotent, Policy: Policy{MaxRetries: 3, Breaker: br}})
		ctx, cancel := context.WithCancel(context.Background())
		err := g.Do(ctx, func(ctx context.Context) error {
			cancel()
			return ctx.Err()
		})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v", err)
		}
		if br.State(time.Now()) != StateClosed {
			t.Fatal("a cancelled caller counted as a failure")
		}
		if err := g.Do(ctx, func(context.Context) error { t.Fatal("called"); return nil }); err != context.Canceled {
			t.Fatalf("a done context: %v", err)
		}
		if s := g.Stats(); s.Intents != 1 || s.Retries != 0 {
			t.Fatalf("stats = %+v", s)
		}
	})
}

func TestGuardCallerDeadlineIsTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		br := mustBreaker(t, BreakerSettings{Threshold: 1})
		g := mustGuard(t, GuardSettings{Idempotency: Idempotent, Policy: Policy{MaxRetries: 3, Breaker: br}})
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		err := g.Do(ctx, func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() })
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v", err)
		}
		if br.State(time.Now()) != StateOpen {
			t.Fatal("a dependency too slow for the caller's deadline is a timeout for the breaker")
		}
	})
}

func TestGuardCancelDuringBackoffRefunds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tb := newBucket(bucketSpec{ratio: 0.1, min: 5})
		g := mustGuard(t, GuardSettings{Idempotency: Idempotent, Policy: Policy{MaxRetries: 3, Budget: tb,
			Backoff: Backoff{Schedule: Fixed, Base: time.Hour}}})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- g.Do(ctx, func(context.Context) error { return errBoom }) }()
		synctest.Wait() // Do is asleep in its backoff, the retry paid for
		if got := tb.Tokens(time.Now()); got != 4 {
			t.Fatalf("tokens during backoff = %v, want 4", got)
		}
		cancel()
		err := <-done
		if !errors.Is(err, context.Canceled) || !errors.Is(err, errBoom) {
			t.Fatalf("err = %v", err)
		}
		if got := tb.Tokens(time.Now()); got != 5 {
			t.Fatalf("tokens = %v: an abandoned retry must be refunded", got)
		}
	})
}

func TestGuardPushback(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tb := newBucket(bucketSpec{ratio: 0.1, min: 5, byRequest: true})
		g := mustGuard(t, GuardSettings{Idempotency: Idempotent, Policy: Policy{MaxRetries: 3, Budget: tb, MaxPushback: 2 * time.Second,
			Backoff: Backoff{Schedule: Fixed, Base: 10 * ms}}})
		fn, _ := failing(2, RetryAfter(errBoom, time.Minute))
		start := time.Now()
		if err := g.Do(context.Background(), fn); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d != 4*time.Second {
			t.Fatalf("waited %v, want 2 × the 2s clamp", d)
		}
		if got := tb.Tokens(time.Now()); !near(got, 3.1) {
			t.Fatalf("tokens = %v: pushed-back retries must still be paid", got)
		}
		if d, ok := PushbackOf(fmt.Errorf("wrapped: %w", RetryAfter(errBoom, time.Second))); !ok || d != time.Second {
			t.Fatal("PushbackOf does not see through wrapping")
		}
		if RetryAfter(nil, 1) != nil || Permanent(nil) != nil {
			t.Fatal("wrapping nil")
		}
	})
}

func TestGuardFallback(t *testing.T) {
	br := mustBreaker(t, BreakerSettings{Threshold: 1, Cooldown: time.Hour})
	var got error
	g := mustGuard(t, GuardSettings{Policy: Policy{Breaker: br}, Fallback: func(ctx context.Context, err error) error {
		got = err
		return nil
	}})
	g.Do(context.Background(), func(context.Context) error { return errBoom })
	if err := g.Do(context.Background(), func(context.Context) error { t.Fatal("called through an open breaker"); return nil }); err != nil {
		t.Fatalf("fallback answered %v", err)
	}
	if !errors.Is(got, ErrBreakerOpen) {
		t.Fatalf("fallback got %v", got)
	}
	v, err := CallWith(context.Background(), g, CallOptions[string]{Fallback: func(ctx context.Context, err error) (string, error) {
		return "cached", nil
	}}, func(context.Context, Attempt) (string, error) { return "live", nil })
	if v != "cached" || err != nil {
		t.Fatalf("per-call fallback: %q %v", v, err)
	}
	s := g.Stats()
	if s.Fallbacks != 2 || s.BreakerRefusals != 2 || s.Attempts != 1 || s.Intents != 3 || s.BreakerState != StateOpen || s.Failures != 1 {
		t.Fatalf("stats = %+v", s)
	}
	// Without a fallback the refusal is the error.
	g2 := mustGuard(t, GuardSettings{Policy: Policy{Breaker: br}})
	if err := g2.Do(context.Background(), func(context.Context) error { return nil }); err != ErrBreakerOpen {
		t.Fatalf("err = %v", err)
	}
}

func TestGuardFallbackOnRefusedRetry(t *testing.T) {
	br := mustBreaker(t, BreakerSettings{Threshold: 1, Cooldown: time.Hour})
	g := mustGuard(t, GuardSettings{Idempotency: Idempotent, Policy: Policy{MaxRetries: 2, Breaker: br}})
	v, err := CallWith(context.Background(), g, CallOptions[int]{Fallback: func(ctx context.Context, err error) (int, error) {
		if !errors.Is(err, ErrBreakerOpen) || !errors.Is(err, errBoom) {
			t.Errorf("fallback got %v", err)
		}
		return 7, nil
	}}, func(context.Context, Attempt) (int, error) { return 0, errBoom })
	if v != 7 || err != nil {
		t.Fatalf("%v %v", v, err)
	}
}

func TestGuardAttemptsAndKeys(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := 0
		g := mustGuard(t, GuardSettings{Idempotency: NotIdempotent, Policy: Policy{MaxRetries: 3}, NewKey: func() string { n++; return fmt.Sprint("key-", n) }})
		var seen []Attempt
		fn := func(ctx context.Context, a Attempt) (int, error) {
			seen = append(seen, a)
			if len(seen)%3 != 0 {
				return 0, errBoom
			}
			return a.Number, nil
		}
		// Not idempotent, no key: one attempt.
		if _, err := Call(context.Background(), g, fn); !errors.Is(err, ErrNotIdempotent) {
			t.Fatalf("err = %v", err)
		}
		// A generated key: retried, the same key on every attempt.
		seen = nil
		v, err := CallWith(context.Background(), g, CallOptions[int]{NewKey: true}, fn)
		if err != nil || v != 3 {
			t.Fatalf("%v %v", v, err)
		}
		want := []Attempt{{1, KindFirst, "key-1"}, {2, KindRetry, "key-1"}, {3, KindRetry, "key-1"}}
		if fmt.Sprint(seen) != fmt.Sprint(want) {
			t.Fatalf("attempts = %v, want %v", seen, want)
		}
		// A given key wins over NewKey; Idempotent needs none.
		seen = nil
		CallWith(context.Background(), g, CallOptions[int]{Key: "mine", NewKey: true}, fn)
		if seen[0].Key != "mine" || seen[2].Key != "mine" {
			t.Fatalf("attempts = %v", seen)
		}
		seen = nil
		CallWith(context.Background(), g, CallOptions[int]{Idempotency: Idempotent}, fn)
		if len(seen) != 3 || seen[0].Key != "" {
			t.Fatalf("attempts = %v", seen)
		}
		// AutoKey keys non-idempotent calls, not idempotent ones, not Do.
		g2 := mustGuard(t, GuardSettings{Policy: Policy{MaxRetries: 3}, AutoKey: true, Idempotency: Idempotent})
		seen = nil
		CallWith(context.Background(), g2, CallOptions[int]{Idempotency: NotIdempotent}, fn)
		if len(seen) != 3 || len(seen[0].Key) != 36 || seen[0].Key != seen[2].Key {
			t.Fatalf("attempts = %v", seen)
		}
		seen = nil
		Call(context.Background(), g2, fn)
		if seen[0].Key != "" {
			t.Fatal("an idempotent call got a key")
		}
		if a, b := randomUUID(), randomUUID(); a == b || a[14] != '4' || strings.Count(a, "-") != 4 {
			t.Fatalf("uuids %q %q", a, b)
		}
	})
}

func TestGuardClassifiers(t *testing.T) {
	errRetry, errStop := errors.New("retry me"), errors.New("stop")
	for _, c := range []struct {
		name  string
		s     GuardSettings
		err   error
		calls int
	}{
		{"RetryOn match", GuardSettings{RetryOn: []error{errRetry}}, fmt.Errorf("x: %w", errRetry), 3},
		{"RetryOn miss", GuardSettings{RetryOn: []error{errRetry}}, errBoom, 1},
		{"NoRetryOn", GuardSettings{NoRetryOn: []error{errStop}}, errStop, 1},
		{"NoRetryOn miss", GuardSettings{NoRetryOn: []error{errStop}}, errBoom, 3},
		{"Classify", GuardSettings{Classify: func(err error) (Outcome, bool) { return OutcomeFailure, err == errStop }}, errStop, 3},
		{"Classify no", GuardSettings{Classify: func(err error) (Outcome, bool) { return OutcomeFailure, err == errStop }}, errBoom, 1},
		{"Permanent", GuardSettings{}, Permanent(errBoom), 1},
		{"Neutral", GuardSettings{}, Neutral(errBoom), 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := c.s
			s.Idempotency, s.Policy = Idempotent, Policy{MaxRetries: 2}
			g := mustGuard(t, s)
			calls := 0
			g.Do(context.Background(), func(context.Context) error { calls++; return c.err })
			if calls != c.calls {
				t.Fatalf("%d calls, want %d", calls, c.calls)
			}
		})
	}
	if o, r := DefaultClassifier(nil); o != OutcomeSuccess || r {
		t.Fatal("nil")
	}
	if o, r := DefaultClassifier(fmt.Errorf("w: %w", Neutral(errBoom))); o != OutcomeIgnored || r {
		t.Fatalf("Neutral: %v, %v", o, r)
	}
	if Neutral(nil) != nil || !errors.Is(Neutral(errBoom), errBoom) || Neutral(errBoom).Error() != errBoom.Error() {
		t.Fatal("Neutral does not wrap")
	}
	if o, r := DefaultClassifier(context.DeadlineExceeded); o != OutcomeTimeout || !r {
		t.Fatal("deadline")
	}
	if o, r := DefaultClassifier(timeoutErr{}); o != OutcomeTimeout || !r {
		t.Fatal("net.Error-like timeout")
	}
	if o, _ := DefaultClassifier(ErrAttemptTimeout); o != OutcomeTimeout {
		t.Fatal("ErrAttemptTimeout")
	}
}

type timeoutErr struct{}

func (timeoutErr) Error() string { return "i/o timeout" }
func (timeoutErr) Timeout() bool { return true }

func TestGuardHedgeWinsAndCancelsLoser(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tb := newBucket(bucketSpec{ratio: 0.1, min: 5})
		br := mustBreaker(t, BreakerSettings{Threshold: 1})
		g := mustGuard(t, GuardSettings{Idempotency: Idempotent, Policy: Policy{Budget: tb, Breaker: br, Hedge: HedgeSettings{Delay: 50 * ms}}})
		var loserDone atomic.Bool
		var discarded []string
		start := time.Now()
		v, err := CallWith(context.Background(), g, CallOptions[string]{Discard: func(v string) { discarded = append(discarded, v) }},
			func(ctx context.Context, a Attempt) (string, error) {
				if a.Kind == KindFirst {
					<-ctx.Done() // the slow replica
					time.Sleep(10 * ms)
					loserDone.Store(true)
					return "late", ctx.Err()
				}
				if a.Kind != KindHedge || a.Number != 2 {
					t.Errorf("attempt %+v", a)
				}
				time.Sleep(5 * ms)
				return "hedge", nil
			})
		if v != "hedge" || err != nil {
			t.Fatalf("%q %v", v, err)
		}
		if d := time.Since(start); d != 55*ms {
			t.Fatalf("took %v, want 50ms + 5ms for the hedge's answer: the call must not wait for the loser", d)
		}
		if loserDone.Load() {
			t.Fatal("the loser finished before the call returned")
		}
		if err := g.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d != 65*ms || !loserDone.Load() {
			t.Fatalf("Wait returned after %v (loser done: %v), want 65ms", d, loserDone.Load())
		}
		if len(discarded) != 1 || discarded[0] != "late" {
			t.Fatalf("discarded = %v", discarded)
		}
		s := g.Stats()
		if s.Hedges != 1 || s.Attempts != 2 || s.Retries != 0 || tb.Tokens(time.Now()) != 4.1 {
			t.Fatalf("stats = %+v, tokens %v (a hedge costs 1, the success adds 0.1)", s, tb.Tokens(time.Now()))
		}
		if br.State(time.Now()) != StateClosed {
			t.Fatal("the cancelled loser counted as a failure")
		}
	})
}

// An attempt that ignores its context does not hold the caller past the
// winner: Do returns on the hedge's answer, and the stubborn loser is
// recorded (freeing its probe slot) and discarded when it ends.
func TestGuardHedgeReturnsAtWinnerDespiteStubbornLoser(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		br := mustBreaker(t, BreakerSettings{Threshold: 1})
		var events []string
		var mu sync.Mutex
		g := mustGuard(t, GuardSettings{Idempotency: Idempotent, Policy: Policy{Breaker: br, Hedge: HedgeSettings{Delay: 50 * ms}},
			OnEvent: func(e Event) { mu.Lock(); events = append(events, e.Kind.String()+"/"+e.Outcome.String()); mu.Unlock() }})
		start := time.Now()
		err := g.Do(context.Background(), func(ctx context.Context) error {
			if time.Since(start) < 10*ms {
				time.Sleep(time.Second) // ignores ctx
				return errBoom
			}
			time.Sleep(5 * ms)
			return nil
		})
		if err != nil || time.Since(start) != 55*ms {
			t.Fatalf("Do = %v after %v, want nil after 55ms", err, time.Since(start))
		}
		g.Wait(context.Background())
		if time.Since(start) != time.Second {
			t.Fatalf("the loser ended after %v, want 1s", time.Since(start))
		}
		mu.Lock()
		defer mu.Unlock()
		want := "[hedge/success attempt/success done/success attempt/ignored]"
		if fmt.Sprint(events) != want {
			t.Fatalf("events = %v, want %s", events, want)
		}
		if br.State(time.Now()) != StateClosed {
			t.Fatal("a cancelled loser's error counted as a failure")
		}
	})
}

// When the caller's deadline passes first, Do returns at the deadline even
// if no attempt honours its context; the attempts, when they end, count as
// timeouts (the dependency was too slow for the caller).
func TestGuardHedgeReturnsAtCallerDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		br := mustBreaker(t, BreakerSettings{Threshold: 3})
		g := mustGuard(t, GuardSettings{Idempotency: Idempotent, Policy: Policy{MaxRetries: 5, Breaker: br, Hedge: HedgeSettings{Delay: 30 * ms, Max: 2}}})
		ctx, cancel := context.WithTimeout(context.Background(), 100*ms)
		defer cancel()
		start := time.Now()
		err := g.Do(ctx, func(context.Context) error {
			time.Sleep(time.Second) // ignores ctx
			return errBoom
		})
		if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != 100*ms {
			t.Fatalf("Do = %v after %v, want the deadline after 100ms", err, time.Since(start))
		}
		if s := g.Stats(); s.Hedges != 2 || s.Retries != 0 || s.Failures != 1 {
			t.Fatalf("stats = %+v", s)
		}
		g.Wait(context.Background())
		if br.State(time.Now()) != StateOpen {
			t.Fatal("three attempts past the caller's deadline did not count as timeouts")
		}
	})
}

func TestGuardPanicIsCountedAndReported(t *testing.T) {
	for _, hedge := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			var events []Event
			var mu sync.Mutex
			s := GuardSettings{Idempotency: Idempotent, OnEvent: func(e Event) { mu.Lock(); events = append(events, e); mu.Unlock() }}
			if hedge {
				s.Policy.Hedge = HedgeSettings{Delay: 10 * ms}
			}
			g := mustGuard(t, s)
			func() {
				defer func() {
					if recover() != "bug" {
						t.Fatal("the panic was swallowed")
					}
				}()
				g.Do(context.Background(), func(context.Context) error { panic("bug") })
			}()
			st := g.Stats()
			if st.Panics != 1 || st.Failures != 1 || st.Intents != 1 {
				t.Errorf("hedge %v: stats = %+v, want one intent, one failure, one panic", hedge, st)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(events) == 0 {
				t.Fatal("no events")
			}
			last := events[len(events)-1]
			if last.Kind != EventDone || !errors.Is(last.Err, ErrPanicked) || !strings.Contains(last.Err.Error(), "bug") {
				t.Errorf("hedge %v: last event = %+v, want done with ErrPanicked", hedge, last)
			}
		})
	}
}

// Unlimited retries with nothing to slow or stop them would spin: NewGuard
// refuses the combination and names what would prevent it.
func TestGuardRefusesUnboundedSpin(t *testing.T) {
	_, err := NewGuard(GuardSettings{Idempotency: Idempotent, Policy: Policy{MaxRetries: Unlimited}})
	wantSettingError(t, err, "Policy.MaxRetries")
	for _, f := range []string{"Policy.Budget", "Policy.Backoff"} {
		if err == nil || !strings.Contains(err.Error(), f) {
			t.Errorf("%v does not name %s", err, f)
		}
	}
	_, err = NewGuard(GuardSettings{Idempotency: Idempotent, Policy: Policy{MaxRetries: Unlimited, Budget: &bucket{unlimited: true}}})
	wantSettingError(t, err, "Policy.MaxRetries")
	// Either a budget or a backoff bounds the rate of retries.
	tb := newBucket(bucketSpec{ratio: 0.1, byRequest: true})
	for _, p := range []Policy{
		{MaxRetries: Unlimited, Budget: tb},
		{MaxRetries: Unlimited, Backoff: Backoff{Schedule: Fixed, Base: ms}},
		{MaxRetries: Unlimited, Backoff: Backoff{Jitter: DecorrelatedJitter, Base: ms, Cap: time.Second}},
	} {
		if _, err := NewGuard(GuardSettings{Idempotency: Idempotent, Policy: p}); err != nil {
			t.Errorf("%+v: %v", p, err)
		}
	}
}

func TestGuardHedgeFirstAnswerWins(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := mustGuard(t, GuardSettings{Idempotency: Idempotent, Policy: Policy{Hedge: HedgeSettings{Delay: 50 * ms, Max: 3}}})
		start := time.Now()
		v, err := Call(context.Background(), g, func(ctx context.Context, a Attempt) (int, error) {
			if a.Number == 1 {
				time.Sleep(120 * ms) // answers before the hedges would
				return 1, nil
			}
			select {
			case <-ctx.Done():
				return 0, ctx.Err()
			case <-time.After(time.Second):
				return a.Number, nil
			}
		})
		if v != 1 || err != nil || time.Since(start) != 120*ms {
			t.Fatalf("%v %v after %v", v, err, time.Since(start))
		}
		if s := g.Stats(); s.Hedges != 2 {
			t.Fatalf("hedges = %d, want 2 (at 50ms and 100ms)", s.Hedges)
		}
	})
}

func TestGuardHedgeBudgetAndIdempotency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tb := newBucket(bucketSpec{ratio: 0.1})
		g := mustGuard(t, GuardSettings{Idempotency: Idempotent, Policy: Policy{Budget: tb, Hedge: HedgeSettings{Delay: 50 * ms}}})
		slow := func(ctx context.Context) error { time.Sleep(200 * ms); return nil }
		if err := g.Do(context.Background(), slow); err != nil {
			t.Fatal(err)
		}
		if s := g.Stats(); s.Hedges != 0 || s.BudgetDenials != 1 {
			t.Fatalf("an empty budget let a hedge go: %+v", s)
		}
		g2 := mustGuard(t, GuardSettings{Idempotency: NotIdempotent, Policy: Policy{Hedge: HedgeSettings{Delay: 50 * ms}}})
		if err := g2.Do(context.Background(), slow); err != nil {
			t.Fatal(err)
		}
		if s := g2.Stats(); s.Hedges != 0 {
			t.Fatal("a non-idempotent call was hedged")
		}
	})
}

func TestGuardHedgeAllFailThenRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := mustGuard(t, GuardSettings{Idempotency: Idempotent, Policy: Policy{MaxRetries: 1, Hedge: HedgeSettings{Delay: 10 * ms}}})
		var kinds []Kind
		var mu sync.Mutex
		_, err := Call(context.Background(), g, func(ctx context.Context, a Attempt) (int, error) {
			mu.Lock()
			kinds = append(kinds, a.Kind)
			mu.Unlock()
			time.Sleep(20 * ms)
			if a.Kind == KindRetry {
				return 1, nil
			}
			return 0, errBoom
		})
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(kinds) != "[first hedge retry]" {
			t.Fatalf("kinds = %v", kinds)
		}
		// Both failed: the call stops with the last failure.
		g = mustGuard(t, GuardSettings{Idempotency: Idempotent, Policy: Policy{Hedge: HedgeSettings{Delay: 10 * ms}}})
		_, err = Call(context.Background(), g, func(ctx context.Context, a Attempt) (int, error) {
			time.Sleep(20 * ms)
			return 0, fmt.Errorf("attempt %d: %w", a.Number, errBoom)
		})
		if !errors.Is(err, ErrRetriesExhausted) || !strings.Contains(err.Error(), "attempt 2") {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestGuardHedgeCallerCancels(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := mustGuard(t, GuardSettings{Idempotency: Idempotent, Policy: Policy{MaxRetries: 3, Hedge: HedgeSettings{Delay: 10 * ms, Max: 2}}})
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(25*ms, cancel)
		start := time.Now()
		var running atomic.Int32
		err := g.Do(ctx, func(ctx context.Context) error {
			running.Add(1)
			defer running.Add(-1)
			<-ctx.Done()
			return ctx.Err()
		})
		if !errors.Is(err, context.Canceled) || time.Since(start) != 25*ms {
			t.Fatalf("err = %v after %v", err, time.Since(start))
		}
		g.Wait(context.Background())
		if running.Load() != 0 {
			t.Fatalf("%d attempts still running", running.Load())
		}
		if s := g.Stats(); s.Hedges != 2 || s.Retries != 0 {
			t.Fatalf("stats = %+v", s)
		}
	})
}

func TestGuardKeepHoldsTheAttemptContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := mustGuard(t, GuardSettings{AttemptTimeout: time.Second})
		var actx context.Context
		var release func()
		v, err := CallWith(context.Background(), g, CallOptions[int]{Keep: func(v int, r func()) int { release = r; return v + 1 }},
			func(ctx context.Context, a Attempt) (int, error) { actx = ctx; return 1, nil })
		if v != 2 || err != nil || release == nil {
			t.Fatalf("%v %v", v, err)
		}
		if actx.Err() != nil {
			t.Fatal("the kept context was cancelled")
		}
		release()
		if actx.Err() == nil {
			t.Fatal("release did not cancel it")
		}
		// Without Keep, the attempt's context ends with the call.
		g.Do(context.Background(), func(ctx context.Context) error { actx = ctx; return nil })
		if actx.Err() == nil {
			t.Fatal("the attempt's context outlived the call")
		}
	})
}

func TestGuardPanicFreesProbe(t *testing.T) {
	br := mustBreaker(t, BreakerSettings{Threshold: 1, Cooldown: time.Nanosecond})
	g := mustGuard(t, GuardSettings{Policy: Policy{Breaker: br}})
	g.Do(context.Background(), func(context.Context) error { return errBoom }) // open
	time.Sleep(time.Millisecond)
	func() {
		defer func() {
			if recover() != "bug" {
				t.Fatal("the panic was swallowed")
			}
		}()
		g.Do(context.Background(), func(context.Context) error { panic("bug") })
	}()
	if err := g.Do(context.Background(), func(context.Context) error { return nil }); err != nil {
		t.Fatalf("the panicking probe kept its slot: %v", err)
	}
}

func TestGuardHedgePanicPropagates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := mustGuard(t, GuardSettings{Idempotency: Idempotent, Policy: Policy{Hedge: HedgeSettings{Delay: 10 * ms}}})
		defer func() {
			if recover() != "bug" {
				t.Fatal("the panic was swallowed")
			}
			// The hedge panics too, 10ms later, after Do has gone: it is
			// counted, not passed on.
			g.Wait(context.Background())
			if s := g.Stats(); s.Panics != 2 || s.Failures != 1 {
				t.Fatalf("stats = %+v, want two panics and one failed intent", s)
			}
		}()
		g.Do(context.Background(), func(ctx context.Context) error {
			time.Sleep(20 * ms)
			panic("bug")
		})
	})
}

func TestGuardEventsAndObserve(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var got []string
		g := mustGuard(t, GuardSettings{Idempotency: Idempotent, Policy: Policy{MaxRetries: 1, Backoff: Backoff{Schedule: Fixed, Base: 10 * ms}},
			OnEvent: func(e Event) { got = append(got, e.Kind.String()) }})
		var took []time.Duration
		remove := g.Observe(func(e Event) {
			if e.Kind == EventAttempt || e.Kind == EventDone {
				took = append(took, e.Took)
			}
		})
		fn, _ := failing(1, errBoom)
		g.Do(context.Background(), func(ctx context.Context) error { time.Sleep(5 * ms); return fn(ctx) })
		if fmt.Sprint(got) != "[attempt retry attempt done]" {
			t.Fatalf("events = %v", got)
		}
		if fmt.Sprint(took) != "[5ms 5ms 20ms]" {
			t.Fatalf("took = %v", took)
		}
		remove()
		remove()
		g.Do(context.Background(), func(context.Context) error { return nil })
		if len(took) != 3 {
			t.Fatal("a removed observer was called")
		}
	})
}

func TestGuardFakeClock(t *testing.T) {
	clk := newFakeClock(t0)
	g := mustGuard(t, GuardSettings{Idempotency: Idempotent, Clock: clk, AttemptTimeout: time.Second,
		Policy: Policy{MaxRetries: 2, Backoff: Backoff{Schedule: Fixed, Base: 3 * time.Second}}})
	if !g.Now().Equal(t0) {
		t.Fatal("the injected clock is not used")
	}
	done := make(chan error)
	var causes []error
	go func() {
		n := 0
		done <- g.Do(context.Background(), func(ctx context.Context) error {
			n++
			if n == 1 {
				<-ctx.Done() // the first attempt hangs until its timeout
				causes = append(causes, context.Cause(ctx))
				return ctx.Err()
			}
			return nil
		})
	}()
	<-clk.Added() // the attempt's timeout timer
	clk.Advance(time.Second)
	<-clk.Added() // the backoff timer
	clk.Advance(3 * time.Second)
	<-clk.Added() // the second attempt's timeout
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !errors.Is(causes[0], ErrAttemptTimeout) {
		t.Fatalf("cause = %v", causes[0])
	}
	if s := g.Stats(); s.Retries != 1 {
		t.Fatalf("stats = %+v", s)
	}
	if !clk.Now().Equal(t0.Add(4 * time.Second)) {
		t.Fatal("time moved by itself")
	}
}

func TestGuardConcurrent(t *testing.T) {
	tb := newBucket(bucketSpec{ratio: 0.2, min: 10, byRequest: true})
	br := mustBreaker(t, BreakerSettings{Rule: CountWindow, WindowSize: 50, FailureRate: 0.9, Cooldown: ms, Probes: 2})
	g := mustGuard(t, GuardSettings{Idempotency: Idempotent, AttemptTimeout: 50 * ms, Policy: Policy{MaxRetries: 3, Budget: tb, Breaker: br,
		Backoff: Backoff{Schedule: Exponential, Base: 10 * time.Microsecond, Cap: ms, Jitter: FullJitter},
		Hedge:   HedgeSettings{Delay: 200 * time.Microsecond}}})
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 200 {
				CallWith(context.Background(), g, CallOptions[int]{}, func(ctx context.Context, a Attempt) (int, error) {
					if (i+w+a.Number)%3 == 0 {
						return 0, errBoom
					}
					if i%7 == 0 {
						time.Sleep(300 * time.Microsecond)
					}
					return i, nil
				})
			}
		})
	}
	wg.Wait()
	s := g.Stats()
	if s.Intents != 1600 || s.Attempts < s.Intents-s.BreakerRefusals {
		t.Fatalf("stats = %+v", s)
	}
	if tok := tb.Tokens(time.Now()); tok < 0 || tok > 100 {
		t.Fatalf("tokens = %v", tok)
	}
}

func TestNewGuardErrors(t *testing.T) {
	for _, c := range []struct {
		field string
		s     GuardSettings
	}{
		{"Policy.MaxRetries", GuardSettings{Policy: Policy{MaxRetries: -5}}},
		{"GuardSettings.AttemptTimeout", GuardSettings{AttemptTimeout: -1}},
		{"GuardSettings.MinAttempt", GuardSettings{MinAttempt: -1}},
		{"GuardSettings.Idempotency", GuardSettings{Policy: Policy{MaxRetries: 1}}},
		{"GuardSettings.Idempotency", GuardSettings{Policy: Policy{Hedge: HedgeSettings{Delay: time.Millisecond}}}},
		{"GuardSettings.Idempotency", GuardSettings{Idempotency: 7}},
	} {
		_, err := NewGuard(c.s)
		wantSettingError(t, err, c.field)
	}
	g := mustGuard(t, GuardSettings{Idempotency: Idempotent, Clock: RealClock(), Policy: Policy{MaxRetries: 2}})
	if g.Policy().MaxRetries != 2 || time.Since(g.Now()) > time.Minute {
		t.Fatal("Policy or Now")
	}
}

func TestStopErrorMessage(t *testing.T) {
	e := &StopError{Reason: ErrBudgetExhausted, Last: errBoom, Attempts: 2}
	if e.Error() != "resil: retry budget exhausted: last attempt: boom" {
		t.Fatal(e.Error())
	}
	e = &StopError{Reason: ErrBreakerOpen}
	if e.Error() != ErrBreakerOpen.Error() || len(e.Unwrap()) != 1 {
		t.Fatal(e.Error())
	}
	if !errors.Is(ErrTooManyProbes, ErrBreakerOpen) {
		t.Fatal("ErrTooManyProbes")
	}
	te := &timedOut{errBoom}
	if !strings.Contains(te.Error(), "timed out") || !errors.Is(te, errBoom) {
		t.Fatal(te)
	}
}

// TestPoliciesAllocateNothing: a breaker's Allow and Record allocate
// nothing, whatever its rule (resil/budget checks its budgets).
func TestPoliciesAllocateNothing(t *testing.T) {
	for _, s := range []BreakerSettings{
		{Threshold: 3},
		{Rule: CountWindow, WindowSize: 10, FailureRate: 0.5},
		{Rule: TimeWindow, WindowPeriod: time.Second, FailureRate: 0.5},
	} {
		br := mustBreaker(t, s)
		if n := testing.AllocsPerRun(1000, func() {
			p, _ := br.Allow(t0)
			br.Record(t0, p, OutcomeSuccess, ms)
		}); n != 0 {
			t.Fatalf("%v breaker allocates %v times", s.Rule, n)
		}
	}
}

// TestGuardNoHedge: a call with NoHedge sends no hedge under a hedging
// policy, but still retries.
func TestGuardNoHedge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := mustGuard(t, GuardSettings{Idempotency: Idempotent,
			Policy: Policy{MaxRetries: 1, Hedge: HedgeSettings{Delay: 10 * ms, Max: 3}}})
		var kinds []Kind
		_, err := CallWith(context.Background(), g, CallOptions[int]{NoHedge: true}, func(ctx context.Context, a Attempt) (int, error) {
			kinds = append(kinds, a.Kind)
			time.Sleep(100 * ms)
			if a.Number == 1 {
				return 0, errBoom
			}
			return 1, nil
		})
		if err != nil || len(kinds) != 2 || kinds[1] != KindRetry {
			t.Fatalf("err %v, attempts %v; want a first attempt and a retry, no hedge", err, kinds)
		}
	})
}

// TestGuardEventContext: every event of a call carries the caller's
// context, hedges and refusals included, so that observers can find its
// trace span.
func TestGuardEventContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		type key struct{}
		ctx := context.WithValue(context.Background(), key{}, "caller")
		g := mustGuard(t, GuardSettings{Idempotency: Idempotent,
			Policy: Policy{MaxRetries: 1, Hedge: HedgeSettings{Delay: 10 * ms}}})
		kinds := map[EventKind]bool{}
		g.Observe(func(e Event) {
			if e.Context == nil || e.Context.Value(key{}) != "caller" {
				t.Errorf("%v event without the caller's context", e.Kind)
			}
			kinds[e.Kind] = true
		})
		g.Do(ctx, func(ctx context.Context) error {
			time.Sleep(20 * ms)
			return errBoom
		})
		for _, k := range []EventKind{EventAttempt, EventHedge, EventRetry, EventDone} {
			if !kinds[k] {
				t.Errorf("no %v event", k)
			}
		}
	})
}
