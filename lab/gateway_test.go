package lab

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/resil"
	"github.com/retrystorm/retrystorm/resil/budget"
	"github.com/retrystorm/retrystorm/resil/resilhttp"
	"github.com/retrystorm/retrystorm/scenario"
)

func naiveFleet(timeout time.Duration) scenario.Fleet {
	return scenario.Fleet{
		Name: "naive", Timeout: timeout,
		Retry: scenario.Retry{MaxRetries: 3, Backoff: scenario.Backoff{
			Use: "exponential", Base: 5 * time.Millisecond, Cap: 50 * time.Millisecond, Multiplier: 2, Jitter: "none"}},
		Budget: scenario.Budget{Use: scenario.BudgetNone},
	}
}

func guardedFleet(timeout time.Duration, minTokens float64, threshold int) scenario.Fleet {
	f := naiveFleet(timeout)
	f.Name = "guarded"
	f.Retry.IdempotentOnly = true
	f.Retry.Backoff.Jitter = "full"
	f.Budget = scenario.Budget{Use: scenario.BudgetTokenBucket, TokenBucket: budget.TokenBucketSettings{Ratio: 0.1, Funding: budget.FundedBySuccess, MinTokens: minTokens, MaxTokens: 100, RetryCost: 1, TimeoutCost: 1}}
	if threshold > 0 {
		f.Breaker = scenario.Breaker{Use: scenario.BreakerConsecutive, Threshold: threshold,
			Cooldown: 10 * time.Second, Probes: 1, Scope: "all"}
	}
	return f
}

