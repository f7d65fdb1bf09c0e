package importer

import (
	"encoding/json"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"strings"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/resil/budget"
	"github.com/retrystorm/retrystorm/scenario"
)

func indent(s, pre string) string {
	var out []string
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		out = append(out, pre+l)
	}
	return strings.Join(out, "\n") + "\n"
}

// exportFleets are policies of each budget kind, to write and read back.
func exportFleets() []scenario.Fleet {
	bo := scenario.Backoff{Use: "exponential", Base: 100 * time.Millisecond, Cap: time.Second, Multiplier: 2, Jitter: "full"}
	return []scenario.Fleet{
		{Name: "concurrency", Timeout: time.Second, Deadline: 5 * time.Second, Retry: scenario.Retry{MaxRetries: 2, Backoff: bo},
			Budget: scenario.Budget{Use: scenario.BudgetConcurrency, Concurrency: budget.ConcurrencySettings{Percent: 20, MinConcurrency: 3}}},
		{Name: "breaker", Timeout: 250 * time.Millisecond, Deadline: 2 * time.Second, Retry: scenario.Retry{MaxRetries: 1, On: []string{"rejection"}, Backoff: bo},
			Budget:  scenario.Budget{Use: scenario.BudgetConcurrency, Concurrency: budget.ConcurrencySettings{MinConcurrency: 5}},
			Breaker: scenario.Breaker{Use: scenario.BreakerConsecutive, Threshold: 5, Cooldown: 5 * time.Second, Probes: 1, Scope: "all"}},
		{Name: "bucket", Timeout: time.Second, Retry: scenario.Retry{MaxRetries: 3, Backoff: bo},
			Budget: scenario.Budget{Use: scenario.BudgetTokenBucket, TokenBucket: budget.TokenBucketSettings{Ratio: 0.1, Funding: budget.FundedBySuccess, MinTokens: 10, MaxTokens: 100, RetryCost: 1, TimeoutCost: 1}}},
	}
}

// TestExportEnvoyRoundTrip writes each policy as an Envoy fragment, puts
// it into a route and a cluster, and imports it: what Envoy can express
// must come back the same, and what it cannot must be said.
func TestExportEnvoyRoundTrip(t *testing.T) {
	for _, f := range exportFleets() {
		text, cannot, err := Export(f, Envoy)
		if err != nil {
			t.Fatal(err)
		}
		route, cluster, ok := strings.Cut(text, "# The cluster (clusters[]):\n")
		if !ok {
			t.Fatalf("%s: no cluster part:\n%s", f.Name, text)
		}
		doc := "virtual_hosts:\n- name: v\n  domains: ['*']\n  routes:\n  - name: " + f.Name + "\n    match: {prefix: /}\n    route:\n      cluster: c\n" +
			indent(route, "      ") + "---\nname: c\nconnect_timeout: 1s\n" + cluster
		fl, err := Import([]Source{{Name: f.Name + ".yaml", Data: []byte(doc)}}, Options{})
		if err != nil {
			t.Fatalf("%s: %v\n%s", f.Name, err, doc)
		}
		g := fl[0].Fleet
		if g.Timeout != f.Timeout || g.Deadline != f.Deadline || g.Retry.MaxRetries != f.Retry.MaxRetries ||
			g.Retry.Backoff.Base != f.Retry.Backoff.Base || g.Retry.Backoff.Cap != f.Retry.Backoff.Cap {
			t.Errorf("%s: read back as %+v\nfrom\n%s", f.Name, g, doc)
		}
		if strings.Join(g.Retry.On, ",") != strings.Join(f.Retry.On, ",") {
			t.Errorf("%s: retry.on %v read back as %v", f.Name, f.Retry.On, g.Retry.On)
		}
		if f.Budget.Use == scenario.BudgetConcurrency && (g.Budget.Use != f.Budget.Use || g.Budget.Concurrency != f.Budget.Concurrency) {
			t.Errorf("%s: budget %+v read back as %+v", f.Name, f.Budget, g.Budget)
		}
		said := strings.Join(cannot, "\n")
		if f.Breaker.Use != scenario.BreakerNone && f.Breaker.Use != "" && !strings.Contains(said, "circuit breaker") {
			t.Errorf("%s: the breaker is lost without a word: %q", f.Name, said)
		}
		if f.Budget.Use == scenario.BudgetTokenBucket && !strings.Contains(said, "token_bucket budget") {
			t.Errorf("%s: the token bucket is lost without a word: %q", f.Name, said)
		}
	}
}

