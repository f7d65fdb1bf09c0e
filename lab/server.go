package lab

import (
	"context"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/retrystorm/retrystorm/origin"
)

// wallServer is one replica of an origin model (package origin, the
// simulator's own) on the wall clock: the lab's counterpart of the
// simulator's drivers of it (sim/origin.go, sim/chain.go), and what each of
// the lab's three servers is; replicas would be N of it. A handler hands
// its request to the model under the lock (accept) and waits for what the
// server tells it (await); the clock (see clock.go) does what the model
// scheduled when it falls due. The server is the model's driver
// (origin.Driver, below) and keeps what the model needs to know of each
// request: its propagated deadline and whether its client still waits.
//
// What serving means is the server's strategy, a service: the Origin
// answers (origin.go), the FaultProxy forwards to a target (proxy.go), a
// Tier calls the next tier (tier.go). R is what the strategy keeps of a
// request, M what it tells the request's handler.
//
// Every field below mu is guarded by it, as is every call to the model and
// to the service.
type wallServer[R, M any] struct {
	start time.Time
	tally *Tally               // the hop into the server: its load, successes, waste and drops
	reg   *prometheus.Registry // the server's metrics
	stop  chan struct{}        // closed when Run returns
	svc   service

	mu      sync.Mutex
	model   origin.Model
	clk     clock // answers, ends of service and calls to come
	env     env   // the faults in force; the zero value (none) for a tier
	stopped bool
	rng     *rand.Rand       // the error draws
	reqs    []held[R, M]     // by origin.Request
	free    []origin.Request // reqs' slots free for a new request
	now     time.Duration    // the time of the model call in progress

	wasted, dropped atomic.Int64
	wastedTotal     prometheus.Counter // the server's wasted-work metric, once registered
}

// held is one request a server holds, from its arrival to the last
// decision the model and the service make about it. Its slot is reused
// afterwards; gen tells the uses apart, for the handler and the due
// entries that still name it.
type held[R, M any] struct {
	gen      uint32
	tick     int           // the tick it was sent in (TickHeader), for the success it earns
	deadline time.Duration // when its client gives up, from start, if it said; 0: unknown
	serving  bool          // in service (the model's Serve): the model's Done is due
	tell     chan M        // its handler waits on it (buffered); nil once told, or once its client left
	own      R             // what the service keeps of it
}

// service is what serving means for a wallServer: what it does with the
// model's decisions about a request and with the due entries it
// scheduled. The server's lock is held in every method, and r is a
// request the server holds.
type service interface {
	// answer: the model admitted r and is done with it; its answer is
	// due at at.
	answer(r origin.Request, at time.Duration)
	// serve: r is in service from the server's now (serving is set); the
	// model's service time ends it at end.
	serve(r origin.Request, end time.Duration)
	// reject refuses r at once (at the end of the stall that put it off,
	// if one did).
	reject(r origin.Request)
	// drop lets r go unanswered (it is counted already): the model
	// skipped it, or stopped its service.
	drop(r origin.Request)
	// fire does due entry e, of a kind the service scheduled, at at.
	fire(e due, at time.Duration)
	// left is r's client going away (its tell is nil already): it
	// reports whether the model hears it when r is in service.
	left(r origin.Request, t time.Duration) bool
}

// init readies s: time 0 at start, the hop tally, error draws from
// (seed, stream), and svc as what serving means.
func (s *wallServer[R, M]) init(start time.Time, tally *Tally, seed, stream uint64, svc service) {
	s.start, s.tally, s.svc = start, tally, svc
	s.reg = prometheus.NewRegistry()
	s.stop = make(chan struct{})
	s.rng = rand.New(rand.NewPCG(seed, stream))
	s.clk = newClock(start, s.fire)
}

// driver returns s as its model's driver.
func (s *wallServer[R, M]) driver() origin.Driver { return (*wallDriver[R, M])(s) }

// Registry returns the registry the server's metrics are on.
func (s *wallServer[R, M]) Registry() *prometheus.Registry { return s.reg }

// mux returns a mux serving the server's /metrics and /healthz, for its
// Handler to add its work to.
func (s *wallServer[R, M]) mux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc(healthPath, serveHealth)
	return mux
}

// since is t as the model's time: from the server's start.
func (s *wallServer[R, M]) since(t time.Time) time.Duration { return s.clk.since(t) }

// catchUp returns the model's time now, once what fell due by then has
// happened. The lock is held.
func (s *wallServer[R, M]) catchUp() time.Duration {
	t := s.since(time.Now())
	s.clk.advance(t)
	return t
}

// run drives the clock (and, if schedule is not nil, the faults, which
// it applies until ctx is done) until ctx is done; then the server
// refuses new work and the handlers still waiting are let go.
func (s *wallServer[R, M]) run(ctx context.Context, schedule func(ctx context.Context)) {
	if schedule == nil {
		s.clk.run(ctx, &s.mu)
	} else {
		var wg sync.WaitGroup
		wg.Go(func() { s.clk.run(ctx, &s.mu) })
		schedule(ctx)
		wg.Wait()
	}
	s.mu.Lock()
	s.stopped = true
	close(s.stop)
	s.mu.Unlock()
}

// setEnv puts e in force at now, once what fell due before now has
// happened: its conditions in the model, and a stall's start or end. The
// lock is held.
func (s *wallServer[R, M]) setEnv(e env, now time.Time) {
	t := s.since(now)
	s.clk.advance(t)
	s.env, s.now = e, t
	s.clk.apply(s.model, e, t)
}

