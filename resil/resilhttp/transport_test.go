package resilhttp

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/retrystorm/retrystorm/resil"
	"github.com/retrystorm/retrystorm/resil/budget"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// skipClock never waits: a timer fires at once, and the clock jumps by its
// duration. It records every wait, so the tests can check them.
type skipClock struct {
	mu    sync.Mutex
	now   time.Time
	waits []time.Duration
}

func (c *skipClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *skipClock) NewTimer(d time.Duration) resil.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	c.waits = append(c.waits, d)
	ch := make(chan time.Time, 1)
	ch <- c.now
	return firedTimer(ch)
}

func (c *skipClock) AfterFunc(d time.Duration, f func()) resil.Timer { return firedTimer(nil) }

func (c *skipClock) Waits() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.waits...)
}

type firedTimer chan time.Time

func (t firedTimer) C() <-chan time.Time { return t }
func (t firedTimer) Stop() bool          { return false }

var epoch = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

func newGuard(t *testing.T, clk resil.Clock, p resil.Policy) *resil.Guard {
	t.Helper()
	g, err := resil.NewGuard(resil.GuardSettings{Idempotency: resil.Idempotent, Policy: p, Clock: clk, NewKey: keySeq()})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func keySeq() func() string {
	var n atomic.Int32
	return func() string { return "key-" + string(rune('0'+n.Add(1))) }
}

// origin is a test server that answers from a script, and records every
// attempt's method, Idempotency-Key and body.
type origin struct {
	mu     sync.Mutex
	script []func(w http.ResponseWriter)
	seen   []string
}

func (o *origin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	o.mu.Lock()
	n := len(o.seen)
	o.seen = append(o.seen, r.Method+" key="+r.Header.Get("Idempotency-Key")+" body="+string(body))
	var f func(http.ResponseWriter)
	if n < len(o.script) {
		f = o.script[n]
	}
	o.mu.Unlock()
	if f == nil {
		io.WriteString(w, "ok")
		return
	}
	f(w)
}

func (o *origin) Seen() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.seen...)
}

func status(code int, header ...string) func(http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.WriteHeader(code)
		io.WriteString(w, http.StatusText(code))
	}
}

// closeTracker wraps a RoundTripper and counts response bodies closed.
type closeTracker struct {
	base           http.RoundTripper
	opened, closed atomic.Int32
}

func (c *closeTracker) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.base.RoundTrip(r)
	if resp != nil {
		c.opened.Add(1)
		resp.Body = &trackedBody{resp.Body, &c.closed}
	}
	return resp, err
}

type trackedBody struct {
	io.ReadCloser
	n *atomic.Int32
}

func (b *trackedBody) Close() error { b.n.Add(1); return b.ReadCloser.Close() }

