package sim

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"unsafe"

	"github.com/retrystorm/retrystorm/scenario"
)

// chainScenario returns a scenario of n tiers in front of an origin that is out
// for the whole run (blackhole), each tier retrying retries times at once
// with a timeout that leaves room for the retries of the tiers below
// (100 ms at the innermost, five times as long at each tier above), and a
// fleet that sends each intent once and waits for the whole chain.
// Intents arrive for 10 s; the run goes on 50 s more.
func chainScenario(t *testing.T, n, retries int, propagate bool, fleetTimeout string) *scenario.Scenario {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "duration: 60s\ntraffic: {rate: 20, clients: 4}\norigin: {model: queue, capacity: 200, workers: 20}\ntiers:\n")
	timeout := 100
	for range n - 1 {
		timeout *= 5
	}
	for l := range n {
		fmt.Fprintf(&b, "  - name: t%d\n    server: {model: concurrency, base: 1ms}\n    client: {timeout: %dms, retry: {max_retries: %d}, budget: {use: none}, propagate_deadline: %v}\n",
			l, timeout, retries, propagate)
		timeout /= 5
	}
	fmt.Fprintf(&b, "triggers:\n  - {kind: outage, at: 0s, for: 60s}\n  - {kind: load, at: 10s, for: 50s, rate: 0}\n")
	fmt.Fprintf(&b, "fleets:\n  - {name: users, timeout: %s, budget: {use: none}}\n", fleetTimeout)
	return parse(t, b.String())
}

// TestChainAmplification: in a total outage, n tiers retrying r times each
// send (1 + r)^n attempts to the origin per intent, and (1 + r)^l to
// layer l, exactly: the closed form.
func TestChainAmplification(t *testing.T) {
	for n := 1; n <= 3; n++ {
		r := run(t, chainScenario(t, n, 3, false, "60s"))
		f := r.Fleets[0]
		if len(f.Tiers) != n+1 || f.Tiers[n].Name != "origin" {
			t.Fatalf("%d tiers: layers %v", n, f.Tiers)
		}
		if f.Summary.Intents != 200 {
			t.Fatalf("%d intents", f.Summary.Intents)
		}
		for l, tr := range f.Tiers {
			if want := math.Pow(4, float64(l)); tr.Amplification != want {
				t.Errorf("%d tiers: layer %s amplification %g, want %g", n, tr.Name, tr.Amplification, want)
			}
		}
		if f.Tiers[0].Summary.Attempts != f.Summary.Attempts || f.Tiers[0].Series.Offered[3] != f.Series.Offered[3] {
			t.Error("the first layer is not the fleet's own")
		}
	}
}

// TestChainPropagation: with timeouts that do not nest (every layer gives
// up after 1 s), tiers that do not propagate deadlines work on for callers
// that left: 64 attempts at the origin per intent, and wasted work at
// every tier; tiers that do stop with their caller: one attempt per layer.
func TestChainPropagation(t *testing.T) {
	for _, propagate := range []bool{false, true} {
		sc := chainScenario(t, 3, 3, propagate, "1s")
		for i := range sc.Tiers {
			sc.Tiers[i].Client.Timeout = 1e9
		}
		f := run(t, sc).Fleets[0]
		org := f.Tiers[3]
		var wasted int64
		for _, tr := range f.Tiers[:3] {
			wasted += tr.Summary.WastedWork
		}
		t.Logf("propagate %v: %.2f attempts at the origin per intent; wasted work at the tiers %d", propagate, org.Amplification, wasted)
		switch {
		case !propagate && (org.Amplification != 64 || wasted == 0):
			t.Errorf("without propagation: amplification %g (want 64), wasted %d", org.Amplification, wasted)
		case propagate && (org.Amplification != 1 || wasted != 0):
			t.Errorf("with propagation: amplification %g (want 1), wasted %d", org.Amplification, wasted)
		}
		if propagate && f.Tiers[1].Summary.LostBy.Deadline != f.Tiers[1].Summary.Intents {
			t.Errorf("the calls stopped with their callers are not lost by the deadline: %+v", f.Tiers[1].Summary.LostBy)
		}
	}
}

// TestChainInvariants runs a chain of every server model and client
// policy through a capacity dip and checks what must hold of any chain:
// each hop's calls come from the attempts of the hop above, answers never
// outnumber attempts, and the run is the same, byte for byte, twice.
func TestChainInvariants(t *testing.T) {
	sc := loadScenario(t, "../scenario/testdata/tiers.yaml")
	r := run(t, sc)
	checkInvariants(t, sc, r)
	f := r.Fleets[0]
	if len(f.Tiers) != 4 {
		t.Fatalf("%d layers", len(f.Tiers))
	}
	for l, tr := range f.Tiers {
		s := tr.Summary
		if s.Successes > s.Attempts || s.Goodput > s.Successes || s.Failures < s.FailedAttempts {
			t.Errorf("%s: %+v", tr.Name, s)
		}
		if l > 0 && s.Intents > f.Tiers[l-1].Summary.Attempts {
			t.Errorf("%s: %d calls from %d attempts at the layer above", tr.Name, s.Intents, f.Tiers[l-1].Summary.Attempts)
		}
		if l > 0 && s.Attempts == 0 {
			t.Errorf("%s: no attempts", tr.Name)
		}
	}
	if string(encode(t, r)) != string(encode(t, run(t, sc))) {
		t.Error("two runs of a chain differ")
	}
}

