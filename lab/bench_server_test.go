package lab

import (
	"context"
	"net/http"
	"sync"
	"testing"

	"github.com/retrystorm/retrystorm/scenario"
)

// BenchmarkWallServers measures what a call costs through each of the
// lab's three wall-clock servers on loopback, the model's bookkeeping
// (a request slot, its due entries, the handler's wait) on top of HTTP:
// straight to the origin ("origin": 64 workers, no service time); through
// a fault proxy in front of it, passing through ("proxy") and imposing
// the same origin ("impose"); and through a tier of the same model whose
// service is a call to the origin under a policy with no retries
// ("tier"). Modes and metrics as BenchmarkGatewayOverhead's.
//
//	go test -run '^$' -bench WallServers -benchtime 20000x -count 3 ./lab
func BenchmarkWallServers(b *testing.B) {
	_, osrv := benchOrigin(b)
	ctx, cancel := context.WithCancel(context.Background())
	var running sync.WaitGroup
	b.Cleanup(func() { cancel(); running.Wait() })
	serve := func(run func(context.Context), h interface{ Handler() http.Handler }) *Server {
		running.Go(func() { run(ctx) })
		s, err := Listen("127.0.0.1:0", h.Handler())
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(s.Close)
		return s
	}
	var srvs []*Server
	for _, impose := range []bool{false, true} {
		p, err := NewFaultProxy(ProxyConfig{Target: osrv.URL(), Origin: queueOrigin(64, 64e9), Impose: impose})
		if err != nil {
			b.Fatal(err)
		}
		srvs = append(srvs, serve(p.Run, p))
	}
	sc, err := scenario.Parse("tier.yaml", []byte(`
name: tier
duration: 10s
traffic: {rate: 10}
origin: {model: queue, capacity: 1e9, workers: 64}
tiers:
  - name: api
    server: {model: queue, capacity: 1e9, workers: 64}
    client: {timeout: 1s, retry: {max_retries: 0}, budget: {use: none}}
fleets:
  - {name: f, timeout: 1s, budget: {use: none}}
`))
	if err != nil {
		b.Fatal(err)
	}
	t, err := NewTier(TierConfig{Tier: sc.Tiers[0], Next: osrv.URL(), ClearAt: -1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(t.Close)
	srvs = append(srvs, serve(t.Run, t))

	for _, par := range []int{0, 8} {
		mode := "serial"
		if par > 0 {
			mode = "parallel"
		}
		b.Run(mode+"/origin", func(b *testing.B) { benchCalls(b, osrv.URL(), par) })
		b.Run(mode+"/proxy", func(b *testing.B) { benchCalls(b, srvs[0].URL(), par) })
		b.Run(mode+"/impose", func(b *testing.B) { benchCalls(b, srvs[1].URL(), par) })
		b.Run(mode+"/tier", func(b *testing.B) { benchCalls(b, srvs[2].URL(), par) })
	}
}
