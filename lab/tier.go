package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/retrystorm/retrystorm/giveup"
	"github.com/retrystorm/retrystorm/origin"
	"github.com/retrystorm/retrystorm/resil"
	"github.com/retrystorm/retrystorm/resil/resilhttp"
	"github.com/retrystorm/retrystorm/resil/resilprom"
	"github.com/retrystorm/retrystorm/scenario"
)

// TierConfig configures a Tier. Its rates and durations are wall-clock
// ones: give it a scaled scenario's tier (see Scale). The zero value is
// not usable: Next and a server model are required.
type TierConfig struct {
	// Tier is the server model and the client policy. The lab runs one
	// replica of it.
	Tier scenario.Tier
	// Next is the next tier, or the origin.
	Next *url.URL
	// Base sends each attempt to Next. Nil means an h2c transport of its
	// own, closed by Close.
	Base http.RoundTripper
	// Start is the model's time 0. Zero means when NewTier is called.
	Start time.Time
	// ClearAt is when the scenario's triggers end, from Start: a call that
	// begins then or later and sees a failure is a victim. Negative: no
	// trigger.
	ClearAt time.Duration
	// Seed seeds the client's jitter and the server's error draws.
	Seed uint64
	// In receives what the tier's server counts of the hop into it: the
	// load offered to it and its successes. Out receives what its client
	// counts of the hop out: the calls it begins, its attempts by kind and
	// their fate, its breaker's refusals, the calls it loses. Either may
	// be nil.
	In, Out *Tally
	// Truth, if set, says whether the next layer would have answered a
	// request sent now within timeout: the ground truth for the calls the
	// tier's breaker refused.
	Truth func(timeout time.Duration) bool
}

// Tier is one service of a chain: an HTTP server that runs the scenario's
// server model (package origin) on the wall clock, as the Origin does, and
// whose work for each request, once the model serves it and its own service
// time is over, is a call to the next tier through resilhttp under the
// tier's client policy. The request holds its worker (or its place in
// flight) until that call is over; the tier answers 200 when the call
// succeeds and 503 when the model rejects the request or the policy gives
// up. An answer whose caller has left is counted as wasted work.
//
// With the client's PropagateDeadline the call is the request's: it runs on
// the request's context, carrying the deadline the caller sent
// (TimeoutHeader), so it stops when the caller leaves, and its attempts
// tell the next tier the time left. Without it, the call runs on the
// tier's own, the tier finishes it for a caller that left, and the next
// tier hears no deadline.
//
// Make one with NewTier, serve Handler, call Run, and Close it when done.
// A Tier is safe for concurrent use.
type Tier struct {
	wallServer[tierCall, int] // its service is a call to the next tier (the handler hears the status): see callService
	cfg                       TierConfig
	propagate                 bool
	m                         tierMetrics
	client                    *resilhttp.Transport
	guard                     *resil.Guard
	own                       *http.Transport
	calls                     sync.WaitGroup
	running                   context.Context // the calls' context without propagation; done when Run returns
	halt                      context.CancelFunc
}

// tierCall is what the tier keeps of a request its model holds: the call
// to the next tier it makes for it.
type tierCall struct {
	broken  bool // its intent's key is in the tier's broken share
	calling bool // the call to the next tier is out
	dropped bool // the model let it go (drop_expired) while its call was out
	ctx     context.Context
	cancel  context.CancelFunc
	out     *http.Request // the call's request, made by the handler
}

