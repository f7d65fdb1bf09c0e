package resil

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retrystorm/retrystorm/resil/internal/entropy"
	"github.com/retrystorm/retrystorm/resil/internal/window"
)

// ThrottlerSettings configures a [Throttler]. Every field has a default, so
// the zero value is valid: K = 2 over a two-minute window, as the Google SRE
// book suggests. A plain value: copying it is safe (Rand is shared by the
// copies, and must then be used by one Throttler only).
// [ThrottlerSettings.WithDefaults] fills in the defaults and
// [ThrottlerSettings.Validate] checks the settings as NewThrottler will.
type ThrottlerSettings struct {
	// K is how many requests per accepted one the client may send before it
	// starts refusing locally: the throttle refuses nothing while requests
	// <= K × accepts over the window. Zero means 2, the SRE book's typical
	// value; K = 1.1 sheds earlier and wastes less of the backend's work on
	// rejections, K = 3 sheds later. Must be in [1, 1000].
	K float64
	// Window is how long requests and accepts count. Zero means 2 minutes,
	// the SRE book's history. Counts leave the window in ten steps, so a
	// count made at t is forgotten between t + 0.9 × Window and t + Window.
	// Must be in [1ms, 24h].
	Window time.Duration
	// Padding is added to the requests in the formula's denominator. Zero
	// means 1, the SRE book's; grpc-go's RLS throttler uses 8, which keeps a
	// client that has sent few requests from refusing after its first
	// failures. Must be in [1, 1e6].
	Padding float64
	// MaxProbability caps the refusal probability, so that some attempts
	// always reach the backend and see it recover. Zero means 1: no cap
	// beyond the formula's own, which stays below 1. Must be in (0, 1].
	MaxProbability float64
	// Rand draws the refusals. The Throttler uses it under its lock, so it
	// need not be safe for concurrent use (and must not be used elsewhere).
	// Nil means a ChaCha8 source seeded from crypto/rand. A simulator gives
	// each Throttler a seeded source of its own: the draws then depend only
	// on the order of the calls.
	Rand rand.Source
}

// Throttler is adaptive client-side throttling, as the Google SRE book's
// "Handling Overload" chapter describes it: the client counts, over a recent
// window, the requests it wanted to send and the ones the backend accepted,
// and refuses a new request locally with probability
//
//	max(0, (requests − K × accepts) / (requests + Padding))
//
// so that it sheds only the excess: against a backend that accepts 70% of
// the requests it refuses nothing at K = 2, and against one that accepts
// half of them it sends about 2 requests per accepted one. A breaker, by
// contrast, sheds everything while it is open. A request refused locally
// counts as a request the backend did not accept, so the probability keeps
// rising while the backend refuses everything, and falls back once the
// window forgets.
//
// As a [Policy] component it sees every attempt: [Throttler.Allow] is asked
// before each first attempt, retry and hedge, and [Throttler.Record] hears
// how each sent attempt ended: OutcomeSuccess is an accept, OutcomeFailure
// and OutcomeTimeout are not, OutcomeIgnored does not count at all.
//
// Time is an argument, and the window moves lazily with it: the Throttler
// reads no clock. While the probability is zero, Allow takes no lock.
//
// Make one with [NewThrottler]. The zero Throttler was never built and
// refuses every attempt (fails closed) with an error that matches both
// ErrThrottled and ErrNotBuilt; a nil *Throttler throttles nothing,
// as a nil [*Breaker] is always closed, and a [Policy] takes it to mean no
// throttler. A Throttler is safe for concurrent use.
type Throttler struct {
	mu      sync.Mutex
	k       float64
	padding float64
	maxP    float64
	win     window.Sliding // requests and accepts
	window  time.Duration
	src     rand.Source
	built   bool
	// clear is the Unix nanosecond before which the probability is surely
	// zero: no count has changed since it was computed, and no slot of the
	// window can leave before it. math.MinInt64 when unknown.
	clear atomic.Int64
}

// errThrottlerNotBuilt is the refusal of a Throttler that NewThrottler did
// not make: the throttle's, and a value never built.
var errThrottlerNotBuilt = fmt.Errorf("%w: %w", ErrThrottled, ErrNotBuilt)

const (
	thRequests = 0
	thAccepts  = 1
)

// NewThrottler returns a throttler with the given settings, or an error
// naming the invalid field.
func NewThrottler(s ThrottlerSettings) (*Throttler, error) {
	s = s.WithDefaults()
	if err := s.validate(); err != nil {
		return nil, err
	}
	t := &Throttler{k: s.K, padding: s.Padding, maxP: s.MaxProbability, win: window.New(s.Window), window: s.Window, src: s.Rand, built: true}
	if t.src == nil {
		var seed [32]byte
		entropy.Read(seed[:])
		t.src = rand.NewChaCha8(seed)
	}
	t.clear.Store(math.MinInt64)
	return t, nil
}