func TestTransportAgainstServer(t *testing.T) {
	o := &origin{script: []func(http.ResponseWriter){
		status(503),
		status(429, "Retry-After", "2"),
		status(503, "Retry-After", epoch.Add(3*time.Second).Format(http.TimeFormat)),
		status(502),
	}}
	srv := httptest.NewServer(o)
	defer srv.Close()
	defer srv.Client().CloseIdleConnections()

	clk := &skipClock{now: epoch}
	tb, _ := budget.NewTokenBucket(budget.TokenBucketSettings{Ratio: 0.1, Funding: budget.FundedByRequest, MinTokens: 10})
	g := newGuard(t, clk, resil.Policy{MaxRetries: 5, Budget: tb, MaxPushback: time.Minute,
		Backoff: resil.Backoff{Schedule: resil.Fixed, Base: 100 * time.Millisecond}})
	tr := &closeTracker{base: srv.Client().Transport}
	c := &http.Client{Transport: &Transport{Guard: g, Base: tr, Keys: true}}

	resp, err := c.Post(srv.URL, "text/plain", strings.NewReader("pay 10"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "ok" {
		t.Fatalf("%d %q", resp.StatusCode, body)
	}
	// Five attempts, one key for all, the body replayed each time.
	seen := o.Seen()
	if len(seen) != 5 {
		t.Fatalf("attempts: %q", seen)
	}
	for _, s := range seen {
		if s != "POST key=key-1 body=pay 10" {
			t.Fatalf("attempts: %q", seen)
		}
	}
	// Backoff, Retry-After in seconds, as a date (3s after the clock's
	// now, which had moved 2.1s by then: 0.9s), backoff again.
	want := []time.Duration{100 * time.Millisecond, 2 * time.Second, 900 * time.Millisecond, 100 * time.Millisecond}
	if got := clk.Waits(); len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] || got[3] != want[3] {
		t.Fatalf("waits = %v, want %v", got, want)
	}
	if o, c := tr.opened.Load(), tr.closed.Load(); o != 5 || c != 5 {
		t.Fatalf("%d responses, %d closed: discarded bodies must be closed", o, c)
	}
	if got := tb.Tokens(epoch); got != 6.1 {
		t.Fatalf("tokens = %v: retries after Retry-After are paid too", got)
	}
}

func TestTransportNoKeyNoRetry(t *testing.T) {
	o := &origin{script: []func(http.ResponseWriter){status(503), status(503)}}
	srv := httptest.NewServer(o)
	defer srv.Close()
	defer srv.Client().CloseIdleConnections()
	g := newGuard(t, &skipClock{now: epoch}, resil.Policy{MaxRetries: 3})
	c := &http.Client{Transport: &Transport{Guard: g, Base: srv.Client().Transport}}

	// POST without Keys: sent once, the 503 is the answer.
	resp, err := c.Post(srv.URL, "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 || len(o.Seen()) != 1 || o.Seen()[0] != "POST key= body=x" {
		t.Fatalf("%d %q", resp.StatusCode, o.Seen())
	}
	// A POST that carries its own key is retried with it.
	req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("y"))
	req.Header.Set("Idempotency-Key", "mine")
	resp, err = c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if seen := o.Seen(); resp.StatusCode != 200 || len(seen) != 3 || seen[2] != "POST key=mine body=y" {
		t.Fatalf("%d %q", resp.StatusCode, seen)
	}
}

