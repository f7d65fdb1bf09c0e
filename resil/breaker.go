package resil

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retrystorm/retrystorm/resil/internal/window"
)

// State is a circuit breaker's state. The zero value is StateClosed. A State is
// a plain value, safe to copy and share.
type State uint8

const (
	// StateClosed lets calls through and watches their outcomes.
	StateClosed State = iota
	// StateOpen refuses calls until the cooldown ends.
	StateOpen
	// StateHalfOpen lets a bounded number of trial calls through: their
	// successes close the breaker, a failure opens it again.
	StateHalfOpen
)

var stateNames = [...]string{"closed", "open", "half-open"}

// String returns "closed", "open" or "half-open".
func (s State) String() string {
	return enumString("State", stateNames[:], uint8(s))
}

// TripRule is what opens a closed breaker. The zero value is
// ConsecutiveFailures. A plain value, safe to copy and share.
//
// ConsecutiveFailures is the wrong rule when part of the dependency can
// fail while the rest works (a broken shard, some keys), and a failure-rate
// window (CountWindow or TimeWindow, FailureRate above the share that may
// break) the right one: in the breaker experiment (`retrystorm breaker`,
// FINDINGS.md) a breaker opening at 5 failures in a row shed 71% of calls
// and threw away 5,951 answers that existed with 30% of the keys broken,
// while a 50% count window never opened at any background error rate up
// to 30%.
type TripRule uint8

const (
	// ConsecutiveFailures opens after Threshold failures in a row.
	ConsecutiveFailures TripRule = iota
	// CountWindow opens when, over the last WindowSize calls, the failure
	// rate or the slow-call rate reaches its limit.
	CountWindow
	// TimeWindow opens when, over the last WindowPeriod, the failure rate
	// or the slow-call rate reaches its limit.
	TimeWindow
)

var ruleNames = [...]string{"consecutive", "count_window", "time_window"}

// String returns "consecutive", "count_window" or "time_window".
func (r TripRule) String() string {
	return enumString("TripRule", ruleNames[:], uint8(r))
}

// StateChange describes one transition, as passed to OnStateChange. The
// zero value describes no transition. A plain value, safe to copy and share.
type StateChange struct {
	// Name is the breaker's BreakerSettings.Name.
	Name string
	// From and To are the states before and after.
	From, To State
	// At is the time of the call that made the change.
	At time.Time
	// Generation is the breaker's generation after the change.
	Generation uint64
}

// BreakerSettings configures a [Breaker]. Fields that do not apply to the
// chosen Rule must be zero. The zero value is invalid: its rule,
// ConsecutiveFailures, needs a Threshold. A plain value: copying it is safe
// (OnStateChange is shared by the copies). [BreakerSettings.WithDefaults]
// fills in the defaults and [BreakerSettings.Validate] checks the settings
// as NewBreaker will.
//
// Under partial failure a consecutive-failure breaker sheds almost
// everything, the healthy calls with the broken ones (71% of calls shed with
// 30% of the keys broken, in `retrystorm breaker`): choose a CountWindow or
// TimeWindow Rule with a FailureRate there (see [TripRule]).
type BreakerSettings struct {
	// Name is reported in StateChange; it may be empty.
	Name string
	// Rule is what opens the breaker. The zero value is
	// ConsecutiveFailures.
	Rule TripRule
	// Threshold is, for ConsecutiveFailures, how many failures in a row
	// open the breaker. Required there: at least 1.
	Threshold int
	// WindowSize is, for CountWindow, how many recent calls are judged.
	// Required there: 1 to 1,000,000.
	WindowSize int
	// WindowPeriod is, for TimeWindow, how long calls count. Required
	// there: 1ms to 24h.
	WindowPeriod time.Duration
	// MinCalls is, for the window rules, how many calls the window must
	// hold before it can open the breaker, so that one failure is not a
	// 100% failure rate. Zero means 10 (at most WindowSize).
	MinCalls int
	// FailureRate is, for the window rules, the share of failed calls
	// (failures and timeouts) that opens the breaker, in (0, 1]. Zero
	// means the rule does not look at failures.
	FailureRate float64
	// SlowCall is, for the window rules, how long a call must take to count
	// as slow, whatever its outcome. Zero means no call is slow.
	SlowCall time.Duration
	// SlowCallRate is, for the window rules, the share of slow calls that
	// opens the breaker, in (0, 1]. Zero means off; it needs SlowCall. A
	// window rule needs FailureRate or SlowCallRate.
	SlowCallRate float64
	// Cooldown is how long the breaker stays open before it lets trial
	// calls through. Zero means 5s.
	Cooldown time.Duration
	// MaxCooldown, when above Cooldown, makes the cooldown back off: each
	// failed half-open trial doubles it, up to MaxCooldown; closing resets
	// it. Zero means no backoff.
	MaxCooldown time.Duration
	// Probes is how many trial calls may be in flight at once when
	// half-open, and how many must succeed to close it. Zero means 1.
	// The bound counts every trial call not yet recorded, including those
	// of an earlier half-open period that reopened the breaker: a permit
	// that is never handed back to Record holds its slot for good.
	Probes int
	// OnStateChange, if set, is called after every transition, outside the
	// breaker's lock, so it may call the breaker. Transitions made by
	// concurrent callers may be reported out of order; Generation orders
	// them.
	OnStateChange func(StateChange)
}

