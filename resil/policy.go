package resil

import (
	"math"
	"math/rand/v2"
	"time"
)

// Unlimited as MaxRetries removes the per-call count: retries are then
// bounded only by the budget and the deadline.
const Unlimited = -1

// Scope says which attempts a breaker may refuse. The zero value is
// GuardAll. A plain value, safe to copy and share.
type Scope uint8

const (
	// GuardAll lets the breaker refuse first attempts and retries alike. It
	// is the zero value.
	GuardAll Scope = iota
	// GuardRetries lets the breaker refuse retries and hedges only: first
	// attempts always go. Traffic is never shed, only amplification.
	GuardRetries
)

var scopeNames = [...]string{"all", "retries"}

// String returns "all" or "retries".
func (s Scope) String() string { return enumString("Scope", scopeNames[:], uint8(s)) }

// HedgeSettings configures hedged requests: when an attempt has not
// answered after Delay, a second one is sent beside it, and the first
// answer wins. Hedges are paid from the retry budget and pass the breaker,
// like retries. The zero value hedges nothing. A plain value, safe to copy
// and share.
type HedgeSettings struct {
	// Delay is how long to wait for an answer before hedging. Zero means no
	// hedging.
	Delay time.Duration
	// Max is how many hedges one intent may send. Zero means 1 when Delay
	// is set.
	Max int
}

// Pacer paces attempts on the client side, first attempts included: it
// delays (or refuses) an attempt rather than retries alone, so it is not a
// [Budget]. A [Policy] asks it before every first attempt and retry (see
// [Policy.Pace]) and tells it how every attempt ended. resil/budget's
// ClientRateLimiter, the AWS SDKs' adaptive mode, is one; a Pacer that its
// constructor did not make should say so with a Built method (see
// [Budget]), for [Policy.Validate] to refuse it.
//
// Implementations must be safe for concurrent use.
type Pacer interface {
	// Pace asks to send one attempt at now. It returns zero when the
	// attempt may go (and takes what the attempt costs), or the wait after
	// which to ask again, or an error that ends the intent (such as
	// ErrRateLimited).
	Pace(now time.Time) (time.Duration, error)
	// Update records how an attempt ended: throttled says the server
	// throttled it (OutcomeThrottled).
	Update(now time.Time, throttled bool)
}

// Policy is the decision core of a guarded call: may the first attempt go,
// may this failure be retried and after how long, may a hedge go. It
// composes a [Budget], a [Breaker], a [Throttler] and a [Backoff], and
// keeps no state of its own: the shared state lives in the budget, the
// breaker and the throttler, the per-call state in an [Intent]. Every method takes the time, and the one
// that draws takes the random source, so a blocking client ([Guard]), a
// simulator on virtual time and a page in a browser drive the same
// decisions.
//
// A breaker, a throttler or both may guard the dependency. Every attempt
// (first, retry, hedge) asks the throttler first, then the breaker; the
// throttler hears the outcome of every attempt sent. The throttler draws
// its refusals from its own source (ThrottlerSettings.Rand), so Begin,
// Resume and StartHedge take none, and the draws stay deterministic in the
// order of the calls.
//
// The zero Policy sends one attempt and never retries. A Policy must not be
// changed while in use; it is safe for concurrent use as long as its Budget,
// Breaker and Throttle are.
type Policy struct {
	// MaxRetries is how many retries one intent may send after its first
	// attempt. Zero means none; Unlimited means no count.
	MaxRetries int
	// Backoff is the wait before each retry.
	Backoff Backoff
	// Budget pays for retries and hedges. Nil means no budget.
	Budget Budget
	// Breaker guards the dependency. Nil means no breaker.
	Breaker *Breaker
	// BreakerScope says which attempts the breaker may refuse.
	BreakerScope Scope
	// Throttle refuses a share of the attempts locally when the dependency
	// accepts too few of them (adaptive throttling). Nil means none.
	Throttle *Throttler
	// Hedge configures hedged requests. The zero value means none.
	Hedge HedgeSettings
	// MaxPushback is the longest wait a server may ask for (Retry-After,
	// gRPC's pushback) that is honoured as asked; a longer one is clamped
	// to it. Zero means DefaultMaxPushback, one minute: a server's wait is
	// honoured whatever the backoff's cap (a Retry-After of 1 s is a
	// second, not a 100 ms cap), as HTTP clients that read Retry-After do.
	MaxPushback time.Duration
	// PushbackRestarts makes the backoff start again from its first delay
	// after a retry that waited a server's pushback, as gRFC A6 specifies
	// for gRPC ("retry delay will reset to initial backoff"). False, the
	// zero value, counts every retry of the intent.
	PushbackRestarts bool
	// Pacer paces first attempts and retries, as the AWS SDKs' adaptive
	// mode does (resil/budget's ClientRateLimiter). Drivers ask
	// [Policy.Pace] before each send; hedges, which the AWS SDKs do not
	// send, are not paced. Nil means none.
	Pacer Pacer
}

