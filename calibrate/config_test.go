package calibrate_test

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/retrystorm/retrystorm/calibrate"
	"github.com/retrystorm/retrystorm/importer"
	"github.com/retrystorm/retrystorm/internal/golden"
	"github.com/retrystorm/retrystorm/scenario"
	"github.com/retrystorm/retrystorm/userconfig"
)

// readConfig reads configs as calibrate --config does (check's path:
// configcmd, then the importer or the scenario loader).
func readConfig(files []string, route string) (*calibrate.Config, error) {
	p, err := userconfig.Reader{}.Policy(files, route, importer.Options{})
	if err != nil {
		return nil, err
	}
	return &calibrate.Config{Fleet: p.Fleet, Sources: p.Sources}, nil
}

// TestConfigGolden calibrates saved windows with the importer's own
// testdata configs (and this package's): the written fleet is the
// config's, every one of its keys says where it came from (FILE:LINE
// where the config sets it), the metrics still give the traffic and the
// origin, and the disagreements are those the window shows.
func TestConfigGolden(t *testing.T) {
	for _, c := range []struct {
		name, window string
		configs      []string
		route        string
		disagree     []string // the settings the metrics disagree on
	}{
		{"envoy-route", "envoy", []string{"../importer/testdata/envoy/route.yaml"}, "", nil},
		// The window's generator (gen_test.go) has no timeout: while its
		// origin saturated, some attempts took longer than the 1s
		// per_try_timeout of the front proxy, and than Istio's 10s
		// route timeout, which a real Envoy would have cut short.
		{"envoy-front-proxy", "envoy", []string{"../importer/testdata/envoy/front-proxy.yaml"}, "", []string{"timeout"}},
		{"envoy-istio", "envoy", []string{"../importer/testdata/istio/budget.yaml"}, "", []string{"timeout"}},
		{"grpc-service-config", "grpc", []string{"../importer/testdata/grpc/service-config.json"}, "", nil},
		{"grpc-hedging", "grpc", []string{"../importer/testdata/grpc/hedging.json"}, "shop.Catalog/Get", nil},
		// The window retries 0.05 per intent and a third of its attempts
		// take longer than 50ms: the config allows no retry and gives an
		// attempt 50ms.
		{"envoy-disagrees", "envoy", []string{"testdata/config/envoy-disagrees.yaml"}, "", []string{"retry", "timeout"}},
		// resil's budget refused 3630 retries and exports its tokens; the
		// scenario file's fleet has no budget.
		{"resil-no-budget", "resil", []string{"testdata/config/resil-no-budget.yaml"}, "", []string{"budget", "budget"}},
		// lab.json was captured with a budgeted fleet (real_test.go),
		// whose gateway exports resil_budget_tokens; replay's naive
		// fleet has no budget.
		{"lab-naive", "lab", []string{"testdata/config/lab-naive.yaml"}, "", []string{"budget"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := readConfig(c.configs, c.route)
			if err != nil {
				t.Fatal(err)
			}
			w, err := calibrate.ReadAnswers([]string{filepath.Join("testdata", c.window+".json")}, calibrate.Selector{})
			if err != nil {
				t.Fatal(err)
			}
			plain, err := calibrate.Fit(w, nil)
			if err != nil {
				t.Fatal(err)
			}
			r, got, _ := fitWith(t, w, cfg)
			if !slices.Equal(got, c.disagree) {
				t.Errorf("disagreements on %q, want %q: %+v", got, c.disagree, r.Disagreements)
			}
			dir := t.TempDir()
			file := filepath.Join(dir, "calibrated.yaml")
			out, err := calibrate.Write(r, file)
			if err != nil {
				t.Fatal(err)
			}
			golden.Check(t, filepath.Join("testdata", "config", c.name+".golden.yaml"), out.YAML, "go test ./calibrate -run TestConfigGolden -update")
			saveOutput(t, file, out)
			sc, err := scenario.Load(file)
			if err != nil {
				t.Fatal(err)
			}
			// The policy is the config's, whole; the traffic and the
			// origin are the metrics', as without a config.
			got1, _, _ := importer.Export(sc.Fleets[0], importer.ScenarioFleet)
			want1, _, _ := importer.Export(cfg.Fleet.Fleet, importer.ScenarioFleet)
			if len(sc.Fleets) != 1 || got1 != want1 {
				t.Errorf("the written fleet is not the config's:\n got %s\nwant %s", got1, want1)
			}
			if sc.Origin.Capacity != plain.Capacity.V || sc.Traffic.Clients != int(plain.Clients.V) {
				t.Errorf("origin %v, clients %d: want the metrics' %v and %v", sc.Origin.Capacity, sc.Traffic.Clients, plain.Capacity.V, plain.Clients.V)
			}
			// Every key of the fleet has its comment, and the settings the
			// config sets say their file and line.
			assertCommented(t, string(out.YAML))
			for _, f := range cfg.Sources {
				if !regexp.MustCompile(regexp.QuoteMeta("from "+f.Name+":") + `\d+`).Match(out.YAML) {
					t.Errorf("no value says it came from %s:LINE", f.Name)
				}
			}
			runBriefly(t, file)
		})
	}
}

