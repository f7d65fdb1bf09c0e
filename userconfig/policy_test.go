package userconfig

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/retrystorm/retrystorm/importer"
)

// TestPolicyTiers: calibrate and replay --config write one layer's
// policy, the fleet's; a scenario file whose tiers retry on their own is
// refused, naming the file, the line of its tiers and each tier, never
// taken with its tiers silently dropped.
func TestPolicyTiers(t *testing.T) {
	const fleet = `fleets:
  - name: edge
    timeout: 1s
    retry: {max_retries: 2}
    budget: {use: none}
`
	const head = `name: chain
duration: 60s
tick: 1s
traffic: {rate: 70, arrivals: constant, clients: 4}
origin: {model: queue, capacity: 100, workers: 8}
`
	const tiers = `tiers:
  - name: api
    server: {model: queue, capacity: 1000, workers: 100}
    client:
      timeout: 2s
      retry: {max_retries: 3}
      budget: {use: none}
`
	for _, c := range []struct {
		name, yaml, want string
	}{
		{"no tiers", head + fleet, ""},
		{"tiers", head + tiers + fleet, `s.yaml:6: tiers "api" (max_retries 3): --config takes one layer's retry policy`},
	} {
		t.Run(c.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "s.yaml")
			if err := os.WriteFile(file, []byte(c.yaml), 0o644); err != nil {
				t.Fatal(err)
			}
			p, err := Reader{}.Policy([]string{file}, "", importer.Options{})
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if p.Fleet.Fleet.Retry.MaxRetries != 2 {
					t.Errorf("max_retries %d, want the fleet's 2", p.Fleet.Fleet.Retry.MaxRetries)
				}
				return
			}
			if _, ok := errors.AsType[*Error](err); !ok || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want a usage error saying %q", err, c.want)
			}
		})
	}
}
