package resilhttp

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/resil"
	"github.com/retrystorm/retrystorm/resil/balance"
	"github.com/retrystorm/retrystorm/resil/outlier"
)

// replica is one httptest server on 127.0.0.1 that counts its requests
// and answers with status (200 when 0).
type replica struct {
	srv    *httptest.Server
	hits   atomic.Int64
	status atomic.Int64
}

// startReplicas starts n replicas and stops them, and the client's idle
// connections, when the test ends. closed[i] closes replica i's listener
// at once: a black-holed replica whose connections are refused.
func startReplicas(t *testing.T, n int, closed map[int]bool) ([]*replica, []string, *http.Transport) {
	t.Helper()
	reps := make([]*replica, n)
	urls := make([]string, n)
	for i := range reps {
		r := &replica{}
		r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			r.hits.Add(1)
			if s := r.status.Load(); s != 0 {
				w.WriteHeader(int(s))
			}
			io.WriteString(w, "ok")
		}))
		reps[i], urls[i] = r, r.srv.URL
		if closed[i] {
			r.srv.Close()
		} else {
			t.Cleanup(r.srv.Close)
		}
	}
	base := &http.Transport{}
	t.Cleanup(base.CloseIdleConnections)
	return reps, urls, base
}

func advanceClock(c *skipClock, d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// TestReplicasEjectAndRetryElsewhere: one replica of three fails, with a
// 503 or by refusing connections. Envoy's consecutive_5xx (5 in a row;
// without split_external_local_origin_errors a refused connection counts
// as a gateway error: source/common/upstream/outlier_detection_impl.cc,
// putResult, commit 00c7146d) ejects it after its fifth failure; until
// then each of its failures is retried on the next replica in turn, and
// after it, no attempt goes there. Every call succeeds. After the base
// ejection time (30s) the replica is back at the first request after the
// next evaluation, and is ejected again at once when it still fails.
func TestReplicasEjectAndRetryElsewhere(t *testing.T) {
	for _, c := range []struct {
		name   string
		status int  // the bad replica's answer
		closed bool // or it refuses connections
	}{
		{"503", http.StatusServiceUnavailable, false},
		{"502", http.StatusBadGateway, false},
		{"connection refused", 0, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			const bad = 1
			reps, urls, base := startReplicas(t, 3, map[int]bool{bad: c.closed})
			reps[bad].status.Store(int64(c.status))
			clk := &skipClock{now: epoch}
			ds := outlier.EnvoyDefaults(3)
			ds.MaxEjectionPercent = 34 // one host of three: 100 × 1/3 ≤ 34
			det, err := outlier.New(ds)
			if err != nil {
				t.Fatal(err)
			}
			rr, err := balance.NewRoundRobin(balance.Settings{Hosts: 3, Detector: det})
			if err != nil {
				t.Fatal(err)
			}
			r, err := NewReplicas(ReplicaSettings{Endpoints: urls, Picker: rr, Detector: det, Base: base, Clock: clk})
			if err != nil {
				t.Fatal(err)
			}
			client := &http.Client{Transport: &Transport{Guard: newGuard(t, clk, resil.Policy{MaxRetries: 2}), Base: r}}
			get := func() {
				t.Helper()
				resp, err := client.Get("http://service.test/x")
				if err != nil {
					t.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("status %d: a retry should have gone to a healthy replica", resp.StatusCode)
				}
				if h := resp.Request.URL.Host; h == r.Endpoint(bad).Host {
					t.Fatalf("answered by the bad replica %s", h)
				}
			}
			for range 30 {
				get()
			}
			if !det.Ejected(bad) {
				t.Fatalf("bad replica not ejected: %+v", det.Host(bad))
			}
			if got := det.Host(bad).Reason; got != outlier.Consecutive5xx {
				t.Errorf("ejected for %v, want consecutive_5xx", got)
			}
			if !c.closed {
				if n := reps[bad].hits.Load(); n != 5 {
					t.Errorf("bad replica served %d requests, want the 5 that ejected it", n)
				}
			}
			if n := reps[0].hits.Load() + reps[2].hits.Load(); n != 30 {
				t.Errorf("healthy replicas served %d requests, want 30 (one per call)", n)
			}

			// Back after the base ejection time, at the first request after
			// the evaluation that ends it; still failing, it goes again.
			before := reps[bad].hits.Load()
			advanceClock(clk, ds.BaseEjectionTime+ds.Interval)
			for range 30 {
				get()
			}
			if got := det.Host(bad).Ejections; got != 2 {
				t.Errorf("ejections = %d, want 2: back once, ejected again", got)
			}
			if !c.closed && reps[bad].hits.Load() == before {
				t.Error("the bad replica got no request after its ejection ended")
			}
			for i := range 3 {
				if n := rr.InFlight(i); n != 0 {
					t.Errorf("host %d: %d requests still in flight after every body was closed", i, n)
				}
			}
		})
	}
}

// TestReplicasSpreadAndRelease: without failures, round robin spreads the
// calls evenly, and an attempt is in flight until its body is closed.
func TestReplicasSpreadAndRelease(t *testing.T) {
	reps, urls, base := startReplicas(t, 3, nil)
	p, _ := balance.NewRoundRobin(balance.Settings{Hosts: 3})
	r, err := NewReplicas(ReplicaSettings{Endpoints: urls, Picker: p, Base: base})
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: r}
	var open []io.Closer
	for range 9 {
		resp, err := client.Get("http://service.test/")
		if err != nil {
			t.Fatal(err)
		}
		open = append(open, resp.Body)
	}
	for i := range 3 {
		if n := reps[i].hits.Load(); n != 3 {
			t.Errorf("replica %d served %d, want 3", i, n)
		}
		if n := p.InFlight(i); n != 3 {
			t.Errorf("replica %d: %d in flight before the bodies are closed, want 3", i, n)
		}
	}
	for _, b := range open {
		b.Close()
	}
	for i := range 3 {
		if n := p.InFlight(i); n != 0 {
			t.Errorf("replica %d: %d in flight after, want 0", i, n)
		}
	}
}