// NewTier returns a tier for cfg, or an error naming what is wrong.
func NewTier(cfg TierConfig) (*Tier, error) {
	if cfg.Next == nil {
		return nil, errors.New("lab: TierConfig.Next is required")
	}
	tr := cfg.Tier
	if tr.Server.Replicas > 1 {
		return nil, fmt.Errorf("lab: tier %s has %d replicas; the lab runs one (run it in the simulator)", tr.Name, tr.Server.Replicas)
	}
	start := cfg.Start
	if start.IsZero() {
		start = time.Now()
	}
	t := &Tier{cfg: cfg, propagate: tr.Client.PropagateDeadline}
	t.init(start, cfg.In, cfg.Seed, 0x7133, (*callService)(t))
	t.running, t.halt = context.WithCancel(context.Background())
	m, err := origin.NewWith(&tr.Server, 0, 1, t.driver(), origin.Options{Rand: serviceRand(cfg.Seed, &tr.Server, 0x7133)})
	if err != nil {
		t.halt()
		return nil, fmt.Errorf("lab: tier %s: %w", tr.Name, err)
	}
	t.model = m
	p, err := tr.NewPolicy()
	if err != nil {
		t.halt()
		return nil, err
	}
	t.guard, err = resil.NewGuard(resil.GuardSettings{
		Idempotency:    resil.Idempotent, // the method narrows it: a POST is retried only with a key
		Policy:         p,
		AttemptTimeout: tr.Client.Timeout,
		Rand:           rand.NewPCG(cfg.Seed, 0x2000),
	})
	if err != nil {
		t.halt()
		return nil, err
	}
	base := cfg.Base
	if base == nil {
		t.own = h2cTransport()
		base = t.own
	}
	t.client = &resilhttp.Transport{
		Guard: t.guard,
		Base:  &attemptTransport{base: base, tally: cfg.Out},
		// The next tier hears each attempt's kind, as the origin does.
		AttemptHeader: AttemptHeader,
		// Without propagation the next tier hears no deadline.
		OmitTimeout: !t.propagate,
		// The statuses its retry.on lists (a tier's 502, 503, 504).
		RetryStatus: retryStatus(tr.Client.Retry),
	}
	if !tr.Client.Retry.IdempotentOnly {
		// As the gateway's naive clients: POSTs are retried blindly.
		t.client.Keys, t.client.KeyHeader = true, retryKeyHeader
	}
	if err := t.register(); err != nil {
		t.halt()
		return nil, err
	}
	return t, nil
}

// Handler serves the tier: /metrics, /healthz, and every other path as
// work.
func (t *Tier) Handler() http.Handler {
	mux := t.mux()
	mux.HandleFunc("/", t.serveWork)
	return mux
}

// Guard returns the tier's client Guard.
func (t *Tier) Guard() *resil.Guard { return t.guard }

// Run drives the tier's clock until ctx is done; then it refuses new work,
// cancels the calls still out and waits for them. Call it once.
func (t *Tier) Run(ctx context.Context) {
	t.run(ctx, nil)
	t.halt()
	t.calls.Wait()
}

// Close closes the idle connections of the transport the tier made, once
// the calls the Guard still runs (hedges that lost) are over.
func (t *Tier) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), closeGrace)
	defer cancel()
	_ = t.guard.Wait(ctx)
	if t.own != nil {
		t.own.CloseIdleConnections()
	}
}

