package lab

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/retrystorm/retrystorm/origin"
	"github.com/retrystorm/retrystorm/resil"
	"github.com/retrystorm/retrystorm/resil/resilgrpc"
	"github.com/retrystorm/retrystorm/resil/resilhttp"
	"github.com/retrystorm/retrystorm/scenario"
)

// Headers the lab's components speak. The gateway forwards the intent's
// headers to the origin and adds its own per attempt.
const (
	// IntentHeader carries the intent's number, from the load generator:
	// the origin counts duplicate executions and draws broken keys by it.
	IntentHeader = "Retrystorm-Intent"
	// ClientHeader says which of the scenario's clients sends the intent:
	// the gateway keeps one Guard (one budget, one breaker) per client.
	ClientHeader = "Retrystorm-Client"
	// AttemptHeader says why the gateway sent an attempt: first, retry or
	// hedge.
	AttemptHeader = "Retrystorm-Attempt"
	// TimeoutHeader is the propagated deadline: how long the sender will
	// wait for this answer. It is resil's (resilhttp.TimeoutHeader), in
	// gRPC's grpc-timeout syntax ("87m"): relative, so that clocks need not
	// agree, and what any resilhttp.Transport sends.
	TimeoutHeader = resilhttp.TimeoutHeader
)

// deadlineMargin is the share (1/deadlineMargin) of a propagated timeout
// that a drop_expired origin keeps for the answer's way back.
const deadlineMargin = 10

// OriginConfig configures an Origin. Its rates and durations are the
// origin's own, in wall-clock time: give it a scaled scenario's (see
// Scale). The zero value is not usable: Origin needs a model.
type OriginConfig struct {
	// Origin is the model: queue (workers and a queue), capacity
	// (admission up to a rate) or concurrency (latency grows with load).
	// The lab runs one replica.
	Origin scenario.Origin
	// Triggers are faults on a schedule, from Start: capacity, errors,
	// outage and latency. Load triggers are ignored (they are the load
	// generator's).
	Triggers []scenario.Trigger
	// Start is time 0 of the schedule and of the admin endpoint's times.
	// Zero means when NewOrigin is called.
	Start time.Time
	// Seed seeds the error draws.
	Seed uint64
	// Tally, if set, receives offered load and successes per tick.
	Tally *Tally
	// AdminToken is the secret /admin/faults requires (see serveAdmin).
	// Empty: the endpoint refuses every request.
	AdminToken string
}

// Origin is an HTTP server with finite capacity, as the scenario's origin
// model says, with faults on a schedule and through an admin endpoint,
// idempotency keys honoured, and Prometheus metrics on a registry of its
// own.
//
// The model is the simulator's own (package origin), one replica of it,
// driven on the wall clock: each request's handler hands it to the model
// and waits on a channel for its answer; a clock loop answers requests and
// ends their service when they fall due, at the time they were due, so
// that a late timer costs the model no capacity. A handler whose client
// leaves returns at once, whatever the model still does with its request:
// a queued request whose client left stays queued and is served for nobody
// (wasted work), as in the simulator, unless drop_expired, under which the
// model skips it (it reads the propagated deadline, TimeoutHeader, and
// notices the client leaving). The error share is decided after the
// service, so errors cost work, as in the simulator.
//
// Make one with NewOrigin, serve Handler, and call Run: it drives the
// clock and the fault schedule, and requests are refused once it returns.
// An Origin is safe for concurrent use.
type Origin struct {
	cfg   OriginConfig
	start time.Time
	tally *Tally
	reg   *prometheus.Registry
	m     originMetrics
	otel  *originOTel
	shed  *resilgrpc.Server // drop_expired over gRPC; nil otherwise
	book  *ledger
	kick  chan struct{} // wakes the fault schedule
	stop  chan struct{} // closed when Run returns

	mu       sync.Mutex
	model    origin.Model
	env      env
	reqs     []request // by origin.Request
	free     []origin.Request
	clk      clock // answers and ends of service to come
	stopped  bool
	injected []scenario.Trigger // from the admin endpoint
	rng      *rand.Rand

	wasted, dropped atomic.Int64
}