// TestExportOthersRoundTrip does the same for Istio, Linkerd and the AWS
// SDK, and checks that the gRPC service config is JSON and the Go code
// parses.
func TestExportOthersRoundTrip(t *testing.T) {
	fset := token.NewFileSet()
	goImporter := importer.ForCompiler(fset, "source", nil) // one, so resil is type-checked once
	for _, f := range exportFleets() {
		text, _, err := Export(f, Istio)
		if err != nil {
			t.Fatal(err)
		}
		vs, dr, _ := strings.Cut(text, "# DestinationRule spec.trafficPolicy:\n")
		doc := "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: v}\nspec:\n  http:\n  - name: " + f.Name + "\n    route: [{destination: {host: h}}]\n" +
			indent(vs, "    ") + "---\napiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {name: h}\nspec:\n  host: h\n  trafficPolicy:\n" + indent(dr, "    ")
		fl, err := Import([]Source{{Name: "istio.yaml", Data: []byte(doc)}}, Options{})
		if err != nil {
			t.Fatalf("%s: istio: %v\n%s", f.Name, err, doc)
		}
		if g := fl[0].Fleet; g.Timeout != f.Timeout || g.Retry.MaxRetries != f.Retry.MaxRetries || g.Deadline != f.Deadline {
			t.Errorf("%s: istio read back as %+v\n%s", f.Name, g, doc)
		}

		text, _, err = Export(f, Linkerd)
		if err != nil {
			t.Fatal(err)
		}
		text = strings.NewReplacer("<your route>", "r", "<your path>", "/").Replace(text)
		doc = "apiVersion: linkerd.io/v1alpha2\nkind: ServiceProfile\nmetadata: {name: s}\nspec:\n" + indent(strings.TrimPrefix(text, "# ServiceProfile spec:\n"), "  ")
		if _, err := Import([]Source{{Name: "sp.yaml", Data: []byte(doc)}}, Options{}); err != nil {
			t.Fatalf("%s: linkerd: %v\n%s", f.Name, err, doc)
		}

		text, _, err = Export(f, AWS)
		if err != nil {
			t.Fatal(err)
		}
		fl, err = Import([]Source{{Name: "config", Data: []byte(text)}}, Options{Timeout: time.Second})
		if err != nil || fl[0].Fleet.Retry.MaxRetries != f.Retry.MaxRetries {
			t.Fatalf("%s: aws: %v %+v\n%s", f.Name, err, fl, text)
		}

		text, _, err = Export(f, GRPC)
		if err != nil {
			t.Fatal(err)
		}
		var sc struct {
			MethodConfig []struct {
				RetryPolicy *struct{ MaxAttempts int } `json:"retryPolicy"`
			} `json:"methodConfig"`
		}
		if err := json.Unmarshal([]byte(text), &sc); err != nil || sc.MethodConfig[0].RetryPolicy.MaxAttempts != f.Retry.MaxRetries+1 {
			t.Fatalf("%s: grpc: %v\n%s", f.Name, err, text)
		}
		fl, err = Import([]Source{{Name: "sc.json", Data: []byte(text)}}, Options{})
		if err != nil {
			t.Fatalf("%s: grpc: %v\n%s", f.Name, err, text)
		}
		if g := fl[0].Fleet; g.Retry.MaxRetries != f.Retry.MaxRetries || g.Retry.Backoff.Base != f.Retry.Backoff.Base || g.Retry.Backoff.Cap != f.Retry.Backoff.Cap {
			t.Errorf("%s: grpc read back as %+v\n%s", f.Name, g, text)
		}

		text, _, err = Export(f, GoCode)
		if err != nil {
			t.Fatal(err)
		}
		src := "package p\nimport (\"time\"; \"github.com/retrystorm/retrystorm/resil\"; \"github.com/retrystorm/retrystorm/resil/budget\")\nfunc f() error {\n" + text + "_ = settings\nreturn nil\n}\nvar _ = time.Second\nvar _ budget.None\n"
		file, err := parser.ParseFile(fset, "x.go", src, 0)
		if err != nil {
			t.Fatalf("%s: the Go code does not parse: %v\n%s", f.Name, err, text)
		}
		conf := types.Config{Importer: goImporter}
		if _, err := conf.Check("p", fset, []*ast.File{file}, nil); err != nil {
			t.Fatalf("%s: the Go code does not type-check against resil: %v\n%s", f.Name, err, text)
		}
	}
}

// TestProtoDur: a protobuf Duration from the integer nanoseconds: 1.36s
// was written "1.3599999999999999s" (from a float), which Envoy's parser
// refuses, and advise on an Envoy route with a 13.6 s timeout and 9
// retries failed.
func TestProtoDur(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0s"}, {1360 * time.Millisecond, "1.36s"}, {time.Second, "1s"}, {100 * time.Millisecond, "0.1s"},
		{time.Nanosecond, "0.000000001s"}, {-1500 * time.Millisecond, "-1.5s"}, {90 * time.Minute, "5400s"},
	} {
		if got := protoDur(c.d); got != c.want {
			t.Errorf("protoDur(%v) = %q, want %q", c.d, got, c.want)
		}
	}
}
