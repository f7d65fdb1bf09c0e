package grafana

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.yaml.in/yaml/v3"

	"github.com/retrystorm/retrystorm/internal/servertest"
	"github.com/retrystorm/retrystorm/resil"
	"github.com/retrystorm/retrystorm/resil/admission"
	"github.com/retrystorm/retrystorm/resil/budget"
	"github.com/retrystorm/retrystorm/resil/resilotel"
	"github.com/retrystorm/retrystorm/resil/resilprom"
)

// TestDashboardIsCurrent: the committed retrystorm.json is what the code
// builds (run go generate ./deploy/grafana after changing it).
func TestDashboardIsCurrent(t *testing.T) {
	want, err := JSON()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("retrystorm.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("retrystorm.json is not what the code builds: run go generate ./deploy/grafana")
	}
}

// committedQueries returns every PromQL expression in the committed JSON:
// the panels' targets and the variables' queries.
func committedQueries(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("retrystorm.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	var out []string
	var walk func(v any, key string)
	walk = func(v any, key string) {
		switch x := v.(type) {
		case map[string]any:
			for k, c := range x {
				walk(c, k)
			}
		case []any:
			for _, c := range x {
				walk(c, key)
			}
		case string:
			if key == "expr" || (key == "query" && strings.HasPrefix(x, "label_values(")) {
				out = append(out, x)
			}
		}
	}
	walk(doc, "")
	slices.Sort(out)
	return out
}

// TestEveryQueryIsInTheJSON: the JSON carries every query the code lists,
// so the checks below, which read the JSON, check them all.
func TestEveryQueryIsInTheJSON(t *testing.T) {
	got := committedQueries(t)
	for _, q := range Queries() {
		if !slices.Contains(got, q) {
			t.Errorf("query not in retrystorm.json: %s", q)
		}
	}
	if len(got) < len(Queries()) {
		t.Errorf("%d queries in the JSON, %d in the code", len(got), len(Queries()))
	}
}

// promQL is a query as Prometheus would run it: Grafana's variables
// replaced by values they take.
func promQL(q string) string {
	if v, ok := strings.CutPrefix(q, "label_values("); ok {
		// label_values(METRIC{...}, LABEL) asks for METRIC{...}'s series.
		q = strings.TrimSpace(v[:strings.LastIndex(v, ",")])
	}
	return strings.NewReplacer("$__rate_interval", "1m", "$job", ".*", "$guard", ".*", "$shedder", ".*").Replace(q)
}

// TestQueriesParse: promtool checks every query as the expression of a
// recording rule (Debian's prometheus package brings promtool; without it
// the test skips, except in CI).
func TestQueriesParse(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("promtool is not installed, and CI=true requires it: apt-get install prometheus")
		}
		t.Skip("promtool is not installed (Debian: apt-get install prometheus): the dashboard's queries are not parsed")
	}
	type rule struct {
		Record string `yaml:"record"`
		Expr   string `yaml:"expr"`
	}
	var rules []rule
	for i, q := range committedQueries(t) {
		rules = append(rules, rule{Record: fmt.Sprintf("dashboard:query_%d", i), Expr: promQL(q)})
	}
	file := map[string]any{"groups": []map[string]any{{"name": "dashboard", "rules": rules}}}
	b, err := yaml.Marshal(file)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "dashboard-rules.yml")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(promtool, "check", "rules", path).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules: %v\n%s\n%s", err, out, b)
	}
	t.Logf("%s", out)
}

