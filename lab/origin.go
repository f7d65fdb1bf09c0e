package lab

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

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
	// wait for this answer, as a Go duration ("87.5ms"). Relative, as in
	// gRPC's grpc-timeout, so that clocks need not agree.
	TimeoutHeader = "Retrystorm-Timeout"
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
// In the queue model, W workers serve a FIFO or LIFO queue, bounded or not;
// a request holds a worker for workers/capacity seconds. Like most servers
// it does not notice that a client gave up: a request whose client left is
// still served, wasted work, unless drop_expired is on. Then it reads the
// propagated deadline (TimeoutHeader) and the request's context before and
// during service, and skips a request that cannot be answered in time. The
// error share is decided after the service time, so errors cost work, as in
// the simulator.
//
// Make one with NewOrigin, serve Handler, and call Run to start its workers
// and schedule; requests wait until Run starts and are refused once it
// returns. An Origin is safe for concurrent use.
type Origin struct {
	cfg   OriginConfig
	start time.Time
	tally *Tally
	reg   *prometheus.Registry
	m     originMetrics
	book  *ledger
	kick  chan struct{} // wakes the fault schedule
	stop  chan struct{} // closed when Run returns

	mu       sync.Mutex
	cond     *sync.Cond // workers wait on it for work
	env      env
	service  time.Duration // queue: how long a request holds a worker now
	resumed  time.Time     // queue: when capacity last came back from zero
	q        jobQueue
	busy     int // queue: workers serving
	inflight int // concurrency: requests in service
	credit   float64
	refilled time.Time // capacity: when credit was last brought up to date
	stopped  bool
	injected []scenario.Trigger // from the admin endpoint
	rng      *rand.Rand

	wasted, dropped atomic.Int64
}

// NewOrigin returns an origin for cfg, or an error for a model the lab
// cannot run.
func NewOrigin(cfg OriginConfig) (*Origin, error) {
	o := cfg.Origin
	switch o.Model {
	case scenario.ModelQueue:
		if o.Workers < 1 {
			return nil, fmt.Errorf("lab: the queue model needs at least one worker, got %d", o.Workers)
		}
	case scenario.ModelCapacity, scenario.ModelConcurrency:
	default:
		return nil, fmt.Errorf("lab: unknown origin model %q", o.Model)
	}
	if o.Replicas > 1 {
		return nil, fmt.Errorf("lab: the lab's origin is one replica; the scenario has %d (run it in the simulator)", o.Replicas)
	}
	if (o.Model != scenario.ModelConcurrency) && o.Capacity <= 0 {
		return nil, fmt.Errorf("lab: origin capacity must be more than 0, got %g", o.Capacity)
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
	org.cond = sync.NewCond(&org.mu)
	org.setEnv(envAt(&o, cfg.Triggers, 0), start)
	org.credit, org.refilled = org.reserve(), start
	if err := org.register(); err != nil {
		return nil, err
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

// Run starts the workers and the fault schedule, and blocks until ctx is
// done; then it refuses new work, lets the workers go and waits for them.
// Call it once.
func (o *Origin) Run(ctx context.Context) {
	var wg sync.WaitGroup
	if o.cfg.Origin.Model == scenario.ModelQueue {
		for i := range o.cfg.Origin.Workers {
			wg.Go(func() { o.work(i) })
		}
	}
	o.schedule(ctx)
	o.mu.Lock()
	o.stopped = true
	close(o.stop)
	o.cond.Broadcast()
	o.mu.Unlock()
	wg.Wait()
}

// schedule applies the faults at their boundaries until ctx is done.
func (o *Origin) schedule(ctx context.Context) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-o.kick:
		}
		now := time.Now()
		t := now.Sub(o.start)
		o.mu.Lock()
		faults := o.applyFaults(now)
		o.mu.Unlock()
		// Wake at the next boundary, or now and then to stay honest
		// about the clock; a kick from the admin endpoint comes sooner.
		wait := time.Minute
		if next, ok := nextChange(faults, t); ok {
			wait = min(wait, next-t)
		}
		timer.Reset(wait)
	}
}

// setEnv puts e in force at now. The lock is held.
func (o *Origin) setEnv(e env, now time.Time) {
	o.refill(now) // at the old rate, up to now
	wasStalled := o.env.capacity <= 0
	o.env = e
	if e.capacity > 0 {
		o.service = time.Duration(float64(o.cfg.Origin.Workers) / e.capacity * e.factor * float64(time.Second))
		if wasStalled {
			o.resumed = now
		}
	}
	o.cond.Broadcast() // workers stalled at zero capacity start again
}

// result is the origin's answer to one request.
type result uint8

