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