func TestNewReplicasRejects(t *testing.T) {
	p, _ := balance.NewRoundRobin(balance.Settings{Hosts: 2})
	det, _ := outlier.New(outlier.EnvoyDefaults(3))
	two := []string{"http://127.0.0.1:1", "http://127.0.0.1:2"}
	for _, c := range []struct {
		name  string
		s     ReplicaSettings
		field string
	}{
		{"zero", ReplicaSettings{}, "Endpoints"},
		{"no picker", ReplicaSettings{Endpoints: two}, "Picker"},
		{"detector size", ReplicaSettings{Endpoints: two, Picker: p, Detector: det}, "Detector"},
		{"zero detector", ReplicaSettings{Endpoints: two, Picker: p, Detector: &outlier.Detector{}}, "Detector"},
		{"no scheme", ReplicaSettings{Endpoints: []string{"http://a:1", "127.0.0.1:2"}, Picker: p}, "Endpoints[1]"},
		{"ftp", ReplicaSettings{Endpoints: []string{"ftp://a:1"}, Picker: p}, "Endpoints[0]"},
		{"path", ReplicaSettings{Endpoints: []string{"http://a:1/v1"}, Picker: p}, "Endpoints[0]"},
		{"query", ReplicaSettings{Endpoints: []string{"http://a:1?x=1"}, Picker: p}, "Endpoints[0]"},
		{"bad url", ReplicaSettings{Endpoints: []string{"http://[::1"}, Picker: p}, "Endpoints[0]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := NewReplicas(c.s)
			se, ok := errors.AsType[*resil.SettingError](err)
			if !ok {
				t.Fatalf("err = %v, want a *resil.SettingError", err)
			}
			if want := "resilhttp.ReplicaSettings." + c.field; se.Field != want {
				t.Errorf("field %q, want %q", se.Field, want)
			}
		})
	}
}

// TestReplicasFailClosed: the zero Replicas and a picker with every host
// ejected send nothing, and close the request's body as a RoundTripper
// must.
func TestReplicasFailClosed(t *testing.T) {
	det, _ := outlier.New(outlier.Settings{Hosts: 1, MaxEjectionPercent: 100, Consecutive5xx: 1, Enforcing: outlier.Enforcing{Consecutive5xx: 100}})
	_ = det.Record(epoch, 0, outlier.Error5xx)
	p, _ := balance.NewRoundRobin(balance.Settings{Hosts: 1, Detector: det, PanicThreshold: balance.NoPanic})
	allOut, err := NewReplicas(ReplicaSettings{Endpoints: []string{"http://127.0.0.1:1"}, Picker: p, Detector: det})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		r    *Replicas
		want error
	}{
		{"zero", &Replicas{}, resil.ErrNotBuilt},
		{"nil", nil, resil.ErrNotBuilt},
		{"all ejected", allOut, balance.ErrNoHost},
	} {
		t.Run(c.name, func(t *testing.T) {
			body := &closeCounter{Reader: strings.NewReader("x")}
			req, _ := http.NewRequest(http.MethodPost, "http://service.test/", body)
			resp, err := c.r.RoundTrip(req)
			if resp != nil || !errors.Is(err, c.want) {
				t.Fatalf("RoundTrip = %v, %v; want %v", resp, err, c.want)
			}
			if !body.closed {
				t.Error("request body not closed")
			}
		})
	}
}

// TestReplicasCancelledCountsNothing: an attempt whose caller left tells
// the detector nothing, as Envoy does not count a downstream reset; one
// that timed out is a local-origin failure, which without
// split_external_local_origin_errors Envoy counts as a 504, a gateway
// error (outlier_detection_impl.cc, resultToHttpCode, commit 00c7146d):
// with consecutive_5xx at 1 it ejects the replica.
func TestReplicasCancelledCountsNothing(t *testing.T) {
	for _, c := range []struct {
		name   string
		cancel bool // else a deadline
		eject  bool
	}{
		{"cancelled", true, false},
		{"timed out", false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			release := make(chan struct{})
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				select {
				case <-r.Context().Done():
				case <-release:
				}
			}))
			defer srv.Close()
			defer close(release)
			base := &http.Transport{}
			defer base.CloseIdleConnections()
			det, _ := outlier.New(outlier.Settings{Hosts: 1, Consecutive5xx: 1, MaxEjectionPercent: 100,
				Enforcing: outlier.Enforcing{Consecutive5xx: 100}})
			p, _ := balance.NewRoundRobin(balance.Settings{Hosts: 1, Detector: det})
			r, err := NewReplicas(ReplicaSettings{Endpoints: []string{srv.URL}, Picker: p, Detector: det, Base: base})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
			defer cancel()
			if c.cancel {
				ctx, cancel = context.WithCancel(context.Background())
				time.AfterFunc(20*time.Millisecond, cancel)
			}
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://service.test/", nil)
			if resp, err := r.RoundTrip(req); err == nil {
				resp.Body.Close()
				t.Fatal("RoundTrip succeeded")
			}
			if got := det.Ejected(0); got != c.eject {
				t.Errorf("ejected = %v, want %v", got, c.eject)
			}
			if n := p.InFlight(0); n != 0 {
				t.Errorf("%d in flight after the error", n)
			}
		})
	}
}
