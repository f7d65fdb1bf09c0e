package configcmd

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/retrystorm/retrystorm/internal/race"
	"github.com/retrystorm/retrystorm/scenario"
	"github.com/retrystorm/retrystorm/sim"
	"github.com/retrystorm/retrystorm/verdict"
)

func stackdata(name string) string { return filepath.Join("testdata", "stack", name) }

// shortBase is the base scenario of the stack tests: under -short a
// storm of half the traffic and a shorter run (testdata/stack/
// short-base.yaml), which checks the same things at a quarter of the
// cost (CI runs the package under -race -short); else the embedded
// storm, as the command runs.
func shortBase() string {
	if testing.Short() {
		return stackdata("short-base.yaml")
	}
	return ""
}

// runStack runs check --stack with layers and the CI options, one seed.
func runStack(t *testing.T, ci CI, jsonOut bool) (string, string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	err := RunCheck(context.Background(), nil, CheckOptions{Seeds: 1, Base: shortBase(), JSON: jsonOut, CI: ci}, IO{Stdout: &out, Stderr: &errb})
	return out.String(), errb.String(), err
}

// TestStackAmplifiesThroughTheLayers is the first case: an app's
// gRPC client making 3 attempts (a service config's maxAttempts), a mesh
// sidecar 2 (an Istio VirtualService's attempts: 1) and a gateway 2: 12
// attempts per intent at the origin in a total outage, in the closed form
// and in the simulator, as the layers experiment checks; the chain is
// unsafe, and the settings to blame are named at their file and line.
func TestStackAmplifiesThroughTheLayers(t *testing.T) {
	// --stack given twice, the first with two layers: the same chain.
	ci := CI{Stack: []string{stackdata("app-grpc.json") + "," + stackdata("mesh.yaml"), stackdata("gateway.yaml")}}
	out, _, err := runStack(t, ci, true)
	if !errors.Is(err, ErrUnsafe) {
		t.Fatalf("check --stack of 3 × 2 × 2 attempts without budgets: %v, want ErrUnsafe", err)
	}
	var r verdict.StackResult
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	// 3 × 2 × 2 attempts, and the last layer (Istio) calls a pod whose
	// server sidecar (Istio 1.24+) retries a refused connection twice on
	// it: × 3 at the origin (issue 36, row 2).
	want := []float64{3, 6, 36}
	for i, l := range r.Layers {
		if l.ClosedForm != want[i] || !l.Exact {
			t.Errorf("layer %s: closed form %g (exact %v), want %g exact", l.Name, l.ClosedForm, l.Exact, want[i])
		}
		if math.Abs(l.Simulated-want[i]) > 0.05*want[i] {
			t.Errorf("layer %s: simulated %g attempts per intent, want %g within 5%%", l.Name, l.Simulated, want[i])
		}
	}
	if !r.Agree || r.Level == verdict.Safe {
		t.Errorf("agree %v, unsafe %v: want both", r.Agree, r.Level)
	}
	// Blame: each layer's max_retries at the line that sets it.
	got := map[string]int{}
	for _, l := range r.Layers {
		for _, b := range l.Blame {
			if b.Setting == "retry.max_retries" {
				got[filepath.Base(b.File)] = b.Line
			}
		}
	}
	wantLines := map[string]int{"app-grpc.json": 5, "mesh.yaml": 15, "gateway.yaml": 16}
	for f, line := range wantLines {
		if got[f] != line {
			t.Errorf("blame for %s: line %d, want %d (retries set there)", f, got[f], line)
		}
	}
	// The text says the same.
	text, _, _ := runStack(t, ci, false)
	for _, s := range []string{"app-grpc.json → mesh.yaml → gateway.yaml", "Verdict for the chain: UNSAFE", stackdata("mesh.yaml") + ":15", "agrees with the closed form"} {
		if !strings.Contains(text, s) {
			t.Errorf("the text lacks %q:\n%s", s, text)
		}
	}
}

// TestStackEmitWorst: --emit-worst writes the worst cell of a stack's
// verdict as a scenario with the chain's tiers, which the simulator plays
// to the same collapse; --manifests (many chains) and --shard (a part)
// refuse it rather than leave it unwritten.
func TestStackEmitWorst(t *testing.T) {
	worst := filepath.Join(t.TempDir(), "worst.yaml")
	ci := CI{Stack: []string{stackdata("app-grpc.json") + "," + stackdata("mesh.yaml") + "," + stackdata("gateway.yaml")}, EmitWorst: worst}
	if _, _, err := runStack(t, ci, false); !errors.Is(err, ErrUnsafe) {
		t.Fatalf("the chain: %v, want ErrUnsafe", err)
	}
	data, err := os.ReadFile(worst)
	if err != nil {
		t.Fatalf("--emit-worst wrote nothing: %v", err)
	}
	sc, err := scenario.Parse(worst, data)
	if err != nil {
		t.Fatal(err)
	}
	if len(sc.Tiers) != 2 || len(sc.Fleets) != 1 {
		t.Fatalf("the worst cell has %d fleets and %d tiers, want the chain's: 1 and 2", len(sc.Fleets), len(sc.Tiers))
	}
	// Its tiers have a replica per client instance, which the lab does
	// not run: the file says so rather than promise the lab reproduces it.
	if sc.Tiers[0].Server.Replicas > 1 && strings.Contains(string(data), "retrystorm lab reproduce") {
		t.Errorf("a worst cell of %d-replica tiers says the lab reproduces it:\n%s", sc.Tiers[0].Server.Replicas, data[:min(len(data), 400)])
	}
	res, err := sim.Run(context.Background(), sc)
	if err != nil {
		t.Fatal(err)
	}
	if res.Fleets[0].Summary.Recovered {
		t.Errorf("the worst cell of an UNSAFE chain recovers when run")
	}
	var out, errb bytes.Buffer
	err = RunCheck(context.Background(), nil, CheckOptions{Seeds: 1, Base: shortBase(), CI: CI{Manifests: t.TempDir(), EmitWorst: worst}}, IO{Stdout: &out, Stderr: &errb})
	var ue *UsageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "--emit-worst") {
		t.Errorf("--manifests with --emit-worst: %v, want a usage error", err)
	}
	err = RunCheck(context.Background(), nil, CheckOptions{Seeds: 1, Base: shortBase(), JSON: true, Shard: "1/2", CI: ci}, IO{Stdout: &out, Stderr: &errb})
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "--emit-worst") {
		t.Errorf("--shard with --emit-worst: %v, want a usage error", err)
	}
}

