package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/retrystorm/retrystorm/resil"
	"github.com/retrystorm/retrystorm/resil/resilhttp"
	"github.com/retrystorm/retrystorm/resil/resilprom"
	"github.com/retrystorm/retrystorm/scenario"
	"github.com/retrystorm/retrystorm/sim"
)

// Headers the gateway answers with, so that its caller (the load
// generator) knows how an intent went without asking.
const (
	// AttemptsHeader is the attempts the gateway sent for the intent.
	AttemptsHeader = "Retrystorm-Attempts"
	// FailedHeader is how many of them failed; absent when none did.
	FailedHeader = "Retrystorm-Failed-Attempts"
	// StopHeader says why the gateway stopped without success, in
	// resil.StopReason's words: retries_exhausted, budget, breaker,
	// not_idempotent, not_retryable, pushback, deadline, canceled or
	// throttled.
	StopHeader = "Retrystorm-Stop"
	// FallbackHeader marks the fallback answer given when the breaker is
	// open.
	FallbackHeader = "Retrystorm-Fallback"
)

// retryKeyHeader carries the key that lets a naive gateway retry a POST
// blindly: the origin does not deduplicate by it, so the duplicates show.
const retryKeyHeader = "Retrystorm-Retry-Key"

// GatewayConfig configures a Gateway. Its durations are wall-clock ones:
// give it a scaled scenario's fleet (see Scale). The zero value is not
// usable: Origin is required.
type GatewayConfig struct {
	// Fleet is the policy every client runs: retries, backoff, budget,
	// breaker, per-attempt timeout.
	Fleet scenario.Fleet
	// Clients is how many clients the gateway stands for, each with its
	// own Guard (its own budget and breaker), as the simulator's fleet
	// has. The caller picks one with ClientHeader. Zero means 1.
	Clients int
	// Origin is where the attempts go.
	Origin *url.URL
	// Base sends each attempt. Nil means an HTTP/2 transport without TLS
	// (h2c): an attempt given up is a cancelled stream, not a closed
	// connection, as in a service mesh.
	Base http.RoundTripper
	// Seed seeds the clients' jitter.
	Seed uint64
	// Tally, if set, receives the attempts by kind and their fate per
	// tick.
	Tally *Tally
	// Truth, if set, says whether the origin would have answered a
	// request sent now within timeout: the ground truth for the calls a
	// breaker refused (answers thrown away).
	Truth func(timeout time.Duration) bool
	// Endpoints, if set, are the origin's replicas (base URLs): every
	// attempt goes to one through resilhttp.Replicas, picked by the
	// fleet's balancer and skipping what its outlier_detection ejects
	// (one picker and one detector per client), and the gateway
	// counts each replica's ground truth (see ReplicaResults). Origin is
	// then the URL whose path and query the attempts keep.
	Endpoints []*url.URL
	// Start is time 0 of the run: the outlier detector's first interval
	// starts then. Zero means when NewGateway is called.
	Start time.Time
}

// Gateway is a reverse proxy whose outbound transport is resilhttp: every
// request goes to the origin under the Guard of the client it comes from,
// naive or guarded as the fleet says, with a fallback answer when that
// client's breaker is open. It propagates the caller's deadline, and each
// attempt's, to the origin (TimeoutHeader), tells the origin why each
// attempt was sent (AttemptHeader), and serves Prometheus metrics on a
// registry of its own at /metrics.
//
// Make one with NewGateway; Close it when done. It is safe for concurrent
// use.
type Gateway struct {
	cfg     GatewayConfig
	clients []*resilhttp.Transport
	guards  guardSet
	proxy   *httputil.ReverseProxy
	base    http.RoundTripper
	own     *http.Transport // the default Base, closed by Close
	reg     *prometheus.Registry
	m       gatewayMetrics
	next    atomic.Uint64 // round robin when the caller names no client
	reps    *replicaSet   // nil without Endpoints
}

