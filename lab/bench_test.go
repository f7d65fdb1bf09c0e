package lab

import (
	"context"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"
)

// BenchmarkGatewayOverhead measures what the gateway adds to a call on
// loopback: the same GET straight to the origin ("direct"), through a plain
// httputil.ReverseProxy over the same h2c transport ("proxy": what a user
// would otherwise run), through the same proxy lent pooled copy buffers
// as the gateway's proxy is ("pooledproxy": the gateway's own work, apart
// from the 32 KiB a plain proxy allocates per request) and through the gateway ("gateway": a guarded client
// with a token bucket and a breaker, closed, the per-attempt timeout on,
// every hop over h2c as in the lab).
// The origin answers at once (64 workers, no service time), so what is
// measured is HTTP, the proxy and resil.
//
// "serial" is one caller at a time: p50-µs and p99-µs are then the
// latency of a call, without queueing. "parallel" is 16 callers
// (SetParallelism 8 on 2 CPUs), enough to saturate the machine: req/s is
// then the most each path serves, and ns/op its inverse. cpu-ns/op is the
// process's CPU time per call (the caller, the proxy and the origin
// together), which the other processes on the machine move less than wall
// time: the difference between two paths is what the one costs more.
//
//	go test -run '^$' -bench GatewayOverhead -benchtime 20000x -count 3 ./lab
func BenchmarkGatewayOverhead(b *testing.B) {
	_, osrv := benchOrigin(b)
	gw, err := NewGateway(GatewayConfig{Fleet: guardedFleet(time.Second, 10, 5), Clients: 20, Origin: osrv.URL()})
	if err != nil {
		b.Fatal(err)
	}
	defer gw.Close()
	gsrv, err := Listen("127.0.0.1:0", gw.Handler())
	if err != nil {
		b.Fatal(err)
	}
	defer gsrv.Close()
	target := osrv.URL()
	plain := h2cTransport()
	defer plain.CloseIdleConnections()
	proxy := &httputil.ReverseProxy{Transport: plain, Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(target) }}
	psrv, err := Listen("127.0.0.1:0", proxy)
	if err != nil {
		b.Fatal(err)
	}
	defer psrv.Close()
	// The same proxy lent pooled copy buffers as the gateway's are: what
	// the gateway's own work costs, apart from the buffers a plain proxy
	// allocates per request.
	pooled := &httputil.ReverseProxy{Transport: plain, BufferPool: &bufferPool{}, Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(target) }}
	ppsrv, err := Listen("127.0.0.1:0", pooled)
	if err != nil {
		b.Fatal(err)
	}
	defer ppsrv.Close()

	for _, par := range []int{0, 8} {
		mode := "serial"
		if par > 0 {
			mode = "parallel"
		}
		b.Run(mode+"/direct", func(b *testing.B) { benchCalls(b, osrv.URL(), par) })
		b.Run(mode+"/proxy", func(b *testing.B) { benchCalls(b, psrv.URL(), par) })
		b.Run(mode+"/pooledproxy", func(b *testing.B) { benchCalls(b, ppsrv.URL(), par) })
		b.Run(mode+"/gateway", func(b *testing.B) { benchCalls(b, gsrv.URL(), par) })
	}
}

// benchOrigin runs an origin that answers at once (64 workers, no service
// time) on loopback until the benchmark ends: what a call to it costs is
// the wire's.
func benchOrigin(b *testing.B) (*Origin, *Server) {
	org, err := NewOrigin(OriginConfig{Origin: queueOrigin(64, 64e9)})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var running sync.WaitGroup
	running.Go(func() { org.Run(ctx) })
	b.Cleanup(func() { cancel(); running.Wait() })
	osrv, err := Listen("127.0.0.1:0", org.Handler())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(osrv.Close)
	return org, osrv
}

// benchCalls calls u b.N times, from one goroutine (par 0) or from par
// goroutines per CPU, and reports the latencies and the throughput.
func benchCalls(b *testing.B, u *url.URL, par int) {
	t := h2cTransport()
	defer t.CloseIdleConnections()
	client := &http.Client{Transport: t}
	target := u.String() + "/work"
	call := func() error {
		resp, err := client.Get(target)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.Body.Close()
	}
	benchLoop(b, call, par)
}

// benchLoop opens the connection with a first call, then makes b.N calls,
// from one goroutine (par 0) or from par goroutines per CPU, and reports
// the latencies and the throughput.
func benchLoop(b *testing.B, call func() error, par int) {
	if err := call(); err != nil { // open the connection
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