// assertCommented: every key of the written fleet has a comment above it.
func assertCommented(t *testing.T, y string) {
	t.Helper()
	lines := strings.Split(y, "\n")
	in := false
	for i, l := range lines {
		if l == "fleets:" {
			in = true
			continue
		}
		if !in || strings.HasPrefix(strings.TrimSpace(l), "#") || l == "" {
			continue
		}
		if strings.HasPrefix(l, "    ") && strings.HasPrefix(l[4:], " ") {
			continue // inside a block map (outlier_detection's settings)
		}
		if !strings.HasPrefix(strings.TrimSpace(lines[i-1]), "#") {
			t.Errorf("line %d, %q, has no comment", i+1, l)
		}
	}
}

// TestConfigRefused: a config that cannot describe the layer the metrics
// count, several fleets and no --route, a route that is not there, and
// files that are not configs are errors naming the file (and the line,
// for YAML), never a policy made up.
func TestConfigRefused(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("virtual_hosts:\n  - name: x\n    routes: [\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	unknown := filepath.Join(dir, "unknown.yaml")
	if err := os.WriteFile(unknown, []byte("foo: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, window, config, route, want string
	}{
		{"grpc config, envoy metrics", "envoy", "../importer/testdata/grpc/service-config.json", "", "is a grpc config, which cannot describe the layer envoy's metrics count"},
		{"envoy config, grpc metrics", "grpc", "../importer/testdata/envoy/route.yaml", "", "is an envoy config, which cannot describe the layer grpc's metrics count"},
		{"envoy config, haproxy metrics", "haproxy", "../importer/testdata/envoy/route.yaml", "", "HAProxy's (its retries and retry-on, which no importer reads)"},
		{"linkerd config, envoy metrics", "envoy", "../importer/testdata/linkerd/emojivoto-web.yaml", "", "is a linkerd config"},
		{"several fleets", "grpc", "../importer/testdata/grpc/hedging.json", "", `2 fleets, one per route or method with its own settings: "shop.Catalog/Get" (../importer/testdata/grpc/hedging.json: methodConfig[0]), "every method"`},
		{"no such route", "grpc", "../importer/testdata/grpc/hedging.json", "nope", `--route "nope": no fleet of that name`},
		{"bad YAML", "envoy", bad, "", bad + ": line 3"},
		{"not a config", "envoy", unknown, "", unknown + ": not a config this tool reads"},
		{"no file", "envoy", filepath.Join(dir, "missing.yaml"), "", filepath.Join(dir, "missing.yaml") + ": "},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := readConfig([]string{c.config}, c.route)
			if err == nil {
				w, rerr := calibrate.ReadAnswers([]string{filepath.Join("testdata", c.window+".json")}, calibrate.Selector{})
				if rerr != nil {
					t.Fatal(rerr)
				}
				r, ferr := calibrate.Fit(w, nil)
				if ferr != nil {
					t.Fatal(ferr)
				}
				if err = r.UseConfig(cfg, nil); err == nil {
					t.Fatalf("no error: the policy of %s was taken", cfg.Fleet.Origin)
				}
				if !errors.Is(err, calibrate.ErrFit) {
					t.Errorf("error %v is not ErrFit (bad input)", err)
				}
			} else if _, ok := errors.AsType[*userconfig.Error](err); !ok {
				t.Errorf("error %v is not a usage error", err)
			}
			if msg := strings.Join(strings.Fields(err.Error()), " "); !strings.Contains(msg, c.want) {
				t.Errorf("error %q, want it to say %q", msg, c.want)
			}
		})
	}
}

