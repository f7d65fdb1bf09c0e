package budget

import (
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/resil"
)

// concStep is one step of a concurrency budget test on the fixed time
// grid. The ops: "first" (a first attempt is sent), "sent" (a retry is
// sent), "end" (a first attempt ends), "end-retry" (a retry ends), "retry"
// (ask for a retry slot), "refund" (an abandoned retry gives its slot
// back).
type concStep struct {
	at       float64
	op       string
	n        int  // how many times
	ok       bool // retry: allowed? (every one of the n)
	active   int64
	retries  int64
	headroom float64 // Tokens after the step
}

func runConcSteps(t *testing.T, b *Concurrency, steps []concStep) {
	t.Helper()
	for i, s := range steps {
		now := ts(s.at)
		for range max(s.n, 1) {
			switch s.op {
			case "first":
				b.Begin(now)
			case "sent":
				b.Sent(now, resil.KindRetry)
			case "end":
				b.Record(now, resil.OutcomeFailure, 0)
			case "end-retry":
				b.Record(now, resil.OutcomeSuccess, 1)
			case "retry":
				c, ok := b.Withdraw(now, resil.OutcomeFailure)
				if ok != s.ok || (ok && c != 1) {
					t.Fatalf("step %d (%s at %vs): Withdraw = %v, %v; want 1, %v", i, s.op, s.at, c, ok, s.ok)
				}
			case "refund":
				b.Refund(now, 1)
			default:
				t.Fatalf("step %d: unknown op %q", i, s.op)
			}
		}
		a, r := b.Active()
		if a != s.active || r != s.retries || b.Tokens(now) != s.headroom {
			t.Fatalf("step %d (%s at %vs): active %d, retries %d, headroom %v; want %d, %d, %v",
				i, s.op, s.at, a, r, b.Tokens(now), s.active, s.retries, s.headroom)
		}
	}
}

