package sim

import (
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
