package importer

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	goldenfile "github.com/retrystorm/retrystorm/internal/golden"

	"github.com/retrystorm/retrystorm/experiment"
	"github.com/retrystorm/retrystorm/internal/budgetcheck"
	"github.com/retrystorm/retrystorm/report"
	"github.com/retrystorm/retrystorm/scenario"
	"github.com/retrystorm/retrystorm/sim"
	"github.com/retrystorm/retrystorm/verdict"
)

func storm(t testing.TB) *scenario.Scenario {
	t.Helper()
	sc, err := scenario.Load(filepath.Join("..", "experiment", "scenarios", "storm.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

func sources(t testing.TB, files ...string) []Source {
	t.Helper()
	var out []Source
	for _, f := range files {
		d, err := os.ReadFile(filepath.Join("testdata", f))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, Source{Name: f, Data: d})
	}
	return out
}

// TestImportGolden imports each format's example configs onto the storm
// and compares the scenario file, comments included, with the golden one.
// The written file must load back as the same fleets.
func TestImportGolden(t *testing.T) {
	for name, files := range map[string][]string{
		"envoy":   {"envoy/front-proxy.yaml", "envoy/route.yaml", "envoy/cluster.yaml"},
		"istio":   {"istio/reviews.yaml", "istio/budget.yaml"},
		"linkerd": {"linkerd/books.yaml"},
		"aws":     {"aws/config", "aws/env"},
		"grpc":    {"grpc/service-config.json", "grpc/hedging.json"},
		"nginx":   {"nginx/nginx.conf", "nginx/ingress-configmap.yaml"},
		"haproxy": {"haproxy/haproxy.cfg"},
	} {
		t.Run(name, func(t *testing.T) {
			fl, err := Import(sources(t, files...), Options{Timeout: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range fl {
				if f.Format != Format(name) {
					t.Errorf("fleet %q detected as %s", f.Fleet.Name, f.Format)
				}
			}
			out, err := Write(fl, storm(t))
			if err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", "golden", name+".yaml")
			goldenfile.Check(t, golden, out, "go test ./importer -run TestImportGolden -update")
			back, err := scenario.Parse(golden, out)
			if err != nil {
				t.Fatalf("the written scenario does not load: %v", err)
			}
			for i, f := range fl {
				if back.Fleets[i].Name != f.Fleet.Name || back.Fleets[i].Budget.Use != f.Fleet.Budget.Use {
					t.Errorf("fleet %d read back as %q/%s, want %q/%s", i, back.Fleets[i].Name, back.Fleets[i].Budget.Use, f.Fleet.Name, f.Fleet.Budget.Use)
				}
			}
		})
	}
}

// TestEnvoyBudgetRuleInTheSimulator is the test: an Envoy route
// and cluster with a 20% retry budget and min_retry_concurrency 3 import
// into a fleet whose retries, in the simulator, never break Envoy's rule
// (checked from outside resil, on every retry decision of every client),
// through the storm's dip and through a deeper one where the budget binds.
func TestEnvoyBudgetRuleInTheSimulator(t *testing.T) {
	fl, err := Import(sources(t, "envoy/front-proxy.yaml"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(fl) != 1 {
		t.Fatalf("%d fleets, want the one route", len(fl))
	}
	b := fl[0].Fleet.Budget
	if b.Use != scenario.BudgetConcurrency || b.Concurrency.Percent != 20 || b.Concurrency.MinConcurrency != 3 {
		t.Fatalf("budget %+v, want concurrency 20%% / 3", b)
	}
	for _, dip := range []float64{80, 20} {
		sc, _, err := Scenario(fl, storm(t))
		if err != nil {
			t.Fatal(err)
		}
		sc.Triggers[0].Capacity = dip
		w := budgetcheck.Watch(20, 3)
		res, err := sim.RunWith(context.Background(), sc, sim.Options{WrapBudget: w.Wrap})
		if err != nil {
			t.Fatal(err)
		}
		clients, allowed, refused, peak, bad, err := w.Totals()
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range bad {
			t.Errorf("dip to %v: %s", dip, v)
		}
		t.Logf("dip to %v: %d clients, %d retries allowed, %d refused by the budget, at most %d active at once in one client; %d retries sent",
			dip, clients, allowed, refused, peak, res.Fleets[0].Summary.Retries)
		if allowed == 0 {
			t.Errorf("dip to %v: no retry at all: the test shows nothing", dip)
		}
		if dip == 20 && refused == 0 {
			t.Errorf("dip to %v: the budget never refused: the rule was not tested where it binds", dip)
		}
	}
}

func TestDetect(t *testing.T) {
	for file, want := range map[string]Format{
		"envoy/front-proxy.yaml": Envoy, "envoy/route.yaml": Envoy, "envoy/cluster.yaml": Envoy,
		"istio/reviews.yaml": Istio, "istio/budget.yaml": Istio,
		"linkerd/books.yaml": Linkerd, "aws/config": AWS, "aws/env": AWS,
		"grpc/service-config.json": GRPC, "grpc/hedging.json": GRPC,
	} {
		s := sources(t, file)[0]
		got, err := Detect(s.Name, s.Data)
		if err != nil || got != want {
			t.Errorf("%s: %v, %v; want %s", file, got, err, want)
		}
	}
	for name, data := range map[string]string{
		"not a config": "hello: world\n",
		"a list":       "- 1\n- 2\n",
		"mixed":        "apiVersion: linkerd.io/v1alpha2\nkind: ServiceProfile\n---\nvirtual_hosts: []\n",
	} {
		if f, err := Detect(name, []byte(data)); err == nil {
			t.Errorf("%s: detected as %s, want an error", name, f)
		}
	}
	if f, _ := Detect("grpc.json", []byte(`{"methodConfig": [{"name": [{"service": "x"}], "retryPolicy": {"maxAttempts": 3}}]}`)); f != GRPC {
		t.Errorf("a gRPC service config detected as %q", f)
	}
}

// TestImportErrors: a typo or a wrong value is an error that names the
// file and line, never a silent default.
func TestImportErrors(t *testing.T) {
	for _, c := range []struct {
		name, file, data string
		format           Format
		want             string
	}{
		{"envoy typo", "r.yaml", "virtual_hosts:\n- name: a\n  domains: ['*']\n  routes:\n  - match: {prefix: /}\n    route:\n      cluster: c\n      retry_policy: {num_retires: 3}\n", "", `r.yaml:8: unknown field "num_retires"`},
		{"envoy wrong type", "r.yaml", "virtual_hosts:\n- name: a\n  domains: ['*']\n  routes:\n  - match: {prefix: /}\n    route:\n      cluster: c\n      retry_policy:\n        num_retries: lots\n", "", "r.yaml:9:"},
		{"envoy bad retry_on", "r.yaml", "virtual_hosts:\n- name: a\n  domains: ['*']\n  routes:\n  - match: {prefix: /}\n    route:\n      cluster: c\n      retry_policy: {retry_on: '5xx,sometimes'}\n", "", `unknown retry condition "sometimes"`},
		{"envoy cluster only", "c.yaml", "name: c\nconnect_timeout: 1s\n", "", "no route"},
		{"istio typo", "vs.yaml", "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: a}\nspec:\n  http:\n  - retries: {atempts: 3}\n", "", `vs.yaml:6: unknown field "atempts"`},
		{"linkerd typo", "sp.yaml", "apiVersion: linkerd.io/v1alpha2\nkind: ServiceProfile\nmetadata: {name: a}\nspec:\n  routes:\n  - name: r\n    isRetryabel: true\n", "", `sp.yaml:7: spec.routes[0]: unknown field "isRetryabel"`},
		{"linkerd bad ttl", "sp.yaml", "apiVersion: linkerd.io/v1alpha2\nkind: ServiceProfile\nmetadata: {name: a}\nspec:\n  routes:\n  - {name: r, isRetryable: true}\n  retryBudget: {ttl: soon}\n", "", `"soon" is not a positive duration`},
		{"aws bad mode", "config", "[default]\nretry_mode = fast\n", "", `retry_mode "fast"`},
		{"aws bad attempts", "config", "[default]\nmax_attempts = 0\n", "", `max_attempts "0"`},
		{"aws nothing", "config", "[default]\nregion = us-east-1\n", "", "no profile sets retry_mode or max_attempts"},
		{"forced wrong", "config", "[default]\nretry_mode = standard\n", Envoy, "config"},
		{"grpc without methods", "sc.json", `{"methodConfig": []}`, "", "without methodConfig"},
		{"grpc typo", "sc.json", "{\n  \"methodConfig\": [{\"name\": [{}], \"retryPolicy\": {\"maxAttempts\": 3, \"initialBackof\": \"1s\"}}]\n}", "", "initialBackof"},
		{"huge", "big.yaml", strings.Repeat("a", maxFileBytes+1), Envoy, "larger than"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Import([]Source{{Name: c.file, Data: []byte(c.data)}}, Options{Format: c.format, Timeout: time.Second})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want it to contain %q", err, c.want)
			}
		})
	}
}

// TestCheckImported is the test for check, on imported configs:
// an Istio route with 3 retries on 5xx and no retry budget collapses in
// the storm's dip; a Linkerd route with its retry budget does not.
func TestCheckImported(t *testing.T) {
	var in []verdict.CheckInput
	for _, file := range []string{"istio/naive.yaml", "linkerd/books.yaml"} {
		fl, err := Import(sources(t, file), Options{})
		if err != nil {
			t.Fatal(err)
		}
		in = append(in, verdict.CheckInput{Fleet: fl[0].Fleet, Origin: fl[0].Origin})
	}
	r, err := verdict.Check(context.Background(), in, verdict.CheckOptions{Base: storm(t)}, experiment.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := r.Render(&out, report.Style{}); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", out.String())
	if r.Level(0) != verdict.Unsafe {
		t.Errorf("the Istio config with 3 retries and no budget: %v, want UNSAFE", r.Level(0))
	}
	if r.Level(1) == verdict.Unsafe {
		t.Errorf("the Linkerd config with a retry budget: %v, want it not UNSAFE", r.Level(1))
	}
}
