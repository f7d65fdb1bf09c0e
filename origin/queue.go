package origin

import (
	"fmt"
	"math"
	"time"

	"github.com/retrystorm/retrystorm/resil/admission"
	"github.com/retrystorm/retrystorm/scenario"
)

// QueueSettings configure a [Queue] model.
type QueueSettings struct {
	// Capacity is the requests per second the workers serve together (a
	// request holds a worker for Workers/Capacity seconds on average);
	// more than 0.
	Capacity float64
	// Workers serve requests in parallel; at least 1.
	Workers int
	// Limit is how many requests may wait; 0 means no limit.
	Limit int
	// Discipline is the order the waiting requests are served in:
	// admission.FIFO (the default), admission.LIFO or admission.AdaptiveLIFO.
	Discipline admission.Discipline
	// MaxWait is how long a request may wait for a worker; 0 means no
	// limit. With it, or with AdaptiveLIFO (which needs it), the queue is
	// a admission.WaitQueue, which needs a Limit.
	MaxWait time.Duration

	// Shed is deadline shedding: when a worker would take a request, the
	// server asks resil whether the request can still be answered before
	// its client's deadline, less Reserve, refuses it at once when not (or
	// drops it when its client is gone), and stops serving one whose
	// client gives up.
	Shed bool
	// Estimate, when set, is the DeadlineShedder Shed decides with (its
	// estimate and its reserve); nil means one with the service time as it
	// stands, which the server knows, and Reserve.
	Estimate *admission.DeadlineShedder
	// DropExpired is the older form: when a worker would take a request,
	// the server drops it, unanswered, if it cannot be answered before its
	// client's deadline, less Reserve, by the service time as it stands;
	// and it stops serving one whose client gives up. It may not be set
	// with Shed.
	DropExpired bool
	// Reserve is the time kept for the answer's way back: the scenario's,
	// and the lab's over the wire.
	Reserve time.Duration
	// Service draws each request's service time, as a factor of the
	// mean, when a worker takes it; nil: every request takes the mean.
	Service *Sampler
	// Load multiplies each service time by its curve at the share of the
	// workers busy when the request starts, itself included (see
	// scenario.LoadLatency); the zero value is flat.
	Load scenario.LoadLatency
}

// Queue is workers in front of a queue: a request holds a worker for
// workers/capacity seconds on average (times the latency factor; each
// time drawn by its Service), so the server serves capacity requests per
// second. It does not notice that a client
// gave up unless it sheds (Shed, or DropExpired): it serves the request
// anyway, wasted work. A backlog longer than capacity × timeout makes every
// answer late, and retries keep it full.
//
// A shedding server knows each request's deadline, as a server does with a
// propagated deadline and the request's context (Driver.Deadline): it does
// not start a request that cannot be answered in time, and stops serving
// one whose client gives up mid-service (Left), so no worker works for
// nobody. The decision is resil's DeadlineShedder: with Shed, the server's
// own estimate, or one that follows the service time as it stands, and the
// server refuses at once (Reject) a request whose client still waits; with
// DropExpired, one that follows the service time, and the server drops the
// request unanswered, as drop_expired always did.
//
// The waiting requests are served in the order of their Discipline. With
// a MaxWait or adaptive LIFO the queue is resil's WaitQueue, whose
// decisions (the order, overload, a wait that was too long) the server
// follows; a request that waited too long is refused when a worker next
// looks at the queue.
//
// At zero capacity (a trigger) the workers stop taking requests, which
// wait, and start again when the capacity comes back. At an infinite
// capacity (SetConditions) a request holds its worker for no time: a
// driver that passes requests through, as the lab's fault proxy does
// outside a capacity dip, uses it for no limit.
type Queue struct {
	d       Driver
	workers int
	busy    int
	limit   int
	lifo    bool
	rate    float64       // requests per second
	service time.Duration // how long a request holds a worker on average, at the conditions in force
	sampler *Sampler      // the distribution around it; nil: fixed
	load    scenario.LoadLatency
	loaded  bool // load is not flat

	shed        bool
	estimate    *admission.DeadlineShedder // Shed's, when it has a fixed estimate
	dropExpired bool
	reserve     time.Duration
	expiry      *admission.DeadlineShedder // at the service time in force, for DropExpired and Shed without Estimate

	q  deque                         // without a wait queue
	wq *admission.WaitQueue[Request] // with one
}