// NewOrigin returns an origin for cfg, or an error for a model the lab
// cannot run.
func NewOrigin(cfg OriginConfig) (*Origin, error) {
	o := cfg.Origin
	if o.Replicas > 1 {
		return nil, fmt.Errorf("lab: the lab's origin is one replica; the scenario has %d (run it in the simulator)", o.Replicas)
	}
	start := cfg.Start
	if start.IsZero() {
		start = time.Now()
	}
	org := &Origin{
		cfg:   cfg,
		start: start,
		tally: cfg.Tally,
		reg:   prometheus.NewRegistry(),
		book:  newLedger(1 << 16),
		kick:  make(chan struct{}, 1),
		stop:  make(chan struct{}),
		rng:   rand.New(rand.NewPCG(cfg.Seed, 0x0519)),
	}
	org.clk = newClock(start, org.fire)
	m, err := origin.New(&o, 0, 1, (*originDriver)(org))
	if err != nil {
		return nil, fmt.Errorf("lab: %w", err)
	}
	org.model = m
	org.setEnv(envAt(&o, cfg.Triggers, 0), start)
	if err := org.register(); err != nil {
		return nil, err
	}
	if org.otel, err = newOriginOTel(org.reg); err != nil {
		return nil, err
	}
	if org.shed, err = org.newShedder(); err != nil {
		return nil, fmt.Errorf("lab: %w", err)
	}
	return org, nil
}

// Handler serves the origin: /metrics, /admin/faults, /healthz, and every
// other path as work.
func (o *Origin) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(o.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/admin/faults", o.serveAdmin)
	mux.HandleFunc(healthPath, serveHealth)
	mux.HandleFunc("/", o.serveWork)
	return mux
}

// Registry returns the registry the origin's metrics are on.
func (o *Origin) Registry() *prometheus.Registry { return o.reg }

// result is the origin's answer to one request.
type result uint8

const (
	resOK       result = iota // 200
	resError                  // 503: the error share, after the work
	resRejected               // 503 at once: queue full, or no capacity credit
	resNone                   // no answer: its client left, or the origin is out
	resStopped                // 503: the origin is shutting down
	resShed                   // gRPC's drop_expired: refused before the handler, its deadline too near
	resRefused                // 503 at once: an outage in mode refuse
	nResults
)

// job is what a handler knows of its request before the model does.
type job struct {
	tick     int
	broken   bool
	deadline time.Duration // from start; 0: unknown
	exec     *execution
	gone     <-chan struct{} // closed when its client leaves
}

// arrival is what an edge of the origin (its HTTP handler, its gRPC
// service) knows of a request when it arrives, in the lab's words.
type arrival struct {
	intent string // IntentHeader
	kind   string // AttemptHeader: resil's word for why it was sent
	// timeout is how long its sender waits for the answer, from now: the
	// propagated deadline. Zero: unknown.
	timeout time.Duration
	// effect says it is an execution with a side effect (a POST; over
	// gRPC, IdempotentHeader "false"), deduplicated by key when it has one.
	effect bool
	key    string
	gone   <-chan struct{} // closed when its client leaves
}

// serve is one request, whatever the protocol it came by: counted, handed
// to the model, and its result returned for the edge to answer.
func (o *Origin) serve(now time.Time, a arrival) result {
	j := &job{tick: o.tally.TickOf(now), gone: a.gone}
	o.tally.add(cOffered, j.tick)
	o.m.attempts.WithLabelValues(attemptKind(a.kind)).Inc()
	o.m.inflight.Inc()
	defer o.m.inflight.Dec()
	if d := a.timeout; d > 0 {
		// The answer must also travel back before its sender gives up:
		// aim a tenth of the time early. (The simulator's deadlines are
		// exact and its answers arrive at once; over the wire, an answer
		// ready at the deadline is late.)
		j.deadline = o.since(now.Add(d - d/deadlineMargin))
	}
	if b := o.cfg.Origin.Broken; b > 0 && a.intent != "" {
		j.broken = unitHash(o.cfg.Seed, a.intent) < b
	}
	var res result
	if a.effect {
		j.exec = &execution{intent: a.intent, key: a.key}
		res = o.execute(j)
	} else {
		res = o.handle(j)
	}
	o.m.requests.WithLabelValues(resultNames[res]).Inc()
	if res != resNone {
		o.m.latency.Observe(time.Since(now).Seconds())
	}
	return res
}

// serveWork is one request over HTTP.
func (o *Origin) serveWork(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	a := arrival{
		intent: r.Header.Get(IntentHeader),
		kind:   r.Header.Get(AttemptHeader),
		effect: !resilhttp.Idempotent(r.Method),
		gone:   r.Context().Done(),
	}
	if v := r.Header.Get(TimeoutHeader); v != "" {
		if d, ok := resilhttp.ParseTimeout(v); ok && d > 0 {
			a.timeout = d
		}
	}
	if a.effect {
		a.key = r.Header.Get(resilhttp.DefaultKeyHeader)
	}
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 1<<20))
	}
	res := o.serve(now, a)
	o.otel.httpServed(r.Context(), r.Method, res, time.Since(now))
	switch res {
	case resOK:
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "ok\n")
	case resError:
		http.Error(w, "origin: failed", http.StatusServiceUnavailable)
	case resRejected:
		http.Error(w, "origin: overloaded", http.StatusServiceUnavailable)
	case resStopped:
		http.Error(w, "origin: shutting down", http.StatusServiceUnavailable)
	case resRefused:
		http.Error(w, "origin: refused (outage)", http.StatusServiceUnavailable)
	case resNone:
		// The client left (or the origin is out and its client is about
		// to): there is no one to answer.
	}
}

var resultNames = [...]string{resOK: "ok", resError: "error", resRejected: "rejected", resNone: "unanswered", resStopped: "stopped", resShed: "shed", resRefused: "refused"}

// attemptKind is the metric label of an attempt's kind, as the gateway
// wrote it (resil's word), or "unknown".
func attemptKind(v string) string {
	var k resil.Kind
	if k.UnmarshalText([]byte(v)) != nil {
		return "unknown"
	}
	return v
}

// execute runs a non-idempotent request: with an idempotency key it runs
// once, and its retries get the answer from memory (or wait for the
// execution in progress, and run if that one failed).
func (o *Origin) execute(j *job) result {
	key := j.exec.key
	if key == "" {
		return o.handle(j)
	}
	for {
		c, mine := o.book.claim(key)
		if mine {
			j.exec.claim = c
			return o.handle(j)
		}
		select {
		case <-c.done:
			if c.executed {
				o.book.replay()
				o.m.replayed.Inc()
				return resOK
			}
			// The execution failed: this request takes its turn.
		case <-j.gone:
			return resNone
		case <-o.stop:
			return resStopped
		}
	}
}

// handle gives j to the model and waits for its answer, its client
// leaving, or the origin stopping.
func (o *Origin) handle(j *job) result {
	o.mu.Lock()
	now := time.Now()
	t := o.since(now)
	o.clk.advance(t)
	if o.stopped || (o.env.outage && !o.env.stalled()) {
		stopped, refuse := o.stopped, o.env.mode == scenario.OutageRefuse
		o.mu.Unlock()
		o.releaseJob(j)
		switch {
		case stopped:
			return resStopped
		case refuse:
			return resRefused
		}
		return o.lost(j)
	}
	r := o.newRequest(j)
	q := &o.reqs[r]
	gen, answer := q.gen, q.answer
	o.model.Arrive(t, r)
	o.mu.Unlock()
	select {
	case res := <-answer:
		return res
	case <-j.gone:
		o.leave(r, gen)
		return resNone
	case <-o.stop:
		o.leave(r, gen)
		o.releaseJob(j)
		return resStopped
	}
}

// leave is the client of request r (of generation gen) going away: its
// handler no longer waits. The model is told when the request is in
// service; a queued one stays queued.
func (o *Origin) leave(r origin.Request, gen uint32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	t := o.since(time.Now())
	o.clk.advance(t)
	q := &o.reqs[r]
	if q.gen != gen || q.answer == nil {
		return // answered meanwhile, or dropped
	}
	q.answer = nil
	if q.serving {
		o.model.Left(t, r)
	}
}

// lost waits out a request that will never be answered (the origin is
// out): until its client leaves, or the origin stops.
func (o *Origin) lost(j *job) result {
	select {
	case <-j.gone:
		return resNone
	case <-o.stop:
		return resStopped
	}
}

// releaseJob frees the key of a request that never reached the model, or
// whose origin stopped. The ledger ignores a claim released twice.
func (o *Origin) releaseJob(j *job) {
	if j.exec != nil {
		o.mu.Lock()
		o.releaseExec(j.exec, false)
		o.mu.Unlock()
	}
}

func (o *Origin) releaseExec(x *execution, executed bool) {
	if c := x.claim; c != nil {
		x.claim = nil
		o.book.release(x.key, c, executed)
	}
}

// waste counts a request served for a client that had left.
func (o *Origin) waste() {
	o.wasted.Add(1)
	o.tally.inc(tWasted)
	o.m.wasted.Inc()
}

// Queued returns the requests waiting for a worker (queue model, those
// whose client left included) or in service (concurrency model), as the
// simulator's queue series counts them.
func (o *Origin) Queued() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.queued()
}

func (o *Origin) queued() int { return o.model.Queued() }

