package resil

import (
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestPolicyRefusalOrder(t *testing.T) {
	// Each case breaks every rule from its own on, so the first rule
	// checked is the one reported; a refusal charges nothing.
	for _, c := range []struct {
		name       string
		idempotent bool
		key        string
		retries    int // retries already sent
		pushback   time.Duration
		latest     float64 // seconds; 0: no deadline
		want       error
	}{
		{"not idempotent first", false, "", 1, -1, 0.5, ErrNotIdempotent},
		{"then retries exhausted", true, "", 1, -1, 0.5, ErrRetriesExhausted},
		{"a key makes it retryable", false, "k", 1, -1, 0.5, ErrRetriesExhausted},
		{"then pushback", true, "", 0, -1, 0.5, ErrPushback},
		{"then the deadline", true, "", 0, 0, 1.1, ErrNoTimeLeft},
		{"then the budget", true, "", 0, 0, 0, ErrBudgetExhausted},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := newBucket(bucketSpec{ratio: 0.1, min: 0.5})
			p := Policy{MaxRetries: 1, Budget: b, Backoff: Backoff{Schedule: Fixed, Base: 100 * ms}}
			in := Intent{Idempotent: c.idempotent, Key: c.key}
			now := ts(1)
			if _, err := p.Begin(now, &in); err != nil {
				t.Fatal(err)
			}
			for range c.retries {
				in.retries++
			}
			var latest time.Time
			if c.latest > 0 {
				latest = ts(c.latest)
			}
			_, err := p.Retry(now, &in, OutcomeFailure, c.pushback, latest, draw(0))
			if err != c.want {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
			if b.Tokens(now) != 0.5 {
				t.Fatalf("a refused retry was charged: %v", b.Tokens(now))
			}
		})
	}
}

func TestPolicyRetryChargesAndRefunds(t *testing.T) {
	b := newBucket(bucketSpec{ratio: 0.5, min: 3, timeout: 2})
	p := Policy{MaxRetries: 5, Budget: b, Backoff: Backoff{Schedule: Exponential, Base: 100 * ms, Cap: time.Second}}
	in := Intent{Idempotent: true}
	tk, _ := p.Begin(ts(0), &in)
	p.End(ts(0), &in, tk, OutcomeTimeout, 0)

	d, err := p.Retry(ts(0), &in, OutcomeTimeout, 0, time.Time{}, nil)
	if err != nil || d != 100*ms || b.Tokens(t0) != 1 {
		t.Fatalf("retry after a timeout: %v, %v, tokens %v", d, err, b.Tokens(t0))
	}
	// Charged when scheduled, before the wait: given back when abandoned.
	p.Abandon(ts(0.05), &in)
	p.Abandon(ts(0.05), &in) // twice is once
	if got := b.Tokens(t0); got != 3 {
		t.Fatalf("tokens after Abandon = %v, want 3", got)
	}
	// Scheduling twice without Resume refunds the first charge.
	p.Retry(ts(0.1), &in, OutcomeFailure, 0, time.Time{}, nil)
	p.Retry(ts(0.1), &in, OutcomeFailure, 0, time.Time{}, nil)
	if got := b.Tokens(t0); got != 2 {
		t.Fatalf("tokens after a double schedule = %v, want 2", got)
	}
	rt, err := p.Resume(ts(0.2), &in)
	if err != nil || rt.Kind() != KindRetry || rt.Paid() != 1 || in.Attempts() != 2 || in.Retries() != 1 {
		t.Fatalf("Resume: %+v %v attempts %d retries %d", rt, err, in.Attempts(), in.Retries())
	}
	p.Abandon(ts(0.2), &in) // nothing waits: no refund
	if got := b.Tokens(t0); got != 2 {
		t.Fatalf("Abandon after Resume refunded: %v", got)
	}
	// The next retry's backoff grows.
	if d, _ := p.Retry(ts(0.3), &in, OutcomeFailure, 0, time.Time{}, nil); d != 200*ms {
		t.Fatalf("second backoff = %v", d)
	}
}

