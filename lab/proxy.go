package lab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/retrystorm/retrystorm/origin"
	"github.com/retrystorm/retrystorm/resil/resilhttp"
	"github.com/retrystorm/retrystorm/scenario"
)

// ProxyConfig configures a FaultProxy. Its rates and durations are
// wall-clock ones: give it a scaled scenario's (see Scale). The zero value
// is not usable: Target is required.
type ProxyConfig struct {
	// Target is the service the proxy forwards to: its scheme, host and
	// port, and a path that prefixes every request's.
	Target *url.URL
	// Origin is the scenario's origin. With Impose the proxy runs it in
	// front of the target; otherwise its workers, queue limit, discipline
	// and drop_expired shape the queue of a capacity dip.
	Origin scenario.Origin
	// Impose makes the target behave as Origin: its model (a concurrency
	// limit with a queue and a service rate, for the queue model) admits
	// and queues the requests, and a request's service lasts as long as the
	// model says or the target takes, whichever is longer. Without it the
	// proxy passes requests through, limited only during a capacity dip.
	Impose bool
	// Triggers are faults on a schedule, from Start: capacity, errors,
	// outage (each mode) and latency. Load triggers are ignored.
	Triggers []scenario.Trigger
	// Start is time 0 of the schedule; zero means when NewFaultProxy is
	// called.
	Start time.Time
	// Seed seeds the error draws.
	Seed uint64
	// Tally, if set, receives offered load and successes per tick, as an
	// origin's would.
	Tally *Tally
	// Transport sends the requests to the target. Nil means an HTTP/1.1
	// transport of the proxy's own (as most clients of a service speak),
	// closed by Run's end.
	Transport http.RoundTripper
	// Cutoff, when not zero, is when (from Start) the proxy stops
	// forwarding: a request's turn that comes after it is answered 503
	// without reaching the target, and the forwards still out then are
	// cancelled. It is the last hop's guarantee that a run against a real
	// service ends with its scenario, however late a gateway hears that its
	// client left.
	Cutoff time.Duration
}

// FaultProxy is a reverse proxy that applies a scenario's triggers to a
// real service, its target, so that a storm can be played against software
// the lab did not write:
//
//   - a capacity dip is a rate limit with a queue: requests wait their turn
//     (FIFO or LIFO, bounded by the origin's queue_limit) and go to the
//     target at the dip's capacity per second, the origin's workers at a
//     time; when the dip ends what waits goes at once, and the target's
//     own queue takes it from there;
//   - errors: a share of the target's answers is replaced by a 503, after
//     the target did the work, as the simulator decides errors after the
//     service;
//   - latency: an answer is held until the target's time, multiplied by
//     the factor, has passed;
//   - outage refuse: 502 at once, as a reverse proxy answers when its
//     upstream refuses the connection; answers that come back meanwhile
//     fail too;
//   - outage blackhole: requests are held unanswered, and not forwarded,
//     until their client gives up; answers that come back meanwhile are
//     lost;
//   - outage stall: requests are queued and nothing goes out, to the target
//     or back to a client, until it ends.
//
// With ProxyConfig.Impose the proxy is the scenario's origin in front of
// the target: a fast server then serves no faster than the origin, and
// queues as it does.
//
// Admission and queueing are the origin package's model, on the wall clock,
// as the lab's Origin runs it: the proxy is a server whose service is a
// call to the next hop. Like the origin model, the proxy does not notice a
// client that left (unless drop_expired): a request whose client left
// while it waited still takes its turn and is forwarded for nobody, and the
// target does the work (wasted work). A request whose client leaves while
// the target works on it is cancelled, as any client's would be: whether
// the target notices is the target's business.
//
// Make one with NewFaultProxy, serve Handler, and call Run: it drives the
// clock and the fault schedule, and requests are refused once it returns.
// A FaultProxy is safe for concurrent use.
type FaultProxy struct {
	wallServer[proxied, proxyMsg] // its service is a forward to the target: see forwardService
	cfg                           ProxyConfig
	tr                            http.RoundTripper
	own                           *http.Transport // the default Transport, closed when Run returns
	m                             proxyMetrics
	base                          scenario.Origin // the origin the triggers change: unlimited capacity when passing through
	hold                          bool            // a worker is held until the target answers (Impose)
	kick                          chan struct{}
	orphans                       chan struct{} // slots for the forwards for nobody
	nobody                        context.Context
	cancel                        context.CancelFunc
	running                       sync.WaitGroup // the forwards for nobody

	skipped atomic.Int64
}

