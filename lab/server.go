package lab

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/retrystorm/retrystorm/origin"
)

// wallServer is what the lab's three servers share: the Origin (whose
// service is an answer), the FaultProxy (a forward to a target) and the
// Tier (a call to the next tier). Each runs one replica of an origin model
// (package origin, the simulator's own) on the wall clock, as the
// simulator's driver runs it on simulated time: a handler hands its request
// to the model under the lock and waits on a channel, and the clock (see
// clock.go) does what the model scheduled when it falls due. What serving
// means, and so what a request holds (R), is the embedding server's: its
// driver (origin.Driver) and the clock's fire are its strategy.
//
// Every field below mu is guarded by it, as is every call to the model.
type wallServer[R any] struct {
	start time.Time
	tally *Tally               // the hop into the server: its load, successes, waste and drops
	reg   *prometheus.Registry // the server's metrics
	stop  chan struct{}        // closed when Run returns

	mu      sync.Mutex
	model   origin.Model
	clk     clock // answers, ends of service and calls to come
	env     env   // the faults in force; the zero value (none) for a tier
	stopped bool
	rng     *rand.Rand       // the error draws
	reqs    []R              // by origin.Request
	free    []origin.Request // reqs' slots free for a new request

	wasted, dropped atomic.Int64
	wastedTotal     prometheus.Counter // the server's wasted-work metric, once registered
}

// init readies s: time 0 at start, the hop tally, error draws from
// (seed, stream), and fire as what the clock does when an entry falls due.
func (s *wallServer[R]) init(start time.Time, tally *Tally, seed, stream uint64, fire func(e due, at time.Duration)) {
	s.start, s.tally = start, tally
	s.reg = prometheus.NewRegistry()
	s.stop = make(chan struct{})
	s.rng = rand.New(rand.NewPCG(seed, stream))
	s.clk = newClock(start, fire)
}

// since is t as the model's time: from the server's start.
func (s *wallServer[R]) since(t time.Time) time.Duration { return s.clk.since(t) }

// catchUp returns the model's time now, once what fell due by then has
// happened. The lock is held.
func (s *wallServer[R]) catchUp() time.Duration {
	t := s.since(time.Now())
	s.clk.advance(t)
	return t
}

// run drives the clock (and, if schedule is not nil, the faults, which
// it applies until ctx is done) until ctx is done; then the server
// refuses new work and the handlers still waiting are let go.
func (s *wallServer[R]) run(ctx context.Context, schedule func(ctx context.Context)) {
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

// take returns a slot for a new request: one a released request left
// (whose generation it keeps), or a new one. The lock is held.
func (s *wallServer[R]) take() origin.Request {
	if n := len(s.free); n > 0 {
		r := s.free[n-1]
		s.free = s.free[:n-1]
		return r
	}
	var zero R
	s.reqs = append(s.reqs, zero)
	return origin.Request(len(s.reqs) - 1)
}

// recycle puts r's slot on the free list: the model and the server are
// done with it. The lock is held.
func (s *wallServer[R]) recycle(r origin.Request) { s.free = append(s.free, r) }

// waste counts a request served for a client that had left.
func (s *wallServer[R]) waste() {
	s.wasted.Add(1)
	s.tally.inc(tWasted)
	s.wastedTotal.Inc()
}

// drop counts a request the model let go unanswered (drop_expired, or a
// shedding origin).
func (s *wallServer[R]) drop() {
	s.dropped.Add(1)
	s.tally.inc(tDropped)
}

// Queued returns the requests the model holds waiting for a worker (queue
// model, those whose client left included) or in service (concurrency
// model), as the simulator's queue series counts them.
func (s *wallServer[R]) Queued() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.model.Queued()
}

// WouldAnswer reports whether a request arriving now would be answered
// with success within timeout, without sending one: the ground truth for
// the calls a breaker refused. It asks the model as the simulator does,
// and draws the error share of the faults in force.
func (s *wallServer[R]) WouldAnswer(timeout time.Duration) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped || s.env.outage || (s.env.errRate > 0 && s.rng.Float64() < s.env.errRate) {
		return false
	}
	return s.model.WouldAnswer(s.catchUp(), timeout)
}
