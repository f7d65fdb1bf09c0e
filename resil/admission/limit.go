package admission

import (
	"cmp"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// LimitAlgorithm is how a [Limiter] sets its concurrency limit. The zero
// value is LimitFixed. A plain value, safe to copy and share.
type LimitAlgorithm uint8

const (
	// LimitFixed keeps the limit at FixedLimit.Limit: the control.
	LimitFixed LimitAlgorithm = iota
	// LimitAIMD raises the limit by one for each request that completes
	// while the limiter is at least half used, and multiplies it by
	// Backoff for each request dropped (or slower than SlowRTT), as
	// Netflix's concurrency-limits AIMDLimit does: TCP's congestion
	// control, with requests for packets.
	LimitAIMD
	// LimitGradient compares the average latency of each window of
	// requests (the short RTT) with a long-term average (the long RTT) and
	// moves the limit by their ratio, the gradient, plus some headroom, as
	// Netflix's Gradient2Limit does: when requests start to queue the short
	// RTT grows and the limit shrinks; no drop is needed to notice.
	LimitGradient
	// LimitVegas estimates the queue from the no-load latency (the least
	// seen, measured again now and then) and the latency of each request:
	// queue = limit × (1 − noload / rtt). It grows the limit while the
	// queue is short and shrinks it when the queue is long, or on a drop,
	// by steps of log10(limit), as TCP Vegas and Netflix's VegasLimit do.
	// Unlike LimitGradient, whose baseline follows a long-term average,
	// it settles where a few requests queue, however long the overload
	// lasts.
	LimitVegas
)

var limitNames = [...]string{"fixed", "aimd", "gradient", "vegas"}

// String returns "fixed", "aimd", "gradient" or "vegas".
func (a LimitAlgorithm) String() string {
	return enumString("LimitAlgorithm", limitNames[:], uint8(a))
}

// LimitSettings is the settings of one algorithm, and choosing the type
// chooses the algorithm: [FixedLimit], [AIMDLimit], [GradientLimit] or
// [VegasLimit] (Netflix's concurrency-limits names them so). Each holds the
// fields of its algorithm only; a zero field takes the default its doc
// gives. [NewLimiter] takes one; [Limiter.Settings] returns one of the same
// type, with the defaults filled in.
type LimitSettings interface {
	// Algorithm is the algorithm the settings are for.
	Algorithm() LimitAlgorithm
	config() (limitConfig, error)
}

// FixedLimit is the settings of [LimitFixed]. The zero value is invalid:
// it needs Limit. A plain value, safe to copy.
type FixedLimit struct {
	// Limit is the limit: required, in [1, 1e6].
	Limit int
}

// AIMDLimit is the settings of [LimitAIMD]. The zero value is valid:
// every field has a default. A plain value, safe to copy.
type AIMDLimit struct {
	// Limit, MinLimit and MaxLimit bound the limit, as for every adaptive
	// algorithm: Limit is the initial limit (zero means 20, Netflix's and
	// failsafe-go's default, raised to MinLimit or lowered to MaxLimit when
	// outside them); MinLimit the least it may fall to (zero means 1; at
	// least 1, so that some requests always measure the latency); MaxLimit
	// the most it may grow to (zero means 1000, Envoy's adaptive
	// concurrency default; in [MinLimit, 1e6]).
	Limit, MinLimit, MaxLimit int
	// Backoff is what a drop multiplies the limit by. Zero means 0.9
	// (Netflix's). Must be in [0.1, 1).
	Backoff float64
	// SlowRTT is the latency above which a request counts as a drop even
	// though it completed. Zero means only drops count.
	SlowRTT time.Duration
}

// GradientLimit is the settings of [LimitGradient]. The zero value is
// valid: every field has a default. A plain value, safe to copy.
type GradientLimit struct {
	// Limit, MinLimit and MaxLimit bound the limit, as in [AIMDLimit].
	Limit, MinLimit, MaxLimit int
	// Smoothing is the weight of each update: the new limit is
	// (1 − Smoothing) × old + Smoothing × target. Zero means 0.2
	// (Netflix's). Must be in (0, 1].
	Smoothing float64
	// Tolerance is how much longer than the long RTT the short RTT may get
	// before the limit shrinks: the gradient is min(1, Tolerance × long /
	// short). Zero means 1.5 (Netflix's). In [1, 100].
	Tolerance float64
	// Headroom is what each update adds to the limit scaled by the
	// gradient, so that the limit can grow and requests may queue a
	// little. Zero means 4 (Netflix's default queue size). In (0, 1e6].
	Headroom float64
	// Window is the least time a window of samples spans before the limit
	// is updated from it. Zero means 1s (Netflix's windowed limit). In
	// [1µs, 1h].
	Window time.Duration
	// WindowSamples is the least number of requests a window holds before
	// the limit is updated from it. Zero means 10. In [1, 1e6].
	WindowSamples int
	// LongWindow is how many windows the long RTT averages over (an
	// exponential moving average, a plain mean for its first 10 windows).
	// Zero means 600 (ten minutes of one-second windows, Netflix's). In
	// [1, 1e6].
	LongWindow int
}

// VegasLimit is the settings of [LimitVegas]. The zero value is valid:
// every field has a default. A plain value, safe to copy.
type VegasLimit struct {
	// Limit, MinLimit and MaxLimit bound the limit, as in [AIMDLimit].
	Limit, MinLimit, MaxLimit int
	// Smoothing is the weight of each update, as in [GradientLimit]. Zero
	// means 1 (Netflix's). Must be in (0, 1].
	Smoothing float64
	// Probe is how often the no-load latency is measured again: after
	// Probe × limit samples, the next sample's latency replaces it
	// (Netflix's VegasLimit does so every 30 × limit), so that a service
	// that became slower for good is not held to its old speed. The price:
	// a probe taken while the limit is saturated measures a loaded
	// latency, and under a long overload the limit ratchets up probe after
	// probe. Zero means never: the no-load latency is the least ever seen,
	// and the limit settles near the service's capacity however long the
	// overload lasts. In [0, 1e6].
	Probe int
}

// Algorithm returns LimitFixed.
func (FixedLimit) Algorithm() LimitAlgorithm { return LimitFixed }

// Algorithm returns LimitAIMD.
func (AIMDLimit) Algorithm() LimitAlgorithm { return LimitAIMD }

// Algorithm returns LimitGradient.
func (GradientLimit) Algorithm() LimitAlgorithm { return LimitGradient }

// Algorithm returns LimitVegas.
func (VegasLimit) Algorithm() LimitAlgorithm { return LimitVegas }

// limitConfig is the settings of any algorithm, with defaults filled in:
// what a Limiter runs on.
type limitConfig struct {
	Algorithm                 LimitAlgorithm
	Limit, MinLimit, MaxLimit int
	Backoff                   float64
	SlowRTT                   time.Duration
	Smoothing                 float64
	Tolerance                 float64
	Headroom                  float64
	Window                    time.Duration
	WindowSamples             int
	LongWindow                int
	Probe                     int
}

// LimitPermit is a [Limiter]'s admission of one request, returned by
// [Limiter.Acquire] and handed back to [Limiter.Release] or
// [Limiter.Ignore]. It carries when the request started and how many were
// in flight then. The zero LimitPermit admits nothing: releasing it does
// nothing. A plain value, safe to copy and to hand to another goroutine;
// release each one once.
type LimitPermit struct {
	start    time.Time
	inflight int64
	ok       bool
}

// Admitted reports whether the permit admits a request.
func (p LimitPermit) Admitted() bool { return p.ok }

// Start returns the time the permit was acquired at.
func (p LimitPermit) Start() time.Time { return p.start }

// Limiter caps how many requests are in flight at once, and learns the cap
// from the requests' latencies and drops ([LimitAIMD], [LimitGradient],
// [LimitVegas]), or keeps it fixed ([LimitFixed]). It answers at once: a request over the
// limit is refused, never queued here; [Shedder] adds a bounded wait queue
// for servers, and a simulator queues in its own model.
//
// Use it in two steps: [Limiter.Acquire] before the request returns a
// [LimitPermit], and [Limiter.Release] when it ends, with whether it was
// dropped (timed out, refused downstream for overload, shed after
// admission): a drop is a congestion signal and its latency is not a
// sample. [Limiter.Ignore] ends a request that says nothing about the load
// (its caller cancelled). The limit moves only in Release.
//
// Time is an argument: the Limiter reads no clock, starts no goroutine and
// allocates nothing after NewLimiter, so a simulator drives it on virtual
// time exactly as a server does on the wall clock. Acquire takes no lock.
//
// Make one with [NewLimiter]. The zero Limiter has a limit of 0 and refuses
// every request (fails closed), and so does a nil *Limiter. A Limiter is
// safe for concurrent use.
type Limiter struct {
	inflight atomic.Int64
	limit    atomic.Int64 // whole requests, in [MinLimit, MaxLimit]

	mu  sync.Mutex
	s   limitConfig // defaults filled in
	est float64     // the limit, before rounding down

	// LimitVegas: the no-load latency (0: none yet), and the samples since
	// it was last measured again.
	noload  time.Duration
	samples int64

	// LimitGradient's current window.
	winStart time.Time
	winOpen  bool
	winSum   float64 // nanoseconds of the samples
	winN     int64   // samples: requests that completed
	winDrops int64
	winPeak  int64 // most in flight when a request of the window started
	long     ewma  // long RTT, nanoseconds
}

// ewma is an exponential moving average that is a plain mean until it has
// seen warm values.
type ewma struct {
	value, alpha float64
	n, warm      int
}

func (e *ewma) add(v float64) float64 {
	if e.n < e.warm {
		e.n++
		e.value += (v - e.value) / float64(e.n)
	} else {
		e.value += e.alpha * (v - e.value)
	}
	return e.value
}

// NewLimiter returns a limiter with the given settings, or an error naming
// the invalid field.
func NewLimiter(settings LimitSettings) (*Limiter, error) {
	if settings == nil {
		return nil, badSetting("LimitSettings", nil, "required: a FixedLimit, AIMDLimit, GradientLimit or VegasLimit")
	}
	s, err := settings.config()
	if err != nil {
		return nil, err
	}
	l := &Limiter{s: s, est: float64(s.Limit)}
	l.limit.Store(int64(s.Limit))
	if s.Algorithm == LimitGradient {
		l.long = ewma{alpha: 2 / (float64(s.LongWindow) + 1), warm: 10}
	}
	return l, nil
}

func (s FixedLimit) config() (limitConfig, error) {
	if s.Limit < 1 || s.Limit > 1_000_000 {
		return limitConfig{}, badSetting("FixedLimit.Limit", s.Limit, "required, in [1, 1e6]")
	}
	return limitConfig{Algorithm: LimitFixed, Limit: s.Limit}, nil
}

// bounds fills in and checks the bounds every adaptive algorithm shares;
// p is the settings type, for errors.
func bounds(p string, limit, minLimit, maxLimit int) (limitConfig, error) {
	c := limitConfig{Limit: limit, MinLimit: minLimit, MaxLimit: maxLimit}
	if c.MinLimit == 0 {
		c.MinLimit = 1
	}
	if c.MaxLimit == 0 {
		c.MaxLimit = max(1000, c.MinLimit)
	}
	if c.MinLimit < 1 || c.MinLimit > 1_000_000 {
		return c, badSetting(p+".MinLimit", c.MinLimit, "must be in [1, 1e6]")
	}
	if c.MaxLimit < c.MinLimit || c.MaxLimit > 1_000_000 {
		return c, badSetting(p+".MaxLimit", c.MaxLimit, "must be in [MinLimit, 1e6]")
	}
	if c.Limit == 0 {
		c.Limit = min(max(20, c.MinLimit), c.MaxLimit)
	}
	if c.Limit < 0 || c.Limit > 1_000_000 {
		return c, badSetting(p+".Limit", c.Limit, "must be in [0, 1e6]: the initial limit, zero for 20")
	}
	c.Limit = min(max(c.Limit, c.MinLimit), c.MaxLimit)
	return c, nil
}

func (s AIMDLimit) config() (limitConfig, error) {
	c, err := bounds("AIMDLimit", s.Limit, s.MinLimit, s.MaxLimit)
	if err != nil {
		return c, err
	}
	c.Algorithm, c.Backoff, c.SlowRTT = LimitAIMD, s.Backoff, s.SlowRTT
	if c.Backoff == 0 {
		c.Backoff = 0.9
	}
	if !finite(c.Backoff) || c.Backoff < 0.1 || c.Backoff >= 1 {
		return c, badSetting("AIMDLimit.Backoff", c.Backoff, "must be in [0.1, 1)")
	}
	if c.SlowRTT < 0 {
		return c, badSetting("AIMDLimit.SlowRTT", c.SlowRTT, "must not be negative")
	}
	return c, nil
}

func (s VegasLimit) config() (limitConfig, error) {
	c, err := bounds("VegasLimit", s.Limit, s.MinLimit, s.MaxLimit)
	if err != nil {
		return c, err
	}
	c.Algorithm, c.Smoothing, c.Probe = LimitVegas, s.Smoothing, s.Probe
	if c.Smoothing == 0 {
		c.Smoothing = 1
	}
	if !finite(c.Smoothing) || c.Smoothing <= 0 || c.Smoothing > 1 {
		return c, badSetting("VegasLimit.Smoothing", c.Smoothing, "must be in (0, 1]")
	}
	if c.Probe < 0 || c.Probe > 1_000_000 {
		return c, badSetting("VegasLimit.Probe", c.Probe, "must be in [0, 1e6]")
	}
	return c, nil
}

func (s GradientLimit) config() (limitConfig, error) {
	const p = "GradientLimit."
	c, err := bounds("GradientLimit", s.Limit, s.MinLimit, s.MaxLimit)
	if err != nil {
		return c, err
	}
	c.Algorithm = LimitGradient
	c.Smoothing = cmp.Or(s.Smoothing, 0.2)
	c.Tolerance = cmp.Or(s.Tolerance, 1.5)
	c.Headroom = cmp.Or(s.Headroom, 4)
	c.Window = cmp.Or(s.Window, time.Second)
	c.WindowSamples = cmp.Or(s.WindowSamples, 10)
	c.LongWindow = cmp.Or(s.LongWindow, 600)
	switch {
	case !finite(c.Smoothing) || c.Smoothing <= 0 || c.Smoothing > 1:
		return c, badSetting(p+"Smoothing", c.Smoothing, "must be in (0, 1]")
	case !finite(c.Tolerance) || c.Tolerance < 1 || c.Tolerance > 100:
		return c, badSetting(p+"Tolerance", c.Tolerance, "must be in [1, 100]")
	case !finite(c.Headroom) || c.Headroom <= 0 || c.Headroom > 1e6:
		return c, badSetting(p+"Headroom", c.Headroom, "must be in (0, 1e6]")
	case c.Window < time.Microsecond || c.Window > time.Hour:
		return c, badSetting(p+"Window", c.Window, "must be in [1µs, 1h]")
	case c.WindowSamples < 1 || c.WindowSamples > 1_000_000:
		return c, badSetting(p+"WindowSamples", c.WindowSamples, "must be in [1, 1e6]")
	case c.LongWindow < 1 || c.LongWindow > 1_000_000:
		return c, badSetting(p+"LongWindow", c.LongWindow, "must be in [1, 1e6]")
	}
	return c, nil
}

// settings returns the settings c was made from, defaults filled in.
func (c limitConfig) settings() LimitSettings {
	switch c.Algorithm {
	case LimitAIMD:
		return AIMDLimit{Limit: c.Limit, MinLimit: c.MinLimit, MaxLimit: c.MaxLimit, Backoff: c.Backoff, SlowRTT: c.SlowRTT}
	case LimitGradient:
		return GradientLimit{Limit: c.Limit, MinLimit: c.MinLimit, MaxLimit: c.MaxLimit,
			Smoothing: c.Smoothing, Tolerance: c.Tolerance, Headroom: c.Headroom,
			Window: c.Window, WindowSamples: c.WindowSamples, LongWindow: c.LongWindow}
	case LimitVegas:
		return VegasLimit{Limit: c.Limit, MinLimit: c.MinLimit, MaxLimit: c.MaxLimit, Smoothing: c.Smoothing, Probe: c.Probe}
	}
	return FixedLimit{Limit: c.Limit}
}

// Settings returns the limiter's settings, of the type NewLimiter was
// given, with defaults filled in; nil for a zero or nil Limiter.
func (l *Limiter) Settings() LimitSettings {
	if l == nil || l.s.Limit == 0 {
		return nil
	}
	return l.s.settings()
}

// Acquire asks to start one request at now. It returns a permit to hand to
// Release (or Ignore) when the request ends, and true; or false when the
// limit is reached. It takes no lock.
func (l *Limiter) Acquire(now time.Time) (LimitPermit, bool) {
	if l == nil {
		return LimitPermit{}, false
	}
	for {
		n := l.inflight.Load()
		if n >= l.limit.Load() {
			return LimitPermit{}, false
		}
		if l.inflight.CompareAndSwap(n, n+1) {
			return LimitPermit{start: now, inflight: n + 1, ok: true}, true
		}
	}
}

// Release ends the request p admitted, at now. dropped says it did not
// complete normally for a reason that tells of overload (it timed out, was
// refused downstream for overload, or was shed after admission): the
// adaptive algorithms take it as congestion, and its latency is not a
// sample. Otherwise its latency, now − p.Start(), is a sample.
func (l *Limiter) Release(now time.Time, p LimitPermit, dropped bool) {
	if l == nil || !p.ok || !l.free() || l.s.Algorithm == LimitFixed {
		return
	}
	l.mu.Lock()
	switch l.s.Algorithm {
	case LimitAIMD:
		l.aimd(now.Sub(p.start), p.inflight, dropped)
	case LimitGradient:
		l.gradient(now, now.Sub(p.start), p.inflight, dropped)
	case LimitVegas:
		l.vegas(now.Sub(p.start), p.inflight, dropped)
	}
	l.mu.Unlock()
}

// Ignore ends the request p admitted without a sample: its end says
// nothing about the load (its caller cancelled, or it failed before doing
// any work).
func (l *Limiter) Ignore(p LimitPermit) {
	if l != nil && p.ok {
		l.free()
	}
}

// free takes one request out of flight. A release with nothing in flight
// (a permit released twice) is ignored, so the count never goes negative.
func (l *Limiter) free() bool {
	for {
		n := l.inflight.Load()
		if n <= 0 {
			return false
		}
		if l.inflight.CompareAndSwap(n, n-1) {
			return true
		}
	}
}

// Limit returns the current limit: 0 for a zero or nil Limiter.
func (l *Limiter) Limit() int {
	if l == nil {
		return 0
	}
	return int(l.limit.Load())
}

// InFlight returns how many requests are in flight.
func (l *Limiter) InFlight() int {
	if l == nil {
		return 0
	}
	return int(l.inflight.Load())
}

// set stores a new limit estimate, clamped. Called with mu held.
func (l *Limiter) set(est float64) {
	est = min(max(est, float64(l.s.MinLimit)), float64(l.s.MaxLimit))
	l.est = est
	l.limit.Store(int64(est))
}

// aimd updates the limit with one sample. Called with mu held.
func (l *Limiter) aimd(rtt time.Duration, inflight int64, dropped bool) {
	switch {
	case dropped || (l.s.SlowRTT > 0 && rtt > l.s.SlowRTT):
		l.set(l.est * l.s.Backoff)
	case float64(2*inflight) >= l.est:
		// Grow only when the limit is in use: a limiter that is far from
		// its limit learns nothing about the next request's effect.
		l.set(l.est + 1)
	}
}

// gradient adds one sample to the window, and updates the limit when the
// window is complete. Called with mu held.
func (l *Limiter) gradient(now time.Time, rtt time.Duration, inflight int64, dropped bool) {
	if !l.winOpen {
		l.winStart, l.winOpen = now, true
	}
	if dropped {
		l.winDrops++
	} else {
		l.winSum += float64(max(rtt, 0))
		l.winN++
	}
	l.winPeak = max(l.winPeak, inflight)
	if now.Sub(l.winStart) < l.s.Window || l.winN+l.winDrops < int64(l.s.WindowSamples) {
		return
	}
	n, drops, sum, peak := l.winN, l.winDrops, l.winSum, l.winPeak
	l.winOpen, l.winN, l.winDrops, l.winSum, l.winPeak = false, 0, 0, 0, 0

	g := 1.0
	if n > 0 {
		short := sum / float64(n)
		long := l.long.add(short)
		if short > 0 && long/short > 2 {
			// Latency is back to normal after a long overload: bring the
			// long RTT down faster than its average would.
			l.long.value *= 0.95
		}
		if short > 0 {
			g = min(1, l.s.Tolerance*long/short)
		}
	}
	dropShare := float64(drops) / float64(n+drops)
	if dropShare == 0 && float64(2*peak) < l.est {
		return // far from the limit: the latency says nothing about it
	}
	// A window with drops shrinks the limit at least by their share.
	g = max(0.5, min(g, 1-dropShare))
	target := l.est*g + l.s.Headroom
	l.set((1-l.s.Smoothing)*l.est + l.s.Smoothing*target)
}

// vegasStep is Netflix's step for a limit: log10(limit), at least 1.
func vegasStep(limit float64) float64 { return max(1, math.Log10(limit)) }

// vegas updates the limit with one sample. Called with mu held.
func (l *Limiter) vegas(rtt time.Duration, inflight int64, dropped bool) {
	if !dropped {
		if rtt <= 0 {
			return // no latency to learn from
		}
		l.samples++
		probe := l.s.Probe > 0 && l.samples > int64(l.s.Probe)*int64(l.est)
		if l.noload == 0 || rtt < l.noload || probe {
			// A new no-load latency, or the probe: measure it again.
			l.noload, l.samples = rtt, 0
			return
		}
	}
	step := vegasStep(l.est)
	target := l.est
	switch {
	case dropped:
		target = l.est - step
	case float64(2*inflight) < l.est:
		return // far from the limit: the latency says nothing about it
	default:
		queue := math.Ceil(l.est * (1 - float64(l.noload)/float64(rtt)))
		switch {
		case queue <= step: // barely any queue: grow fast
			target = l.est + 6*step
		case queue < 3*step:
			target = l.est + step
		case queue > 6*step:
			target = l.est - step
		}
	}
	l.set((1-l.s.Smoothing)*l.est + l.s.Smoothing*target)
}

// finite reports whether f is a number, neither NaN nor infinite.
func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }
