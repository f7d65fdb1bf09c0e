package lab

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/retrystorm/retrystorm/origin"
	"github.com/retrystorm/retrystorm/resil"
	"github.com/retrystorm/retrystorm/resil/admission"
	"github.com/retrystorm/retrystorm/resil/resilgrpc"
	"github.com/retrystorm/retrystorm/resil/resilhttp"
	"github.com/retrystorm/retrystorm/resil/resilprom"
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

// deadlineMargin is the share (1/deadlineMargin) of a fleet's timeout
// that a shedding origin keeps for the answer's way back (WireReserve).
const deadlineMargin = 10

// OriginConfig configures an Origin. Its rates and durations are the
// origin's own, in wall-clock time: give it a scaled scenario's (see
// Scale). The zero value is not usable: Origin needs a model.
type OriginConfig struct {
	// Origin is the model: queue (workers and a queue), capacity
	// (admission up to a rate) or concurrency (latency grows with load).
	// With Origin.Replicas more than 1 the Origin is replica Replica of
	// them: its share of the capacity (and the workers), with its own
	// faults (see Replica).
	Origin scenario.Origin
	// Replica is which of Origin.Replicas this server is, from 0: the
	// faults and triggers naming it are its, and its draws are its own.
	Replica int
	// book, if set, is the idempotency keys' ledger the replicas share, as
	// they would share a database: a key executes once across them. Nil: one
	// of the origin's own.
	book *ledger
	// Triggers are faults on a schedule, from Start: capacity, errors,
	// outage and latency. Load triggers are ignored (they are the load
	// generator's).
	Triggers []scenario.Trigger
	// Start is time 0 of the schedule and of the admin endpoint's times.
	// Zero means when NewOrigin is called.
	Start time.Time
	// Seed seeds the error draws and the service times.
	Seed uint64
	// Tally, if set, receives offered load and successes per tick.
	Tally *Tally
	// AdminToken is the secret /admin/faults requires (see serveAdmin).
	// Empty: the endpoint refuses every request.
	AdminToken string
	// WireReserve is the time a shedding origin keeps for the answer's way
	// back over the wire, on top of the scenario's shed.reserve: the
	// simulator's answers arrive at once, but over HTTP an answer ready at
	// the deadline is late. runFleet gives a tenth of the fleet's timeout.
	WireReserve time.Duration
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
// (wasted work), as in the simulator, unless the origin sheds.
//
// An origin that sheds by deadline or has a concurrency limit (or
// drop_expired) serves its work behind resilhttp.Shed over HTTP, and
// behind resilgrpc's server interceptor (resilgrpc.ServerSettings.Shedder)
// over gRPC, both with the one resil Shedder the origin package makes for
// the scenario's origin: the edge reads the deadline each attempt
// propagates (TimeoutHeader, or gRPC's own), refuses at once what has
// expired, cannot finish in time or is over the limit, and puts the
// deadline, less the reserve, on the handler's context; both edges then
// share one path into the model (serve). The model's queue decides with
// the same Shedder's DeadlineShedder when a worker would take a request,
// and stops one whose client leaves. The Shedder's counts and state are
// on the origin's registry (resilprom.RegisterShedder). The error share
// is decided after the service, so errors cost work, as in the simulator.
//
// Make one with NewOrigin, serve Handler, and call Run: it drives the
// clock and the fault schedule, and requests are refused once it returns.
// An Origin is safe for concurrent use.
type Origin struct {
	wallServer[originReq, result] // its service is an answer: see answerService
	cfg                           OriginConfig
	m                             originMetrics
	otel                          *originOTel
	shed                          *resilgrpc.Server // the gRPC edge's admission, over shedder; nil when it admits everything
	book                          *ledger
	kick                          chan struct{} // wakes the fault schedule

	injected []scenario.Trigger // from the admin endpoint; guarded by mu

	shedder *admission.Shedder // nil: the origin admits everything
	reserve time.Duration      // the shedder's deadline reserve
}

// NewOrigin returns an origin for cfg, or an error for a model the lab
// cannot run.
func NewOrigin(cfg OriginConfig) (*Origin, error) {
	o := cfg.Origin
	replicas := max(o.Replicas, 1)
	if cfg.Replica < 0 || cfg.Replica >= replicas {
		return nil, fmt.Errorf("lab: OriginConfig.Replica %d: the origin has %d replicas", cfg.Replica, replicas)
	}
	start := cfg.Start
	if start.IsZero() {
		start = time.Now()
	}
	org := &Origin{
		cfg:  cfg,
		book: cfg.book,
		kick: make(chan struct{}, 1),
	}
	// Replica 0's streams are the one-replica origin's: its draws stay
	// what they were.
	stream := 0x0519 | uint64(cfg.Replica)<<32
	if org.book == nil {
		org.book = newLedger(1 << 16)
	}
	org.init(start, cfg.Tally, cfg.Seed, stream, (*answerService)(org))
	// The admission is the HTTP middleware's, with the settings the
	// simulator's origin admits by, and the reserve for the wire; the
	// model sheds with the same Shedder.
	var opts origin.Options
	ss, ok, err := origin.ShedderSettings(&o)
	if err != nil {
		return nil, fmt.Errorf("lab: %w", err)
	}
	if ok || o.DropExpired {
		ss.Deadline.Reserve += cfg.WireReserve
		if org.shedder, err = admission.NewShedder(ss); err != nil {
			return nil, fmt.Errorf("lab: the origin's shedding: %w", err)
		}
		org.reserve = ss.Deadline.Reserve
		opts = origin.Options{Shedder: org.shedder, Reserve: cfg.WireReserve}
	}
	// Service times draw from a stream of their own: the error draws'
	// stay as they were, and the same seed gives the same times.
	opts.Rand = serviceRand(cfg.Seed, &o, stream)
	m, err := origin.NewWith(&o, cfg.Replica, replicas, org.driver(), opts)
	if err != nil {
		return nil, fmt.Errorf("lab: %w", err)
	}
	org.model = m
	org.setEnv(org.envAt(cfg.Triggers, 0), start)
	if err := org.register(); err != nil {
		return nil, err
	}
	if org.otel, err = newOriginOTel(org.reg); err != nil {
		return nil, err
	}
	if org.shedder != nil {
		if _, err := resilprom.RegisterShedder(org.reg, "origin", org.shedder); err != nil {
			return nil, fmt.Errorf("lab: origin metrics: %w", err)
		}
		// The gRPC edge admits through the same Shedder as the HTTP
		// middleware: one admission, whatever the wire.
		if org.shed, err = resilgrpc.NewServer(resilgrpc.ServerSettings{Shedder: org.shedder}); err != nil {
			return nil, fmt.Errorf("lab: %w", err)
		}
	}
	return org, nil
}

// envAt is the env the faults make at t for this origin: the whole of
// the scenario's, or its replica's share.
func (o *Origin) envAt(faults []scenario.Trigger, t time.Duration) env {
	if o.cfg.Origin.Replicas <= 1 && len(o.cfg.Origin.Faults) == 0 && !namesReplica(faults) {
		return envAt(&o.cfg.Origin, faults, t)
	}
	return replicaEnvAt(&o.cfg.Origin, faults, t, o.cfg.Replica)
}

// namesReplica reports whether a fault of faults hits one replica.
func namesReplica(faults []scenario.Trigger) bool {
	for _, f := range faults {
		if f.Replica != nil {
			return true
		}
	}
	return false
}

// Handler serves the origin: /metrics, /admin/faults, /healthz, and every
// other path as work, behind resilhttp.Shed when the origin sheds.
func (o *Origin) Handler() http.Handler {
	mux := o.mux()
	mux.HandleFunc("/admin/faults", o.serveAdmin)
	work := http.Handler(http.HandlerFunc(o.serveWork))
	if o.shedder != nil {
		work = resilhttp.Shed(o.shedder)(work)
	}
	mux.Handle("/", o.arrive(work))
	return mux
}

// edgeCall is one request on its way through the origin's edge: its
// client's connection (whose end is the client leaving, where the
// shedding middleware's context ends at the deadline less the reserve),
// and its result, resShed until the work handler answers it (it never
// does when the middleware sheds it).
type edgeCall struct {
	conn context.Context
	res  result
	tick int // the tick it was sent in (TickHeader)
}

type callKey struct{}

// arrive counts a request reaching the origin's HTTP edge (by kind, in the
// metrics), shed or not, hands it to work, and records how it ended.
func (o *Origin) arrive(work http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now()
		c := o.arrived(r.Context(), now, r.Header.Get(AttemptHeader))
		c.tick = o.tally.sentTick(r.Header.Get(TickHeader), now)
		work.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), callKey{}, c)))
		o.ended(c)
		o.otel.httpServed(r.Context(), r.Method, c.res, time.Since(now))
	})
}

