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
	r := runCLI(t, "calibrate", "--file", "../../../../calibrate/testdata/envoy.json", "-o", file)
	if r.code != 0 {
		t.Fatalf("calibrate: exit %d\n%s", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, "wrote "+file) {
		t.Errorf("calibrate says %q", r.stderr)
	}
	if r := runCLI(t, "run", file, "--json"); r.code == 2 {
		t.Fatalf("run refused the calibrated scenario: %s", r.stderr)
	}
	if r := runCLI(t, "check", file, "--seeds", "1", "--json", "--out", t.TempDir()); r.code == 2 {
		t.Fatalf("check refused the calibrated scenario: %s", r.stderr)
	}
	// A rate that varied is written as a series beside the file.
	file = filepath.Join(dir, "grpc.yaml")
	if r := runCLI(t, "calibrate", "--file", "../../../../calibrate/testdata/grpc.json", "-o", file); r.code != 0 {
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
		{[]string{"calibrate", "--file", "../../../../calibrate/testdata/envoy.json", "--source", "haproxy"}, "no haproxy_backend_http_requests_total"},
		// A scenario whose tiers retry too: the file written has one
		// layer, and would drop the api tier's 3 retries.
		{[]string{"calibrate", "--file", "../../../../calibrate/testdata/lab.json", "--config", "../../../../calibrate/testdata/config/lab-tiers.yaml"}, `lab-tiers.yaml:6: tiers "api" (max_retries 3): --config takes one layer's retry policy`},
		{[]string{"calibrate", "--prometheus", "http://127.0.0.1:1", "--from", "2026-01-01T00:00:00Z", "--to", "2026-03-01T00:00:00Z", "--step", "1s"}, "at most 11000"},
	} {
		r := runCLI(t, c.args...)
		msg := strings.Join(strings.Fields(r.stderr), " ") // unwrapped
		if r.code != 2 || !strings.Contains(msg, c.want) || r.stdout != "" {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit 2 saying %q", strings.Join(c.args, " "), r.code, r.stdout, r.stderr, c.want)
		}
	}
}

// TestCalibrateConfig: --config takes the client policy from the user's
// config (here the importer's testdata), the written file says where each
// of its values came from, and a disagreement with the metrics is a
// warning on standard error (exit 0); a config that cannot be used is
// exit 2 naming the file.
func TestCalibrateConfig(t *testing.T) {
	// From the repository's root, so that the provenance comments quote
	// short paths, as a user's would (a long one wraps the comment).
	t.Chdir("../../../..")
	const (
		envoyWindow = "calibrate/testdata/envoy.json"
		route       = "importer/testdata/envoy/route.yaml"
	)
	file := filepath.Join(t.TempDir(), "checkout.yaml")
	r := runCLI(t, "calibrate", "--file", envoyWindow, "--config", route, "-o", file)
	if r.code != 0 {
		t.Fatalf("calibrate --config: exit %d\n%s", r.code, r.stderr)
	}
	if strings.Contains(r.stderr, "warning") {
		t.Errorf("warnings where the config and the metrics agree: %s", r.stderr)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"retry.max_retries: 2, from " + route + ":12", "max_retries: 2,", "- name: orders /"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("the written file lacks %q", want)
		}
	}
	if r := runCLI(t, "check", file, "--seeds", "1", "--json", "--out", t.TempDir()); r.code == 2 {
		t.Fatalf("check refused the calibrated scenario: %s", r.stderr)
	}

	// Disagreements: warnings, with both values, and the file is written.
	r = runCLI(t, "calibrate", "--file", envoyWindow, "--config", "calibrate/testdata/config/envoy-disagrees.yaml")
	msg := strings.Join(strings.Fields(r.stderr), " ")
	if r.code != 0 || !strings.Contains(r.stdout, "max_retries: 0") {
		t.Fatalf("calibrate with a disagreeing config: exit %d\n%s", r.code, r.stderr)
	}
	for _, want := range []string{"disagree on retry: the metrics show 0.0499 retries per intent", "retry.max_retries 0 (calibrate/testdata/config/envoy-disagrees.yaml:15)",
		"disagree on timeout: 37.6% of the attempts took longer than 50ms"} {
		if !strings.Contains(msg, want) {
			t.Errorf("stderr %q lacks %q", msg, want)
		}
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--config", "importer/testdata/grpc/service-config.json"}, "is a grpc config, which cannot describe the layer envoy's metrics count"},
		{[]string{"--config", "importer/testdata/grpc/hedging.json"}, `2 fleets, one per route or method with its own settings: "shop.Catalog/Get"`},
		{[]string{"--config", "importer/testdata/grpc/hedging.json", "--route", "nope"}, `--route "nope": no fleet of that name`},
		{[]string{"--config", "/nonexistent.yaml"}, "/nonexistent.yaml: cannot read the file"},
		{[]string{"--config", "calibrate/testdata/envoy.json"}, "envoy.json: not a config this tool reads (Envoy, Istio, Linkerd, gRPC service config, AWS SDK settings)"},
		{[]string{"--route", "x"}, "--route picks a fleet of --config FILE"},
	} {
		args := append([]string{"calibrate", "--file", envoyWindow}, c.args...)
		r := runCLI(t, args...)
		msg := strings.Join(strings.Fields(r.stderr), " ")
		if r.code != 2 || !strings.Contains(msg, c.want) || r.stdout != "" {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit 2 saying %q", strings.Join(args, " "), r.code, r.stdout, r.stderr, c.want)
		}
	}
}