func TestPolicyResumeRefundsWhenBreakerRefuses(t *testing.T) {
	b := newBucket(bucketSpec{ratio: 0.1, min: 5})
	br := mustBreaker(t, BreakerSettings{Threshold: 1, Cooldown: time.Minute})
	p := Policy{MaxRetries: 3, Budget: b, Breaker: br}
	in := Intent{Idempotent: true}
	tk, _ := p.Begin(ts(0), &in)
	p.End(ts(0), &in, tk, OutcomeFailure, 0) // opens the breaker
	if _, err := p.Retry(ts(0), &in, OutcomeFailure, 0, time.Time{}, nil); err != nil {
		t.Fatal(err)
	}
	if b.Tokens(t0) != 4 {
		t.Fatal("not charged")
	}
	if _, err := p.Resume(ts(1), &in); !errors.Is(err, ErrBreakerOpen) {
		t.Fatalf("Resume err = %v", err)
	}
	if got := b.Tokens(t0); got != 5 {
		t.Fatalf("tokens = %v: the refused retry was not refunded", got)
	}
	if in.Retries() != 0 || in.Attempts() != 1 {
		t.Fatalf("a refused retry was counted: %d %d", in.Retries(), in.Attempts())
	}
}

func TestPolicyPushback(t *testing.T) {
	b := newBucket(bucketSpec{ratio: 0.1, min: 10})
	for _, c := range []struct {
		name string
		p    Policy
		push time.Duration
		want time.Duration
	}{
		{"clamped to MaxPushback", Policy{MaxPushback: 2 * time.Second}, 10 * time.Second, 2 * time.Second},
		{"below the clamp", Policy{MaxPushback: 2 * time.Second}, time.Second, time.Second},
		// Issue 37: a server's wait was clamped to the backoff's cap.
		{"not clamped to Backoff.Cap", Policy{Backoff: Backoff{Schedule: Fixed, Base: ms, Cap: 100 * ms}}, time.Second, time.Second},
		{"clamped to DefaultMaxPushback", Policy{Backoff: Backoff{Schedule: Fixed, Base: ms, Cap: 3 * time.Second}}, time.Hour, DefaultMaxPushback},
		{"clamped to a minute", Policy{}, time.Hour, time.Minute},
		{"replaces the backoff", Policy{Backoff: Backoff{Schedule: Fixed, Base: 5 * time.Second}}, time.Second, time.Second},
		{"zero is none", Policy{Backoff: Backoff{Schedule: Fixed, Base: 5 * time.Second}}, 0, 5 * time.Second},
	} {
		p := c.p
		p.MaxRetries, p.Budget = 1, b
		in := Intent{Idempotent: true}
		p.Begin(t0, &in)
		before := b.Tokens(t0)
		d, err := p.Retry(t0, &in, OutcomeFailure, c.push, time.Time{}, nil)
		if err != nil || d != c.want {
			t.Errorf("%s: %v, %v; want %v", c.name, d, err, c.want)
		}
		if b.Tokens(t0) != before-1 {
			t.Errorf("%s: pushback was not charged to the budget", c.name)
		}
		p.Abandon(t0, &in)
	}
}