// NewGateway returns a gateway, or an error naming an invalid setting.
func NewGateway(cfg GatewayConfig) (*Gateway, error) {
	if cfg.Origin == nil {
		return nil, errors.New("lab: GatewayConfig.Origin is required")
	}
	n := max(cfg.Clients, 1)
	g := &Gateway{cfg: cfg, reg: prometheus.NewRegistry(), base: cfg.Base}
	if g.base == nil {
		g.own = h2cTransport()
		g.base = g.own
	}
	attempts := &attemptTransport{base: g.base, tally: cfg.Tally}
	if len(cfg.Endpoints) > 0 {
		reps, err := newReplicaSet(cfg, g.base)
		if err != nil {
			return nil, err
		}
		g.reps, attempts.base, attempts.reps = reps, reps, reps
	}
	for k := range n {
		guard, err := clientGuard(cfg, k, g.reg)
		if err != nil {
			return nil, err
		}
		// The Transport tells the origin each attempt's kind in the copy
		// of the header it makes anyway for the attempt's deadline.
		t := &resilhttp.Transport{Guard: guard, Base: attempts, AttemptHeader: AttemptHeader, RetryStatus: retryStatus(cfg.Fleet.Retry)}
		if !cfg.Fleet.Retry.IdempotentOnly {
			// The simulator's naive client retries every intent. resilhttp
			// retries a POST only with a key: give each POST one in a header
			// the origin does not deduplicate by, so it is retried blindly
			// and its duplicate executions show.
			t.Keys, t.KeyHeader = true, retryKeyHeader
		}
		g.clients = append(g.clients, t)
		g.guards = append(g.guards, guard)
	}
	var err error
	if g.m, err = registerGateway(g.reg, g.guards); err != nil {
		return nil, err
	}
	g.proxy = &httputil.ReverseProxy{
		Rewrite:        func(pr *httputil.ProxyRequest) { pr.SetURL(cfg.Origin) },
		Transport:      clientTransport{g},
		ModifyResponse: g.modifyResponse,
		ErrorHandler:   g.errorHandler,
		ErrorLog:       log.New(io.Discard, "", 0),
		// Without a pool the proxy allocates a 32 KiB buffer to copy each
		// answer's body: most of what a request allocates, and so of the
		// garbage collector's work.
		BufferPool: copyBuffers,
	}
	return g, nil
}

// clientGuard returns the Guard of a gateway's client k, as the
// simulator's fleet makes its clients' (Fleet.NewPolicyRand, the
// throttle's draws seeded per client), and registers its metrics on reg;
// the throttle's refusals are counted as the simulator counts them.
func clientGuard(cfg GatewayConfig, k int, reg prometheus.Registerer) (*resil.Guard, error) {
	p, err := cfg.Fleet.NewPolicyRand(rand.NewPCG(cfg.Seed, 0x7417<<48|uint64(k)))
	if err != nil {
		return nil, err
	}
	guard, err := resil.NewGuard(resil.GuardSettings{
		// resilhttp narrows it by the method (a POST is retried only with
		// a key); the gRPC gateway says for every call.
		Idempotency:    resil.Idempotent,
		Policy:         p,
		AttemptTimeout: cfg.Fleet.Timeout,
		Rand:           rand.NewPCG(cfg.Seed, 0x1000+uint64(k)),
	})
	if err != nil {
		return nil, err
	}
	if p.Throttle != nil {
		// The throttle refuses first attempts and retries alike; each
		// refusal is counted in its tick, as the simulator does (hedges
		// it refuses are no loss, and not counted).
		guard.Observe(func(e resil.Event) {
			if e.Kind == resil.EventThrottled && e.Attempt.Kind != resil.KindHedge {
				cfg.refused(cThrottled, e.Context, e.At)
			}
		})
	}
	name := fmt.Sprintf("%s-%02d", cfg.Fleet.Name, k)
	if _, err := resilprom.Register(reg, name, guard); err != nil {
		return nil, fmt.Errorf("lab: gateway metrics: %w", err)
	}
	return guard, nil
}

// h2cTransport is an HTTP/2 client without TLS, for loopback.
func h2cTransport() *http.Transport {
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	return &http.Transport{
		Protocols:          &p,
		DisableCompression: true,
		HTTP2:              &http.HTTP2Config{MaxEncoderHeaderTableSize: noHeaderTable},
	}
}

