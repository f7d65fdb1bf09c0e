package sim

import (
	"math"
	"math/bits"
)

// radixHeap is the event queue's place for the events no lane keeps in
// order (mostly retries whose backoff is jittered): a radix heap on the
// queue's order, (at, ord). A run's events come out in time order and
// every push is at or after the present and numbered after every earlier
// push, so each key pushed is greater than the last one popped; a radix
// heap uses that. Bucket i holds the keys whose highest bit that differs
// from the last popped key is bit i−1 (bucket 0: the key equal to it), so
// every key in a bucket is less than every key in a higher one. A pop
// takes the least key, from the lowest bucket that holds any, and deals
// the rest of that bucket out to lower buckets, relative to the key just
// popped: each key moves down a few times in its life, a shift and a
// store, where a 4-ary heap compared keys on every level of every push
// and pop, branches no predictor could follow (the jitter is random). The
// order out is the order of (at, ord): exactly the heap's.
//
// The zero radixHeap is empty and ready; reset keeps its memory.
type radixHeap struct {
	last    stamp        // the last key popped: no key in the heap is less (see push)
	buckets [129][]event // by the bit length of key ^ last, over the key's 128 bits
	full    [3]uint64    // bit i of the 129: bucket i holds events
	n       int          // events held
	min     stamp        // the least key held, when n > 0
	minB    int          // its bucket
	minI    int          // and place in it
}

// radixBase is the key every key is at least: time math.MinInt64, push 0.
var radixBase = stamp{at: math.MinInt64}

func (h *radixHeap) reset() {
	for i := range h.full {
		for w := h.full[i]; w != 0; w &= w - 1 {
			b := i*64 + bits.TrailingZeros64(w)
			h.buckets[b] = h.buckets[b][:0]
		}
		h.full[i] = 0
	}
	h.last, h.n = radixBase, 0
}

// bucket is the bucket of key s relative to the last key popped.
func (h *radixHeap) bucket(s stamp) int {
	// The XOR of the times with their sign bits flipped (which puts
	// int64's order on uint64's), where the flips cancel.
	if x := uint64(s.at) ^ uint64(h.last.at); x != 0 {
		return 64 + bits.Len64(x)
	}
	return bits.Len64(s.ord ^ h.last.ord)
}

func (h *radixHeap) put(e *event, s stamp) {
	b := h.bucket(s)
	h.buckets[b] = append(h.buckets[b], event{})
	bk := h.buckets[b]
	bk[len(bk)-1].set(e) // see event.set
	h.full[b>>6] |= 1 << (b & 63)
	if h.n == 0 || s.before(h.min) {
		h.min, h.minB, h.minI = s, b, len(bk)-1
	}
	h.n++
}

// push adds e.
func (h *radixHeap) push(e *event) {
	s := e.stamp()
	if s.before(h.last) {
		// Before the last key popped: no run schedules into its past,
		// but the queue's order holds all the same, at the cost of
		// dealing the heap out again from the new least key.
		h.rebase(s)
	}
	h.put(e, s)
}

// rebase deals every event out again relative to s, a key less than the
// last popped and so less than every key held.
func (h *radixHeap) rebase(s stamp) {
	var all []event
	for b := range h.buckets {
		all = append(all, h.buckets[b]...)
		h.buckets[b] = h.buckets[b][:0]
	}
	h.full = [3]uint64{}
	h.last, h.n = s, 0
	for i := range all {
		h.put(&all[i], all[i].stamp())
	}
}

// pop removes the least event and puts it in e; the heap must not be
// empty.
func (h *radixHeap) pop(e *event) {
	b := h.minB
	bk := h.buckets[b]
	e.set(&bk[h.minI])
	n := len(bk) - 1
	bk[h.minI].set(&bk[n])
	bk = bk[:n]
	h.n--
	h.last = h.min
	h.buckets[b] = bk[:0]
	h.full[b>>6] &^= 1 << (b & 63)
	// The rest of the bucket goes lower: relative to the key just
	// popped, which shared their bits above b−1, they differ below it.
	for i := range bk {
		s := bk[i].stamp()
		nb := h.bucket(s)
		h.buckets[nb] = append(h.buckets[nb], event{})
		to := h.buckets[nb]
		to[len(to)-1].set(&bk[i])
		h.full[nb>>6] |= 1 << (nb & 63)
	}
	if h.n == 0 {
		return
	}
	// The least key is in the lowest bucket that holds any.
	for i := range h.full {
		if w := h.full[i]; w != 0 {
			b = i*64 + bits.TrailingZeros64(w)
			break
		}
	}
	bk = h.buckets[b]
	m := 0
	for i := 1; i < len(bk); i++ {
		if bk[i].before(&bk[m]) {
			m = i
		}
	}
	h.min, h.minB, h.minI = bk[m].stamp(), b, m
}