const (
	resOK       result = iota // 200
	resError                  // 503: the error share, after the work
	resRejected               // 503 at once: queue full, or no capacity credit
	resNone                   // no answer: its client left, or the origin is out
	resStopped                // 503: the origin is shutting down
)

// serveWork is one request: counted, queued or admitted, answered.
func (o *Origin) serveWork(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	j := &job{arrived: now, tick: o.tally.TickOf(now), gone: r.Context().Done()}
	o.tally.add(cOffered, j.tick)
	o.m.attempts.WithLabelValues(attemptKind(r.Header.Get(AttemptHeader))).Inc()
	o.m.inflight.Inc()
	defer o.m.inflight.Dec()
	if v := r.Header.Get(TimeoutHeader); v != "" {
		if d, err := time.ParseDuration(v); err == nil && d > 0 {
			// The answer must also travel back before its sender gives
			// up: aim a tenth of the time early. (The simulator's
			// deadlines are exact and its answers arrive at once; over
			// HTTP, an answer ready at the deadline is late.)
			j.deadline = now.Add(d - d/deadlineMargin)
		}
	}
	intent := r.Header.Get(IntentHeader)
	if b := o.cfg.Origin.Broken; b > 0 && intent != "" {
		j.broken = unitHash(o.cfg.Seed, intent) < b
	}
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 1<<20))
	}

	var res result
	if !resilhttp.Idempotent(r.Method) {
		j.exec = &execution{intent: intent, key: r.Header.Get(resilhttp.DefaultKeyHeader)}
		res = o.execute(j)
	} else {
		res = o.handle(j)
	}
	o.m.requests.WithLabelValues(resultNames[res]).Inc()
	if res != resNone {
		o.m.latency.Observe(time.Since(now).Seconds())
	}
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
	case resNone:
		// The client left (or the origin is out and its client is about
		// to): there is no one to answer.
	}
}

var resultNames = [...]string{resOK: "ok", resError: "error", resRejected: "rejected", resNone: "unanswered", resStopped: "stopped"}

