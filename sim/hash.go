package sim

// mix is SplitMix64's finaliser: a bijection on uint64 whose outputs pass
// as independent uniform draws for consecutive inputs. The simulator draws
// per-intent and per-attempt facts (is it idempotent, is its key broken, does
// this attempt fail, which replica serves it) by hashing (seed, intent,
// attempt, purpose), not from a stream: the draw is the same in every fleet
// and whatever else happened, so fleets see the same first attempts, and a
// refused attempt's ground truth is drawn without disturbing anything.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// Purposes of a draw: one hash family each.
const (
	drawIdempotent uint64 = iota + 1
	drawKey
	drawBroken
	drawError
	drawReplica
	drawTruth
	drawInbound
)

// draw returns a uniform number in [0, 1) for (seed, intent, attempt, purpose).
func draw(seed, intent uint64, attempt int, purpose uint64) float64 {
	h := mix(seed ^ mix(intent*0x9e3779b97f4a7c15+uint64(attempt)<<48+purpose))
	return float64(h>>11) / (1 << 53)
}