// Permit is the breaker's admission of one call, returned by
// [Breaker.Allow] and handed back to [Breaker.Record]. It carries the
// generation it was issued in, so that a result arriving after the breaker
// changed state does not count. The zero Permit is no admission: Record
// ignores it. A Permit is a plain value, safe to copy and to hand to
// another goroutine; report each one once.
type Permit struct {
	gen   uint64
	probe bool
}

// Probe reports whether the permit is a half-open trial call.
func (p Permit) Probe() bool { return p.probe }

// Breaker is a circuit breaker: closed, open, half-open. Closed, it lets
// calls through and judges their outcomes by its TripRule; when the rule
// trips it opens and refuses calls for the cooldown; then it lets up to
// Probes trial calls through (half-open): if they all succeed it closes, and
// if one fails it opens again, for a longer cooldown if MaxCooldown allows.
//
// Use it in two steps, as middleware does: [Breaker.Allow] before the call
// returns a [Permit], and [Breaker.Record] reports how the call ended. Every
// state change starts a new generation; results for permits of an older
// generation are dropped, so a slow answer from before a trip cannot close
// or reopen the breaker; a trial call's slot, though, is freed only when
// its result comes, whatever its generation, so that no more than Probes
// trial calls are ever in flight at once. An OutcomeIgnored outcome (a
// cancelled call) counts as neither success nor failure but frees its
// probe slot.
//
// Time is an argument: the breaker reads no clock, and a now earlier than
// one already seen is taken as is (only the cooldown compares times). A
// caller that has not read the clock yet, such as a hand-written
// middleware, uses [Breaker.AllowFunc] and [Breaker.RecordFunc] instead:
// they take the clock, and call it only when the state or the rule needs
// the time, so a closed breaker's success path never reads it.
//
// Make one with [NewBreaker]. The zero Breaker is not silently off: it
// refuses every call with [ErrNotBuilt] (which is an ErrBreakerOpen), its
// State is StateOpen, and [Policy.Validate] (so [NewGuard]) refuses it. A
// nil *Breaker is no breaker at all, as a nil Policy.Breaker says: always
// closed, recording nothing. A Breaker is safe for concurrent use.
type Breaker struct {
	mu sync.Mutex
	s  BreakerSettings // normalized

	// word is gen<<2 | state, stored under mu at every change and read
	// without it: a closed breaker admits calls and takes their successes
	// with one atomic load, and drops stale permits without the lock.
	word atomic.Uint64
	// consecutive counts failures in a row (ConsecutiveFailures). It is
	// written under mu and read without it by the success fast path.
	consecutive atomic.Int64

	state    State
	gen      uint64
	until    time.Time     // end of the cooldown, when open
	cooldown time.Duration // current cooldown, grows with MaxCooldown

	ring  []uint8 // CountWindow: bit 0 failed, bit 1 slow
	pos   int
	count int // calls in the ring
	win   window.Sliding
	// calls, failures and slow calls in the window (the count window's
	// totals, or the time window's sums)
	tot [3]int64

	trips    uint64 // times it opened from closed
	probes   int    // trial calls in flight, of any generation
	probesOK int    // trial calls that succeeded
}

