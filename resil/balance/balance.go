package balance

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retrystorm/retrystorm/resil"
	"github.com/retrystorm/retrystorm/resil/internal/entropy"
	"github.com/retrystorm/retrystorm/resil/outlier"
)

// ErrNoHost: every host is ejected and panic mode is off (or the panic
// threshold is not reached), so there is no host to pick.
var ErrNoHost = errors.New("balance: no host to pick: every host is ejected")

// ErrUnknownKind: [New] was given a Kind that names no picker.
var ErrUnknownKind = errors.New("balance: unknown picker kind")

// Kind names a picker, as configs write it.
type Kind string

// The pickers' kinds.
const (
	KindRoundRobin   Kind = "round_robin"
	KindRandom       Kind = "random"
	KindP2C          Kind = "p2c"
	KindLeastRequest Kind = "least_request"
	KindPeakEWMA     Kind = "peak_ewma"
)

// New returns the picker of kind k for s, for callers that read the kind
// from a config; an unknown kind is ErrUnknownKind.
func New(k Kind, s Settings) (Picker, error) {
	var p Picker
	var err error
	switch k {
	case KindRoundRobin:
		p, err = NewRoundRobin(s)
	case KindRandom:
		p, err = NewRandom(s)
	case KindP2C:
		p, err = NewP2C(s)
	case KindLeastRequest:
		p, err = NewLeastRequest(s)
	case KindPeakEWMA:
		p, err = NewPeakEWMA(s)
	default:
		return nil, fmt.Errorf("%w %q", ErrUnknownKind, k)
	}
	if err != nil {
		return nil, err // not a typed nil in the interface
	}
	return p, nil
}

// NoPanic as Settings.PanicThreshold turns panic mode off: with every host
// ejected, Pick fails with ErrNoHost, as gRPC's pickers do.
const NoPanic = -1

// Settings configures a picker. The zero value is invalid: Hosts is
// required. Fields a picker does not use must be zero. A plain value:
// copying it is safe (Detector is shared by the copies).
type Settings struct {
	// Hosts is how many hosts to pick from, named 0 to Hosts-1. Required:
	// 1 to 1,000,000.
	Hosts int
	// Detector, if set, is asked on every pick which hosts are ejected. It
	// must watch the same number of hosts. Nil means no host is ever
	// ejected.
	Detector *outlier.Detector
	// PanicThreshold is Envoy's healthy_panic_threshold, in percent: when
	// fewer hosts than that are healthy (see outlier.Panic), the picker
	// ignores ejections and picks among all hosts. Zero means 50, Envoy's
	// default; NoPanic turns panic mode off. At most 100.
	PanicThreshold int
	// Rand seeds the random choices of Random, P2C, LeastRequest (its tie
	// break) and PeakEWMA: one draw at construction, after which the
	// picker draws from a lock-free splitmix64 sequence, so that picks take
	// no lock. Nil means a seed from crypto/rand.
	Rand rand.Source
	// Decay is, for PeakEWMA, the time over which a latency estimate decays
	// (Linkerd's decay, tower's PeakEwma). Zero means 10s.
	Decay time.Duration
	// DefaultRTT is, for PeakEWMA, the estimate of a host not yet measured.
	// Zero means 30ms, Linkerd's default.
	DefaultRTT time.Duration
}

func bad(field string, value any, reason string) error {
	return &resil.SettingError{Field: "balance.Settings." + field, Value: value, Reason: reason}
}

// Picker is what every picker of this package does. Pick chooses a host
// for a request starting at now; Done reports its end, with its latency
// and outcome, and must be called once for every successful Pick.
type Picker interface {
	Pick(now time.Time) (host int, err error)
	Done(now time.Time, host int, latency time.Duration, o resil.Outcome)
}

// slot is one host's in-flight count, alone on its cache line so that
// hosts picked by different cores do not share one.
type slot struct {
	inflight atomic.Int64
	_        [56]byte
}

// core is what the pickers share: the hosts, the detector and panic
// threshold, the in-flight counts and the random sequence.
type core struct {
	n      int
	det    *outlier.Detector
	panic  int // percent; 0 off
	slots  []slot
	rnd    atomic.Uint64
	built  bool
	useRnd bool
}