// arrived counts a request reaching the origin, whatever the edge it came
// by and whether or not it is shed there, in its metrics: by kind, and in
// flight until ended. (The tally's offered load is what the gateway sent.)
func (o *Origin) arrived(conn context.Context, now time.Time, kind string) *edgeCall {
	o.m.attempts.WithLabelValues(attemptKind(kind)).Inc()
	o.m.inflight.Inc()
	return &edgeCall{conn: conn, res: resShed}
}

// ended is the end of c at the edge: a request the work handler never saw
// was shed.
func (o *Origin) ended(c *edgeCall) {
	o.m.inflight.Dec()
	if c.res == resShed {
		o.m.requests.WithLabelValues(resultNames[resShed]).Inc()
	}
}

// admitted returns the call of a request the edge admitted to the work
// handler, from the handler's context, and the caller's deadline as the
// shedding edge read it (the handler's deadline plus the reserve; zero
// when the origin does not shed or none came). A context without a call
// (a handler served on its own, in a test) is its own connection.
func (o *Origin) admitted(ctx context.Context) (*edgeCall, time.Time) {
	c, ok := ctx.Value(callKey{}).(*edgeCall)
	if !ok {
		c = &edgeCall{conn: ctx}
	}
	var deadline time.Time
	if dl, ok := ctx.Deadline(); ok && o.shedder != nil {
		deadline = dl.Add(o.reserve)
	}
	return c, deadline
}

