package resilhttp

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrystorm/retrystorm/resil"
	"github.com/retrystorm/retrystorm/resil/admission"
)

func TestFormatParseTimeout(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want string
		back time.Duration // what the receiver reads
	}{
		{-time.Second, "0n", 0},
		{0, "0n", 0},
		{1, "1n", 1},
		{99_999_999, "99999999n", 99_999_999},
		{100 * time.Millisecond, "100000u", 100 * time.Millisecond},
		{1500 * time.Millisecond, "1500000u", 1500 * time.Millisecond},
		{1500*time.Millisecond + 7, "1500000u", 1500 * time.Millisecond}, // rounded down
		{2 * time.Hour, "7200000m", 2 * time.Hour},
		{100_000 * time.Second, "100000S", 100_000 * time.Second},
		{1<<63 - 1, "2562047H", 2562047 * time.Hour},
	} {
		got := FormatTimeout(c.d)
		if got != c.want {
			t.Errorf("FormatTimeout(%v) = %q, want %q", c.d, got, c.want)
		}
		if back, ok := ParseTimeout(got); !ok || back != c.back || back > max(c.d, 0) {
			t.Errorf("ParseTimeout(%q) = %v, %v", got, back, ok)
		}
	}
	for _, v := range []string{"", "5", "m", "123456789m", "12x", "-5m", "1.5S", " 5m", "5mm"} {
		if d, ok := ParseTimeout(v); ok {
			t.Errorf("ParseTimeout(%q) = %v, want invalid", v, d)
		}
	}
	if d, ok := ParseTimeout("99999999H"); !ok || d != maxDuration {
		t.Errorf("a timeout too long for a Duration: %v %v", d, ok)
	}
}

func TestTimeoutFrom(t *testing.T) {
	for _, c := range []struct {
		ours, envoy string
		want        time.Duration
		ok          bool
	}{
		{"", "", 0, false},
		{"250m", "", 250 * time.Millisecond, true},
		{"", "300", 300 * time.Millisecond, true},
		{"250m", "300", 250 * time.Millisecond, true},
		{"2S", "300", 300 * time.Millisecond, true},
		{"bad", "300", 300 * time.Millisecond, true},
		{"bad", "", 0, false},
		{"", "0", 0, false}, // Envoy's 0: no timeout
		{"", "-5", 0, false},
		{"0n", "", 0, true}, // ours: no time left
	} {
		h := http.Header{}
		if c.ours != "" {
			h.Set(TimeoutHeader, c.ours)
		}
		if c.envoy != "" {
			h.Set(EnvoyTimeoutHeader, c.envoy)
		}
		if d, ok := TimeoutFrom(h); d != c.want || ok != c.ok {
			t.Errorf("%q %q: %v %v, want %v %v", c.ours, c.envoy, d, ok, c.want, c.ok)
		}
	}
}

// FuzzParseTimeout: any header value parses without panic, and what
// FormatTimeout writes reads back as at most what was meant, within the
// unit's resolution: the finest unit that fits 8 digits, so at worst a
// thousandth of the smallest value that needs it, 10^8 of the finer unit
// (1.499999929s is 1499999u: 929ns short, 6e-7 of it; 100000999n is
// 100000u: 1e-5 of it).
func FuzzParseTimeout(f *testing.F) {
	f.Add("100m", int64(1500*time.Millisecond))
	f.Add("99999999H", int64(-1))
	f.Add("x", int64(1<<62))
	f.Add("1499999u", int64(1499999929))
	f.Add("100000u", int64(100000999))
	f.Fuzz(func(t *testing.T, v string, n int64) {
		if d, ok := ParseTimeout(v); ok && d < 0 {
			t.Fatalf("ParseTimeout(%q) = %v", v, d)
		}
		d := time.Duration(n)
		back, ok := ParseTimeout(FormatTimeout(d))
		if !ok || back > max(d, 0) || (d > 0 && float64(d-back) > float64(d)*1e-5+1) {
			t.Fatalf("%v -> %q -> %v", d, FormatTimeout(d), back)
		}
	})
}