// TestStackBaselineOfALongChain: a chain whose name is longer than a
// fleet's may be (its files' names) passes against its own baseline; the
// baseline knew it by its fleet's cut name, and it was "new".
func TestStackBaselineOfALongChain(t *testing.T) {
	dir := t.TempDir()
	var files []string
	for _, f := range []string{"app-grpc.json", "mesh.yaml", "gateway.yaml"} {
		data, err := os.ReadFile(stackdata(f))
		if err != nil {
			t.Fatal(err)
		}
		long := filepath.Join(dir, strings.Repeat("layer-", 8)+f)
		if err := os.WriteFile(long, data, 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, long)
	}
	ci := CI{Stack: []string{strings.Join(files, ",")}}
	out, _, err := runStack(t, ci, true)
	if !errors.Is(err, ErrUnsafe) {
		t.Fatalf("the chain: %v, want ErrUnsafe", err)
	}
	var r verdict.StackResult
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Chain) <= len(r.Check.Fleets[0].Name) {
		t.Fatalf("chain %q is no longer than its fleet's name %q: the case is not made", r.Chain, r.Check.Fleets[0].Name)
	}
	ci.Baseline = filepath.Join(dir, "base.json")
	if err := os.WriteFile(ci.Baseline, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := runStack(t, ci, false); err != nil {
		t.Errorf("the chain against its own baseline: %v, want a pass", err)
	}
}

// TestStackWhoseFirstLayerDoesNotRetry: an app that does not retry
// behind a sidecar that retries ten times (Istio's attempts: 10). The
// chain retries although its first layer does not: it is judged on every
// fault the sidecar retries, its collapses are compared with the same
// chain with retries off, its margin is searched without retries too,
// and it is UNSAFE, as the sidecar's route is alone. (Before, the first
// layer alone decided: the chain was judged on capacity dips only, its
// collapses called the origin's "with retries off too" without a run
// with retries off, and it was AT RISK.)
func TestStackWhoseFirstLayerDoesNotRetry(t *testing.T) {
	sidecar := filepath.Join("..", "..", "..", "verdict", "testdata", "early", "istio10-a.yaml")
	out, _, err := runStack(t, CI{Stack: []string{stackdata("app-noretry.json") + "," + sidecar}}, true)
	if !errors.Is(err, ErrUnsafe) {
		t.Errorf("an app behind a sidecar of ten retries: %v, want ErrUnsafe", err)
	}
	var r verdict.StackResult
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	f := r.Check.Fleets[0]
	if f.Bare == nil {
		t.Error("no run with retries off: the chain's collapses are not compared with its retries off")
	}
	for i, ft := range r.Check.Faults {
		if ft.Kind == scenario.TriggerErrors && !f.Judged[i] {
			t.Errorf("not judged on %s, which the sidecar retries (5xx)", ft.Name)
		}
	}
	if m := f.Margin; m == nil || m.LoadNoRetries == nil || m.Load != nil && *m.LoadNoRetries <= *m.Load {
		t.Errorf("margin %+v: want a search without retries, and more room without them", m)
	}
	if f.Verdict != verdict.Unsafe {
		t.Errorf("verdict %v, want UNSAFE", f.Verdict)
	}
}

// TestStackWithABudgetAtEveryLayer: Envoy's retry budget, Istio's and
// Linkerd's at every layer: the closed form is a bound (or none, for
// Linkerd's unlimited retries), and the simulated amplification stays
// under what the same retry counts would send without budgets.
func TestStackWithABudgetAtEveryLayer(t *testing.T) {
	ci := CI{Stack: []string{testdata("envoy/front-proxy.yaml"), testdata("istio/budget.yaml"), testdata("linkerd/books.yaml")}}
	out, _, err := runStack(t, ci, true)
	if err != nil && !errors.Is(err, ErrUnsafe) {
		t.Fatal(err)
	}
	var r verdict.StackResult
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Layers) != 3 || !r.Agree {
		t.Fatalf("%d layers, agree %v", len(r.Layers), r.Agree)
	}
	for _, l := range r.Layers {
		if l.Exact {
			t.Errorf("layer %s with a budget: the closed form is called exact", l.Name)
		}
		if l.ClosedForm > 0 && l.Simulated > l.ClosedForm*1.05 {
			t.Errorf("layer %s: simulated %g past the bound %g", l.Name, l.Simulated, l.ClosedForm)
		}
	}
}

// TestStackRefusesBadInput: a loop is refused with the loop printed, and
// every other mistake is a usage error (exit status 2) naming what is
// wrong; a file that does not parse is named with its line.
func TestStackRefusesBadInput(t *testing.T) {
	dir := t.TempDir()
	broken := filepath.Join(dir, "broken.yaml")
	if err := os.WriteFile(broken, []byte("apiVersion: networking.istio.io/v1\nkind: VirtualService\nspec:\n  http: [\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	app, mesh, gw := stackdata("app-grpc.json"), stackdata("mesh.yaml"), stackdata("gateway.yaml")
	// A link to a layer is that layer (issue 37): the chain loops.
	abs, err := filepath.Abs(app)
	if err != nil {
		t.Fatal(err)
	}
	alias := filepath.Join(dir, "alias.json")
	if err := os.Symlink(abs, alias); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		stack []string
		files []string
		want  string
	}{
		{"loop", []string{app + "," + mesh + "," + app}, nil, app + " → " + mesh + " → " + app},
		{"loop through a link", []string{app + "," + mesh + "," + alias}, nil, "the chain loops"},
		{"loop through a joined layer", []string{mesh + "," + gw + "+" + mesh}, nil, "the chain loops"},
		{"one layer", []string{app}, nil, "two layers or more"},
		{"ten layers", []string{strings.Repeat(app+",", 9) + app}, nil, "at most 9"},
		{"empty layer", []string{app + ",," + mesh}, nil, "an empty layer"},
		{"files as arguments", []string{app + "," + mesh}, []string{gw}, "not as arguments"},
		{"missing file", []string{app + "," + filepath.Join(dir, "none.yaml")}, nil, "none.yaml"},
		{"does not parse", []string{app + "," + broken}, nil, "broken.yaml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			err := RunCheck(context.Background(), tc.files, CheckOptions{Seeds: 1, Base: shortBase(), CI: CI{Stack: tc.stack}}, IO{Stdout: &out, Stderr: &errb})
			var ue *UsageError
			if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%v, want a usage error with %q", err, tc.want)
			}
		})
	}
	// The parse error names the line.
	err = RunCheck(context.Background(), nil, CheckOptions{Seeds: 1, Base: shortBase(), CI: CI{Stack: []string{app, broken}}}, IO{Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}})
	if err == nil || !strings.Contains(err.Error(), "line") {
		t.Errorf("a YAML mistake: %v, want its line", err)
	}
}