// startGateway runs a gateway in front of origin until the test ends.
func startGateway(t *testing.T, origin string, f scenario.Fleet) (*Gateway, string) {
	t.Helper()
	u, err := url.Parse(origin)
	if err != nil {
		t.Fatal(err)
	}
	g, err := NewGateway(GatewayConfig{Fleet: f, Clients: 1, Origin: u, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	return g, startServer(t, g.Handler())
}

func failingOrigin() scenario.Origin {
	o := queueOrigin(4, 400)
	o.ErrorRate = 1
	return o
}

func TestGatewayNaiveRetriesEveryFailure(t *testing.T) {
	_, origin := startOrigin(t, OriginConfig{Origin: failingOrigin()})
	_, gw := startGateway(t, origin, naiveFleet(time.Second))
	c := testClient(t)
	r := send(c, "GET", gw, 5*time.Second)
	if r.status != http.StatusServiceUnavailable {
		t.Fatalf("status %d (%v), want the origin's 503 after the retries", r.status, r.err)
	}
	if a, f, s := r.header.Get(AttemptsHeader), r.header.Get(FailedHeader), r.header.Get(StopHeader); a != "4" || f != "4" || s != "retries_exhausted" {
		t.Errorf("attempts %s, failed %s, stop %s; want 4, 4, retries_exhausted", a, f, s)
	}
	m := send(c, "GET", origin+"/metrics", time.Second)
	if miss := contains(m.body, `retrystorm_origin_attempts_total{kind="first"} 1`, `retrystorm_origin_attempts_total{kind="retry"} 3`); len(miss) > 0 {
		t.Errorf("the origin did not see one first attempt and three retries: %q", miss)
	}
}

func TestGatewayBudgetRefusesRetries(t *testing.T) {
	_, origin := startOrigin(t, OriginConfig{Origin: failingOrigin()})
	g, gw := startGateway(t, origin, guardedFleet(time.Second, 0, 0))
	r := send(testClient(t), "GET", gw, 5*time.Second)
	if r.header.Get(StopHeader) != "budget" || r.header.Get(AttemptsHeader) != "1" {
		t.Errorf("stop %q after %s attempts, want budget after 1", r.header.Get(StopHeader), r.header.Get(AttemptsHeader))
	}
	if d := g.Counts().BudgetDenials; d != 1 {
		t.Errorf("budget denials %d, want 1", d)
	}
}

// TestGatewayStopIsResilsReason: the stop the gateway reports is the one
// the Guard stopped with, not one worked out from what it must have seen:
// a retry that cannot start before the caller's deadline is a deadline,
// with a budget that would have paid for it.
func TestGatewayStopIsResilsReason(t *testing.T) {
	_, origin := startOrigin(t, OriginConfig{Origin: failingOrigin()})
	f := guardedFleet(time.Second, 10, 0)
	f.Retry.Backoff = scenario.Backoff{Use: "fixed", Base: 500 * time.Millisecond, Jitter: "none"}
	_, gw := startGateway(t, origin, f)
	r := send(testClient(t), "GET", gw, 5*time.Second, TimeoutHeader, "300m")
	if r.header.Get(StopHeader) != "deadline" || r.header.Get(AttemptsHeader) != "1" {
		t.Errorf("stop %q after %s attempts, want deadline after 1 (a 500 ms backoff does not fit in 300 ms)",
			r.header.Get(StopHeader), r.header.Get(AttemptsHeader))
	}
}

func TestGatewayBreakerFallback(t *testing.T) {
	_, origin := startOrigin(t, OriginConfig{Origin: failingOrigin()})
	g, gw := startGateway(t, origin, guardedFleet(time.Second, 10, 2))
	c := testClient(t)
	// Two failures in a row open the breaker, which refuses the next retry.
	first := send(c, "GET", gw, 5*time.Second)
	if first.header.Get(StopHeader) != "breaker" || first.header.Get(FallbackHeader) == "" {
		t.Errorf("first call: stop %q, fallback %q; want the breaker's fallback after two failures",
			first.header.Get(StopHeader), first.header.Get(FallbackHeader))
	}
	r := send(c, "GET", gw, 5*time.Second)
	if r.status != http.StatusOK || r.header.Get(FallbackHeader) == "" || r.header.Get(AttemptsHeader) != "0" || r.took > 200*time.Millisecond {
		t.Errorf("with the breaker open: %d, fallback %q, %s attempts, after %v; want a fast fallback and nothing sent",
			r.status, r.header.Get(FallbackHeader), r.header.Get(AttemptsHeader), r.took)
	}
	if g.OpenShare(time.Now()) != 1 {
		t.Error("the client's breaker is not open")
	}
	m := send(c, "GET", gw+"/metrics", time.Second)
	if miss := contains(m.body, "retrystorm_gateway_fallbacks_total 2", `resil_breaker_state{name="guarded-00"} 1`, "retrystorm_gateway_breakers_open 1"); len(miss) > 0 {
		t.Errorf("/metrics lacks %q", miss)
	}
}

// TestGatewayPropagatesDeadlines: the origin hears how long each attempt
// may take: the per-attempt timeout, or less when the caller's deadline is
// nearer. And why each attempt was sent; the caller hears how many were.
func TestGatewayPropagatesDeadlines(t *testing.T) {
	var mu sync.Mutex
	var heard []string
	origin := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		heard = append(heard, r.Header.Get(AttemptHeader)+" "+r.Header.Get(TimeoutHeader))
		mu.Unlock()
	}))
	_, gw := startGateway(t, origin, naiveFleet(200*time.Millisecond))
	c := testClient(t)
	for _, r := range []reply{send(c, "GET", gw, time.Second), send(c, "GET", gw, time.Second, TimeoutHeader, "50m")} {
		// The caller hears one attempt, and no failed one.
		if v, ok := r.header[FailedHeader]; r.status != http.StatusOK || r.header.Get(AttemptsHeader) != "1" || ok {
			t.Errorf("answer %d, %s attempts, failed %q; want 200 after 1 attempt, none failed", r.status, r.header.Get(AttemptsHeader), v)
		}
	}
	// The gateway answers its health check itself.
	if r := send(c, "GET", gw+healthPath, time.Second); r.status != http.StatusNoContent {
		t.Errorf("%s: %d, want 204", healthPath, r.status)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(heard) != 2 {
		t.Fatalf("the origin heard %q", heard)
	}
	for i, limit := range []time.Duration{200 * time.Millisecond, 50 * time.Millisecond} {
		kind, v, _ := strings.Cut(heard[i], " ")
		d, ok := resilhttp.ParseTimeout(v)
		if kind != "first" || !ok || d > limit || d < limit-20*time.Millisecond {
			t.Errorf("attempt %d: heard %q, want first with a timeout just under %v", i, heard[i], limit)
		}
	}
}

