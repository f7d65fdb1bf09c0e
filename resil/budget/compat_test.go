package budget

import (
	"errors"
	"testing"

	"github.com/retrystorm/retrystorm/resil"
)

// TestGRPCThrottleA6 checks the throttle against gRFC A6's rule: the token
// count starts at maxTokens and stays in [0, maxTokens]; every failed RPC
// takes 1, every success adds tokenRatio; retries and hedges are allowed
// only while the count is above maxTokens/2.
func TestGRPCThrottleA6(t *testing.T) {
	g, err := NewGRPCThrottle(GRPCThrottleSettings{MaxTokens: 10, TokenRatio: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	runBudgetSteps(t, g, []budgetStep{
		{at: 0, op: "retry", ok: true, tokens: 10}, // starts full; a retry itself costs nothing
		{at: 0, op: "success", tokens: 10},         // never above max
		{at: 0, op: "failure", tokens: 9},
		{at: 0, op: "timeout", tokens: 8}, // a timeout is a failed RPC
		{at: 0, op: "failure", tokens: 7},
		{at: 0, op: "failure", tokens: 6},
		{at: 0, op: "retry", ok: true, tokens: 6}, // 6 > 5
		{at: 0, op: "failure", tokens: 5},
		{at: 0, op: "retry", ok: false, tokens: 5}, // 5 <= 10/2: throttled
		{at: 0, op: "begin", tokens: 5},            // starting an RPC changes nothing
		{at: 0, op: "success", tokens: 5.1},
		{at: 0, op: "retry", ok: true, tokens: 5.1},
	})
	for range 20 {
		g.Record(t0, resil.OutcomeFailure, 0)
	}
	if got := g.Tokens(t0); got != 0 {
		t.Fatalf("tokens = %v, want 0 (never below)", got)
	}
	g.Record(t0, resil.OutcomeIgnored, 0)
	if got := g.Tokens(t0); got != 0 {
		t.Fatalf("an ignored RPC changed the count: %v", got)
	}
	// 51 successes of 0.1 from 0 reach 5.1, exactly (three decimals).
	for range 51 {
		g.Record(t0, resil.OutcomeSuccess, 0)
	}
	if got := g.Tokens(t0); got != 5.1 {
		t.Fatalf("tokens = %v, want 5.1", got)
	}
	if got := g.RetryShare(); got != 0.1 {
		t.Fatalf("RetryShare = %v", got)
	}
}

func TestGRPCThrottleOddMax(t *testing.T) {
	// maxTokens 3: the threshold is 1.5; 2 allows, 1 does not.
	g, _ := NewGRPCThrottle(GRPCThrottleSettings{MaxTokens: 3, TokenRatio: 0.5})
	runBudgetSteps(t, g, []budgetStep{
		{at: 0, op: "failure", tokens: 2},
		{at: 0, op: "retry", ok: true, tokens: 2},
		{at: 0, op: "failure", tokens: 1},
		{at: 0, op: "retry", ok: false, tokens: 1},
		{at: 0, op: "success", tokens: 1.5},
		{at: 0, op: "retry", ok: false, tokens: 1.5}, // equal is not above
		{at: 0, op: "success", tokens: 2},
		{at: 0, op: "retry", ok: true, tokens: 2},
	})
}

func TestGRPCThrottleSettings(t *testing.T) {
	for _, s := range []GRPCThrottleSettings{
		{MaxTokens: 0, TokenRatio: 0.1}, {MaxTokens: 1001, TokenRatio: 0.1},
		{MaxTokens: 10, TokenRatio: 0}, {MaxTokens: 10, TokenRatio: 0.0001},
	} {
		var se *resil.SettingError
		if _, err := NewGRPCThrottle(s); !errors.As(err, &se) {
			t.Errorf("%+v: err = %v, want SettingError", s, err)
		}
	}
}

// TestAWSQuotaStandard checks the quota against the AWS SDKs' standard
// retry mode: 500 tokens to start with and at most; a retry costs 5, or
// 10 after a timeout; no retry when the balance is short; a successful
// retry gives its cost back, and every attempt that succeeds adds 1, a
// retry too (issue 36, row 8: aws-sdk-go-v2 aws/retry/middleware.go,
// handleAttempt, releases the retry token and then the attempt token,
// GetAttemptToken being standard.go's GetInitialToken, which adds
// NoRetryIncrement on success; read at the version with
// LogRetryAttempts and smithy stack values, 2024).
func TestAWSQuotaStandard(t *testing.T) {
	q, err := NewAWSQuota(AWSQuotaSettings{})
	if err != nil {
		t.Fatal(err)
	}
	steps := []budgetStep{
		{at: 0, op: "success", tokens: 500}, // full: capped
		{at: 0, op: "retry", ok: true, tokens: 495},
		{at: 0, op: "retry-timeout", ok: true, tokens: 485},
		{at: 0, op: "success", arg: 5, tokens: 491},  // the retry succeeded: its 5 back, and 1
		{at: 0, op: "success", arg: 10, tokens: 500}, // the timeout retry's 10 back, and 1: capped
		{at: 0, op: "failure", tokens: 500},          // failures cost nothing by themselves
	}
	for i := range 99 {
		steps = append(steps, budgetStep{op: "retry", ok: true, tokens: float64(495 - 5*i)})
	}
	steps = append(steps,
		budgetStep{op: "retry-timeout", ok: false, tokens: 5}, // 10 > 5
		budgetStep{op: "retry", ok: true, tokens: 0},
		budgetStep{op: "retry", ok: false, tokens: 0},
		budgetStep{op: "success", tokens: 1}, // a first attempt: +1
		budgetStep{op: "refund", arg: 5, tokens: 6},
	)
	runBudgetSteps(t, q, steps)
	if got := q.RetryShare(); got != 0.2 {
		t.Fatalf("RetryShare = %v, want 1/5", got)
	}
	if _, err := NewAWSQuota(AWSQuotaSettings{Capacity: -1}); err == nil {
		t.Fatal("negative capacity accepted")
	}
}

// TestGRPCThrottleCountsRetryableOnly is the decision table of grpc-go
// v1.85 (stream.go, csAttempt.shouldRetry, and clientStream.finish): an
// attempt takes a token only when its status is one the retryPolicy
// retries; a non-retryable status and the caller's own deadline (the call
// is finished before the throttle is asked) leave the bucket as it was; a
// successful RPC adds tokenRatio. Here the policy retries UNAVAILABLE
// (throttled) only, and the timeouts are the caller's deadline.
func TestGRPCThrottleCountsRetryableOnly(t *testing.T) {
	for _, c := range []struct {
		name  string
		o     resil.Outcome
		delta float64 // tokens after, less the 10 before
	}{
		{"retryable status", resil.OutcomeThrottled, -1},
		{"non-retryable status", resil.OutcomeFailure, 0},
		{"the caller's own deadline", resil.OutcomeTimeout, 0},
		{"cancelled by the caller", resil.OutcomeIgnored, 0},
		{"success at full bucket", resil.OutcomeSuccess, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			g, err := NewGRPCThrottle(GRPCThrottleSettings{MaxTokens: 10, TokenRatio: 0.5,
				Uncounted: []resil.Outcome{resil.OutcomeFailure, resil.OutcomeTimeout}})
			if err != nil {
				t.Fatal(err)
			}
			g.Record(t0, c.o, 0)
			if got := g.Tokens(t0) - 10; got != c.delta {
				t.Fatalf("tokens changed by %v, want %v", got, c.delta)
			}
		})
	}
	if _, err := NewGRPCThrottle(GRPCThrottleSettings{MaxTokens: 10, TokenRatio: 0.5, Uncounted: []resil.Outcome{resil.OutcomeSuccess}}); err == nil {
		t.Fatal("Uncounted took a success: want an error naming the field")
	}
}

// TestAWSQuotaAdaptiveNoIncrement is the decision table of aws-sdk-go-v2's
// adaptive retry mode as it ships (aws/retry/adaptive.go at
// c213f6605dbc: GetAttemptToken returns the rate limiter's handleResponse
// and GetInitialToken a no-op, so the standard retryer's
// NoRetryIncrement is never paid; GetRetryToken is the standard
// retryer's, whose release gives a successful retry's cost back;
// aws-sdk-go-v2 issue 3550). Capacity 500, a retry 5, after a timeout
// 10: a client that has spent its quota on retries that failed never
// retries again, however many first attempts succeed.
func TestAWSQuotaAdaptiveNoIncrement(t *testing.T) {
	q, err := NewAWSQuota(AWSQuotaSettings{NoIncrement: true})
	if err != nil {
		t.Fatal(err)
	}
	step := func(what string, o resil.Outcome, paid float64, want float64) {
		t.Helper()
		q.Record(t0, o, paid)
		if got := q.Tokens(t0); got != want {
			t.Fatalf("%s: tokens %v, want %v", what, got, want)
		}
	}
	step("a first attempt succeeds", resil.OutcomeSuccess, 0, 500)
	c, ok := q.Withdraw(t0, resil.OutcomeFailure)
	if !ok || c != 5 {
		t.Fatalf("a retry: cost %v, %v; want 5, true", c, ok)
	}
	step("the retry succeeds: its cost comes back", resil.OutcomeSuccess, c, 500)
	for i := range 100 {
		if _, ok := q.Withdraw(t0, resil.OutcomeFailure); !ok {
			t.Fatalf("retry %d refused with a full quota", i+1)
		}
		q.Record(t0, resil.OutcomeFailure, 5)
	}
	if _, ok := q.Withdraw(t0, resil.OutcomeFailure); ok {
		t.Fatal("the 101st net retry was allowed: 500/5 is 100")
	}
	for range 1000 {
		q.Record(t0, resil.OutcomeSuccess, 0)
	}
	if _, ok := q.Withdraw(t0, resil.OutcomeFailure); ok {
		t.Fatal("first attempts that succeeded refilled the quota")
	}
}
