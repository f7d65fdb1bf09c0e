package sim

import (
	"context"
	"testing"

	"github.com/retrystorm/retrystorm/scenario"
)

// TestRefusedIsItsOwnFailure: a refused connection (an outage with mode:
// refuse) is retried only by fleets that retry "refused", and an overload
// rejection only by those that retry "rejection", so that Envoy's
// connect-failure and a retriable 503 stay apart.
func TestRefusedIsItsOwnFailure(t *testing.T) {
	sc, err := scenario.Parse("refused.yaml", []byte(`
name: refused
duration: 20s
traffic: {rate: 50, clients: 1}
origin: {model: capacity, capacity: 1000, latency: 10ms}
triggers:
  - {kind: outage, at: 5s, for: 5s, mode: refuse}
fleets:
  - {name: rejection, timeout: 1s, retry: {max_retries: 2, on: [rejection]}, budget: {use: none}}
  - {name: refused, timeout: 1s, retry: {max_retries: 2, on: [refused]}, budget: {use: none}}
  - {name: all, timeout: 1s, retry: {max_retries: 2}, budget: {use: none}}
`))
	if err != nil {
		t.Fatal(err)
	}
	res, err := RunWith(context.Background(), sc, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"rejection": false, "refused": true, "all": true}
	for _, f := range res.Fleets {
		if got := f.Summary.Retries > 0; got != want[f.Name] {
			t.Errorf("fleet %s: %d retries in a refusing outage, want retries = %v", f.Name, f.Summary.Retries, want[f.Name])
		}
	}
}

// TestRejectionAnswers: an errors trigger with answer: rejection answers
// overload rejections (503, UNAVAILABLE), which only fleets that retry
// "rejection" retry; answer: error answers errors (500), which only those
// that retry "error" retry. Every attempt of a whole-origin burst fails
// either way.
func TestRejectionAnswers(t *testing.T) {
	for _, c := range []struct {
		answer string
		want   map[string]bool
	}{
		{"rejection", map[string]bool{"rejection": true, "error": false}},
		{"error", map[string]bool{"rejection": false, "error": true}},
	} {
		sc, err := scenario.Parse("burst.yaml", []byte(`
name: burst
duration: 20s
traffic: {rate: 50, clients: 1}
origin: {model: capacity, capacity: 1000, latency: 10ms}
triggers:
  - {kind: errors, at: 5s, for: 5s, error_rate: 1, answer: `+c.answer+`}
fleets:
  - {name: rejection, timeout: 1s, retry: {max_retries: 2, on: [rejection]}, budget: {use: none}}
  - {name: error, timeout: 1s, retry: {max_retries: 2, on: [error]}, budget: {use: none}}
`))
		if err != nil {
			t.Fatal(err)
		}
		res, err := RunWith(context.Background(), sc, Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range res.Fleets {
			s := f.Summary
			if got := s.Retries > 0; got != c.want[f.Name] {
				t.Errorf("answer %s, fleet %s: %d retries, want retries = %v", c.answer, f.Name, s.Retries, c.want[f.Name])
			}
			// Five seconds at 50 intents a second, every attempt failed.
			if s.FailedAttempts < 250 {
				t.Errorf("answer %s, fleet %s: %d failed attempts, want every attempt of the burst", c.answer, f.Name, s.FailedAttempts)
			}
		}
	}
}
