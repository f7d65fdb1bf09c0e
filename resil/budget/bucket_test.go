package budget

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/resil"
)

// budgetStep is one step of a budget test on the fixed time grid.
type budgetStep struct {
	at     float64 // seconds after t0
	op     string  // begin, success, failure, retry, retry-timeout, refund
	arg    float64 // refund: the amount
	ok     bool    // retry: allowed?
	tokens float64 // balance after the step
}

func runBudgetSteps(t *testing.T, b resil.Budget, steps []budgetStep) {
	t.Helper()
	tr := b.(TokenReporter)
	for i, s := range steps {
		now := ts(s.at)
		switch s.op {
		case "begin":
			b.Begin(now)
		case "success":
			b.Record(now, resil.OutcomeSuccess, s.arg)
		case "failure":
			b.Record(now, resil.OutcomeFailure, 0)
		case "timeout":
			b.Record(now, resil.OutcomeTimeout, 0)
		case "retry", "retry-timeout":
			after := resil.OutcomeFailure
			if s.op == "retry-timeout" {
				after = resil.OutcomeTimeout
			}
			_, ok := b.Withdraw(now, after)
			if ok != s.ok {
				t.Fatalf("step %d (%s at %vs): allowed = %v, want %v", i, s.op, s.at, ok, s.ok)
			}
		case "refund":
			b.Refund(now, s.arg)
		default:
			t.Fatalf("step %d: unknown op %q", i, s.op)
		}
		if got := tr.Tokens(now); !near(got, s.tokens) {
			t.Fatalf("step %d (%s at %vs): tokens = %v, want %v", i, s.op, s.at, got, s.tokens)
		}
	}
}

func TestTokenBucketFundedBySuccess(t *testing.T) {
	b := mustTB(t, TokenBucketSettings{Ratio: 0.5, Funding: FundedBySuccess, MinTokens: 2, MaxTokens: 3, TimeoutCost: 2})
	runBudgetSteps(t, b, []budgetStep{
		{at: 0, op: "retry", ok: true, tokens: 1},    // the floor pays
		{at: 0, op: "retry", ok: true, tokens: 0},    //
		{at: 0, op: "retry", ok: false, tokens: 0},   // floor spent
		{at: 1, op: "begin", tokens: 0},              // requests do not fund it
		{at: 1, op: "failure", tokens: 0},            // nor failures
		{at: 1, op: "success", tokens: 0.5},          // a success adds Ratio
		{at: 2, op: "retry", ok: false, tokens: 0.5}, // half a token is not a retry
		{at: 2, op: "success", tokens: 1},
		{at: 2, op: "retry", ok: true, tokens: 0},
		{at: 3, op: "refund", arg: 1, tokens: 1}, // abandoned retry: given back
		{at: 4, op: "success", tokens: 1.5},
		{at: 4, op: "success", tokens: 2},
		{at: 4, op: "retry-timeout", ok: true, tokens: 0}, // a timeout costs 2
		{at: 5, op: "success", tokens: 0.5},
		{at: 5, op: "success", tokens: 1},
		{at: 5, op: "retry-timeout", ok: false, tokens: 1},
		{at: 6, op: "success", tokens: 1.5},
		{at: 6, op: "success", tokens: 2},
		{at: 6, op: "success", tokens: 2.5},
		{at: 6, op: "success", tokens: 3},
		{at: 6, op: "success", tokens: 3}, // capped at MaxTokens
		{at: 7, op: "refund", arg: 1, tokens: 3},
	})
}

func TestTokenBucketFundedByRequest(t *testing.T) {
	b := mustTB(t, TokenBucketSettings{Ratio: 0.25, Funding: FundedByRequest, MaxTokens: 1})
	runBudgetSteps(t, b, []budgetStep{
		{at: 0, op: "retry", ok: false, tokens: 0}, // no floor
		{at: 0, op: "success", tokens: 0},          // successes do not fund it
		{at: 0, op: "begin", tokens: 0.25},
		{at: 0, op: "begin", tokens: 0.5},
		{at: 0, op: "begin", tokens: 0.75},
		{at: 0, op: "retry", ok: false, tokens: 0.75},
		{at: 0, op: "begin", tokens: 1},
		{at: 0, op: "begin", tokens: 1}, // capped
		{at: 1, op: "retry", ok: true, tokens: 0},
	})
}

