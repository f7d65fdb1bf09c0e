package calibrate_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/retrystorm/retrystorm/calibrate"
)

// TestConfigRetryShareAgrees: --config's retry cross-check states the
// retries per intent the file writes. grpc-real.json's intents (calls,
// counted when they end) lag their attempts while calls queue, so a
// per-step difference clamped at 0 counts retries twice (0.381 where the
// window's totals give 0.325): the warning and the file disagreed.
func TestConfigRetryShareAgrees(t *testing.T) {
	cfgFile := filepath.Join(t.TempDir(), "g0.yaml")
	const y = `name: g
duration: 60s
tick: 1s
traffic: {rate: 10, arrivals: constant, clients: 4}
origin: {model: queue, capacity: 100, workers: 8}
fleets:
  - name: one
    timeout: 1s
    retry: {max_retries: 0}
    budget: {use: none}
`
	if err := os.WriteFile(cfgFile, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := readConfig([]string{cfgFile}, "")
	if err != nil {
		t.Fatal(err)
	}
	w, err := calibrate.ReadAnswers([]string{"testdata/grpc-real.json"}, calibrate.Selector{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := calibrate.Fit(w, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !r.RetryShare.Known || !(r.RetryShare.V > 0.01) {
		t.Fatalf("retry share %+v: the window retries", r.RetryShare)
	}
	if err := r.UseConfig(cfg, nil); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("show %.3g retries per intent", r.RetryShare.V)
	for _, d := range r.Disagreements {
		if d.Setting == "retry" {
			if !strings.Contains(d.Text, want) {
				t.Errorf("the warning says %q; the file says %.4g retries per intent (want %q)", d.Text, r.RetryShare.V, want)
			}
			return
		}
	}
	t.Errorf("no retry disagreement with max_retries 0: %+v", r.Disagreements)
}
