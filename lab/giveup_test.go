package lab

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/scenario"
)

// TestLabTierGivesUpAsItsProduct is issue 36's row 1 in the lab: a tier
// whose call to the next layer fails answers its caller as its product
// does (package giveup, whose table cites each product's source): Envoy
// 503 after a refused connection and 504 after a timeout, nginx 502 and
// 504, HAProxy 503 and 504; a tier with no product the lab's 503.
func TestLabTierGivesUpAsItsProduct(t *testing.T) {
	// A port nobody listens on refuses; a listener that never reads lets
	// the call time out.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := &url.URL{Scheme: "http", Host: l.Addr().String()}
	l.Close()
	hole, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hole.Close()
	silent := &url.URL{Scheme: "http", Host: hole.Addr().String()}

	for _, c := range []struct {
		product string
		next    *url.URL
		want    int
	}{
		{"envoy", refused, 503}, {"envoy", silent, 504},
		{"nginx", refused, 502}, {"nginx", silent, 504},
		{"haproxy", refused, 503}, {"haproxy", silent, 504},
		{"", refused, 503},
	} {
		tr := scenario.Tier{Name: "t", Server: scenario.Origin{Model: scenario.ModelConcurrency, Base: time.Millisecond},
			Client: scenario.Client{Timeout: 200 * time.Millisecond, Budget: scenario.Budget{Use: scenario.BudgetNone}, Calls: scenario.Calls{Product: c.product}}}
		tier, err := NewTier(TierConfig{Tier: tr, Next: c.next, ClearAt: -1})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		var running sync.WaitGroup
		running.Go(func() { tier.Run(ctx) })
		srv, err := Listen("127.0.0.1:0", tier.Handler())
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.Get(srv.URL().String() + "/work")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%q over %s: %d, want %d", c.product, c.next.Host, resp.StatusCode, c.want)
		}
		srv.Close()
		cancel()
		running.Wait()
		tier.Close()
	}
}
