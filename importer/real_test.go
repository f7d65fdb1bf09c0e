package importer

import (
	"context"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/internal/servertest"
	"github.com/retrystorm/retrystorm/scenario"
	"github.com/retrystorm/retrystorm/sim"
)

// The real-binary tests (issue 36): for each directive the nginx and
// HAProxy importers read, the real proxy runs on 127.0.0.1 in front of
// tiny Go backends that make the failure the directive acts on; the
// attempts it makes are counted and compared with what the simulator
// makes of the same file, imported. Under CI=true a missing binary fails
// the test; elsewhere it skips.

// backend is a Go HTTP server on 127.0.0.1 that counts the requests it
// gets and answers each with h.
type backend struct {
	addr string
	hits atomic.Int64
}

// newBackend starts a backend answering status after delay.
func newBackend(t *testing.T, status int, delay time.Duration) *backend {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &backend{addr: l.Addr().String()}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.hits.Add(1)
		if delay > 0 {
			select {
			case <-time.After(delay):
			case <-r.Context().Done():
				return
			}
		}
		w.WriteHeader(status)
	}), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return b
}

// serverFor is a refusing address for status 0, else a new backend
// answering status after delay, and that backend.
func serverFor(t *testing.T, status int, delay time.Duration) (string, *backend) {
	if status == 0 {
		return servertest.Refusing(t), nil
	}
	be := newBackend(t, status, delay)
	return be.addr, be
}

// failures counts the statuses that are not 200.
func failures(statuses []int) int {
	n := 0
	for _, s := range statuses {
		if s != 200 {
			n++
		}
	}
	return n
}

// send sends n requests of method to url one after the other and returns
// their statuses and responses' header h (one each).
func send(t *testing.T, method, url string, n int, h string) (statuses []int, headers []string) {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second}
	for range n {
		req, err := http.NewRequest(method, url, strings.NewReader("x"))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		statuses = append(statuses, resp.StatusCode)
		headers = append(headers, resp.Header.Get(h))
	}
	return statuses, headers
}

// simulate runs f, imported, against an origin of replicas replicas under
// the triggers (list items, each 5m at most) and returns the attempts per
// intent that reached it (per failed intent, when some failed) and the
// intents that failed. The traffic is intents intents, one at a time, as
// the real test sends them.
func simulate(t *testing.T, f scenario.Fleet, replicas int, origin, triggers string, intents int, idempotent bool) (perIntent float64, lost int64) {
	t.Helper()
	idem := "1"
	if !idempotent {
		idem = "0"
	}
	sc, err := scenario.Parse("real.yaml", []byte("name: real\nduration: 10m\ntraffic: {rate: 1, clients: 1, idempotent: "+idem+"}\norigin: "+origin+"\n"+
		"triggers:\n  - {kind: load, at: "+(time.Duration(intents)*time.Second).String()+", for: "+(10*time.Minute-time.Duration(intents)*time.Second).String()+", rate: 0}\n"+triggers+"fleets: [{name: x, timeout: 1s, budget: {use: none}}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	sc.Origin.Replicas = max(replicas, 1)
	sc.Fleets = []scenario.Fleet{f}
	if err := sc.Validate(); err != nil {
		t.Fatal(err)
	}
	r, err := sim.RunWith(context.Background(), sc, sim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := r.Fleets[0].Summary
	if s.IntentsLost == 0 {
		return float64(s.Attempts) / float64(s.Intents), 0
	}
	// The attempts of the intents that failed, as the real test counts a
	// failing request's: the others succeeded at their first attempt (a
	// capacity model's first credits, before it rejects everything).
	return float64(s.Attempts-(s.Intents-s.IntentsLost)) / float64(s.IntentsLost), s.IntentsLost
}

// importReal imports a config written for the real test.
func importReal(t *testing.T, name, text string) Fleet {
	t.Helper()
	fl, err := Import([]Source{{Name: name, Data: []byte(text)}}, Options{})
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	return fl[0]
}
