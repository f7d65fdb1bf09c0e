package sim

import "math/bits"

// eventKind says what an event does when its time comes.
type eventKind uint8

const (
	evRetry    eventKind = iota // a retry's backoff is over: send it
	evTimeout                   // an attempt's client gives up
	evAnswer                    // an attempt's answer reaches its client
	evComplete                  // a queue worker finishes an attempt
	evHedge                     // an attempt has been slow for the hedge delay
	evSend                      // an intent's first attempt may ask the pacer again
)

// event is one scheduled happening. ref names an intent or an attempt slot,
// gen the slot's generation when the event was scheduled, so an event for
// a slot that was freed and reused is recognised and dropped.
type event struct {
	at   int64 // virtual nanoseconds
	seq  uint64
	ref  int32
	gen  uint32
	kind eventKind
	aux  uint8 // the outcome of evAnswer (answerOK, answerThrottled, or 0 for an error)
}

func (e *event) before(o *event) bool {
	return e.at < o.at || (e.at == o.at && e.seq < o.seq)
}

// lane says which FIFO lane an event may go to. Most events are scheduled
// a constant delay after the present (timeouts, hedges, fixed latencies),
// so each such kind arrives in time order and a FIFO ring keeps it sorted
// for O(1). An event that would break its lane's order, or has no lane
// (retries, whose delays vary), goes to the first spare lane it keeps in
// order, and only then to the heap: patience sorting, exact all the same,
// since every lane stays sorted and the queue takes the least of their
// heads.
type lane uint8

const (
	laneTimeout lane = iota
	laneHedge
	laneAnswer
	laneReject
	laneComplete
	laneSpare // the first of the spare lanes
	nLanes    = laneSpare + 3
	laneHeap  = nLanes // no lane of its own
)

// eventQueue is a priority queue on (at, seq): FIFO lanes for events that
// come in order, and a 4-ary min-heap for the rest. seq numbers every push,
// so ties break by insertion order and a run is deterministic; the order in
// which events come out is exactly that of a single heap.
type eventQueue struct {
	lanes [nLanes]ring
	heap  []event
	seq   uint64
	n     int
	best  int   // where the earliest event is: a lane, fromHeap, or unknown
	full  uint8 // bit l is set when lane l holds events
}

const (
	fromHeap = -1
	unknown  = -2
)

func (q *eventQueue) len() int { return q.n }

func (q *eventQueue) push(e event, l lane) {
	q.seq++
	e.seq = q.seq
	q.n++
	q.best = unknown
	if l < laneSpare && q.pushLane(e, l) {
		return
	}
	for l := laneSpare; l < nLanes; l++ {
		if q.pushLane(e, l) {
			return
		}
	}
	q.heapPush(e)
}

// pushLane appends e to lane l if that keeps the lane sorted.
func (q *eventQueue) pushLane(e event, l lane) bool {
	r := &q.lanes[l]
	if r.size > 0 && r.last().at > e.at {
		return false
	}
	r.push(e)
	q.full |= 1 << l
	return true
}

// peek returns the earliest event; the queue must not be empty. It
// remembers where the event is, so that a pop right after does not look
// again.
func (q *eventQueue) peek() *event {
	if q.best == unknown {
		q.best = fromHeap
		var best *event
		if len(q.heap) > 0 {
			best = &q.heap[0]
		}
		for m := q.full; m != 0; m &= m - 1 {
			i := bits.TrailingZeros8(m)
			if h := q.lanes[i].first(); best == nil || h.before(best) {
				best, q.best = h, i
			}
		}
	}
	if q.best == fromHeap {
		return &q.heap[0]
	}
	return q.lanes[q.best].first()
}

// pop removes and returns the earliest event; the queue must not be empty.
func (q *eventQueue) pop() event {
	q.peek()
	from := q.best
	q.best = unknown
	q.n--
	if from >= 0 {
		r := &q.lanes[from]
		e := r.pop()
		if r.size == 0 {
			q.full &^= 1 << from
		}
		return e
	}
	return q.heapPop()
}

func (q *eventQueue) heapPush(e event) {
	q.heap = append(q.heap, e)
	h := q.heap
	i := len(h) - 1
	for i > 0 {
		p := (i - 1) / 4
		if !h[i].before(&h[p]) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

func (q *eventQueue) heapPop() event {
	h := q.heap
	top := h[0]
	n := len(h) - 1
	last := h[n]
	q.heap = h[:n]
	if n == 0 {
		return top
	}
	h = q.heap
	i := 0
	for {
		c := 4*i + 1
		if c >= n {
			break
		}
		m := c
		for j := c + 1; j < c+4 && j < n; j++ {
			if h[j].before(&h[m]) {
				m = j
			}
		}
		if !h[m].before(&last) {
			break
		}
		h[i] = h[m]
		i = m
	}
	h[i] = last
	return top
}

// ring is a growable circular FIFO of events.
type ring struct {
	buf        []event
	head, size int
}

func (r *ring) first() *event { return &r.buf[r.head] }

func (r *ring) last() *event { return &r.buf[(r.head+r.size-1)&(len(r.buf)-1)] }

func (r *ring) push(e event) {
	if r.size == len(r.buf) {
		n := make([]event, max(64, 2*len(r.buf))) // a power of two
		for i := range r.size {
			n[i] = r.buf[(r.head+i)&(len(r.buf)-1)]
		}
		r.buf, r.head = n, 0
	}
	r.buf[(r.head+r.size)&(len(r.buf)-1)] = e
	r.size++
}

func (r *ring) pop() event {
	e := r.buf[r.head]
	r.head = (r.head + 1) & (len(r.buf) - 1)
	r.size--
	return e
}
