package calibrate_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/calibrate"
)

// fakeProm answers the two endpoints Fetch uses: series with n label
// sets per match (none for a metric the saved answer lacks), and
// query_range with the saved answer, whatever the query: Fetch keeps the
// series of the metric it asked for.
func fakeProm(t *testing.T, n int, answer []byte, hold chan struct{}) string {
	t.Helper()
	srv := httptest.NewServer(promHandler(t, n, answer, hold))
	t.Cleanup(srv.Close)
	return srv.URL
}

// promHandler is fakeProm's handler.
func promHandler(t *testing.T, n int, answer []byte, hold chan struct{}) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/api/v1/series":
			if err := r.ParseForm(); err != nil {
				t.Error(err)
			}
			match := r.Form.Get("match[]")
			name := strings.SplitN(match, "{", 2)[0]
			var sets []string
			n := n
			if answer != nil && !strings.Contains(string(answer), fmt.Sprintf(`"__name__":%q`, name)) {
				n = 0 // not in the saved window
			}
			for i := range n {
				sets = append(sets, fmt.Sprintf(`{"__name__":%q,"instance":"i%d"}`, name, i))
			}
			fmt.Fprintf(w, `{"status":"success","data":[%s]}`, strings.Join(sets, ","))
		case "/api/v1/query_range":
			if hold != nil {
				select {
				case <-hold:
				case <-r.Context().Done():
				}
			}
			w.Write(answer)
		default:
			http.NotFound(w, r)
		}
	})
}

// TestFetchLive reads the lab's saved window through a server that
// answers as Prometheus does, and fits what the file gives.
func TestFetchLive(t *testing.T) {
	answer, err := os.ReadFile("testdata/lab.json")
	if err != nil {
		t.Fatal(err)
	}
	u := fakeProm(t, 1, answer, nil)
	end := time.Date(2026, 12, 1, 18, 32, 34, 0, time.UTC)
	w, err := calibrate.Fetch(context.Background(), calibrate.Live{URL: u, Start: end.Add(-17 * time.Second), End: end, Step: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	r, err := calibrate.Fit(w, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Workers.V != 8 || r.Clients.V != 4 {
		t.Errorf("workers %v, clients %v; want 8 and 4", r.Workers.V, r.Clients.V)
	}
	if !strings.Contains(r.Rate.Note, "retrystorm_origin_attempts_total") || !strings.Contains(w.Describe(), "Prometheus at "+u) {
		t.Errorf("the notes do not say where: %q, %q", r.Rate.Note, w.Describe())
	}
}

// TestFetchBounds: a selector matching too many series is refused before
// any range query, and Ctrl-C (the context) stops a query under way.
func TestFetchBounds(t *testing.T) {
	now := time.Now()
	u := fakeProm(t, calibrate.MaxSeries+1, nil, nil)
	_, err := calibrate.Fetch(context.Background(), calibrate.Live{URL: u, Start: now.Add(-time.Hour), End: now, Step: 15 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "narrow --selector") {
		t.Errorf("too many series: error %v", err)
	}

	hold := make(chan struct{})
	defer close(hold)
	answer, _ := os.ReadFile("testdata/lab.json")
	u = fakeProm(t, 1, answer, hold)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	start := time.Now()
	_, err = calibrate.Fetch(ctx, calibrate.Live{URL: u, Start: now.Add(-time.Hour), End: now, Step: 15 * time.Second})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: error %v, want context.Canceled", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %s to stop", d)
	}
}

// TestFetchRedirect: a redirect on the server given is followed (a path
// prefix), one to another host or port is refused, naming both (issue
// 37: calibrate followed a redirect to any host, and read its window
// there).
func TestFetchRedirect(t *testing.T) {
	answer, err := os.ReadFile("testdata/lab.json")
	if err != nil {
		t.Fatal(err)
	}
	other := fakeProm(t, 1, answer, nil)
	var same *httptest.Server
	same = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/prom/api/v1/series" || r.URL.Path == "/prom/api/v1/query_range" {
			http.Redirect(w, r, other+strings.TrimPrefix(r.URL.Path, "/prom")+"?"+r.URL.RawQuery, http.StatusTemporaryRedirect)
			return
		}
		http.Redirect(w, r, same.URL+"/prom"+r.URL.Path+"?"+r.URL.RawQuery, http.StatusTemporaryRedirect)
	}))
	defer same.Close()
	start := time.Date(2026, 12, 1, 18, 32, 17, 0, time.UTC)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = calibrate.Fetch(ctx, calibrate.Live{URL: same.URL, Start: start, End: start.Add(17 * time.Second), Step: time.Second, Timeout: 5 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "redirected to "+other) || !strings.Contains(err.Error(), "follows a redirect only on the server it was given") {
		t.Fatalf("a redirect to %s (after one on %s): error %v, want a refusal naming it", other, same.URL, err)
	}
	// The same redirect to itself (its path) is followed.
	direct := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/prom/") {
			r2, _ := http.NewRequestWithContext(r.Context(), r.Method, other+strings.TrimPrefix(r.URL.Path, "/prom")+"?"+r.URL.RawQuery, r.Body)
			r2.Header = r.Header
			res, err := http.DefaultClient.Do(r2)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
			defer res.Body.Close()
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(res.StatusCode)
			io.Copy(w, res.Body)
			return
		}
		http.Redirect(w, r, "/prom"+r.URL.Path+"?"+r.URL.RawQuery, http.StatusTemporaryRedirect)
	}))
	defer direct.Close()
	if _, err := calibrate.Fetch(ctx, calibrate.Live{URL: direct.URL, Start: start, End: start.Add(17 * time.Second), Step: time.Second, Timeout: 5 * time.Second}); err != nil {
		t.Errorf("a redirect on the same server: %v", err)
	}
}
