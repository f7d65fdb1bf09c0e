package lab

import (
	"context"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
)

// BenchmarkGatewayProtocols measures the lab's two wires side by side, in
// one run: the same call straight to the origin ("direct") and through
// the gateway ("gateway": a guarded client with a token bucket and a
// breaker, closed, the per-attempt timeout on), over HTTP (h2c, resilhttp)
// and over gRPC (resilgrpc's interceptors, the gateway's raw-frame proxy).
// The origin answers at once (64 workers, no service time), so what is
// measured is the wire, the proxy and resil. Serial and parallel as in
// BenchmarkGatewayOverhead: compare req/s of "parallel/grpc/gateway" with
// "parallel/http/gateway" for what the lab can take in over each wire.
//
//	go test -run '^$' -bench GatewayProtocols -benchtime 20000x -count 3 ./lab
func BenchmarkGatewayProtocols(b *testing.B) {
	org, err := NewOrigin(OriginConfig{Origin: queueOrigin(64, 64e9)})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var running sync.WaitGroup
	running.Go(func() { org.Run(ctx) })
	defer func() { cancel(); running.Wait() }()
	osrv, err := Listen("127.0.0.1:0", org.Handler())
	if err != nil {
		b.Fatal(err)
	}
	defer osrv.Close()
	ogrpc, err := ListenGRPC("127.0.0.1:0", org)
	if err != nil {
		b.Fatal(err)
	}
	defer ogrpc.Close()
	fleet := guardedFleet(time.Second, 10, 5)
	hgw, err := NewGateway(GatewayConfig{Fleet: fleet, Clients: 20, Origin: osrv.URL()})
	if err != nil {
		b.Fatal(err)
	}
	defer hgw.Close()
	hsrv, err := Listen("127.0.0.1:0", hgw.Handler())
	if err != nil {
		b.Fatal(err)
	}
	defer hsrv.Close()
	ggw, err := NewGRPCGateway(GatewayConfig{Fleet: fleet, Clients: 20, Origin: &url.URL{Host: ogrpc.Addr()}})
	if err != nil {
		b.Fatal(err)
	}
	defer ggw.Close()
	gsrv, err := ListenGRPC("127.0.0.1:0", ggw)
	if err != nil {
		b.Fatal(err)
	}
	defer gsrv.Close()

	for _, par := range []int{0, 8} {
		mode := "serial"
		if par > 0 {
			mode = "parallel"
		}
		b.Run(mode+"/http/direct", func(b *testing.B) { benchCalls(b, osrv.URL(), par) })
		b.Run(mode+"/http/gateway", func(b *testing.B) { benchCalls(b, hsrv.URL(), par) })
		b.Run(mode+"/grpc/direct", func(b *testing.B) { benchGRPCCalls(b, ogrpc.Addr(), par) })
		b.Run(mode+"/grpc/gateway", func(b *testing.B) { benchGRPCCalls(b, gsrv.Addr(), par) })
	}
}

// benchGRPCCalls is benchCalls over gRPC: UnaryCall on one connection, as
// the lab's load generator sends.
func benchGRPCCalls(b *testing.B, addr string, par int) {
	cc, err := grpc.NewClient("passthrough:///"+addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithDisableRetry())
	if err != nil {
		b.Fatal(err)
	}
	defer cc.Close()
	tc := testgrpc.NewTestServiceClient(cc)
	call := func() error {
		_, err := tc.UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
		return err
	}
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
	b.ResetTimer()
	if par == 0 {
		n := 0
		timed(func() bool { n++; return n <= b.N })
	} else {
		b.SetParallelism(par)
		b.RunParallel(func(pb *testing.PB) { timed(pb.Next) })
	}
	b.StopTimer()
	slices.Sort(all)
	if len(all) == 0 {
		return
	}
	at := func(q float64) float64 { return float64(all[int(q*float64(len(all)-1))].Nanoseconds()) / 1e3 }
	b.ReportMetric(at(0.50), "p50-µs")
	b.ReportMetric(at(0.99), "p99-µs")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
}