// Validate reports the first invalid field, or nil. A part the policy holds
// that was never built is invalid, so that it cannot turn retries off
// unnoticed: a Budget or a Pacer that says so (a Built method that answers
// false: see [Budget]) or holds a nil pointer, and a Breaker that
// [NewBreaker] did not make; the error wraps [ErrNotBuilt] and names the
// constructor.
func (p *Policy) Validate() error {
	if p.MaxRetries < Unlimited || p.MaxRetries > 1_000_000 {
		return badSetting("Policy.MaxRetries", p.MaxRetries, "must be in [0, 1e6], or Unlimited")
	}
	if err := p.Backoff.Validate(); err != nil {
		return err
	}
	if p.BreakerScope > GuardRetries {
		return badSetting("Policy.BreakerScope", p.BreakerScope, "unknown scope")
	}
	if p.Hedge.Delay < 0 {
		return badSetting("Policy.Hedge.Delay", p.Hedge.Delay, "must not be negative")
	}
	if p.Hedge.Max < 0 || p.Hedge.Max > 100 || (p.Hedge.Max > 0 && p.Hedge.Delay == 0) {
		return badSetting("Policy.Hedge.Max", p.Hedge.Max, "must be in [0, 100], and needs Hedge.Delay")
	}
	if p.MaxPushback < 0 {
		return badSetting("Policy.MaxPushback", p.MaxPushback, "must not be negative")
	}
	if err := checkBuilt("Policy.Budget", p.Budget); err != nil {
		return err
	}
	if err := checkBuilt("Policy.Pacer", p.Pacer); err != nil {
		return err
	}
	if p.Breaker != nil && !p.Breaker.built() {
		return notBuilt("Policy.Breaker", "*resil.Breaker", "NewBreaker")
	}
	return nil
}

// Intent is one logical call's progress through a [Policy]: how many
// attempts it sent, the previous backoff, and the charge held for a retry
// waiting in backoff. Set Idempotent, Key and NoHedge before Begin; the zero
// value is a non-idempotent intent without a key, which is never retried.
//
// An Intent belongs to one call: it is not safe for concurrent use.
type Intent struct {
	// Key is the idempotency key the operation carries, if any. A
	// non-idempotent intent with a key may be retried: the server
	// deduplicates by the key.
	Key string
	// Idempotent says the operation may safely run more than once.
	Idempotent bool
	// NoHedge keeps the intent from hedging, whatever the policy says: for
	// a call whose attempts cannot run side by side.
	NoHedge bool

	// The fields are laid out to leave no padding: a simulator holds an
	// Intent for every call in flight.
	waiting  bool // a retry is scheduled and not yet sent
	attempts int
	retries  int
	hedges   int
	prev     time.Duration
	pushed   int     // retries up to the last one that waited a pushback
	pending  float64 // charge withdrawn for the scheduled retry
}

// Attempts returns how many attempts the intent has sent.
func (in *Intent) Attempts() int { return in.attempts }

// Retries returns how many retries the intent has sent.
func (in *Intent) Retries() int { return in.retries }

