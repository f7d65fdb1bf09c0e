package calibrate_test

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/calibrate"
	"github.com/retrystorm/retrystorm/internal/golden"
	"github.com/retrystorm/retrystorm/scenario"
	"github.com/retrystorm/retrystorm/sim"
)

// truth is what a saved window must give back, within tol (a share; 0 is
// exact); a NaN want is not checked (the metrics cannot show it).
type truth struct {
	rate, capacity, median, clients, workers float64
	dist                                     string
	steady                                   bool
}

// The windows of testdata: lab.json and grpc-real.json were captured
// from a real Prometheus (TestRealPrometheus and TestRealGRPC -capture,
// scraping the lab and grpc-go's own OpenTelemetry metrics), the others
// are written by TestMakeTestdata from the models of gen_test.go, whose
// truth these are.
var goldens = []struct {
	name  string
	truth truth
}{
	{"lab", truth{rate: 70, capacity: 100, median: 0.080, clients: 4, workers: 8, dist: "fixed", steady: false}},
	// Envoy: the pool's 40 connections over a lognormal of mean
	// 40ms·e^(0.5²/2).
	{"envoy", truth{rate: 600, capacity: 40 / (0.040 * math.Exp(0.125)), median: 0.040, clients: 3, workers: 40, dist: "lognormal", steady: true}},
	// gRPC shows no gauge of requests in service: the workers and the
	// capacity are defaults, not checked.
	{"grpc", truth{rate: 300, capacity: math.NaN(), median: 0.020 * math.Ln2, clients: 4, workers: math.NaN(), dist: "exponential", steady: false}},
	// grpc-real.json was captured from TestRealGRPC (-capture): 8 workers
	// held 20.67ms a call on average (20ms slept), so 387 calls a second;
	// 150 calls a second from 4 client instances.
	{"grpc-real", truth{rate: 150, capacity: 8 / 0.02067, median: 0.02067, clients: 4, workers: 8, dist: "fixed", steady: false}},
	{"haproxy", truth{rate: 150, capacity: 400, median: 0.050, clients: math.NaN(), workers: 20, dist: "fixed", steady: true}},
	{"resil", truth{rate: 250, capacity: math.NaN(), median: 0.030, clients: 5, workers: math.NaN(), dist: "lognormal", steady: true}},
}

// TestGolden calibrates each saved window, compares the values with the
// truth (the targets: capacity and median service time within
// 10%, rate within 5%, instances exact) and the file written with
// testdata/NAME.golden.yaml, and runs the scenario briefly.
func TestGolden(t *testing.T) {
	for _, g := range goldens {
		t.Run(g.name, func(t *testing.T) {
			w, err := calibrate.ReadAnswers([]string{filepath.Join("testdata", g.name+".json")}, calibrate.Selector{})
			if err != nil {
				t.Fatal(err)
			}
			r, err := calibrate.Fit(w, nil)
			if err != nil {
				t.Fatal(err)
			}
			if src, _, _ := strings.Cut(g.name, "-"); r.Source.Name != src {
				t.Errorf("detected %s, want %s", r.Source.Name, g.name)
			}
			for _, c := range []struct {
				what      string
				got, want float64
				tol       float64
			}{
				{"base rate", r.Rate.V, g.truth.rate, 0.05},
				{"capacity", r.Capacity.V, g.truth.capacity, 0.10},
				{"median service time", r.Service.Median, g.truth.median, 0.10},
				{"client instances", r.Clients.V, g.truth.clients, 0},
				{"workers", r.Workers.V, g.truth.workers, 0},
			} {
				if math.IsNaN(c.want) {
					continue
				}
				if off := math.Abs(c.got-c.want) / c.want; off > c.tol+1e-9 {
					t.Errorf("%s: calibrated %.4g, truth %.4g: off by %.1f%%, more than %.0f%%", c.what, c.got, c.want, 100*off, 100*c.tol)
				}
			}
			if r.Service.Dist != g.truth.dist {
				t.Errorf("service time fitted as %s, truth %s (%s)", r.Service.Dist, g.truth.dist, r.ServiceNte)
			}
			if r.Steady != g.truth.steady {
				t.Errorf("steady %v, want %v (%s)", r.Steady, g.truth.steady, r.Rate.Note)
			}
			file, out := writeOut(t, r)
			golden.Check(t, filepath.Join("testdata", g.name+".golden.yaml"), out.YAML, "go test ./calibrate -run TestGolden -update")
			if out.CSV != nil {
				golden.Check(t, filepath.Join("testdata", g.name+".golden.csv"), out.CSV, "go test ./calibrate -run TestGolden -update")
			}
			runBriefly(t, file)
		})
	}
}

