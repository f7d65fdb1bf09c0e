package configcmd

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/retrystorm/retrystorm/experiment"
	"github.com/retrystorm/retrystorm/importer"
	"github.com/retrystorm/retrystorm/scenario"
)

func runCmd(t *testing.T, f func(context.Context, []string, IO) error, args ...string) (string, string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	err := f(context.Background(), args, IO{Stdout: &out, Stderr: &errb})
	return out.String(), errb.String(), err
}

func testdata(name string) string { return filepath.Join("..", "..", "importer", "testdata", name) }

func TestImportCommand(t *testing.T) {
	out, _, err := runCmd(t, Import, testdata("envoy/front-proxy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	sc, err := scenario.Parse("out.yaml", []byte(out))
	if err != nil {
		t.Fatalf("import wrote a scenario that does not load: %v\n%s", err, out)
	}
	if b := sc.Fleets[0].Budget; b.Use != scenario.BudgetConcurrency || b.Percent != 20 || b.MinConcurrency != 3 {
		t.Errorf("budget %+v", b)
	}
	if !strings.Contains(out, "retry_budget.budget_percent") {
		t.Error("the fleet's comment does not say where the budget came from")
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "mine.yaml")
	if _, _, err := runCmd(t, Import, "-o", file, testdata("aws/config"), "--format", "aws"); err != nil {
		t.Fatal(err)
	}
	if _, err := scenario.Load(file); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{}, {"--format", "nginx", testdata("aws/config")}, {"no-such-file.yaml"}, {testdata("../importer.go")}} {
		var ue *UsageError
		if _, _, err := runCmd(t, Import, args...); !errors.As(err, &ue) {
			t.Errorf("import %v: %v, want a usage error", args, err)
		}
	}
}

// TestCheckCommand: check exits 1 (ErrUnsafe) for a config with 3 retries
// and no budget in the storm's dip, and 0 for one with a budget.
func TestCheckCommand(t *testing.T) {
	out, _, err := runCmd(t, Check, testdata("istio/naive.yaml"))
	if !errors.Is(err, ErrUnsafe) {
		t.Errorf("check of 3 retries and no budget: %v, want ErrUnsafe\n%s", err, out)
	}
	if !strings.Contains(out, "UNSAFE") || !strings.Contains(out, "to blame: max_retries 3 with no budget") {
		t.Errorf("check does not say it plainly:\n%s", out)
	}
	out, _, err = runCmd(t, Check, testdata("istio/budget.yaml"))
	if err != nil {
		t.Errorf("check of a config with a budget: %v\n%s", err, out)
	}
	// --load and --dip move the realistic region: at 50% load the naive
	// config recovers from a third of capacity gone.
	if _, _, err := runCmd(t, Check, "--load", "0.5", testdata("istio/naive.yaml")); err != nil {
		t.Errorf("check at 50%% load: %v", err)
	}
	if _, _, err := runCmd(t, Check, "--shard", "1/2", testdata("istio/naive.yaml")); err == nil {
		t.Error("--shard without --json accepted")
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("duration: 60s\nfleets:\n  - {name: a, timeout: 1s, budget: {use: token_bukket}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := runCmd(t, Check, bad); err == nil || !strings.Contains(err.Error(), "token_bukket") {
		t.Errorf("a scenario with a typo: %v, want the loader's error naming it", err)
	}
}

// TestMergeCommand: check split in two shards and merged prints what one
// check prints.
func TestMergeCommand(t *testing.T) {
	file := testdata("istio/naive.yaml")
	one, _, err := runCmd(t, Check, "--json", file)
	if !errors.Is(err, ErrUnsafe) {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var parts []string
	for _, s := range []string{"1/2", "2/2"} {
		out, _, err := runCmd(t, Check, "--json", "--shard", s, file)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, strings.ReplaceAll(s, "/", "-")+".json")
		if err := os.WriteFile(p, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
		parts = append(parts, p)
	}
	var out bytes.Buffer
	_, _, err = Merge(context.Background(), append([]string{"--json"}, parts...), IO{Stdout: &out, Stderr: &out})
	if !errors.Is(err, ErrUnsafe) {
		t.Fatalf("merge: %v, want ErrUnsafe as check gives", err)
	}
	if out.String() != one {
		t.Errorf("merged:\n%s\none run:\n%s", out.String(), one)
	}
}

// TestPickFleet: advise starts from the route named with --route, else
// the first that retries (it once took the first route of the file, one
// with no retries).
func TestPickFleet(t *testing.T) {
	in := []experiment.CheckInput{
		{Fleet: scenario.Fleet{Name: "PUT /books"}, Origin: "sp.yaml: spec.routes[0]"},
		{Fleet: scenario.Fleet{Name: "HEAD /authors", Retry: scenario.Retry{MaxRetries: -1}}, Origin: "sp.yaml: spec.routes[1]"},
	}
	for route, want := range map[string]string{"": "HEAD /authors", "PUT /books": "PUT /books", "routes[0]": "PUT /books"} {
		got, err := pickFleet(in, route)
		if err != nil || got.Fleet.Name != want {
			t.Errorf("--route %q: %q, %v; want %q", route, got.Fleet.Name, err, want)
		}
	}
	if _, err := pickFleet(in, "nope"); err == nil || !strings.Contains(err.Error(), `"PUT /books"`) {
		t.Errorf("--route nope: %v, want a usage error listing the fleets", err)
	}
}

// TestAdviseWritesIntoTheUsersFile: advise on a gRPC service config
// prints its recommendation as a diff of the user's own file: the
// method's name (its scope) and its retryable codes stay, and it says
// the conditions were not searched.
func TestAdviseWritesIntoTheUsersFile(t *testing.T) {
	file := testdata("grpc/service-config.json")
	in, b, _, uf, err := inputFiles(IO{}, []string{file}, "", "", importer.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cand := in[0].Fleet
	cand.Name, cand.Retry.MaxRetries = "2 retries", 2
	r, err := experiment.Advise(context.Background(), in[0], experiment.AdviseOptions{Base: b, Seeds: 1, Space: []scenario.Fleet{cand}}, experiment.Options{})
	if err != nil {
		t.Fatal(err)
	}
	from, ok := uf.imported(in[0])
	if !ok {
		t.Fatal("the imported fleet is not found again")
	}
	var out bytes.Buffer
	if err := printAdvise(IO{Stdout: &out, Stderr: &out}, r, []importer.Format{importer.GRPC, importer.GoCode}, 3, "", "", &editTarget{srcs: uf.srcs, from: from}); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{"--- " + file, "The retry conditions are yours", ` "name": [{"service": "grpc.examples.echo.Echo"}],`} {
		if !strings.Contains(s, want) {
			t.Errorf("advise does not say %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, `"name": [{}]`) || strings.Contains(s, "INTERNAL") {
		t.Errorf("advise widened the scope or the conditions:\n%s", s)
	}
}
