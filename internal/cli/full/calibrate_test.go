package full

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCalibrateThenCheck: a calibrated scenario is one run and check
// accept (neither says its input is bad).
func TestCalibrateThenCheck(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "envoy.yaml")
	r := runCLI(t, "calibrate", "--file", "../../../calibrate/testdata/envoy.json", "-o", file)
	if r.code != 0 {
		t.Fatalf("calibrate: exit %d\n%s", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, "wrote "+file) {
		t.Errorf("calibrate says %q", r.stderr)
	}
	if r := runCLI(t, "run", file, "--json"); r.code == 2 {
		t.Fatalf("run refused the calibrated scenario: %s", r.stderr)
	}
	if r := runCLI(t, "check", file, "--seeds", "1", "--json"); r.code == 2 {
		t.Fatalf("check refused the calibrated scenario: %s", r.stderr)
	}
	// A rate that varied is written as a series beside the file.
	file = filepath.Join(dir, "grpc.yaml")
	if r := runCLI(t, "calibrate", "--file", "../../../calibrate/testdata/grpc.json", "-o", file); r.code != 0 {
		t.Fatalf("calibrate: exit %d\n%s", r.code, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "grpc.rates.csv")); err != nil {
		t.Fatal(err)
	}
	if r := runCLI(t, "run", file, "--json"); r.code == 2 {
		t.Fatalf("run refused the calibrated scenario with a series: %s", r.stderr)
	}
}

// TestCalibrateBadInput: each mistake is exit 2 with a message saying
// what is wrong, and nothing on standard output.
func TestCalibrateBadInput(t *testing.T) {
	garbage := filepath.Join(t.TempDir(), "g.json")
	if err := os.WriteFile(garbage, []byte(`{"status":"success","data":{"resultType":"matrix","result":[]}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"calibrate"}, "needs --prometheus URL or --file FILE"},
		{[]string{"calibrate", "--prometheus", "ftp://x"}, "want an http:// or https:// URL"},
		{[]string{"calibrate", "--prometheus", "http://127.0.0.1:1", "--timeout", "2s"}, "cannot read from Prometheus at http://127.0.0.1:1"},
		{[]string{"calibrate", "--file", "/nonexistent.json"}, "no such file"},
		{[]string{"calibrate", "--file", garbage}, "no samples"},
		{[]string{"calibrate", "--file", garbage, "--from", "1h"}, "--from, --to and --step are for --prometheus"},
		{[]string{"calibrate", "--file", garbage, "--selector", "job=x"}, "between braces"},
		{[]string{"calibrate", "--file", garbage, "--source", "nginx"}, "want envoy, grpc, haproxy, resil, lab or auto"},
		{[]string{"calibrate", "--file", "../../../calibrate/testdata/envoy.json", "--source", "haproxy"}, "no haproxy_backend_http_requests_total"},
		{[]string{"calibrate", "--prometheus", "http://127.0.0.1:1", "--from", "2026-01-01T00:00:00Z", "--to", "2026-03-01T00:00:00Z", "--step", "1s"}, "at most 11000"},
	} {
		r := runCLI(t, c.args...)
		msg := strings.Join(strings.Fields(r.stderr), " ") // unwrapped
		if r.code != 2 || !strings.Contains(msg, c.want) || r.stdout != "" {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit 2 saying %q", strings.Join(c.args, " "), r.code, r.stdout, r.stderr, c.want)
		}
	}
}