// Bounds of the proxy: the bodies it holds, and the forwards for nobody
// (each is a connection to the target) at once and how long each may take.
const (
	proxyMaxBody    = 1 << 20
	proxyMaxOrphans = 1024
	orphanTimeout   = 30 * time.Second
)

// proxied is what the proxy keeps of a request it holds, from arrival to
// its answer and the end of its service in the model.
type proxied struct {
	out     *http.Request // what to send the target, without a context
	settled bool          // answered, or given up on: only the model may still hold it
	sent    time.Duration // when it went to the target
	floor   time.Duration // under Impose, no answer before the model's
	factor  float64       // the latency factor when it went
	ans     *proxyAnswer  // the target's answer, once back
}

// proxyMsg is what the proxy tells a request's handler.
type proxyMsg struct {
	kind proxyMsgKind
	ans  *proxyAnswer
}

type proxyMsgKind uint8

const (
	msgForward proxyMsgKind = iota // send it to the target now
	msgReject                      // overloaded: 503 at once
	msgAnswer                      // write ans
)

// proxyAnswer is the target's answer, as the proxy gives it back.
type proxyAnswer struct {
	status int
	header http.Header
	body   []byte
	result string // the metric's label
}

// The proxy's due entries, beside those in clock.go.
const (
	dueStart   dueKind = iota + 16 // a start of service a stall put off
	dueRelease                     // an answer held for the model's time or the latency factor
)

// NewFaultProxy returns a proxy for cfg, or an error naming what is wrong.
func NewFaultProxy(cfg ProxyConfig) (*FaultProxy, error) {
	if cfg.Target == nil || cfg.Target.Host == "" || (cfg.Target.Scheme != "http" && cfg.Target.Scheme != "https") {
		return nil, errors.New("lab: the fault proxy needs a target URL with http or https and a host")
	}
	if cfg.Origin.Replicas > 1 {
		return nil, fmt.Errorf("lab: the fault proxy imposes one replica; the scenario has %d", cfg.Origin.Replicas)
	}
	start := cfg.Start
	if start.IsZero() {
		start = time.Now()
	}
	p := &FaultProxy{
		cfg: cfg, tr: cfg.Transport, hold: cfg.Impose,
		kick:    make(chan struct{}, 1),
		orphans: make(chan struct{}, proxyMaxOrphans),
		base:    cfg.Origin,
	}
	p.init(start, cfg.Tally, cfg.Seed, 0xfa17, (*forwardService)(p))
	if p.tr == nil {
		p.own = targetTransport()
		p.tr = p.own
	}
	p.nobody, p.cancel = context.WithCancel(context.Background())
	var err error
	if cfg.Impose {
		p.model, err = origin.NewWith(&p.base, 0, 1, p.driver(), origin.Options{Rand: serviceRand(cfg.Seed, &p.base, 0xfa17)})
	} else {
		// Passing through: a queue that serves at once, but for a capacity
		// dip, with the origin's workers (one for the other models).
		s := origin.QueueSettings{Capacity: 1, Workers: 1, DropExpired: cfg.Origin.DropExpired}
		if cfg.Origin.Model == scenario.ModelQueue {
			s.Workers, s.Limit, s.MaxWait = max(cfg.Origin.Workers, 1), cfg.Origin.QueueLimit, cfg.Origin.MaxQueueTime
			s.Discipline, err = cfg.Origin.QueueDiscipline()
		}
		p.base.Capacity = math.Inf(1)
		if err == nil {
			p.model, err = origin.NewQueue(s, p.driver())
		}
	}
	if err != nil {
		p.cancel()
		return nil, fmt.Errorf("lab: the fault proxy: %w", err)
	}
	p.setEnv(envAt(&p.base, cfg.Triggers, 0), start)
	if err := p.register(); err != nil {
		p.cancel()
		return nil, err
	}
	return p, nil
}

