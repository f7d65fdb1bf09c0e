package sim

import "math/bits"

// histogram counts durations in log-linear buckets: 32 linear steps per
// power of two, so a quantile is off by at most about 3%, in a fixed 16 KiB
// whatever the number of samples (memory stays flat in run length).
type histogram struct {
	counts [64 * histSub]int64
	n      int64
}

const histSub = 32

func histBucket(v int64) int {
	if v < histSub {
		return int(max(v, 0))
	}
	e := bits.Len64(uint64(v)) - 6 // v >> e is in [32, 64)
	return (e+1)*histSub + int(v>>e) - histSub
}

// histLow is the smallest value in bucket b.
func histLow(b int) int64 {
	if b < histSub {
		return int64(b)
	}
	e := b/histSub - 1
	return int64(b%histSub+histSub) << e
}

func (h *histogram) add(v int64) {
	h.counts[histBucket(v)]++
	h.n++
}

// quantile returns the q-quantile (0 < q <= 1) in the same unit as the
// samples, from the middle of its bucket; zero without samples.
func (h *histogram) quantile(q float64) int64 {
	if h.n == 0 {
		return 0
	}
	rank := int64(q*float64(h.n) + 0.5)
	rank = min(max(rank, 1), h.n)
	seen := int64(0)
	for b, c := range h.counts {
		seen += c
		if seen >= rank {
			lo := histLow(b)
			hi := histLow(b + 1)
			return lo + (hi-lo)/2
		}
	}
	return 0
}