// TestSARIFIsValid writes the SARIF of an unsafe stack and checks it
// against the required properties of the SARIF 2.1.0 schema (OASIS,
// sarif-schema-2.1.0.json in oasis-tcs/sarif-spec's Schemata; no JSON
// schema validator is in go.mod, so the test checks by hand): sarifLog
// requires version "2.1.0" and runs; run requires tool; tool requires
// driver; toolComponent requires name; reportingDescriptor requires id;
// result requires message, and message text or id; a region's startLine
// is at least 1; level is one of none, note, warning, error; and the
// objects allow no other properties than the schema's.
func TestSARIFIsValid(t *testing.T) {
	dir := t.TempDir()
	sarif, junit := filepath.Join(dir, "check.sarif"), filepath.Join(dir, "check.xml")
	_, _, err := runStack(t, CI{Stack: []string{stackdata("app-grpc.json"), stackdata("mesh.yaml"), stackdata("gateway.yaml")}, SARIF: sarif, JUnit: junit}, true)
	if !errors.Is(err, ErrUnsafe) {
		t.Fatal(err)
	}
	data, err := os.ReadFile(sarif)
	if err != nil {
		t.Fatal(err)
	}
	var log map[string]any
	if err := json.Unmarshal(data, &log); err != nil {
		t.Fatal(err)
	}
	obj := func(v any, where string, required []string, allowed ...string) map[string]any {
		t.Helper()
		m, ok := v.(map[string]any)
		if !ok {
			t.Fatalf("%s: not an object", where)
		}
		for _, r := range required {
			if _, ok := m[r]; !ok {
				t.Errorf("%s: lacks the required %q", where, r)
			}
		}
		for k := range m {
			if !slices.Contains(required, k) && !slices.Contains(allowed, k) {
				t.Errorf("%s: property %q is not in the schema's", where, k)
			}
		}
		return m
	}
	list := func(v any, where string) []any {
		t.Helper()
		l, ok := v.([]any)
		if !ok {
			t.Fatalf("%s: not an array", where)
		}
		return l
	}
	obj(log, "sarifLog", []string{"version", "runs"}, "$schema", "inlineExternalProperties", "properties")
	if log["version"] != "2.1.0" {
		t.Errorf("version %v", log["version"])
	}
	runs := list(log["runs"], "runs")
	if len(runs) != 1 {
		t.Fatalf("%d runs", len(runs))
	}
	run := obj(runs[0], "run", []string{"tool"}, "results", "artifacts", "invocations", "properties")
	tool := obj(run["tool"], "tool", []string{"driver"}, "extensions", "properties")
	driver := obj(tool["driver"], "toolComponent", []string{"name"}, "informationUri", "rules", "version", "semanticVersion", "properties")
	var ids []string
	for _, rl := range list(driver["rules"], "rules") {
		r := obj(rl, "reportingDescriptor", []string{"id"}, "shortDescription", "fullDescription", "helpUri", "name", "properties")
		ids = append(ids, r["id"].(string))
		obj(r["shortDescription"], "multiformatMessageString", []string{"text"}, "markdown", "properties")
	}
	results := list(run["results"], "results")
	if len(results) == 0 {
		t.Fatal("an unsafe stack with no results")
	}
	lines := 0
	for i, rv := range results {
		r := obj(rv, "result", []string{"message"}, "ruleId", "level", "locations", "properties")
		if !slices.Contains(ids, r["ruleId"].(string)) {
			t.Errorf("result %d: rule %v is not the driver's", i, r["ruleId"])
		}
		if !slices.Contains([]string{"none", "note", "warning", "error"}, r["level"].(string)) {
			t.Errorf("result %d: level %v", i, r["level"])
		}
		if m := obj(r["message"], "message", nil, "text", "id", "markdown", "arguments"); m["text"] == nil && m["id"] == nil {
			t.Errorf("result %d: a message with neither text nor id", i)
		}
		for _, lv := range list(r["locations"], "locations") {
			l := obj(lv, "location", nil, "physicalLocation", "id", "message", "properties")
			pl := obj(l["physicalLocation"], "physicalLocation", nil, "artifactLocation", "region", "properties")
			al := obj(pl["artifactLocation"], "artifactLocation", nil, "uri", "uriBaseId", "index", "properties")
			if u, _ := al["uri"].(string); u == "" || strings.Contains(u, `\`) {
				t.Errorf("result %d: uri %q", i, u)
			}
			if pl["region"] != nil {
				reg := obj(pl["region"], "region", nil, "startLine", "startColumn", "endLine", "endColumn")
				if n, _ := reg["startLine"].(float64); n < 1 {
					t.Errorf("result %d: startLine %v, the schema's minimum is 1", i, reg["startLine"])
				}
				lines++
			}
		}
	}
	if lines == 0 {
		t.Error("no result points at a line")
	}

	// JUnit: one test case, failed, that names the files and lines.
	x, err := os.ReadFile(junit)
	if err != nil {
		t.Fatal(err)
	}
	var ju junitSuites
	if err := xml.Unmarshal(x, &ju); err != nil {
		t.Fatal(err)
	}
	if len(ju.Suites) != 1 || ju.Suites[0].Tests != 1 || ju.Suites[0].Failures != 1 || ju.Suites[0].Cases[0].Failure == nil ||
		!strings.Contains(ju.Suites[0].Cases[0].Failure.Text, stackdata("mesh.yaml")+":15") {
		t.Errorf("junit:\n%s", x)
	}
}

// TestBaseline: with the verdicts of a previous check --json, an unsafe
// config that is no worse passes; one that got worse, or is new, fails.
func TestBaseline(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	check := func(file, baseline string) (string, error) {
		var out bytes.Buffer
		err := RunCheck(ctx, []string{file}, CheckOptions{Seeds: 1, Base: shortBase(), JSON: true, CI: CI{Baseline: baseline}}, IO{Stdout: &out, Stderr: &bytes.Buffer{}})
		return out.String(), err
	}
	naive := testdata("istio/naive.yaml")
	out, err := check(naive, "")
	if !errors.Is(err, ErrUnsafe) {
		t.Fatalf("naive: %v", err)
	}
	base := filepath.Join(dir, "main.json")
	if err := os.WriteFile(base, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := check(naive, base); err != nil {
		t.Errorf("the same unsafe config against its own baseline: %v, want a pass", err)
	}
	// A baseline where it was safe: the same config got worse.
	var r verdict.CheckResult
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	safe, _ := check(testdata("istio/budget.yaml"), "")
	var rs verdict.CheckResult
	if err := json.Unmarshal([]byte(safe), &rs); err != nil {
		t.Fatal(err)
	}
	rs.Fleets[0].Name = r.Fleets[0].Name
	b, _ := json.Marshal(rs)
	if err := os.WriteFile(base, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := check(naive, base); !errors.Is(err, ErrUnsafe) {
		t.Errorf("safe before, unsafe now: %v, want ErrUnsafe", err)
	}
	if err := os.WriteFile(base, []byte(`{"fleets": []}`), 0o644); err != nil {
		t.Fatal(err)
	}
	var ue *UsageError
	if _, err := check(naive, base); !errors.As(err, &ue) {
		t.Errorf("a baseline that is no check's JSON: %v, want a usage error", err)
	}
}

// TestCheckSARIFAtTheLine: check on files (no stack) writes its SARIF at
// the line of the setting to blame in the file the fleet came from: the
// Istio route's retries.attempts.
func TestCheckSARIFAtTheLine(t *testing.T) {
	sarif := filepath.Join(t.TempDir(), "check.sarif")
	naive := testdata("istio/naive.yaml")
	err := RunCheck(context.Background(), []string{naive}, CheckOptions{Seeds: 1, Base: shortBase(), CI: CI{SARIF: sarif}}, IO{Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}})
	if !errors.Is(err, ErrUnsafe) {
		t.Fatal(err)
	}
	data, err := os.ReadFile(sarif)
	if err != nil {
		t.Fatal(err)
	}
	var log sarifLog
	if err := json.Unmarshal(data, &log); err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(naive)
	if err != nil {
		t.Fatal(err)
	}
	want := 0
	for i, l := range strings.Split(string(src), "\n") {
		if strings.Contains(l, "attempts: 3") {
			want = i + 1
		}
	}
	found := false
	for _, r := range log.Runs[0].Results {
		for _, l := range r.Locations {
			if l.PhysicalLocation.ArtifactLocation.URI == filepath.ToSlash(naive) && l.PhysicalLocation.Region != nil && l.PhysicalLocation.Region.StartLine == want {
				found = true
			}
		}
	}
	if want == 0 || !found {
		t.Errorf("no result at %s:%d (attempts: 3):\n%s", naive, want, data)
	}
}

// TestActionAndHook: the composite Action installs the command with go
// install and runs check with SARIF and JUnit; the pre-commit hook runs
// check.
func TestActionAndHook(t *testing.T) {
	var action struct {
		Inputs map[string]struct{ Default string }
		Runs   struct {
			Using string
			Steps []struct {
				Run string
				Env map[string]string
			}
		}
	}
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "action.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &action); err != nil {
		t.Fatal(err)
	}
	var all string
	for _, s := range action.Runs.Steps {
		all += s.Run
	}
	if action.Runs.Using != "composite" || !strings.Contains(all, "go install") || !strings.Contains(all, "retrystorm-full check --sarif") || !strings.Contains(all, "--junit") {
		t.Errorf("action.yml: using %q, steps:\n%s", action.Runs.Using, all)
	}
	// fail-on reaches check as --fail-on, through the environment (never
	// as shell code), and defaults to check's own default.
	if in, ok := action.Inputs["fail-on"]; !ok || in.Default != "at-risk" || !strings.Contains(all, `--fail-on "$FAIL_ON"`) {
		t.Errorf("action.yml: the fail-on input %+v (present %v) does not reach check as --fail-on", in, ok)
	}
	var hooks []struct{ ID, Entry, Language string }
	data, err = os.ReadFile(filepath.Join("..", "..", "..", ".pre-commit-hooks.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &hooks); err != nil {
		t.Fatal(err)
	}
	if len(hooks) != 1 || hooks[0].ID != "retrystorm-check" || hooks[0].Entry != "retrystorm-full check" || hooks[0].Language != "golang" {
		t.Errorf("hooks: %+v", hooks)
	}
}

// TestFloorsPerClientAtTheVerdictsCount is the second case: 200
// client instances, each an Envoy with a retry budget's floor of 3
// concurrent retries (min_retry_concurrency), together get 600 retries
// past the budget. The blame counts the floor at the verdict's client
// count (--clients 200), in a stack and in a plain check; it counted the
// base scenario's 20 before.
func TestFloorsPerClientAtTheVerdictsCount(t *testing.T) {
	envoy := testdata("envoy/front-proxy.yaml")
	for _, tc := range []struct {
		name  string
		files []string
		ci    CI
	}{
		{"check", []string{envoy}, CI{}},
		{"stack", nil, CI{Stack: []string{stackdata("app-grpc.json"), envoy}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			err := RunCheck(context.Background(), tc.files, CheckOptions{Seeds: 1, Base: shortBase(), Clients: 200, CI: tc.ci}, IO{Stdout: &out, Stderr: &bytes.Buffer{}})
			if err != nil && !errors.Is(err, ErrUnsafe) {
				t.Fatal(err)
			}
			if !strings.Contains(out.String(), "min_retry_concurrency 3 per client (600 over 200 clients)") {
				t.Errorf("the floor is not counted at 200 clients:\n%s", out.String())
			}
		})
	}
}

// TestStackLayerInAConfigMap: a layer may be a Kubernetes manifest whose
// ConfigMap holds the config (found by its content, beside a Deployment
// and data that is no config): the same chain as the JSON file, and the
// blame at the manifest's line of maxAttempts.
func TestStackLayerInAConfigMap(t *testing.T) {
	cm := stackdata("app-configmap.yaml")
	out, _, err := runStack(t, CI{Stack: []string{cm, stackdata("mesh.yaml"), stackdata("gateway.yaml")}}, true)
	if !errors.Is(err, ErrUnsafe) {
		t.Fatal(err)
	}
	var r verdict.StackResult
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if got := r.Layers[2].ClosedForm; got != 36 || math.Abs(r.Layers[2].Simulated-36) > 1.8 {
		t.Errorf("closed form %g, simulated %g: want 36 (3 × 2 × 2, × 3 by the origin's sidecar)", got, r.Layers[2].Simulated)
	}
	src, err := os.ReadFile(cm)
	if err != nil {
		t.Fatal(err)
	}
	want := 0
	for i, l := range strings.Split(string(src), "\n") {
		if strings.Contains(l, `"maxAttempts"`) {
			want = i + 1
		}
	}
	found := false
	for _, b := range r.Layers[0].Blame {
		found = found || b.Setting == "retry.max_retries" && b.File == cm && b.Line == want
	}
	if !found {
		t.Errorf("no blame at %s:%d: %+v", cm, want, r.Layers[0].Blame)
	}

	empty := filepath.Join(t.TempDir(), "cm.yaml")
	if err := os.WriteFile(empty, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: {a: b}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var ue *UsageError
	if _, _, err := runStack(t, CI{Stack: []string{empty, stackdata("mesh.yaml")}}, true); !errors.As(err, &ue) || !strings.Contains(err.Error(), "hold no config") {
		t.Errorf("a ConfigMap with no config: %v, want a usage error saying so", err)
	}
}

// TestTwoHundredServices is the scale case for check on files:
// 200 services from a template with three shared retry policies are
// checked, each policy simulated once: identical routes import as one
// fleet (importer.Fleet.Covers). The time is logged, not asserted (about
// 5 s on 2 busy cores): a wall time is the machine's, not the code's.
func TestTwoHundredServices(t *testing.T) {
	if testing.Short() {
		t.Skip("about ten seconds on 2 busy cores")
	}
	var b strings.Builder
	for i := range 200 {
		if i > 0 {
			b.WriteString("---\n")
		}
		fmt.Fprintf(&b, "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: svc%d}\nspec:\n  hosts: [svc%d]\n  http:\n  - name: svc%d\n    route:\n    - destination: {host: svc%d}\n    retries: {attempts: %d, perTryTimeout: 1s, retryOn: 5xx}\n", i, i, i, i, 1+i%3)
	}
	file := filepath.Join(t.TempDir(), "services.yaml")
	if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var out bytes.Buffer
	sarif := filepath.Join(t.TempDir(), "check.sarif")
	err := RunCheck(context.Background(), []string{file}, CheckOptions{JSON: true, CI: CI{SARIF: sarif}}, IO{Stdout: &out, Stderr: &bytes.Buffer{}})
	took := time.Since(start)
	if err != nil && !errors.Is(err, ErrUnsafe) {
		t.Fatal(err)
	}
	var r verdict.CheckResult
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Fleets) != 3 {
		t.Errorf("%d fleets for 200 services with 3 policies, want 3 (identical routes simulated once)", len(r.Fleets))
	}
	t.Logf("200 services, %d fleets, 3 seeds: %v", len(r.Fleets), took)
	// Every service's retries are annotated at its own line, though
	// simulated once with the others of its policy.
	data, err := os.ReadFile(sarif)
	if err != nil {
		t.Fatal(err)
	}
	var log sarifLog
	if err := json.Unmarshal(data, &log); err != nil {
		t.Fatal(err)
	}
	lines := map[int]bool{}
	for _, res := range log.Runs[0].Results {
		if strings.Contains(res.Message.Text, "retry.max_retries") && len(res.Locations) > 0 && res.Locations[0].PhysicalLocation.Region != nil {
			lines[res.Locations[0].PhysicalLocation.Region.StartLine] = true
		}
	}
	for i := range r.Fleets {
		if r.Level(i) == verdict.Safe {
			t.Fatalf("fleet %s is safe: the test wants every policy unsafe, so that every service is annotated", r.Fleets[i].Name)
		}
	}
	if len(lines) != 200 {
		t.Errorf("max_retries annotated at %d lines, want one per service (200)", len(lines))
	}
}

// TestManifests finds the chain in a directory of manifests: the ingress
// gateway's VirtualService routes to the orders Service, whose pods (a
// Deployment of 3, and a canary of 3 with the same ConfigMap: the same
// chain, simulated once) mount a gRPC service config: 2 × 3 attempts. The
// route to a Service not in the manifests and the ConfigMap no pod mounts
// are listed as not matched; a manifest that does not parse is refused
// with its file and line.
func TestManifests(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join("testdata", "manifests")
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		to := filepath.Join(dir, strings.TrimPrefix(p, src))
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			return err
		}
		return os.WriteFile(to, data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	canary := "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: orders-canary, namespace: shop}\nspec:\n  replicas: 3\n  template:\n    metadata: {labels: {app: orders, track: canary}}\n    spec:\n      volumes:\n      - name: grpc\n        configMap: {name: orders-grpc}\n"
	if err := os.WriteFile(filepath.Join(dir, "shop", "canary.yaml"), []byte(canary), 0o644); err != nil {
		t.Fatal(err)
	}
	sarif := filepath.Join(t.TempDir(), "m.sarif")
	var out bytes.Buffer
	err = RunCheck(context.Background(), nil, CheckOptions{Seeds: 1, Base: shortBase(), JSON: true, CI: CI{Manifests: dir, SARIF: sarif}}, IO{Stdout: &out, Stderr: &bytes.Buffer{}})
	if !errors.Is(err, ErrUnsafe) {
		t.Fatalf("%v\n%s", err, out.String())
	}
	var r struct {
		Chains    []verdict.StackResult
		Unmatched []string
		Simulated int `json:"chains_simulated"`
	}
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Chains) != 2 || r.Simulated != 1 {
		t.Fatalf("%d chains, %d simulated: want 2 chains (Deployment and canary), simulated once", len(r.Chains), r.Simulated)
	}
	// The distinct chain's check is printed once, not in every chain.
	var shape struct {
		Chains   []map[string]json.RawMessage
		Distinct []verdict.CheckResult
	}
	if err := json.Unmarshal(out.Bytes(), &shape); err != nil {
		t.Fatal(err)
	}
	if len(shape.Distinct) != 1 || len(shape.Distinct[0].Fleets) != 1 {
		t.Fatalf("distinct: %d checks, want the one chain's", len(shape.Distinct))
	}
	for _, ch := range shape.Chains {
		if _, ok := ch["check"]; ok || string(ch["distinct"]) != "0" || string(ch["verdict"]) != `"unsafe"` || string(ch["failing_cells"]) == "0" {
			t.Errorf("a chain has check %v, distinct %s, verdict %s, failing cells %s: want no check of its own, distinct 0, UNSAFE in some cells", ok, ch["distinct"], ch["verdict"], ch["failing_cells"])
		}
	}
	// Its own JSON as a baseline forgives both chains: the canary, which
	// shares the Deployment's simulation, is known by its own name.
	baseline := filepath.Join(t.TempDir(), "base.json")
	if err := os.WriteFile(baseline, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	var again bytes.Buffer
	if err := RunCheck(context.Background(), nil, CheckOptions{Seeds: 1, Base: shortBase(), CI: CI{Manifests: dir, Baseline: baseline}}, IO{Stdout: &again, Stderr: &bytes.Buffer{}}); err != nil {
		t.Errorf("the manifests against their own baseline: %v, want a pass\n%s", err, again.String())
	}
	// So does a baseline of an earlier version, each chain with its check.
	var full struct {
		Chains   []map[string]json.RawMessage `json:"chains"`
		Distinct []json.RawMessage            `json:"distinct"`
	}
	if err := json.Unmarshal(out.Bytes(), &full); err != nil {
		t.Fatal(err)
	}
	for _, ch := range full.Chains {
		ch["check"] = full.Distinct[0]
		delete(ch, "distinct")
		delete(ch, "failing_cells")
	}
	old, err := json.Marshal(map[string]any{"chains": full.Chains, "unmatched": r.Unmatched, "chains_simulated": 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(baseline, old, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := RunCheck(context.Background(), nil, CheckOptions{Seeds: 1, Base: shortBase(), CI: CI{Manifests: dir, Baseline: baseline}}, IO{Stdout: &again, Stderr: &bytes.Buffer{}}); err != nil {
		t.Errorf("the manifests against an earlier version's baseline: %v, want a pass", err)
	}
	for _, ch := range r.Chains {
		if len(ch.Layers) != 2 || ch.Layers[0].ClosedForm != 2 || ch.Layers[1].ClosedForm != 6 || !ch.Agree {
			t.Errorf("chain %s: %+v", ch.Chain, ch.Layers)
		}
		if !strings.HasPrefix(ch.Chain, "VirtualService orders-edge → ConfigMap orders-grpc of Deployment orders") {
			t.Errorf("chain %q", ch.Chain)
		}
	}
	if len(r.Unmatched) != 2 || !strings.Contains(r.Unmatched[0]+r.Unmatched[1], `no Service "payments"`) || !strings.Contains(r.Unmatched[0]+r.Unmatched[1], "ConfigMap billing-aws") {
		t.Errorf("unmatched: %q", r.Unmatched)
	}
	// The blame is at the manifest's line of maxAttempts.
	orders := filepath.Join(dir, "shop", "orders.yaml")
	data, _ := os.ReadFile(orders)
	want := 0
	for i, l := range strings.Split(string(data), "\n") {
		if strings.Contains(l, `"maxAttempts"`) {
			want = i + 1
		}
	}
	found := false
	for _, b := range r.Chains[0].Layers[1].Blame {
		found = found || b.File == orders && b.Line == want && b.Setting == "retry.max_retries"
	}
	if !found {
		t.Errorf("no blame at %s:%d: %+v", orders, want, r.Chains[0].Layers[1].Blame)
	}

	// A manifest that does not parse: its file and line.
	bad := filepath.Join(dir, "shop", "bad.yaml")
	if err := os.WriteFile(bad, []byte("apiVersion: v1\nkind: Service\nmetadata:\n  name: [x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err = RunCheck(context.Background(), nil, CheckOptions{Seeds: 1, Base: shortBase(), CI: CI{Manifests: dir}}, IO{Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}})
	var ue *UsageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "bad.yaml") || !strings.Contains(err.Error(), "line") {
		t.Errorf("a broken manifest: %v, want a usage error naming bad.yaml and the line", err)
	}
}

// TestTwoHundredServicesInManifests is the scale case for a
// stack: 200 services generated from a template, each behind the ingress
// gateway with the same route policy and with one of two client configs
// in its ConfigMap, make 200 chains of two distinct kinds: each kind is
// simulated once (the time is logged, not asserted).
func TestTwoHundredServicesInManifests(t *testing.T) {
	if testing.Short() {
		t.Skip("a few seconds on 2 busy cores")
	}
	dir := t.TempDir()
	writeServices(t, dir, 200, func(i int) servicePolicy { return servicePolicy{attempts: 1, maxAttempts: 2 + i%2} })
	start := time.Now()
	var out bytes.Buffer
	err := RunCheck(context.Background(), nil, CheckOptions{JSON: true, CI: CI{Manifests: dir}}, IO{Stdout: &out, Stderr: &bytes.Buffer{}})
	took := time.Since(start)
	if err != nil && !errors.Is(err, ErrUnsafe) {
		t.Fatal(err)
	}
	var r struct {
		Chains    []verdict.StackResult
		Unmatched []string
		Simulated int `json:"chains_simulated"`
	}
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	t.Logf("200 services: %d chains, %d simulated, %d unmatched, 3 seeds: %v", len(r.Chains), r.Simulated, len(r.Unmatched), took)
	if len(r.Chains) != 200 || r.Simulated != 2 || len(r.Unmatched) != 0 {
		t.Errorf("%d chains, %d simulated, unmatched %q: want 200 chains of 2 kinds, simulated twice, nothing unmatched", len(r.Chains), r.Simulated, r.Unmatched)
	}
}

// TestManifestsCountsTheWorkFirst: the simulations are counted before
// they start, and a check past the bound is refused with the count.
func TestManifestsCountsTheWorkFirst(t *testing.T) {
	var out bytes.Buffer
	err := RunCheck(context.Background(), nil, CheckOptions{Seeds: 1, Base: shortBase(), CI: CI{Manifests: filepath.Join("testdata", "manifests"), MaxRuns: 10}}, IO{Stdout: &out, Stderr: &bytes.Buffer{}})
	var ue *UsageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "1 distinct chains (of 1), 147 simulations in all, more than --max-runs 10") || strings.Contains(out.String(), "Chain:") {
		t.Errorf("%v, want a usage error with the count before anything ran\n%s", err, out.String())
	}
	// --stack counts its work too: mesh.yaml calls pods with Istio's
	// sidecar, so the chain is also judged on a pod replaced.
	err = RunCheck(context.Background(), nil, CheckOptions{Seeds: 1, Base: shortBase(), CI: CI{Stack: []string{stackdata("app-grpc.json"), stackdata("mesh.yaml")}, MaxRuns: 160}}, IO{Stdout: &out, Stderr: &bytes.Buffer{}})
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "161 simulations in all, more than --max-runs 160") {
		t.Errorf("--stack past --max-runs: %v", err)
	}
}

// TestAdviseStack: advise --stack on 3 × 2 × 2 attempts searches where
// to retry and, per layer, its format's budget and a breaker, one retry,
// and none, each on the faults the stack as it is is judged on (the work
// counted first): it recommends the best placement the files can say (a
// breaker is in no config format; the app's gRPC service config is not
// edited to no retries), says why the one ranked above it is not, and
// writes each layer's change into its own file (a diff in the layer's
// format: the gRPC client's retryThrottling, the routes' attempts).
func TestAdviseStack(t *testing.T) {
	if race.Enabled {
		// About 500 simulations, one goroutine each at a time: minutes under the
		// detector for nothing it can find; the plain pass runs them.
		t.Skip("advise --stack's search runs in the plain pass, not under -race")
	}
	ci := CI{Stack: []string{stackdata("app-grpc.json"), stackdata("mesh.yaml"), stackdata("gateway.yaml")}}
	var out, errb bytes.Buffer
	if err := RunAdviseStack(context.Background(), nil, CheckOptions{Seeds: 1, Base: shortBase(), CI: ci}, IO{Stdout: &out, Stderr: &errb}); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{
		"13 placements × 129 simulations each = 1677 simulations", // counted first: an upper bound
		"Recommendation: retry at app-grpc.json only, with retryThrottling 10 tokens, ratio 0.1.",
		`+  "retryThrottling": {"maxTokens": 10, "tokenRatio": 0.1},`,
		"-      attempts: 1",
		"no layer's format can write it",
	} {
		if !strings.Contains(errb.String()+out.String(), s) {
			t.Errorf("advise --stack lacks %q:\n%s%s", s, errb.String(), out.String())
		}
	}
	// Past --max-runs: refused with the count, before anything runs.
	err := RunAdviseStack(context.Background(), nil, CheckOptions{Seeds: 1, Base: shortBase(), CI: CI{Stack: ci.Stack, MaxRuns: 1676}}, IO{Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}})
	var ue *UsageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "= 1677 simulations, more than --max-runs 1676") {
		t.Errorf("past --max-runs: %v", err)
	}
	if testing.Short() {
		return // the JSON's ranking, once more through the whole search: not under -short
	}
	out.Reset()
	if err := RunAdviseStack(context.Background(), nil, CheckOptions{Seeds: 1, JSON: true, CI: ci}, IO{Stdout: &out, Stderr: &bytes.Buffer{}}); err != nil {
		t.Fatal(err)
	}
	var r struct {
		Candidates  []stackCandidate
		Recommended string
	}
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Candidates) != 13 || !strings.HasPrefix(r.Recommended, "retry at ") {
		t.Fatalf("%d candidates, recommended %q: want 13, and one retrying layer", len(r.Candidates), r.Recommended)
	}
	for _, c := range r.Candidates {
		if c.At < 0 && c.Name == "as it is" && (c.Origin != 36 || c.Verdict == verdict.Safe) {
			t.Errorf("the stack as it is: %+v", c)
		}
		if strings.Contains(c.Name, "breaker") && c.Writable {
			t.Errorf("%s: writable: a breaker is in no layer's format", c.Name)
		}
		if c.Writable != (c.Unwritable == "") {
			t.Errorf("%s: writable %v, and not because %q", c.Name, c.Writable, c.Unwritable)
		}
		if c.Name == "no retries at any layer" && (c.Writable || !strings.Contains(c.Unwritable, "app-grpc.json")) {
			t.Errorf("%s: writable %v (%s): the app's service config is not edited to no retries", c.Name, c.Writable, c.Unwritable)
		}
		if c.Name == r.Recommended && (!c.Writable || c.Changes[0] != "+ budget (retryThrottling 10 tokens, ratio 0.1)" || c.Changes[1] != "no retries") {
			t.Errorf("recommended %+v", c)
		}
	}
}

// TestAdviseStackWritesWhatItRecommends: behind an app that does not
// retry, an Istio VirtualService of attempts: 10 and no DestinationRule.
// The retry budget advise tries at that layer is Istio's, but the file
// has no DestinationRule to hold it: a placement with it is ranked and
// said to be unwritable, not recommended (it was, and advise then failed
// to write its own advice). What it recommends is better than the chain
// as it is, and written into the route's own file.
func TestAdviseStackWritesWhatItRecommends(t *testing.T) {
	if race.Enabled {
		t.Skip("advise --stack's search runs in the plain pass, not under -race")
	}
	sidecar := filepath.Join("..", "..", "..", "verdict", "testdata", "early", "istio10-a.yaml")
	ci := CI{Stack: []string{stackdata("app-noretry.json") + "," + sidecar}}
	var out, errb bytes.Buffer
	if err := RunAdviseStack(context.Background(), nil, CheckOptions{Seeds: 1, Base: shortBase(), JSON: true, CI: ci}, IO{Stdout: &out, Stderr: &errb}); err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	var r struct {
		Candidates  []stackCandidate
		Recommended string
	}
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	var asIs, best *stackCandidate
	budgeted := false
	for i, c := range r.Candidates {
		switch {
		case c.Name == "as it is":
			asIs = &r.Candidates[i]
		case c.Name == r.Recommended:
			best = &r.Candidates[i]
		}
		if strings.Contains(c.Name, "retry budget") && !strings.Contains(c.Name, "breaker") {
			budgeted = true
			if c.Writable || !strings.Contains(c.Unwritable, "istio10-a.yaml's files cannot hold it") {
				t.Errorf("%s: writable %v (%q): a VirtualService alone has no place for a retry budget", c.Name, c.Writable, c.Unwritable)
			}
		}
	}
	if asIs == nil || best == nil || !budgeted {
		t.Fatalf("as it is %v, recommended %q found %v, a budget tried %v", asIs != nil, r.Recommended, best != nil, budgeted)
	}
	if !best.Writable || best.Verdict >= asIs.Verdict {
		t.Errorf("recommended %q (%v, writable %v) over the chain as it is (%v)", best.Name, best.Verdict, best.Writable, asIs.Verdict)
	}
	out.Reset()
	if err := RunAdviseStack(context.Background(), nil, CheckOptions{Seeds: 1, Base: shortBase(), CI: ci}, IO{Stdout: &out, Stderr: &errb}); err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	if !strings.Contains(out.String(), "+++ "+sidecar+" (advised)") {
		t.Errorf("the route's change is not written:\n%s", out.String())
	}
}

// copyDir copies the files under src into a new temporary directory.
func copyDir(t *testing.T, src string) string {
	t.Helper()
	dir := t.TempDir()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		to := filepath.Join(dir, strings.TrimPrefix(p, src))
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			return err
		}
		return os.WriteFile(to, data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestManifestsFollowTheHops is the case found in manifests, four
// layers deep: the ingress gateway's route (2 attempts) into the
// frontend, whose gRPC channel (3 attempts, a service config in a
// ConfigMap) calls payments (named in its env) through the mesh's route
// (2 attempts, to subset v2 only), whose pods' channel (2 attempts) calls
// the ledger (its target beside the service config): 2, 6, 12 and 24
// attempts per intent, closed form and simulated, each layer at its file
// and line and with the hop that leads to it. The frontend's call to
// inventory, whose Service is elsewhere, ends a chain of two; an
// external URL (api.stripe.com) and the v1 pods, which the subset leaves
// out, are no hop.
func TestManifestsFollowTheHops(t *testing.T) {
	dir := copyDir(t, filepath.Join("testdata", "deep"))
	var out bytes.Buffer
	err := RunCheck(context.Background(), nil, CheckOptions{Seeds: 1, Base: shortBase(), JSON: true, CI: CI{Manifests: dir}}, IO{Stdout: &out, Stderr: &bytes.Buffer{}})
	if !errors.Is(err, ErrUnsafe) {
		t.Fatalf("%v\n%s", err, out.String())
	}
	var r struct {
		Chains    []verdict.StackResult
		Unmatched []string
		Simulated int `json:"chains_simulated"`
	}
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Chains) != 2 || r.Simulated != 2 {
		t.Fatalf("%d chains, %d simulated: want 2 (to the ledger, to inventory), each simulated", len(r.Chains), r.Simulated)
	}
	type want struct {
		name, file string
		line       int
		closed     float64
		via        string
	}
	deep := []want{
		{"VirtualService shop-edge", "edge.yaml", 11, 2, ""},
		{"ConfigMap frontend-grpc of Deployment frontend", "frontend.yaml", 39, 6, "Service frontend selects Deployment frontend"},
		{"VirtualService payments", "payments.yaml", 10, 12, "frontend.yaml:24: env PAYMENTS_ADDR"},
		{"ConfigMap payments-grpc of Deployment payments-v2", "payments.yaml", 57, 24, "Service payments (subset v2) selects Deployment payments-v2"},
	}
	for k, w := range [][]want{deep, deep[:2]} {
		ch := r.Chains[k]
		if len(ch.Layers) != len(w) || !ch.Agree {
			t.Errorf("chain %s: %d layers (agree %v), want %d", ch.Chain, len(ch.Layers), ch.Agree, len(w))
			continue
		}
		for i, l := range ch.Layers {
			if l.Name != w[i].name || filepath.Base(l.File) != w[i].file || l.Line != w[i].line || !strings.Contains(l.Via, w[i].via) {
				t.Errorf("chain %d layer %d: %s at %s:%d via %q, want %s at %s:%d via %q", k, i, l.Name, l.File, l.Line, l.Via, w[i].name, w[i].file, w[i].line, w[i].via)
			}
			if l.ClosedForm != w[i].closed || !l.Exact || math.Abs(l.Simulated-w[i].closed) > 0.05*w[i].closed {
				t.Errorf("chain %d layer %s: closed form %g (exact %v), simulated %g: want %g both", k, l.Name, l.ClosedForm, l.Exact, l.Simulated, w[i].closed)
			}
		}
	}
	if len(r.Unmatched) != 1 || !strings.Contains(r.Unmatched[0], "env INVENTORY_URL: calls inventory") {
		t.Errorf("unmatched: %q, want the call to inventory only", r.Unmatched)
	}

	// The ledger calls the frontend back: a loop, refused with the loop.
	ledger := filepath.Join(dir, "ledger.yaml")
	data, err := os.ReadFile(ledger)
	if err != nil {
		t.Fatal(err)
	}
	data = append(data, "        - {name: FRONTEND, value: \"grpc://frontend.shop:8080\"}\n"...)
	if err := os.WriteFile(ledger, data, 0o644); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	err = RunCheck(context.Background(), nil, CheckOptions{Seeds: 1, Base: shortBase(), CI: CI{Manifests: dir}}, IO{Stdout: &out, Stderr: &bytes.Buffer{}})
	var ue *UsageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "the chain loops: shop/frontend") || !strings.Contains(err.Error(), "env FRONTEND") || out.Len() > 0 {
		t.Errorf("a loop: %v (printed %q), want a usage error printing the loop, before anything", err, out.String())
	}
}

// TestStackShardsMerge: check --manifests and --stack split with --shard
// and put together by merge print what one whole run prints, byte for
// byte; merge refuses shards that are not of one run.
func TestStackShardsMerge(t *testing.T) {
	dir := t.TempDir()
	for _, ci := range []CI{
		{Manifests: filepath.Join("testdata", "manifests")},
		{Stack: []string{stackdata("app-grpc.json"), stackdata("mesh.yaml")}},
	} {
		whole, _, err := func() (string, string, error) { return runStack(t, ci, true) }()
		if err != nil && !errors.Is(err, ErrUnsafe) {
			t.Fatal(err)
		}
		var files []string
		for i := 1; i <= 3; i++ {
			var out bytes.Buffer
			err := RunCheck(context.Background(), nil, CheckOptions{Seeds: 1, Base: shortBase(), JSON: true, Shard: fmt.Sprintf("%d/3", i), CI: ci}, IO{Stdout: &out, Stderr: &bytes.Buffer{}})
			if err != nil {
				t.Fatalf("shard %d/3: %v", i, err)
			}
			f := filepath.Join(dir, fmt.Sprintf("s%d.json", i))
			if err := os.WriteFile(f, out.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
		}
		var merged bytes.Buffer
		_, _, err = RunMerge(context.Background(), files, MergeOptions{JSON: true}, IO{Stdout: &merged, Stderr: &bytes.Buffer{}})
		if err != nil && !errors.Is(err, ErrUnsafe) {
			t.Fatalf("merge: %v", err)
		}
		if len(whole) < 1000 || merged.String() != whole {
			t.Errorf("%+v: merged shards differ from the whole run:\n%s\nwant\n%s", ci, merged.String(), whole)
		}
		// A shard missing, and one of another run.
		_, _, err = RunMerge(context.Background(), files[1:], MergeOptions{JSON: true}, IO{Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}})
		var ue *UsageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), "outage run") && !strings.Contains(err.Error(), "no shard ran") {
			t.Errorf("two shards of three: %v, want a usage error", err)
		}
		data, _ := os.ReadFile(files[1])
		other := filepath.Join(dir, "other.json")
		if err := os.WriteFile(other, bytes.Replace(data, []byte(`"source": "--`), []byte(`"source": "x--`), 1), 0o644); err != nil {
			t.Fatal(err)
		}
		_, _, err = RunMerge(context.Background(), []string{files[0], other, files[2]}, MergeOptions{JSON: true}, IO{Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}})
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), "source") {
			t.Errorf("a shard of another run: %v, want a usage error naming source", err)
		}
	}
}

// sarifLog is what the tests read of a SARIF 2.1.0 log: the results'
// messages and locations (the schema's names).
type sarifLog struct {
	Runs []struct {
		Results []struct {
			Level   string `json:"level"`
			Message struct {
				Text string `json:"text"`
			} `json:"message"`
			Locations []struct {
				PhysicalLocation struct {
					ArtifactLocation struct {
						URI string `json:"uri"`
					} `json:"artifactLocation"`
					Region *struct {
						StartLine int `json:"startLine"`
					} `json:"region"`
				} `json:"physicalLocation"`
			} `json:"locations"`
		} `json:"results"`
	} `json:"runs"`
}

// junitSuites is what the tests read of a JUnit XML report.
type junitSuites struct {
	Suites []struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
		Cases    []struct {
			Name    string `xml:"name,attr"`
			Failure *struct {
				Message string `xml:"message,attr"`
				Text    string `xml:",chardata"`
			} `xml:"failure"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}