func mustConc(t testing.TB, s ConcurrencySettings) *Concurrency {
	t.Helper()
	b, err := NewConcurrency(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestConcurrencyBudgetEnvoyRule steps Envoy's documented rule with its
// defaults (budget_percent 20, min_retry_concurrency 3): active retries <
// max(20% of active requests, 3).
func TestConcurrencyBudgetEnvoyRule(t *testing.T) {
	b := mustConc(t, ConcurrencySettings{Percent: 20, MinConcurrency: 3})
	runConcSteps(t, b, []concStep{
		{at: 0, op: "retry", ok: true, active: 0, retries: 1, headroom: 2}, // the floor allows 3 with nothing in flight
		{at: 0, op: "retry", n: 2, ok: true, active: 0, retries: 3, headroom: 0},
		{at: 0, op: "retry", ok: false, active: 0, retries: 3, headroom: 0},
		{at: 1, op: "first", n: 19, active: 19, retries: 3, headroom: 0}, // 20% of 19 is 3.8: still 3
		{at: 1, op: "retry", ok: false, active: 19, retries: 3, headroom: 0},
		{at: 1, op: "first", active: 20, retries: 3, headroom: 1}, // 20% of 20 is 4
		{at: 1, op: "retry", ok: true, active: 20, retries: 4, headroom: 0},
		{at: 1, op: "retry", ok: false, active: 20, retries: 4, headroom: 0},
		// Two retries leave their backoff: they count as requests too.
		{at: 2, op: "sent", n: 2, active: 22, retries: 4, headroom: 0},
		{at: 2, op: "first", n: 3, active: 25, retries: 4, headroom: 1}, // 20% of 25 is 5
		// A retry that ends frees its slot and its request.
		{at: 3, op: "end-retry", active: 24, retries: 3, headroom: 1}, // 4.8 → 4
		{at: 3, op: "retry", ok: true, active: 24, retries: 4, headroom: 0},
		// An abandoned retry (never sent) frees only its slot.
		{at: 4, op: "refund", active: 24, retries: 3, headroom: 1},
		// First attempts end: the allowance shrinks below what is held.
		{at: 5, op: "end", n: 20, active: 4, retries: 3, headroom: 0},
		{at: 5, op: "end-retry", active: 3, retries: 2, headroom: 1},
		{at: 5, op: "retry", ok: true, active: 3, retries: 3, headroom: 0},
		{at: 5, op: "retry", ok: false, active: 3, retries: 3, headroom: 0},
	})
}

// TestConcurrencyBudgetTruncatesLikeEnvoy: Envoy computes the allowance in
// double precision and truncates it, so 29% of 100 is 28 (0.29 × 100 is
// 28.999999999999996 in binary), and 30% of 10 is 3.
func TestConcurrencyBudgetTruncatesLikeEnvoy(t *testing.T) {
	for _, c := range []struct {
		percent float64
		active  int
		want    float64
	}{
		{29, 100, 28}, {30, 10, 3}, {20, 4, 0}, {20, 5, 1}, {100, 7, 7}, {12.5, 16, 2}, {0.1, 999, 0}, {0.1, 1000, 1},
	} {
		b := mustConc(t, ConcurrencySettings{Percent: c.percent})
		for range c.active {
			b.Begin(t0)
		}
		if got := b.Tokens(t0); got != c.want {
			t.Errorf("%v%% of %d active: allowance %v, want %v", c.percent, c.active, got, c.want)
		}
	}
}

// TestConcurrencyBudgetMaxRetriesBreaker: with Percent 0 the budget is
// Envoy's plain circuit breaker on retries, max_retries: a fixed number of
// retries active at once, whatever the traffic.
func TestConcurrencyBudgetMaxRetriesBreaker(t *testing.T) {
	b := mustConc(t, ConcurrencySettings{MinConcurrency: 3})
	runConcSteps(t, b, []concStep{
		{at: 0, op: "first", n: 1000, active: 1000, retries: 0, headroom: 3},
		{at: 0, op: "retry", n: 3, ok: true, active: 1000, retries: 3, headroom: 0},
		{at: 0, op: "retry", ok: false, active: 1000, retries: 3, headroom: 0},
	})
}

func TestConcurrencyBudgetSettings(t *testing.T) {
	for _, c := range []struct {
		s     ConcurrencySettings
		field string
	}{
		{ConcurrencySettings{}, "ConcurrencySettings.Percent"},
		{ConcurrencySettings{Percent: -1}, "ConcurrencySettings.Percent"},
		{ConcurrencySettings{Percent: 100.5}, "ConcurrencySettings.Percent"},
		{ConcurrencySettings{Percent: math.NaN()}, "ConcurrencySettings.Percent"},
		{ConcurrencySettings{Percent: 20, MinConcurrency: -1}, "ConcurrencySettings.MinConcurrency"},
	} {
		_, err := NewConcurrency(c.s)
		wantSettingError(t, err, c.field)
	}
}

// TestConcurrencyBudgetThroughPolicy drives the budget through a Policy:
// the Policy must tell it when a retry leaves its backoff (Sent), so that
// a retry waiting in backoff holds a slot but is not an active request.
func TestConcurrencyBudgetThroughPolicy(t *testing.T) {
	b := mustConc(t, ConcurrencySettings{Percent: 50, MinConcurrency: 1})
	p := resil.Policy{MaxRetries: 3, Budget: b, Backoff: resil.Backoff{Schedule: resil.Fixed, Base: time.Second}}
	want := func(step string, active, retries int64) {
		t.Helper()
		if a, r := b.Active(); a != active || r != retries {
			t.Fatalf("%s: active %d, retries %d; want %d, %d", step, a, r, active, retries)
		}
	}
	ins := make([]resil.Intent, 4)
	tks := make([]resil.Ticket, 4)
	for i := range ins {
		ins[i].Idempotent = true
		var err error
		if tks[i], err = p.Begin(ts(0), &ins[i]); err != nil {
			t.Fatal(err)
		}
	}
	want("four first attempts", 4, 0)
	p.End(ts(1), &ins[0], tks[0], resil.OutcomeFailure, time.Second)
	if _, err := p.Retry(ts(1), &ins[0], resil.OutcomeFailure, 0, time.Time{}, noJitter()); err != nil {
		t.Fatal(err)
	}
	want("one retry in backoff", 3, 1)
	p.End(ts(1), &ins[1], tks[1], resil.OutcomeFailure, time.Second)
	if _, err := p.Retry(ts(1), &ins[1], resil.OutcomeFailure, 0, time.Time{}, noJitter()); !errors.Is(err, resil.ErrBudgetExhausted) {
		t.Fatalf("second retry: %v, want ErrBudgetExhausted (50%% of 2 active is 1, and one is held)", err)
	}
	want("second retry refused", 2, 1)
	rt, err := p.Resume(ts(2), &ins[0])
	if err != nil {
		t.Fatal(err)
	}
	want("the retry is sent", 3, 1)
	p.End(ts(3), &ins[0], rt, resil.OutcomeSuccess, time.Second)
	want("the retry succeeded", 2, 0)
	p.End(ts(3), &ins[2], tks[2], resil.OutcomeFailure, time.Second)
	if _, err := p.Retry(ts(3), &ins[2], resil.OutcomeFailure, 0, time.Time{}, noJitter()); err != nil {
		t.Fatal(err)
	}
	p.Abandon(ts(4), &ins[2])
	want("an abandoned retry", 1, 0)
	p.End(ts(4), &ins[3], tks[3], resil.OutcomeSuccess, time.Second)
	want("all done", 0, 0)
}

// ExampleConcurrency shows Envoy's default retry budget: 20% of the
// requests in flight may be retries, and never fewer than 3.
func ExampleConcurrency() {
	b, err := NewConcurrency(ConcurrencySettings{Percent: 20, MinConcurrency: 3})
	if err != nil {
		panic(err)
	}
	now := time.Unix(0, 0)
	for range 50 { // fifty requests in flight
		b.Begin(now)
	}
	allowed := 0
	for {
		if _, ok := b.Withdraw(now, resil.OutcomeFailure); !ok {
			break
		}
		allowed++
	}
	fmt.Println("retries allowed at once with 50 requests in flight:", allowed)
	// Output: retries allowed at once with 50 requests in flight: 10
}

// FuzzConcurrencyBudget checks the budget against a model of Envoy's rule
// over any sequence of sends, ends, retries and refunds: every Withdraw
// answers as the rule says for the attempts in flight at that moment,
// the counts never go negative, and when every attempt has ended and
// every slot is given back, both counts are zero.
func FuzzConcurrencyBudget(f *testing.F) {
	f.Add(uint8(20), uint8(3), []byte{0, 0, 0, 0, 0, 3, 3, 3, 3, 1, 2, 4, 5})
	f.Add(uint8(0), uint8(1), []byte{3, 3, 1, 4, 2, 5})
	f.Add(uint8(100), uint8(0), []byte{0, 3, 1, 3, 2, 4, 5, 5})
	f.Fuzz(func(t *testing.T, pct, floor uint8, ops []byte) {
		s := ConcurrencySettings{Percent: float64(pct % 101), MinConcurrency: int(floor % 8)}
		b, err := NewConcurrency(s)
		if s.Percent == 0 && s.MinConcurrency == 0 {
			if err == nil {
				t.Fatal("zero settings accepted")
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		var firsts, waiting, sent int64 // first attempts in flight, retries in backoff, retries in flight
		for _, op := range ops {
			switch op % 6 {
			case 0:
				b.Begin(t0)
				firsts++
			case 1: // a retry leaves its backoff
				if waiting > 0 {
					b.Sent(t0, resil.KindRetry)
					waiting--
					sent++
				}
			case 2: // a first attempt ends
				if firsts > 0 {
					b.Record(t0, resil.OutcomeFailure, 0)
					firsts--
				}
			case 3:
				active := firsts + sent
				limit := max(int64(s.Percent/100*float64(active)), int64(s.MinConcurrency))
				_, ok := b.Withdraw(t0, resil.OutcomeTimeout)
				if want := waiting+sent < limit; ok != want {
					t.Fatalf("Withdraw with %d active and %d retries held = %v, want %v", active, waiting+sent, ok, want)
				}
				if ok {
					waiting++
				}
			case 4: // a retry in flight ends
				if sent > 0 {
					b.Record(t0, resil.OutcomeSuccess, 1)
					sent--
				}
			case 5: // a retry in backoff is abandoned
				if waiting > 0 {
					b.Refund(t0, 1)
					waiting--
				}
			}
			if a, r := b.Active(); a != firsts+sent || r != waiting+sent {
				t.Fatalf("counts %d, %d; model %d, %d", a, r, firsts+sent, waiting+sent)
			}
		}
		for ; firsts > 0; firsts-- {
			b.Record(t0, resil.OutcomeIgnored, 0)
		}
		for ; sent > 0; sent-- {
			b.Record(t0, resil.OutcomeIgnored, 1)
		}
		for ; waiting > 0; waiting-- {
			b.Refund(t0, 1)
		}
		// Ends beyond what was started change nothing.
		b.Record(t0, resil.OutcomeFailure, 1)
		b.Refund(t0, 1)
		if a, r := b.Active(); a != 0 || r != 0 {
			t.Fatalf("after every end: %d active, %d retries", a, r)
		}
	})
}

// The zero Concurrency budget and the nil pointer a failed constructor
// returns grant no retry, count nothing and panic on nothing; so does a
// Policy paced by a ClientRateLimiter its constructor did not make, which
// refuses to send at all.
func TestUnbuiltConcurrencyBudgetAndPacer(t *testing.T) {
	for name, b := range map[string]*Concurrency{"nil": nil, "zero": {}} {
		for range 10 {
			b.Begin(t0)
			b.Sent(t0, resil.KindRetry)
			b.Record(t0, resil.OutcomeFailure, 1)
			b.Refund(t0, 1)
			if _, ok := b.Withdraw(t0, resil.OutcomeFailure); ok {
				t.Fatalf("%s budget granted a retry", name)
			}
		}
		if a, r := b.Active(); a != 0 || r != 0 || b.Tokens(t0) != 0 {
			t.Errorf("%s budget: active %d, retries %d, tokens %v", name, a, r, b.Tokens(t0))
		}
	}
	// A nil Policy.Pacer means no pacer, as a nil Breaker means none; a
	// nil *ClientRateLimiter used on its own refuses.
	if _, err := (&resil.Policy{Pacer: &ClientRateLimiter{}}).Pace(t0); !errors.Is(err, resil.ErrNotBuilt) {
		t.Errorf("zero pacer: Pace = %v, want ErrNotBuilt", err)
	}
	for name, l := range map[string]*ClientRateLimiter{"nil": nil, "zero": {}} {
		l.Update(t0, true)
		if _, ok := l.Acquire(t0); ok || l.State() != (RateLimiterState{}) {
			t.Errorf("%s pacer granted a token or changed", name)
		}
	}
}
