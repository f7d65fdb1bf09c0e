package scenario

import (
	"time"

	"github.com/retrystorm/retrystorm/resil"
)

// Breaker kinds.
const (
	BreakerNone        = "none"
	BreakerConsecutive = "consecutive"
	BreakerCountWindow = "count_window"
	BreakerTimeWindow  = "time_window"
)

// Breaker is the circuit breaker: Use picks the trip rule ("none" or
// absent: no breaker), the other fields are its settings, named as
// resil.BreakerSettings names them, with resil's defaults and ranges (see
// there what each means); Scope is the policy's BreakerScope, as its word.
// It is not resil's type itself: that one also holds what a client's own
// breaker is given (its Name and its OnStateChange callback) and its rule,
// which Use spells.
type Breaker struct {
	Use          string
	Threshold    int           // consecutive: failures in a row; required there
	WindowSize   int           // count_window: calls; required there
	WindowPeriod time.Duration // time_window: the window's length (the file's window); required there
	MinCalls     int           // windows: default 10 (at most WindowSize)
	FailureRate  float64       // windows: in (0, 1]
	SlowCall     time.Duration // windows: a call this long is slow
	SlowCallRate float64       // windows: in (0, 1]
	Cooldown     time.Duration // default 5s
	MaxCooldown  time.Duration // default 0: no backoff of the cooldown
	Probes       int           // half-open trial calls; default 1
	Scope        string        // "all" (default) or "retries"
}

// settings returns the breaker's settings in resil's type, for a breaker
// named name; false for none, or a use that names no rule.
func (b Breaker) settings(name string) (resil.BreakerSettings, bool) {
	var rule resil.TripRule
	if b.Use == BreakerNone || b.Use == "" || rule.UnmarshalText([]byte(b.Use)) != nil {
		return resil.BreakerSettings{}, false
	}
	return resil.BreakerSettings{
		Name: name, Rule: rule,
		Threshold: b.Threshold, WindowSize: b.WindowSize, WindowPeriod: b.WindowPeriod,
		MinCalls: b.MinCalls, FailureRate: b.FailureRate,
		SlowCall: b.SlowCall, SlowCallRate: b.SlowCallRate,
		Cooldown: b.Cooldown, MaxCooldown: b.MaxCooldown, Probes: b.Probes,
	}, true
}

// withDefaults returns b with resil's defaults in its zero fields.
func (b Breaker) withDefaults() Breaker {
	if s, ok := b.settings(""); ok {
		s = s.WithDefaults()
		b.Cooldown, b.Probes, b.MinCalls = s.Cooldown, s.Probes, s.MinCalls
	}
	return b
}

func breakerObject(b *Breaker) *object {
	var (
		rules   = breakerRules
		windows = []string{BreakerCountWindow, BreakerTimeWindow}
	)
	settings := &object{
		kind: &b.Use, absentKind: BreakerNone, what: "%s",
		fields: []field{
			{key: "threshold", kinds: []string{BreakerConsecutive}, need: true, v: integer{&b.Threshold}},
			{key: "window_size", kinds: []string{BreakerCountWindow}, need: true, v: integer{&b.WindowSize}},
			{key: "window", kinds: []string{BreakerTimeWindow}, need: true, v: duration{&b.WindowPeriod}},
			{key: "min_calls", kinds: windows, v: integer{&b.MinCalls}},
			{key: "failure_rate", kinds: windows, v: number{&b.FailureRate}},
			{key: "slow_call", kinds: windows, v: duration{&b.SlowCall}},
			{key: "slow_call_rate", kinds: windows, v: number{&b.SlowCallRate}},
			{key: "cooldown", kinds: rules, v: duration{&b.Cooldown}},
			{key: "max_cooldown", kinds: rules, v: duration{&b.MaxCooldown}},
			{key: "probes", kinds: rules, v: integer{&b.Probes}},
			{key: "scope", kinds: rules, v: word{p: &b.Scope, words: scopes}},
		},
		// resil's defaults, written out, and the policy's scope.
		preset: func(use string) {
			if use != BreakerNone {
				*b = Breaker{Use: use}.withDefaults()
				b.Scope = resilWord(resil.GuardAll)
			}
		},
		// A window's least number of calls is resil's default for the
		// window the file gives.
		finish: func(has func(string) bool) {
			if !has("min_calls") {
				b.MinCalls = 0
				b.MinCalls = b.withDefaults().MinCalls
			}
		},
	}
	return &object{
		selector: "use", kind: &b.Use, kinds: breakerKinds, absentKind: BreakerNone, what: "%s",
		fields: []field{{key: "settings", v: settings}},
		check:  b.check,
	}
}

// check refuses what resil refuses, at the file's key.
func (b *Breaker) check(c *checker, path string) {
	s, ok := b.settings("")
	if !ok {
		return
	}
	filled := b.withDefaults()
	c.settings(join(path, "settings"), b.Use, breakerObject(b).fields[0].v.(*object), breakerObject(&filled).fields[0].v.(*object), b, s.Validate())
}

// resil returns a new breaker, or nil for none, and the attempts it may
// refuse. name labels its state changes.
func (b Breaker) resil(name string) (*resil.Breaker, resil.Scope, error) {
	if b.Use == BreakerNone || b.Use == "" {
		return nil, resil.GuardAll, nil
	}
	var rule resil.TripRule
	if err := readWord(&rule, "breaker use", b.Use); err != nil {
		return nil, 0, err
	}
	var scope resil.Scope
	if err := readWord(&scope, "breaker scope", b.Scope); err != nil {
		return nil, 0, err
	}
	s, _ := b.settings(name)
	br, err := resil.NewBreaker(s)
	return br, scope, err
}
