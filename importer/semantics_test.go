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

// TestAWSGoV2Semantics is the decision table of aws-sdk-go-v2 (aws/retry
// at c213f6605dbc): the wait before retry n (n = 1 for the first) is
// rand × 2^n seconds, and 20s once 2^n passes DefaultMaxBackoff
// (jitter_backoff.go, ExponentialJitterBackoff.BackoffDelay;
// standard.go); in adaptive mode a first attempt that succeeds adds
// nothing to the retry quota (adaptive.go, GetAttemptToken; aws-sdk-go-v2
// issue 3550), in standard mode it adds 1.
func TestAWSGoV2Semantics(t *testing.T) {
	for _, c := range []struct {
		mode      string
		increment float64 // tokens a first-attempt success adds back
	}{{"standard", 1}, {"adaptive", 0}} {
		t.Run(c.mode, func(t *testing.T) {
			src := Source{Name: "config", Data: []byte("[profile app]\nregion = eu-west-1\nretry_mode = " + c.mode + "\nmax_attempts = 8\n")}
			fl, err := Import([]Source{src}, Options{Timeout: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			p, err := fl[0].Fleet.NewPolicy()
			if err != nil {
				t.Fatal(err)
			}
			for n, want := range map[int]time.Duration{1: 2 * time.Second, 2: 4 * time.Second, 3: 8 * time.Second, 4: 16 * time.Second, 5: 20 * time.Second, 7: 20 * time.Second} {
				// MaxDelay is the least upper bound of [0, want): want less 1ns.
				if got := p.Backoff.MaxDelay(n, 0); got != want-1 {
					t.Errorf("retry %d: waits up to %v, want below %v", n, got, want)
				}
			}
			now := time.Unix(0, 0)
			if _, ok := p.Budget.Withdraw(now, 0); !ok {
				t.Fatal("no retry from a full quota")
			}
			before := tokens(t, p.Budget, now)
			p.Budget.Record(now, 0, 0) // a first attempt that succeeds
			if got := tokens(t, p.Budget, now) - before; got != c.increment {
				t.Errorf("a first attempt's success added %v, want %v", got, c.increment)
			}
		})
	}
}

func tokens(t *testing.T, b any, now time.Time) float64 {
	t.Helper()
	tb, ok := b.(interface{ Tokens(time.Time) float64 })
	if !ok {
		t.Fatalf("%T has no balance", b)
	}
	return tb.Tokens(now)
}