// TestEstimateBoundsAChain: the estimate counts the attempts of every hop
// of a chain, so that it bounds what the run simulates; and tiers add to
// the memory.
func TestEstimateBoundsAChain(t *testing.T) {
	for _, propagate := range []bool{false, true} {
		sc := chainScenario(t, 3, 3, propagate, "60s")
		var simulated int64
		for _, tr := range run(t, sc).Fleets[0].Tiers {
			simulated += tr.Summary.Attempts
		}
		c := Estimate(sc)
		if c.Attempts < float64(simulated) || c.Attempts > 100*float64(simulated) {
			t.Errorf("estimated %g attempts for %d simulated", c.Attempts, simulated)
		}
		one := *sc
		one.Tiers = nil
		if Estimate(&one).Memory >= c.Memory || Estimate(&one).Attempts >= c.Attempts {
			t.Errorf("the tiers cost nothing: %+v without, %+v with", Estimate(&one), c)
		}
	}
}

// TestChainKeepsTheRecords: a chain's fields fit in the intent's padding,
// so a one-hop run's intents still fill two cache lines, and its attempts
// one.
func TestChainKeepsTheRecords(t *testing.T) {
	if s := unsafe.Sizeof(intent{}); s != 128 {
		t.Errorf("intent is %d bytes, want 128", s)
	}
	if s := unsafe.Sizeof(attempt{}); s != 64 {
		t.Errorf("attempt is %d bytes, want 64", s)
	}
	if s := unsafe.Sizeof(request{}); s != 40 {
		t.Errorf("request is %d bytes, want 40", s)
	}
}

// checkChain checks what must hold of every layer of a chain, whatever the
// policies: a layer for each tier and the origin, and every accounting
// identity of each layer and between them (Result.Check).
func checkChain(t *testing.T, sc *scenario.Scenario, r *Result) {
	t.Helper()
	for _, f := range r.Fleets {
		if len(f.Tiers) != len(sc.Tiers)+1 || f.Tiers[len(f.Tiers)-1].Name != "origin" {
			t.Fatalf("%s: %d layers for %d tiers", f.Name, len(f.Tiers), len(sc.Tiers))
		}
	}
	if err := r.Check(); err != nil {
		t.Error(err)
	}
}