// TestConfigCrossCheck: each cross-check of an Envoy route with Envoy's
// statistics, on windows gen_test.go's Envoy model writes as saved
// query_range answers, and its negative. Envoy counts its two timeouts
// apart (envoyproxy/envoy 001b1c0cd4cb, source/common/router/router.cc):
// Filter::onResponseTimeout adds to upstream_rq_timeout for each attempt
// in flight when the route's timeout ends the request, and
// Filter::onPerTryTimeoutCommon to upstream_rq_per_try_timeout when the
// retry policy's per_try_timeout cuts an attempt (then the attempt may be
// retried; after the route's timeout nothing is); FilterUtility::
// finalTimeout ignores a per_try_timeout not shorter than the route's.
// Each warning names the metrics' value, the config's, and FILE:LINE.
func TestConfigCrossCheck(t *testing.T) {
	route := func(timeout, retryOn string, retries int, perTry string) string {
		y := "name: local_route\nvirtual_hosts:\n- name: checkout\n  domains: [\"*\"]\n  routes:\n  - match: {prefix: \"/\"}\n    route:\n      cluster: checkout\n"
		y += "      timeout: " + timeout + "\n"
		y += "      retry_policy:\n        retry_on: " + retryOn + "\n        num_retries: " + strconv.Itoa(retries) + "\n"
		if perTry != "" {
			y += "        per_try_timeout: " + perTry + "\n"
		}
		return y
	}
	// A storm of two steps at three retries per intent, in a window
	// retrying 5% of its intents: 0.2 per intent over the window.
	storm := func(s int) float64 {
		if s == 20 || s == 21 {
			return 3
		}
		return 0.05
	}
	for _, c := range []struct {
		name   string
		model  func(*genModel)
		config string
		want   []string // the disagreements' settings
		says   []string // what the warnings say, beyond FILE:LINE
	}{
		// 1% of the attempts cut by a per-try timeout; the route's
		// per_try_timeout is unset (so the route's 2s), then 1s.
		{"per-try timeouts, none in the config", func(g *genModel) { g.perTry = 0.01 }, route("2s", "5xx", 1, ""),
			[]string{"timeout"}, []string{"envoy_cluster_upstream_rq_per_try_timeout counted 3699 attempts", "timeout 2s, per_try_timeout unset", "deadline 2s, CONF:9", "a per_try_timeout is in force"}},
		{"per-try timeouts, one in the config", func(g *genModel) { g.perTry = 0.01 }, route("2s", "5xx", 1, "1s"), nil, nil},
		// A per_try_timeout not shorter than the route's is Envoy's
		// route timeout alone.
		{"per-try timeouts, the config's as long as the route's", func(g *genModel) { g.perTry = 0.01 }, route("2s", "5xx", 1, "3s"),
			[]string{"timeout"}, []string{"timeout 3s, CONF:13; deadline 2s, CONF:9"}},
		// 1% of the requests ended by the route's timeout; the route
		// disables it (timeout: 0s), then sets 2s.
		{"route timeouts, none in the config", func(g *genModel) { g.rqTimeout = 0.01 }, route("0s", "5xx", 1, "1s"),
			[]string{"timeout"}, []string{"envoy_cluster_upstream_rq_timeout counted 3526 requests", "requests the route's timeout ended", "deadline: none, CONF:9"}},
		{"route timeouts, one in the config", func(g *genModel) { g.rqTimeout = 0.01 }, route("2s", "5xx", 1, "1s"), nil, nil},
		// The storm's steps retried 1.5 times each intent begun within the
		// route's 2s (its step and the one before): more than one retry,
		// though the window's mean (0.2) is not. (The origin has ten
		// times the workers, not to saturate.)
		{"a storm's retries past max_retries", func(g *genModel) { g.retryAt, g.workers = storm, 400 }, route("2s", "5xx", 1, "1s"),
			[]string{"retry"}, []string{"in the 15s to 2026-11-30T14:05:", "intents begun in it and the 15s before", "deadline 2s", "27058 retries", "18045 intents", "more than retry.max_retries 1 allows (CONF:12)"}},
		{"a storm's retries within max_retries", func(g *genModel) { g.retryAt, g.workers = storm, 400 }, route("2s", "5xx", 3, "1s"), nil, nil},
		// 1% of the attempts failed with a 5xx and none was retried.
		{"retries never seen", func(g *genModel) { g.retry, g.errShare = 0, 0.01 }, route("2s", "5xx", 2, "1s"),
			[]string{"retry"}, []string{"retry.max_retries 2, CONF:12", "retry.on every failure, CONF:11", "envoy_cluster_upstream_rq_retry flat", "attempts failed (envoy_cluster_upstream_rq_xx{envoy_response_code_class=\"5\"}"}},
		// connect-failure retries refused connections alone, which no 5xx
		// answer is.
		{"retries never seen, none due", func(g *genModel) { g.retry, g.errShare = 0, 0.01 }, route("2s", "connect-failure", 2, "1s"), nil, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			g := genModels["envoy"].model
			g.steps = 40 // 10 minutes, before the model's burst
			c.model(&g)
			win := filepath.Join(dir, "window.json")
			writeAnswer(t, win, buildEnvoy(g, g.run(1)))
			conf := filepath.Join(dir, "config.yaml")
			if err := os.WriteFile(conf, []byte(c.config), 0o644); err != nil {
				t.Fatal(err)
			}
			cfg, err := readConfig([]string{conf}, "")
			if err != nil {
				t.Fatal(err)
			}
			w, err := calibrate.ReadAnswers([]string{win}, calibrate.Selector{})
			if err != nil {
				t.Fatal(err)
			}
			r, got, text := fitWith(t, w, cfg)
			for _, d := range r.Disagreements {
				if !regexp.MustCompile(regexp.QuoteMeta(conf) + `:\d+`).MatchString(d.Text) {
					t.Errorf("the warning names no %s:LINE: %s", conf, d.Text)
				}
			}
			if !slices.Equal(got, c.want) {
				t.Fatalf("disagreements on %q, want %q:\n%s", got, c.want, text)
			}
			for _, s := range c.says {
				if s = strings.ReplaceAll(s, "CONF", conf); !strings.Contains(text, s) {
					t.Errorf("the warnings do not say %q:\n%s", s, text)
				}
			}
		})
	}
}

// fitWith fits w and takes cfg's policy, as calibrate --config does; it
// returns the result, the settings the metrics disagree with, and the
// warnings' texts, a line each.
func fitWith(t testing.TB, w *calibrate.Window, cfg *calibrate.Config) (r *calibrate.Result, settings []string, text string) {
	t.Helper()
	r, err := calibrate.Fit(w, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.UseConfig(cfg, nil); err != nil {
		t.Fatal(err)
	}
	for _, d := range r.Disagreements {
		settings, text = append(settings, d.Setting), text+d.Text+"\n"
	}
	return r, settings, text
}
