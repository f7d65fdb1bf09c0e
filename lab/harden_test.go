package lab

import (
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/scenario"
)

// A web page in the user's browser can reach 127.0.0.1. Every server the
// lab starts refuses what such a page could send: another Host name (DNS
// rebinding) for any request, and a cross-origin request that changes
// state.
func TestServerRefusesWhatAPageCouldSend(t *testing.T) {
	url := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	port := url[strings.LastIndex(url, ":")+1:]
	c := testClient(t)
	for _, tc := range []struct {
		method  string
		headers []string
		want    int
	}{
		{"GET", nil, http.StatusOK},
		{"POST", nil, http.StatusOK}, // curl, the lab's own clients
		{"GET", []string{"Host", "localhost:" + port}, http.StatusOK},
		{"GET", []string{"Host", "evil.example:" + port}, http.StatusMisdirectedRequest},
		{"GET", []string{"Host", "127.0.0.1:1"}, http.StatusMisdirectedRequest},
		{"POST", []string{"Host", "rebound.example:" + port}, http.StatusMisdirectedRequest},
		{"POST", []string{"Origin", "http://evil.example"}, http.StatusForbidden},
		{"DELETE", []string{"Sec-Fetch-Site", "cross-site"}, http.StatusForbidden},
		{"POST", []string{"Sec-Fetch-Site", "same-site"}, http.StatusForbidden}, // another port of 127.0.0.1
		{"POST", []string{"Sec-Fetch-Site", "same-origin"}, http.StatusOK},
		{"POST", []string{"Origin", "http://127.0.0.1:" + port}, http.StatusOK},
		{"GET", []string{"Origin", "http://evil.example"}, http.StatusOK}, // reads are the browser's to refuse
	} {
		req, _ := http.NewRequest(tc.method, url, nil)
		for i := 0; i+1 < len(tc.headers); i += 2 {
			if tc.headers[i] == "Host" {
				req.Host = tc.headers[i+1]
			} else {
				req.Header.Set(tc.headers[i], tc.headers[i+1])
			}
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s with %v: %d, want %d", tc.method, tc.headers, resp.StatusCode, tc.want)
		}
	}
}

// The admin endpoint changes the origin's faults: it needs the run's
// token, and an origin without one refuses everything.
func TestAdminNeedsTheToken(t *testing.T) {
	_, url := startOrigin(t, OriginConfig{Origin: queueOrigin(1, 100), AdminToken: "s3cret"})
	_, closed := startOrigin(t, OriginConfig{Origin: queueOrigin(1, 100)})
	c := testClient(t)
	for _, tc := range []struct {
		method, url string
		headers     []string
		want        int
	}{
		{"GET", url + "/admin/faults", nil, http.StatusForbidden},
		{"POST", url + "/admin/faults?kind=outage&for=1s", nil, http.StatusForbidden},
		{"POST", url + "/admin/faults?kind=outage&for=1s&token=guess", nil, http.StatusForbidden},
		{"DELETE", url + "/admin/faults?token=", nil, http.StatusForbidden},
		{"GET", url + "/admin/faults?token=s3cret", nil, http.StatusOK},
		{"DELETE", url + "/admin/faults", []string{"Authorization", "Bearer s3cret"}, http.StatusOK},
		{"GET", closed + "/admin/faults?token=", nil, http.StatusForbidden},
		{"GET", url + "/metrics", nil, http.StatusOK}, // read-only: no token
	} {
		if r := send(c, tc.method, tc.url, time.Second, tc.headers...); r.status != tc.want {
			t.Errorf("%s %s %v: %d %s, want %d", tc.method, tc.url, tc.headers, r.status, r.body, tc.want)
		}
	}
}

// NaN passes a range check written x < lo || x > hi: the endpoint must
// refuse it, and infinities, and durations that overflow when added.
func TestAdminRefusesNaNAndOverflow(t *testing.T) {
	o, url := startOrigin(t, OriginConfig{Origin: queueOrigin(1, 100), AdminToken: "t"})
	c := testClient(t)
	for _, bad := range []string{
		"kind=capacity&capacity=NaN&for=1s", "kind=capacity&capacity=nan&for=1s", "kind=capacity&capacity=Inf&for=1s",
		"kind=errors&error_rate=NaN&for=1s", "kind=latency&factor=NaN&for=1s", "kind=latency&factor=-Inf&for=1s",
		"kind=outage&at=2562047h&for=2562047h", "kind=outage&for=9223372036854775807ns", "kind=outage&for=25h",
	} {
		if r := send(c, "POST", url+"/admin/faults?token=t&"+bad, time.Second); r.status != http.StatusBadRequest {
			t.Errorf("POST %s: %d, want 400", bad, r.status)
		}
	}
	if st := o.adminState(); st.Capacity != 100 || len(st.Faults) != 0 {
		t.Errorf("the origin changed: %+v", st)
	}
}