func TestTransportBodyNotReplayable(t *testing.T) {
	o := &origin{script: []func(http.ResponseWriter){status(503)}}
	srv := httptest.NewServer(o)
	defer srv.Close()
	defer srv.Client().CloseIdleConnections()
	g := newGuard(t, &skipClock{now: epoch}, resil.Policy{MaxRetries: 3})
	c := &http.Client{Transport: &Transport{Guard: g, Base: srv.Client().Transport}}
	req, _ := http.NewRequest(http.MethodPut, srv.URL, io.NopCloser(bytes.NewReader([]byte("z")))) // no GetBody
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 || len(o.Seen()) != 1 {
		t.Fatalf("a body that cannot be replayed was sent %d times", len(o.Seen()))
	}
	// The same PUT with a replayable body is retried.
	resp, err = c.Do(mustReq(t, http.MethodPut, srv.URL, "z"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if seen := o.Seen(); resp.StatusCode != 200 || len(seen) != 2 || seen[1] != "PUT key= body=z" {
		t.Fatalf("%q", seen)
	}
}

func mustReq(t *testing.T, method, url, body string) *http.Request {
	r, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestTransportGivesUpWithLastResponse(t *testing.T) {
	o := &origin{script: []func(http.ResponseWriter){status(503), status(503), status(503)}}
	srv := httptest.NewServer(o)
	defer srv.Close()
	defer srv.Client().CloseIdleConnections()
	g := newGuard(t, &skipClock{now: epoch}, resil.Policy{MaxRetries: 2})
	attempts := &attemptRecorder{base: srv.Client().Transport}
	c := &http.Client{Transport: &Transport{Guard: g, Base: attempts}}
	resp, err := c.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || string(body) != "Service Unavailable" || len(o.Seen()) != 3 {
		t.Fatalf("%d %q after %d attempts", resp.StatusCode, body, len(o.Seen()))
	}
	// Base saw each attempt, and the caller learns why the retries stopped.
	if got := attempts.String(); got != "1 first, 2 retry, 3 retry" {
		t.Fatalf("Base saw %s", got)
	}
	if se := StopOf(resp); se == nil || resil.ReasonOf(se) != resil.StopRetriesExhausted || se.Attempts != 3 {
		t.Fatalf("StopOf = %v", se)
	}
	// With FailureStatus ServerError, 500 is a failure for the breaker,
	// not retried (TestTransportServerErrorIsNoFailure: not by default).
	o2 := &origin{script: []func(http.ResponseWriter){status(500)}}
	srv2 := httptest.NewServer(o2)
	defer srv2.Close()
	defer srv2.Client().CloseIdleConnections()
	br, _ := resil.NewBreaker(resil.BreakerSettings{Threshold: 1, Cooldown: time.Hour})
	g2 := newGuard(t, &skipClock{now: epoch}, resil.Policy{MaxRetries: 2, Breaker: br})
	c2 := &http.Client{Transport: &Transport{Guard: g2, Base: srv2.Client().Transport, FailureStatus: ServerError}}
	resp, err = c2.Get(srv2.URL)
	if err != nil || resp.StatusCode != 500 || len(o2.Seen()) != 1 {
		t.Fatalf("%v %v", resp, err)
	}
	resp.Body.Close()
	if r := resil.ReasonOf(StopOf(resp)); r != resil.StopNotRetryable {
		t.Fatalf("stopped on a 500 for %v", r)
	}
	// The breaker is open now: refused, with an error and no request.
	req := mustReq(t, http.MethodPut, srv2.URL, "w")
	body2 := &closeCounter{Reader: strings.NewReader("w")}
	req.Body = body2
	_, err = c2.Do(req)
	if !errors.Is(err, resil.ErrBreakerOpen) || len(o2.Seen()) != 1 {
		t.Fatalf("err = %v", err)
	}
	if !body2.closed {
		t.Fatal("the request body of a refused call was not closed")
	}
}

// attemptRecorder is a Base that records the attempt of every request it
// sends, as AttemptOf reads it.
type attemptRecorder struct {
	base http.RoundTripper
	mu   sync.Mutex
	seen []string
}

func (a *attemptRecorder) RoundTrip(r *http.Request) (*http.Response, error) {
	at, ok := AttemptOf(r.Context())
	a.mu.Lock()
	if ok {
		a.seen = append(a.seen, strconv.Itoa(at.Number)+" "+at.Kind.String())
	} else {
		a.seen = append(a.seen, "none")
	}
	a.mu.Unlock()
	return a.base.RoundTrip(r)
}

func (a *attemptRecorder) String() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return strings.Join(a.seen, ", ")
}

// TestStopOfAnswer: an answer, and a status neither retried nor failed,
// carry no stop.
func TestStopOfAnswer(t *testing.T) {
	o := &origin{script: []func(http.ResponseWriter){status(404)}}
	srv := httptest.NewServer(o)
	defer srv.Close()
	defer srv.Client().CloseIdleConnections()
	g := newGuard(t, &skipClock{now: epoch}, resil.Policy{MaxRetries: 2})
	c := &http.Client{Transport: &Transport{Guard: g, Base: srv.Client().Transport}}
	for _, want := range []int{404, 200} {
		resp, err := c.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want || StopOf(resp) != nil {
			t.Fatalf("%d: StopOf = %v", resp.StatusCode, StopOf(resp))
		}
	}
	if StopOf(nil) != nil {
		t.Fatal("StopOf(nil) is not nil")
	}
	if _, ok := AttemptOf(context.Background()); ok {
		t.Fatal("an attempt on a context no Transport made")
	}
}

type closeCounter struct {
	io.Reader
	closed bool
}

func (c *closeCounter) Close() error { c.closed = true; return nil }

func TestTransportConnectionErrorsAndTimeouts(t *testing.T) {
	var mu sync.Mutex
	var outcomes []resil.Outcome
	record := func(e resil.Event) {
		if e.Kind == resil.EventAttempt {
			mu.Lock()
			outcomes = append(outcomes, e.Outcome)
			mu.Unlock()
		}
	}
	// Connection refused: a Failure, retried.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	g, _ := resil.NewGuard(resil.GuardSettings{Idempotency: resil.Idempotent, Clock: &skipClock{now: epoch}, OnEvent: record, Policy: resil.Policy{MaxRetries: 1}})
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	c := &http.Client{Transport: &Transport{Guard: g, Base: base}}
	_, err = c.Get("http://" + addr)
	if !errors.Is(err, resil.ErrRetriesExhausted) {
		t.Fatalf("err = %v", err)
	}
	if len(outcomes) != 2 || outcomes[0] != resil.OutcomeFailure {
		t.Fatalf("outcomes = %v", outcomes)
	}

	// A server slower than the attempt timeout: Timeout.
	outcomes = nil
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	tb, _ := budget.NewTokenBucket(budget.TokenBucketSettings{Ratio: 0.1, Funding: budget.FundedBySuccess, MinTokens: 10, TimeoutCost: 4})
	g, _ = resil.NewGuard(resil.GuardSettings{Idempotency: resil.Idempotent, AttemptTimeout: 20 * time.Millisecond, OnEvent: record,
		Policy: resil.Policy{MaxRetries: 1, Budget: tb}})
	c = &http.Client{Transport: &Transport{Guard: g, Base: base}}
	_, err = c.Get(srv.URL)
	if !errors.Is(err, resil.ErrRetriesExhausted) || !errors.Is(err, resil.ErrAttemptTimeout) {
		t.Fatalf("err = %v", err)
	}
	if len(outcomes) != 2 || outcomes[0] != resil.OutcomeTimeout || outcomes[1] != resil.OutcomeTimeout {
		t.Fatalf("outcomes = %v", outcomes)
	}
	if got := tb.Tokens(time.Now()); got != 6 {
		t.Fatalf("tokens = %v: a retry after a timeout costs TimeoutCost", got)
	}
}

// TestTransportHedge runs without a network, in a synctest bubble: a slow
// first answer is hedged, the hedge wins, the loser's body is closed and
// the winner's body stays readable after RoundTrip returns although its
// attempt had a context of its own.
func TestTransportHedge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n atomic.Int32
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if n.Add(1) == 1 {
				select {
				case <-time.After(time.Second):
				case <-r.Context().Done():
				}
				io.WriteString(w, "slow")
				return
			}
			io.WriteString(w, "fast")
		})
		seen := &attemptRecorder{base: handlerTransport{h}}
		tr := &closeTracker{base: seen}
		g, _ := resil.NewGuard(resil.GuardSettings{Idempotency: resil.Idempotent, AttemptTimeout: 5 * time.Second,
			Policy: resil.Policy{Hedge: resil.HedgeSettings{Delay: 50 * time.Millisecond}}})
		c := &http.Client{Transport: &Transport{Guard: g, Base: tr}}
		start := time.Now()
		resp, err := c.Get("http://origin.test/")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(body) != "fast" || time.Since(start) != 50*time.Millisecond {
			t.Fatalf("%q after %v", body, time.Since(start))
		}
		// The slow attempt lost: it ends in the background, and its
		// response is closed then.
		g.Wait(context.Background())
		if o, c := tr.opened.Load(), tr.closed.Load(); o != 2 || c != 2 {
			t.Fatalf("%d responses, %d closed", o, c)
		}
		if s := g.Stats(); s.Hedges != 1 {
			t.Fatalf("stats %+v", s)
		}
		if got := seen.String(); got != "1 first, 2 hedge" {
			t.Fatalf("Base saw %s", got)
		}
	})
}