// NewQueue returns a queue model with idle workers, or an error naming an
// invalid setting.
func NewQueue(s QueueSettings, d Driver) (*Queue, error) {
	if !(s.Capacity > 0) || math.IsInf(s.Capacity, 0) {
		return nil, fmt.Errorf("origin: capacity must be more than 0, got %g", s.Capacity)
	}
	if s.Workers < 1 || s.Limit < 0 {
		return nil, fmt.Errorf("origin: the queue model needs at least one worker and a limit of at least 0, got %d and %d", s.Workers, s.Limit)
	}
	if s.Shed && s.DropExpired {
		return nil, fmt.Errorf("origin: Shed and DropExpired both drop expired requests: set one")
	}
	if s.Reserve < 0 || s.Reserve > time.Hour {
		return nil, fmt.Errorf("origin: the reserve must be in [0, 1h], got %v", s.Reserve)
	}
	q := &Queue{
		d: d, workers: s.Workers, limit: s.Limit, lifo: s.Discipline == admission.LIFO,
		shed: s.Shed, estimate: s.Estimate, dropExpired: s.DropExpired, reserve: s.Reserve,
		sampler: s.Service, load: s.Load, loaded: !s.Load.Flat(),
	}
	if s.MaxWait > 0 || s.Discipline == admission.AdaptiveLIFO {
		wq, err := admission.NewWaitQueue[Request](admission.QueueSettings{MaxLen: s.Limit, Discipline: s.Discipline, MaxWait: s.MaxWait})
		if err != nil {
			return nil, fmt.Errorf("origin: the queue: %w", err)
		}
		q.wq = wq
	} else if s.Discipline > admission.LIFO {
		return nil, fmt.Errorf("origin: unknown discipline %v", s.Discipline)
	}
	if err := q.set(Conditions{Capacity: s.Capacity, Factor: 1}); err != nil {
		return nil, err
	}
	return q, nil
}

// set takes the conditions c. The service time keeps its value at zero
// capacity, when no request starts.
func (q *Queue) set(c Conditions) error {
	q.rate = c.Capacity
	if q.rate <= 0 {
		return nil
	}
	q.service = time.Duration(float64(q.workers) / q.rate * c.Factor * 1e9)
	if q.dropExpired || (q.shed && q.estimate == nil) {
		// The service time as it stands is what the server decides by.
		dl, err := admission.NewDeadlineShedder(admission.DeadlineSettings{ServiceTime: min(q.service, 24*time.Hour), Reserve: q.reserve})
		if err != nil {
			return fmt.Errorf("origin: %w", err)
		}
		q.expiry = dl
	}
	return nil
}

// Arrive starts r on a free worker, queues it, or rejects it when the
// queue is full.
func (q *Queue) Arrive(now time.Duration, r Request) {
	if q.busy < q.workers && q.rate > 0 {
		q.start(now, r)
		return
	}
	if q.wq != nil {
		if !q.wq.Push(instant(now), r) {
			q.d.Reject(r, now)
		}
		return
	}
	if q.limit > 0 && q.q.len() >= q.limit {
		q.d.Reject(r, now)
		return
	}
	q.q.push(r)
}

func (q *Queue) len() int {
	if q.wq != nil {
		return q.wq.Len()
	}
	return q.q.len()
}

func (q *Queue) start(now time.Duration, r Request) {
	q.busy++
	d := q.sampler.Draw(q.service)
	if q.loaded {
		d = time.Duration(min(float64(d)*q.load.At(float64(q.busy)/float64(q.workers)), 1e18))
	}
	q.d.Serve(r, now, now+d)
}

// Done frees r's worker and gives it the next request.
func (q *Queue) Done(now time.Duration, r Request) {
	q.busy--
	q.next(now)
}

// next gives free workers the next requests, refusing or dropping those
// the server sheds.
func (q *Queue) next(now time.Duration) {
	for q.busy < q.workers && q.len() > 0 && q.rate > 0 {
		r, why := q.pop(now)
		if why == admission.ShedNone {
			why = q.decide(now, r)
		}
		switch why {
		case admission.ShedNone:
			q.start(now, r)
		case admission.ShedCallerLeft:
			q.d.Drop(r, now)
		default:
			if q.dropExpired {
				q.d.Drop(r, now) // as drop_expired always did: unanswered
			} else {
				q.d.Reject(r, now)
			}
		}
	}
}