// noHeaderTable turns off HPACK's dynamic table: every request carries an
// intent number and a deadline of its own, and indexing values that never
// repeat costs an eviction per header (7% of the lab's CPU, measured) to
// save bytes on loopback, where bytes are free.
const noHeaderTable = 1

// copyBuffers lends the gateways' reverse proxies the buffers they copy
// bodies with.
var copyBuffers = &bufferPool{}

// bufferPool is an httputil.BufferPool of 32 KiB buffers, the size the
// proxy would allocate itself.
type bufferPool struct{ p sync.Pool }

func (b *bufferPool) Get() []byte {
	if buf, ok := b.p.Get().(*[]byte); ok {
		return *buf
	}
	return make([]byte, 32<<10)
}

func (b *bufferPool) Put(buf []byte) { b.p.Put(&buf) }

// Handler serves the gateway: /metrics, /healthz, and every other path
// proxied. Two exact paths need no ServeMux: matching its patterns
// allocated on every proxied request.
func (g *Gateway) Handler() http.Handler {
	metrics := promhttp.HandlerFor(g.reg, promhttp.HandlerOpts{})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/metrics":
			metrics.ServeHTTP(w, r)
		case healthPath:
			serveHealth(w, r)
		default:
			g.ServeHTTP(w, r)
		}
	})
}

// warm opens the connection from the gateway to the origin, or to each
// of its replicas.
func (g *Gateway) warm(ctx context.Context) error {
	if g.reps == nil {
		return g.warmOne(ctx, g.cfg.Origin)
	}
	for _, ep := range g.reps.eps {
		if err := g.warmOne(ctx, ep); err != nil {
			return err
		}
	}
	return nil
}