const (
	bitFail = 1 << iota
	bitSlow
)

const (
	kCalls = iota
	kFails
	kSlows
)

// NewBreaker returns a closed breaker with the given settings, or an error
// naming the invalid field.
func NewBreaker(s BreakerSettings) (*Breaker, error) {
	s, err := s.normalize()
	if err != nil {
		return nil, err
	}
	b := &Breaker{s: s, gen: 1, cooldown: s.Cooldown}
	b.word.Store(b.gen << 2)
	switch s.Rule {
	case CountWindow:
		b.ring = make([]uint8, s.WindowSize)
	case TimeWindow:
		b.win = window.New(s.WindowPeriod)
	}
	return b, nil
}

// WithDefaults returns s with the defaults in its zero fields: Cooldown
// 5s, Probes 1, and for the window rules MinCalls 10 (at most WindowSize).
func (s BreakerSettings) WithDefaults() BreakerSettings {
	if s.Cooldown == 0 {
		s.Cooldown = 5 * time.Second
	}
	if s.Probes == 0 {
		s.Probes = 1
	}
	if s.MinCalls == 0 {
		switch s.Rule {
		case CountWindow:
			s.MinCalls = min(10, s.WindowSize)
		case TimeWindow:
			s.MinCalls = 10
		}
	}
	return s
}

// Validate reports the first field of s that NewBreaker would refuse (its
// zero fields taken as their defaults), as a [*SettingError], or nil.
func (s BreakerSettings) Validate() error {
	_, err := s.normalize()
	return err
}

func (s BreakerSettings) normalize() (BreakerSettings, error) {
	s = s.WithDefaults()
	return s, s.validate()
}

