package sim

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestEventQueueOrder drives the queue with random schedules, against a
// plain list searched for its least (at, seq): every pop must return the
// same event, and next the same time. The lanes get events in order and
// out of it, so events go to every lane, the spare lanes and the heap; the
// delays range from none (ties) to far beyond everything else.
func TestEventQueueOrder(t *testing.T) {
	type stamped struct {
		event
		seq uint64
	}
	for seed := range uint64(40) {
		{
			r := rand.New(rand.NewPCG(seed, 1))
			var q eventQueue
			q.reset()
			var ref []stamped
			now, seq := int64(0), uint64(0)
			delay := func() int64 {
				switch r.IntN(8) {
				case 0:
					return 0
				case 1:
					return r.Int64N(1 << 12)
				case 2:
					return r.Int64N(1 << 22)
				case 3:
					return r.Int64N(1 << 30)
				case 4:
					return r.Int64N(1 << 36)
				case 5:
					return int64(1e9) // a fixed timeout
				case 6:
					return r.Int64N(1 << 50) // beyond the far wheel
				}
				return r.Int64N(1 << 26)
			}
			for step := range 20000 {
				if len(ref) == 0 || r.IntN(100) < 52 {
					e := mkEvent(now+delay(), int32(step), 0, 0, 0)
					if r.IntN(20) == 0 && now < math.MaxInt64/2 { // far beyond everything
						e.at = math.MaxInt64 / 2
					}
					seq++
					q.push(e, lane(r.IntN(int(laneHeap)+1)))
					e.ord = seq<<16 | e.ord&0xffff
					ref = append(ref, stamped{e, seq})
					continue
				}
				best := 0
				for i, x := range ref {
					if b := ref[best]; x.at < b.at || (x.at == b.at && x.seq < b.seq) {
						best = i
					}
				}
				want := ref[best].event
				ref = append(ref[:best], ref[best+1:]...)
				if got := q.next(); got != want.at {
					t.Fatalf("seed %d step %d: next = %d, want %d", seed, step, got, want.at)
				}
				var got event
				q.pop(&got)
				if got != want {
					t.Fatalf("seed %d step %d: pop = %+v, want %+v", seed, step, got, want)
				}
				now = got.at
				if q.len() != len(ref) {
					t.Fatalf("len = %d, want %d", q.len(), len(ref))
				}
			}
			if len(ref) == 0 && q.next() != math.MaxInt64 {
				t.Fatalf("empty queue: next = %d", q.next())
			}
			q.reset()
			if q.len() != 0 || q.next() != math.MaxInt64 {
				t.Fatal("reset left events")
			}
		}
	}
}

// TestEventQueueDropsDeadTimeouts drives the queue with timeouts of
// attempts that end at random (their generation moves on) among other
// events: every event that comes out must be the least of those left but
// for dead timeouts (which the queue may drop unseen), and no live event
// may be dropped: all come out, in order.
func TestEventQueueDropsDeadTimeouts(t *testing.T) {
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 2))
		atts := make([]attempt, 64)
		var q eventQueue
		q.reset()
		q.atts = &atts
		var ref []event // pushed and not yet out, with their push order
		dead := func(e *event) bool {
			return e.kind() == evTimeout && atts[e.ref()].gen != e.gen()
		}
		now, seq, dropped := int64(0), uint64(0), 0
		pop := func(step int) {
			var got event
			q.pop(&got)
			k := -1
			for i := range ref {
				if ref[i] == got {
					k = i
				}
			}
			if k < 0 {
				t.Fatalf("seed %d step %d: pop = %+v, never pushed or already out", seed, step, got)
			}
			keep := ref[:0]
			for i := range ref {
				e := ref[i]
				switch {
				case i == k:
				case e.before(&got) && !dead(&e):
					t.Fatalf("seed %d step %d: pop = %+v, but live %+v is earlier", seed, step, got, e)
				case e.before(&got):
					dropped++ // unseen, as it should
				default:
					keep = append(keep, e)
				}
			}
			ref = keep
			now = got.at
		}
		for step := range 20000 {
			switch n := r.IntN(100); {
			case n < 30: // an attempt's timeout, a fixed delay on
				a := r.IntN(len(atts))
				e := mkEvent(now+1e9, int32(a), atts[a].gen, evTimeout, 0)
				seq++
				q.push(e, laneTimeout)
				e.ord = seq<<16 | e.ord&0xffff
				ref = append(ref, e)
			case n < 50: // another event
				e := mkEvent(now+r.Int64N(2e9), int32(step), 0, evRetry, 0)
				seq++
				q.push(e, laneHeap)
				e.ord = seq<<16 | e.ord&0xffff
				ref = append(ref, e)
			case n < 70: // an attempt ends
				atts[r.IntN(len(atts))].gen++
			default:
				if q.next() != math.MaxInt64 {
					pop(step)
				}
			}
		}
		for q.next() != math.MaxInt64 {
			pop(-1)
		}
		for _, e := range ref {
			if !dead(&e) {
				t.Fatalf("seed %d: live %+v never came out", seed, e)
			}
		}
		if q.len() != 0 {
			t.Fatalf("seed %d: len = %d after the last event", seed, q.len())
		}
		if dropped+len(ref) == 0 {
			t.Fatalf("seed %d: no dead timeout was dropped", seed)
		}
	}
}

// TestRadixHeapOrder pushes random keys into a radix heap, now and then
// one before the last popped (which no run does, and the heap must still
// order: it deals itself out again), and pops them against a plain list
// searched for its least.
func TestRadixHeapOrder(t *testing.T) {
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 2))
		var h radixHeap
		h.reset()
		var ref []event
		now, seq := int64(0), uint64(0)
		for step := range 5000 {
			if len(ref) == 0 || r.IntN(100) < 55 {
				at := now + r.Int64N(1<<uint(r.IntN(40)))
				switch r.IntN(50) {
				case 0:
					at = now - r.Int64N(1<<20) // in the past
				case 1:
					at = now // a tie in time
				case 2:
					at = math.MinInt64 + r.Int64N(10)
				}
				seq++
				e := mkEvent(at, int32(step), 0, 0, 0)
				e.ord = seq<<16 | e.ord&0xffff
				h.push(&e)
				ref = append(ref, e)
				continue
			}
			best := 0
			for i := range ref {
				if ref[i].before(&ref[best]) {
					best = i
				}
			}
			want := ref[best]
			ref = append(ref[:best], ref[best+1:]...)
			if h.min != want.stamp() {
				t.Fatalf("seed %d step %d: min = %+v, want %+v", seed, step, h.min, want.stamp())
			}
			var got event
			h.pop(&got)
			if got != want {
				t.Fatalf("seed %d step %d: pop = %+v, want %+v", seed, step, got, want)
			}
			now = max(now, got.at)
			if h.n != len(ref) {
				t.Fatalf("seed %d step %d: n = %d, want %d", seed, step, h.n, len(ref))
			}
		}
		h.reset()
		if h.n != 0 {
			t.Fatal("reset left events")
		}
	}
}
