package scenario

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestParseTiers: tiers are read outermost first, each a server (any
// origin model, its defaults filled in) and a client (a fleet's policy
// and propagate_deadline), and survive Marshal.
func TestParseTiers(t *testing.T) {
	s, err := Parse("tiers.yaml", readTestdata(t, "tiers.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Tiers) != 3 {
		t.Fatalf("%d tiers", len(s.Tiers))
	}
	edge, api, db := s.Tiers[0], s.Tiers[1], s.Tiers[2]
	if edge.Name != "edge" || edge.Server.Model != ModelQueue || edge.Server.Workers != 200 || edge.Server.Replicas != 2 || edge.Server.Discipline != "fifo" {
		t.Errorf("edge %+v", edge)
	}
	if !edge.Client.PropagateDeadline || edge.Client.Budget.TokenBucket.Ratio != 0.1 || edge.Client.Budget.TokenBucket.MaxTokens != 100 {
		t.Errorf("edge's client %+v", edge.Client)
	}
	if api.Server.Model != ModelConcurrency || api.Client.Deadline != 2*time.Second || api.Client.PropagateDeadline || api.Client.Breaker.Threshold != 20 {
		t.Errorf("api %+v", api)
	}
	if db.Server.Latency != time.Millisecond || db.Client.Hedge.Max != 1 || db.Client.Breaker.Use != BreakerNone {
		t.Errorf("db-proxy %+v", db)
	}
	p, err := api.NewPolicy()
	if err != nil {
		t.Fatal(err)
	}
	if p.MaxRetries != 3 || p.Breaker == nil || p.Budget != nil {
		t.Errorf("api's policy %+v", p)
	}
	out := checkValid(t, s)
	if !strings.Contains(string(out), "propagate_deadline: true") {
		t.Errorf("Marshal left out propagate_deadline:\n%s", out)
	}
	// Without tiers, Marshal writes what it wrote before.
	s.Tiers = nil
	if strings.Contains(string(Marshal(s)), "tiers") {
		t.Error("Marshal wrote tiers for a scenario without")
	}
}

func TestTierErrors(t *testing.T) {
	tier := func(name string) string {
		return fmt.Sprintf("  - name: %s\n    server: {model: capacity, capacity: 100}\n    client: {timeout: 1s, budget: {use: none}}\n", name)
	}
	const start = "duration: 60s\ntraffic: {rate: 10}\norigin: {model: capacity, capacity: 10}\ntiers:\n" // lines 1-4
	for _, tt := range []struct {
		name, in, at, field, msg string
	}{
		{"no server", start + "  - {name: a, client: {timeout: 1s, budget: {use: none}}}\n" + fleet, "5:5", "tiers[0]", "server is required (the tier's server"},
		{"no client", start + "  - {name: a, server: {model: capacity, capacity: 1}}\n" + fleet, "5:5", "tiers[0]", "client is required (how the tier calls"},
		{"no name", start + "  - {server: {model: capacity, capacity: 1}, client: {timeout: 1s, budget: {use: none}}}\n" + fleet, "5:5", "tiers[0]", "name is required"},
		{"a key of another model", start + "  - {name: a, server: {model: capacity, capacity: 1, workers: 3}, client: {timeout: 1s, budget: {use: none}}}\n" + fleet,
			"5:54", "tiers[0].server.workers", "workers does not apply to the capacity model"},
		{"no budget", start + "  - {name: a, server: {model: capacity, capacity: 1}, client: {timeout: 1s}}\n" + fleet, "5:63", "tiers[0].client", "budget is required"},
		{"budget without ratio", start + tier("a") + "  - name: b\n    server: {model: capacity, capacity: 1}\n    client: {timeout: 1s, budget: {use: token_bucket, settings: {}}}\n" + fleet,
			"10:65", "tiers[1].client.budget.settings", "budget_ratio is required for token_bucket"},
		{"name in the client", start + "  - {name: a, server: {model: capacity, capacity: 1}, client: {name: a, timeout: 1s, budget: {use: none}}}\n" + fleet,
			"5:64", "tiers[0].client.name", `unknown key "name"`},
		{"propagate as a word", start + "  - {name: a, server: {model: capacity, capacity: 1}, client: {timeout: 1s, budget: {use: none}, propagate_deadline: yes}}\n" + fleet,
			"5:118", "tiers[0].client.propagate_deadline", "must be true or false"},
		{"hedge after the timeout", start + "  - {name: a, server: {model: capacity, capacity: 1}, client: {timeout: 1s, budget: {use: none}, hedge: {delay: 2s}}}\n" + fleet,
			"5:113", "tiers[0].client.hedge.delay", "not shorter than the timeout"},
		{"workers for replicas", start + "  - {name: a, server: {model: queue, capacity: 1, workers: 3, replicas: 2}, client: {timeout: 1s, budget: {use: none}}}\n" + fleet,
			"5:60", "tiers[0].server.workers", "cannot be shared equally"},
		{"same name twice", start + tier("a") + tier("a") + fleet, "8:11", "tiers[1].name", `"a" is the name of tiers[0] too`},
		{"called origin", start + tier("origin") + fleet, "5:11", "tiers[0].name", "call the tier something else"},
		{"too many", start + strings.Repeat(tier("x"), 1) + tier("b") + tier("c") + tier("d") + tier("e") + tier("f") + tier("g") + tier("h") + tier("i") + fleet,
			"29:5", "tiers[8]", "9 tiers; at most 8"},
		{"not a list", start + "  {name: a}\n" + fleet, "5:3", "tiers", "must be a list"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Parse("t.yaml", []byte(tt.in))
			if s != nil {
				t.Fatal("a scenario with an error")
			}
			checkError(t, err, tt.at, tt.field, tt.msg)
		})
	}
}

// TestTierPolicyErrorsNameTheTier: a policy resil refuses names the tier,
// not a fleet.
func TestTierPolicyErrorsNameTheTier(t *testing.T) {
	tr := Tier{Name: "api", Client: Client{Timeout: time.Second, Budget: Budget{Use: "bogus"}}}
	if _, err := tr.NewPolicy(); err == nil || !strings.HasPrefix(err.Error(), `tier "api": `) {
		t.Errorf("error %v", err)
	}
	if _, err := (Tier{Name: "ok", Client: Client{Timeout: time.Second, Retry: Retry{MaxRetries: 2}}}).NewPolicy(); err != nil {
		t.Error(err)
	}
}
