package resilhttp_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"

	"github.com/retrystorm/retrystorm/resil"
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

	budget, _ := resil.NewTokenBucket(resil.TokenBucketSettings{
		Ratio: 0.1, Funding: resil.FundedByRequest, MinTokens: 5,
	})
	g, _ := resil.NewGuard(resil.GuardSettings{Idempotency: resil.NotIdempotent, Policy: resil.Policy{MaxRetries: 2, Budget: budget}})
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