// warmOne opens the connection from the gateway to the server at base.
func (g *Gateway) warmOne(ctx context.Context, base *url.URL) error {
	u := *base
	u.Path = healthPath
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	resp, err := g.base.RoundTrip(req)
	if err != nil {
		return fmt.Errorf("lab: the gateway cannot reach the origin: %w", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.Body.Close()
}

// Registry returns the registry the gateway's metrics are on.
func (g *Gateway) Registry() *prometheus.Registry { return g.reg }

// Guards returns the clients' Guards, in client order.
func (g *Gateway) Guards() []*resil.Guard { return g.guards }

// Close closes the idle connections of the transport the gateway made.
func (g *Gateway) Close() {
	g.guards.settle()
	if g.own != nil {
		g.own.CloseIdleConnections()
	}
}

// trace is one intent's progress through the gateway.
type trace struct {
	client int
	sent   atomic.Int32 // attempts sent
	failed atomic.Int32
}

type traceKey struct{}

// traceContext is a request's context carrying its trace, in the
// allocation of the statusRecorder that holds it, where context.WithValue
// would take one more.
type traceContext struct {
	context.Context
	trace
}

func (c *traceContext) Value(key any) any {
	if key == (traceKey{}) {
		return &c.trace
	}
	return c.Context.Value(key)
}

func traceOf(ctx context.Context) *trace {
	t, _ := ctx.Value(traceKey{}).(*trace)
	return t
}

// ServeHTTP proxies one intent to the origin under its client's Guard.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	g.m.inflight.Inc()
	defer g.m.inflight.Dec()
	n := uint64(len(g.clients))
	k := g.next.Add(1) % n
	if h := r.Header[ClientHeader]; len(h) > 0 && h[0] != "" { // ParseUint("") allocates its error
		if v, err := strconv.ParseUint(h[0], 10, 64); err == nil {
			k = v % n
		}
	}
	rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
	rec.tr = traceContext{Context: r.Context(), trace: trace{client: int(k)}}
	var ctx context.Context = &rec.tr
	// The caller's deadline, so that the Guard never waits past it and the
	// origin hears it.
	if d, ok := resilhttp.TimeoutFrom(r.Header); ok && d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	g.proxy.ServeHTTP(rec, r.WithContext(ctx))
	g.m.byCode(rec.code).Inc()
	g.m.latency.Observe(time.Since(start).Seconds())
}

// statusRecorder remembers the status written, for the metrics, and
// tells the caller how the intent went (AttemptsHeader, and FailedHeader
// when an attempt failed) in the header it writes: every answer, the
// origin's, the fallback and the gateway's errors, is written through it.
// It holds the intent's context and trace, so that one allocation serves
// all three.
type statusRecorder struct {
	http.ResponseWriter
	code  int
	wrote bool
	tr    traceContext
}

func (s *statusRecorder) WriteHeader(code int) {
	s.code = code
	if !s.wrote && code >= 200 { // a 1xx header is not the answer's
		s.wrote = true
		h := s.Header()
		h[AttemptsHeader] = countValue(s.tr.sent.Load())
		if f := s.tr.failed.Load(); f > 0 {
			h[FailedHeader] = countValue(f)
		}
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(p []byte) (int, error) {
	if !s.wrote {
		s.WriteHeader(http.StatusOK)
	}
	return s.ResponseWriter.Write(p)
}

// countValues are the header values of small counts, made once and shared
// by every answer (nothing changes a header's values in place; an Add
// reallocates a full slice): setting one allocates nothing.
var countValues = func() (v [16][]string) {
	for i := range v {
		v[i] = []string{strconv.Itoa(i)}
	}
	return v
}()

// countValue is the header value of count n.
func countValue(n int32) []string {
	if n >= 0 && int(n) < len(countValues) {
		return countValues[n]
	}
	return []string{strconv.Itoa(int(n))}
}

func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// clientTransport sends a request through the resilhttp transport of the
// client its trace names.
type clientTransport struct{ g *Gateway }

func (c clientTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	k := 0
	if tr := traceOf(r.Context()); tr != nil {
		k = tr.client
	}
	return c.g.clients[k].RoundTrip(r)
}

// modifyResponse tells the caller, on a failed answer, why the Guard
// stopped, as resilhttp reports it (the attempts are told by the
// statusRecorder).
func (g *Gateway) modifyResponse(resp *http.Response) error {
	if resp.StatusCode >= 300 {
		resp.Header.Set(StopHeader, resil.ReasonOf(resilhttp.StopOf(resp)).String())
	}
	return nil
}

// errorHandler answers when no response came: the fallback when the breaker
// refused, a gateway timeout or a bad gateway otherwise.
func (g *Gateway) errorHandler(w http.ResponseWriter, r *http.Request, err error) {
	h := w.Header()
	why := resil.ReasonOf(err)
	h.Set(StopHeader, why.String())
	if why == resil.StopBreaker {
		g.cfg.refused(cRefused, r.Context(), time.Now())
		g.m.fallbacks.Inc()
		h.Set(FallbackHeader, "breaker-open")
		h.Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, "fallback: the circuit breaker is open\n")
		return
	}
	code := http.StatusBadGateway
	switch {
	case why == resil.StopThrottled:
		code = http.StatusServiceUnavailable // refused locally: counted by the Guard's observer
	case errors.Is(err, context.DeadlineExceeded):
		code = http.StatusGatewayTimeout
	}
	http.Error(w, "gateway: "+err.Error(), code)
}

// refused counts an attempt refused locally (c: by a breaker or by the
// throttle) at now, and whether the origin would have answered it in
// time: the ground truth of answers thrown away.
func (cfg *GatewayConfig) refused(c count, ctx context.Context, now time.Time) {
	if ctx == nil {
		ctx = context.Background()
	}
	cfg.Tally.addNow(c, now)
	if cfg.Truth != nil && cfg.Tally.tickOf(now) >= 0 && cfg.Truth(cfg.attemptTime(ctx, now)) {
		cfg.Tally.inc(tThrown)
	}
}

// attemptTime is how long an attempt sent now could wait: the per-attempt
// timeout, or less before the caller's deadline.
func (cfg *GatewayConfig) attemptTime(ctx context.Context, now time.Time) time.Duration {
	d := cfg.Fleet.Timeout
	if dl, ok := ctx.Deadline(); ok {
		d = min(d, dl.Sub(now))
	}
	return d
}

// attemptTransport is the gateway's last hop: it sees every attempt the
// Guards send, with its kind (resilhttp.AttemptOf), and counts the attempt
// and its fate for the tick it was sent in. The resilhttp.Transport above
// it must set AttemptHeader: the origin hears why each attempt was sent
// from there.
type attemptTransport struct {
	base  http.RoundTripper
	tally *Tally
	reps  *replicaSet // nil without replicas
}

func (t *attemptTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	ctx := r.Context()
	tr := traceOf(ctx)
	if tr == nil {
		tr = &trace{}
	}
	k := -1
	if t.tally != nil { // the clock is read only for a tally's tick
		k = t.tally.tickOf(time.Now())
	}
	a, _ := resilhttp.AttemptOf(ctx)
	tr.sent.Add(1)
	t.tally.add(kindCounts[a.Kind], k)
	if k >= 0 {
		// The attempt's own header copy (resilhttp.Transport made it).
		r.Header.Set(TickHeader, strconv.Itoa(k))
	}
	var to *sentTo
	if t.reps != nil {
		// The replica the pick chooses is written here (endpointTransport).
		to = &sentTo{tick: k, replica: -1}
		r = r.WithContext(context.WithValue(ctx, sentToKey{}, to))
	}

	// The resilhttp.Transport above has set AttemptHeader to the attempt's
	// kind, and TimeoutHeader to the time it may take.
	resp, err := t.base.RoundTrip(r)
	end := endFailure
	switch {
	case err == nil && resp.StatusCode < 300:
		t.tally.add(cGoodput, k)
		end = endSuccess
	case err != nil && lostRace(ctx):
		// A hedge or a first attempt that lost the race: cancelled, not
		// failed.
		end = endCancelled
	default:
		tr.failed.Add(1)
		t.tally.add(cFailed, k)
		if err != nil && errors.Is(err, context.DeadlineExceeded) && k >= 0 {
			t.tally.inc(tTimeouts)
		}
	}
	if to != nil {
		t.reps.ended(to, end)
	}
	return resp, err
}

// kindCounts are the tally's counts of attempts by kind.
var kindCounts = [...]count{resil.KindFirst: cFirst, resil.KindRetry: cRetries, resil.KindHedge: cHedges}

// lostRace reports whether an attempt's context was cancelled for another
// reason than a timeout: the Guard cancelled it because a hedge answered.
func lostRace(ctx context.Context) bool {
	return errors.Is(ctx.Err(), context.Canceled) && !errors.Is(context.Cause(ctx), resil.ErrAttemptTimeout)
}

// ReplicaResults returns the ground truth per replica so far, in the
// simulator's terms with a tick of the scenario lasting tick (the time
// ejected is counted in ticks), and the attempts that found no replica;
// nil without Endpoints.
func (g *Gateway) ReplicaResults(tick time.Duration) ([]sim.ReplicaResult, int64) {
	if g.reps == nil {
		return nil, 0
	}
	return g.reps.results(tick)
}

// OpenShare returns the share of clients whose breaker is open.
func (g *Gateway) OpenShare(now time.Time) float64 { return g.guards.openShare(now) }

// GatewayCounts are the gateway's totals over its clients.
type GatewayCounts struct {
	Intents         uint64 `json:"intents"`
	Retries         uint64 `json:"retries"`
	BudgetDenials   uint64 `json:"budget_denials"`
	BreakerRefusals uint64 `json:"breaker_refusals"`
	BreakerTrips    uint64 `json:"breaker_trips"`
}

// Counts sums the clients' Guard stats.
func (g *Gateway) Counts() GatewayCounts { return g.guards.counts() }

// guardSet is a gateway's Guards, one per client, in client order.
type guardSet []*resil.Guard

// openShare returns the share of the Guards whose breaker is open.
func (s guardSet) openShare(now time.Time) float64 {
	open := 0
	for _, guard := range s {
		if b := guard.Policy().Breaker; b != nil && b.State(now) == resil.StateOpen {
			open++
		}
	}
	return float64(open) / float64(len(s))
}

// counts sums the Guards' stats.
func (s guardSet) counts() GatewayCounts {
	var c GatewayCounts
	for _, guard := range s {
		st := guard.Stats()
		c.Intents += st.Intents
		c.Retries += st.Retries
		c.BudgetDenials += st.BudgetDenials
		c.BreakerRefusals += st.BreakerRefusals
		if b := guard.Policy().Breaker; b != nil {
			c.BreakerTrips += b.Trips()
		}
	}
	return c
}

// settle waits a moment (closeGrace) for the hedges that lost to finish in
// the background, cancelled, so that their outcomes are counted and their
// connections come back before they are closed.
func (s guardSet) settle() {
	ctx, cancel := context.WithTimeout(context.Background(), closeGrace)
	defer cancel()
	for _, gd := range s {
		if gd.Wait(ctx) != nil {
			break
		}
	}
}

type gatewayMetrics struct {
	requests  *prometheus.CounterVec
	inflight  prometheus.Gauge
	latency   prometheus.Histogram
	fallbacks prometheus.Counter
	// codes holds requests' counter for each status code seen: looking a
	// label up hashes it, on every request. A pointer, as registerGateway
	// returns the metrics by value.
	codes *sync.Map // int → prometheus.Counter
}

// byCode returns the requests counter of status code.
func (m *gatewayMetrics) byCode(code int) prometheus.Counter {
	if c, ok := m.codes.Load(code); ok {
		return c.(prometheus.Counter)
	}
	c := m.requests.WithLabelValues(strconv.Itoa(code))
	m.codes.Store(code, c)
	return c
}

// registerGateway registers a gateway's metrics over its guards on reg.
// Over HTTP the requests are labelled by status code, over gRPC by status
// code's name.
func registerGateway(reg prometheus.Registerer, guards guardSet) (gatewayMetrics, error) {
	m := gatewayMetrics{
		codes: new(sync.Map),
		requests: counterVec("retrystorm_gateway_requests_total",
			"Requests the gateway answered, by status code (a fallback answer is a 200, or over gRPC an OK, with the Retrystorm-Fallback header).", "code"),
		inflight: prometheus.NewGauge(prometheus.GaugeOpts{Name: "retrystorm_gateway_in_flight",
			Help: "Requests the gateway is working on."}),
		latency: latencyHistogram("retrystorm_gateway_request_duration_seconds",
			"Time the gateway took per request, retries and backoff included."),
		fallbacks: counter("retrystorm_gateway_fallbacks_total",
			"Fallback answers given because the client's breaker was open."),
	}
	sum := func(name, help string, get func(GatewayCounts) uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help},
			func() float64 { return float64(get(guards.counts())) })
	}
	return m, registerAll(reg, "gateway",
		m.requests, m.inflight, m.latency, m.fallbacks,
		sum("retrystorm_gateway_intents_total", "Intents the clients started, over every client.", func(c GatewayCounts) uint64 { return c.Intents }),
		sum("retrystorm_gateway_retries_total", "Retries the clients sent, over every client.", func(c GatewayCounts) uint64 { return c.Retries }),
		sum("retrystorm_gateway_budget_denials_total", "Retries the clients' budgets refused, over every client.", func(c GatewayCounts) uint64 { return c.BudgetDenials }),
		sum("retrystorm_gateway_breaker_refusals_total", "Attempts the clients' breakers refused, over every client.", func(c GatewayCounts) uint64 { return c.BreakerRefusals }),
		gaugeFunc("retrystorm_gateway_retries_per_request",
			"Retries per intent since start, over every client: the retry-storm early warning (alert on its rate form, see deploy/prometheus).",
			func() float64 {
				c := guards.counts()
				return share(int64(c.Retries), int64(c.Intents))
			}),
		gaugeFunc("retrystorm_gateway_breakers_open", "Share of the clients whose circuit breaker is open.",
			func() float64 { return guards.openShare(time.Now()) }),
	)
}