// result is the origin's answer to one request.
type result uint8

const (
	resOK       result = iota // 200
	resError                  // 503: the error share, after the work
	resRejected               // 503 at once: queue full, or no capacity credit
	resNone                   // no answer: its client left, or the origin is out
	resStopped                // 503: the origin is shutting down
	resShed                   // 503 at once: refused by the edge's admission (resil's Shedder), before the work handler
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
// service) knows of a request its admission let through, in the lab's
// words.
type arrival struct {
	intent string // IntentHeader
	tick   int    // the tick it was sent in (TickHeader), for the success it earns
	// deadline is when its sender stops waiting for the answer, as the
	// edge's admission read the propagated deadline; zero when unknown or
	// when the origin does not shed. The model's shedding keeps the
	// reserve for the way back itself.
	deadline time.Time
	// effect says it is an execution with a side effect (a POST; over
	// gRPC, IdempotentHeader "false"), deduplicated by key when it has one.
	effect bool
	key    string
	// gone is closed when its client leaves: its connection (its stream)
	// ends, not the admission's context, which ends sooner, at the
	// deadline less the reserve, while the client may still wait.
	gone <-chan struct{}
}

// serve is one request the origin admitted, whatever the protocol it came
// by: handed to the model, its result counted and returned for the edge
// to answer.
func (o *Origin) serve(now time.Time, a arrival) result {
	j := &job{tick: a.tick, gone: a.gone}
	if !a.deadline.IsZero() {
		j.deadline = o.since(a.deadline)
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

// serveWork is one request over HTTP that the edge admitted (see arrive).
func (o *Origin) serveWork(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	c, deadline := o.admitted(r.Context())
	a := arrival{
		intent:   r.Header.Get(IntentHeader),
		tick:     c.tick,
		deadline: deadline,
		effect:   !resilhttp.Idempotent(r.Method),
		gone:     c.conn.Done(),
	}
	if a.effect {
		a.key = r.Header.Get(resilhttp.DefaultKeyHeader)
	}
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 1<<20))
	}
	res := o.serve(now, a)
	c.res = res
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
	t := o.catchUp()
	if o.stopped || (o.env.outage && !o.env.stalled()) {
		stopped, refuse := o.stopped, scenario.Refuses(o.env.mode)
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
	r, gen, answer := o.accept(t, held[originReq, result]{tick: j.tick, deadline: j.deadline, own: originReq{broken: j.broken, exec: j.exec}})
	o.mu.Unlock()
	res, w := o.await(r, gen, answer, j.gone)
	switch w {
	case waitGone:
		return resNone
	case waitStopped:
		o.leave(r, gen)
		o.releaseJob(j)
		return resStopped
	}
	return res
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

// Run drives the origin's clock and its fault schedule until ctx is done;
// then it refuses new work and lets the requests still waiting go. Call it
// once.
func (o *Origin) Run(ctx context.Context) { o.run(ctx, o.schedule) }

// schedule applies the faults at their boundaries until ctx is done.
func (o *Origin) schedule(ctx context.Context) {
	scheduleFaults(ctx, o.kick, o.start, func(now time.Time) []scenario.Trigger {
		o.mu.Lock()
		defer o.mu.Unlock()
		return o.applyFaults(now)
	})
}

// originReq is what the Origin keeps of a request the model holds.
type originReq struct {
	broken bool       // its intent's key is in the broken share: it always fails
	exec   *execution // set for non-idempotent requests: their side effect is counted
}

// answerService is the Origin's strategy: serving is answering, when the
// model says, with the faults in force (finish).
type answerService Origin

func (a *answerService) answer(r origin.Request, at time.Duration) {
	a.clk.at(due{at: at, r: r, gen: a.reqs[r].gen, kind: dueAnswer})
}

func (a *answerService) serve(r origin.Request, end time.Duration) {
	a.clk.at(due{at: end, r: r, gen: a.reqs[r].gen, kind: dueService})
}

func (a *answerService) reject(r origin.Request) { (*Origin)(a).reject(r) }

// drop: a shedding origin skips r; its client will time out.
func (a *answerService) drop(r origin.Request) {
	o := (*Origin)(a)
	o.releaseKey(&o.reqs[r].own, false)
	o.recycle(r)
}

// fire answers r (a dueAnswer or a dueService), and ends its service.
func (a *answerService) fire(e due, at time.Duration) {
	o := (*Origin)(a)
	o.finish(e.r)
	if e.kind == dueService {
		o.done(e.r, at)
	}
	o.recycle(e.r)
}

// left: the model hears a client leave a request in service (a queued
// one stays queued, and is served for nobody).
func (a *answerService) left(origin.Request, time.Duration) bool { return true }

// reject answers r with an overload rejection. The lock is held.
func (o *Origin) reject(r origin.Request) {
	o.releaseKey(&o.reqs[r].own, false)
	o.tell(r, resRejected)
	o.recycle(r)
}

// finish settles request r after its service (or its admission, for an
// answer known on arrival): its success counts for the tick it arrived
// in, its side effect is booked, and it is wasted work when nobody waits
// for it. The lock is held.
func (o *Origin) finish(r origin.Request) {
	q := &o.reqs[r]
	ok := !q.own.broken && !(o.env.errRate > 0 && o.rng.Float64() < o.env.errRate)
	rejected := ok && o.env.rejRate > 0 && o.rng.Float64() < o.env.rejRate
	ok = ok && !rejected
	if o.env.outage && scenario.Refuses(o.env.mode) {
		ok = false // the answer fails, as a reset connection does
	}
	if ok {
		o.tally.add(cSuccesses, q.tick)
	}
	if x := q.own.exec; x != nil {
		if ok && o.book.executed(x.intent) {
			o.m.duplicates.Inc()
		}
		if ok {
			o.m.executions.Inc()
		}
		o.releaseKey(&q.own, ok)
	}
	switch {
	case q.tell == nil:
		o.waste()
	case o.env.outage && o.env.mode == scenario.OutageBlackhole:
		// The answer is lost; the handler waits for its client to leave.
	case ok:
		o.tell(r, resOK)
	case rejected && !(o.env.outage && scenario.Refuses(o.env.mode)):
		o.tell(r, resRejected) // a rejection trigger: 503
	default:
		o.tell(r, resError)
	}
}

// releaseKey frees the idempotency key q holds, if any: executed says
// whether its effect happened. The origin's lock may be held (the
// ledger's comes after it).
func (o *Origin) releaseKey(q *originReq, executed bool) {
	if q.exec != nil {
		o.releaseExec(q.exec, executed)
	}
}

// OriginCounts are an origin's totals.
type OriginCounts struct {
	// Wasted is requests served after their client left.
	Wasted int64 `json:"wasted_work"`
	// Dropped is requests a shedding origin skipped, unanswered.
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
			"Requests the origin received, by result: ok, error (the error share, after the work), rejected (queue full, no capacity, or shed by the model), shed (refused on arrival by the edge's admission: resilhttp.Shed, or resilgrpc's interceptor, over one resil Shedder), unanswered (the client left, or an outage), stopped, refused (an outage in mode refuse).", "result"),
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
	o.wastedTotal = o.m.wasted
	locked := func(f func() float64) func() float64 { return underLock(&o.mu, f) }
	return registerAll(o.reg, "origin",
		o.m.requests, o.m.attempts, o.m.inflight, o.m.latency, o.m.wasted, o.m.executions, o.m.duplicates, o.m.replayed,
		gaugeFunc("retrystorm_origin_queue_length", "Requests waiting for a worker, those whose client left included.",
			locked(func() float64 { return float64(o.model.Queued()) })),
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
