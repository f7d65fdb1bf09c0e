package scenario

import (
	"errors"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/resil"
	"github.com/retrystorm/retrystorm/resil/admission"
	"github.com/retrystorm/retrystorm/resil/budget"
)

func loadKinds(t *testing.T) *Scenario {
	t.Helper()
	s, err := Load(filepath.Join("testdata", "kinds.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func newPolicy(t *testing.T, f Fleet) resil.Policy {
	t.Helper()
	p, err := f.NewPolicy()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestNewPolicyStorm(t *testing.T) {
	naive := newPolicy(t, storm.Fleets[0])
	if naive.Budget != nil || naive.Breaker != nil {
		t.Errorf("naive: budget %v, breaker %v; want neither", naive.Budget, naive.Breaker)
	}
	wantBackoff := resil.Backoff{
		Schedule: resil.Exponential, Base: 100 * time.Millisecond, Cap: 10 * time.Second,
		Multiplier: 2, Jitter: resil.NoJitter,
	}
	if naive.MaxRetries != 3 || naive.Backoff != wantBackoff {
		t.Errorf("naive: %d retries, backoff %+v; want 3 and %+v", naive.MaxRetries, naive.Backoff, wantBackoff)
	}

	guarded := newPolicy(t, storm.Fleets[1])
	bucket, ok := guarded.Budget.(*budget.TokenBucket)
	if !ok {
		t.Fatalf("guarded budget is %T, want *budget.TokenBucket", guarded.Budget)
	}
	if got := bucket.Tokens(time.Time{}); got != 10 {
		t.Errorf("bucket starts with %v tokens, want min_tokens, 10", got)
	}
	if got := bucket.RetryShare(); got != 0.1 {
		t.Errorf("bucket RetryShare = %v, want 0.1", got)
	}
	bs := guarded.Breaker.Settings()
	if bs.Rule != resil.ConsecutiveFailures || bs.Threshold != 5 || bs.Cooldown != 5*time.Second || bs.Probes != 1 || bs.Name != "guarded" {
		t.Errorf("guarded breaker settings = %+v", bs)
	}
	if guarded.BreakerScope != resil.GuardAll || guarded.Backoff.Jitter != resil.FullJitter {
		t.Errorf("guarded: scope %v, jitter %v; want all and full", guarded.BreakerScope, guarded.Backoff.Jitter)
	}
	if got := guarded.Ceiling(100); math.Abs(got-110) > 1e-9 {
		t.Errorf("guarded ceiling at 100/s = %v, want 110", got)
	}
}

func TestNewPolicyKinds(t *testing.T) {
	s := loadKinds(t)
	byName := map[string]resil.Policy{}
	for _, f := range s.Fleets {
		byName[f.Name] = newPolicy(t, f)
	}

	count := byName["count only"]
	if count.MaxRetries != resil.Unlimited || count.Backoff.Jitter != resil.FactorJitter || count.Backoff.Factor != 0.25 || count.Backoff.Schedule != resil.Fixed {
		t.Errorf("count only: %+v", count)
	}

	bucket := byName["bucket by request"]
	if _, ok := bucket.Budget.(*budget.TokenBucket); !ok {
		t.Errorf("bucket by request budget is %T", bucket.Budget)
	}
	if bucket.BreakerScope != resil.GuardRetries {
		t.Errorf("scope retries became %v", bucket.BreakerScope)
	}
	if bucket.Hedge != (resil.HedgeSettings{Delay: 100 * time.Millisecond, Max: 2}) {
		t.Errorf("hedge = %+v", bucket.Hedge)
	}
	bs := bucket.Breaker.Settings()
	if bs.Rule != resil.CountWindow || bs.WindowSize != 50 || bs.MinCalls != 20 || bs.FailureRate != 0.5 ||
		bs.SlowCall != 200*time.Millisecond || bs.SlowCallRate != 0.8 || bs.Cooldown != 2*time.Second ||
		bs.MaxCooldown != 30*time.Second || bs.Probes != 3 {
		t.Errorf("count window settings = %+v", bs)
	}

	window := byName["window"]
	if _, ok := window.Budget.(*budget.Window); !ok {
		t.Errorf("window budget is %T", window.Budget)
	}
	if ws := window.Breaker.Settings(); ws.Rule != resil.TimeWindow || ws.WindowPeriod != 10*time.Second || ws.MinCalls != 5 {
		t.Errorf("time window settings = %+v", ws)
	}
	if window.Backoff.Jitter != resil.DecorrelatedJitter || window.Backoff.Schedule != resil.NoDelay {
		t.Errorf("window backoff = %+v", window.Backoff)
	}

	if g, ok := byName["grpc"].Budget.(*budget.GRPCThrottle); !ok || g.Tokens(time.Time{}) != 10 {
		t.Errorf("grpc budget = %T %v, want a full *budget.GRPCThrottle of 10", byName["grpc"].Budget, byName["grpc"].Budget)
	}
	if q, ok := byName["true"].Budget.(*budget.AWSQuota); !ok || q.Tokens(time.Time{}) != 50 || q.RetryShare() != 0.2 {
		t.Errorf("aws budget = %T %v, want a full *budget.AWSQuota of 50 with share 1/5", byName["true"].Budget, byName["true"].Budget)
	}
	if byName["true"].Pacer != nil {
		t.Error("aws (standard mode) has a pacer")
	}

	envoy := byName["envoy"]
	cb, ok := envoy.Budget.(*budget.Concurrency)
	if !ok {
		t.Fatalf("envoy budget is %T, want *budget.Concurrency", envoy.Budget)
	}
	for range 50 {
		cb.Begin(time.Time{})
	}
	if got := cb.Tokens(time.Time{}); got != 10 {
		t.Errorf("envoy budget with 50 in flight allows %v retries at once, want 20%% = 10", got)
	}

	adaptive := byName["aws adaptive"]
	if q, ok := adaptive.Budget.(*budget.AWSQuota); !ok || q.Tokens(time.Time{}) != 500 {
		t.Errorf("aws adaptive budget = %T %v, want a full *budget.AWSQuota of 500", adaptive.Budget, adaptive.Budget)
	}
	if l, ok := adaptive.Pacer.(*budget.ClientRateLimiter); !ok || l.State().Enabled {
		t.Errorf("aws adaptive pacer = %+v, want one, not yet throttled", adaptive.Pacer)
	}
}

// TestNewPolicyFresh checks that every call makes its own budget and
// breaker: the clients of a fleet do not share them.
func TestNewPolicyFresh(t *testing.T) {
	f := storm.Fleets[1]
	a, b := newPolicy(t, f), newPolicy(t, f)
	if a.Budget == b.Budget || a.Breaker == b.Breaker {
		t.Fatal("two policies share a budget or a breaker")
	}
	var now time.Time
	for range 10 {
		a.Budget.Withdraw(now, resil.OutcomeFailure)
		a.Breaker.Record(now, mustAllow(t, a.Breaker, now), resil.OutcomeFailure, 0)
	}
	if got := b.Budget.(*budget.TokenBucket).Tokens(now); got != 10 {
		t.Errorf("spending one bucket left the other with %v tokens, want 10", got)
	}
	if a.Breaker.State(now) != resil.StateOpen || b.Breaker.State(now) != resil.StateClosed {
		t.Errorf("breakers: %v and %v, want open and closed", a.Breaker.State(now), b.Breaker.State(now))
	}
}

func mustAllow(t *testing.T, b *resil.Breaker, now time.Time) resil.Permit {
	p, _ := b.Allow(now)
	return p
}

func TestNewPolicyRefuses(t *testing.T) {
	for _, tt := range []struct {
		name string
		f    Fleet
		want string
	}{
		{"bucket without ratio", Fleet{Name: "x", Budget: Budget{Use: BudgetTokenBucket, TokenBucket: budget.TokenBucketSettings{Funding: budget.FundedBySuccess}}}, "Ratio"},
		{"unknown budget", Fleet{Name: "x", Budget: Budget{Use: "leaky"}}, `unknown budget use "leaky"`},
		{"unknown jitter", Fleet{Name: "x", Retry: Retry{Backoff: Backoff{Jitter: "wobbly"}}}, `unknown jitter "wobbly"`},
		{"breaker without threshold", Fleet{Name: "x", Breaker: Breaker{Use: BreakerConsecutive}}, "Threshold"},
		{"negative retries", Fleet{Name: "x", Retry: Retry{MaxRetries: -2}}, "MaxRetries"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.f.NewPolicy()
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), `fleet "x"`) {
				t.Errorf("NewPolicy error = %v, want one naming the fleet and %q", err, tt.want)
			}
		})
	}
}

