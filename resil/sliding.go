package resil

import "time"

// windowSlots is the resolution of the sliding windows: a count leaves a
// window between period×(1-1/windowSlots) and period after it was made.
const windowSlots = 10

// sliding counts three quantities over a moving period, in windowSlots
// slots of equal width. It moves lazily with the times it is given and
// never reads a clock. Not safe for concurrent use: its owner locks.
type sliding struct {
	width   int64 // nanoseconds per slot
	head    int64 // absolute index of the newest slot
	started bool
	slots   [windowSlots][3]int64
	sum     [3]int64
}

func newSliding(period time.Duration) sliding {
	return sliding{width: max(1, int64(period)/windowSlots)}
}

// advance moves the window to now, dropping what fell out. A now earlier
// than one already seen counts as that one.
func (w *sliding) advance(now time.Time) {
	ns := now.UnixNano()
	slot := ns / w.width
	if ns < 0 && ns%w.width != 0 {
		slot-- // floor division, for times before 1970
	}
	switch {
	case !w.started:
		w.started, w.head = true, slot
	case slot <= w.head:
	case slot-w.head >= windowSlots:
		w.reset()
		w.started, w.head = true, slot
	default:
		for w.head < slot {
			w.head++
			s := &w.slots[slotIndex(w.head)]
			for k := range s {
				w.sum[k] -= s[k]
				s[k] = 0
			}
		}
	}
}

func (w *sliding) reset() {
	w.slots, w.sum, w.started = [windowSlots][3]int64{}, [3]int64{}, false
}

// slotIndex maps an absolute slot index to its place in the ring. Go's %
// keeps the sign of the dividend, and times before 1970 (the zero Time, as
// virtual clocks often start from, is one) have negative slot indices.
func slotIndex(abs int64) int64 {
	i := abs % windowSlots
	if i < 0 {
		i += windowSlots
	}
	return i
}

// add adds v to quantity k in the newest slot.
func (w *sliding) add(k int, v int64) {
	w.slots[slotIndex(w.head)][k] += v
	w.sum[k] += v
}

// take removes up to v of quantity k, newest slots first, and returns how
// much it removed.
func (w *sliding) take(k int, v int64) int64 {
	v = min(v, w.sum[k])
	taken := int64(0)
	for back := int64(0); taken < v && back < windowSlots; back++ {
		i := slotIndex(w.head - back)
		d := min(v-taken, w.slots[i][k])
		w.slots[i][k] -= d
		taken += d
	}
	w.sum[k] -= taken
	return taken
}
