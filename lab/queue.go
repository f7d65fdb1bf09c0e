package lab

import "time"

// jobState is where a request stands at the origin.
type jobState uint8

const (
	jobQueued  jobState = iota // waiting for a worker
	jobServing                 // a worker holds it
	jobLeft                    // its client left while it was served: the work goes on
	jobDone                    // answered, dropped or lost: nothing more to do
	jobGhost                   // in the queue for a client that left: it still costs a worker's time
)

// job is one request at the origin, from arrival to answer. A queued job
// whose client leaves becomes a ghost in place: the origin does not notice
// (unless drop_expired), so it will still hold a worker for its service
// time, but nothing waits for its answer. Adjacent ghosts of the same tick
// merge into one entry, so a backlog of abandoned requests costs a few
// words per tick of arrivals, not a request each: the lab's memory stays
// bounded however long the overload lasts.
type job struct {
	prev, next *job
	ghosts     int // for a ghost entry: how many requests it stands for
	state      jobState

	arrived  time.Time
	deadline time.Time       // when its client gives up, if it said; zero: unknown
	tick     int             // the tick it arrived in, for the successes it earns
	broken   bool            // its intent's key is in the broken share: it always fails
	exec     *execution      // set for non-idempotent requests: their side effect is counted
	gone     <-chan struct{} // closed when its client leaves
	done     chan result     // the worker's answer; buffered
}

// jobQueue is a doubly linked list of jobs and ghost runs, in arrival
// order. It is not safe for concurrent use: the origin's lock guards it.
type jobQueue struct {
	head, tail *job
	n          int // requests waiting, ghosts included
}

func (q *jobQueue) len() int { return q.n }

func (q *jobQueue) push(j *job) {
	j.prev, j.next = q.tail, nil
	if q.tail != nil {
		q.tail.next = j
	} else {
		q.head = j
	}
	q.tail = j
	q.n += max(j.ghosts, 1)
}

func (q *jobQueue) unlink(j *job) {
	if j.prev != nil {
		j.prev.next = j.next
	} else {
		q.head = j.next
	}
	if j.next != nil {
		j.next.prev = j.prev
	} else {
		q.tail = j.prev
	}
	j.prev, j.next = nil, nil
}

// remove takes a waiting job out of the queue (a drop_expired origin
// noticed that its client left).
func (q *jobQueue) remove(j *job) {
	q.unlink(j)
	q.n--
}

// haunt turns a waiting job into a ghost where it stands, merged with its
// neighbours of the same tick (and brokenness): no two neighbouring
// entries are ghosts that could be one, so the entries are at most about
// twice the live jobs, plus one per tick. A ghost whose side effect must
// be counted keeps its own entry.
func (q *jobQueue) haunt(j *job) {
	j.state, j.ghosts, j.gone, j.done = jobGhost, 1, nil, nil
	if n := j.next; mergeable(j, n) {
		j.ghosts += n.ghosts
		q.unlink(n)
	}
	if p := j.prev; mergeable(p, j) {
		p.ghosts += j.ghosts
		q.unlink(j)
	}
}

// mergeable reports whether ghost entries a and b can be one.
func mergeable(a, b *job) bool {
	return a != nil && b != nil && a.state == jobGhost && b.state == jobGhost &&
		a.exec == nil && b.exec == nil && a.tick == b.tick && a.broken == b.broken
}

// pop takes the next request to serve: the oldest (FIFO) or the newest
// (LIFO). For a ghost run it returns a ghost of one request, standing for
// the run, and leaves the rest queued.
func (q *jobQueue) pop(lifo bool) *job {
	j := q.head
	if lifo {
		j = q.tail
	}
	if j == nil {
		return nil
	}
	q.n--
	if j.state == jobGhost && j.ghosts > 1 {
		j.ghosts--
		return &job{state: jobGhost, ghosts: 1, tick: j.tick, broken: j.broken}
	}
	q.unlink(j)
	return j
}