func (s BreakerSettings) validate() error {
	const p = "BreakerSettings."
	if s.Cooldown < 0 || s.Cooldown > 24*time.Hour {
		return badSetting(p+"Cooldown", s.Cooldown, "must be in (0, 24h]")
	}
	if s.MaxCooldown != 0 && (s.MaxCooldown < s.Cooldown || s.MaxCooldown > 24*time.Hour) {
		return badSetting(p+"MaxCooldown", s.MaxCooldown, "must be 0s (the cooldown does not grow) or in ["+s.Cooldown.String()+", 24h]: at least Cooldown")
	}
	if s.Probes < 0 || s.Probes > 1_000_000 {
		return badSetting(p+"Probes", s.Probes, "must be in [1, 1e6]")
	}
	window := s.Rule == CountWindow || s.Rule == TimeWindow
	switch s.Rule {
	case ConsecutiveFailures:
		if s.Threshold < 1 || s.Threshold > 1_000_000 {
			return badSetting(p+"Threshold", s.Threshold, "must be in [1, 1e6]: the consecutive rule needs it")
		}
	case CountWindow:
		if s.WindowSize < 1 || s.WindowSize > 1_000_000 {
			return badSetting(p+"WindowSize", s.WindowSize, "must be in [1, 1e6]: the count_window rule needs it")
		}
	case TimeWindow:
		if s.WindowPeriod < time.Millisecond || s.WindowPeriod > 24*time.Hour {
			return badSetting(p+"WindowPeriod", s.WindowPeriod, "must be in [1ms, 24h]: the time_window rule needs it")
		}
	default:
		return badSetting(p+"Rule", s.Rule, "unknown rule")
	}
	if !window {
		for _, f := range []struct {
			name string
			zero bool
		}{
			{"WindowSize", s.WindowSize == 0}, {"WindowPeriod", s.WindowPeriod == 0},
			{"MinCalls", s.MinCalls == 0}, {"FailureRate", s.FailureRate == 0},
			{"SlowCall", s.SlowCall == 0}, {"SlowCallRate", s.SlowCallRate == 0},
		} {
			if !f.zero {
				return badSetting(p+f.name, nil, "applies to the window rules only")
			}
		}
		return nil
	}
	if s.Threshold != 0 {
		return badSetting(p+"Threshold", s.Threshold, "applies to ConsecutiveFailures only")
	}
	if s.Rule == CountWindow && s.WindowPeriod != 0 {
		return badSetting(p+"WindowPeriod", s.WindowPeriod, "applies to TimeWindow only")
	}
	if s.Rule == TimeWindow && s.WindowSize != 0 {
		return badSetting(p+"WindowSize", s.WindowSize, "applies to CountWindow only")
	}
	if s.Rule == CountWindow && (s.MinCalls < 1 || s.MinCalls > s.WindowSize) {
		return badSetting(p+"MinCalls", s.MinCalls, fmt.Sprintf("must be in [1, %d]: at most WindowSize", s.WindowSize))
	}
	if s.MinCalls < 1 || s.MinCalls > 1_000_000 {
		return badSetting(p+"MinCalls", s.MinCalls, "must be in [1, 1e6]")
	}
	if !finite(s.FailureRate) || s.FailureRate < 0 || s.FailureRate > 1 {
		return badSetting(p+"FailureRate", s.FailureRate, "must be in (0, 1], or zero for off")
	}
	if !finite(s.SlowCallRate) || s.SlowCallRate < 0 || s.SlowCallRate > 1 {
		return badSetting(p+"SlowCallRate", s.SlowCallRate, "must be in (0, 1], or zero for off")
	}
	if s.SlowCall < 0 || s.SlowCall > 24*time.Hour {
		return badSetting(p+"SlowCall", s.SlowCall, "must be in [0, 24h]")
	}
	if s.SlowCallRate > 0 && s.SlowCall == 0 {
		return badSetting(p+"SlowCall", nil, "is required when SlowCallRate is set: how long is slow?")
	}
	if s.FailureRate == 0 && s.SlowCallRate == 0 {
		return badSetting(p+"FailureRate", nil, "a window rule needs FailureRate or SlowCallRate (or both): nothing would open it")
	}
	return nil
}

// Settings returns the breaker's settings, with defaults filled in.
func (b *Breaker) Settings() BreakerSettings {
	if b == nil {
		return BreakerSettings{}
	}
	return b.s
}

// Allow asks to make one call at now. It returns a Permit to hand to Record
// when the call ends, or ErrBreakerOpen (open, cooling down) or
// ErrTooManyProbes (half-open, every trial slot taken).
func (b *Breaker) Allow(now time.Time) (Permit, error) {
	t := at(now)
	return b.allow(&t)
}

// AllowFunc is Allow with the time read from now only if the decision
// needs it: an open or half-open breaker reads it once (has the cooldown
// ended?), a closed one never. A nil now is time.Now. Use it where reading
// the clock costs more than the decision, as time.Now does on the success
// path of a middleware:
//
//	p, err := b.AllowFunc(time.Now)
//	...
//	b.RecordFunc(time.Now, p, resil.OutcomeSuccess, 0)
func (b *Breaker) AllowFunc(now func() time.Time) (Permit, error) {
	t := lazy(now)
	return b.allow(&t)
}