func (c *core) init(s Settings, useRand bool) error {
	if s.Hosts < 1 || s.Hosts > 1_000_000 {
		return bad("Hosts", s.Hosts, "must be 1 to 1,000,000")
	}
	if s.Detector != nil && s.Detector.Hosts() != s.Hosts {
		return bad("Detector", s.Detector.Hosts(), "must watch Hosts hosts (a zero Detector watches none)")
	}
	switch {
	case s.PanicThreshold == 0:
		s.PanicThreshold = 50
	case s.PanicThreshold == NoPanic:
		s.PanicThreshold = 0
	case s.PanicThreshold < 0 || s.PanicThreshold > 100:
		return bad("PanicThreshold", s.PanicThreshold, "must be 0 to 100 (percent), or NoPanic")
	}
	if !useRand && s.Rand != nil {
		return bad("Rand", nil, "this picker draws nothing")
	}
	c.n, c.det, c.panic, c.slots, c.built, c.useRnd = s.Hosts, s.Detector, s.PanicThreshold, make([]slot, s.Hosts), true, useRand
	if useRand {
		var seed uint64
		if s.Rand != nil {
			seed = s.Rand.Uint64()
		} else {
			var b [8]byte
			entropy.Read(b[:])
			seed = binary.LittleEndian.Uint64(b[:])
		}
		c.rnd.Store(seed)
	}
	return nil
}

