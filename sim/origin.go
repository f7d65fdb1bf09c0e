package sim

import (
	"math"
	"time"

	"github.com/retrystorm/retrystorm/scenario"
)

// rejectDelay is how long an overload rejection takes to reach its client:
// "at once", but not in zero time, so a client that retries without backoff
// still lets virtual time move.
const rejectDelay = int64(time.Millisecond)

// origin is a model of the dependency. It is told when an attempt arrives
// and answers it through the fleet: f.answerAt for an answer known on
// arrival, or an evComplete event handed back to complete. It never decides
// failures by error rate: the fleet draws those (see fleet.outcome).
type origin interface {
	arrive(f *fleet, a int32, now int64)
	complete(f *fleet, a int32, replica int, now int64)
	// inTime reports whether an attempt arriving now at replica would be
	// answered within timeout, without changing anything: the ground
	// truth for attempts a breaker refused.
	inTime(f *fleet, replica int, now, timeout int64) bool
	// gaveUp tells the origin that attempt a's client stopped waiting.
	gaveUp(f *fleet, a int32, now int64)
	// queued returns the requests waiting (not in service).
	queued() int
	// envChanged is called at every trigger boundary, before e becomes
	// f.env.
	envChanged(f *fleet, now int64, e *env)
}

func newOrigin(o *scenario.Origin, replicas int) origin {
	switch o.Model {
	case scenario.ModelQueue:
		return newQueueOrigin(o, replicas)
	case scenario.ModelConcurrency:
		return &concurrencyOrigin{
			base:     int64(o.Base),
			per:      int64(o.PerInflight),
			inflight: make([]int64, replicas),
		}
	}
	return newCapacityOrigin(o, replicas)
}

// capacityOrigin answers up to its capacity and rejects the rest at once.
// Capacity is a rate: each replica earns credit at capacity/replicas per
// second, keeps at most a tenth of a second of it in reserve (so Poisson
// arrivals below capacity are absorbed), and spends 1 per admitted attempt
// and rejection_cost per rejection. Rejections that cost work take credit
// from admissions, so with rejection_cost c an offered load L leaves
// (C - cL)/(1 - c) answered: above C/c the origin answers nothing, and the
// collapse can outlive its cause. With c = 0 it always recovers once load is
// below capacity.
type capacityOrigin struct {
	latency int64
	cost    float64
	credit  []float64
	last    []int64
	rate    float64 // per replica per second
}

func newCapacityOrigin(o *scenario.Origin, replicas int) *capacityOrigin {
	c := &capacityOrigin{
		latency: int64(o.Latency),
		cost:    o.RejectionCost,
		credit:  make([]float64, replicas),
		last:    make([]int64, replicas),
		rate:    o.Capacity / float64(replicas),
	}
	for i := range c.credit {
		c.credit[i] = c.reserve()
	}
	return c
}

func (c *capacityOrigin) reserve() float64 { return max(1, c.rate/10) }

// refill brings replica r's credit up to now at the current rate.
func (c *capacityOrigin) refill(r int, now int64) {
	if dt := now - c.last[r]; dt > 0 {
		c.credit[r] = min(c.reserve(), c.credit[r]+c.rate*float64(dt)/1e9)
		c.last[r] = now
	}
}

func (c *capacityOrigin) arrive(f *fleet, a int32, now int64) {
	r := int(f.atts[a].replica)
	c.refill(r, now)
	if c.credit[r] >= 1 {
		c.credit[r]--
		f.answerAt(a, now+c.latency, f.outcome(a))
		return
	}
	// A rejection still costs work; the debt is bounded so that a long
	// overload does not leave a debt that outlives it.
	c.credit[r] = max(c.credit[r]-c.cost, -c.reserve())
	f.reject(a, now)
}

func (c *capacityOrigin) complete(*fleet, int32, int, int64) {}

func (c *capacityOrigin) inTime(f *fleet, r int, now, timeout int64) bool {
	c.refill(r, now) // refilling is lazy and pure: it changes no outcome
	return c.credit[r] >= 1 && c.latency <= timeout
}

func (c *capacityOrigin) gaveUp(*fleet, int32, int64) {}

func (c *capacityOrigin) queued() int { return 0 }

func (c *capacityOrigin) envChanged(f *fleet, now int64, e *env) {
	for r := range c.credit {
		c.refill(r, now)
	}
	c.rate = e.capacity / float64(len(c.credit))
}

// queueOrigin is workers in front of a queue: a request holds a worker for
// workers/capacity seconds, so the origin serves capacity requests per
// second. It does not notice that a client gave up unless drop_expired is
// on: it serves the request anyway, wasted work. A backlog longer than
// capacity × timeout makes every answer late, and retries keep it full.
//
// With drop_expired the origin knows each request's deadline, as a server
// does with a propagated deadline and the request's context: it skips a
// queued request that cannot be answered before its client gives up, and
// stops serving one whose client gives up mid-service, so no worker works
// for nobody.
type queueOrigin struct {
	reps        []queueReplica
	lifo        bool
	limit       int // per replica; 0 = unbounded
	dropExpired bool
	rate        float64 // capacity per replica per second
	waiting     int
}

type queueReplica struct {
	workers int
	busy    int
	q       deque
	service int64 // ns a request holds a worker, at the capacity in force
}

func newQueueOrigin(o *scenario.Origin, replicas int) *queueOrigin {
	q := &queueOrigin{
		reps:        make([]queueReplica, replicas),
		lifo:        o.Discipline == "lifo",
		dropExpired: o.DropExpired,
		rate:        o.Capacity / float64(replicas),
	}
	if o.QueueLimit > 0 {
		q.limit = (o.QueueLimit + replicas - 1) / replicas
	}
	for i := range q.reps {
		// Spread the workers; the first replicas take the remainder.
		q.reps[i].workers = o.Workers / replicas
		if i < o.Workers%replicas {
			q.reps[i].workers++
		}
	}
	return q
}