// FuzzChain builds small chains from fuzzed numbers: one to three tiers of
// any server model and client policy, in front of any origin through any
// trigger. Whatever the loader accepts must run without a panic, keep
// every invariant of a run and of a chain, stay within the estimate, and
// give the same bytes twice.
func FuzzChain(f *testing.F) {
	f.Add(uint8(3), uint8(0), uint8(3), uint8(0), uint8(0), uint8(1), uint16(100))
	f.Add(uint8(1), uint8(1), uint8(1), uint8(1), uint8(1), uint8(3), uint16(300))
	f.Add(uint8(2), uint8(2), uint8(255), uint8(2), uint8(2), uint8(2), uint16(50))
	f.Add(uint8(2), uint8(5), uint8(2), uint8(3), uint8(3), uint8(4), uint16(200))
	f.Fuzz(func(t *testing.T, tiers, model, retries, policy, origin, trigger uint8, rate uint16) {
		servers := []string{
			"{model: concurrency, base: 2ms, per_inflight: 1ms}",
			"{model: queue, capacity: 300, workers: 6, queue_limit: 40}",
			"{model: queue, capacity: 300, workers: 6, drop_expired: true}",
			"{model: capacity, capacity: 250, latency: 3ms}",
			"{model: queue, capacity: 400, workers: 8, replicas: 2}",
		}
		policies := []string{
			"budget: {use: none}",
			"budget: {use: token_bucket, settings: {budget_ratio: 0.1, min_tokens: 2}}, propagate_deadline: true",
			"budget: {use: none}, breaker: {use: consecutive, settings: {threshold: 3, cooldown: 1s}}",
			"budget: {use: none}, hedge: {delay: 20ms}, propagate_deadline: true",
		}
		origins := []string{
			"{model: queue, capacity: 150, workers: 3}",
			"{model: queue, capacity: 150, workers: 3, drop_expired: true}",
			"{model: concurrency, base: 5ms, per_inflight: 2ms}",
			"{model: capacity, capacity: 120, latency: 5ms}",
		}
		trig := []string{
			"[]",
			"[{kind: capacity, at: 2s, for: 2s, capacity: 30}]",
			"[{kind: errors, at: 2s, for: 2s, error_rate: 0.5}]",
			"[{kind: outage, at: 1s, for: 2s, mode: refuse}]",
			"[{kind: outage, at: 1s, for: 2s, mode: stall}]",
			"[{kind: outage, at: 1s, for: 2s}]",
		}[trigger%6]
		o := origins[origin%4]
		if o[8:19] == "concurrency" && trigger%6 == 1 {
			trig = "[]"
		}
		r := fmt.Sprint(retries % 4)
		if retries == 255 {
			r = "unlimited"
		}
		var b strings.Builder
		fmt.Fprintf(&b, "name: fuzzchain\nduration: 8s\ntick: 500ms\ntraffic: {rate: %d, clients: 4, arrivals: poisson}\norigin: %s\ntiers:\n", rate%400+1, o)
		n := int(tiers%3) + 1
		for l := range n {
			fmt.Fprintf(&b, "  - name: t%d\n    server: %s\n    client: {timeout: %dms, retry: {max_retries: %s, backoff: {use: exponential, base: 10ms, cap: 100ms, jitter: full}}, %s}\n",
				l, servers[(int(model)+l)%len(servers)], 100*(n-l+1), r, policies[(int(policy)+l)%len(policies)])
		}
		fmt.Fprintf(&b, "triggers: %s\nfleets:\n  - {name: users, timeout: %dms, deadline: 4s, retry: {max_retries: 2}, budget: {use: none}}\n", trig, 100*(n+2))
		sc, err := scenario.Parse("fuzzchain.yaml", []byte(b.String()))
		if err != nil {
			t.Skip(err) // the loader's business, fuzzed on its own
		}
		res, err := Run(context.Background(), sc)
		if errors.Is(err, ErrTooCostly) {
			t.Skip(err) // unlimited retries at every hop: the estimate refuses, as it should
		}
		if err != nil {
			t.Fatal(err)
		}
		checkInvariants(t, sc, res)
		checkChain(t, sc, res)
		var attempts int64
		for _, tr := range res.Fleets[0].Tiers {
			attempts += tr.Summary.Attempts
		}
		if est := Estimate(sc); float64(attempts) > est.Attempts {
			t.Fatalf("%d attempts over every hop, more than the estimate of %.0f", attempts, est.Attempts)
		}
		again, err := Run(context.Background(), sc)
		if err != nil {
			t.Fatal(err)
		}
		if string(encode(t, res)) != string(encode(t, again)) {
			t.Fatal("two runs of the same chain differ")
		}
	})
}

// TestChainTierServers: a tier's server decides as an origin would, and its
// answer is its call's. A full tier refuses at once (its callers see
// overload rejections, and the refused requests call nobody); an origin
// that refuses in an outage fails each call fast, so the tier's retries
// multiply without a timeout; a tier whose own answers all fail fails
// calls that the origin served.
func TestChainTierServers(t *testing.T) {
	base := func(tier, origin, triggers string) *scenario.Scenario {
		return parse(t, fmt.Sprintf(`
duration: 20s
traffic: {rate: 200, clients: 4}
origin: %s
tiers:
  - name: api
    server: %s
    client: {timeout: 1s, retry: {max_retries: 3}, budget: {use: none}}
triggers: %s
fleets:
  - {name: users, timeout: 5s, budget: {use: none}}
`, origin, tier, triggers))
	}
	t.Run("a full tier refuses", func(t *testing.T) {
		f := run(t, base("{model: queue, capacity: 50, workers: 1, queue_limit: 2}", "{model: concurrency, base: 1ms}", "[]")).Fleets[0]
		api, org := f.Tiers[0].Summary, f.Tiers[1].Summary
		if api.FailedAttempts == 0 || org.Intents >= api.Attempts {
			t.Errorf("%d of %d attempts failed at the tier, and it made %d calls", api.FailedAttempts, api.Attempts, org.Intents)
		}
		if api.Timeouts != 0 {
			t.Errorf("%d timeouts: a refusal comes at once", api.Timeouts)
		}
	})
	t.Run("a refusing origin", func(t *testing.T) {
		f := run(t, base("{model: concurrency, base: 1ms}", "{model: queue, capacity: 500, workers: 10}", "[{kind: outage, at: 0s, for: 20s, mode: refuse}]")).Fleets[0]
		if a := f.Tiers[1].Amplification; a != 4 {
			t.Errorf("%g attempts at the origin per intent, want 4", a)
		}
		if n := f.Tiers[1].Summary.Timeouts + f.Summary.Timeouts; n != 0 {
			t.Errorf("%d timeouts: refused calls fail at once", n)
		}
	})
	t.Run("a tier whose answers fail", func(t *testing.T) {
		f := run(t, base("{model: capacity, capacity: 10000, latency: 1ms, error_rate: 1}", "{model: concurrency, base: 1ms}", "[]")).Fleets[0]
		if f.Summary.Goodput != 0 || f.Tiers[1].Summary.Goodput == 0 {
			t.Errorf("goodput %d at the fleet, %d at the origin: the tier's errors must fail what the origin served", f.Summary.Goodput, f.Tiers[1].Summary.Goodput)
		}
	})
}