func newShedder(t *testing.T, s admission.ShedderSettings) *admission.Shedder {
	t.Helper()
	sh, err := admission.NewShedder(s)
	if err != nil {
		t.Fatal(err)
	}
	return sh
}

// serve sends one request with the given timeout header through h.
func serve(h http.Handler, timeout string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	if timeout != "" {
		r.Header.Set(TimeoutHeader, timeout)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestShedMiddleware(t *testing.T) {
	lim, _ := admission.NewLimiter(admission.FixedLimit{Limit: 1})
	sh := newShedder(t, admission.ShedderSettings{
		Limiter:    lim,
		Deadline:   admission.DeadlineSettings{ServiceTime: 50 * time.Millisecond, Reserve: 10 * time.Millisecond},
		RetryAfter: 1500 * time.Millisecond,
	})
	var seen time.Duration
	var hadDeadline bool
	release := make(chan struct{})
	h := Shed(sh)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var dl time.Time
		dl, hadDeadline = r.Context().Deadline()
		if hadDeadline {
			seen = time.Until(dl)
		}
		if r.URL.Path == "/block" {
			<-release
		}
		w.WriteHeader(http.StatusTeapot)
	}))

	for _, c := range []struct {
		timeout string
		code    int
		reason  string
	}{
		{"0n", 503, "expired"},
		{"5m", 503, "expired"}, // inside the reserve
		{"40m", 503, "too_late"},
		{"1S", 418, ""},
		{"", 418, ""},
		{"garbage", 418, ""},
	} {
		w := serve(h, c.timeout)
		if w.Code != c.code || w.Header().Get(ShedHeader) != c.reason || w.Header().Get("Retry-After") != "" {
			t.Errorf("timeout %q: %d %q %q", c.timeout, w.Code, w.Header().Get(ShedHeader), w.Header().Get("Retry-After"))
		}
	}
	// The handler's deadline is the caller's less the reserve.
	serve(h, "1S")
	if !hadDeadline || seen > 990*time.Millisecond || seen < 500*time.Millisecond { // not tight: a busy machine may take a while to run the handler
		t.Errorf("handler deadline in %v (%v), want just under 990ms", seen, hadDeadline)
	}
	serve(h, "")
	if hadDeadline {
		t.Error("a request without a timeout got a deadline")
	}

	// Over the limit: 503 at once, with Retry-After rounded up.
	var wg sync.WaitGroup
	wg.Go(func() {
		r := httptest.NewRequest(http.MethodGet, "/block", nil)
		h.ServeHTTP(httptest.NewRecorder(), r)
	})
	for lim.InFlight() == 0 {
		time.Sleep(time.Millisecond)
	}
	w := serve(h, "")
	if w.Code != 503 || w.Header().Get(ShedHeader) != "limit" || w.Header().Get("Retry-After") != "2" {
		t.Errorf("over the limit: %d %q %q", w.Code, w.Header().Get(ShedHeader), w.Header().Get("Retry-After"))
	}
	close(release)
	wg.Wait()
	st := sh.Stats()
	if st.Admitted != 6 || st.Shed[admission.ShedExpired] != 2 || st.Shed[admission.ShedTooLate] != 1 || st.Shed[admission.ShedLimit] != 1 || st.InFlight != 0 {
		t.Errorf("stats = %+v", st)
	}
}