// handlerTransport serves requests in memory with a handler. Like a real
// server that answers late, it returns a response even when the request was
// cancelled meanwhile.
type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, r)
	return rec.Result(), nil
}

func TestRetryAfterParsing(t *testing.T) {
	for _, c := range []struct {
		v    string
		want time.Duration
	}{
		{"", 0}, {"0", 0}, {"7", 7 * time.Second}, {" 12 ", 12 * time.Second}, {"-3", 0}, {"1.5", 0}, {"soon", 0},
		{epoch.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{epoch.Add(-time.Hour).Format(http.TimeFormat), 0},
		{"Sunday, 01-Jun-25 12:00:30 GMT", 30 * time.Second}, // RFC 850, obsolete but allowed
		// Beyond int64 is clamped as a large number is, not ignored: a
		// server that asks for a very long wait gets the longest.
		{"99999999999999999999", 100 * 365 * 24 * time.Hour},
		{strings.Repeat("9", 400), 100 * 365 * 24 * time.Hour},
		{"9999999999999", 100 * 365 * 24 * time.Hour},
		{"12abc", 0}, {"1e9", 0},
	} {
		if got := retryAfter(c.v, epoch); got != c.want {
			t.Errorf("retryAfter(%q) = %v, want %v", c.v, got, c.want)
		}
	}
}

func TestIdempotentMethods(t *testing.T) {
	for m, want := range map[string]bool{"": true, "GET": true, "HEAD": true, "OPTIONS": true, "TRACE": true,
		"PUT": true, "DELETE": true, "POST": false, "PATCH": false, "CONNECT": false} {
		if Idempotent(m) != want {
			t.Errorf("Idempotent(%q) != %v", m, want)
		}
	}
	if !DefaultRetryStatus(429) || DefaultRetryStatus(500) || !ServerError(500) || ServerError(404) {
		t.Fatal("status defaults")
	}
	if e := (&StatusError{Code: 503, Wait: time.Second}); e.Error() != "resilhttp: status 503 Service Unavailable" || e.RetryAfter() != time.Second {
		t.Fatal(e)
	}
	if _, err := (&Transport{}).RoundTrip(mustReq(t, "GET", "http://x/", "")); err != errNoGuard {
		t.Fatal(err)
	}
}

func TestTransportCallerCancel(t *testing.T) {
	g := newGuard(t, &skipClock{now: epoch}, resil.Policy{MaxRetries: 3})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://origin.test/", nil)
	_, err := (&Transport{Guard: g, Base: handlerTransport{http.NotFoundHandler()}}).RoundTrip(req)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
}

func TestTransportCertificateErrorIsPermanent(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.NotFoundHandler())
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshake failure is expected
	srv.StartTLS()
	defer srv.Close()
	g := newGuard(t, &skipClock{now: epoch}, resil.Policy{MaxRetries: 3})
	base := &http.Transport{} // does not trust the test certificate
	defer base.CloseIdleConnections()
	_, err := (&http.Client{Transport: &Transport{Guard: g, Base: base}}).Get(srv.URL)
	if !errors.Is(err, resil.ErrNotRetryable) || g.Stats().Attempts != 1 {
		t.Fatalf("err = %v after %d attempts: a certificate error is not retried", err, g.Stats().Attempts)
	}
}

