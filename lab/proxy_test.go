package lab

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/scenario"
)

// stub is a stand-in for a service the lab did not write: it answers
// every request after a fixed time, and remembers what it saw.
type stub struct {
	delay    time.Duration
	served   atomic.Int64 // requests it finished, for a client or not
	canceled atomic.Int64 // requests whose client left before it finished
	mu       sync.Mutex
	arrivals []time.Time
	last     *http.Request
}

func (tg *stub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	tg.mu.Lock()
	tg.arrivals = append(tg.arrivals, time.Now())
	tg.last = r
	tg.mu.Unlock()
	select {
	case <-time.After(tg.delay):
	case <-r.Context().Done():
		tg.canceled.Add(1)
		return
	}
	tg.served.Add(1)
	w.Header().Set("X-Target", "yes")
	_, _ = io.WriteString(w, "from the target "+r.URL.Path+"\n")
}

func (tg *stub) seen() []time.Time {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	return append([]time.Time(nil), tg.arrivals...)
}

// startProxy runs a fault proxy in front of a stub server on loopback
// until the test ends, and returns the proxy and its URL.
func startProxy(t *testing.T, tg http.Handler, cfg ProxyConfig) (*FaultProxy, string) {
	t.Helper()
	if cfg.Target == nil {
		u, err := url.Parse(startServer(t, tg))
		if err != nil {
			t.Fatal(err)
		}
		cfg.Target = u
	}
	if cfg.Origin.Model == "" {
		cfg.Origin = queueOrigin(1, 100)
	}
	p, err := NewFaultProxy(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p, startRunning(t, p.Run, p.Handler())
}

// burst sends n requests at once and returns their replies, in the order
// sent.
func burst(c *http.Client, url string, n int, timeout time.Duration) []reply {
	out := make([]reply, n)
	var wg sync.WaitGroup
	for i := range out {
		wg.Go(func() { out[i] = send(c, "GET", url, timeout) })
	}
	wg.Wait()
	return out
}

// TestProxyPassesThrough: without triggers the proxy is transparent: every
// request reaches the stub at once, under the stub's path and Host,
// and the stub's answer comes back as it was.
func TestProxyPassesThrough(t *testing.T) {
	tg := &stub{delay: 50 * time.Millisecond}
	srv := startServer(t, tg)
	u, _ := url.Parse(srv + "/api")
	_, purl := startProxy(t, nil, ProxyConfig{Target: u})
	c := testClient(t)
	start := time.Now()
	replies := burst(c, purl+"/v1/thing?x=1", 100, 5*time.Second)
	took := time.Since(start)
	for _, r := range replies {
		if r.status != http.StatusOK || r.body != "from the target /api/v1/thing\n" || r.header.Get("X-Target") != "yes" {
			t.Fatalf("reply %d %q %v, want the stub's", r.status, r.body, r.header)
		}
	}
	if !slow() && took > 500*time.Millisecond {
		t.Errorf("100 requests to a 50 ms stub took %v: the proxy limited them", took)
	}
	tg.mu.Lock()
	last := tg.last
	tg.mu.Unlock()
	if last.Host != u.Host || last.URL.RawQuery != "x=1" {
		t.Errorf("the stub saw Host %q and query %q, want %q and x=1", last.Host, last.URL.RawQuery, u.Host)
	}
}

// TestProxyCapacityDip: during a dip the proxy lets requests through at
// the dip's capacity, with a queue; when it ends, what waits goes at once.
func TestProxyCapacityDip(t *testing.T) {
	tg := &stub{}
	start := time.Now()
	p, purl := startProxy(t, tg, ProxyConfig{
		Start:    start,
		Triggers: []scenario.Trigger{{Kind: scenario.TriggerCapacity, At: 0, For: 400 * time.Millisecond, Capacity: 50}}, // one per 20 ms
	})
	c := testClient(t)
	var replies []reply
	var wg sync.WaitGroup
	wg.Go(func() { replies = burst(c, purl, 30, 5*time.Second) })
	time.Sleep(150 * time.Millisecond)
	if q := p.Queued(); q < 15 {
		t.Errorf("%d queued at 150 ms, want at least 15 (30 sent, one let through per 20 ms)", q)
	}
	wg.Wait()
	arr := tg.seen()
	if len(arr) != 30 {
		t.Fatalf("the stub saw %d requests, want 30", len(arr))
	}
	inDip := 0
	for _, a := range arr {
		if a.Sub(start) < 380*time.Millisecond {
			inDip++
		}
	}
	if inDip > 21 || (!slow() && inDip < 12) {
		t.Errorf("%d requests reached the stub during the 400 ms dip at 50/s, want about 20", inDip)
	}
	for _, r := range replies {
		if r.status != http.StatusOK {
			t.Errorf("reply %d %v, want every request answered", r.status, r.err)
		}
	}
	if end := arr[len(arr)-1].Sub(start); end < 390*time.Millisecond || (!slow() && end > 600*time.Millisecond) {
		t.Errorf("the last request reached the stub at %v, want at once when the dip ends at 400 ms", end)
	}
}

// TestProxyImposesOrigin: with Impose a stub faster than the origin
// serves at the origin's capacity, and a slower one at its own pace with
// the origin's workers.
func TestProxyImposesOrigin(t *testing.T) {
	for _, tc := range []struct {
		delay time.Duration
		want  time.Duration // for 20 requests, 2 workers at 100/s (20 ms each)
	}{{0, 200 * time.Millisecond}, {50 * time.Millisecond, 500 * time.Millisecond}} {
		tg := &stub{delay: tc.delay}
		_, purl := startProxy(t, tg, ProxyConfig{Origin: queueOrigin(2, 100), Impose: true})
		c := testClient(t)
		start := time.Now()
		replies := burst(c, purl, 20, 5*time.Second)
		took := time.Since(start)
		for _, r := range replies {
			if r.status != http.StatusOK {
				t.Fatalf("reply %d %v", r.status, r.err)
			}
		}
		t.Logf("stub %v: 20 requests in %v (want about %v)", tc.delay, took, tc.want)
		if took < tc.want-20*time.Millisecond || (!slow() && took > 2*tc.want) {
			t.Errorf("stub %v: 20 requests in %v, want about %v", tc.delay, took, tc.want)
		}
	}
}

// TestProxyOutageModes: an outage from 100 to 400 ms in each mode, and a
// request at 150 ms: refuse answers 502 at once and blackhole never,
// neither forwarding it; stall forwards it when the stall ends and answers
// then.
func TestProxyOutageModes(t *testing.T) {
	for _, mode := range []string{scenario.OutageRefuse, scenario.OutageBlackhole, scenario.OutageStall} {
		tg := &stub{}
		start := time.Now()
		_, purl := startProxy(t, tg, ProxyConfig{
			Start:    start,
			Triggers: []scenario.Trigger{{Kind: scenario.TriggerOutage, At: 100 * time.Millisecond, For: 300 * time.Millisecond, Mode: mode}},
		})
		c := testClient(t)
		if r := send(c, "GET", purl, time.Second); r.status != http.StatusOK {
			t.Fatalf("%s: before the outage: %d %v", mode, r.status, r.err)
		}
		time.Sleep(time.Until(start.Add(150 * time.Millisecond)))
		r := send(c, "GET", purl, time.Second)
		at := time.Since(start)
		seen := tg.seen()
		switch mode {
		case scenario.OutageRefuse:
			if r.status != http.StatusBadGateway || (!slow() && r.took > 50*time.Millisecond) || len(seen) != 1 {
				t.Errorf("refuse: %d after %v, the stub saw %d; want 502 at once, and 1", r.status, r.took, len(seen))
			}
		case scenario.OutageBlackhole:
			if r.err == nil || len(seen) != 1 {
				t.Errorf("blackhole: %d after %v, the stub saw %d; want no answer, and 1", r.status, r.took, len(seen))
			}
		case scenario.OutageStall:
			if r.status != http.StatusOK || at < 400*time.Millisecond || len(seen) != 2 || seen[1].Sub(start) < 390*time.Millisecond {
				t.Errorf("stall: %d at %v, the stub saw %d; want 200 and the request forwarded once the stall ended at 400ms", r.status, at, len(seen))
			}
		}
	}
}

// TestProxyErrorsAndLatency: injected errors replace the stub's answer
// after it did the work; a latency factor holds the answer for the
// stub's time times the factor.
func TestProxyErrorsAndLatency(t *testing.T) {
	tg := &stub{delay: 40 * time.Millisecond}
	_, purl := startProxy(t, tg, ProxyConfig{
		Triggers: []scenario.Trigger{
			{Kind: scenario.TriggerErrors, At: 0, For: 300 * time.Millisecond, ErrorRate: 1},
			{Kind: scenario.TriggerLatency, At: 300 * time.Millisecond, For: time.Second, Factor: 3},
		},
	})
	c := testClient(t)
	r := send(c, "GET", purl, time.Second)
	if r.status != http.StatusServiceUnavailable || !strings.Contains(r.body, "injected") || tg.served.Load() != 1 {
		t.Errorf("during the error blip: %d %q, the stub served %d; want an injected 503 after the stub's work", r.status, r.body, tg.served.Load())
	}
	time.Sleep(300 * time.Millisecond)
	r = send(c, "GET", purl, time.Second)
	if r.status != http.StatusOK || r.took < 115*time.Millisecond || (!slow() && r.took > 250*time.Millisecond) {
		t.Errorf("latency factor 3 on a 40 ms stub: %d after %v, want 200 after about 120ms", r.status, r.took)
	}
}

// TestProxyForwardsForNobody: a request whose client left while it waited
// in the proxy's queue is still forwarded when its turn comes (the stub
// does the work for nobody), unless drop_expired.
func TestProxyForwardsForNobody(t *testing.T) {
	for _, drop := range []bool{false, true} {
		tg := &stub{}
		o := queueOrigin(1, 100)
		o.DropExpired = drop
		start := time.Now()
		p, purl := startProxy(t, tg, ProxyConfig{
			Origin:   o,
			Start:    start,
			Triggers: []scenario.Trigger{{Kind: scenario.TriggerCapacity, At: 0, For: time.Second, Capacity: 5}}, // one per 200 ms
		})
		c := testClient(t)
		if r := send(c, "GET", purl, time.Second); r.status != http.StatusOK {
			t.Fatalf("first: %d %v", r.status, r.err)
		}
		if r := send(c, "GET", purl, 50*time.Millisecond); r.err == nil {
			t.Fatalf("second: answered %d, want it queued past its client's timeout", r.status)
		}
		time.Sleep(time.Until(start.Add(300 * time.Millisecond)))
		got, seen := p.Counts(), len(tg.seen())
		if !drop && (seen != 2 || got.Wasted != 1) {
			t.Errorf("without drop_expired: the stub saw %d, wasted %d; want 2 and 1", seen, got.Wasted)
		}
		if drop && (seen != 1 || got.Dropped != 1 || got.Wasted != 0) {
			t.Errorf("with drop_expired: the stub saw %d, dropped %d, wasted %d; want 1, 1, 0", seen, got.Dropped, got.Wasted)
		}
	}
}

// TestProxyCutoff: past its cutoff the proxy sends nothing to the target,
// and what it was still forwarding then is cancelled: a run against a real
// service ends with its scenario at the last hop too.
func TestProxyCutoff(t *testing.T) {
	tg := &stub{delay: time.Minute}
	start := time.Now()
	// A cut a second away: the first request is sent long before it, however
	// loaded the machine.
	_, purl := startProxy(t, tg, ProxyConfig{Start: start, Cutoff: time.Second})
	c := testClient(t)
	// Sent before the cut, held by the target past it: cancelled at the cut.
	if r := send(c, "GET", purl, 5*time.Second); r.status != http.StatusBadGateway {
		t.Errorf("a forward out at the cut: %d %v, want 502 (its forward cancelled)", r.status, r.err)
	}
	// The target hears of it when the proxy closes the connection.
	for wait := time.Now().Add(time.Second); tg.canceled.Load() == 0 && time.Now().Before(wait); {
		time.Sleep(5 * time.Millisecond)
	}
	if n := tg.canceled.Load(); n != 1 {
		t.Errorf("the target saw %d requests cancelled, want 1", n)
	}
	time.Sleep(time.Until(start.Add(time.Second + 50*time.Millisecond)))
	r := send(c, "GET", purl, 5*time.Second)
	if r.status != http.StatusServiceUnavailable || !strings.Contains(r.body, "the scenario is over") {
		t.Errorf("after the cut: %d %q, want 503 from the proxy", r.status, r.body)
	}
	if n := len(tg.seen()); n != 1 {
		t.Errorf("the target saw %d requests, want only the one before the cut", n)
	}
}

// TestProxyReadsPropagatedDeadline: the proxy reads Resil-Timeout as
// resil writes it (grpc-timeout's syntax: "50m" is 50 ms), so that with
// drop_expired a request that cannot be forwarded before its client's
// deadline is dropped, not forwarded late, even while its client still
// waits.
func TestProxyReadsPropagatedDeadline(t *testing.T) {
	tg := &stub{}
	o := queueOrigin(1, 100)
	o.DropExpired = true
	start := time.Now()
	p, purl := startProxy(t, tg, ProxyConfig{
		Origin:   o,
		Start:    start,
		Triggers: []scenario.Trigger{{Kind: scenario.TriggerCapacity, At: 0, For: time.Second, Capacity: 5}}, // one per 200 ms
	})
	c := testClient(t)
	if r := send(c, "GET", purl, time.Second); r.status != http.StatusOK {
		t.Fatalf("first: %d %v", r.status, r.err)
	}
	// Its turn comes at 200 ms, past its 50 ms; its client waits 400 ms.
	if r := send(c, "GET", purl, 400*time.Millisecond, TimeoutHeader, "50m"); r.err == nil {
		t.Errorf("second: answered %d after %v, want it dropped at its deadline, unanswered", r.status, r.took)
	}
	if got, seen := p.Counts(), len(tg.seen()); seen != 1 || got.Dropped != 1 || got.Wasted != 0 {
		t.Errorf("the stub saw %d, dropped %d, wasted %d; want 1, 1, 0", seen, got.Dropped, got.Wasted)
	}
}