// TestPolicyPushbackRestarts checks gRFC A6's rule: after a retry that
// waited a server's pushback, the backoff starts again from its first
// delay; without PushbackRestarts the schedule goes on counting.
func TestPolicyPushbackRestarts(t *testing.T) {
	for _, c := range []struct {
		restarts bool
		want     []time.Duration
	}{
		{true, []time.Duration{100 * ms, 200 * ms, 3 * time.Second, 100 * ms, 200 * ms}},
		{false, []time.Duration{100 * ms, 200 * ms, 3 * time.Second, 800 * ms, 1600 * ms}},
	} {
		p := Policy{MaxRetries: 10, PushbackRestarts: c.restarts, MaxPushback: time.Minute,
			Backoff: Backoff{Schedule: Exponential, Base: 100 * ms, Cap: 10 * time.Second}}
		in := Intent{Idempotent: true}
		p.Begin(t0, &in)
		push := []time.Duration{0, 0, 3 * time.Second, 0, 0}
		for i, pb := range push {
			d, err := p.Retry(t0, &in, OutcomeFailure, pb, time.Time{}, nil)
			if err != nil || d != c.want[i] {
				t.Errorf("restarts=%v, retry %d: %v, %v; want %v", c.restarts, i+1, d, err, c.want[i])
			}
			if _, err := p.Resume(t0, &in); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func TestPolicyDeadline(t *testing.T) {
	p := Policy{MaxRetries: 3, Backoff: Backoff{Schedule: Fixed, Base: time.Second}}
	in := Intent{Idempotent: true}
	p.Begin(ts(0), &in)
	if _, err := p.Retry(ts(0), &in, OutcomeFailure, 0, ts(1), nil); err != ErrNoTimeLeft {
		t.Fatalf("a retry starting at the deadline: %v", err)
	}
	if d, err := p.Retry(ts(0), &in, OutcomeFailure, 0, ts(1.001), nil); err != nil || d != time.Second {
		t.Fatalf("a retry starting before the deadline: %v %v", d, err)
	}
	// Pushback counts against the deadline too.
	if _, err := p.Retry(ts(0), &in, OutcomeFailure, 5*time.Second, ts(2), nil); err != ErrNoTimeLeft {
		t.Fatalf("pushback past the deadline: %v", err)
	}
}

func TestPolicyHedging(t *testing.T) {
	b := newBucket(bucketSpec{ratio: 0.1, min: 2})
	br := mustBreaker(t, BreakerSettings{Threshold: 1, Cooldown: time.Minute})
	p := Policy{Budget: b, Breaker: br, Hedge: HedgeSettings{Delay: 50 * ms, Max: 2}}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	plain := Intent{}
	p.Begin(t0, &plain)
	if d := p.HedgeDelay(&plain); d != 0 {
		t.Fatal("a non-idempotent call without key is hedged")
	}
	if _, err := p.StartHedge(t0, &plain); err != ErrRetriesExhausted {
		t.Fatalf("StartHedge on a non-idempotent call: %v", err)
	}
	in := Intent{Key: "abc"}
	p.Begin(t0, &in)
	if d := p.HedgeDelay(&in); d != 50*ms {
		t.Fatalf("HedgeDelay = %v", d)
	}
	h, err := p.StartHedge(t0, &in)
	if err != nil || h.Kind() != KindHedge || h.Paid() != 1 || in.Hedges() != 1 {
		t.Fatalf("hedge: %+v %v", h, err)
	}
	// The second hedge: the budget is down to 1; the breaker opens first.
	p.End(t0, &in, h, OutcomeFailure, 0)
	if _, err := p.StartHedge(t0, &in); !errors.Is(err, ErrBreakerOpen) {
		t.Fatalf("hedge through an open breaker: %v", err)
	}
	if b.Tokens(t0) != 1 {
		t.Fatalf("the refused hedge was not refunded: %v", b.Tokens(t0))
	}
	br2 := mustBreaker(t, BreakerSettings{Threshold: 1})
	p.Breaker = br2
	if _, err := p.StartHedge(t0, &in); err != nil {
		t.Fatal(err)
	}
	if d := p.HedgeDelay(&in); d != 0 {
		t.Fatal("Max hedges exceeded")
	}
	in2 := Intent{Idempotent: true}
	p.Begin(t0, &in2)
	if _, err := p.StartHedge(t0, &in2); err != ErrBudgetExhausted {
		t.Fatalf("hedge with an empty budget: %v", err)
	}
	still := Intent{Idempotent: true, NoHedge: true}
	p.Begin(t0, &still)
	if d := p.HedgeDelay(&still); d != 0 {
		t.Fatalf("an intent with NoHedge may hedge after %v", d)
	}
}

func TestPolicyGuardRetriesScope(t *testing.T) {
	br := mustBreaker(t, BreakerSettings{Threshold: 2, Cooldown: time.Minute})
	p := Policy{MaxRetries: 1, Breaker: br, BreakerScope: GuardRetries}
	// First attempts are never refused, but their failures still trip
	// the breaker.
	for range 2 {
		in := Intent{Idempotent: true}
		tk, err := p.Begin(t0, &in)
		if err != nil {
			t.Fatal(err)
		}
		p.End(t0, &in, tk, OutcomeFailure, 0)
	}
	if s := br.State(t0); s != StateOpen {
		t.Fatalf("first-attempt failures did not reach the breaker: %v", s)
	}
	in := Intent{Idempotent: true}
	tk, err := p.Begin(ts(1), &in)
	if err != nil {
		t.Fatalf("a first attempt was refused under GuardRetries: %v", err)
	}
	p.End(ts(1), &in, tk, OutcomeSuccess, 0) // open: ignored
	if _, err := p.Retry(ts(1), &in, OutcomeFailure, 0, time.Time{}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Resume(ts(1), &in); !errors.Is(err, ErrBreakerOpen) {
		t.Fatalf("a retry passed an open breaker: %v", err)
	}
	// Half-open: first attempts go and their success closes it.
	in = Intent{}
	tk, _ = p.Begin(ts(61), &in)
	if br.State(ts(61)) != StateHalfOpen {
		t.Fatal("not half-open")
	}
	p.End(ts(61), &in, tk, OutcomeSuccess, 0)
	if s := br.State(ts(61)); s != StateClosed {
		t.Fatalf("state = %v, want closed", s)
	}
}

func TestPolicyZeroAndBegin(t *testing.T) {
	var p Policy
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	in := Intent{Idempotent: true}
	tk, err := p.Begin(t0, &in)
	if err != nil || tk.Kind() != KindFirst || tk.Paid() != 0 {
		t.Fatal(err)
	}
	p.End(t0, &in, tk, OutcomeFailure, 0)
	if _, err := p.Retry(t0, &in, OutcomeFailure, 0, time.Time{}, nil); err != ErrRetriesExhausted {
		t.Fatalf("the zero Policy retried: %v", err)
	}
	br := mustBreaker(t, BreakerSettings{Threshold: 1})
	p.Breaker = br
	tk, _ = p.Begin(t0, &in)
	p.End(t0, &in, tk, OutcomeFailure, 0)
	if _, err := p.Begin(t0, &in); !errors.Is(err, ErrBreakerOpen) {
		t.Fatalf("Begin through an open breaker: %v", err)
	}
}

func TestPolicyUnlimited(t *testing.T) {
	p := Policy{MaxRetries: Unlimited}
	in := Intent{Idempotent: true}
	p.Begin(t0, &in)
	for range 1000 {
		if _, err := p.Retry(t0, &in, OutcomeFailure, 0, time.Time{}, nil); err != nil {
			t.Fatal(err)
		}
		p.Resume(t0, &in)
	}
	if in.Retries() != 1000 {
		t.Fatal(in.Retries())
	}
}

func TestPolicyCeiling(t *testing.T) {
	tb := newBucket(bucketSpec{ratio: 0.1, byRequest: true})
	for _, c := range []struct {
		name string
		p    Policy
		want float64
	}{
		{"count only", Policy{MaxRetries: 3}, 400},
		{"with hedges", Policy{MaxRetries: 3, Hedge: HedgeSettings{Delay: ms, Max: 2}}, 600},
		{"budget", Policy{MaxRetries: 3, Budget: tb}, 110},
		{"budget above count", Policy{MaxRetries: 0, Budget: tb}, 100},
		{"unlimited", Policy{MaxRetries: Unlimited}, math.Inf(1)},
		{"unlimited with budget", Policy{MaxRetries: Unlimited, Budget: tb}, 110},
		{"no cap", Policy{MaxRetries: 2, Budget: &bucket{unlimited: true}}, 300},
	} {
		if got := c.p.Ceiling(100); !near(got, c.want) && got != c.want {
			t.Errorf("%s: Ceiling(100) = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestPolicyValidate(t *testing.T) {
	for _, c := range []struct {
		field string
		p     Policy
	}{
		{"Policy.MaxRetries", Policy{MaxRetries: -2}},
		{"Backoff.Base", Policy{Backoff: Backoff{Schedule: Fixed}}},
		{"Policy.BreakerScope", Policy{BreakerScope: 5}},
		{"Policy.Hedge.Delay", Policy{Hedge: HedgeSettings{Delay: -1}}},
		{"Policy.Hedge.Max", Policy{Hedge: HedgeSettings{Max: 2}}},
		{"Policy.MaxPushback", Policy{MaxPushback: -1}},
	} {
		err := c.p.Validate()
		wantSettingError(t, err, c.field)
	}
}

// recordingBudget is a Budget that allows everything and remembers the
// times it was handed.
type recordingBudget struct {
	mu    sync.Mutex
	times []time.Time
}

func (b *recordingBudget) Withdraw(time.Time, Outcome) (float64, bool) { return 0, true }
func (b *recordingBudget) Refund(time.Time, float64)                   {}

func (b *recordingBudget) Begin(now time.Time) {
	b.mu.Lock()
	b.times = append(b.times, now)
	b.mu.Unlock()
}
func (b *recordingBudget) Record(now time.Time, o Outcome, paid float64) {
	b.mu.Lock()
	b.times = append(b.times, now)
	b.mu.Unlock()
}

// UsesTime says recordingBudget looks at the time.
func (b *recordingBudget) UsesTime() bool { return true }

// untimedBudget says it never looks at the time.
type untimedBudget struct{ recordingBudget }

func (b *untimedBudget) UsesTime() bool { return false }

// plainBudget does not say.
type plainBudget struct{ Budget }

// readCounter counts the Guard's clock reads.
type readCounter struct {
	*fakeClock
	reads atomic.Int64
}

func (c *readCounter) Now() time.Time { c.reads.Add(1); return c.fakeClock.Now() }

// TestBudgetTimeIsOptional: a Budget is handed the time the Guard reads
// unless it says (UsesTime) it never looks at it; then the Guard does not
// read its clock for it on the success path. No budget kind is named in
// the Policy.
func TestBudgetTimeIsOptional(t *testing.T) {
	for _, c := range []struct {
		name   string
		budget func(*recordingBudget) Budget
		timed  bool
	}{
		{"uses time", func(r *recordingBudget) Budget { return r }, true},
		{"does not say", func(r *recordingBudget) Budget { return plainBudget{r} }, true},
		{"untimed", nil, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			clk := &readCounter{fakeClock: newFakeClock(t0)}
			rec := &recordingBudget{}
			var b Budget
			if c.budget != nil {
				b = c.budget(rec)
			} else {
				u := &untimedBudget{}
				rec, b = &u.recordingBudget, u
			}
			g, err := NewGuard(GuardSettings{Policy: Policy{Budget: b}, Clock: clk})
			if err != nil {
				t.Fatal(err)
			}
			if err := g.Do(context.Background(), func(context.Context) error { return nil }); err != nil {
				t.Fatal(err)
			}
			if len(rec.times) != 2 {
				t.Fatalf("the budget was called %d times, want Begin and Record", len(rec.times))
			}
			for _, at := range rec.times {
				if c.timed != at.Equal(t0) || !c.timed && !at.IsZero() {
					t.Errorf("handed %v (timed %v)", at, c.timed)
				}
			}
			if reads := clk.reads.Load(); c.timed != (reads > 0) {
				t.Errorf("%d clock reads, timed %v", reads, c.timed)
			}
		})
	}
}