// targetTransport is an HTTP/1.1 client with a pool large enough for the
// lab's rates: a connection per request in flight.
func targetTransport() *http.Transport {
	return &http.Transport{
		Proxy:               nil, // the target is named; no environment proxy stands between
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        4096,
		MaxIdleConnsPerHost: 4096,
		IdleConnTimeout:     time.Minute,
		DisableCompression:  true,
	}
}

// Handler serves the proxy: /metrics and /healthz itself, and every other
// path forwarded to the target.
func (p *FaultProxy) Handler() http.Handler {
	mux := p.mux()
	mux.HandleFunc("/", p.serve)
	return mux
}

// Run drives the proxy's clock and its fault schedule until ctx is done;
// then it refuses new work, lets the requests still waiting go, cancels the
// forwards for nobody and closes its connections to the target. Call it
// once.
func (p *FaultProxy) Run(ctx context.Context) {
	p.run(ctx, func(ctx context.Context) {
		scheduleFaults(ctx, p.kick, p.start, func(now time.Time) []scenario.Trigger {
			p.mu.Lock()
			defer p.mu.Unlock()
			p.setEnv(envAt(&p.base, p.cfg.Triggers, now.Sub(p.start)), now)
			return p.cfg.Triggers
		})
	})
	p.cancel()
	p.running.Wait()
	if p.own != nil {
		p.own.CloseIdleConnections()
	}
}

// serve is one request: counted, held or refused by the faults in force,
// handed to the model, forwarded when its turn comes, answered when the
// model and the faults allow.
func (p *FaultProxy) serve(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	tick := p.tally.sentTick(r.Header.Get(TickHeader), now)
	p.m.inflight.Inc()
	defer p.m.inflight.Dec()
	res := p.handle(r, now, tick)
	p.m.requests.WithLabelValues(res.result).Inc()
	if res.status == 0 {
		return // nobody to answer
	}
	p.m.latency.Observe(time.Since(now).Seconds())
	h := w.Header()
	for k, v := range res.header {
		h[k] = v
	}
	w.WriteHeader(res.status)
	_, _ = w.Write(res.body)
}

// Answers the proxy makes itself.
var (
	ansUnanswered = &proxyAnswer{result: "unanswered"}
	ansStopped    = plainAnswer(http.StatusServiceUnavailable, "stopped", "fault proxy: shutting down")
	ansRefused    = plainAnswer(http.StatusBadGateway, "refused", "fault proxy: the target refused the connection (outage)")
	ansRejected   = plainAnswer(http.StatusServiceUnavailable, "rejected", "fault proxy: overloaded")
	ansInjected   = plainAnswer(http.StatusServiceUnavailable, "injected", "fault proxy: injected error")
	ansTooLarge   = plainAnswer(http.StatusRequestEntityTooLarge, "too_large", "fault proxy: request body over 1 MiB")
	ansCut        = plainAnswer(http.StatusServiceUnavailable, "cut", "fault proxy: the scenario is over: nothing more goes to the target")
)

func plainAnswer(status int, result, text string) *proxyAnswer {
	h := http.Header{"Content-Type": {"text/plain; charset=utf-8"}, "X-Content-Type-Options": {"nosniff"}}
	return &proxyAnswer{status: status, header: h, body: []byte(text + "\n"), result: result}
}

// handle decides r's answer; a zero status means none.
func (p *FaultProxy) handle(r *http.Request, now time.Time, tick int) *proxyAnswer {
	body, err := io.ReadAll(io.LimitReader(r.Body, proxyMaxBody+1))
	if err != nil {
		return ansUnanswered // the client went away while sending
	}
	if len(body) > proxyMaxBody {
		return ansTooLarge
	}
	out := p.outbound(r, body)
	var deadline time.Duration
	if v := r.Header.Get(TimeoutHeader); v != "" {
		if d, ok := resilhttp.ParseTimeout(v); ok && d > 0 {
			// As the origin does: aim a tenth early, for the way back.
			deadline = p.clk.since(now.Add(d - d/deadlineMargin))
		}
	}
	gone := r.Context().Done()

	p.mu.Lock()
	t := p.since(now)
	p.clk.advance(t)
	switch {
	case p.stopped:
		p.mu.Unlock()
		return ansStopped
	case p.env.outage && scenario.Refuses(p.env.mode):
		p.mu.Unlock()
		return ansRefused
	case p.env.outage && p.env.mode == scenario.OutageBlackhole:
		p.mu.Unlock()
		select { // held until its client gives up
		case <-gone:
			return ansUnanswered
		case <-p.stop:
			return ansStopped
		}
	}
	id, gen, tell := p.accept(t, held[proxied, proxyMsg]{tick: tick, deadline: deadline, own: proxied{out: out, factor: 1}})
	p.mu.Unlock()

	for {
		m, w := p.await(id, gen, tell, gone)
		switch w {
		case waitGone:
			return ansUnanswered
		case waitStopped:
			p.leave(id, gen)
			return ansStopped
		}
		switch m.kind {
		case msgReject:
			return ansRejected
		case msgAnswer:
			return m.ans
		case msgForward:
			a := p.forward(r.Context(), out)
			if r.Context().Err() != nil {
				p.leave(id, gen)
				return ansUnanswered
			}
			p.returned(id, gen, a)
		}
	}
}