// TestGatewayPOST: a naive gateway retries a POST blindly, and the origin
// executes it again each time; a guarded one retries only a POST with an
// idempotency key, which the origin then answers from memory.
func TestGatewayPOST(t *testing.T) {
	slowOrigin := queueOrigin(1, 10) // 100 ms per request: longer than the 60 ms timeout
	for _, tc := range []struct {
		fleet      scenario.Fleet
		key        string
		stop       string
		status     int
		executions int64
		duplicates int64
	}{
		{naiveFleet(60 * time.Millisecond), "", "retries_exhausted", http.StatusGatewayTimeout, 4, 3},
		{guardedFleet(60*time.Millisecond, 10, 0), "", "not_idempotent", http.StatusGatewayTimeout, 1, 0},
		{guardedFleet(60*time.Millisecond, 10, 0), "k", "", http.StatusOK, 1, 0},
	} {
		org, origin := startOrigin(t, OriginConfig{Origin: slowOrigin})
		_, gw := startGateway(t, origin, tc.fleet)
		headers := []string{IntentHeader, "1"}
		if tc.key != "" {
			headers = append(headers, resilhttp.DefaultKeyHeader, tc.key)
		}
		r := send(testClient(t), "POST", gw, 5*time.Second, headers...)
		time.Sleep(500 * time.Millisecond) // the origin finishes what it started
		got := org.Counts()
		if r.status != tc.status || r.header.Get(StopHeader) != tc.stop || got.Executions != tc.executions || got.Duplicates != tc.duplicates {
			t.Errorf("%s, key %q: %d, stop %q, %d executions, %d duplicates; want %d, %q, %d, %d",
				tc.fleet.Name, tc.key, r.status, r.header.Get(StopHeader), got.Executions, got.Duplicates,
				tc.status, tc.stop, tc.executions, tc.duplicates)
		}
	}
}

func TestGatewayClients(t *testing.T) {
	_, origin := startOrigin(t, OriginConfig{Origin: failingOrigin()})
	u, _ := url.Parse(origin)
	g, err := NewGateway(GatewayConfig{Fleet: guardedFleet(time.Second, 10, 1), Clients: 3, Origin: u})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	gw := startServer(t, g.Handler())
	send(testClient(t), "GET", gw, time.Second, ClientHeader, strconv.Itoa(4)) // client 4 mod 3 = 1
	if open := g.OpenShare(time.Now()); open < 0.3 || open > 0.34 {
		t.Errorf("open share %g, want one client of three", open)
	}
	if _, err := NewGateway(GatewayConfig{Fleet: naiveFleet(time.Second)}); err == nil {
		t.Error("a gateway without an origin")
	}
}

// TestGatewayThrottle: against an origin that fails everything, the
// adaptive throttle soon refuses calls locally: 503 at once, with the
// throttle's stop reason, nothing sent, each refusal counted apart from a
// breaker's in its tick.
func TestGatewayThrottle(t *testing.T) {
	_, origin := startOrigin(t, OriginConfig{Origin: failingOrigin()})
	u, err := url.Parse(origin)
	if err != nil {
		t.Fatal(err)
	}
	f := guardedFleet(time.Second, 10, 0)
	f.Name = "throttled"
	f.Throttle = scenario.Throttle{Use: scenario.ThrottleAdaptive, ThrottlerSettings: resil.ThrottlerSettings{K: 2, Window: 10 * time.Second, Padding: 1, MaxProbability: 1}}
	tally := NewTally(time.Now(), time.Minute, 1)
	g, err := NewGateway(GatewayConfig{Fleet: f, Clients: 1, Origin: u, Seed: 1, Tally: tally})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	gw := startServer(t, g.Handler())
	c := testClient(t)
	refused := 0
	for range 30 {
		r := send(c, "GET", gw, 5*time.Second)
		if r.header.Get(StopHeader) == "throttled" && r.header.Get(AttemptsHeader) == "0" {
			if r.status != http.StatusServiceUnavailable {
				t.Errorf("a throttled call answered %d, want 503", r.status)
			}
			refused++
		}
	}
	s := tally.series()
	if refused == 0 || s.ThrottleRefusals[0] < int64(refused) || s.BreakerRefusals[0] != 0 {
		t.Errorf("%d calls refused at once; the tally counts %d throttle refusals and %d breaker refusals", refused, s.ThrottleRefusals[0], s.BreakerRefusals[0])
	}
	m := send(c, "GET", gw+"/metrics", time.Second)
	if miss := contains(m.body, `resil_throttle_refusals_total{name="throttled-00"}`); len(miss) > 0 {
		t.Errorf("/metrics lacks %q", miss)
	}
}
