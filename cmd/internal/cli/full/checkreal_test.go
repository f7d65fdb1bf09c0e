package full

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"

	"github.com/retrystorm/retrystorm/internal/promtest"
)

// promHolding runs a real Prometheus (promtest) holding the saved window
// answer: it scrapes, once, an exporter that serves every sample with its
// own timestamp (OpenMetrics), moved so that the window ends a minute
// ago. It returns the server's URL and the window's first and last
// sample times, as --from and --to take them (Unix seconds).
func promHolding(t *testing.T, ctx context.Context, bin, answer string) (string, string, string) {
	t.Helper()
	a := promtest.ReadAnswer(t, answer)
	var first, last float64 = math.Inf(1), math.Inf(-1)
	for _, s := range a.Data.Result {
		for _, v := range s.Values {
			first, last = min(first, v[0].(float64)), max(last, v[0].(float64))
		}
	}
	shift := math.Floor(float64(time.Now().Add(-time.Minute).Unix()) - last)
	var b strings.Builder
	series := slices.Clone(a.Data.Result)
	slices.SortStableFunc(series, func(x, y promtest.AnswerSeries) int {
		return strings.Compare(x.Metric["__name__"], y.Metric["__name__"])
	})
	for _, s := range series {
		var labels []string
		for k, v := range s.Metric {
			if k != "__name__" {
				labels = append(labels, fmt.Sprintf("%s=%q", k, v))
			}
		}
		slices.Sort(labels)
		for _, v := range s.Values {
			fmt.Fprintf(&b, "%s{%s} %s %s\n", s.Metric["__name__"], strings.Join(labels, ","), v[1], strconv.FormatFloat(v[0].(float64)+shift, 'f', 3, 64))
		}
	}
	b.WriteString("# EOF\n")
	var served atomic.Bool
	exporter := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/openmetrics-text; version=1.0.0; charset=utf-8")
		if served.Swap(true) {
			fmt.Fprint(w, "# EOF\n") // once: the samples are the window's, not the scrape's
			return
		}
		fmt.Fprint(w, b.String())
	}))
	t.Cleanup(exporter.Close)
	host := strings.TrimPrefix(exporter.URL, "http://")
	prom := promtest.Start(t, ctx, bin, "honor_labels: true\n    "+promtest.Static(host))
	client, err := api.NewClient(api.Config{Address: prom})
	if err != nil {
		t.Fatal(err)
	}
	from, to := time.Unix(0, int64((first+shift)*1e9)), time.Unix(0, int64((last+shift)*1e9))
	for {
		sets, _, _, err := v1.NewAPI(client).Series(ctx, []string{`{job="lab"}`}, from, to)
		if err == nil && len(sets) == len(a.Data.Result) {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("Prometheus holds %d of the window's %d series: %v", len(sets), len(a.Data.Result), err)
		case <-time.After(200 * time.Millisecond):
		}
	}
	unix := func(x float64) string { return strconv.FormatFloat(x, 'f', 3, 64) }
	return prom, unix(first + shift), unix(last + shift)
}

// TestCheckRealPrometheus: check --prometheus against a real Prometheus
// holding the lab's window (calibrate/testdata/lab.json) gives the
// verdict that calibrate --prometheus -o X then check --base X give, and
// the one of the same window saved (check --file); behind a TLS proxy
// that wants a token, as Prometheus is run, it reads through
// --bearer-token-file and --ca-file, and writes no secret anywhere.
func TestCheckRealPrometheus(t *testing.T) {
	bin := promtest.Bin(t, "runs a real Prometheus (about 10 s)")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	prom, from, to := promHolding(t, ctx, bin, calibrateData("lab.json"))
	config := calibrateData("config/lab-naive.yaml")
	window := []string{"--from", from, "--to", to, "--step", "1s"}
	verdict := func(args ...string) result {
		t.Helper()
		r := runCLI(t, append(append([]string{"check"}, args...), config, "--seeds", "1", "--json")...)
		if r.code != 0 && r.code != 1 {
			t.Fatalf("check %q: exit %d\n%s", args, r.code, r.stderr)
		}
		return r
	}
	live := verdict(append([]string{"--prometheus", prom}, window...)...)
	if !strings.Contains(live.stderr, "the base is calibrated from Prometheus at "+prom) {
		t.Errorf("check --prometheus does not say where its base came from:\n%s", live.stderr)
	}
	file := t.TempDir() + "/base.yaml"
	if r := runCLI(t, append([]string{"calibrate", "--prometheus", prom, "--config", config, "-o", file}, window...)...); r.code != 0 {
		t.Fatalf("calibrate: exit %d\n%s", r.code, r.stderr)
	}
	for _, other := range []struct {
		what string
		r    result
	}{
		{"calibrate --prometheus -o X, check --base X", verdict("--base", file)},
		{"check --file (the window saved)", verdict("--file", calibrateData("lab.json"))},
	} {
		if other.r.code != live.code || other.r.stdout != live.stdout {
			t.Errorf("check --prometheus: exit %d; %s: exit %d; the verdicts differ:\n%s\n----\n%s", live.code, other.what, other.r.code, live.stdout, other.r.stdout)
		}
	}

	// Behind a TLS proxy that wants a bearer token.
	target, _ := url.Parse(prom)
	proxy := authProxy(t, target, func(r *http.Request) bool { return r.Header.Get("Authorization") == "Bearer "+token })
	dir := accessFiles(t, proxy)
	kept := dir + "/kept.yaml"
	r := runCLI(t, append([]string{"check", "--prometheus", proxy.URL, "--bearer-token-file", dir + "/token", "--ca-file", dir + "/ca.pem", "--calibrated", kept, config, "--seeds", "1", "--json"}, window...)...)
	if r.code != live.code || r.stdout != live.stdout {
		t.Errorf("check through the proxy: exit %d (want %d), the verdict differs:\n%s\n%s", r.code, live.code, r.stdout, r.stderr)
	}
	written, _ := os.ReadFile(kept)
	noSecret(t, "check --prometheus through the proxy", r.stdout, r.stderr, string(written))
}