// service is how long replica r holds a worker per request now, in ns.
func (q *queueOrigin) service(r int) int64 { return q.reps[r].service }

func (q *queueOrigin) arrive(f *fleet, a int32, now int64) {
	r := int(f.atts[a].replica)
	rep := &q.reps[r]
	if rep.busy < rep.workers && q.rate > 0 {
		q.start(f, a, r, now)
		return
	}
	if q.limit > 0 && rep.q.len() >= q.limit {
		f.reject(a, now)
		return
	}
	rep.q.push(a)
	q.waiting++
}

func (q *queueOrigin) start(f *fleet, a int32, r int, now int64) {
	q.reps[r].busy++
	f.atts[a].serving = true
	done := now + q.service(r)
	f.complete(a, r, done)
}

func (q *queueOrigin) complete(f *fleet, a int32, r int, now int64) {
	q.reps[r].busy--
	f.atts[a].serving = false
	f.deliver(a, now, f.outcome(a))
	q.next(f, r, now)
}

// next gives free workers of replica r the next requests, skipping those
// whose client gave up when drop_expired is on.
func (q *queueOrigin) next(f *fleet, r int, now int64) {
	rep := &q.reps[r]
	for rep.busy < rep.workers && rep.q.len() > 0 && q.rate > 0 {
		var a int32
		if q.lifo {
			a = rep.q.popBack()
		} else {
			a = rep.q.popFront()
		}
		q.waiting--
		if q.dropExpired && f.expired(a, now+q.service(r)) {
			f.drop(a)
			continue
		}
		q.start(f, a, r, now)
	}
}

func (q *queueOrigin) inTime(f *fleet, r int, now, timeout int64) bool {
	rep := &q.reps[r]
	if q.rate <= 0 {
		return false
	}
	// FIFO: wait for the backlog ahead, then be served. LIFO serves the
	// newcomer first.
	ahead := int64(rep.q.len())
	if q.lifo {
		ahead = 0
	}
	if rep.busy < rep.workers && ahead == 0 {
		return q.service(r) <= timeout
	}
	// Those in service have half their time left on average, then the
	// backlog ahead goes by in rounds of one per worker.
	s := q.service(r)
	return ahead*s/int64(rep.workers)+s/2+s <= timeout
}

func (q *queueOrigin) gaveUp(f *fleet, a int32, now int64) {
	x := &f.atts[a]
	if !q.dropExpired || !x.serving {
		return
	}
	r := int(x.replica)
	x.serving = false
	f.drop(a) // its completion event goes stale with the slot's generation
	q.reps[r].busy--
	q.next(f, r, now)
}

func (q *queueOrigin) queued() int { return q.waiting }

func (q *queueOrigin) envChanged(f *fleet, now int64, e *env) {
	q.rate = e.capacity / float64(len(q.reps))
	for r := range q.reps {
		rep := &q.reps[r]
		if q.rate > 0 {
			rep.service = int64(float64(rep.workers) / q.rate * e.factor[r] * 1e9)
		}
	}
	for r := range q.reps {
		q.next(f, r, now) // workers stalled at zero capacity start again
	}
}

// concurrencyOrigin has no queue: every request is served at once, but
// takes base + per_inflight × (requests in flight), so latency grows with
// load, and requests whose client gave up still occupy it.
type concurrencyOrigin struct {
	base, per int64
	inflight  []int64
	factor    []float64
}

func (c *concurrencyOrigin) latency(r int) int64 {
	l := float64(c.base + c.per*c.inflight[r])
	if c.factor != nil {
		l *= c.factor[r]
	}
	return int64(math.Min(l, 1e18))
}

func (c *concurrencyOrigin) arrive(f *fleet, a int32, now int64) {
	r := int(f.atts[a].replica)
	l := c.latency(r)
	c.inflight[r]++
	f.complete(a, r, now+l)
}

func (c *concurrencyOrigin) complete(f *fleet, a int32, r int, now int64) {
	c.inflight[r]--
	f.deliver(a, now, f.outcome(a))
}

func (c *concurrencyOrigin) inTime(f *fleet, r int, now, timeout int64) bool {
	return c.latency(r) <= timeout
}

func (c *concurrencyOrigin) gaveUp(*fleet, int32, int64) {}

func (c *concurrencyOrigin) queued() int {
	n := int64(0)
	for _, x := range c.inflight {
		n += x
	}
	return int(n)
}

func (c *concurrencyOrigin) envChanged(f *fleet, now int64, e *env) { c.factor = e.factor }

// deque is a ring buffer of attempt slots that grows as needed.
type deque struct {
	buf        []int32
	head, size int
}

func (d *deque) len() int { return d.size }

func (d *deque) push(a int32) {
	if d.size == len(d.buf) {
		n := make([]int32, max(16, 2*len(d.buf)))
		for i := range d.size {
			n[i] = d.buf[(d.head+i)%len(d.buf)]
		}
		d.buf, d.head = n, 0
	}
	d.buf[(d.head+d.size)%len(d.buf)] = a
	d.size++
}

func (d *deque) popFront() int32 {
	a := d.buf[d.head]
	d.head = (d.head + 1) % len(d.buf)
	d.size--
	return a
}

func (d *deque) popBack() int32 {
	d.size--
	return d.buf[(d.head+d.size)%len(d.buf)]
}
