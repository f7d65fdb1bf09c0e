package resilgrpc

import (
	"context"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	testpb "google.golang.org/grpc/interop/grpc_testing"

	"github.com/retrystorm/retrystorm/resil"
	"github.com/retrystorm/retrystorm/resil/budget"
	"github.com/retrystorm/retrystorm/resil/resilgrpc/grpcconfig"
)

func mustConfig(t *testing.T, js string) *grpcconfig.Config {
	t.Helper()
	c, err := grpcconfig.Parse([]byte(js), grpcconfig.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestFromServiceConfig checks the settings built from each kind of entry,
// and that every method pays into the channel's one throttle.
func TestFromServiceConfig(t *testing.T) {
	c := mustConfig(t, `{"methodConfig": [
	  {"name": [{"service": "grpc.testing.TestService", "method": "UnaryCall"}], "timeout": "3s", "waitForReady": true,
	   "retryPolicy": {"maxAttempts": 3, "initialBackoff": "0.1s", "maxBackoff": "1s", "backoffMultiplier": 2,
	                   "retryableStatusCodes": ["UNAVAILABLE", "ABORTED"]}},
	  {"name": [{"service": "kv.Store"}], "hedgingPolicy": {"maxAttempts": 3, "hedgingDelay": "0.05s", "nonFatalStatusCodes": ["UNAVAILABLE"]}}
	], "retryThrottling": {"maxTokens": 4, "tokenRatio": 1}}`)
	set, err := FromServiceConfig(c, ConfigOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u := set.Methods["/grpc.testing.TestService/UnaryCall"]
	if u.Guard == nil || u.Timeout != 3*time.Second || !u.WaitForReady ||
		!slices.Equal(u.RetryCodes, []codes.Code{codes.Unavailable, codes.Aborted}) || !slices.Equal(u.FailureCodes, u.RetryCodes) {
		t.Fatalf("UnaryCall: %+v", u)
	}
	p := u.Guard.Policy()
	if p.MaxRetries != 2 || !p.PushbackRestarts || p.Backoff.Base != 100*time.Millisecond {
		t.Errorf("UnaryCall policy %+v", p)
	}
	h := set.Methods["/kv.Store/"].Guard.Policy()
	if h.Hedge != (resil.HedgeSettings{Delay: 50 * time.Millisecond, Max: 2}) || h.MaxRetries != 0 {
		t.Errorf("kv.Store policy %+v", h)
	}
	th, ok := p.Budget.(*budget.GRPCThrottle)
	if !ok || h.Budget != p.Budget || set.Default.Guard.Policy().Budget != p.Budget {
		t.Fatalf("the entries must share one throttle: %T %v %v", p.Budget, h.Budget, set.Default.Guard.Policy().Budget)
	}
	if len(set.Default.RetryCodes) != 0 || set.Default.RetryCodes == nil || set.Default.Guard.Policy().MaxRetries != 0 {
		t.Errorf("default %+v: no retries, no failure codes", set.Default)
	}

	// Failures take tokens; a method no entry names still pays in its
	// successes, as in grpc-go.
	s := startServer(t, &server{unary: failFirst(3)})
	tc := dial(t, s, mustClient(t, set))
	tc.UnaryCall(context.Background(), req("x")) // U, U(2 tokens: throttled)
	if got := th.Tokens(time.Time{}); got != 2 {
		t.Fatalf("tokens %v after two failures", got)
	}
	if _, err := tc.EmptyCall(context.Background(), &testpb.Empty{}); err != nil {
		t.Fatal(err)
	}
	if got := th.Tokens(time.Time{}); got != 3 {
		t.Errorf("tokens %v: the unnamed method's success must pay into the throttle", got)
	}
}

// TestFromServiceConfigOptions: a budget replaces the throttle, a breaker
// is shared, and idempotency may be narrowed.
func TestFromServiceConfigOptions(t *testing.T) {
	c := mustConfig(t, `{"methodConfig": [{"name": [{}], "retryPolicy": {"maxAttempts": 2, "initialBackoff": "1s",
	  "maxBackoff": "1s", "backoffMultiplier": 1, "retryableStatusCodes": ["UNAVAILABLE"]}}],
	  "retryThrottling": {"maxTokens": 4, "tokenRatio": 1}}`)
	budget, _ := budget.NewTokenBucket(budget.TokenBucketSettings{Ratio: 0.1, Funding: budget.FundedByRequest})
	br, _ := resil.NewBreaker(resil.BreakerSettings{Threshold: 3})
	set, err := FromServiceConfig(c, ConfigOptions{Guard: resil.GuardSettings{
		Idempotency: resil.NotIdempotent, AttemptTimeout: time.Second,
		Policy: resil.Policy{Budget: budget, Breaker: br}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(set.Methods) != 0 || set.Default.Guard == nil {
		t.Fatalf("the [{}] entry is the default: %+v", set)
	}
	p := set.Default.Guard.Policy()
	if p.Budget != budget || p.Breaker != br || p.MaxRetries != 1 {
		t.Errorf("policy %+v", p)
	}
	s := startServer(t, &server{unary: failFirst(1)})
	tc := dial(t, s, mustClient(t, set))
	tc.UnaryCall(context.Background(), req("x"))
	if n := len(s.seen()); n != 1 {
		t.Errorf("%d attempts of a call that is not idempotent", n)
	}
	if _, err := FromServiceConfig(nil, ConfigOptions{}); err == nil {
		t.Error("a nil config was accepted")
	}
}