// warm opens the tier's connection to the next layer.
func (t *Tier) warm(ctx context.Context) error {
	u := *t.cfg.Next
	u.Path = healthPath
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	base := t.cfg.Base
	if base == nil {
		base = t.own
	}
	resp, err := base.RoundTrip(req)
	if err != nil {
		return fmt.Errorf("lab: tier %s cannot reach the next layer: %w", t.cfg.Tier.Name, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.Body.Close()
}

// serveWork is one request: counted, handed to the model, answered when
// the tier's call to the next layer is over.
func (t *Tier) serveWork(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	in := t.cfg.In
	k := in.sentTick(r.Header.Get(TickHeader), now)
	t.m.inflight.Inc()
	defer t.m.inflight.Dec()
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 1<<20))
	}
	// The call's context: the request's under propagation (it ends when
	// the caller leaves, and carries the deadline the caller sent), the
	// tier's own otherwise.
	ctx, cancel := context.WithCancel(t.running)
	var deadline time.Duration
	if d, ok := resilhttp.TimeoutFrom(r.Header); ok && d > 0 {
		// The model aims a tenth early, as the origin does: the answer
		// must travel back before its caller gives up.
		deadline = t.since(now.Add(d - d/deadlineMargin))
		if t.propagate {
			cancel()
			ctx, cancel = context.WithDeadline(r.Context(), now.Add(d))
		}
	} else if t.propagate {
		cancel()
		ctx, cancel = context.WithCancel(r.Context())
	}
	defer func() {
		if t.propagate {
			cancel() // a call still out is the request's: it ends with it
		}
	}()
	out, err := t.outbound(ctx, r)
	if err != nil {
		cancel()
		http.Error(w, "tier: "+err.Error(), http.StatusBadRequest)
		return
	}
	broken := false
	if b := t.cfg.Tier.Server.Broken; b > 0 {
		if id := r.Header.Get(IntentHeader); id != "" {
			broken = unitHash(t.cfg.Seed, t.cfg.Tier.Name+"/"+id) < b
		}
	}

	t.mu.Lock()
	at := t.catchUp()
	if t.stopped {
		t.mu.Unlock()
		cancel()
		http.Error(w, "tier: shutting down", http.StatusServiceUnavailable)
		return
	}
	req, gen, answer := t.accept(at, held[tierCall, int]{tick: k, deadline: deadline, own: tierCall{broken: broken, ctx: ctx, cancel: cancel, out: out}})
	t.mu.Unlock()

	switch code, end := t.await(req, gen, answer, r.Context().Done()); end {
	case waitTold:
		t.m.requests.WithLabelValues(tierResult(code)).Inc()
		if code == http.StatusOK {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			_, _ = io.WriteString(w, "ok\n")
			return
		}
		http.Error(w, "tier: failed", code)
	case waitGone:
		t.m.requests.WithLabelValues("unanswered").Inc()
	case waitStopped:
		t.m.requests.WithLabelValues("stopped").Inc()
		http.Error(w, "tier: shutting down", http.StatusServiceUnavailable)
	}
}

func tierResult(code int) string {
	if code == http.StatusOK {
		return "ok"
	}
	return "failed"
}

// outbound is the call to the next layer for r: its method, the intent's
// headers (its number, its idempotency key), on ctx. Its deadline, if any,
// is the context's: the Transport sends it.
func (t *Tier) outbound(ctx context.Context, r *http.Request) (*http.Request, error) {
	u := *t.cfg.Next
	u.Path, u.RawQuery = r.URL.Path, r.URL.RawQuery
	out, err := http.NewRequestWithContext(ctx, r.Method, u.String(), nil)
	if err != nil {
		return nil, err
	}
	for _, h := range []string{IntentHeader, resilhttp.DefaultKeyHeader} {
		if v := r.Header.Get(h); v != "" {
			out.Header.Set(h, v)
		}
	}
	return out, nil
}

// callService is the Tier's strategy: serving is the tier's own service
// time (the model's), then a call to the next tier under its client
// policy (begin), the worker held until the call is over.
type callService Tier

// answer: admitted (capacity model), its own latency until at; then the
// call.
func (c *callService) answer(r origin.Request, at time.Duration) {
	c.clk.at(due{at: at, r: r, gen: c.reqs[r].gen, kind: dueAnswer})
}

// serve: a worker holds r from now; its own service ends at end, and the
// call begins.
func (c *callService) serve(r origin.Request, end time.Duration) {
	c.clk.at(due{at: end, r: r, gen: c.reqs[r].gen, kind: dueService})
}

// reject answers r 503 at once.
func (c *callService) reject(r origin.Request) {
	t := (*Tier)(c)
	t.tell(r, http.StatusServiceUnavailable)
	t.release(r)
}

// drop lets r go (drop_expired): skipped in the queue, or stopped while
// its call is out, whose context is then cancelled. Its caller gets no
// answer.
func (c *callService) drop(r origin.Request) {
	t := (*Tier)(c)
	if q := &t.reqs[r]; q.own.calling {
		q.own.dropped = true
		q.own.cancel()
		return
	}
	t.release(r)
}

// fire begins the call of a request whose own service fell due at at.
func (c *callService) fire(e due, at time.Duration) { (*Tier)(c).begin(e.r, at) }

