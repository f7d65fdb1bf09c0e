// Package window is the sliding window that resil's breaker and adaptive
// throttle and resil/budget's window budget count in: a few quantities
// summed over a moving period, in a fixed number of slots, moved by the
// times it is given. It reads no clock.
package window

import "time"

// Slots is the resolution of the windows: a count leaves a window between
// period×(1-1/Slots) and period after it was made.
const Slots = 10

// Sliding counts three quantities over a moving period, in Slots slots of
// equal width. It moves lazily with the times it is given and never reads
// a clock. The zero Sliding is unusable: make one with New. Not safe for
// concurrent use: its owner locks.
type Sliding struct {
	// Sum holds each quantity's total over the window, as of the last
	// Advance. Read it; change it only through Add and Take.
	Sum [3]int64

	width   int64 // nanoseconds per slot
	head    int64 // absolute index of the newest slot
	started bool
	slots   [Slots][3]int64
}

// New returns an empty window over period.
func New(period time.Duration) Sliding {
	return Sliding{width: max(1, int64(period)/Slots)}
}

// Advance moves the window to now, dropping what fell out. A now earlier
// than one already seen counts as that one.
func (w *Sliding) Advance(now time.Time) {
	ns := now.UnixNano()
	slot := ns / w.width
	if ns < 0 && ns%w.width != 0 {
		slot-- // floor division, for times before 1970
	}
	switch {
	case !w.started:
		w.started, w.head = true, slot
	case slot <= w.head:
	case slot-w.head >= Slots:
		w.Reset()
		w.started, w.head = true, slot
	default:
		for w.head < slot {
			w.head++
			s := &w.slots[slotIndex(w.head)]
			for k := range s {
				w.Sum[k] -= s[k]
				s[k] = 0
			}
		}
	}
}

// Reset empties the window.
func (w *Sliding) Reset() {
	w.slots, w.Sum, w.started = [Slots][3]int64{}, [3]int64{}, false
}

// NewestEnd returns the Unix nanosecond at which the newest slot ends:
// until then, nothing leaves the window.
func (w *Sliding) NewestEnd() int64 { return (w.head + 1) * w.width }

// slotIndex maps an absolute slot index to its place in the ring. Go's %
// keeps the sign of the dividend, and times before 1970 (the zero Time, as
// virtual clocks often start from, is one) have negative slot indices.
func slotIndex(abs int64) int64 {
	i := abs % Slots
	if i < 0 {
		i += Slots
	}
	return i
}

// Add adds v to quantity k in the newest slot.
func (w *Sliding) Add(k int, v int64) {
	w.slots[slotIndex(w.head)][k] += v
	w.Sum[k] += v
}

// Take removes up to v of quantity k, newest slots first, and returns how
// much it removed.
func (w *Sliding) Take(k int, v int64) int64 {
	v = min(v, w.Sum[k])
	taken := int64(0)
	for back := int64(0); taken < v && back < Slots; back++ {
		i := slotIndex(w.head - back)
		d := min(v-taken, w.slots[i][k])
		w.slots[i][k] -= d
		taken += d
	}
	w.Sum[k] -= taken
	return taken
}
