package importer

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"go.yaml.in/yaml/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/retrystorm/retrystorm/resil/budget"
	"github.com/retrystorm/retrystorm/scenario"
)

func readSources(t testing.TB, names ...string) []Source {
	t.Helper()
	var srcs []Source
	for _, n := range names {
		data, err := os.ReadFile(filepath.Join("testdata", n))
		if err != nil {
			t.Fatal(err)
		}
		srcs = append(srcs, Source{Name: n, Data: data})
	}
	return srcs
}

// advised is a recommendation as advise makes one from the user's fleet:
// the retry count, the backoff and the budget change; the timeout and the
// retry conditions stay the user's.
func advised(user scenario.Fleet, retries int, budget scenario.Budget) scenario.Fleet {
	rec := user
	rec.Name = "advised"
	rec.Retry.MaxRetries = retries
	rec.Retry.Backoff = scenario.Backoff{Use: "exponential", Base: 50 * time.Millisecond, Cap: 500 * time.Millisecond, Multiplier: 2, Jitter: "full"}
	rec.Budget = budget
	return rec
}

// changedLines returns the lines a diff removes from the user's file.
func changedLines(diff string) []string {
	var out []string
	for _, l := range strings.Split(diff, "\n") {
		if strings.HasPrefix(l, "-") && !strings.HasPrefix(l, "---") {
			out = append(out, l[1:])
		}
	}
	return out
}

// untouched checks that every line of before the diff does not remove is
// in after, in order: the rest of the user's file is byte-identical.
func untouched(t *testing.T, e Edited) {
	t.Helper()
	removed := map[string]int{}
	for _, l := range changedLines(e.Diff) {
		removed[l]++
	}
	after := splitLines(e.After)
	j := 0
	for _, l := range splitLines(e.Before) {
		if removed[l] > 0 {
			removed[l]--
			continue
		}
		for j < len(after) && after[j] != l {
			j++
		}
		if j == len(after) {
			t.Errorf("%s: the line %q the diff does not change is gone", e.Name, l)
			return
		}
		j++
	}
}