// writeOut writes r as the command does, as calibrated.yaml in a
// temporary directory, its rate series beside it, and returns the file and
// the output.
func writeOut(t testing.TB, r *calibrate.Result) (string, *calibrate.Output) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "calibrated.yaml")
	out, err := calibrate.Write(r, file)
	if err != nil {
		t.Fatal(err)
	}
	saveOutput(t, file, out)
	return file, out
}

// saveOutput writes calibrate's output as the command does: the scenario
// as file, its rate series, if any, beside it.
func saveOutput(t testing.TB, file string, out *calibrate.Output) {
	t.Helper()
	if out.CSV != nil {
		if err := os.WriteFile(filepath.Join(filepath.Dir(file), out.SeriesFile), out.CSV, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(file, out.YAML, 0o644); err != nil {
		t.Fatal(err)
	}
}

// runBriefly loads a written scenario as run does and simulates its first
// 20 ticks.
func runBriefly(t *testing.T, file string) {
	t.Helper()
	sc, err := scenario.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	sc.Duration = min(sc.Duration, 20*sc.Tick)
	if _, err := sim.Run(context.Background(), sc); err != nil {
		t.Fatalf("run: %v", err)
	}
}

// TestEveryValueHasAComment: every key with a value in a written file has
// a comment above it (its own, or its map's: backoff and settings say it
// once for their keys).
func TestEveryValueHasAComment(t *testing.T) {
	for _, g := range goldens {
		b, err := os.ReadFile(filepath.Join("testdata", g.name+".golden.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(b), "\n")
		for i, l := range lines {
			s := strings.TrimSpace(l)
			if s == "" || strings.HasPrefix(s, "#") || strings.HasSuffix(s, ":") || strings.HasPrefix(s, "- ") {
				continue
			}
			key := strings.SplitN(s, ":", 2)[0]
			switch key {
			case "name", "seed", "base", "cap", "jitter", "dist", "mean", "median", "sigma":
				// The name and seed are the file's; the backoff's keys are
				// said under its use:, service_time's above it.
				continue
			}
			if !strings.HasPrefix(strings.TrimSpace(lines[i-1]), "#") && !strings.HasPrefix(strings.TrimSpace(lines[i-1]), "settings:") {
				t.Errorf("%s.golden.yaml:%d: %q has no comment", g.name, i+1, s)
			}
		}
	}
}

// TestBadInput: each mistake is an error that says what is wrong and in
// which file, and never a number.
func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	series := func(name string, pts string) string {
		return `{"metric":{"__name__":"` + name + `","instance":"a"},"values":[` + pts + `]}`
	}
	ans := func(result ...string) string {
		return `{"status":"success","data":{"resultType":"matrix","result":[` + strings.Join(result, ",") + `]}}`
	}
	for _, c := range []struct {
		name, body, want string
	}{
		{"garbage.json", "not json", "not a Prometheus API answer"},
		{"error.json", `{"status":"error","errorType":"bad_data","error":"parse error"}`, "the answer is an error: bad_data"},
		{"vector.json", `{"status":"success","data":{"resultType":"vector","result":[]}}`, `the result is a "vector"`},
		{"empty.json", ans(), "the window holds no samples"},
		{"expr.json", ans(`{"metric":{"job":"x"},"values":[[1,"1"],[2,"2"]]}`), "without a metric name"},
		{"unknown.json", ans(series("http_requests_total", `[1,"1"],[16,"2"]`)), "no known source in the window"},
		{"nolatency.json", ans(series("envoy_cluster_upstream_rq_total", `[0,"0"],[15,"150"],[30,"300"]`)), "no latency histogram"},
		{"idle.json", ans(series("envoy_cluster_upstream_rq_total", `[0,"5"],[15,"5"],[30,"5"]`)), "the intent rate is 0"},
		{"absurd.json", ans(series("envoy_cluster_upstream_rq_total", `[0,"0"],[15,"1e12"],[30,"2e12"]`)), "more than a scenario takes"},
		{"onestep.json", ans(series("envoy_cluster_upstream_rq_total", `[0,"0"]`)), "every series has one sample"},
		{"slowhist.json", ans(
			series("envoy_cluster_upstream_rq_total", `[0,"0"],[15,"150"],[30,"300"]`),
			`{"metric":{"__name__":"envoy_cluster_upstream_rq_time_bucket","le":"+Inf"},"values":[[0,"0"],[15,"150"],[30,"300"]]}`,
			`{"metric":{"__name__":"envoy_cluster_upstream_rq_time_count"},"values":[[0,"0"],[15,"150"],[30,"300"]]}`,
			`{"metric":{"__name__":"envoy_cluster_upstream_rq_time_sum"},"values":[[0,"0"],[15,"1e12"],[30,"2e12"]]}`), "more than an hour a request"},
	} {
		t.Run(c.name, func(t *testing.T) {
			w, err := calibrate.ReadAnswers([]string{write(c.name, c.body)}, calibrate.Selector{})
			if err == nil {
				var r *calibrate.Result
				r, err = calibrate.Fit(w, nil)
				if err == nil {
					t.Fatalf("no error: fitted rate %v, capacity %v", r.Rate.V, r.Capacity.V)
				}
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q, want it to say %q", err, c.want)
			}
			// Issue 37: "no known source" and "every series has one
			// sample" did not say which file.
			if !strings.Contains(err.Error(), c.name) {
				t.Errorf("error %q does not name the file %s", err, c.name)
			}
		})
	}
}

// TestTooManySeries: a file whose metric has more series than MaxSeries
// is refused, saying to narrow the selector.
func TestTooManySeries(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"status":"success","data":{"resultType":"matrix","result":[`)
	for i := 0; i <= calibrate.MaxSeries; i++ {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`{"metric":{"__name__":"envoy_cluster_upstream_rq_total","pod":"p` + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + `","i":"` + time.Duration(i).String() + `"},"values":[[0,"0"],[15,"1"]]}`)
	}
	b.WriteString(`]}}`)
	p := filepath.Join(t.TempDir(), "many.json")
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := calibrate.ReadAnswers([]string{p}, calibrate.Selector{})
	if err == nil || !strings.Contains(err.Error(), "narrow the selector") {
		t.Fatalf("error %v, want a refusal to narrow the selector", err)
	}
}

// TestUnreachable: a server that is not there is an error naming it,
// within the timeout.
func TestUnreachable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	now := time.Now()
	_, err := calibrate.Fetch(ctx, calibrate.Live{URL: "http://127.0.0.1:1", Start: now.Add(-time.Hour), End: now, Step: 15 * time.Second, Timeout: 2 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "cannot read from Prometheus at http://127.0.0.1:1") {
		t.Fatalf("error %v", err)
	}
	_, err = calibrate.Fetch(ctx, calibrate.Live{URL: "http://127.0.0.1:1", Start: now.Add(-30 * 24 * time.Hour), End: now, Step: time.Second})
	if err == nil || !strings.Contains(err.Error(), "at most 11000") {
		t.Fatalf("a window of too many steps: error %v", err)
	}
	if errors.Is(err, calibrate.ErrFit) {
		t.Error("a refused window is not a fit's error")
	}
}

// TestSelector reads matchers as PromQL writes them.
func TestSelector(t *testing.T) {
	for _, c := range []struct {
		in, want, err string
	}{
		{``, `x`, ``},
		{`{job="checkout"}`, `x{job="checkout"}`, ``},
		{`{job=~"a|b", instance!="c"}`, `x{job=~"a|b", instance!="c"}`, ``},
		{`{job='x'}`, `x{job="x"}`, ``},
		{`job="x"`, ``, `between braces`},
		{`{job=x}`, ``, `cannot read the matcher`},
		{`{__name__="x"}`, ``, `cannot name the metric`},
		{`{job=~"("}`, ``, `regular expression`},
	} {
		s, err := calibrate.ParseSelector(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: error %v, want %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || s.For("x") != c.want {
			t.Errorf("%q: %q, %v; want %q", c.in, s.For("x"), err, c.want)
		}
	}
}
