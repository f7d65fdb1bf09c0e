package origin

import (
	"fmt"
	"math"
	"time"
)

// QueueSettings configure a [Queue] model.
type QueueSettings struct {
	// Capacity is the requests per second the workers serve together (a
	// request holds a worker for Workers/Capacity seconds); more than 0.
	Capacity float64
	// Workers serve requests in parallel; at least 1.
	Workers int
	// Limit is how many requests may wait; 0 means no limit.
	Limit int
	// LIFO serves the newest waiting request first; FIFO is the default.
	LIFO bool
	// DropExpired skips a waiting request that cannot be answered before
	// its client gives up, and stops serving one whose client gives up.
	DropExpired bool
}

// Queue is workers in front of a queue: a request holds a worker for
// workers/capacity seconds (times the latency factor), so the server
// serves capacity requests per second. It does not notice that a client
// gave up unless DropExpired is on: it serves the request anyway, wasted
// work. A backlog longer than capacity × timeout makes every answer late,
// and retries keep it full.
//
// With DropExpired the server knows each request's deadline, as a server
// does with a propagated deadline and the request's context: it skips a
// waiting request that cannot be answered before its client gives up
// (Driver.Expired), and stops serving one whose client gives up mid-service
// (Left), so no worker works for nobody.
//
// At zero capacity (a trigger) the workers stop taking requests, which
// wait, and start again when the capacity comes back. At an infinite
// capacity (SetConditions) a request holds its worker for no time: a
// driver that passes requests through, as the lab's fault proxy does
// outside a capacity dip, uses it for no limit.
type Queue struct {
	d           Driver
	workers     int
	busy        int
	limit       int
	lifo        bool
	dropExpired bool
	rate        float64       // requests per second
	service     time.Duration // how long a request holds a worker, at the conditions in force
	q           deque
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
	q := &Queue{d: d, workers: s.Workers, limit: s.Limit, lifo: s.LIFO, dropExpired: s.DropExpired}
	q.set(Conditions{Capacity: s.Capacity, Factor: 1})
	return q, nil
}

// set takes the conditions c. The service time keeps its value at zero
// capacity, when no request starts.
func (q *Queue) set(c Conditions) {
	q.rate = c.Capacity
	if q.rate > 0 {
		q.service = time.Duration(float64(q.workers) / q.rate * c.Factor * 1e9)
	}
}

// Arrive starts r on a free worker, queues it, or rejects it when the
// queue is full.
func (q *Queue) Arrive(now time.Duration, r Request) {
	if q.busy < q.workers && q.rate > 0 {
		q.start(now, r)
		return
	}
	if q.limit > 0 && q.q.len() >= q.limit {
		q.d.Reject(r, now)
		return
	}
	q.q.push(r)
}

func (q *Queue) start(now time.Duration, r Request) {
	q.busy++
	q.d.Serve(r, now, now+q.service)
}

// Done frees r's worker and gives it the next request.
func (q *Queue) Done(now time.Duration, r Request) {
	q.busy--
	q.next(now)
}

// next gives free workers the next requests, skipping those whose client
// will not wait under DropExpired.
func (q *Queue) next(now time.Duration) {
	for q.busy < q.workers && q.q.len() > 0 && q.rate > 0 {
		var r Request
		if q.lifo {
			r = q.q.popBack()
		} else {
			r = q.q.popFront()
		}
		if q.dropExpired && q.d.Expired(r, now+q.service) {
			q.d.Drop(r, now)
			continue
		}
		q.start(now, r)
	}
}

// Left stops serving r under DropExpired, and gives its worker the next
// request; otherwise the worker goes on for nobody.
func (q *Queue) Left(now time.Duration, r Request) {
	if !q.dropExpired {
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
	q.set(c)
	q.next(now)
}

// WouldAnswer estimates whether a request arriving now would be answered
// within timeout: FIFO waits for the backlog ahead, LIFO serves the
// newcomer first.
func (q *Queue) WouldAnswer(now, timeout time.Duration) bool {
	if q.rate <= 0 {
		return false
	}
	ahead := time.Duration(q.q.len())
	if q.lifo {
		ahead = 0
	}
	s := q.service
	if q.busy < q.workers && ahead == 0 {
		return s <= timeout
	}
	// Those in service have half their time left on average, then the
	// backlog ahead goes by in rounds of one per worker.
	return ahead*s/time.Duration(q.workers)+s/2+s <= timeout
}

// Queued returns the requests waiting for a worker, those whose client
// left included.
func (q *Queue) Queued() int { return q.q.len() }

// Busy returns the workers serving.
func (q *Queue) Busy() int { return q.busy }

// deque is a ring buffer of requests that grows as needed.
type deque struct {
	buf        []Request
	head, size int
}

func (d *deque) len() int { return d.size }

func (d *deque) push(r Request) {
	if d.size == len(d.buf) {
		n := make([]Request, max(16, 2*len(d.buf)))
		for i := range d.size {
			n[i] = d.buf[(d.head+i)%len(d.buf)]
		}
		d.buf, d.head = n, 0
	}
	d.buf[(d.head+d.size)%len(d.buf)] = r
	d.size++
}

func (d *deque) popFront() Request {
	r := d.buf[d.head]
	d.head = (d.head + 1) % len(d.buf)
	d.size--
	return r
}

func (d *deque) popBack() Request {
	d.size--
	return d.buf[(d.head+d.size)%len(d.buf)]
}
