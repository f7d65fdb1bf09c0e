package lab

import (
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retrystorm/retrystorm/resil"
	"github.com/retrystorm/retrystorm/sim"
)

// count names a per-tick count of the simulator's series.
type count uint8

const (
	cIntents   count = iota // load generator: intents started
	cFirst                  // gateway: first attempts sent
	cRetries                // gateway: retries sent
	cHedges                 // gateway: hedges sent
	cSuccesses              // origin: attempts it answered with success, by the tick sent (TickHeader)
	cGoodput                // gateway: successes that came back in time, by the tick sent
	cFailed                 // gateway: failed attempts, by the tick sent
	cRefused                // gateway: attempts its breakers refused
	cThrottled              // gateway: attempts its adaptive throttles refused
	nCounts
)

// Tally is what one fleet's run measured, tick by tick. Each component
// adds what it sees where it sees it: attempts by kind and their fate at
// the gateway, successes at the origin, intents at the load generator.
// Every count of an attempt goes in the tick it was sent in, as in the
// simulator: the gateway tells the servers that tick (TickHeader), so an
// attempt that crosses a tick's end on its way is not counted in two
// ticks, and the result's accounting identities (sim.Result.Check) hold.
// Offered load is what the gateway sent, the sum of the attempts by kind. A sampler records the gauges (queue, open breakers) at
// the end of each tick. Ticks are counted from Start; what happens outside
// the run's ticks is not counted per tick, as in the simulator.
//
// Make one with NewTally. It is safe for concurrent use, and its memory is
// fixed when it is made: a few words per tick, and a bounded sample of
// latencies. A nil *Tally records nothing, so the components also run on
// their own.
type Tally struct {
	start time.Time
	tick  time.Duration
	n     int
	c     [nCounts][]atomic.Int64
	queue []atomic.Int64
	open  []atomic.Uint64 // math.Float64bits of the share of clients whose breaker is open

	totals    [nTotals]atomic.Int64
	lostMu    sync.Mutex
	lost      sim.LostBy
	latencies reservoir // of the intents that succeeded, in seconds of wall-clock time
	// hist counts the same latencies in buckets, for a shard's results
	// to add up with the others' (quantiles do not add; counts do).
	histMu sync.Mutex
	hist   sim.Histogram
}

// total names a count over the whole run.
type total uint8

const (
	tTimeouts total = iota // attempts that timed out at the gateway
	tWasted                // attempts the origin served after their client left
	tDropped               // attempts a shedding origin skipped, unanswered
	tVictims               // intents that arrived after the trigger and saw a failure
	tThrown                // breaker and throttle refusals the origin would have answered in time
	nTotals
)

// NewTally returns a tally of n ticks of length tick from start.
func NewTally(start time.Time, tick time.Duration, n int) *Tally {
	t := &Tally{start: start, tick: tick, n: n}
	for i := range t.c {
		t.c[i] = make([]atomic.Int64, n)
	}
	t.queue = make([]atomic.Int64, n)
	t.open = make([]atomic.Uint64, n)
	t.latencies.init(4096, uint64(start.UnixNano()))
	return t
}

// tickOf returns the tick at time at, or -1 outside the run.
func (t *Tally) tickOf(at time.Time) int {
	if t == nil {
		return -1
	}
	d := at.Sub(t.start)
	if d < 0 {
		return -1
	}
	k := int64(d / t.tick)
	if k >= int64(t.n) {
		return -1
	}
	return int(k)
}

// sent is the attempts sent in tick k, of every kind: its offered load.
func (t *Tally) sent(k int) int64 {
	return t.c[cFirst][k].Load() + t.c[cRetries][k].Load() + t.c[cHedges][k].Load()
}

// TickHeader carries, from the lab's gateways and tiers to the servers
// they call, the tick the attempt was sent in, in the decimal.
const TickHeader = "Retrystorm-Tick"

// sentTick returns the tick an attempt was sent in, from its TickHeader
// value v, or the tick of now (its arrival) when v is not one of the run's
// ticks: a sender outside the lab.
func (t *Tally) sentTick(v string, now time.Time) int {
	if t == nil {
		return -1
	}
	if k, err := strconv.Atoi(v); err == nil && k >= 0 && k < t.n {
		return k
	}
	return t.tickOf(now)
}

// add counts one c in tick k (nothing for k < 0).
func (t *Tally) add(c count, k int) {
	if t != nil && k >= 0 {
		t.c[c][k].Add(1)
	}
}

// addNow counts one c in the tick of now.
func (t *Tally) addNow(c count, now time.Time) { t.add(c, t.tickOf(now)) }

// inc adds one to a run total.
func (t *Tally) inc(x total) {
	if t != nil {
		t.totals[x].Add(1)
	}
}