// TestShedMiddlewareEnds: a handler that outlives its deadline ends as a
// drop, one whose caller left is ignored, and one that panics frees its
// slot.
func TestShedMiddlewareEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim, _ := admission.NewLimiter(admission.FixedLimit{Limit: 5})
		sh := newShedder(t, admission.ShedderSettings{Limiter: lim})
		h := Shed(sh)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch r.URL.Path {
			case "/slow":
				<-r.Context().Done()
			case "/panic":
				panic(http.ErrAbortHandler)
			}
		}))
		serve(h, "100m")
		r := httptest.NewRequest(http.MethodGet, "/slow", nil)
		r.Header.Set(TimeoutHeader, "100m")
		h.ServeHTTP(httptest.NewRecorder(), r)
		ctx, cancel := context.WithCancel(context.Background())
		r = httptest.NewRequestWithContext(ctx, http.MethodGet, "/slow", nil)
		go func() {
			time.Sleep(time.Millisecond)
			cancel()
		}()
		h.ServeHTTP(httptest.NewRecorder(), r)
		func() {
			defer func() { _ = recover() }()
			h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/panic", nil))
		}()
		st := sh.Stats()
		if st.Admitted != 4 || st.Dropped != 1 || st.InFlight != 0 || lim.InFlight() != 0 {
			t.Errorf("stats = %+v, limiter in flight %d", st, lim.InFlight())
		}
	})
	// A nil Shedder refuses.
	if w := serve(Shed(nil)(http.NotFoundHandler()), ""); w.Code != 503 {
		t.Errorf("nil Shedder: %d", w.Code)
	}
}

// TestTransportSendsTimeout: every attempt carries the time its caller has
// left, and a shorter timeout the request already carried is kept.
func TestTransportSendsTimeout(t *testing.T) {
	var mu sync.Mutex
	var got []string
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		mu.Lock()
		got = append(got, r.Header.Get(TimeoutHeader))
		mu.Unlock()
		return &http.Response{StatusCode: 200, Body: http.NoBody, Request: r}, nil
	})
	g, _ := resil.NewGuard(resil.GuardSettings{})
	tr := &Transport{Guard: g, Base: base}
	send := func(ctx context.Context, preset string) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://x/", nil)
		if preset != "" {
			req.Header.Set(TimeoutHeader, preset)
		}
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if req.Header.Get(TimeoutHeader) != preset {
			t.Error("the caller's request was changed")
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	send(context.Background(), "")
	send(ctx, "")
	send(ctx, "500m")
	send(ctx, "5S")
	tr.OmitTimeout = true
	send(ctx, "")
	if len(got) != 5 || got[0] != "" || got[2] != "500m" || got[4] != "" {
		t.Fatalf("headers = %q", got)
	}
	for _, v := range got[1:4:4] {
		if v == "500m" {
			continue
		}
		d, ok := ParseTimeout(v)
		if !ok || d > 2*time.Second || d < 1900*time.Millisecond {
			t.Errorf("sent %q, want just under 2s", v)
		}
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestTransportThrottled: a request the Guard's adaptive throttle refuses
// never reaches the server, and its error says so, apart from the breaker.
func TestTransportThrottled(t *testing.T) {
	var calls int
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		calls++
		return &http.Response{StatusCode: 503, Body: http.NoBody, Request: r}, nil
	})
	th, _ := resil.NewThrottler(resil.ThrottlerSettings{Rand: zeroSource{}})
	g, _ := resil.NewGuard(resil.GuardSettings{Policy: resil.Policy{Throttle: th}})
	tr := &Transport{Guard: g, Base: base}
	req, _ := http.NewRequest(http.MethodGet, "http://x/", nil)
	resp, err := tr.RoundTrip(req) // 503: a failure, p = 1/2
	if err != nil || resp.StatusCode != 503 {
		t.Fatalf("first: %v %v", resp, err)
	}
	_, err = tr.RoundTrip(req) // refused locally: the draw of 0 is under 1/2
	if !errors.Is(err, resil.ErrThrottled) || errors.Is(err, resil.ErrBreakerOpen) || calls != 1 {
		t.Fatalf("second: %v after %d calls", err, calls)
	}
	if st := g.Stats(); st.ThrottleRefusals != 1 || st.BreakerRefusals != 0 {
		t.Errorf("stats = %+v", st)
	}
}

// zeroSource always draws 0: every refusal the probability allows happens.
type zeroSource struct{}

func (zeroSource) Uint64() uint64 { return 0 }
