package sim

import "math"

// eventKind says what an event does when its time comes.
type eventKind uint8

const (
	evRetry    eventKind = iota // a retry's backoff is over: send it
	evTimeout                   // an attempt's client gives up
	evAnswer                    // a request's answer reaches its client
	evComplete                  // a worker finishes a request
	evHedge                     // an attempt has been slow for the hedge delay
	evSend                      // an intent's first attempt may ask the pacer again
)

// event is one scheduled happening, in three words: when, its place in
// the push order with what it does, and the slot it is for. ref names an
// intent, an attempt or a request slot, gen the slot's generation when the
// event was scheduled, so an event for a slot that was freed and reused is
// recognised and dropped.
//
// Every field is a word, and events are copied field by field (set), never
// as a whole: an event passed by value is spilled to the stack a field at
// a time, and a struct copy reads it back 16 bytes at a time, or two
// narrow fields as one word; a load that spans stores still in flight
// cannot be forwarded from them and waits for them to retire. That wait
// was the costliest line of a push.
type event struct {
	at  int64  // virtual nanoseconds
	ord uint64 // seq<<16 | kind<<8 | aux: seq numbers the pushes (eventQueue.push sets it)
	obj uint64 // gen<<32 | ref
}

// mkEvent returns the event of kind k at at for slot ref of generation
// gen; aux is the outcome of evAnswer (answerOK, answerThrottled, or 0 for
// an error) and of evTierReply.
func mkEvent(at int64, ref int32, gen uint32, k eventKind, aux uint8) event {
	return event{at: at, ord: uint64(k)<<8 | uint64(aux), obj: uint64(gen)<<32 | uint64(uint32(ref))}
}

func (e *event) kind() eventKind { return eventKind(e.ord >> 8) }
func (e *event) aux() uint8      { return uint8(e.ord) }
func (e *event) ref() int32      { return int32(uint32(e.obj)) }
func (e *event) gen() uint32     { return uint32(e.obj >> 32) }

// set copies o into e field by field (see event).
func (e *event) set(o *event) {
	e.at, e.ord, e.obj = o.at, o.ord, o.obj
}

func (e *event) before(o *event) bool {
	return e.at < o.at || (e.at == o.at && e.ord < o.ord)
}

func (e *event) stamp() stamp { return stamp{e.at, e.ord} }

// stamp is where an event stands in the queue's order: its time, then the
// order of its push (ord, whose high bits are the push's number: no two
// events share them).
type stamp struct {
	at  int64
	ord uint64
}

func (s stamp) before(o stamp) bool {
	return s.at < o.at || (s.at == o.at && s.ord < o.ord)
}

// lane says which FIFO lane an event may go to. Most events are scheduled
// a constant delay after the present (timeouts, hedges, fixed latencies,
// a queue's service), so each such kind arrives in time order and a FIFO
// ring keeps it sorted for O(1). An event that would break its lane's
// order, or has no lane (retries, whose delays vary), goes to the first
// spare lane it keeps in order, and only then to the heap: patience
// sorting, exact all the same, since every lane stays sorted and the queue
// takes the least of their heads.
type lane uint8

const (
	laneTimeout lane = iota // attempts' timeouts only: pop drops the dead ones (see eventQueue.atts)
	laneHedge
	laneAnswer
	laneReject
	laneComplete
	laneSpare // the first of the spare lanes
)

const (
	nLanes   = int(laneSpare) + 3
	laneHeap = lane(nLanes) // no lane of its own
	heapSrc  = nLanes       // the heap's place among the sources
	nSources = nLanes + 1
)

// eventQueue is a priority queue on (at, seq): FIFO lanes for events that
// come in order, and a radix heap (radixHeap) for the rest. seq numbers every push,
// so ties break by insertion order and a run is deterministic; the order in
// which events come out is exactly that of a single heap.
//
// The lanes and the heap are its sources. heads holds the stamp of each
// source's earliest event, and order the sources that hold events, sorted
// by it: the next event is the head of order[0], a push behind a lane's
// head changes nothing, and a pop moves one source down the short list,
// usually by a step or two. A lane is a ring read and written in order,
// kept for the next run: the queue's memory is small, warm and in order,
// which a calendar of buckets (tried: fewer instructions) is not.
type eventQueue struct {
	heads  [nSources]stamp
	order  [nSources]uint8
	active int // sources in order
	// early is math.MaxInt64 less the earliest event's time (the head of
	// order[0]), kept as order changes, so that next, asked before every
	// step of a run, is one load; zero, as in a zero queue, when empty.
	early int64
	n     int
	seq   uint64 // pushes so far: 48 bits of ord, far more than a run makes
	lanes [nLanes]ring
	heap  radixHeap

	// atts is the run's attempt table, for the timeout lane's dead
	// heads: an attempt that ended before its timeout (nearly all, in a
	// fleet that is answered in time) has a newer generation than its
	// timeout event, which would do nothing when it came out. pop drops
	// such events once they reach the head of the lane, a ring step each,
	// rather than moving the lane through order and dispatching them. An
	// event that does nothing changes no other event's place, so the
	// order of the rest is the same. Nil: nothing is dropped.
	atts *[]attempt
}

// reset empties the queue, keeping the memory of its lanes and heap.
func (q *eventQueue) reset() {
	for i := range q.lanes {
		q.lanes[i].head, q.lanes[i].size = 0, 0
	}
	q.heap.reset()
	q.active, q.n, q.seq, q.early = 0, 0, 0, 0
}

func (q *eventQueue) len() int { return q.n }