// WouldAnswer reports whether a request arriving now would be answered
// with success within timeout, without sending one: the ground truth
// for the calls a breaker refused. It asks the model as the simulator
// does, and draws the error share.
func (o *Origin) WouldAnswer(timeout time.Duration) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.stopped || o.env.outage || (o.env.errRate > 0 && o.rng.Float64() < o.env.errRate) {
		return false
	}
	t := o.since(time.Now())
	o.clk.advance(t)
	return o.model.WouldAnswer(t, timeout)
}

// OriginCounts are an origin's totals.
type OriginCounts struct {
	// Wasted is requests served after their client left.
	Wasted int64 `json:"wasted_work"`
	// Dropped is requests a drop_expired origin skipped.
	Dropped int64 `json:"dropped"`
	// Executions is the side effects of non-idempotent requests;
	// Duplicates those that repeated an intent's effect; Replayed the
	// keyed retries answered from memory without executing.
	Executions int64 `json:"executions"`
	Duplicates int64 `json:"duplicate_executions"`
	Replayed   int64 `json:"replayed"`
}

// Counts returns the origin's totals so far.
func (o *Origin) Counts() OriginCounts {
	c := OriginCounts{Wasted: o.wasted.Load(), Dropped: o.dropped.Load()}
	c.Executions, c.Duplicates, c.Replayed = o.book.counts()
	return c
}

// unitHash maps (seed, s) to [0, 1): the same intent is broken on every
// attempt.
func unitHash(seed uint64, s string) float64 {
	h := seed ^ 0x9e3779b97f4a7c15
	for i := range len(s) {
		h = (h ^ uint64(s[i])) * 0x100000001b3
	}
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	return float64(h>>11) / (1 << 53)
}

type originMetrics struct {
	requests   *prometheus.CounterVec
	attempts   *prometheus.CounterVec
	inflight   prometheus.Gauge
	latency    prometheus.Histogram
	wasted     prometheus.Counter
	executions prometheus.Counter
	duplicates prometheus.Counter
	replayed   prometheus.Counter
}

func (o *Origin) register() error {
	o.m = originMetrics{
		requests: counterVec("retrystorm_origin_requests_total",
			"Requests the origin received, by result: ok, error (the error share, after the work), rejected (queue full or no capacity), unanswered (the client left, or an outage), stopped, shed (over gRPC with drop_expired: refused at once, its deadline too near), refused (an outage in mode refuse).", "result"),
		attempts: counterVec("retrystorm_origin_attempts_total",
			"Requests the origin received, by why the gateway sent them: first, retry, hedge (unknown without the header).", "kind"),
		inflight: prometheus.NewGauge(prometheus.GaugeOpts{Name: "retrystorm_origin_in_flight",
			Help: "Requests the origin holds whose client still waits: queued or in service."}),
		latency: latencyHistogram("retrystorm_origin_request_duration_seconds",
			"Time from a request's arrival to its answer, for the requests answered."),
		wasted:     counter("retrystorm_origin_wasted_work_total", "Requests served after their client gave up."),
		executions: counter("retrystorm_origin_executions_total", "Side effects of non-idempotent requests (POST, PATCH) that ran."),
		duplicates: counter("retrystorm_origin_duplicate_executions_total",
			"Executions that repeated the side effect of an intent that had already run: retries without an idempotency key."),
		replayed: counter("retrystorm_origin_idempotent_replays_total",
			"Retried requests with an idempotency key answered from memory, without executing again."),
	}
	locked := func(f func() float64) func() float64 { return underLock(&o.mu, f) }
	return registerAll(o.reg, "origin",
		o.m.requests, o.m.attempts, o.m.inflight, o.m.latency, o.m.wasted, o.m.executions, o.m.duplicates, o.m.replayed,
		gaugeFunc("retrystorm_origin_queue_length", "Requests waiting for a worker, those whose client left included.",
			locked(func() float64 { return float64(o.queued()) })),
		gaugeFunc("retrystorm_origin_workers_busy", "Requests in service: workers serving (queue model), or requests in flight (concurrency model).",
			locked(func() float64 { return float64(o.model.Busy()) })),
		gaugeFunc("retrystorm_origin_capacity", "Requests per second the origin serves now, faults included.",
			locked(func() float64 { return o.env.capacity })),
		gaugeFunc("retrystorm_origin_error_share", "Share of requests that fail now, faults included.",
			locked(func() float64 { return o.env.errRate })),
		gaugeFunc("retrystorm_origin_outage", "1 during an outage: nothing answers.",
			locked(func() float64 { return one(o.env.outage) })),
	)
}
