package full

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckBaseTakesCalibrated is issue 34, section 4: check --base takes
// what calibrate writes, as written, for every window calibrate's tests
// keep (a steady rate, a series whose peak tops the capacity, windows of
// 17 s, histograms and instances of each source): the verdict is given
// (exit 0 or 1, never 2), and rests on no assumption of the storm's.
func TestCheckBaseTakesCalibrated(t *testing.T) {
	windows, err := filepath.Glob(calibrateData("*.json"))
	if err != nil || len(windows) < 6 {
		t.Fatalf("calibrate's windows: %v, %v", windows, err)
	}
	for _, w := range windows {
		name := strings.TrimSuffix(filepath.Base(w), ".json")
		t.Run(name, func(t *testing.T) {
			base := filepath.Join(t.TempDir(), name+".yaml")
			if r := runCLI(t, "calibrate", "--file", w, "-o", base); r.code != 0 {
				t.Fatalf("calibrate: exit %d\n%s", r.code, r.stderr)
			}
			r := runCLI(t, "check", "--base", base, importerData("envoy/route.yaml"), "--seeds", "1", "--json")
			if r.code != 0 && r.code != 1 {
				t.Fatalf("check --base %s: exit %d, want a verdict (0 or 1)\n%s", base, r.code, r.stderr)
			}
			var v struct {
				Assumptions []string          `json:"assumptions"`
				Fleets      []json.RawMessage `json:"fleets"`
			}
			if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
				t.Fatalf("check --json: %v\n%s", err, r.stdout)
			}
			if len(v.Fleets) == 0 || len(v.Assumptions) > 0 {
				t.Errorf("%d fleets judged; assumptions %q, want none: the base is the user's", len(v.Fleets), v.Assumptions)
			}
		})
	}
}

// TestCheckFileIsCalibrateThenCheck: check --file WINDOW CONFIG is
// calibrate --file WINDOW --config CONFIG -o X followed by check --base X
// CONFIG: the same verdict, byte for byte, and the same exit status; and
// --calibrated FILE writes what calibrate -o writes.
func TestCheckFileIsCalibrateThenCheck(t *testing.T) {
	window, config := calibrateData("lab.json"), calibrateData("config/lab-naive.yaml")
	one, two := t.TempDir(), t.TempDir()
	kept := filepath.Join(one, "base.yaml")
	direct := runCLI(t, "check", "--file", window, config, "--seeds", "1", "--json", "--calibrated", kept)
	if direct.code != 0 && direct.code != 1 {
		t.Fatalf("check --file: exit %d\n%s", direct.code, direct.stderr)
	}
	for _, want := range []string{"the base is calibrated from saved answers lab.json", "intents/s", kept + " says where each value came from"} {
		if !strings.Contains(oneLine(direct.stderr), want) {
			t.Errorf("check --file says %q, not %q", direct.stderr, want)
		}
	}
	written := filepath.Join(two, "base.yaml")
	if r := runCLI(t, "calibrate", "--file", window, "--config", config, "-o", written); r.code != 0 {
		t.Fatalf("calibrate: exit %d\n%s", r.code, r.stderr)
	}
	twice := runCLI(t, "check", "--base", written, config, "--seeds", "1", "--json")
	if twice.code != direct.code || twice.stdout != direct.stdout {
		t.Errorf("check --file: exit %d; calibrate then check --base: exit %d; the verdicts differ:\n%s\n----\n%s", direct.code, twice.code, direct.stdout, twice.stdout)
	}
	for _, f := range []string{"base.yaml", "base.rates.csv"} {
		a, errA := os.ReadFile(filepath.Join(one, f))
		b, errB := os.ReadFile(filepath.Join(two, f))
		if errA != nil || errB != nil || string(a) != string(b) {
			t.Errorf("%s: check --calibrated and calibrate -o wrote different files (%v, %v)", f, errA, errB)
		}
	}
}

// TestCheckWindowRefused: a window that cannot be fitted is exit 2 naming
// what it lacks; the flags of a calibrated base without a window, a base
// given twice, or a check that cannot take one are exit 2 saying what to
// do; nothing is printed on standard output.
func TestCheckWindowRefused(t *testing.T) {
	empty := filepath.Join(t.TempDir(), "empty.json")
	if err := os.WriteFile(empty, []byte(`{"status":"success","data":{"resultType":"matrix","result":[]}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	route := importerData("envoy/route.yaml")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--file", empty, route}, "no samples"},
		{[]string{"--file", calibrateData("envoy.json"), "--source", "haproxy", route}, "no haproxy_backend_http_requests_total in the window"},
		{[]string{"--file", calibrateData("lab.json"), importerData("grpc/hedging.json")}, `2 fleets, one per route or method with its own settings: "shop.Catalog/Get"`},
		{[]string{"--file", calibrateData("envoy.json")}, "check your config files against your calibrated system: retrystorm check --prometheus URL FILE..."},
		{[]string{"--file", calibrateData("envoy.json"), "--base", route, route}, "give --base FILE or --prometheus/--file"},
		{[]string{"--file", calibrateData("envoy.json"), "--stack", route}, "for --stack or --manifests, calibrate it first"},
		{[]string{"--prometheus", "http://127.0.0.1:1", "--shard", "1/2", "--json", route}, "--shard with --prometheus would calibrate again on each machine"},
		{[]string{"--file", calibrateData("envoy.json"), "--from", "1h", route}, "--from, --to and --step are for --prometheus"},
		{[]string{"--file", calibrateData("envoy.json"), "--bearer-token-file", route, route}, "are for --prometheus: saved answers are read from files"},
		{[]string{"--calibrated", "x.yaml", route}, "--calibrated is for a base calibrated from your metrics: give --prometheus URL"},
		{[]string{"--header", "X-Scope-OrgID: 1", route}, "--header is for a base calibrated from your metrics"},
		{[]string{"--prometheus", "http://127.0.0.1:1", "--timeout", "2s", route}, "cannot read from Prometheus at http://127.0.0.1:1"},
	} {
		r := runCLI(t, append([]string{"check"}, c.args...)...)
		if r.code != 2 || !strings.Contains(oneLine(r.stderr), c.want) || r.stdout != "" {
			t.Errorf("check %s: exit %d, stdout %q, stderr %q; want exit 2 saying %q", strings.Join(c.args, " "), r.code, r.stdout, r.stderr, c.want)
		}
	}
}