func (b *Breaker) allow(now *instant) (Permit, error) {
	if b == nil {
		return Permit{}, nil
	}
	// A closed breaker admits every call: no lock, no clock. A transition
	// racing with this load makes the permit stale, exactly as if the call
	// had been admitted just before it.
	if w := b.word.Load(); State(w&3) == StateClosed {
		if w == 0 {
			return Permit{}, ErrNotBuilt // generation 0: NewBreaker never ran
		}
		return Permit{gen: w >> 2}, nil
	}
	b.mu.Lock()
	change, changed := b.expire(now.get())
	var p Permit
	var err error
	switch b.state {
	case StateClosed:
		p = Permit{gen: b.gen}
	case StateOpen:
		err = ErrBreakerOpen
	case StateHalfOpen:
		if b.probes < b.s.Probes {
			b.probes++
			p = Permit{gen: b.gen, probe: true}
		} else {
			err = ErrTooManyProbes
		}
	}
	b.mu.Unlock()
	b.notify(change, changed)
	return p, err
}

// observe returns a permit of the current generation for a call the breaker
// may not refuse (a first attempt under [GuardRetries]): the call goes in
// every state, and its outcome still informs the breaker, as a closed call's
// or a half-open trial's would. It never takes a probe slot.
func (b *Breaker) observe(now *instant) Permit {
	if b == nil {
		return Permit{}
	}
	if w := b.word.Load(); State(w&3) == StateClosed {
		return Permit{gen: w >> 2}
	}
	b.mu.Lock()
	change, changed := b.expire(now.get())
	p := Permit{gen: b.gen}
	b.mu.Unlock()
	b.notify(change, changed)
	return p
}

// Record reports how the call admitted by p ended, and how long it took (for
// the slow-call rule). A permit from an older generation is ignored.
func (b *Breaker) Record(now time.Time, p Permit, o Outcome, took time.Duration) {
	t := at(now)
	b.record(&t, p, o, took)
}

// RecordFunc is Record with the time read from now only if the rule or a
// state change needs it, at most once: a closed breaker under
// ConsecutiveFailures or CountWindow reads it only when it trips, one under
// TimeWindow on every call it judges, and a half-open one when a trial
// ends it. A nil now is time.Now. took is the caller's to measure, and
// only the slow-call rule (SlowCall) looks at it.
func (b *Breaker) RecordFunc(now func() time.Time, p Permit, o Outcome, took time.Duration) {
	t := lazy(now)
	b.record(&t, p, o, took)
}

func (b *Breaker) record(now *instant, p Permit, o Outcome, took time.Duration) {
	if b == nil || p.gen == 0 {
		return
	}
	if !p.probe {
		if o == OutcomeIgnored {
			return // neither success nor failure, and no probe slot to free
		}
		w := b.word.Load()
		if w>>2 != p.gen {
			return // stale: generations only grow, so it stays stale
		}
		// A success in a closed breaker with no failure streak changes
		// nothing under ConsecutiveFailures: skip the lock.
		if State(w&3) == StateClosed && o == OutcomeSuccess && b.s.Rule == ConsecutiveFailures && b.consecutive.Load() == 0 {
			return
		}
	}
	b.mu.Lock()
	if p.probe && b.probes > 0 {
		// A probe holds its slot until it ends, whatever generation it
		// was admitted in: the bound is on trial calls in flight.
		b.probes--
	}
	if p.gen != b.gen {
		b.mu.Unlock()
		return
	}
	var change StateChange
	changed := false
	if o != OutcomeIgnored {
		failed := o.Failed()
		slow := b.s.SlowCall > 0 && took >= b.s.SlowCall
		switch b.state {
		case StateClosed:
			if b.judge(now, failed, slow) {
				b.cooldown = b.s.Cooldown
				change, changed = b.to(StateOpen, now.get()), true
			}
		case StateHalfOpen:
			if failed || (slow && b.s.SlowCallRate > 0) {
				if b.s.MaxCooldown > b.s.Cooldown {
					b.cooldown = min(2*b.cooldown, b.s.MaxCooldown)
				}
				change, changed = b.to(StateOpen, now.get()), true
			} else if b.probesOK++; b.probesOK >= b.s.Probes {
				b.cooldown = b.s.Cooldown
				change, changed = b.to(StateClosed, now.get()), true
			}
		}
	}
	b.mu.Unlock()
	b.notify(change, changed)
}

