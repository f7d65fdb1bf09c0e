package lab

import (
	"context"
	"net/url"
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
	org, osrv := benchOrigin(b)
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
	benchLoop(b, call, par)
}