func attemptKind(v string) string {
	switch v {
	case "first", "retry", "hedge":
		return v
	}
	return "unknown"
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

// handle gives j to the model and waits for its answer.
func (o *Origin) handle(j *job) result {
	switch o.cfg.Origin.Model {
	case scenario.ModelQueue:
		return o.enqueue(j)
	case scenario.ModelCapacity:
		return o.admit(j)
	}
	return o.concurrent(j)
}

// finish settles a request the origin served (or started to): its success
// counts for the tick it arrived in, its side effect is booked, and it is
// wasted work when nobody waits for it. The lock is held.
func (o *Origin) finish(j *job, served bool, now time.Time) (ok bool) {
	ok = served && !j.broken && !(o.env.errRate > 0 && o.rng.Float64() < o.env.errRate)
	if ok {
		o.tally.add(cSuccesses, j.tick)
	}
	if x := j.exec; x != nil {
		if ok && o.book.executed(x.intent) {
			o.m.duplicates.Inc()
		}
		if ok {
			o.m.executions.Inc()
		}
		o.release(j, ok)
	}
	return ok
}

// release frees the idempotency key j holds, if any: executed says whether
// its effect happened. The origin's lock may be held (the ledger's comes
// after it).
func (o *Origin) release(j *job, executed bool) {
	if x := j.exec; x != nil && x.claim != nil {
		c := x.claim
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

// enqueue is the queue model's arrival.
func (o *Origin) enqueue(j *job) result {
	o.mu.Lock()
	if res, closed := o.closed(j); closed {
		return res
	}
	if o.cfg.Origin.QueueLimit > 0 && o.q.len() >= o.cfg.Origin.QueueLimit {
		o.mu.Unlock()
		return o.settleUnserved(j, resRejected)
	}
	j.done = make(chan result, 1)
	o.q.push(j)
	o.cond.Signal()
	o.mu.Unlock()
	select {
	case res := <-j.done:
		return res
	case <-j.gone:
		o.leave(j)
		return resNone
	case <-o.stop:
		o.leave(j)
		return resStopped
	}
}

// closed is called with the lock held, on arrival: when the origin is
// stopping or out, it releases the lock, waits if need be, and returns the
// answer and true; otherwise it keeps the lock and returns false.
func (o *Origin) closed(j *job) (result, bool) {
	if !o.stopped && !o.env.outage {
		return 0, false
	}
	stopped := o.stopped
	o.mu.Unlock()
	if stopped {
		return o.settleUnserved(j, resStopped), true
	}
	return o.settleUnserved(j, o.lost(j)), true
}

// concurrencyLatency is how long a request arriving now takes in the
// concurrency model. The lock is held.
func (o *Origin) concurrencyLatency() time.Duration {
	m := &o.cfg.Origin
	return time.Duration(float64(m.Base+time.Duration(o.inflight)*m.PerInflight) * o.env.factor)
}

// settleUnserved releases the key claim of a request that never reached a
// worker, and returns res.
func (o *Origin) settleUnserved(j *job, res result) result {
	o.release(j, false)
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

// leave is j's client going away. A waiting request becomes a ghost that
// will still cost a worker's time, unless drop_expired, which notices and
// drops it. One in service goes on (the worker notices under
// drop_expired).
func (o *Origin) leave(j *job) {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch j.state {
	case jobQueued:
		if o.cfg.Origin.DropExpired {
			o.q.remove(j)
			o.drop(j)
			return
		}
		o.q.haunt(j)
	case jobServing:
		j.state = jobLeft
	}
}

// work is one worker: it takes the next request, holds it for the service
// time, answers. A worker's time is kept on a schedule of its own (a
// request starts when the previous one ended, or when it arrived), so that
// the wake-up delays of timers do not eat into the origin's capacity.
func (o *Origin) work(id int) {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	var freeAt time.Time
	for {
		o.mu.Lock()
		for !o.stopped && (o.q.len() == 0 || o.env.capacity <= 0) {
			o.cond.Wait()
		}
		if o.stopped {
			o.mu.Unlock()
			return
		}
		j := o.q.pop(o.cfg.Origin.Discipline == "lifo")
		now := time.Now()
		service := o.service
		// Catch up with timer lateness, by at most one service time.
		start := latest(freeAt, o.resumed, now.Add(-service))
		if j.state != jobGhost {
			start = latest(start, j.arrived)
		}
		end := start.Add(service)
		if j.state == jobQueued && o.cfg.Origin.DropExpired && o.expired(j, end) {
			o.drop(j)
			o.mu.Unlock()
			continue
		}
		// Under drop_expired, a request whose client leaves mid-service
		// frees its worker.
		var gone <-chan struct{}
		if j.state == jobQueued {
			j.state = jobServing
			if o.cfg.Origin.DropExpired {
				gone = j.gone
			}
		}
		o.busy++
		o.mu.Unlock()

		served, stopped := o.serve(timer, gone, end)
		if served {
			freeAt = end
		} else {
			freeAt = time.Now()
		}
		o.mu.Lock()
		o.busy--
		o.answer(j, served, time.Now())
		o.mu.Unlock()
		if stopped {
			return
		}
	}
}

func latest(ts ...time.Time) time.Time {
	var t time.Time
	for _, x := range ts {
		if x.After(t) {
			t = x
		}
	}
	return t
}

// expired reports whether j's client has left, or will have by end.
func (o *Origin) expired(j *job, end time.Time) bool {
	select {
	case <-j.gone:
		return true
	default:
	}
	return !j.deadline.IsZero() && end.After(j.deadline)
}

// drop skips j: a drop_expired origin does not serve a request that cannot
// be answered in time. Its client will time out. The lock is held.
func (o *Origin) drop(j *job) {
	j.state = jobDone
	o.dropped.Add(1)
	o.tally.inc(tDropped)
	o.release(j, false)
}

// serve holds a worker until end, or until gone is closed (nil: never). It
// reports whether the service ran to its end, and whether the origin is
// stopping.
func (o *Origin) serve(timer *time.Timer, gone <-chan struct{}, end time.Time) (served, stopped bool) {
	d := time.Until(end)
	if d <= 0 {
		return true, false
	}
	timer.Reset(d)
	select {
	case <-timer.C:
		return true, false
	case <-gone:
		timer.Stop()
		return false, false
	case <-o.stop:
		timer.Stop()
		return false, true
	}
}

// answer settles j after its service. The lock is held.
func (o *Origin) answer(j *job, served bool, now time.Time) {
	switch {
	case !served && o.stopped:
		o.release(j, false)
		j.state = jobDone
		return
	case !served:
		o.drop(j) // drop_expired: its client left mid-service
		return
	}
	ok := o.finish(j, served, now)
	switch {
	case j.state == jobGhost || j.state == jobLeft:
		o.waste()
	case o.env.outage:
		// The answer is lost; the handler waits for its client to leave.
	default:
		res := resError
		if ok {
			res = resOK
		}
		j.done <- res
	}
	j.state = jobDone
}

// reserve is the credit the capacity model may save: a tenth of a second
// of capacity, at least one request, as in the simulator.
func (o *Origin) reserve() float64 { return max(1, o.env.capacity/10) }

// refill brings the capacity model's credit up to now. The lock is held.
func (o *Origin) refill(now time.Time) {
	if dt := now.Sub(o.refilled); dt > 0 {
		o.credit = min(o.reserve(), o.credit+o.env.capacity*dt.Seconds())
		o.refilled = now
	}
}

// admit is the capacity model: up to capacity per second are answered
// after the latency, the rest rejected at once; a rejection still costs
// rejection_cost of a request's work.
func (o *Origin) admit(j *job) result {
	now := time.Now()
	o.mu.Lock()
	if res, closed := o.closed(j); closed {
		return res
	}
	o.refill(now)
	if o.credit < 1 {
		o.credit = max(o.credit-o.cfg.Origin.RejectionCost, -o.reserve())
		o.mu.Unlock()
		return o.settleUnserved(j, resRejected)
	}
	o.credit--
	o.mu.Unlock()
	return o.sleepThenAnswer(j, o.cfg.Origin.Latency)
}

// concurrent is the concurrency model: no queue, but every request takes
// base + per_inflight × (requests in flight).
func (o *Origin) concurrent(j *job) result {
	o.mu.Lock()
	if res, closed := o.closed(j); closed {
		return res
	}
	lat := o.concurrencyLatency()
	o.inflight++
	o.mu.Unlock()
	res := o.sleepThenAnswer(j, lat)
	o.mu.Lock()
	o.inflight--
	o.mu.Unlock()
	return res
}

// sleepThenAnswer serves j in its own goroutine for d, and answers.
func (o *Origin) sleepThenAnswer(j *job, d time.Duration) result {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-o.stop:
		return o.settleUnserved(j, resStopped)
	}
	o.mu.Lock()
	ok := o.finish(j, true, time.Now())
	outage := o.env.outage
	o.mu.Unlock()
	select {
	case <-j.gone:
		o.waste()
		return resNone
	default:
	}
	switch {
	case outage:
		return o.lost(j)
	case ok:
		return resOK
	}
	return resError
}

// Queued returns the requests waiting for a worker (queue model, ghosts
// included) or in service (concurrency model), as the simulator's queue
// series counts them.
func (o *Origin) Queued() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.queued()
}

func (o *Origin) queued() int {
	if o.cfg.Origin.Model == scenario.ModelConcurrency {
		return o.inflight
	}
	return o.q.len()
}

// WouldAnswer reports whether a request arriving now would be answered
// with success within timeout, without sending one: the ground truth
// for the calls a breaker refused. It reads the model's state as the
// simulator does, and draws the error share.
func (o *Origin) WouldAnswer(timeout time.Duration) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.stopped || o.env.outage || (o.env.errRate > 0 && o.rng.Float64() < o.env.errRate) {
		return false
	}
	switch o.cfg.Origin.Model {
	case scenario.ModelCapacity:
		o.refill(time.Now())
		return o.credit >= 1 && o.cfg.Origin.Latency <= timeout
	case scenario.ModelConcurrency:
		return o.concurrencyLatency() <= timeout
	}
	if o.env.capacity <= 0 {
		return false
	}
	s := o.service
	ahead := time.Duration(o.q.len())
	if o.cfg.Origin.Discipline == "lifo" {
		ahead = 0
	}
	if o.busy < o.cfg.Origin.Workers && ahead == 0 {
		return s <= timeout
	}
	// Those in service have half their time left on average, then the
	// backlog ahead goes by in rounds of one per worker.
	return ahead*s/time.Duration(o.cfg.Origin.Workers)+s/2+s <= timeout
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
			"Requests the origin received, by result: ok, error (the error share, after the work), rejected (queue full or no capacity), unanswered (the client left, or an outage), stopped.", "result"),
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
	locked := func(f func() float64) func() float64 {
		return func() float64 {
			o.mu.Lock()
			defer o.mu.Unlock()
			return f()
		}
	}
	return registerAll(o.reg, "origin",
		o.m.requests, o.m.attempts, o.m.inflight, o.m.latency, o.m.wasted, o.m.executions, o.m.duplicates, o.m.replayed,
		gaugeFunc("retrystorm_origin_queue_length", "Requests waiting for a worker, those whose client left included.",
			locked(func() float64 { return float64(o.queued()) })),
		gaugeFunc("retrystorm_origin_workers_busy", "Workers serving a request (queue model).",
			locked(func() float64 { return float64(o.busy) })),
		gaugeFunc("retrystorm_origin_capacity", "Requests per second the origin serves now, faults included.",
			locked(func() float64 { return o.env.capacity })),
		gaugeFunc("retrystorm_origin_error_share", "Share of requests that fail now, faults included.",
			locked(func() float64 { return o.env.errRate })),
		gaugeFunc("retrystorm_origin_outage", "1 during an outage: nothing answers.",
			locked(func() float64 {
				if o.env.outage {
					return 1
				}
				return 0
			})),
	)
}