// next returns the time of the earliest event, or math.MaxInt64 when the
// queue is empty.
func (q *eventQueue) next() int64 {
	return math.MaxInt64 - q.early
}

// push adds e. l is the lane it goes to first: an event kind's own lane,
// a spare lane as a hint (see retryLane), or laneHeap for none. If e would
// break that lane's order it goes to the first spare lane it keeps in
// order, and only then to the heap.
func (q *eventQueue) push(e event, l lane) {
	q.seq++
	e.ord = q.seq<<16 | e.ord&0xffff
	q.n++
	if int(l) < nLanes {
		// Most pushes go behind their own lane's head, in order, with
		// room in its ring: no call, and nothing else changes.
		if r := &q.lanes[l]; r.size > 0 && r.size < len(r.buf) && r.last().at <= e.at {
			r.buf[(r.head+r.size)&(len(r.buf)-1)].set(&e)
			r.size++
			return
		}
		if q.pushLane(e, l) {
			return
		}
	}
	for s := laneSpare; int(s) < nLanes; s++ {
		if s != l && q.pushLane(e, s) {
			return
		}
	}
	empty := q.heap.n == 0
	q.heap.push(&e)
	switch h := q.heap.min; {
	case empty:
		q.heads[heapSrc] = h
		q.enter(heapSrc)
	case h != q.heads[heapSrc]:
		q.heads[heapSrc] = h
		q.rise(heapSrc)
	}
}

// retryLane is the lane for the retry of an intent that has numbered n
// attempts. A backoff without jitter waits a delay that depends only on
// the retry's number, and retries are scheduled as time goes on, so the
// retries of each number come in time order: one spare lane each keeps
// them sorted with a push behind the lane's head. (Patience sorting alone
// would deal them out over the spare lanes in whatever order they come,
// each push trying lane after lane.) A jittered retry mostly misses its
// lane and finds another or the heap, as before.
func retryLane(n int32) lane {
	return laneSpare + lane(min(max(n-1, 0), int32(nLanes-int(laneSpare)-1)))
}

// pushLane appends e to lane l if that keeps the lane sorted.
func (q *eventQueue) pushLane(e event, l lane) bool {
	r := &q.lanes[l]
	if r.size == 0 {
		r.push(e)
		q.heads[l] = e.stamp()
		q.enter(int(l))
		return true
	}
	if r.last().at > e.at {
		return false
	}
	r.push(e) // behind the lane's head: the order stays
	return true
}

// enter adds source src, which just got its first event, to order.
func (q *eventQueue) enter(src int) {
	i := q.active
	q.active++
	q.lift(i, src)
}

// rise moves source src, already in order, up to its head's new place:
// its head got earlier.
func (q *eventQueue) rise(src int) {
	i := 0
	for int(q.order[i]) != src {
		i++
	}
	q.lift(i, src)
}

// lift puts source src at order[i] or, while its head comes before the
// one above, higher, and keeps early if it lands first.
func (q *eventQueue) lift(i, src int) {
	h := q.heads[src]
	for i > 0 && h.before(q.heads[q.order[i-1]]) {
		q.order[i] = q.order[i-1]
		i--
	}
	q.order[i] = uint8(src)
	if i == 0 {
		q.early = math.MaxInt64 - h.at
	}
}

// pop removes the earliest event and puts it in e; the queue must not be
// empty. (Into e rather than returned: a returned event is spilled a field
// at a time and copied whole, the stall event.set explains.)
func (q *eventQueue) pop(e *event) {
	src := int(q.order[0])
	more := false
	var h stamp // the source's new head
	if src == heapSrc {
		q.heap.pop(e)
		if more = q.heap.n > 0; more {
			h = q.heap.min
			q.heads[src] = h
		}
	} else {
		r := &q.lanes[src]
		e.set(r.first())
		r.drop()
		if src == int(laneTimeout) && q.atts != nil {
			for r.size > 0 && q.deadTimeout(r.first()) {
				r.drop()
				q.n--
			}
		}
		if more = r.size > 0; more {
			h = r.first().stamp()
			q.heads[src] = h
		}
	}
	q.n--
	if !more {
		q.active--
		copy(q.order[:q.active], q.order[1:q.active+1])
		q.early = 0
		if q.active > 0 {
			q.early = math.MaxInt64 - q.heads[q.order[0]].at
		}
		return
	}
	// The source's new head sinks to its place. Mostly it stays first,
	// or goes a step down: early is the head already in hand then, not a
	// load through the order just rewritten.
	if q.active == 1 {
		q.early = math.MaxInt64 - h.at
		return
	}
	second := q.order[1]
	sh := q.heads[second]
	if !sh.before(h) {
		q.early = math.MaxInt64 - h.at
		return
	}
	q.order[0] = second
	q.early = math.MaxInt64 - sh.at
	i := 1
	for i+1 < q.active && q.heads[q.order[i+1]].before(h) {
		q.order[i] = q.order[i+1]
		i++
	}
	q.order[i] = uint8(src)
}

// deadTimeout reports whether e, a timeout (evTimeout or evChainTimeout),
// is for an attempt that has already ended: the fleet would drop it.
func (q *eventQueue) deadTimeout(e *event) bool {
	return (*q.atts)[e.ref()].gen != e.gen()
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
	r.buf[(r.head+r.size)&(len(r.buf)-1)].set(&e)
	r.size++
}

// drop removes the first event.
func (r *ring) drop() {
	r.head = (r.head + 1) & (len(r.buf) - 1)
	r.size--
}