// outbound is r as the target gets it: its URL under the target's, the
// target's Host, no hop-by-hop headers, the body read once and replayable.
func (p *FaultProxy) outbound(r *http.Request, body []byte) *http.Request {
	out := r.Clone(context.Background())
	pr := &httputil.ProxyRequest{In: r, Out: out}
	pr.SetURL(p.cfg.Target)
	out.RequestURI = ""
	for _, h := range hopHeaders {
		out.Header.Del(h)
	}
	out.ContentLength = int64(len(body))
	out.Body = http.NoBody
	if len(body) > 0 {
		out.Body = io.NopCloser(bytes.NewReader(body))
		out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}
	return out
}

// hopHeaders are the headers of one connection, not to be forwarded
// (RFC 9110, section 7.6.1).
var hopHeaders = []string{"Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate", "Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// forward sends out to the target under ctx and reads the answer; after
// the cutoff it sends nothing.
func (p *FaultProxy) forward(ctx context.Context, out *http.Request) *proxyAnswer {
	if c := p.cfg.Cutoff; c > 0 {
		end := p.start.Add(c)
		if !time.Now().Before(end) {
			return ansCut
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, end)
		defer cancel()
	}
	p.m.forwards.Inc()
	defer p.m.forwards.Dec()
	start := time.Now()
	req := out.Clone(ctx)
	if out.GetBody != nil {
		req.Body, _ = out.GetBody()
	}
	resp, err := p.tr.RoundTrip(req)
	if err != nil {
		return plainAnswer(http.StatusBadGateway, "unreachable", "fault proxy: the target: "+err.Error())
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, proxyMaxBody+1))
	if err != nil {
		return plainAnswer(http.StatusBadGateway, "unreachable", "fault proxy: the target's answer: "+err.Error())
	}
	if len(body) > proxyMaxBody {
		return plainAnswer(http.StatusBadGateway, "too_large", "fault proxy: the target's answer is over 1 MiB")
	}
	p.m.target.Observe(time.Since(start).Seconds())
	h := resp.Header.Clone()
	for _, k := range hopHeaders {
		h.Del(k)
	}
	h.Del("Content-Length")
	result := "ok"
	if resp.StatusCode >= 500 {
		result = "error"
	}
	return &proxyAnswer{status: resp.StatusCode, header: h, body: body, result: result}
}

// returned takes the target's answer to request id (of generation gen) and
// gives it back when the model's time (under Impose) and the latency factor
// allow, and not during a stall.
func (p *FaultProxy) returned(id origin.Request, gen uint32, a *proxyAnswer) {
	p.mu.Lock()
	defer p.mu.Unlock()
	t := p.catchUp()
	q := &p.reqs[id]
	if q.gen != gen || q.own.settled {
		return // dropped meanwhile
	}
	q.own.ans = a
	at := max(q.own.sent+time.Duration(float64(t-q.own.sent)*q.own.factor), q.own.floor, t)
	if at > t || p.clk.held {
		p.clk.at(due{at: at, r: id, gen: gen, kind: dueRelease})
		return
	}
	p.deliver(id, t)
}