// Hedges returns how many hedges the intent has sent.
func (in *Intent) Hedges() int { return in.hedges }

// Kind says why an attempt was sent. The zero value is KindFirst. A plain value,
// safe to copy and share.
type Kind uint8

const (
	// KindFirst is an intent's first attempt.
	KindFirst Kind = iota
	// KindRetry follows a failed attempt.
	KindRetry
	// KindHedge runs beside a slow attempt.
	KindHedge
)

var kindNames = [...]string{"first", "retry", "hedge"}

// String returns "first", "retry" or "hedge".
func (k Kind) String() string { return enumString("Kind", kindNames[:], uint8(k)) }

// Ticket is the policy's handle on one attempt: the breaker's permit and
// the budget's charge. Hand it back to [Policy.End] when the attempt ends.
// The zero Ticket is a first attempt with no breaker permit and no charge.
// A Ticket is a plain value: it may be handed to the goroutine that runs
// the attempt, but must be ended once.
type Ticket struct {
	// The breaker's permit, flat: a Permit inside would pad the Ticket
	// by a word, and a simulator holds one for every attempt in flight.
	gen   uint64
	paid  float64
	probe bool
	kind  Kind
}

// permit returns the breaker's permit the ticket holds.
func (t *Ticket) permit() Permit { return Permit{gen: t.gen, probe: t.probe} }

// hold puts the breaker's permit pm in the ticket.
func (t *Ticket) hold(pm Permit) { t.gen, t.probe = pm.gen, pm.probe }

// Kind says why the attempt was sent.
func (t Ticket) Kind() Kind { return t.kind }

// Paid is what the budget charged for the attempt.
func (t Ticket) Paid() float64 { return t.paid }

// guards reports whether the breaker may refuse an attempt of kind k.
func (p *Policy) guards(k Kind) bool {
	return p.Breaker != nil && (k != KindFirst || p.BreakerScope == GuardAll)
}

// Begin starts the intent: it asks the throttler and then the breaker to
// admit the first attempt (under GuardRetries the breaker only watches its
// outcome) and tells the budget an intent started. On error (ErrThrottled,
// ErrBreakerOpen, ErrTooManyProbes) nothing is sent and the intent is over.
func (p *Policy) Begin(now time.Time, in *Intent) (Ticket, error) {
	t := at(now)
	return p.begin(&t, in)
}

// begin is Begin with the time read only if a decision needs it.
func (p *Policy) begin(now *instant, in *Intent) (Ticket, error) {
	var t Ticket
	if p.Throttle != nil {
		if err := p.Throttle.Allow(now.get()); err != nil {
			return t, err
		}
	}
	if p.guards(KindFirst) {
		pm, err := p.Breaker.allow(now)
		if err != nil {
			return t, err
		}
		t.hold(pm)
	} else if p.Breaker != nil {
		// GuardRetries: the first attempt goes whatever the state, but
		// its outcome must still reach the breaker, or a breaker that
		// guards retries would learn only from retries.
		t.hold(p.Breaker.observe(now))
	}
	if p.Budget != nil {
		p.Budget.Begin(p.budgetTime(now))
	}
	in.attempts++
	return t, nil
}

// budgetTime is the time to hand the budget: a Guard's instant is read for
// a budget that uses the time (see UsesTime in [Budget]'s doc), and handed
// as it is, read or not, to one that does not.
func (p *Policy) budgetTime(now *instant) time.Time {
	if now.g == nil || !now.g.budgetTimed {
		return now.t
	}
	return now.get()
}

// End records how an attempt ended, and how long it took, with the
// throttler, the breaker and the budget.
func (p *Policy) End(now time.Time, in *Intent, t Ticket, o Outcome, took time.Duration) {
	i := at(now)
	p.end(&i, t, o, took)
}