// registered exports one Guard and one Shedder both ways, as a service
// would: through resilprom, and through resilotel and OpenTelemetry's
// Prometheus exporter, after a few calls so that every histogram has
// series (both exporters send a Shedder's refusals for every reason, at
// zero too). It returns every
// metric family name with the label names its series carry.
func registered(t *testing.T) map[string][]string {
	t.Helper()
	budget, _ := budget.NewTokenBucket(budget.TokenBucketSettings{Ratio: 0.1, Funding: budget.FundedByRequest, MinTokens: 1})
	breaker, _ := resil.NewBreaker(resil.BreakerSettings{Threshold: 5})
	throttle, _ := resil.NewThrottler(resil.ThrottlerSettings{})
	g, err := resil.NewGuard(resil.GuardSettings{Idempotency: resil.Idempotent,
		Policy: resil.Policy{MaxRetries: 1, Budget: budget, Breaker: breaker, Throttle: throttle}})
	if err != nil {
		t.Fatal(err)
	}
	limiter, _ := admission.NewLimiter(admission.FixedLimit{Limit: 10})
	shedder, err := admission.NewShedder(admission.ShedderSettings{Limiter: limiter})
	if err != nil {
		t.Fatal(err)
	}
	preg := prometheus.NewRegistry()
	if _, err := resilprom.Register(preg, "g", g); err != nil {
		t.Fatal(err)
	}
	if _, err := resilprom.RegisterShedder(preg, "s", shedder); err != nil {
		t.Fatal(err)
	}
	oreg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(oreg))
	if err != nil {
		t.Fatal(err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
	defer mp.Shutdown(context.Background())
	inst, err := resilotel.Instrument(g, resilotel.Options{Name: "g", MeterProvider: mp})
	if err != nil {
		t.Fatal(err)
	}
	defer inst.Close()
	sinst, err := resilotel.InstrumentShedder(shedder, resilotel.Options{Name: "s", MeterProvider: mp})
	if err != nil {
		t.Fatal(err)
	}
	defer sinst.Close()
	fail := true
	for range 3 {
		_ = g.Do(context.Background(), func(context.Context) error {
			if fail = !fail; !fail {
				return errors.New("boom")
			}
			return nil
		})
	}
	out := map[string][]string{}
	for _, reg := range []*prometheus.Registry{preg, oreg} {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			labels := out[mf.GetName()]
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if !slices.Contains(labels, l.GetName()) {
						labels = append(labels, l.GetName())
					}
				}
			}
			if mf.GetType() == dto.MetricType_HISTOGRAM {
				labels = append(labels, "le")
				for _, suffix := range []string{"_bucket", "_count", "_sum"} {
					out[mf.GetName()+suffix] = labels
				}
			}
			out[mf.GetName()] = labels
		}
	}
	return out
}

// selector is a metric name and the label matchers after it.
var selector = regexp.MustCompile(`([a-zA-Z_:][a-zA-Z0-9_:]*)\{([^}]*)\}`)

// TestQueriesNameRegisteredMetrics: every metric a query reads is one the
// exporters register, and every label it matches on is one that metric
// carries (job aside, which Prometheus adds). A label that only one
// exporter sets (name for resilprom, resil_guard_name for resilotel)
// passes on either exporter's metric of that name.
func TestQueriesNameRegisteredMetrics(t *testing.T) {
	have := registered(t)
	var labels []string
	for _, ls := range have {
		labels = append(labels, ls...)
	}
	bare := regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)
	for _, q := range committedQueries(t) {
		ms := selector.FindAllStringSubmatch(promQL(q), -1)
		if p := promQL(q); len(ms) == 0 && bare.MatchString(p) {
			ms = [][]string{{p, p, ""}}
		}
		if len(ms) == 0 {
			t.Errorf("no metric found in %s", q)
		}
		for _, m := range ms {
			got, ok := have[m[1]]
			if !ok {
				t.Errorf("%s: no exporter registers %s", q, m[1])
				continue
			}
			for _, matcher := range strings.Split(m[2], ",") {
				name := strings.TrimSpace(regexp.MustCompile(`[=!~]`).Split(matcher, 2)[0])
				if name == "" || name == "job" {
					continue
				}
				if !slices.Contains(got, name) && !(name == "name" || name == "resil_guard_name") {
					t.Errorf("%s: %s carries no label %s (it has %v)", q, m[1], name, got)
				}
			}
		}
	}
	for _, must := range []string{"name", "resil_guard_name", "kind", "resil_attempt_kind", "reason", "resil_shedder_name", "resil_shed_reason"} {
		if !slices.Contains(labels, must) {
			t.Errorf("no exporter sets the label %s the dashboard filters by", must)
		}
	}
}

// TestBinariesLeaveTheSDKOut: the retrystorm binaries do not link the
// Grafana SDK; only this package and its generator do.
func TestBinariesLeaveTheSDKOut(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		servertest.Missing(t, "the go command is not on PATH: %v", err)
	}
	cmd := exec.Command(goTool, "list", "-deps", "./cmd/...")
	cmd.Dir = filepath.Join("..", "..")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	if strings.Contains(string(out), "grafana-foundation-sdk") || strings.Contains(string(out), "deploy/grafana") {
		t.Errorf("a binary under cmd/ imports the Grafana SDK or deploy/grafana")
	}
}