// deliver gives request id its answer at t, as the faults in force have
// it, and ends its service under Impose. The lock is held.
func (p *FaultProxy) deliver(id origin.Request, t time.Duration) {
	q := &p.reqs[id]
	a := q.own.ans
	if a == nil {
		a = ansUnanswered // its forward was cancelled: its client left
	}
	switch {
	case p.env.outage && scenario.Refuses(p.env.mode):
		a = ansRefused
	case p.env.errRate > 0 && a.status < 500 && p.rng.Float64() < p.env.errRate:
		a = ansInjected
	case p.env.rejRate > 0 && a.status < 500 && p.rng.Float64() < p.env.rejRate:
		a = ansInjected // a rejection trigger: the proxy's 503
	}
	if a.status != 0 && a.status < 500 {
		p.tally.add(cSuccesses, q.tick)
	}
	switch {
	case q.tell == nil:
		p.waste()
	case p.env.outage && p.env.mode == scenario.OutageBlackhole:
		// Lost: the handler waits for its client to give up.
		q.tell = nil
	default:
		p.tell(id, proxyMsg{kind: msgAnswer, ans: a})
	}
	q.own.settled = true
	if p.hold && q.serving {
		p.done(id, t)
	}
	p.release(id)
}

// forwardService is the FaultProxy's strategy: serving is forwarding the
// request to the target when the model says (send), and giving its
// answer back when the model's time and the faults allow (deliver).
type forwardService FaultProxy

// answer: the model admitted r; under Impose its answer comes no sooner
// than at.
func (f *forwardService) answer(r origin.Request, at time.Duration) {
	p := (*FaultProxy)(f)
	if p.hold {
		p.reqs[r].own.floor = at
	}
	p.send(r)
}

func (f *forwardService) serve(r origin.Request, end time.Duration) {
	p := (*FaultProxy)(f)
	q := &p.reqs[r]
	if p.hold {
		q.own.floor = end
	} else {
		// A rate limit: the worker is free at the model's end, whatever
		// the target does.
		p.clk.at(due{at: end, r: r, gen: q.gen, kind: dueService})
	}
	p.send(r)
}

func (f *forwardService) reject(r origin.Request) { (*FaultProxy)(f).reject(r) }

// drop: r is not forwarded, or its service stops; its client will time
// out.
func (f *forwardService) drop(r origin.Request) {
	p := (*FaultProxy)(f)
	q := &p.reqs[r]
	q.tell, q.own.settled = nil, true
	p.release(r)
}

func (f *forwardService) fire(e due, at time.Duration) {
	p := (*FaultProxy)(f)
	switch e.kind {
	case dueStart:
		p.send(e.r)
	case dueService:
		p.done(e.r, at)
		p.release(e.r)
	case dueRelease:
		if !p.reqs[e.r].own.settled {
			p.deliver(e.r, at)
		}
	}
}

// left: a request still queued stays queued, and is forwarded for nobody
// when its turn comes. One whose forward was cancelled with its client
// is, under Impose, served out for nobody for the model's time.
func (f *forwardService) left(r origin.Request, t time.Duration) bool {
	q := &f.reqs[r]
	if q.own.sent != 0 && q.own.ans == nil && !q.own.settled {
		f.clk.at(due{at: max(q.own.floor, t), r: r, gen: q.gen, kind: dueRelease})
	}
	return true
}

// send starts request id's forward: its handler sends it, or, if its
// client left, the proxy sends it for nobody. During a stall it waits for
// the stall's end. The lock is held.
func (p *FaultProxy) send(id origin.Request) {
	q := &p.reqs[id]
	if p.clk.held {
		p.clk.at(due{at: p.now, r: id, gen: q.gen, kind: dueStart})
		return
	}
	q.own.sent, q.own.factor = max(p.now, 1), p.env.factor
	if q.tell != nil {
		q.tell <- proxyMsg{kind: msgForward}
		return
	}
	if p.stopped {
		// Run has stopped the proxy and waits for the forwards in flight:
		// it must start no more (a WaitGroup's Go racing its Wait). Nobody
		// waits for this one: it counts as wasted, as one not sent below.
		p.skipped.Add(1)
		p.clk.at(due{at: max(q.own.floor, p.now), r: id, gen: q.gen, kind: dueRelease})
		return
	}
	select {
	case p.orphans <- struct{}{}:
	default:
		// Too many forwards for nobody at once: this one is not sent, and
		// counts as wasted all the same.
		p.skipped.Add(1)
		p.clk.at(due{at: max(q.own.floor, p.now), r: id, gen: q.gen, kind: dueRelease})
		return
	}
	gen, out := q.gen, q.own.out
	p.m.orphans.Inc()
	p.running.Go(func() {
		defer func() { <-p.orphans }()
		ctx, cancel := context.WithTimeout(p.nobody, orphanTimeout)
		defer cancel()
		p.returned(id, gen, p.forward(ctx, out))
	})
}

