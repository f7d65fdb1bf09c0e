package admission

import (
	"slices"
	"testing"
	"time"
)

// FuzzLimiter checks the limiter's invariants over any sequence of
// acquires, releases (completed, dropped, ignored) and latencies: the limit
// stays in [MinLimit, MaxLimit] (at Limit when fixed), the in-flight count
// is what was acquired and not released and never negative, and Acquire
// admits only below the limit.
func FuzzLimiter(f *testing.F) {
	f.Add(uint8(1), uint8(5), uint8(20), []byte{0, 0, 0, 1, 2, 3, 0, 0, 0, 0, 1, 1, 1})
	f.Add(uint8(2), uint8(1), uint8(3), []byte{0, 0, 5, 9, 13, 0, 0, 0, 200, 1, 1, 2, 3})
	f.Add(uint8(0), uint8(2), uint8(2), []byte{0, 0, 0, 1, 3, 3, 3})
	f.Add(uint8(3), uint8(4), uint8(9), []byte{0, 0, 0, 0, 9, 13, 1, 0, 0, 5, 1, 2, 0, 21, 1})
	f.Fuzz(func(t *testing.T, alg, lo, span uint8, ops []byte) {
		minL, maxL := int(lo)+1, int(lo)+1+int(span)
		var s LimitSettings
		switch LimitAlgorithm(alg % 4) {
		case LimitFixed:
			s = FixedLimit{Limit: int(lo) + 1}
		case LimitAIMD:
			s = AIMDLimit{MinLimit: minL, MaxLimit: maxL, Backoff: 0.5, SlowRTT: time.Second}
		case LimitGradient:
			s = GradientLimit{MinLimit: minL, MaxLimit: maxL, Window: 100 * time.Millisecond, WindowSamples: 2, LongWindow: 5}
		case LimitVegas:
			s = VegasLimit{MinLimit: minL, MaxLimit: maxL, Probe: int(span % 4)}
		}
		l, err := NewLimiter(s)
		if err != nil {
			t.Fatal(err)
		}
		lo2, hi := l.s.MinLimit, l.s.MaxLimit
		if s.Algorithm() == LimitFixed {
			lo2, hi = l.s.Limit, l.s.Limit
		}
		now := t0
		var held []LimitPermit
		for _, op := range ops {
			now = now.Add(time.Duration(op>>2) * 10 * time.Millisecond)
			before := l.Limit()
			switch op % 4 {
			case 0:
				p, ok := l.Acquire(now)
				if ok != (len(held) < before) {
					t.Fatalf("Acquire = %v with %d in flight and limit %d", ok, len(held), before)
				}
				if ok {
					held = append(held, p)
				}
			case 1, 2:
				if len(held) > 0 {
					l.Release(now, held[0], op%4 == 2)
					held = held[1:]
				} else {
					l.Release(now, LimitPermit{ok: true, start: now}, false) // a stray release
				}
			case 3:
				if len(held) > 0 {
					l.Ignore(held[len(held)-1])
					held = held[:len(held)-1]
				}
			}
			if got := l.Limit(); got < lo2 || got > hi {
				t.Fatalf("limit %d outside [%d, %d]", got, lo2, hi)
			}
			if l.InFlight() != len(held) || l.InFlight() < 0 {
				t.Fatalf("in flight %d, want %d", l.InFlight(), len(held))
			}
		}
	})
}