// pop takes the next request the discipline serves, or one that waited
// too long (admission.ShedQueueTimeout).
func (q *Queue) pop(now time.Duration) (Request, admission.ShedReason) {
	if q.wq != nil {
		r, _, why, _ := q.wq.Next(instant(now))
		if why != admission.ShedNone {
			if _, _, gone := q.d.Deadline(r); gone {
				why = admission.ShedCallerLeft
			}
		}
		return r, why
	}
	if q.lifo {
		return q.q.popBack(), admission.ShedNone
	}
	return q.q.popFront(), admission.ShedNone
}

// decide says whether a shedding server starts r now: ShedNone, or why
// not (ShedCallerLeft when its client is gone).
func (q *Queue) decide(now time.Duration, r Request) admission.ShedReason {
	if !q.shed && !q.dropExpired {
		return admission.ShedNone
	}
	dl := q.estimate
	if dl == nil {
		dl = q.expiry
	}
	deadline, ok, gone := q.d.Deadline(r)
	switch {
	case gone:
		return admission.ShedCallerLeft
	case !ok:
		return admission.ShedNone
	}
	return dl.Decide(instant(now), instant(deadline))
}

// Left stops serving r when the server sheds, and gives its worker the
// next request; otherwise the worker goes on for nobody.
func (q *Queue) Left(now time.Duration, r Request) {
	if !q.shed && !q.dropExpired {
		return
	}
	q.d.Drop(r, now)
	q.busy--
	q.next(now)
}

// SetConditions takes the new capacity and latency factor for the requests
// that start from now, and starts waiting requests on workers that zero
// capacity had stalled.
func (q *Queue) SetConditions(now time.Duration, c Conditions) {
	// The settings were checked when the queue was made, and the
	// conditions cannot make a service time resil refuses: it is capped.
	_ = q.set(c)
	q.next(now)
}

// WouldAnswer estimates whether a request arriving now would be answered
// within timeout: FIFO waits for the backlog ahead, LIFO (and adaptive
// LIFO while overloaded) serves the newcomer first; a wait longer than
// the queue allows is no answer.
func (q *Queue) WouldAnswer(now, timeout time.Duration) bool {
	if q.rate <= 0 {
		return false
	}
	n := q.len()
	if q.wq != nil && n >= q.limit {
		return false
	}
	ahead := time.Duration(n)
	if q.lifo || (q.wq != nil && q.wq.Settings().Discipline == admission.LIFO) ||
		(q.wq != nil && q.wq.Settings().Discipline == admission.AdaptiveLIFO && q.wq.Overloaded(instant(now))) {
		ahead = 0
	}
	s := q.service
	if q.loaded {
		// Started now, among those in service; or, behind a backlog, with
		// every worker busy.
		u := 1.0
		if q.busy < q.workers && ahead == 0 {
			u = float64(q.busy+1) / float64(q.workers)
		}
		s = time.Duration(min(float64(s)*q.load.At(u), 1e18))
	}
	if q.busy < q.workers && ahead == 0 {
		return s <= timeout
	}
	// Those in service have half their time left on average, then the
	// backlog ahead goes by in rounds of one per worker.
	wait := ahead*s/time.Duration(q.workers) + s/2
	if q.wq != nil && wait > q.wq.MaxWait(instant(now)) {
		return false
	}
	return wait+s <= timeout
}

// Queued returns the requests waiting for a worker, those whose client
// left included.
func (q *Queue) Queued() int { return q.len() }

// Busy returns the workers serving.
func (q *Queue) Busy() int { return q.busy }

// deque is a ring buffer of requests that grows as needed. Its size is a
// power of two, so an index wraps with a mask rather than a division: a
// collapsed queue pushes and pops once per attempt.
type deque struct {
	buf        []Request
	head, size int
}

func (d *deque) len() int { return d.size }

func (d *deque) push(r Request) {
	if d.size == len(d.buf) {
		n := make([]Request, max(16, 2*len(d.buf)))
		for i := range d.size {
			n[i] = d.buf[(d.head+i)&(len(d.buf)-1)]
		}
		d.buf, d.head = n, 0
	}
	d.buf[(d.head+d.size)&(len(d.buf)-1)] = r
	d.size++
}

func (d *deque) popFront() Request {
	r := d.buf[d.head]
	d.head = (d.head + 1) & (len(d.buf) - 1)
	d.size--
	return r
}

func (d *deque) popBack() Request {
	d.size--
	return d.buf[(d.head+d.size)&(len(d.buf)-1)]
}