func TestTokenBucketFixedPoint(t *testing.T) {
	// Ten deposits of 0.1 make exactly one token: the balance is fixed
	// point, so runs are identical on every platform.
	b := mustTB(t, TokenBucketSettings{Ratio: 0.1, Funding: FundedByRequest})
	for range 10 {
		b.Begin(t0)
	}
	if _, ok := b.Withdraw(t0, resil.OutcomeFailure); !ok {
		t.Fatalf("10 × 0.1 did not pay for one retry (tokens %v)", b.Tokens(t0))
	}
	if got := b.Tokens(t0); got != 0 {
		t.Fatalf("tokens = %v, want exactly 0", got)
	}
	if got := b.RetryShare(); !near(got, 0.1) {
		t.Fatalf("RetryShare = %v", got)
	}
}

func TestTokenBucketSettingErrors(t *testing.T) {
	ok := TokenBucketSettings{Ratio: 0.1, Funding: FundedBySuccess}
	for _, c := range []struct {
		field string
		edit  func(*TokenBucketSettings)
	}{
		{"TokenBucketSettings.Ratio", func(s *TokenBucketSettings) { s.Ratio = 0 }},
		{"TokenBucketSettings.Ratio", func(s *TokenBucketSettings) { s.Ratio = 1.5 }},
		{"TokenBucketSettings.Ratio", func(s *TokenBucketSettings) { s.Ratio = math.NaN() }},
		{"TokenBucketSettings.Ratio", func(s *TokenBucketSettings) { s.Ratio = 1e-9 }},
		{"TokenBucketSettings.Funding", func(s *TokenBucketSettings) { s.Funding = FundingUnset }},
		{"TokenBucketSettings.Funding", func(s *TokenBucketSettings) { s.Funding = 9 }},
		{"TokenBucketSettings.MaxTokens", func(s *TokenBucketSettings) { s.MaxTokens = -1 }},
		{"TokenBucketSettings.MaxTokens", func(s *TokenBucketSettings) { s.MaxTokens = math.Inf(1) }},
		{"TokenBucketSettings.MinTokens", func(s *TokenBucketSettings) { s.MinTokens = 101 }},
		{"TokenBucketSettings.MinTokens", func(s *TokenBucketSettings) { s.MinTokens = -1 }},
		{"TokenBucketSettings.RetryCost", func(s *TokenBucketSettings) { s.RetryCost = -1 }},
		{"TokenBucketSettings.TimeoutCost", func(s *TokenBucketSettings) { s.TimeoutCost = 1000 }},
	} {
		s := ok
		c.edit(&s)
		_, err := NewTokenBucket(s)
		wantSettingError(t, err, c.field)
	}
	if _, err := NewTokenBucket(ok); err != nil {
		t.Fatal(err)
	}
}

func TestSettingErrorMessage(t *testing.T) {
	_, err := NewTokenBucket(TokenBucketSettings{Funding: FundedBySuccess})
	want := "resil: TokenBucketSettings.Ratio = 0: must be in (0, 1]; it has no default"
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v, want %q", err, want)
	}
}

