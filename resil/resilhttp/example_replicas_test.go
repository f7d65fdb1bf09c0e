package resilhttp_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"

	"github.com/retrystorm/retrystorm/resil"
	"github.com/retrystorm/retrystorm/resil/balance"
	"github.com/retrystorm/retrystorm/resil/outlier"
	"github.com/retrystorm/retrystorm/resil/resilhttp"
)

// Three replicas, the second of which answers 503: each of its failures is
// retried on the next replica, and Envoy's consecutive_5xx (5 in a row)
// ejects it, after which it gets nothing.
func ExampleReplicas() {
	var urls []string
	hits := make([]atomic.Int64, 3) // the servers count, the example reads
	for i := range 3 {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			hits[i].Add(1)
			if i == 1 {
				w.WriteHeader(http.StatusServiceUnavailable)
			}
		}))
		defer srv.Close()
		urls = append(urls, srv.URL)
	}
	od := outlier.EnvoyDefaults(3)
	od.MaxEjectionPercent = 34 // one host of three
	det, _ := outlier.New(od)
	rr, _ := balance.NewRoundRobin(balance.Settings{Hosts: 3, Detector: det})
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	reps, _ := resilhttp.NewReplicas(resilhttp.ReplicaSettings{Endpoints: urls, Picker: rr, Detector: det, Base: base})
	g, _ := resil.NewGuard(resil.GuardSettings{Idempotency: resil.Idempotent, Policy: resil.Policy{MaxRetries: 2}})
	client := &http.Client{Transport: &resilhttp.Transport{Guard: g, Base: reps}}

	ok := 0
	for range 30 {
		resp, err := client.Get("http://service.test/")
		if err != nil {
			fmt.Println(err)
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			ok++
		}
	}
	fmt.Println("answered:", ok, "of 30")
	fmt.Println("requests to the bad replica:", hits[1].Load())
	fmt.Println("ejected:", det.Ejected(1), det.Host(1).Reason)
	// Output:
	// answered: 30 of 30
	// requests to the bad replica: 5
	// ejected: true consecutive_5xx
}
