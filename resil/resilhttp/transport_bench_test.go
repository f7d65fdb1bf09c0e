package resilhttp

import (
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/resil"
	"github.com/retrystorm/retrystorm/resil/budget"
)

// BenchmarkTransport compares, side by side in one run, GETs on loopback
// through a plain http.Transport ("plain") and through a Transport over the
// same kind of http.Transport, with a token bucket and a breaker configured
// ("resilhttp"): what the Guard adds to a call that succeeds. The server
// answers two bytes at once.
//
// "serial" is one caller at a time: p50-µs and p99-µs are the latency of a
// call. "parallel" is 16 callers (SetParallelism 8 on 2 CPUs), enough to
// saturate the machine: req/s is then the most each path serves, and
// cpu-ns/op the process's CPU time per call (client and server together),
// which the load of other processes moves less than wall time.
//
//	go test -run '^$' -bench Transport -benchtime 20000x -count 10 ./resil/resilhttp
func BenchmarkTransport(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("ok"))
	}))
	defer srv.Close()
	for _, par := range []int{0, 8} {
		mode := "serial"
		if par > 0 {
			mode = "parallel"
		}
		b.Run(mode+"/plain", func(b *testing.B) {
			base := benchBase()
			defer base.CloseIdleConnections()
			benchGets(b, base, srv.URL, par)
		})
		b.Run(mode+"/resilhttp", func(b *testing.B) {
			base := benchBase()
			defer base.CloseIdleConnections()
			benchGets(b, &Transport{Guard: benchGuard(b), Base: base}, srv.URL, par)
		})
	}
}

// benchBase is an http.Transport that keeps a connection per caller.
func benchBase() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 64
	return t
}

// benchGuard is a Guard with a token bucket and a breaker, both closed and
// full for the whole benchmark.
func benchGuard(b *testing.B) *resil.Guard {
	budget, err := budget.NewTokenBucket(budget.TokenBucketSettings{Ratio: 0.1, Funding: budget.FundedByRequest, MinTokens: 10, MaxTokens: 100})
	if err != nil {
		b.Fatal(err)
	}
	br, err := resil.NewBreaker(resil.BreakerSettings{Threshold: 5, Cooldown: 5 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	g, err := resil.NewGuard(resil.GuardSettings{Idempotency: resil.Idempotent, Policy: resil.Policy{MaxRetries: 3, Budget: budget, Breaker: br}})
	if err != nil {
		b.Fatal(err)
	}
	return g
}

// benchGets sends b.N GETs to u through rt, from one goroutine (par 0) or
// par goroutines per CPU, and reports latencies, throughput and CPU time.
func benchGets(b *testing.B, rt http.RoundTripper, u string, par int) {
	client := &http.Client{Transport: rt}
	call := func() error {
		resp, err := client.Get(u)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.Body.Close()
	}
	if err := call(); err != nil { // open a connection
		b.Fatal(err)
	}
	var mu sync.Mutex
	var all []time.Duration
	timed := func(next func() bool) {
		var mine []time.Duration
		for next() {
			start := time.Now()
			if err := call(); err != nil {
				b.Error(err)
				return
			}
			mine = append(mine, time.Since(start))
		}
		mu.Lock()
		all = append(all, mine...)
		mu.Unlock()
	}
	cpu := cpuTime()
	b.ResetTimer()
	if par == 0 {
		n := 0
		timed(func() bool { n++; return n <= b.N })
	} else {
		b.SetParallelism(par)
		b.RunParallel(func(pb *testing.PB) { timed(pb.Next) })
	}
	b.StopTimer()
	b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/op")
	slices.Sort(all)
	if len(all) == 0 {
		return
	}
	at := func(q float64) float64 { return float64(all[int(q*float64(len(all)-1))].Nanoseconds()) / 1e3 }
	b.ReportMetric(at(0.50), "p50-µs")
	b.ReportMetric(at(0.99), "p99-µs")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
}

// cpuTime is the process's user and system CPU time, in nanoseconds.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