// loss is why an intent never succeeded: the reason resil stopped it, or
// that the run ended first.
type loss struct {
	reason     resil.StopReason
	unfinished bool
}

// lose counts an intent that never succeeded, in the simulator's columns.
func (t *Tally) lose(why loss) {
	if t == nil {
		return
	}
	t.lostMu.Lock()
	defer t.lostMu.Unlock()
	if why.unfinished {
		t.lost.Unfinished++
		return
	}
	t.lost.Add(why.reason)
}

// succeed counts an intent that succeeded after took (wall-clock).
func (t *Tally) succeed(took time.Duration) {
	if t != nil {
		t.latencies.add(took.Seconds())
		t.histMu.Lock()
		t.hist.Add(took)
		t.histMu.Unlock()
	}
}

// latencyHistogram returns a copy of the latencies of the intents that
// succeeded, in wall-clock time, counted in buckets.
func (t *Tally) latencyHistogram() *sim.Histogram {
	h := new(sim.Histogram)
	t.histMu.Lock()
	h.Merge(&t.hist)
	t.histMu.Unlock()
	return h
}

// get returns a run total.
func (t *Tally) get(x total) int64 { return t.totals[x].Load() }

// sample records the gauges at the end of tick k.
func (t *Tally) sample(k int, queue int64, open float64) {
	if t == nil || k < 0 || k >= t.n {
		return
	}
	t.queue[k].Store(queue)
	t.open[k].Store(math.Float64bits(open))
}

// tickValues is one tick as the live view shows it.
type tickValues struct {
	Tick              int     `json:"tick"`
	Offered           int64   `json:"offered"`
	ErrorRate         float64 `json:"error_rate"`
	RetriesPerRequest float64 `json:"retries_per_request"`
	Queue             int64   `json:"queue"`
	Goodput           int64   `json:"goodput"`
}

// values returns tick k as it stands now: its attempts may still be out,
// so the error rate and goodput of the latest ticks grow for a while.
func (t *Tally) values(k int) tickValues {
	v := tickValues{
		Tick:    k,
		Offered: t.sent(k),
		Queue:   t.queue[k].Load(),
		Goodput: t.c[cGoodput][k].Load(),
	}
	v.ErrorRate = share(t.c[cFailed][k].Load(), v.Offered)
	v.RetriesPerRequest = share(t.c[cRetries][k].Load(), t.c[cIntents][k].Load())
	return v
}

func share(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// series returns the per-tick counts as the simulator's series; the derived
// ones are left to sim.Summarize.
func (t *Tally) series() sim.Series {
	s := sim.NewSeries(t.n)
	for k := range t.n {
		s.Intents[k] = t.c[cIntents][k].Load()
		s.Offered[k] = t.sent(k)
		s.FirstAttempts[k] = t.c[cFirst][k].Load()
		s.Retries[k] = t.c[cRetries][k].Load()
		s.Hedges[k] = t.c[cHedges][k].Load()
		s.Successes[k] = t.c[cSuccesses][k].Load()
		s.Goodput[k] = t.c[cGoodput][k].Load()
		s.FailedAttempts[k] = t.c[cFailed][k].Load()
		s.BreakerRefusals[k] = t.c[cRefused][k].Load()
		s.ThrottleRefusals[k] = t.c[cThrottled][k].Load()
		s.Queue[k] = t.queue[k].Load()
		s.BreakerOpen[k] = math.Float64frombits(t.open[k].Load())
	}
	return s
}

func (t *Tally) lostBy() sim.LostBy {
	t.lostMu.Lock()
	defer t.lostMu.Unlock()
	return t.lost
}

// reservoir keeps a uniform sample of at most cap values (Vitter's
// algorithm R), so that quantiles of a long run cost fixed memory.
type reservoir struct {
	mu   sync.Mutex
	v    []float64
	seen int64
	rng  *rand.Rand
}

func (r *reservoir) init(size int, seed uint64) {
	r.v = make([]float64, 0, size)
	r.rng = rand.New(rand.NewPCG(seed, 0x5eed))
}

func (r *reservoir) add(x float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen++
	if len(r.v) < cap(r.v) {
		r.v = append(r.v, x)
		return
	}
	if j := r.rng.Int64N(r.seen); j < int64(len(r.v)) {
		r.v[j] = x
	}
}

// quantiles returns the q-quantiles of the sample (nearest rank); zeros
// when it is empty.
func (r *reservoir) quantiles(qs ...float64) []float64 {
	r.mu.Lock()
	v := slices.Clone(r.v)
	r.mu.Unlock()
	slices.Sort(v)
	out := make([]float64, len(qs))
	if len(v) == 0 {
		return out
	}
	for i, q := range qs {
		k := int(math.Ceil(q*float64(len(v)))) - 1
		out[i] = v[min(max(k, 0), len(v)-1)]
	}
	return out
}