// TestTransportAttemptHeader: with AttemptHeader set, every attempt tells
// the server its kind, next to its key and its time left, in a header of
// its own: the caller's request is not changed, and a field the caller
// marked nil (as ReverseProxy does) stays nil.
func TestTransportAttemptHeader(t *testing.T) {
	var mu sync.Mutex
	var got []http.Header
	n := 0
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, r.Header)
		n++
		code := http.StatusServiceUnavailable
		if n == 3 {
			code = http.StatusOK
		}
		return &http.Response{StatusCode: code, Body: http.NoBody, Request: r}, nil
	})
	g := newGuard(t, &skipClock{now: epoch}, resil.Policy{MaxRetries: 2})
	tr := &Transport{Guard: g, Base: base, Keys: true, AttemptHeader: "x-attempt"}
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://x/", strings.NewReader("body"))
	req.Header.Set("Accept", "a")
	req.Header.Add("Accept", "b")
	req.Header["X-Forwarded-For"] = nil
	caller := req.Header.Clone()
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if len(got) != 3 {
		t.Fatalf("%d attempts, want 3", len(got))
	}
	key := got[0].Get(DefaultKeyHeader)
	for i, h := range got {
		want := []string{"first", "retry", "retry"}[i]
		if h.Get("X-Attempt") != want || h.Get(DefaultKeyHeader) != key || key == "" || h.Get(TimeoutHeader) == "" {
			t.Errorf("attempt %d: kind %q, key %q (first %q), timeout %q", i+1, h.Get("X-Attempt"), h.Get(DefaultKeyHeader), key, h.Get(TimeoutHeader))
		}
		if v, ok := h["X-Forwarded-For"]; !ok || v != nil {
			t.Errorf("attempt %d: X-Forwarded-For = %q, %v; want nil, kept", i+1, v, ok)
		}
		if a := h.Values("Accept"); len(a) != 2 || a[0] != "a" || a[1] != "b" {
			t.Errorf("attempt %d: Accept = %q", i+1, a)
		}
		if len(h) != len(caller)+3 {
			t.Errorf("attempt %d: header %v, want the caller's and 3 more", i+1, h)
		}
	}
	// Each attempt's header is its own: a change to one shows in no other
	// field, no other attempt's header, nor the caller's.
	before := got[0].Clone()
	got[0].Add("Accept", "c")
	got[0].Set("X-Attempt", "changed")
	for k, v := range before {
		if k != "Accept" && k != "X-Attempt" && !slices.Equal(got[0][k], v) {
			t.Errorf("adding to Accept changed %s: %q, was %q", k, got[0][k], v)
		}
	}
	if got[1].Get("X-Attempt") != "retry" || len(got[1].Values("Accept")) != 2 {
		t.Errorf("attempts share their header: %v", got[1])
	}
	if len(req.Header) != len(caller) || req.Header.Get("Accept") != "a" || len(req.Header.Values("Accept")) != 2 {
		t.Errorf("the caller's header changed: %v", req.Header)
	}
}