// end is End with the time read only if a decision needs it. It needs no
// Intent: the ticket carries what the attempt holds.
func (p *Policy) end(now *instant, t Ticket, o Outcome, took time.Duration) {
	if p.Throttle != nil {
		p.Throttle.Record(now.get(), o)
	}
	if p.Breaker != nil {
		p.Breaker.record(now, t.permit(), o, took)
	}
	if p.Budget != nil {
		p.Budget.Record(p.budgetTime(now), o, t.paid)
	}
	if p.Pacer != nil {
		p.Pacer.Update(now.get(), o == OutcomeThrottled)
	}
}

// Pace asks the Pacer for the right to send an attempt at now, before
// Begin for a first attempt and before Resume for a retry. It returns zero
// when the attempt may go (the Pacer took what it costs), or the wait
// after which to ask again; or the Pacer's error (ErrRateLimited, when it
// is set to fail rather than wait; ErrNotBuilt, for one its constructor
// did not make): the intent is over (Abandon a scheduled retry). Without a
// Pacer it always returns zero.
func (p *Policy) Pace(now time.Time) (time.Duration, error) {
	if p.Pacer == nil {
		return 0, nil
	}
	return p.Pacer.Pace(now)
}

// PaceBefore is Pace for an attempt that must start by latest (the zero
// time: no limit). When the Pacer's wait would pass latest it returns
// ErrNoTimeLeft instead of the wait, so that a driver that schedules the
// attempt for later (a simulator, an event loop) ends the intent now
// rather than waking after its deadline. The Guard, which sleeps under the
// caller's context, needs no such limit.
func (p *Policy) PaceBefore(now, latest time.Time) (time.Duration, error) {
	d, err := p.Pace(now)
	if err == nil && d > 0 && !latest.IsZero() && now.Add(d).After(latest) {
		return 0, ErrNoTimeLeft
	}
	return d, err
}

// sent tells a budget that counts attempts in flight that a retry or a
// hedge is sent. The assertion is made here, on the retry path, so that a
// successful call pays nothing for it.
func (p *Policy) sent(now time.Time, k Kind) {
	if b, ok := p.Budget.(inFlight); ok {
		b.Sent(now, k)
	}
}

// Retry decides whether the intent retries after an attempt that ended
// with o (OutcomeFailure or OutcomeTimeout), and schedules it: it returns the wait, and
// the budget's charge is held in the intent until [Policy.Resume] sends the
// retry or [Policy.Abandon] drops it.
//
// pushback is the wait the server asked for (zero: none; negative: do not
// retry); it replaces the backoff, clamped to MaxPushback, and the retry is
// still paid from the budget. latest is the last moment a retry may start
// (the zero Time: no deadline). src draws the jitter.
//
// The reasons for no retry, in the order they are checked:
// ErrNotIdempotent, ErrRetriesExhausted, ErrPushback, ErrNoTimeLeft,
// ErrBudgetExhausted.
func (p *Policy) Retry(now time.Time, in *Intent, o Outcome, pushback time.Duration, latest time.Time, src rand.Source) (time.Duration, error) {
	if !in.Idempotent && in.Key == "" {
		return 0, ErrNotIdempotent
	}
	if p.MaxRetries != Unlimited && in.retries >= p.MaxRetries {
		return 0, ErrRetriesExhausted
	}
	if pushback < 0 {
		return 0, ErrPushback
	}
	var d time.Duration
	if pushback > 0 {
		d = min(pushback, p.maxPushback())
	} else {
		d = p.Backoff.delay(in.retries+1-in.pushed, in.prev, src)
	}
	if !latest.IsZero() && !now.Add(d).Before(latest) {
		return 0, ErrNoTimeLeft
	}
	// A retry scheduled twice without Resume would lose the first charge.
	p.Abandon(now, in)
	var cost float64
	if p.Budget != nil {
		c, ok := p.Budget.Withdraw(now, o)
		if !ok {
			return 0, ErrBudgetExhausted
		}
		cost = c
	}
	in.prev = d
	if pushback > 0 && p.PushbackRestarts {
		in.pushed = in.retries + 1
	}
	in.pending, in.waiting = cost, true
	return d, nil
}