// TestZeroFleetPolicy checks that the zero kinds read as none: a Fleet
// written in code needs only what it uses.
func TestZeroFleetPolicy(t *testing.T) {
	p, err := Fleet{Name: "bare", Timeout: time.Second}.NewPolicy()
	if err != nil {
		t.Fatal(err)
	}
	if p.Budget != nil || p.Breaker != nil || p.MaxRetries != 0 || p.Backoff != (resil.Backoff{}) {
		t.Errorf("zero fleet policy = %+v, want the zero policy", p)
	}
}

// TestThrottlePolicy: a fleet's throttle becomes the Policy's resil
// Throttler, drawing from the source it is given, so that two policies
// with equal sources refuse alike; its defaults are resil's own.
func TestThrottlePolicy(t *testing.T) {
	s, err := Load(filepath.Join("testdata", "defences.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if s.Fleets[1].Throttle != (Throttle{Use: ThrottleAdaptive, ThrottlerSettings: resil.ThrottlerSettings{K: 2, Window: 2 * time.Minute, Padding: 1, MaxProbability: 1}}) {
		t.Errorf("defaults %+v", s.Fleets[1].Throttle)
	}
	refusals := func(f Fleet, seed uint64) []bool {
		p, err := f.NewPolicyRand(rand.NewPCG(seed, 1))
		if err != nil {
			t.Fatal(err)
		}
		if p.Throttle == nil {
			t.Fatal("no throttle")
		}
		now := time.Unix(0, 0)
		var out []bool
		for i := range 200 {
			now = now.Add(10 * time.Millisecond)
			if i%3 != 0 { // a third of the attempts succeed
				p.Throttle.Record(now, resil.OutcomeFailure)
			} else {
				p.Throttle.Record(now, resil.OutcomeSuccess)
			}
			out = append(out, p.Throttle.Allow(now) != nil)
		}
		return out
	}
	a, b := refusals(s.Fleets[0], 7), refusals(s.Fleets[0], 7)
	if !slices.Equal(a, b) || !slices.Contains(a, true) || !slices.Contains(a, false) {
		t.Errorf("the same source refused differently, or all alike: %v %v", a, b)
	}
	// The file's defaults are resil's: a throttler built from them refuses
	// as one built from the zero settings does.
	zero, err := resil.NewThrottler(resil.ThrottlerSettings{Rand: rand.NewPCG(7, 1)})
	if err != nil {
		t.Fatal(err)
	}
	def := refusals(s.Fleets[1], 7)
	now := time.Unix(0, 0)
	for i := range 200 {
		now = now.Add(10 * time.Millisecond)
		o := resil.OutcomeSuccess
		if i%3 != 0 {
			o = resil.OutcomeFailure
		}
		zero.Record(now, o)
		if got := zero.Allow(now) != nil; got != def[i] {
			t.Fatalf("step %d: zero settings refused %v, the file's defaults %v", i, got, def[i])
		}
	}
	// None: no throttler.
	if p, err := s.Fleets[0].withThrottle(Throttle{Use: ThrottleNone}).NewPolicy(); err != nil || p.Throttle != nil {
		t.Errorf("use: none made %v, %v", p.Throttle, err)
	}
}

func (f Fleet) withThrottle(t Throttle) Fleet { f.Throttle = t; return f }

// TestOriginDefences: the origin's limit is resil's Limiter with the
// file's settings and resil's defaults; the discipline and the service
// estimate come out as the file says.
func TestOriginDefences(t *testing.T) {
	s, err := Load(filepath.Join("testdata", "defences.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	o := s.Origin
	lim, err := o.NewLimiter()
	if err != nil {
		t.Fatal(err)
	}
	got := lim.Settings()
	if got != (admission.VegasLimit{MinLimit: 4, MaxLimit: 200, Probe: 30, Limit: 20, Smoothing: 1}) {
		t.Errorf("limiter %+v", got)
	}
	if d, err := o.QueueDiscipline(); err != nil || d != admission.AdaptiveLIFO {
		t.Errorf("discipline %v, %v", d, err)
	}
	if o.ServiceEstimate() != 120*time.Millisecond {
		t.Errorf("estimate %v", o.ServiceEstimate())
	}
	o.Shed.ServiceTime = 0
	if o.ServiceEstimate() != 100*time.Millisecond {
		t.Errorf("default estimate %v, want workers/capacity = 100ms", o.ServiceEstimate())
	}
	if DefaultLimit(LimitVegas) != (Limit{Use: LimitVegas, Limit: 20, MinLimit: 1, MaxLimit: 1000, Smoothing: 1}) {
		t.Errorf("DefaultLimit(vegas) = %+v", DefaultLimit(LimitVegas))
	}
	o.Limit = Limit{Use: LimitNone}
	if lim, err := o.NewLimiter(); lim != nil || err != nil {
		t.Errorf("use: none made %v, %v", lim, err)
	}
}

// TestBackoffWithoutDelayInResilWords: a base, a cap or a jitter that
// use: none would ignore is refused by the file's loader and by resil in
// the same words (issue 27, 13), the loader reporting resil's reason under
// its own key: one validation, not two copies.
func TestBackoffWithoutDelayInResilWords(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		b    resil.Backoff
	}{
		{"{base: 300ms}", resil.Backoff{Base: 300 * time.Millisecond}},
		{"{cap: 1s}", resil.Backoff{Cap: time.Second}},
		{"{jitter: full}", resil.Backoff{Jitter: resil.FullJitter}},
		{"{jitter: factor, factor: 0.2}", resil.Backoff{Jitter: resil.FactorJitter, Factor: 0.2}},
	} {
		_, err := Parse("t.yaml", []byte(withFleet("    retry: {max_retries: 1, backoff: "+tc.yaml+"}\n")))
		var e *Error
		if !errors.As(err, &e) {
			t.Fatalf("%s: Parse error = %v, want an *Error", tc.yaml, err)
		}
		se, ok := errors.AsType[*resil.SettingError](tc.b.Validate())
		if !ok {
			t.Fatalf("%+v: Validate = %v, want a *resil.SettingError", tc.b, tc.b.Validate())
		}
		if e.Msg != se.Reason {
			t.Errorf("%s: the file is refused with %q, resil with %q", tc.yaml, e.Msg, se.Reason)
		}
		if want := "fleets[0].retry.backoff." + strings.ToLower(strings.TrimPrefix(se.Field, "Backoff.")); e.Field != want {
			t.Errorf("%s: Field = %q, want %q", tc.yaml, e.Field, want)
		}
	}
}

// TestGRPCBudgetCountsRetryableOnly: a fleet's gRPC throttle takes a token
// only for the failures the fleet retries, and never for a timeout that is
// the call's own deadline, as grpc-go v1.85 counts them (stream.go,
// csAttempt.shouldRetry: the status must be retryable; a finished call
// returns before the throttle is asked).
func TestGRPCBudgetCountsRetryableOnly(t *testing.T) {
	throttle := Budget{Use: BudgetGRPC, GRPC: budget.GRPCThrottleSettings{MaxTokens: 10, TokenRatio: 0.1}}
	for _, c := range []struct {
		name  string
		fleet Fleet
		o     resil.Outcome
		taken bool
	}{
		{"retried rejection", Fleet{Timeout: time.Second, Retry: Retry{On: []string{RetryOnRejection}}}, resil.OutcomeThrottled, true},
		{"error not retried", Fleet{Timeout: time.Second, Retry: Retry{On: []string{RetryOnRejection}}}, resil.OutcomeFailure, false},
		{"per-attempt timeout retried", Fleet{Timeout: time.Second, Deadline: 3 * time.Second}, resil.OutcomeTimeout, true},
		{"timeout is the call's deadline", Fleet{Timeout: time.Second, Deadline: time.Second}, resil.OutcomeTimeout, false},
		{"timeout not retried", Fleet{Timeout: time.Second, Retry: Retry{On: []string{RetryOnError}}}, resil.OutcomeTimeout, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := c.fleet
			f.Name, f.Budget, f.Retry.MaxRetries = "g", throttle, 2
			p, err := f.NewPolicy()
			if err != nil {
				t.Fatal(err)
			}
			now := time.Unix(0, 0)
			p.Budget.Record(now, c.o, 0)
			took := p.Budget.(*budget.GRPCThrottle).Tokens(now) < 10
			if took != c.taken {
				t.Fatalf("token taken = %v, want %v", took, c.taken)
			}
		})
	}
}