// TestTransportIdempotencyRule: one rule for a Guard's calls and a
// Transport's requests. A request may run twice when it carries a key, or
// when both its method (RFC 9110) and its Guard's Idempotency say so.
// Before, the Transport ignored the Guard's Idempotency, which NewGuard
// requires: a GET through a Guard set NotIdempotent was retried.
func TestTransportIdempotencyRule(t *testing.T) {
	for _, tc := range []struct {
		guard  resil.Idempotency
		method string
		key    string // the request's own Idempotency-Key
		keys   bool   // Transport.Keys
		want   int    // attempts against a server that always answers 503
	}{
		{resil.Idempotent, http.MethodGet, "", false, 2},
		{resil.Idempotent, http.MethodPut, "", false, 2},
		{resil.Idempotent, http.MethodPost, "", false, 1},
		{resil.Idempotent, http.MethodPost, "", true, 2},
		{resil.Idempotent, http.MethodPost, "k", false, 2},
		{resil.NotIdempotent, http.MethodGet, "", false, 1},
		{resil.NotIdempotent, http.MethodDelete, "", false, 1},
		{resil.NotIdempotent, http.MethodGet, "k", false, 2},
		{resil.NotIdempotent, http.MethodPost, "", true, 2},
		{resil.NotIdempotent, http.MethodPost, "", false, 1},
	} {
		name := tc.guard.String() + " " + tc.method
		if tc.key != "" {
			name += " with a key"
		}
		if tc.keys {
			name += " with Keys"
		}
		t.Run(name, func(t *testing.T) {
			var n atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n.Add(1)
				w.WriteHeader(http.StatusServiceUnavailable)
			}))
			defer srv.Close()
			defer srv.Client().CloseIdleConnections()
			g, err := resil.NewGuard(resil.GuardSettings{Idempotency: tc.guard, Clock: &skipClock{now: epoch},
				Policy: resil.Policy{MaxRetries: 1}})
			if err != nil {
				t.Fatal(err)
			}
			c := &http.Client{Transport: &Transport{Guard: g, Base: srv.Client().Transport, Keys: tc.keys}}
			req := mustReq(t, tc.method, srv.URL, "")
			if tc.key != "" {
				req.Header.Set(DefaultKeyHeader, tc.key)
			}
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if got := int(n.Load()); got != tc.want {
				t.Errorf("%d attempts, want %d", got, tc.want)
			}
		})
	}
}

// TestTransportHonoursRetryAfter: a Retry-After of one second is waited
// for as asked under the default Policy.MaxPushback, whatever the
// backoff's cap (issue 37: it was clamped to the cap, 100 ms, and the
// client came back ten times too soon); one past resil.DefaultMaxPushback
// is clamped to it.
func TestTransportHonoursRetryAfter(t *testing.T) {
	o := &origin{script: []func(http.ResponseWriter){
		status(503, "Retry-After", "1"),
		status(429, "Retry-After", "86400"),
	}}
	srv := httptest.NewServer(o)
	defer srv.Close()
	defer srv.Client().CloseIdleConnections()
	clk := &skipClock{now: epoch}
	g := newGuard(t, clk, resil.Policy{MaxRetries: 2,
		Backoff: resil.Backoff{Schedule: resil.Exponential, Base: 25 * time.Millisecond, Cap: 100 * time.Millisecond}})
	c := &http.Client{Transport: &Transport{Guard: g, Base: srv.Client().Transport}}
	resp, err := c.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	want := []time.Duration{time.Second, resil.DefaultMaxPushback}
	if got := clk.Waits(); len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("waits = %v, want %v: Retry-After as asked, up to a minute", got, want)
	}
}