// accept hands the model a new request at t, made of q: the server holds
// it from now. It returns the request, its generation and the channel its
// handler waits on. The lock is held.
func (s *wallServer[R, M]) accept(t time.Duration, q held[R, M]) (origin.Request, uint32, <-chan M) {
	var r origin.Request
	if n := len(s.free); n > 0 {
		r = s.free[n-1] // a slot a released request left, whose generation it keeps
		s.free = s.free[:n-1]
	} else {
		s.reqs = append(s.reqs, held[R, M]{})
		r = origin.Request(len(s.reqs) - 1)
	}
	p := &s.reqs[r]
	q.gen, q.tell = p.gen+1, make(chan M, 1)
	*p = q
	s.now = t
	s.model.Arrive(t, r)
	return r, q.gen, q.tell
}

// tell hands m to r's handler, if it still waits. The lock is held.
func (s *wallServer[R, M]) tell(r origin.Request, m M) {
	q := &s.reqs[r]
	if q.tell != nil {
		q.tell <- m
		q.tell = nil
	}
}

// recycle frees r's slot: the model and the service are done with it.
// The lock is held.
func (s *wallServer[R, M]) recycle(r origin.Request) {
	q := &s.reqs[r]
	*q = held[R, M]{gen: q.gen + 1}
	s.free = append(s.free, r)
}

// done ends r's service in the model at t. The lock is held.
func (s *wallServer[R, M]) done(r origin.Request, t time.Duration) {
	s.reqs[r].serving = false
	s.now = t
	s.model.Done(t, r)
}

// wait is how a handler's wait ended.
type wait uint8

const (
	waitTold    wait = iota // the server told it something
	waitGone                // its client left (leave has been called)
	waitStopped             // the server stopped
)

// await waits for what the server tells request r (of generation gen)'s
// handler on tell, its client leaving (gone), or the server stopping.
// When the client leaves, the server hears it (leave).
func (s *wallServer[R, M]) await(r origin.Request, gen uint32, tell <-chan M, left <-chan struct{}) (M, wait) {
	select {
	case m := <-tell:
		return m, waitTold
	case <-left:
		s.leave(r, gen)
		var zero M
		return zero, waitGone
	case <-s.stop:
		var zero M
		return zero, waitStopped
	}
}

// leave is the client of request r (of generation gen) going away: its
// handler no longer waits. The service says what that changes, and
// whether the model hears it when r is in service; a queued request stays
// queued.
func (s *wallServer[R, M]) leave(r origin.Request, gen uint32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.catchUp()
	q := &s.reqs[r]
	if q.gen != gen || q.tell == nil {
		return // answered meanwhile, or dropped
	}
	q.tell = nil
	if s.svc.left(r, t) && q.serving {
		s.now = t
		s.model.Left(t, r)
	}
}

// fire does what fell due for a request, unless it went stale (its
// request was let go meanwhile). The lock is held.
func (s *wallServer[R, M]) fire(e due, at time.Duration) {
	if s.reqs[e.r].gen != e.gen {
		return
	}
	s.now = at
	if e.kind == dueReject {
		s.svc.reject(e.r)
		return
	}
	s.svc.fire(e, at)
}

// waste counts a request served for a client that had left.
func (s *wallServer[R, M]) waste() {
	s.wasted.Add(1)
	s.tally.inc(tWasted)
	s.wastedTotal.Inc()
}

// Queued returns the requests the model holds waiting for a worker (queue
// model, those whose client left included) or in service (concurrency
// model), as the simulator's queue series counts them.
func (s *wallServer[R, M]) Queued() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.model.Queued()
}

// WouldAnswer reports whether a request arriving now would be answered
// with success within timeout, without sending one: the ground truth for
// the calls a breaker refused. It asks the model as the simulator does,
// and draws the error share of the faults in force.
func (s *wallServer[R, M]) WouldAnswer(timeout time.Duration) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped || s.env.outage || (s.env.errRate > 0 && s.rng.Float64() < s.env.errRate) {
		return false
	}
	return s.model.WouldAnswer(s.catchUp(), timeout)
}

// wallDriver is a wallServer as its model's driver: the part of each
// decision every server makes the same way, the rest its service's. The
// lock is held in every method, as in every call to the model.
type wallDriver[R, M any] wallServer[R, M]

func (d *wallDriver[R, M]) Answer(r origin.Request, at time.Duration) { d.svc.answer(r, at) }

func (d *wallDriver[R, M]) Serve(r origin.Request, _, end time.Duration) {
	d.reqs[r].serving = true
	d.svc.serve(r, end)
}

// Reject refuses r at once, or at the end of a stall: a stalled server
// sends nothing, rejections included.
func (d *wallDriver[R, M]) Reject(r origin.Request, now time.Duration) {
	if d.clk.held {
		d.clk.at(due{at: now, r: r, gen: d.reqs[r].gen, kind: dueReject})
		return
	}
	d.svc.reject(r)
}

// Drop counts r as dropped (drop_expired, or a shedding origin): it is
// not answered, and its client will time out.
func (d *wallDriver[R, M]) Drop(r origin.Request, _ time.Duration) {
	d.dropped.Add(1)
	d.tally.inc(tDropped)
	d.reqs[r].serving = false // the model has freed the worker itself
	d.svc.drop(r)
}

// Deadline is the deadline r's client propagated, if it did; its client is
// gone once its handler no longer waits.
func (d *wallDriver[R, M]) Deadline(r origin.Request) (time.Duration, bool, bool) {
	q := &d.reqs[r]
	return q.deadline, q.deadline != 0, q.tell == nil
}
