package resilhttp_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"

	"github.com/retrystorm/retrystorm/resil"
	"github.com/retrystorm/retrystorm/resil/budget"
	"github.com/retrystorm/retrystorm/resil/resilhttp"
)

// An HTTP client whose GETs are retried under a retry budget: the server
// fails once with 503, and the client sees only the answer.
func ExampleTransport() {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprint(w, "hello")
	}))
	defer srv.Close()
	defer srv.Client().CloseIdleConnections()

	budget, _ := budget.NewTokenBucket(budget.TokenBucketSettings{
		Ratio: 0.1, Funding: budget.FundedByRequest, MinTokens: 5,
	})
	g, _ := resil.NewGuard(resil.GuardSettings{Idempotency: resil.Idempotent, Policy: resil.Policy{MaxRetries: 2, Budget: budget}})
	client := &http.Client{Transport: &resilhttp.Transport{Guard: g, Base: srv.Client().Transport}}

	resp, err := client.Get(srv.URL)
	if err != nil {
		panic(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	s := g.Stats()
	fmt.Println(resp.StatusCode, string(body))
	fmt.Printf("attempts %d, retries %d, server calls %d\n", s.Attempts, s.Retries, calls.Load())
	// Output:
	// 200 hello
	// attempts 2, retries 1, server calls 2
}

// Which requests a Transport retries: those that carry an idempotency key,
// and those whose method is idempotent when the Guard's Idempotency says
// its calls may run twice. The server here always answers 503.
func ExampleTransport_idempotency() {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	defer srv.Client().CloseIdleConnections()

	for _, idem := range []resil.Idempotency{resil.Idempotent, resil.NotIdempotent} {
		g, _ := resil.NewGuard(resil.GuardSettings{Idempotency: idem, Policy: resil.Policy{MaxRetries: 1}})
		client := &http.Client{Transport: &resilhttp.Transport{Guard: g, Base: srv.Client().Transport}}
		for _, method := range []string{http.MethodGet, http.MethodPost} {
			for _, key := range []string{"", "k1"} {
				calls.Store(0)
				req, _ := http.NewRequest(method, srv.URL, nil)
				if key != "" {
					req.Header.Set(resilhttp.DefaultKeyHeader, key)
				}
				resp, err := client.Do(req)
				if err != nil {
					panic(err)
				}
				resp.Body.Close()
				with := "without a key"
				if key != "" {
					with = "with a key"
				}
				fmt.Printf("%-14s %-4s %-13s: %d attempts\n", idem, method, with, calls.Load())
			}
		}
	}
	// Output:
	// idempotent     GET  without a key: 2 attempts
	// idempotent     GET  with a key   : 2 attempts
	// idempotent     POST without a key: 1 attempts
	// idempotent     POST with a key   : 2 attempts
	// not_idempotent GET  without a key: 1 attempts
	// not_idempotent GET  with a key   : 2 attempts
	// not_idempotent POST without a key: 1 attempts
	// not_idempotent POST with a key   : 2 attempts
}

// A 500 is not retried, and by default it does not count against the
// server either: ten of them in a row leave a breaker that opens after
// five failures closed. The 503s that follow are retried, and count.
func ExampleTransport_serverError() {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) <= 10 {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	defer srv.Client().CloseIdleConnections()

	breaker, _ := resil.NewBreaker(resil.BreakerSettings{Threshold: 5})
	g, _ := resil.NewGuard(resil.GuardSettings{Idempotency: resil.Idempotent,
		Policy: resil.Policy{MaxRetries: 2, Breaker: breaker}})
	client := &http.Client{Transport: &resilhttp.Transport{Guard: g, Base: srv.Client().Transport}}
	get := func() {
		resp, err := client.Get(srv.URL)
		if err != nil {
			fmt.Println("refused:", errors.Is(err, resil.ErrBreakerOpen))
			return
		}
		resp.Body.Close()
		fmt.Println(resp.StatusCode, resil.ReasonOf(resilhttp.StopOf(resp)))
	}
	for range 10 {
		get()
	}
	fmt.Println("after ten 500s the breaker is", g.Stats().BreakerState)
	get() // three 503s: the first attempt and two retries
	get() // two more open the breaker, which refuses the last retry
	get() // open: nothing is sent
	// Output:
	// 500 not_retryable
	// 500 not_retryable
	// 500 not_retryable
	// 500 not_retryable
	// 500 not_retryable
	// 500 not_retryable
	// 500 not_retryable
	// 500 not_retryable
	// 500 not_retryable
	// 500 not_retryable
	// after ten 500s the breaker is closed
	// 503 retries_exhausted
	// refused: true
	// refused: true
}