// DefaultMaxPushback is Policy.MaxPushback's zero value: the longest wait
// a server may ask for that is honoured as asked. It bounds a wait that
// would outlast any caller (a Retry-After of a day); a deadline bounds it
// more (ErrNoTimeLeft).
const DefaultMaxPushback = time.Minute

func (p *Policy) maxPushback() time.Duration {
	if p.MaxPushback > 0 {
		return p.MaxPushback
	}
	return DefaultMaxPushback
}

// Resume sends the retry that Retry scheduled, once its wait is over: the
// throttler and the breaker must admit it. When either refuses
// (ErrThrottled, ErrBreakerOpen, ErrTooManyProbes), the budget's charge is
// refunded and the intent is over.
func (p *Policy) Resume(now time.Time, in *Intent) (Ticket, error) {
	cost := in.pending
	in.pending, in.waiting = 0, false
	t := Ticket{paid: cost, kind: KindRetry}
	if err := p.Throttle.Allow(now); err != nil {
		p.refund(now, cost)
		return Ticket{}, err
	}
	if p.guards(KindRetry) {
		pm, err := p.Breaker.Allow(now)
		if err != nil {
			p.refund(now, cost)
			return Ticket{}, err
		}
		t.hold(pm)
	}
	p.sent(now, KindRetry)
	in.attempts++
	in.retries++
	return t, nil
}

// Abandon drops a scheduled retry that will not be sent (its caller gave
// up) and refunds its charge. It does nothing when no retry is waiting.
func (p *Policy) Abandon(now time.Time, in *Intent) {
	if in.waiting {
		p.refund(now, in.pending)
		in.pending, in.waiting = 0, false
	}
}

func (p *Policy) refund(now time.Time, cost float64) {
	if p.Budget != nil && cost > 0 {
		p.Budget.Refund(now, cost)
	}
}

// HedgeDelay returns how long to wait for an attempt before hedging it:
// zero when the policy does not hedge or the intent may not send another
// hedge.
func (p *Policy) HedgeDelay(in *Intent) time.Duration {
	if p.Hedge.Delay <= 0 || in.NoHedge || in.hedges >= max(p.Hedge.Max, 1) || (!in.Idempotent && in.Key == "") {
		return 0
	}
	return p.Hedge.Delay
}

// StartHedge sends a hedge beside a slow attempt: the budget pays for it as
// for a retry, and the throttler and the breaker must admit it. Call it
// when HedgeDelay has passed without an answer.
func (p *Policy) StartHedge(now time.Time, in *Intent) (Ticket, error) {
	if p.HedgeDelay(in) == 0 {
		return Ticket{}, ErrRetriesExhausted
	}
	t := Ticket{kind: KindHedge}
	if p.Budget != nil {
		c, ok := p.Budget.Withdraw(now, OutcomeFailure)
		if !ok {
			return Ticket{}, ErrBudgetExhausted
		}
		t.paid = c
	}
	if err := p.Throttle.Allow(now); err != nil {
		p.refund(now, t.paid)
		return Ticket{}, err
	}
	if p.guards(KindHedge) {
		pm, err := p.Breaker.Allow(now)
		if err != nil {
			p.refund(now, t.paid)
			return Ticket{}, err
		}
		t.hold(pm)
	}
	p.sent(now, KindHedge)
	in.attempts++
	in.hedges++
	return t, nil
}

// Ceiling returns the most attempts per second the policy permits at a
// steady rate of intents per second: rate × (1 + max retries + hedges)
// without a budget, rate × (1 + share) with one that reports its retry
// share (a RetryShare method: see [Budget]; floors aside). It is +Inf for
// Unlimited retries without a budget.
func (p *Policy) Ceiling(rate float64) float64 {
	extra := math.Inf(1)
	if p.MaxRetries != Unlimited {
		extra = float64(p.MaxRetries)
		if p.Hedge.Delay > 0 {
			extra += float64(max(p.Hedge.Max, 1))
		}
	}
	if s, ok := p.Budget.(retryShare); ok {
		extra = min(extra, s.RetryShare())
	}
	return rate * (1 + extra)
}