// WithDefaults returns s with the defaults in its zero fields: K 2, Window
// 2 minutes, Padding 1, MaxProbability 1 (Rand stays as it is).
func (s ThrottlerSettings) WithDefaults() ThrottlerSettings {
	if s.K == 0 {
		s.K = 2
	}
	if s.Window == 0 {
		s.Window = 2 * time.Minute
	}
	if s.Padding == 0 {
		s.Padding = 1
	}
	if s.MaxProbability == 0 {
		s.MaxProbability = 1
	}
	return s
}

// Validate reports the first field of s that NewThrottler would refuse
// (its zero fields taken as their defaults), as a [*SettingError], or nil.
func (s ThrottlerSettings) Validate() error { return s.WithDefaults().validate() }

func (s ThrottlerSettings) validate() error {
	const p = "ThrottlerSettings."
	if !finite(s.K) || s.K < 1 || s.K > 1000 {
		return badSetting(p+"K", s.K, "must be in [1, 1000]")
	}
	if s.Window < time.Millisecond || s.Window > 24*time.Hour {
		return badSetting(p+"Window", s.Window, "must be in [1ms, 24h]")
	}
	if !finite(s.Padding) || s.Padding < 1 || s.Padding > 1e6 {
		return badSetting(p+"Padding", s.Padding, "must be in [1, 1e6]")
	}
	if !finite(s.MaxProbability) || s.MaxProbability <= 0 || s.MaxProbability > 1 {
		return badSetting(p+"MaxProbability", s.MaxProbability, "must be in (0, 1]")
	}
	return nil
}

// Allow asks to send one attempt at now. It returns nil, or ErrThrottled
// with the current refusal probability; a refusal counts as a request.
func (t *Throttler) Allow(now time.Time) error {
	if t == nil {
		return nil
	}
	if !t.built {
		return errThrottlerNotBuilt
	}
	if now.UnixNano() < t.clear.Load() {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.win.Advance(now)
	if p := t.probability(); p > 0 && uniform(t.src) < p {
		t.win.Add(thRequests, 1)
		t.refresh()
		return ErrThrottled
	}
	t.refresh()
	return nil
}

// Record counts how a sent attempt ended: OutcomeSuccess is a request the
// backend accepted, OutcomeFailure and OutcomeTimeout one it did not;
// OutcomeIgnored (a cancelled attempt) counts as nothing.
func (t *Throttler) Record(now time.Time, o Outcome) {
	if t == nil || !t.built || o == OutcomeIgnored {
		return
	}
	t.mu.Lock()
	t.win.Advance(now)
	t.win.Add(thRequests, 1)
	if o == OutcomeSuccess {
		t.win.Add(thAccepts, 1)
	}
	t.refresh()
	t.mu.Unlock()
}

// Probability returns the probability that an attempt at now is refused.
// It is zero for a nil Throttler and one for a zero Throttler.
func (t *Throttler) Probability(now time.Time) float64 {
	if t == nil {
		return 0
	}
	if !t.built {
		return 1
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.win.Advance(now)
	return t.probability()
}

// Counts returns the requests and the accepts in the window at now.
func (t *Throttler) Counts(now time.Time) (requests, accepts int64) {
	if t == nil || !t.built {
		return 0, 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.win.Advance(now)
	return t.win.Sum[thRequests], t.win.Sum[thAccepts]
}

// probability is the formula on the window's counts. Called with mu held.
func (t *Throttler) probability() float64 {
	req, acc := float64(t.win.Sum[thRequests]), float64(t.win.Sum[thAccepts])
	excess := req - t.k*acc
	if excess <= 0 {
		return 0
	}
	return min(excess/(req+t.padding), t.maxP)
}

// refresh records until when Allow may skip the lock. Called with mu held,
// after the window has moved to the newest time seen.
func (t *Throttler) refresh() {
	if t.probability() == 0 {
		t.clear.Store(t.win.NewestEnd())
	} else {
		t.clear.Store(math.MinInt64)
	}
}

// Settings returns the settings with the defaults filled in, Rand left
// out; the zero settings for a Throttler NewThrottler did not make.
func (t *Throttler) Settings() ThrottlerSettings {
	if t == nil || !t.built {
		return ThrottlerSettings{}
	}
	return ThrottlerSettings{K: t.k, Window: t.window, Padding: t.padding, MaxProbability: t.maxP}
}
