package sim

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// TestChainStallAddsUp is issue 21's chain: a queue tier and a concurrency
// tier that both retry, through a stall at the origin. Every layer must add
// up: no more lost calls than calls, no more wasted work than attempts.
func TestChainStallAddsUp(t *testing.T) {
	sc := loadScenario(t, "testdata/chain-stall.yaml")
	r, err := Run(context.Background(), sc)
	if err != nil {
		t.Fatal(err) // Run checks every identity
	}
	checkChain(t, sc, r)
	layers := r.Fleets[0].Tiers
	for l, tr := range layers {
		s := tr.Summary
		t.Logf("%-8s intents %5d attempts %6d lost %5d wasted %6d goodput %5d", tr.Name, s.Intents, s.Attempts, s.IntentsLost, s.WastedWork, s.Goodput)
		if s.IntentsLost > s.Intents || s.WastedWork > s.Attempts {
			t.Errorf("%s: %d lost of %d calls, %d wasted of %d attempts", tr.Name, s.IntentsLost, s.Intents, s.WastedWork, s.Attempts)
		}
		if l > 0 && s.Intents > layers[l-1].Summary.Attempts {
			t.Errorf("%s: %d calls for %d attempts received above", tr.Name, s.Intents, layers[l-1].Summary.Attempts)
		}
	}
}

// TestCheckNamesTheIdentity breaks one number of a sound result at a time:
// Check must name the identity broken, and match ErrIdentity.
func TestCheckNamesTheIdentity(t *testing.T) {
	sc := loadScenario(t, "testdata/chain-stall.yaml")
	sc.Fleets[0].Retry.MaxRetries = 2 // some retries at the fleet too
	good, err := Run(context.Background(), sc)
	if err != nil {
		t.Fatal(err)
	}
	if err := good.Check(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		identity string
		breakIt  func(r *Result)
	}{
		{"series-sums", func(r *Result) { r.Fleets[0].Summary.Attempts++ }},
		{"attempt-kinds", func(r *Result) { r.Fleets[0].Series.Retries[3]++ }},
		{"failure-parts", func(r *Result) { r.Fleets[0].Summary.Failures++ }},
		{"goodput-is-success", func(r *Result) { r.Fleets[0].Series.Successes[5] = r.Fleets[0].Series.Goodput[5] - 1 }},
		{"timeouts-are-failures", func(r *Result) { r.Fleets[0].Summary.Timeouts = r.Fleets[0].Summary.FailedAttempts + 1 }},
		{"lost-by-reason", func(r *Result) { r.Fleets[0].Summary.LostBy.Budget++ }},
		{"won-or-lost", func(r *Result) {
			s := &r.Fleets[0].Tiers[1].Summary
			s.IntentsLost, s.LostBy = s.Intents, LostBy{RetriesExhausted: s.Intents}
		}},
		{"victims-arrived-after", func(r *Result) { r.Fleets[0].Summary.Victims = r.Fleets[0].Summary.Intents }},
		{"after-clear", func(r *Result) { r.Fleets[0].Summary.FailuresAfterClear-- }},
		{"thrown-were-refused", func(r *Result) { r.Fleets[0].Summary.AnswersThrownAway = 1 }},
		{"waste-was-not-goodput", func(r *Result) { r.Fleets[0].Tiers[2].Summary.WastedWork = r.Fleets[0].Tiers[2].Summary.Attempts }},
		{"budget-losses-denied", func(r *Result) {
			s := &r.Fleets[0].Summary
			s.LostBy.Budget, s.LostBy.RetriesExhausted = 1, s.LostBy.RetriesExhausted-1
		}},
		{"retries-per-request", func(r *Result) { r.Fleets[0].Summary.RetriesPerRequest += 0.5 }},
		{"peak-offered", func(r *Result) { r.Fleets[0].Summary.PeakOffered++ }},
		{"recovery-ticks", func(r *Result) { r.Fleets[0].Summary.Recovered = true }},
		{"first-layer-is-fleet", func(r *Result) { r.Fleets[0].Tiers[0].Summary.WastedWork++ }},
		{"calls-per-request", func(r *Result) {
			s := &r.Fleets[0].Tiers[1]
			s.Summary.Intents = r.Fleets[0].Tiers[0].Summary.Attempts + 1
			s.Series.Intents[0] += s.Summary.Intents - sumOf(s.Series.Intents)
			s.Summary.RetriesPerRequest = ratio(s.Summary.Retries, s.Summary.Intents)
		}},
		{"amplification", func(r *Result) { r.Fleets[0].Tiers[2].Amplification *= 2 }},
	} {
		t.Run(c.identity, func(t *testing.T) {
			r := clone(t, good)
			c.breakIt(r)
			err := r.Check()
			if !errors.Is(err, ErrIdentity) {
				t.Fatalf("Check = %v, want ErrIdentity", err)
			}
			if !strings.Contains(err.Error(), ": "+c.identity+": ") {
				t.Errorf("Check does not name %s:\n%v", c.identity, err)
			}
		})
	}
}

// clone copies r deeply, through its JSON.
func clone(t *testing.T, r *Result) *Result {
	t.Helper()
	var c Result
	if err := json.Unmarshal(encode(t, r), &c); err != nil {
		t.Fatal(err)
	}
	return &c
}

// TestCheckMeasured: a result measured over real sockets may pass the two
// identities that compare two processes' clocks by MeasuredSlack of the
// intents, no more, and no other identity at all.
func TestCheckMeasured(t *testing.T) {
	good, err := Run(context.Background(), loadScenario(t, "testdata/chain-stall.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	over := func(n int64) *Result {
		r := clone(t, good)
		s := &r.Fleets[0].Summary
		s.IntentsLost += s.Intents - s.Goodput - s.IntentsLost + n
		s.LostBy.RetriesExhausted = s.IntentsLost - s.LostBy.Budget - s.LostBy.Breaker - s.LostBy.Throttled - s.LostBy.NotIdempotent - s.LostBy.Deadline - s.LostBy.Unfinished
		r.Fleets[0].Tiers[0].Summary = *s
		return r
	}
	slack := int64(MeasuredSlack * float64(good.Fleets[0].Summary.Intents))
	if err := over(slack).CheckMeasured(); err != nil {
		t.Errorf("%d over, within the slack: %v", slack, err)
	}
	if err := over(slack).Check(); !errors.Is(err, ErrIdentity) {
		t.Errorf("%d over: Check = %v, want ErrIdentity", slack, err)
	}
	if err := over(slack + 2).CheckMeasured(); !errors.Is(err, ErrIdentity) {
		t.Errorf("%d over, past the slack: CheckMeasured = %v", slack+2, err)
	}
	r := clone(t, good)
	r.Fleets[0].Series.Retries[3]++
	if err := r.CheckMeasured(); err == nil || !strings.Contains(err.Error(), "attempt-kinds") {
		t.Errorf("CheckMeasured lets attempt-kinds go: %v", err)
	}
}
