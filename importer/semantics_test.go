package importer

import (
	"context"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/scenario"
	"github.com/retrystorm/retrystorm/sim"
)

// importOne imports files and wants exactly one fleet.
func importOne(t *testing.T, o Options, files ...string) Fleet {
	t.Helper()
	fl, err := Import(sources(t, files...), o)
	if err != nil {
		t.Fatal(err)
	}
	if len(fl) != 1 {
		t.Fatalf("%d fleets, want 1", len(fl))
	}
	return fl[0]
}

// TestLinkerdSemantics: a retryable ServiceProfile route without timeout
// or retryBudget. Linkerd sets no route timeout unless the route has one
// (linkerd/linkerd2 pull 4958, stable-2.9,
// controller/api/destination/profile_translator.go), and its proxy
// (linkerd2-proxy v2.366, linkerd/app/outbound/src/http/retry.rs) pays
// tower's TpsBudget (tower 0.5.3, tower/src/retry/budget/tps_budget.rs,
// default ttl 10s, 10 per second, ratio 0.2) for every answer it does not
// retry: in a total outage, where every answer is a retryable failure,
// only the floor, 10 retries per second per proxy, gets through, whatever
// the request rate.
func TestLinkerdSemantics(t *testing.T) {
	f := importOne(t, Options{}, "linkerd/emojivoto-web.yaml").Fleet
	if f.Deadline != 0 || f.Timeout != maxTimeout {
		t.Errorf("timeout %v, deadline %v: want none (no default route timeout)", f.Timeout, f.Deadline)
	}
	b := f.Budget
	if b.Use != scenario.BudgetWindow || b.Funding != "answer" || !b.Tower || b.Ratio != 0.2 || b.MinRetriesPerSecond != 10 || b.TTL != 10*time.Second {
		t.Fatalf("budget %+v: want Linkerd's default TpsBudget", b)
	}

	// One proxy, 100 requests per second, and 30 s of refused
	// connections after 20 s of health: retries in the outage's last
	// 20 s (past the window that still holds healthy deposits) are the
	// floor's 10 per second.
	f.Timeout, f.Retry.On = time.Second, []string{scenario.RetryOnError, scenario.RetryOnRejection}
	base, err := scenario.Parse("outage.yaml", []byte(`
name: linkerd-outage
seed: 1
duration: 60s
traffic: {rate: 100, clients: 1}
origin: {model: capacity, capacity: 1000}
triggers:
  - {kind: outage, at: 20s, for: 30s, mode: refuse}
fleets:
  - {name: x, timeout: 1s, budget: {use: none}}
`))
	if err != nil {
		t.Fatal(err)
	}
	sc, _, err := Scenario([]Fleet{{Fleet: f}}, base)
	if err != nil {
		t.Fatal(err)
	}
	res, err := sim.RunWith(context.Background(), sc, sim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := res.Fleets[0].Series
	var retries int64
	for k := 30; k < 50; k++ {
		retries += s.Retries[k]
	}
	if perSec := float64(retries) / 20; perSec < 9 || perSec > 11 {
		t.Errorf("%.1f retries per second in the outage, want the floor's 10 (not 20%% of 100 requests)", perSec)
	}
}