func TestWindowBudget(t *testing.T) {
	// TTL 10s in ten 1s slots; floor 0.2/s × 10s = 2 retries per window.
	w, err := NewWindow(WindowSettings{Ratio: 0.5, Funding: FundedByRequest, MinRetriesPerSecond: 0.2, TTL: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	steps := []budgetStep{
		{at: 0, op: "retry", ok: true, tokens: 1}, // the floor
		{at: 0, op: "retry", ok: true, tokens: 0},
		{at: 0, op: "retry", ok: false, tokens: 0},
	}
	for range 10 { // ten requests: the allowance is 5, 2 spent
		steps = append(steps, budgetStep{at: 1, op: "begin"})
	}
	steps[len(steps)-1].tokens = 3
	for i := range steps[3 : len(steps)-1] {
		s := &steps[3+i]
		s.tokens = math.Max(0, float64(i+1)*0.5-2)
	}
	steps = append(steps,
		budgetStep{at: 2, op: "retry", ok: true, tokens: 2},
		budgetStep{at: 2, op: "retry", ok: true, tokens: 1},
		budgetStep{at: 2, op: "refund", arg: 1, tokens: 2}, // newest retry leaves the window
		budgetStep{at: 2, op: "success", tokens: 2},        // successes do not fund it
		// At 10s the retries of t=0 have left; the deposits of t=1 still
		// count: allowance 5, retries 1 (t=2).
		budgetStep{at: 10, op: "retry", ok: true, tokens: 3},
		// At 11s the deposits left: the floor again, 2 retries at t=2 and t=10.
		budgetStep{at: 11, op: "retry", ok: false, tokens: 0},
		// A whole quiet window later: no debt, the floor renews.
		budgetStep{at: 30, op: "retry", ok: true, tokens: 1},
		// A time earlier than one seen counts as that one.
		budgetStep{at: 5, op: "retry", ok: true, tokens: 0},
	)
	runBudgetSteps(t, w, steps)
	if got := w.RetryShare(); got != 0.5 {
		t.Fatalf("RetryShare = %v", got)
	}
}

func TestWindowBudgetFundedBySuccessAndCosts(t *testing.T) {
	w, err := NewWindow(WindowSettings{Ratio: 1, Funding: FundedBySuccess, TimeoutCost: 2})
	if err != nil {
		t.Fatal(err)
	}
	runBudgetSteps(t, w, []budgetStep{
		{at: 0, op: "begin", tokens: 0},
		{at: 0, op: "success", tokens: 1},
		{at: 0, op: "retry-timeout", ok: false, tokens: 1},
		{at: 0, op: "success", tokens: 2},
		{at: 0, op: "retry-timeout", ok: true, tokens: 0},
	})
}

func TestWindowBudgetBeforeEpoch(t *testing.T) {
	// Virtual clocks often start at the zero Time, before 1970: the window
	// must work there too (negative slot indices).
	w, err := NewWindow(WindowSettings{Ratio: 1, Funding: FundedByRequest, TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var zero time.Time
	for i := range 30 {
		now := zero.Add(time.Duration(i) * 150 * time.Millisecond)
		w.Begin(now)
		if _, ok := w.Withdraw(now, resil.OutcomeFailure); !ok {
			t.Fatalf("step %d: refused", i)
		}
		w.Refund(now, 1)
	}
}

func TestWindowBudgetSettingErrors(t *testing.T) {
	ok := WindowSettings{Ratio: 0.1, Funding: FundedByRequest}
	for _, c := range []struct {
		field string
		edit  func(*WindowSettings)
	}{
		{"WindowSettings.Ratio", func(s *WindowSettings) { s.Ratio = 0 }},
		{"WindowSettings.Funding", func(s *WindowSettings) { s.Funding = 0 }},
		{"WindowSettings.TTL", func(s *WindowSettings) { s.TTL = time.Microsecond }},
		{"WindowSettings.MinRetriesPerSecond", func(s *WindowSettings) { s.MinRetriesPerSecond = -1 }},
		{"WindowSettings.RetryCost", func(s *WindowSettings) { s.RetryCost = -1 }},
		{"WindowSettings.TimeoutCost", func(s *WindowSettings) { s.TimeoutCost = math.NaN() }},
	} {
		s := ok
		c.edit(&s)
		_, err := NewWindow(s)
		wantSettingError(t, err, c.field)
	}
}

func TestNoBudget(t *testing.T) {
	var b None
	b.Begin(t0)
	b.Record(t0, resil.OutcomeFailure, 0)
	for range 1000 {
		if c, ok := b.Withdraw(t0, resil.OutcomeTimeout); !ok || c != 0 {
			t.Fatal("None refused or charged")
		}
	}
	b.Refund(t0, 1)
}

// TestFunding: Funding's words, read and written as resil's enums are:
// every value marshals to its String and reads back as itself, the first
// value past the table has no name, and an unknown word is refused with
// the list of words and leaves the value as it was.
func TestFunding(t *testing.T) {
	for i, want := range []string{"unset", "success", "request", "answer"} {
		f := Funding(i)
		b, err := f.MarshalText()
		var back Funding
		if f.String() != want || err != nil || string(b) != want || back.UnmarshalText(b) != nil || back != f {
			t.Errorf("Funding(%d): String %q, MarshalText %q, %v; reads back as %v", i, f.String(), b, err, back)
		}
	}
	if b, err := Funding(4).MarshalText(); err == nil || Funding(4).String() != "Funding(4)" {
		t.Errorf("Funding(4): MarshalText %q, %v; String %q", b, err, Funding(4).String())
	}
	f := FundedByRequest
	err := f.UnmarshalText([]byte("Nope"))
	if err == nil || !strings.Contains(err.Error(), "resil: Funding = Nope: want one of unset, success, request, answer") || f != FundedByRequest {
		t.Errorf("unknown word: %v, %v", f, err)
	}
}

// TestWindowBudgetTower is the decision table of tower's TpsBudget
// (tower 0.5.3, tower/src/retry/budget/tps_budget.rs), which Linkerd's
// ServiceProfile retry budget is (linkerd2-proxy v2.366,
// linkerd/service-profiles/src/proto.rs builds it): a deposit adds 1, a
// withdrawal takes n = ⌊1/ratio⌋ while the balance is at least n, and the
// balance starts at the reserve min_per_sec × ⌊ttl in seconds⌋ × n. So the
// retries a window allows are ⌊deposits/n⌋ + min_per_sec × ttl: the sum,
// not the larger, of the two. Only answers that are not retried deposit
// (linkerd/app/outbound/src/http/retry.rs: a retryable failure withdraws
// and never deposits).
func TestWindowBudgetTower(t *testing.T) {
	for _, c := range []struct {
		name     string
		ratio    float64
		min      float64
		ttl      time.Duration
		deposits int // answers recorded first
		outcome  resil.Outcome
		want     int // retries allowed at once
	}{
		{"linkerd default, no traffic: the floor", 0.2, 10, 10 * time.Second, 0, resil.OutcomeSuccess, 100},
		{"linkerd default: floor plus ratio", 0.2, 10, 10 * time.Second, 50, resil.OutcomeSuccess, 110},
		{"0.4 acts as 0.5", 0.4, 1, 10 * time.Second, 10, resil.OutcomeSuccess, 15},
		{"0.3 acts as 1/3", 0.3, 0, 10 * time.Second, 9, resil.OutcomeSuccess, 3},
		{"fractional floor truncated", 0.2, 1.9, 10 * time.Second, 0, resil.OutcomeSuccess, 10},
		{"ttl truncated to whole seconds", 0.2, 1, 2500 * time.Millisecond, 0, resil.OutcomeSuccess, 2},
		{"outage: retried failures deposit nothing", 0.2, 10, 10 * time.Second, 500, resil.OutcomeThrottled, 100},
		{"a failure not retried deposits", 0.2, 10, 10 * time.Second, 50, resil.OutcomeTimeout, 110},
	} {
		t.Run(c.name, func(t *testing.T) {
			w, err := NewWindow(WindowSettings{Ratio: c.ratio, Funding: FundedByAnswer,
				MinRetriesPerSecond: c.min, TTL: c.ttl, Tower: true, Retried: []resil.Outcome{resil.OutcomeFailure, resil.OutcomeThrottled}})
			if err != nil {
				t.Fatal(err)
			}
			for range c.deposits {
				w.Record(t0, c.outcome, 0)
			}
			got := 0
			for ; got < 10_000; got++ {
				if _, ok := w.Withdraw(t0, resil.OutcomeFailure); !ok {
					break
				}
			}
			if got != c.want {
				t.Fatalf("%d retries allowed, want %d", got, c.want)
			}
		})
	}
	if _, err := NewWindow(WindowSettings{Ratio: 0.2, Funding: FundedByAnswer, TTL: 500 * time.Millisecond, Tower: true}); err == nil {
		t.Fatal("Tower took a TTL under 1s: want an error naming it")
	}
	if _, err := NewTokenBucket(TokenBucketSettings{Ratio: 0.2, Funding: FundedByAnswer}); err == nil {
		t.Fatal("a token bucket took FundedByAnswer")
	}
}