// left: under propagation the model hears a caller leave (a drop_expired
// queue stops serving its request) and the call ends with the request's
// context; otherwise the tier goes on for nobody.
func (c *callService) left(origin.Request, time.Duration) bool { return c.propagate }

// begin starts request r's call to the next layer, its own service being
// over at at; a request whose caller left under propagation has nothing to
// call for. The lock is held.
func (t *Tier) begin(r origin.Request, at time.Duration) {
	q := &t.reqs[r]
	if q.own.ctx.Err() != nil || t.stopped {
		// Stopped: Run waits for the calls out and starts no more.
		t.end(r, at)
		return
	}
	q.own.calling = true
	gen, out, ctx := q.gen, q.own.out, q.own.ctx
	t.calls.Go(func() { t.call(r, gen, ctx, out) })
}

// call is request r's call to the next layer, under the tier's policy.
func (t *Tier) call(r origin.Request, gen uint32, ctx context.Context, out *http.Request) {
	o := t.cfg.Out
	began := time.Now()
	o.addNow(cIntents, began)
	tr := &trace{}
	out = out.WithContext(context.WithValue(ctx, traceKey{}, tr))
	resp, err := t.client.RoundTrip(out)
	ok := err == nil && resp.StatusCode < 300
	if resp != nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
		_ = resp.Body.Close()
		if !ok {
			err = resilhttp.StopOf(resp)
		}
	}
	t.record(began, tr, ok, err)

	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.catchUp()
	q := &t.reqs[r]
	if q.gen != gen {
		return
	}
	if q.own.dropped {
		t.release(r)
		return
	}
	code := http.StatusOK
	switch {
	case !ok:
		code = t.giveUp(resp, err) // as the tier's product gives up
	case q.own.broken || (t.cfg.Tier.Server.ErrorRate > 0 && t.rng.Float64() < t.cfg.Tier.Server.ErrorRate):
		ok, code = false, http.StatusServiceUnavailable // the tier's own work failed
	default:
		t.cfg.In.add(cSuccesses, q.tick)
	}
	switch {
	case q.tell == nil && ctx.Err() != nil && !ok:
		// The call stopped with its caller (propagation): no answer,
		// and no work wasted on one.
	case q.tell == nil:
		t.waste()
	default:
		t.tell(r, code)
	}
	t.end(r, now)
}

// giveUp is the status the tier answers its caller with when its call to
// the next layer failed (resp, or err with no response): its product's
// answer to the call's last failure (package giveup: Envoy 503 after a
// refused connection, 504 after a timeout; nginx 502 and 504; a failed
// answer passed on). A tier without a product answers 503, as the lab's
// servers answer any failure.
func (t *Tier) giveUp(resp *http.Response, err error) int {
	p := giveup.Product(t.cfg.Tier.Client.Product)
	if p == "" {
		return http.StatusServiceUnavailable
	}
	last := ""
	switch {
	case resp != nil:
		last = giveup.KindOfHTTP(resp.StatusCode)
	case errors.Is(err, syscall.ECONNREFUSED):
		last = giveup.Refused
	case errors.Is(err, context.DeadlineExceeded) || isTimeout(err):
		last = giveup.Timeout
	}
	return giveup.Of(p, last, false).HTTP
}

// isTimeout reports whether err says it is a timeout (a net.Error's).
func isTimeout(err error) bool {
	t, ok := errors.AsType[interface {
		error
		Timeout() bool
	}](err)
	return ok && t.Timeout()
}

// retryStatus is which statuses a policy retrying on retries: those whose
// failure kind (package giveup) it lists, or resilhttp's default when it
// lists none.
func retryStatus(r scenario.Retry) func(int) bool {
	if len(r.On) == 0 {
		return nil
	}
	return func(code int) bool {
		k := giveup.KindOfHTTP(code)
		return k != "" && r.Retries(k)
	}
}