// State returns the state at now. An open breaker whose cooldown has ended
// turns half-open here, as it would in Allow.
func (b *Breaker) State(now time.Time) State {
	if b == nil {
		return StateClosed
	}
	if !b.built() {
		return StateOpen
	}
	b.mu.Lock()
	change, changed := b.expire(now)
	s := b.state
	b.mu.Unlock()
	b.notify(change, changed)
	return s
}

// Generation returns the current generation. It starts at 1 and grows by
// one with every state change.
func (b *Breaker) Generation() uint64 {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.gen
}

// Trips returns how many times the breaker has opened from closed: its
// trips, not counting reopenings after a failed half-open trial.
func (b *Breaker) Trips() uint64 {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.trips
}

// built reports whether NewBreaker made b: it starts at generation 1.
func (b *Breaker) built() bool { return b.word.Load() != 0 }

// expire turns an open breaker half-open once its cooldown has ended.
// Called with mu held.
func (b *Breaker) expire(now time.Time) (StateChange, bool) {
	if b.state == StateOpen && !now.Before(b.until) {
		return b.to(StateHalfOpen, now), true
	}
	return StateChange{}, false
}

// to moves to state s and starts a new generation. Called with mu held.
func (b *Breaker) to(s State, now time.Time) StateChange {
	c := StateChange{Name: b.s.Name, From: b.state, To: s, At: now}
	if b.state == StateClosed && s == StateOpen {
		b.trips++
	}
	b.state = s
	b.gen++
	c.Generation = b.gen
	b.probesOK = 0 // probes in flight keep their slots: see record
	b.consecutive.Store(0)
	b.word.Store(b.gen<<2 | uint64(s))
	b.clearWindow()
	if s == StateOpen {
		b.until = now.Add(b.cooldown)
	}
	return c
}

func (b *Breaker) clearWindow() {
	switch b.s.Rule {
	case CountWindow:
		clear(b.ring)
		b.pos, b.count = 0, 0
	case TimeWindow:
		b.win.Reset()
	}
	b.tot = [3]int64{}
}

// judge adds one closed-state call to the rule and reports whether the
// breaker must open. Called with mu held.
func (b *Breaker) judge(now *instant, failed, slow bool) bool {
	switch b.s.Rule {
	case ConsecutiveFailures:
		if !failed {
			b.consecutive.Store(0)
			return false
		}
		n := b.consecutive.Add(1)
		return n >= int64(b.s.Threshold)
	case CountWindow:
		var bits uint8
		if failed {
			bits |= bitFail
		}
		if slow {
			bits |= bitSlow
		}
		if b.count == len(b.ring) {
			old := b.ring[b.pos]
			b.tot[kCalls]--
			b.tot[kFails] -= int64(old & bitFail)
			b.tot[kSlows] -= int64(old&bitSlow) >> 1
		} else {
			b.count++
		}
		b.ring[b.pos] = bits
		b.pos = (b.pos + 1) % len(b.ring)
		b.tot[kCalls]++
		b.tot[kFails] += int64(bits & bitFail)
		b.tot[kSlows] += int64(bits&bitSlow) >> 1
	case TimeWindow:
		b.win.Advance(now.get())
		b.win.Add(kCalls, 1)
		if failed {
			b.win.Add(kFails, 1)
		}
		if slow {
			b.win.Add(kSlows, 1)
		}
		b.tot = b.win.Sum
	}
	calls := b.tot[kCalls]
	if calls < int64(b.s.MinCalls) {
		return false
	}
	// Compare as rates without dividing: n/calls >= rate.
	if b.s.FailureRate > 0 && float64(b.tot[kFails]) >= b.s.FailureRate*float64(calls) {
		return true
	}
	return b.s.SlowCallRate > 0 && float64(b.tot[kSlows]) >= b.s.SlowCallRate*float64(calls)
}

func (b *Breaker) notify(c StateChange, changed bool) {
	if changed && b.s.OnStateChange != nil {
		b.s.OnStateChange(c)
	}
}