// reject answers request id with an overload rejection. The lock is held.
func (p *FaultProxy) reject(id origin.Request) {
	p.tell(id, proxyMsg{kind: msgReject})
	p.reqs[id].own.settled = true
	p.release(id)
}

// release frees request id's slot once it is settled and the model is
// done with it. The lock is held.
func (p *FaultProxy) release(id origin.Request) {
	if q := &p.reqs[id]; !q.own.settled || q.serving {
		return
	}
	p.recycle(id)
}

// WouldAnswer reports whether a request arriving now would be answered
// within timeout, as the imposed origin's model says: the ground truth for
// the calls a breaker refused. Without Impose the proxy cannot know what
// the target would do, and says false.
func (p *FaultProxy) WouldAnswer(timeout time.Duration) bool {
	return p.hold && p.wallServer.WouldAnswer(timeout)
}

// Counts returns the proxy's totals so far, in the origin's terms: the
// requests forwarded for clients that had left (or not forwarded, past the
// bound on those), and those drop_expired skipped.
func (p *FaultProxy) Counts() OriginCounts {
	return OriginCounts{Wasted: p.wasted.Load(), Dropped: p.dropped.Load()}
}

type proxyMetrics struct {
	requests *prometheus.CounterVec
	inflight prometheus.Gauge
	forwards prometheus.Gauge
	latency  prometheus.Histogram
	target   prometheus.Histogram
	wasted   prometheus.Counter
	orphans  prometheus.Counter
}

func (p *FaultProxy) register() error {
	p.m = proxyMetrics{
		requests: counterVec("retrystorm_proxy_requests_total",
			"Requests the fault proxy received, by result: ok and error (the target's answer, error for a 5xx), injected (an error trigger), rejected (its queue full), refused (an outage in mode refuse), unreachable (no answer from the target), unanswered (the client left, or a blackhole), too_large, cut (after the scenario's end: not forwarded), stopped.", "result"),
		inflight: prometheus.NewGauge(prometheus.GaugeOpts{Name: "retrystorm_proxy_in_flight",
			Help: "Requests the fault proxy holds whose client still waits."}),
		forwards: prometheus.NewGauge(prometheus.GaugeOpts{Name: "retrystorm_proxy_forwards_in_flight",
			Help: "Requests at the target now, for their client or for nobody."}),
		latency: latencyHistogram("retrystorm_proxy_request_duration_seconds",
			"Time from a request's arrival at the proxy to its answer, for the requests answered."),
		target: latencyHistogram("retrystorm_proxy_target_duration_seconds",
			"Time the target took to answer a forwarded request."),
		wasted:  counter("retrystorm_proxy_wasted_work_total", "Requests forwarded, or served out under an imposed origin, after their client gave up."),
		orphans: counter("retrystorm_proxy_forwarded_for_nobody_total", "Requests whose client left while they waited, forwarded anyway when their turn came."),
	}
	p.wastedTotal = p.m.wasted
	locked := func(f func() float64) func() float64 { return underLock(&p.mu, f) }
	return registerAll(p.reg, "fault proxy",
		p.m.requests, p.m.inflight, p.m.forwards, p.m.latency, p.m.target, p.m.wasted, p.m.orphans,
		gaugeFunc("retrystorm_proxy_queue_length", "Requests waiting in the proxy's queue, those whose client left included.",
			locked(func() float64 { return float64(p.model.Queued()) })),
		gaugeFunc("retrystorm_proxy_capacity", "Requests per second the proxy lets through now (+Inf: no limit).",
			locked(func() float64 { return p.env.capacity })),
		gaugeFunc("retrystorm_proxy_error_share", "Share of the target's answers the proxy replaces with an error now.",
			locked(func() float64 { return p.env.errRate })),
		gaugeFunc("retrystorm_proxy_outage", "1 during an outage, in any mode.",
			locked(func() float64 { return one(p.env.outage) })),
	)
}