// record counts how one call went, in the hop out: a breaker's refusal
// (and whether the next layer would have answered it), a loss and why, a
// victim, a success's latency.
func (t *Tier) record(began time.Time, tr *trace, ok bool, err error) {
	o := t.cfg.Out
	if ok {
		o.succeed(time.Since(began))
	} else {
		why := resil.ReasonOf(err)
		if why == resil.StopBreaker {
			o.addNow(cRefused, began)
			if t.cfg.Truth != nil && o.tickOf(began) >= 0 && t.cfg.Truth(t.cfg.Tier.Client.Timeout) {
				o.inc(tThrown)
			}
		}
		o.lose(loss{reason: why})
	}
	if t.cfg.ClearAt >= 0 && !began.Before(t.start.Add(t.cfg.ClearAt)) && (tr.failed.Load() > 0 || !ok) {
		o.inc(tVictims)
	}
}

// end is the end of request r's service: the model frees its worker, the
// slot is free. The lock is held.
func (t *Tier) end(r origin.Request, now time.Duration) {
	if t.reqs[r].serving {
		t.done(r, now)
	}
	t.release(r)
}

// release frees r's slot; its call's context is cancelled unless the
// handler still owns it. The lock is held.
func (t *Tier) release(r origin.Request) {
	if c := t.reqs[r].own.cancel; !t.propagate && c != nil {
		c()
	}
	t.recycle(r)
}

// OpenShare returns 1 when the tier's breaker is open, 0 otherwise: the
// share of its clients (one) whose breaker is open.
func (t *Tier) OpenShare(now time.Time) float64 {
	if b := t.guard.Policy().Breaker; b != nil && b.State(now) == resil.StateOpen {
		return 1
	}
	return 0
}

// TierCounts are a tier's totals.
type TierCounts struct {
	Name string `json:"name"`
	// Wasted is requests answered after their caller left; Dropped those
	// a drop_expired server skipped.
	Wasted  int64 `json:"wasted_work"`
	Dropped int64 `json:"dropped"`
	// Calls, Retries, BudgetDenials, BreakerRefusals and BreakerTrips are
	// the client's, as its Guard counted them.
	Calls           uint64 `json:"calls"`
	Retries         uint64 `json:"retries"`
	BudgetDenials   uint64 `json:"budget_denials"`
	BreakerRefusals uint64 `json:"breaker_refusals"`
	BreakerTrips    uint64 `json:"breaker_trips"`
}

// Counts returns the tier's totals so far.
func (t *Tier) Counts() TierCounts {
	s := t.guard.Stats()
	c := TierCounts{
		Name: t.cfg.Tier.Name, Wasted: t.wasted.Load(), Dropped: t.dropped.Load(),
		Calls: s.Intents, Retries: s.Retries, BudgetDenials: s.BudgetDenials, BreakerRefusals: s.BreakerRefusals,
	}
	if b := t.guard.Policy().Breaker; b != nil {
		c.BreakerTrips = b.Trips()
	}
	return c
}

type tierMetrics struct {
	requests *prometheus.CounterVec
	inflight prometheus.Gauge
	wasted   prometheus.Counter
}

func (t *Tier) register() error {
	t.m = tierMetrics{
		requests: counterVec("retrystorm_tier_requests_total",
			"Requests the tier received, by result: ok, failed (rejected, or its call to the next layer failed), unanswered (the caller left), stopped.", "result"),
		inflight: prometheus.NewGauge(prometheus.GaugeOpts{Name: "retrystorm_tier_in_flight",
			Help: "Requests the tier holds whose caller still waits."}),
		wasted: counter("retrystorm_tier_wasted_work_total", "Requests the tier answered after their caller gave up."),
	}
	t.wastedTotal = t.m.wasted
	if _, err := resilprom.Register(t.reg, t.cfg.Tier.Name, t.guard); err != nil {
		return fmt.Errorf("lab: tier metrics: %w", err)
	}
	return registerAll(t.reg, "tier", t.m.requests, t.m.inflight, t.m.wasted,
		gaugeFunc("retrystorm_tier_queue_length", "Requests waiting for a worker, those whose caller left included.",
			func() float64 { return float64(t.Queued()) }),
	)
}
