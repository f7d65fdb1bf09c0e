package lab

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/retrystorm/retrystorm/resil/outlier"
	"github.com/retrystorm/retrystorm/scenario"
)

// TestReplicaSetPerClient is issue 36's row 3 in the lab: each client of
// the gateway has its own picker and detector, as each Envoy and each gRPC
// channel does. With consecutive_5xx 2, client 0's failures at the bad
// replica eject it for client 0 only; client 1, which sent nothing, still
// picks it; a replica counts as ejected once half the clients eject it.
func TestReplicaSetPerClient(t *testing.T) {
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(500) }))
	defer bad.Close()
	good := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer good.Close()
	var eps []*url.URL
	for _, s := range []string{bad.URL, good.URL} {
		u, err := url.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		eps = append(eps, u)
	}
	st := outlier.EnvoyDefaults(0)
	st.Consecutive5xx, st.MaxEjectionPercent = 2, 50
	cfg := GatewayConfig{Clients: 2, Seed: 1, Endpoints: eps, Fleet: scenario.Fleet{Name: "f",
		Balancer:         scenario.Balancer{Use: scenario.BalancerRoundRobin},
		OutlierDetection: scenario.OutlierDetection{Use: scenario.OutlierEnvoy, Settings: st}}}
	s, err := newReplicaSet(cfg, http.DefaultTransport)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.inst) != 2 {
		t.Fatalf("%d instances for 2 clients", len(s.inst))
	}
	send := func(client int) {
		ctx := context.WithValue(context.Background(), traceKey{}, &trace{client: client})
		req, err := http.NewRequestWithContext(ctx, "GET", bad.URL+"/", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := s.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	for range 4 { // round robin: two at each replica, the bad one's 2 in a row
		send(0)
	}
	if !s.inst[0].det.Ejected(0) {
		t.Error("client 0's detector did not eject the replica that failed it twice in a row")
	}
	if s.inst[1].det.Ejected(0) {
		t.Error("client 1's detector ejected a replica it never sent to")
	}
	s.sampleEjected(cfg.Start)
	res, _ := s.results(1)
	if res[0].Ejections != 1 || res[0].EjectedSeconds == 0 {
		t.Errorf("replica 0: %d ejections, %v ejected; want 1, and ejected (one of two detectors is half)", res[0].Ejections, res[0].EjectedSeconds)
	}
}
