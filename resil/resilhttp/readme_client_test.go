package resilhttp

import (
	"context"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/resil"
	"github.com/retrystorm/retrystorm/resil/budget"
)

// TestReadmeClientAgainstHalfFailingServer is the README's client (its
// Guard, under a Transport) against a real server on 127.0.0.1 that fails
// half its requests, 200 calls one after the other, in a tight loop and
// paced at 50 a second. The server's failures are drawn from a seeded
// source in the order requests arrive, the Guard's jitter from a seeded
// one, and the clock is injected, so every count is exact.
//
// Before: a 500, which the Transport does not retry, counted as a failure
// for the breaker, and the README's breaker (5 consecutive failures, 5s
// cooldown) opened within the first 67 calls and shed the rest: 37 of 200
// succeeded, where no library at all gets 102. Now what is not retried
// does not count: the breaker never opens, and the client gets what the
// server gives, 102. The other libraries agree that an answer the client
// will not retry must not open the breaker by default: gobreaker v2.4.0
// counts only errors (defaultIsSuccessful: err == nil, and its
// example/http_breaker.go returns no error for a 500); failsafe-go v0.9.7
// the same (policy/policy.go, IsFailure: err != nil without conditions);
// resilience4j v2.4.0 records every exception and no result
// (CircuitBreakerConfig's DEFAULT_RECORD_RESULT_PREDICATE is false), and
// retries the same exceptions it records (RetryConfig). gRPC's retry
// throttle does the same with status codes: grpc-go v1.85.0-dev, stream.go,
// shouldRetry, counts a failure "only if the code matched a retryable code".
//
// A status the Transport retries (503) still counts: against a server that
// fails half its requests with it, the consecutive-failure breaker opens,
// as its documentation warns for partial failure; a failure-rate window
// does not, and the budget's retries then rescue some calls.
func TestReadmeClientAgainstHalfFailingServer(t *testing.T) {
	const calls = 200
	consecutive := func() (*resil.Breaker, error) {
		// The README's breaker.
		return resil.NewBreaker(resil.BreakerSettings{Threshold: 5, Cooldown: 5 * time.Second})
	}
	window := func() (*resil.Breaker, error) {
		return resil.NewBreaker(resil.BreakerSettings{Rule: resil.CountWindow, WindowSize: 100, FailureRate: 0.8, Cooldown: 5 * time.Second})
	}
	for _, tc := range []struct {
		name    string
		code    int                            // the server's failure
		pace    time.Duration                  // between calls; 0 is a tight loop
		breaker func() (*resil.Breaker, error) // nil: no library at all
		failed  func(int) bool                 // Transport.FailureStatus
		want    int                            // calls answered 200
	}{
		{"no library, 500", 500, 0, nil, nil, 102},
		{"README client, 500, tight loop", 500, 0, consecutive, nil, 102},
		{"README client, 500, 50 a second", 500, 20 * time.Millisecond, consecutive, nil, 102},
		{"README client, 500 counted (FailureStatus ServerError)", 500, 0, consecutive, ServerError, 37},
		{"no library, 503", 503, 0, nil, nil, 102},
		{"README client, 503 (retried, counted)", 503, 20 * time.Millisecond, consecutive, nil, 37},
		{"README client with a failure-rate window, 503", 503, 20 * time.Millisecond, window, nil, 114},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(&halfFailing{rng: rand.New(rand.NewPCG(7, 11)), code: tc.code})
			defer srv.Close()
			defer srv.Client().CloseIdleConnections()
			clk := &paceClock{now: epoch}
			rt := srv.Client().Transport
			if tc.breaker != nil {
				breaker, err := tc.breaker()
				if err != nil {
					t.Fatal(err)
				}
				rt = &Transport{Guard: readmeGuard(t, breaker, clk), Base: rt, FailureStatus: tc.failed}
			}
			client := &http.Client{Transport: rt}
			ok := 0
			for range calls {
				clk.Add(tc.pace)
				req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, srv.URL, nil)
				resp, err := client.Do(req)
				if err != nil {
					continue // refused by the breaker
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					ok++
				}
			}
			if ok != tc.want {
				t.Errorf("%d of %d calls succeeded, want %d", ok, calls, tc.want)
			}
		})
	}
}

// readmeGuard is the README's Guard ("Using resil"), with breaker, the
// seeds 1 and 2, and clk.
func readmeGuard(t *testing.T, breaker *resil.Breaker, clk resil.Clock) *resil.Guard {
	t.Helper()
	budget, err := budget.NewTokenBucket(budget.TokenBucketSettings{
		Ratio: 0.1, Funding: budget.FundedBySuccess, MinTokens: 10,
	})
	if err != nil {
		t.Fatal(err)
	}
	guard, err := resil.NewGuard(resil.GuardSettings{
		Idempotency: resil.Idempotent,
		Policy: resil.Policy{
			MaxRetries: 3,
			Backoff:    resil.Backoff{Schedule: resil.Exponential, Base: 100 * time.Millisecond, Cap: 10 * time.Second, Jitter: resil.FullJitter},
			Budget:     budget,
			Breaker:    breaker,
		},
		Rand:  rand.NewPCG(1, 2),
		Clock: clk,
	})
	if err != nil {
		t.Fatal(err)
	}
	return guard
}

// halfFailing answers code to half the requests, drawn from rng in the
// order they arrive, and 200 to the others.
type halfFailing struct {
	mu   sync.Mutex
	rng  *rand.Rand
	code int
}

func (h *halfFailing) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	fail := h.rng.IntN(2) == 0
	h.mu.Unlock()
	if fail {
		w.WriteHeader(h.code)
		return
	}
	io.WriteString(w, "ok")
}

// paceClock moves only when told (Add) and by every timer's duration,
// which fires at once: the backoff takes no real time.
type paceClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *paceClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *paceClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func (c *paceClock) NewTimer(d time.Duration) resil.Timer {
	c.Add(d)
	ch := make(chan time.Time, 1)
	ch <- c.Now()
	return firedTimer(ch)
}

func (c *paceClock) AfterFunc(time.Duration, func()) resil.Timer { return firedTimer(nil) }