// FuzzWaitQueue checks the queue against a model: it holds what was pushed
// and not taken, at most MaxLen; Next serves only entries that waited at
// most the current MaxWait, refuses the oldest first, and serves in the
// discipline's order.
func FuzzWaitQueue(f *testing.F) {
	f.Add(uint8(0), uint8(3), []byte{0, 0, 0, 0, 1, 1, 40, 1, 1})
	f.Add(uint8(1), uint8(2), []byte{0, 4, 8, 1, 12, 1, 0, 2, 1})
	f.Add(uint8(2), uint8(5), []byte{0, 0, 0, 60, 60, 1, 0, 1, 2, 1, 1})
	f.Fuzz(func(t *testing.T, disc, maxLen uint8, ops []byte) {
		s := QueueSettings{MaxLen: int(maxLen%8) + 1, Discipline: Discipline(disc % 3), MaxWait: time.Second, OverloadWait: 300 * time.Millisecond}
		q, err := NewWaitQueue[int](s)
		if err != nil {
			t.Fatal(err)
		}
		type entry struct {
			v  int
			at time.Time
		}
		var model []entry
		now, next := t0, 0
		for _, op := range ops {
			now = now.Add(time.Duration(op>>2) * 50 * time.Millisecond)
			switch op % 3 {
			case 0:
				next++
				ok := q.Push(now, next)
				if ok != (len(model) < s.MaxLen) {
					t.Fatalf("Push = %v with %d of %d", ok, len(model), s.MaxLen)
				}
				if ok {
					model = append(model, entry{next, now})
				}
			case 1:
				limit := q.MaxWait(now)
				overloaded := q.Overloaded(now)
				v, waited, r, ok := q.Next(now)
				if ok != (len(model) > 0) {
					t.Fatalf("Next ok = %v with %d queued", ok, len(model))
				}
				if !ok {
					break
				}
				i := slices.IndexFunc(model, func(e entry) bool { return e.v == v })
				if i < 0 || now.Sub(model[i].at) != waited {
					t.Fatalf("Next returned %d, waited %v: not queued so", v, waited)
				}
				switch {
				case now.Sub(model[0].at) > limit:
					if r != ShedQueueTimeout || i != 0 {
						t.Fatalf("the oldest waited too long, got %d %v", v, r)
					}
				case r != ShedNone:
					t.Fatalf("refused %d (%v) after %v of %v", v, r, waited, limit)
				case s.Discipline == LIFO || (s.Discipline == AdaptiveLIFO && overloaded):
					if i != len(model)-1 {
						t.Fatalf("LIFO served %d, not the newest", v)
					}
				default:
					if i != 0 {
						t.Fatalf("FIFO served %d, not the oldest", v)
					}
				}
				model = slices.Delete(model, i, i+1)
			case 2:
				if len(model) > 0 {
					i := int(op>>2) % len(model)
					if !q.Remove(now, model[i].v) {
						t.Fatalf("Remove(%d) = false", model[i].v)
					}
					model = slices.Delete(model, i, i+1)
				}
			}
			if q.Len() != len(model) {
				t.Fatalf("Len = %d, want %d", q.Len(), len(model))
			}
		}
	})
}

// FuzzDeadlineDecide checks that the deadline shedder admits exactly the
// requests that can finish, with the reserve, within their deadline.
func FuzzDeadlineDecide(f *testing.F) {
	f.Add(int64(100), int64(10), int64(50), int64(120))
	f.Add(int64(0), int64(0), int64(0), int64(0))
	f.Add(int64(1e9), int64(1e6), int64(-5), int64(1e9))
	f.Fuzz(func(t *testing.T, service, reserve, observed, left int64) {
		s := DeadlineSettings{ServiceTime: time.Duration(service % int64(time.Hour)), Reserve: time.Duration(reserve % int64(time.Minute)), Learn: observed%2 == 0}
		d, err := NewDeadlineShedder(s)
		if err != nil {
			return // negative settings: refused, as TestDeadlineLearn checks
		}
		d.Observe(time.Duration(observed))
		left = left % int64(24*time.Hour)
		r := d.Decide(t0, t0.Add(time.Duration(left)))
		rest := time.Duration(left) - s.Reserve
		switch {
		case rest <= 0:
			if r != ShedExpired {
				t.Fatalf("%v left with reserve %v: %v", time.Duration(left), s.Reserve, r)
			}
		case rest < d.Estimate():
			if r != ShedTooLate {
				t.Fatalf("%v left, estimate %v: %v", rest, d.Estimate(), r)
			}
		default:
			if r != ShedNone {
				t.Fatalf("%v left, estimate %v: %v", rest, d.Estimate(), r)
			}
		}
	})
}