// TestEditKeepsTheUsersDocument writes a recommendation into each
// product's own file and checks the three rules: the edited file
// imports as the recommended fleet (import(export(x)) = x, for what the
// format writes), what the edit does not change is byte-identical, and
// the scope (names, routes, hosts, profiles) and the retry conditions are
// the user's.
func TestEditKeepsTheUsersDocument(t *testing.T) {
	concurrency := scenario.Budget{Use: scenario.BudgetConcurrency, Concurrency: budget.ConcurrencySettings{Percent: 10, MinConcurrency: 1}}
	for _, tc := range []struct {
		files  []string
		budget func(user scenario.Budget) scenario.Budget
		keep   []string // text of the user's file that must stay
		notes  []string // what the edit must say
	}{
		{files: []string{"grpc/service-config.json"},
			budget: func(scenario.Budget) scenario.Budget {
				return scenario.Budget{Use: scenario.BudgetGRPC, GRPC: budget.GRPCThrottleSettings{MaxTokens: 20, TokenRatio: 0.2}}
			},
			keep: []string{`"name": [{"service": "grpc.examples.echo.Echo"}]`, `"retryableStatusCodes": ["UNAVAILABLE"]`, `"timeout": "2s"`}},
		{files: []string{"envoy/route.yaml", "envoy/cluster.yaml"},
			budget: func(scenario.Budget) scenario.Budget { return concurrency },
			keep:   []string{"retry_on: gateway-error,reset,connect-failure", `domains: ["orders.internal"]`, "max_retries: 3", "max_connections: 1024"},
			notes:  []string{"scope: the retry policy is the virtual host's"}},
		{files: []string{"envoy/front-proxy.yaml"},
			budget: func(scenario.Budget) scenario.Budget { return concurrency }},
		{files: []string{"istio/reviews.yaml"},
			budget: func(scenario.Budget) scenario.Budget { return concurrency },
			keep:   []string{"retryOn: 5xx", "perTryTimeout: 2s", "consecutive5xxErrors: 7", "maxConnections: 100"}},
		{files: []string{"istio/budget.yaml"},
			budget: func(scenario.Budget) scenario.Budget { return concurrency },
			keep:   []string{"timeout: 10s", "hosts: [checkout]"}},
		{files: []string{"linkerd/books.yaml"},
			budget: func(scenario.Budget) scenario.Budget {
				return scenario.Budget{Use: scenario.BudgetWindow, Window: budget.WindowSettings{Ratio: 0.1, Funding: budget.FundedByRequest, MinRetriesPerSecond: 5, TTL: 10 * time.Second}}
			},
			keep:  []string{"pathRegex: /authors/[^/]*\\.json", "timeout: 25ms"},
			notes: []string{"scope: the retry budget is the ServiceProfile's"}},
		{files: []string{"aws/config"},
			budget: func(scenario.Budget) scenario.Budget {
				return scenario.Budget{Use: scenario.BudgetAWSAdaptive, AWS: budget.AWSQuotaSettings{Capacity: 500, RetryCost: 5, TimeoutCost: 10, NoRetryIncrement: 1}}
			},
			keep: []string{"region = us-east-1", "[profile batch]"}},
	} {
		t.Run(tc.files[0], func(t *testing.T) {
			srcs := readSources(t, tc.files...)
			fl, err := Import(srcs, Options{Timeout: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			from := fl[0]
			retries := 2
			if from.Format == Linkerd {
				retries = -1 // Linkerd bounds retries by its budget alone
			}
			rec := advised(from.Fleet, retries, tc.budget(from.Fleet.Budget))
			edited, notes, err := Edit(srcs, from, rec)
			if err != nil {
				t.Fatal(err)
			}
			if len(edited) == 0 {
				t.Fatalf("nothing edited; notes %q", notes)
			}
			said := strings.Join(notes, "\n")
			if strings.Contains(said, "differs from the recommendation") || strings.Contains(said, "do not import again") {
				t.Errorf("the edit does not read back as the recommendation: %s", said)
			}
			for _, n := range tc.notes {
				if !strings.Contains(said, n) {
					t.Errorf("the notes do not say %q:\n%s", n, said)
				}
			}
			// import(export(x)) is x, in what the format writes.
			again := srcs
			all := ""
			for i := range again {
				for _, e := range edited {
					if e.Name == again[i].Name {
						again[i].Data = e.After
					}
				}
				all += string(again[i].Data)
			}
			fl2, err := Import(again, Options{Timeout: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if d := Differences(fl2[0].Fleet, rec, from.Format); len(d) > 0 && from.Format != Linkerd && from.Format != AWS {
				t.Errorf("import(edit(x)) differs from x: %s", strings.Join(d, "; "))
			}
			if fl2[0].Origin != from.Origin || fl2[0].Fleet.Timeout != from.Fleet.Timeout || len(fl2) != len(fl) {
				t.Errorf("the scope moved: %s (timeout %v), %d fleets, was %s (timeout %v), %d", fl2[0].Origin, fl2[0].Fleet.Timeout, len(fl2), from.Origin, from.Fleet.Timeout, len(fl))
			}
			for i := 1; i < len(fl); i++ {
				if fl2[i].Fleet.Retry.MaxRetries != fl[i].Fleet.Retry.MaxRetries && from.Format != Linkerd {
					t.Errorf("another fleet, %s, changed", fl[i].Origin)
				}
			}
			for _, k := range tc.keep {
				if !strings.Contains(all, k) {
					t.Errorf("the edit lost %q", k)
				}
			}
			for _, e := range edited {
				untouched(t, e)
				t.Logf("%s\n%s", said, e.Diff)
			}
		})
	}
}

// TestEditValidatesInTheProductsParser: the edited Envoy route and
// cluster pass go-control-plane's Validate (the rules Envoy's protoc-gen-
// validate annotations state, go-control-plane v1.40.0), and the edited
// gRPC service config is accepted by grpc-go's own parser
// (grpc.WithDefaultServiceConfig is parsed by grpc.NewClient, grpc-go
// v1.85.0, service_config.go). Istio's fragments are read by istio.io/api's
// own types strictly on import; Linkerd and the AWS SDK have no Go parser
// among the module's dependencies.
func TestEditValidatesInTheProductsParser(t *testing.T) {
	srcs := readSources(t, "envoy/route.yaml", "envoy/cluster.yaml")
	fl, err := Import(srcs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	rec := advised(fl[0].Fleet, 3, scenario.Budget{Use: scenario.BudgetConcurrency, Concurrency: budget.ConcurrencySettings{Percent: 20, MinConcurrency: 3}})
	edited, _, err := Edit(srcs, fl[0], rec)
	if err != nil {
		t.Fatal(err)
	}
	if len(edited) != 2 {
		t.Fatalf("%d files edited, want the route's and the cluster's", len(edited))
	}
	for _, e := range edited {
		var n yaml.Node
		if err := yaml.Unmarshal(e.After, &n); err != nil {
			t.Fatal(err)
		}
		var m interface{ Validate() error }
		if strings.Contains(e.Name, "cluster") {
			c := &clusterv3.Cluster{}
			_, err = readProto(e.Name, n.Content[0], c, false)
			m = c
		} else {
			r := &routev3.RouteConfiguration{}
			_, err = readProto(e.Name, n.Content[0], r, false)
			m = r
		}
		if err != nil {
			t.Fatalf("%s: %v", e.Name, err)
		}
		if err := m.Validate(); err != nil {
			t.Errorf("%s: go-control-plane's Validate: %v\n%s", e.Name, err, e.After)
		}
	}

	// Istio: istio.io/api has no validator (istio/istio's is not a
	// dependency); its own types read the edited specs strictly
	// (protojson, unknown fields refused), istio.io/api v1.32.0.
	srcs = readSources(t, "istio/reviews.yaml")
	fl, err = Import(srcs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	edited, _, err = Edit(srcs, fl[0], advised(fl[0].Fleet, 2, scenario.Budget{Use: scenario.BudgetConcurrency, Concurrency: budget.ConcurrencySettings{Percent: 20, MinConcurrency: 3}}))
	if err != nil {
		t.Fatal(err)
	}
	docs, err := documents("reviews.yaml", edited[0].After)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		var m proto.Message = &networking.VirtualService{}
		if str(d, "kind") == "DestinationRule" {
			m = &networking.DestinationRule{}
		}
		if _, err := readProto("reviews.yaml", get(d, "spec"), m, true); err != nil {
			t.Errorf("istio.io/api refuses the edited %s: %v", str(d, "kind"), err)
		}
	}

	srcs = readSources(t, "grpc/service-config.json")
	fl, err = Import(srcs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range []scenario.Fleet{
		advised(fl[0].Fleet, 2, scenario.Budget{Use: scenario.BudgetGRPC, GRPC: budget.GRPCThrottleSettings{MaxTokens: 20, TokenRatio: 0.2}}),
		advised(fl[0].Fleet, 9, fl[0].Fleet.Budget), // past gRPC's cap of 5 attempts
	} {
		edited, _, err := Edit(srcs, fl[0], rec)
		if err != nil {
			t.Fatal(err)
		}
		cc, err := grpc.NewClient("passthrough:///127.0.0.1:1", grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultServiceConfig(string(edited[0].After)))
		if err != nil {
			t.Errorf("grpc-go refuses the edited service config: %v\n%s", err, edited[0].After)
			continue
		}
		cc.Close()
	}
	// The control: grpc-go refuses what gRFC A6 refuses (maxAttempts 1).
	bad := strings.Replace(string(srcs[0].Data), `"maxAttempts": 4`, `"maxAttempts": 1`, 1)
	if cc, err := grpc.NewClient("passthrough:///127.0.0.1:1", grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithDefaultServiceConfig(bad)); err == nil {
		cc.Close()
		t.Error("grpc-go accepts maxAttempts 1: the check checks nothing")
	}
}

// TestEditNeverRemovesALimit: a recommendation without a budget, on an
// Envoy cluster with max_retries 3, leaves the limit as it is and says so
// (it once became max_retries 4294967295, "no limit", for every route of
// the cluster).
func TestEditNeverRemovesALimit(t *testing.T) {
	srcs := readSources(t, "envoy/route.yaml", "envoy/cluster.yaml")
	fl, err := Import(srcs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	rec := advised(fl[0].Fleet, 3, scenario.Budget{Use: scenario.BudgetNone})
	edited, notes, err := Edit(srcs, fl[0], rec)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range edited {
		if strings.Contains(string(e.After), "4294967295") || strings.Contains(e.Diff, "-    max_retries: 3") {
			t.Errorf("%s: the limit was removed:\n%s", e.Name, e.Diff)
		}
	}
	if !strings.Contains(strings.Join(notes, "\n"), "never removes a limit") {
		t.Errorf("the notes do not say the limit is kept: %q", notes)
	}
	// Nor does a translation into Envoy write the limit away.
	text, cannot, err := Export(rec, Envoy)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(text, "4294967295") || Expressible(rec, Envoy) || !strings.Contains(strings.Join(cannot, "\n"), "max_retries 3 by default") {
		t.Errorf("Envoy without a budget:\n%s\n%q", text, cannot)
	}
}

// TestDiff pins the diff's form on a small change.
func TestDiff(t *testing.T) {
	before := "a\nb\nc\nd\ne\nf\ng\nh\n"
	after := "a\nb\nc\nD\ne\nf\ng\nh\ni\n"
	want := "--- x\n+++ x (advised)\n@@ -1,8 +1,9 @@\n a\n b\n c\n-d\n+D\n e\n f\n g\n h\n+i\n"
	if got := Diff("x", []byte(before), []byte(after)); got != want {
		t.Errorf("Diff:\n%s\nwant:\n%s", got, want)
	}
	if Diff("x", []byte(before), []byte(before)) != "" {
		t.Error("a diff of a file with itself")
	}
}

// TestEditConditions: with the conditions searched (--conditions), the
// retry_on an edit writes keeps what the recommendation retries (Envoy's
// connect-failure once disappeared when 5xx became
// retriable-status-codes; a refused connection is now a failure of its
// own, retry.on: refused, which connect-failure retries).
func TestEditConditions(t *testing.T) {
	srcs := readSources(t, "envoy/route.yaml", "envoy/cluster.yaml")
	fl, err := Import(srcs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	rec := advised(fl[0].Fleet, 2, fl[0].Fleet.Budget)
	rec.Retry.On = []string{scenario.RetryOnRejection, scenario.RetryOnRefused}
	edited, notes, err := Edit(srcs, fl[0], rec)
	if err != nil {
		t.Fatal(err)
	}
	if len(edited) == 0 || !strings.Contains(string(edited[0].After), "connect-failure") {
		t.Fatalf("connect-failure was dropped:\n%v", edited)
	}
	if said := strings.Join(notes, "\n"); strings.Contains(said, "differs from the recommendation") {
		t.Errorf("%s\n%s", said, edited[0].Diff)
	}
	t.Log(edited[0].Diff)
}
