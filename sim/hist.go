package sim

import (
	"encoding/json"
	"fmt"
	"math"
	"math/bits"
	"time"
)

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

// Histogram is a histogram of durations in the buckets of the simulator's
// own (a quantile within about 3%), for results that must be added up
// after the fact: the lab's shards carry one per fleet, and merge sums
// them, where quantiles themselves do not add. The zero value is empty
// and ready to use. It is not safe for concurrent use.
type Histogram struct{ h histogram }

// Add counts d (negative durations count as zero).
func (h *Histogram) Add(d time.Duration) { h.h.add(int64(max(d, 0))) }

// Count is how many durations were added.
func (h *Histogram) Count() int64 { return h.h.n }

// Quantile is the q-quantile (0 < q <= 1), from the middle of its
// bucket; zero when empty.
func (h *Histogram) Quantile(q float64) time.Duration { return time.Duration(h.h.quantile(q)) }

// Merge adds o's counts to h's.
func (h *Histogram) Merge(o *Histogram) {
	for b, c := range o.h.counts {
		h.h.counts[b] += c
	}
	h.h.n += o.h.n
}

// histogramJSON is a Histogram on the wire: the nonempty buckets' indices
// (32 per power of two of nanoseconds, as histBucket numbers them) and
// their counts, in increasing order of index.
type histogramJSON struct {
	Buckets []int   `json:"buckets"`
	Counts  []int64 `json:"counts"`
}

// MarshalJSON writes the nonempty buckets only: a few hundred numbers at
// most, where the histogram holds 2,048.
func (h *Histogram) MarshalJSON() ([]byte, error) {
	js := histogramJSON{Buckets: []int{}, Counts: []int64{}}
	for b, c := range h.h.counts {
		if c > 0 {
			js.Buckets = append(js.Buckets, b)
			js.Counts = append(js.Counts, c)
		}
	}
	return json.Marshal(js)
}

// UnmarshalJSON reads what MarshalJSON wrote, and refuses buckets out of
// range, out of order or repeated, and counts that are negative or do not
// pair with a bucket.
func (h *Histogram) UnmarshalJSON(data []byte) error {
	var js histogramJSON
	if err := json.Unmarshal(data, &js); err != nil {
		return err
	}
	if len(js.Buckets) != len(js.Counts) {
		return fmt.Errorf("histogram: %d buckets but %d counts", len(js.Buckets), len(js.Counts))
	}
	var out histogram
	for i, b := range js.Buckets {
		c := js.Counts[i]
		switch {
		case b < 0 || b >= len(out.counts):
			return fmt.Errorf("histogram: buckets[%d] = %d, out of [0, %d)", i, b, len(out.counts))
		case i > 0 && b <= js.Buckets[i-1]:
			return fmt.Errorf("histogram: buckets[%d] = %d, not after %d", i, b, js.Buckets[i-1])
		case c < 0 || out.n > math.MaxInt64-c:
			return fmt.Errorf("histogram: counts[%d] = %d, negative or too many", i, c)
		}
		out.counts[b] = c
		out.n += c
	}
	h.h = out
	return nil
}