// Injected faults that have ended are forgotten, and the list is bounded.
func TestAdminFaultsExpireAndAreBounded(t *testing.T) {
	_, url := startOrigin(t, OriginConfig{Origin: queueOrigin(1, 100), AdminToken: "t"})
	c := testClient(t)
	for range 3 {
		if r := send(c, "POST", url+"/admin/faults?token=t&kind=errors&error_rate=0.1&for=1ms", time.Second); r.status != http.StatusOK {
			t.Fatalf("inject: %d %s", r.status, r.body)
		}
		time.Sleep(5 * time.Millisecond)
	}
	r := send(c, "POST", url+"/admin/faults?token=t&kind=errors&error_rate=0.1&for=1h", time.Second)
	var st adminState
	if err := json.Unmarshal([]byte(r.body), &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Faults) != 1 {
		t.Errorf("%d faults kept, want 1: those that ended are forgotten", len(st.Faults))
	}
	for i := 1; i < maxInjectedFaults; i++ {
		if r := send(c, "POST", url+"/admin/faults?token=t&kind=errors&error_rate=0.1&for=1h", time.Second); r.status != http.StatusOK {
			t.Fatalf("fault %d: %d %s", i+1, r.status, r.body)
		}
	}
	if r := send(c, "POST", url+"/admin/faults?token=t&kind=errors&error_rate=0.1&for=1h", time.Second); r.status != http.StatusTooManyRequests {
		t.Errorf("one fault too many: %d, want 429", r.status)
	}
	if r := send(c, "DELETE", url+"/admin/faults?token=t", time.Second); r.status != http.StatusOK {
		t.Fatalf("clear: %d", r.status)
	}
	if r := send(c, "POST", url+"/admin/faults?token=t&kind=errors&error_rate=0.1&for=1h", time.Second); r.status != http.StatusOK {
		t.Errorf("after clearing: %d", r.status)
	}
}

// Request headers are bounded: a megabyte of them is refused at once.
func TestServerHeaderLimit(t *testing.T) {
	url := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	c := testClient(t)
	if r := send(c, "GET", url, 5*time.Second, "X-Big", strings.Repeat("x", 1<<20)); r.status != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("1 MiB of headers: %d %v, want 431", r.status, r.err)
	}
	if r := send(c, "GET", url, 5*time.Second, "X-Fine", strings.Repeat("x", 4<<10)); r.status != http.StatusOK {
		t.Errorf("4 KiB of headers: %d %v, want 200", r.status, r.err)
	}
}

// Connections beyond the limit wait to be accepted until one closes.
func TestServerConnectionLimit(t *testing.T) {
	srv, err := listen("127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), 2)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	addr := srv.URL().Host
	var held []net.Conn
	for range 2 {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, conn)
	}
	time.Sleep(50 * time.Millisecond) // let the server accept both
	c := testClient(t)
	if r := send(c, "GET", srv.URL().String(), 300*time.Millisecond); r.err == nil {
		t.Fatalf("a third connection was served (%d): no limit", r.status)
	}
	held[0].Close()
	if r := send(c, "GET", srv.URL().String(), 5*time.Second); r.status != http.StatusOK {
		t.Errorf("after one closed: %d %v, want 200", r.status, r.err)
	}
	held[1].Close()
}

// Each page that follows the live view holds a buffer: their number is
// bounded.
func TestLiveBoundsItsPages(t *testing.T) {
	l := NewLive(&scenario.Scenario{Tick: time.Second, Duration: time.Second}, nil, time.Second, nil)
	defer l.Close()
	for i := range maxSubscribers {
		if _, _, ok := l.subscribe(); !ok {
			t.Fatalf("page %d refused", i+1)
		}
	}
	if _, _, ok := l.subscribe(); ok {
		t.Fatalf("page %d let in: no bound", maxSubscribers+1)
	}
}