// next returns a random 64-bit number: splitmix64 over an atomic counter,
// so concurrent picks draw without a lock, and a picker alone in a
// goroutine draws the same sequence for the same seed.
func (c *core) next() uint64 {
	z := c.rnd.Add(0x9e3779b97f4a7c15)
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// below returns a random number in [0, n): the high word of a 64-bit draw
// times n (Lemire's multiply-shift), with a bias below n/2^64.
func (c *core) below(n int) int {
	hi, _ := bits.Mul64(c.next(), uint64(n))
	return int(hi)
}

// view is which hosts a pick may choose from: all of them (no detector,
// none ejected, or panic mode), or the healthy ones; ver is the
// detector's Version it was read at.
type view struct {
	all     bool
	healthy int
	ver     uint64
}

func (c *core) view() (view, error) {
	if !c.built {
		return view{}, resil.ErrNotBuilt
	}
	if c.det == nil {
		return view{all: true, healthy: c.n}, nil
	}
	ver := c.det.Version()
	e := c.det.EjectedCount()
	if e == 0 {
		return view{all: true, healthy: c.n, ver: ver}, nil
	}
	h := c.n - e
	if outlier.Panic(h, c.n, c.panic) {
		return view{all: true, healthy: c.n, ver: ver}, nil
	}
	if h <= 0 {
		return view{ver: ver}, ErrNoHost
	}
	return view{healthy: h, ver: ver}, nil
}

// pick returns the host choose finds in a view of the ejections, -1 for
// none. A pick that finds none while the ejections changed under it
// (the detector's version moved, or a change was under way) looks again:
// it counted the healthy hosts at one moment and walked them at others,
// and may have seen each healthy host ejected without any moment having
// none (issue 37). Only a pick that found no host in one unchanged state
// fails with ErrNoHost. It loops only while ejections keep changing, one
// finished change for each loop, and picks in one pass otherwise.
func (c *core) pick(choose func(v view) int) (int, error) {
	for {
		v, err := c.view()
		if err == nil {
			if i := choose(v); i >= 0 {
				c.start(i)
				return i, nil
			}
			err = ErrNoHost
		}
		if c.det == nil || err == resil.ErrNotBuilt {
			return 0, err
		}
		now := c.det.Version()
		switch {
		case now == v.ver && now%2 == 0:
			return 0, err // the state was one, and had no host
		case now == v.ver:
			runtime.Gosched() // a change under way: let it finish
		}
	}
}

// ok reports whether host i may be picked in v.
func (c *core) ok(v view, i int) bool { return v.all || !c.det.Ejected(i) }

// nth returns the k-th host (from 0) that may be picked in v, or -1 when
// there are fewer: the ejections changed under the caller.
func (c *core) nth(v view, k int) int {
	if v.all {
		return k
	}
	for i := 0; i < c.n; i++ {
		if !c.det.Ejected(i) {
			if k == 0 {
				return i
			}
			k--
		}
	}
	return -1
}

// random returns a host of v drawn uniformly, or -1 when the ejections
// changed under the caller.
func (c *core) random(v view) int {
	if v.all {
		return c.below(c.n)
	}
	// Draw among all hosts and retry on an ejected one, which is unbiased;
	// after a few misses, count to the k-th healthy host instead.
	for try := 0; try < 4; try++ {
		if i := c.below(c.n); !c.det.Ejected(i) {
			return i
		}
	}
	return c.nth(v, c.below(v.healthy))
}

func (c *core) start(i int) { c.slots[i].inflight.Add(1) }

func (c *core) done(i int) {
	if c.built && uint(i) < uint(c.n) {
		c.slots[i].inflight.Add(-1)
	}
}

// InFlight returns host i's requests picked and not yet done.
func (c *core) InFlight(i int) int64 {
	if uint(i) >= uint(len(c.slots)) {
		return 0
	}
	return c.slots[i].inflight.Load()
}

// RoundRobin picks the healthy hosts in turn, as Envoy's ROUND_ROBIN and
// gRPC's round_robin do (without weights). Make one with [NewRoundRobin];
// the zero RoundRobin fails every Pick with resil.ErrNotBuilt. Safe for
// concurrent use; Pick is one atomic add when no host is ejected.
type RoundRobin struct {
	core
	turn atomic.Uint64
}

// NewRoundRobin returns a RoundRobin for s (Rand must be nil).
func NewRoundRobin(s Settings) (*RoundRobin, error) {
	p := &RoundRobin{}
	if err := p.init(s, false); err != nil {
		return nil, err
	}
	return p, nil
}

// Pick returns the next host in turn among those that may be picked.
func (p *RoundRobin) Pick(now time.Time) (int, error) { return p.pick(p.choose) }

func (p *RoundRobin) choose(v view) int {
	t := p.turn.Add(1) - 1
	return p.nth(v, int(t%uint64(v.healthy)))
}

// Done reports the end of a request picked on host.
func (p *RoundRobin) Done(now time.Time, host int, latency time.Duration, o resil.Outcome) {
	p.done(host)
}

// Random picks a healthy host uniformly at random, as Envoy's RANDOM.
// Make one with [NewRandom]; the zero Random fails every Pick with
// resil.ErrNotBuilt. Safe for concurrent use, lock-free.
type Random struct{ core }

// NewRandom returns a Random for s.
func NewRandom(s Settings) (*Random, error) {
	p := &Random{}
	if err := p.init(s, true); err != nil {
		return nil, err
	}
	return p, nil
}

// Pick returns a random host among those that may be picked.
func (p *Random) Pick(now time.Time) (int, error) { return p.pick(p.random) }

// Done reports the end of a request picked on host.
func (p *Random) Done(now time.Time, host int, latency time.Duration, o resil.Outcome) {
	p.done(host)
}

// P2C is the power of two choices on least requests: it draws two hosts
// at random and picks the one with fewer requests in flight, the first on
// a tie, as Envoy's LEAST_REQUEST with choice_count 2 does (the two draws
// are independent, so they may be the same host). Make one with [NewP2C];
// the zero P2C fails every Pick with resil.ErrNotBuilt. Safe for
// concurrent use, lock-free.
type P2C struct{ core }

// NewP2C returns a P2C for s.
func NewP2C(s Settings) (*P2C, error) {
	p := &P2C{}
	if err := p.init(s, true); err != nil {
		return nil, err
	}
	return p, nil
}

// Pick returns the less loaded of two random hosts.
func (p *P2C) Pick(now time.Time) (int, error) { return p.pick(p.choose) }

func (p *P2C) choose(v view) int {
	a, b := p.random(v), p.random(v)
	if a < 0 || b < 0 {
		return -1
	}
	if p.slots[b].inflight.Load() < p.slots[a].inflight.Load() {
		a = b
	}
	return a
}

// Done reports the end of a request picked on host.
func (p *P2C) Done(now time.Time, host int, latency time.Duration, o resil.Outcome) {
	p.done(host)
}

// LeastRequest picks the host with the fewest requests in flight, looking
// at every host (Envoy's LEAST_REQUEST with enable_full_scan); ties go to
// the first found from a random starting host, so that idle hosts share
// the load. Make one with [NewLeastRequest]; the zero LeastRequest fails
// every Pick with resil.ErrNotBuilt. Safe for concurrent use, lock-free;
// Pick costs a pass over the hosts.
type LeastRequest struct{ core }

// NewLeastRequest returns a LeastRequest for s.
func NewLeastRequest(s Settings) (*LeastRequest, error) {
	p := &LeastRequest{}
	if err := p.init(s, true); err != nil {
		return nil, err
	}
	return p, nil
}

// Pick returns a host with the fewest requests in flight.
func (p *LeastRequest) Pick(now time.Time) (int, error) { return p.pick(p.choose) }

func (p *LeastRequest) choose(v view) int {
	best, least := -1, int64(math.MaxInt64)
	from := p.below(p.n)
	for k := 0; k < p.n; k++ {
		i := from + k
		if i >= p.n {
			i -= p.n
		}
		if !p.ok(v, i) {
			continue
		}
		if f := p.slots[i].inflight.Load(); f < least {
			best, least = i, f
		}
	}
	return best
}

// Done reports the end of a request picked on host.
func (p *LeastRequest) Done(now time.Time, host int, latency time.Duration, o resil.Outcome) {
	p.done(host)
}

// ewma is one host's peak-EWMA latency estimate, in seconds.
type ewma struct {
	mu    sync.Mutex
	value float64
	at    time.Time
	set   bool
	_     [24]byte
}

// PeakEWMA is the power of two choices on a peak-EWMA latency cost, as
// Finagle's and Linkerd's balancers: each host's cost is its latency
// estimate × (requests in flight + 1), and of two random hosts the cheaper
// is picked. The estimate jumps to a latency above it at once (the peak),
// and otherwise moves toward each new latency with weight
// 1 − exp(−elapsed/Decay) and decays toward zero while no answer comes, so
// a host that went quiet is tried again. Make one with [NewPeakEWMA]; the
// zero PeakEWMA fails every Pick with resil.ErrNotBuilt. Safe for
// concurrent use: Pick reads two estimates, each under its host's own lock.
type PeakEWMA struct {
	core
	decay      float64 // seconds
	defaultRTT float64 // seconds
	est        []ewma
}

// NewPeakEWMA returns a PeakEWMA for s.
func NewPeakEWMA(s Settings) (*PeakEWMA, error) {
	if s.Decay < 0 || s.Decay > 24*time.Hour {
		return nil, bad("Decay", s.Decay, "must be 0 to 24h")
	}
	if s.DefaultRTT < 0 || s.DefaultRTT > time.Hour {
		return nil, bad("DefaultRTT", s.DefaultRTT, "must be 0 to 1h")
	}
	p := &PeakEWMA{}
	if err := p.init(s, true); err != nil {
		return nil, err
	}
	if s.Decay == 0 {
		s.Decay = 10 * time.Second
	}
	s.Decay = max(s.Decay, time.Millisecond) // Linkerd's MIN_DECAY
	if s.DefaultRTT == 0 {
		s.DefaultRTT = 30 * time.Millisecond
	}
	p.decay, p.defaultRTT, p.est = s.Decay.Seconds(), s.DefaultRTT.Seconds(), make([]ewma, s.Hosts)
	return p, nil
}

// Estimate returns host i's latency estimate at now: the default for a
// host never measured, else the last one decayed toward zero.
func (p *PeakEWMA) Estimate(now time.Time, i int) time.Duration {
	if uint(i) >= uint(len(p.est)) {
		return 0
	}
	return time.Duration(p.estimate(now, i) * float64(time.Second))
}

func (p *PeakEWMA) estimate(now time.Time, i int) float64 {
	e := &p.est[i]
	e.mu.Lock()
	v, at, set := e.value, e.at, e.set
	e.mu.Unlock()
	if !set {
		return p.defaultRTT
	}
	if el := now.Sub(at); el > 0 {
		v *= math.Exp(-el.Seconds() / p.decay)
	}
	return v
}

func (p *PeakEWMA) cost(now time.Time, i int) float64 {
	return p.estimate(now, i) * float64(p.slots[i].inflight.Load()+1)
}

// Pick returns the cheaper of two random hosts.
func (p *PeakEWMA) Pick(now time.Time) (int, error) {
	return p.pick(func(v view) int {
		a, b := p.random(v), p.random(v)
		if a < 0 || b < 0 {
			return -1
		}
		if a != b && p.cost(now, b) < p.cost(now, a) {
			a = b
		}
		return a
	})
}

// Done reports the end of a request picked on host and feeds its latency
// to the host's estimate, unless the outcome is resil.OutcomeIgnored (a
// cancelled call's latency says nothing of the host).
func (p *PeakEWMA) Done(now time.Time, host int, latency time.Duration, o resil.Outcome) {
	if !p.built || uint(host) >= uint(p.n) {
		return
	}
	p.done(host)
	if o == resil.OutcomeIgnored || latency < 0 {
		return
	}
	x := latency.Seconds()
	e := &p.est[host]
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.set {
		e.value, e.at, e.set = x, now, true
		return
	}
	el := now.Sub(e.at)
	if proj := e.value * math.Exp(-max(el, 0).Seconds()/p.decay); proj < x {
		// The peak: a latency above the decayed estimate replaces it.
		e.value, e.at = x, now
		return
	}
	if el <= 0 {
		// Linkerd drops a sample not later than the last one.
		return
	}
	w := math.Exp(-el.Seconds() / p.decay)
	e.value, e.at = e.value*w+x*(1-w), now
}
