package resil

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retrystorm/retrystorm/resil/internal/entropy"
)

// GuardSettings configures a [Guard]. Only Policy matters for most uses; every
// other field has a working zero value, and the zero GuardSettings make a Guard
// that sends one attempt per call. NewGuard copies the GuardSettings; the
// functions in them are called concurrently and must be safe for that.
type GuardSettings struct {
	// Policy is the decision core the Guard drives: retries, budget,
	// breaker, backoff, hedging. It is copied; its Budget and Breaker are
	// shared (share them between Guards to share their state).
	Policy Policy
	// AttemptTimeout bounds each attempt: its context is cancelled with
	// cause [ErrAttemptTimeout] after this long, and the attempt counts as
	// an OutcomeTimeout. Zero means none: attempts run under the caller's context.
	AttemptTimeout time.Duration
	// MinAttempt is the least time an attempt needs. A retry is refused
	// (ErrNoTimeLeft) unless it can start MinAttempt before the caller's
	// deadline, so a retry that cannot finish in time is not paid for.
	// Zero means a retry only has to start before the deadline.
	MinAttempt time.Duration
	// Idempotency is the default for calls that do not say (Do always
	// uses it): Idempotent calls may be retried and hedged, NotIdempotent
	// calls only when they carry an idempotency key. It is required when
	// the policy may send more than one attempt (MaxRetries or hedging):
	// a retry policy that silently retries nothing is a trap, so the
	// choice is made explicitly, as Funding is for a budget.
	//
	// The rule is the same whatever drives the Guard: a call's own
	// idempotency when it says (CallOptions.Idempotency), else this. The
	// adapters follow it: resilhttp.Transport lets a request's method say
	// only "not idempotent" (POST, PATCH), so GET, PUT or DELETE are
	// retried when this is Idempotent and, when it is NotIdempotent, only
	// with a key; resilgrpc applies it to the methods whose
	// Method.Idempotency is unset.
	Idempotency Idempotency
	// AutoKey gives every non-idempotent Call or CallWith an idempotency
	// key from NewKey, so that it may be retried; fn sees the key in its
	// Attempt and must send it. Do never makes keys: its fn could not see
	// them.
	AutoKey bool
	// NewKey makes idempotency keys. Nil means a random UUID (version 4)
	// from crypto/rand.
	NewKey func() string
	// Classify overrides how errors count and whether they are retried.
	// Nil means [DefaultClassifier], narrowed by RetryOn and NoRetryOn.
	Classify Classifier
	// RetryOn, when not empty, makes only the errors that match one of
	// these (errors.Is) retryable; the Guard's own per-attempt timeout
	// stays retryable. Ignored when Classify is set.
	RetryOn []error
	// NoRetryOn lists errors (errors.Is) that are never retried. Ignored
	// when Classify is set.
	NoRetryOn []error
	// Fallback, if set, answers for calls the breaker or the throttler
	// refuses, with the refusal (it wraps ErrBreakerOpen or ErrThrottled,
	// and the last attempt's error when a retry was refused). Its result is the call's. CallOptions.Fallback
	// takes precedence.
	Fallback func(ctx context.Context, err error) error
	// Clock reads the time and makes the timers. Nil means [RealClock].
	// The caller's context deadline is compared with Clock.Now, so an
	// injected clock must agree with the one the deadlines come from.
	Clock Clock
	// Rand draws the jitter. It is wrapped in a mutex, so it need not be
	// safe for concurrent use (and must not be used elsewhere). Nil means
	// a ChaCha8 source seeded from crypto/rand.
	Rand rand.Source
	// OnEvent, if set, is called with every [Event], synchronously, on the
	// goroutine that made it. It must not block.
	OnEvent func(Event)
}

// Guard is the blocking driver of a [Policy] for production code: it runs a
// function under the policy, with per-attempt timeouts, waits for the
// backoff without sleeping past the caller's deadline, honours pushback,
// hedges, falls back when the breaker refuses, and counts everything.
// Every decision is the Policy's: the simulator drives the same Policy on
// virtual time.
//
// Make one with [NewGuard]. A Guard it did not make fails closed: the zero
// Guard and a nil *Guard run nothing, and every call returns [ErrNotBuilt]
// at once; their Stats are zero. A Guard is safe for concurrent use; share
// one per dependency.
type Guard struct {
	p        Policy
	s        GuardSettings
	clock    Clock
	real     bool // clock is the real one: use time directly, no interface calls
	src      lockedSource
	tokens   tokenReporter
	newKey   func() string
	classify Classifier

	timed bool // the breaker judges durations (SlowCall): time every attempt
	hooks atomic.Pointer[hooks]
	// background counts hedged attempts on goroutines of their own,
	// losers included, for Wait.
	background detached
	hookMu     sync.Mutex // serialises Observe and its removals
	hookID     uint64

	budgetTimed bool // the budget reads the time it is handed (UsesTime): read the clock for it

	st counters // last, padded: written by every call
}

// NewGuard returns a Guard, or an error naming the invalid setting.
func NewGuard(s GuardSettings) (*Guard, error) {
	if err := s.Policy.Validate(); err != nil {
		return nil, err
	}
	if err := checkSpin(&s.Policy); err != nil {
		return nil, err
	}
	if s.AttemptTimeout < 0 {
		return nil, badSetting("GuardSettings.AttemptTimeout", s.AttemptTimeout, "must not be negative")
	}
	if s.MinAttempt < 0 {
		return nil, badSetting("GuardSettings.MinAttempt", s.MinAttempt, "must not be negative")
	}
	if s.Idempotency > NotIdempotent {
		return nil, badSetting("GuardSettings.Idempotency", s.Idempotency, "unknown idempotency")
	}
	if s.Idempotency == IdempotencyUnset && (s.Policy.MaxRetries != 0 || s.Policy.Hedge.Delay > 0) {
		return nil, badSetting("GuardSettings.Idempotency", s.Idempotency,
			"required when the policy retries or hedges: Idempotent (any call may run twice) or NotIdempotent (only calls with an idempotency key are retried)")
	}
	g := &Guard{p: s.Policy, s: s, clock: s.Clock, newKey: s.NewKey, classify: s.Classify}
	if g.clock == nil {
		g.clock, g.real = realClock{}, true
	} else if _, ok := g.clock.(realClock); ok {
		g.real = true
	}
	g.src.src = s.Rand
	if g.src.src == nil {
		var seed [32]byte
		entropy.Read(seed[:])
		g.src.src = rand.NewChaCha8(seed)
	}
	if g.newKey == nil {
		g.newKey = randomUUID
	}
	if g.classify == nil {
		g.classify = DefaultClassifier
		if len(s.RetryOn) > 0 || len(s.NoRetryOn) > 0 {
			g.classify = listClassifier(append([]error(nil), s.RetryOn...), append([]error(nil), s.NoRetryOn...))
		}
	}
	g.timed = s.Policy.Breaker != nil && s.Policy.Breaker.s.SlowCall > 0
	g.budgetTimed = budgetUsesTime(s.Policy.Budget)
	if tr, ok := s.Policy.Budget.(tokenReporter); ok {
		g.tokens = tr
	}
	return g, nil
}

// checkSpin refuses unlimited retries with nothing to pace or cap them: no
// budget and no backoff. A Guard would then retry a failing dependency in
// a tight loop, millions of attempts a second, until the caller's deadline
// (which NewGuard cannot see, and which may never come).
func checkSpin(p *Policy) error {
	if p.MaxRetries != Unlimited {
		return nil
	}
	budget := p.Budget != nil && !unbounded(p.Budget)
	paced := p.Backoff.Schedule != NoDelay || p.Backoff.Jitter == DecorrelatedJitter
	if budget || paced {
		return nil
	}
	return badSetting("Policy.MaxRetries", "Unlimited",
		"with no Policy.Budget and no Policy.Backoff, retries would spin as fast as attempts fail: set a budget, a backoff, or a number of retries")
}

func listClassifier(retryOn, noRetryOn []error) Classifier {
	return func(err error) (Outcome, bool) {
		o, retry := DefaultClassifier(err)
		for _, e := range noRetryOn {
			if errors.Is(err, e) {
				return o, false
			}
		}
		if retry && len(retryOn) > 0 {
			retry = false
			for _, e := range retryOn {
				if errors.Is(err, e) {
					retry = true
					break
				}
			}
		}
		return o, retry
	}
}

// built reports whether NewGuard made g: it always sets a classifier.
func (g *Guard) built() bool { return g != nil && g.classify != nil }

// Policy returns a copy of the policy the Guard drives.
func (g *Guard) Policy() Policy {
	if g == nil {
		return Policy{}
	}
	return g.p
}

// Now returns the time on the Guard's clock. Adapters use it (resilhttp
// reads Retry-After dates with it) so that an injected clock is honoured
// everywhere.
func (g *Guard) Now() time.Time {
	if g == nil || g.real || g.clock == nil {
		return time.Now()
	}
	return g.clock.Now()
}

// Stats returns a snapshot of the counters, the breaker's state and the
// budget's balance.
func (g *Guard) Stats() Stats {
	if !g.built() {
		return Stats{}
	}
	now := g.Now()
	s := Stats{
		Intents:          g.st.intents.Load(),
		Retries:          g.st.retries.Load(),
		Hedges:           g.st.hedges.Load(),
		Failures:         g.st.failures.Load(),
		BudgetDenials:    g.st.denials.Load(),
		BreakerRefusals:  g.st.refusals.Load(),
		ThrottleRefusals: g.st.throttled.Load(),
		Fallbacks:        g.st.fallbacks.Load(),
		Panics:           g.st.panics.Load(),
		BreakerState:     g.p.Breaker.State(now),
	}
	if g.p.Throttle != nil {
		s.ThrottleProbability = g.p.Throttle.Probability(now)
	}
	if g.tokens != nil {
		s.BudgetTokens, s.HasBudgetTokens = g.tokens.Tokens(now), true
	}
	// Attempts are not counted one by one: every intent sends a first
	// attempt unless the breaker or the throttler refuses it, which saves
	// an atomic add on the success path.
	s.Attempts = s.Intents - min(s.Intents, g.st.firstRefusals.Load()) + s.Retries + s.Hedges
	if s.Intents > 0 {
		s.RetriesPerRequest = float64(s.Retries) / float64(s.Intents)
	}
	return s
}

// Observe adds f to the functions called with every [Event], after
// GuardSettings.OnEvent, and returns a function that removes it. f is called
// synchronously on the goroutine that made the event and must not block.
func (g *Guard) Observe(f func(Event)) (remove func()) {
	if g == nil {
		return func() {}
	}
	g.hookMu.Lock()
	defer g.hookMu.Unlock()
	g.hookID++
	id := g.hookID
	var fns []hook
	if h := g.hooks.Load(); h != nil {
		fns = append(fns, h.fns...)
	}
	fns = append(fns, hook{id, f})
	g.hooks.Store(&hooks{fns})
	return func() {
		g.hookMu.Lock()
		defer g.hookMu.Unlock()
		h := g.hooks.Load()
		if h == nil {
			return
		}
		var keep []hook
		for _, x := range h.fns {
			if x.id != id {
				keep = append(keep, x)
			}
		}
		if len(keep) == 0 {
			g.hooks.Store(nil)
		} else {
			g.hooks.Store(&hooks{keep})
		}
	}
}

// Wait blocks until no attempt of a hedged round is running: the losers
// that Do and Call leave to finish in the background. It returns ctx's
// error if ctx is done first. Use it to drain a Guard before shutdown, or
// in tests that check that nothing is left running.
func (g *Guard) Wait(ctx context.Context) error {
	if g == nil {
		return nil
	}
	select {
	case <-g.background.wait():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// observed reports whether anyone listens, so that events are built only
// then.
func (g *Guard) observed() bool { return g.s.OnEvent != nil || g.hooks.Load() != nil }

func (g *Guard) emit(e Event) {
	if g.s.OnEvent != nil {
		g.s.OnEvent(e)
	}
	if h := g.hooks.Load(); h != nil {
		for _, x := range h.fns {
			x.fn(e)
		}
	}
}

// Idempotency says whether one call may safely run more than once. The
// zero value is IdempotencyUnset. A plain value, safe to copy and share.
type Idempotency uint8

const (
	// IdempotencyUnset is the zero value. In [CallOptions] it takes the
	// Guard's GuardSettings.Idempotency; in GuardSettings it is invalid
	// when the policy may retry or hedge.
	IdempotencyUnset Idempotency = iota
	// Idempotent calls may be retried and hedged.
	Idempotent
	// NotIdempotent calls are retried and hedged only with a key.
	NotIdempotent
)

// Attempt tells the function run by [Call] which attempt this is. It is
// passed as an argument, not in the context, so that reading it costs
// nothing. The zero Attempt describes none (Number 0). A plain value, safe
// to copy and share.
type Attempt struct {
	// Number counts the intent's attempts from 1: first, retries and
	// hedges in the order they were sent.
	Number int
	// Kind says why the attempt was sent.
	Kind Kind
	// Key is the idempotency key the attempt must carry: the same for
	// every attempt of the intent, empty when it has none.
	Key string
}

// CallOptions are the per-call options of [CallWith]. The zero value uses
// the Guard's defaults. CallWith copies them. When the call hedges,
// Discard may be called on another goroutine, for a hedge that lost, while
// other attempts still run and after CallWith returned (so concurrently
// with Keep and with the caller's code); calls to Discard for one call
// never overlap.
type CallOptions[T any] struct {
	// Idempotency overrides GuardSettings.Idempotency for this call.
	Idempotency Idempotency
	// Key is the call's idempotency key, passed to every attempt. A
	// non-idempotent call with a key may be retried.
	Key string
	// NewKey makes a key with GuardSettings.NewKey when Key is empty.
	NewKey bool
	// Once sends a single attempt: no retry, no hedge, whatever the other
	// options say, for a call that cannot be repeated (an HTTP request
	// whose body cannot be replayed). A retry is refused with
	// ErrNotIdempotent.
	Once bool
	// NoHedge sends no hedge for this call, whatever the policy says;
	// retries go on. For a call whose attempts cannot run side by side (a
	// gRPC stream).
	NoHedge bool
	// Fallback, if set, answers when the breaker or the throttler refuses
	// this call, instead of GuardSettings.Fallback.
	Fallback func(ctx context.Context, err error) (T, error)
	// Discard, if set, is given the value of every attempt whose result is
	// not returned: a failure followed by a retry, a hedge that lost. It
	// releases what the value holds (resilhttp drains and closes response
	// bodies with it).
	Discard func(v T)
	// Keep, if set, is given the returned value when its attempt ran under
	// a context of its own (a per-attempt timeout, or hedging), with the
	// function that cancels that context; Keep's result is returned, and
	// its owner must call release once the value is used up. Without Keep
	// the Guard cancels the context before returning, which is right for
	// values that do not read from the network after fn returns (an HTTP
	// response body does).
	Keep func(v T, release func()) T
}

// Do runs fn under the Guard's policy: the first attempt, then retries and
// hedges as the policy allows, and returns nil on the first success. fn
// receives the attempt's context (the caller's, or one bounded by
// AttemptTimeout) and must honour its cancellation.
//
// When the call stops without success it returns a [*StopError] that wraps
// both the reason and the last attempt's error. When the breaker refuses
// the first attempt, it returns ErrBreakerOpen (or ErrTooManyProbes); when
// the throttler does, ErrThrottled; or what GuardSettings.Fallback returns. A caller whose context is already done
// gets its error and nothing is sent.
//
// Do calls are retried only when GuardSettings.Idempotency is Idempotent.
//
// When the policy hedges, attempts run on goroutines of their own, and Do
// returns as soon as one answer counts, or at once when ctx is done, even
// if an attempt ignores its context. The attempts still running are
// cancelled and finish in the background: each, when its function
// returns, is recorded with the breaker and the budget (a lost hedge as
// OutcomeIgnored, unless it succeeded anyway; one the caller gave up on as
// the caller's context says) and its value is discarded. Their bound is
// their function's: its context is cancelled when Do returns, and nothing
// else of the Guard runs after it. [Guard.Wait] waits for them.
//
// If fn panics, the panic goes on to the caller once the attempt's breaker
// permit and context are released; it counts in Stats (Panics, Failures)
// and EventDone reports it (ErrPanicked). A losing hedge that panics after
// Do returned has no caller to go to: its panic is counted in Stats.Panics
// and reported by its EventAttempt (an Err that wraps ErrPanicked), and
// goes no further.
func (g *Guard) Do(ctx context.Context, fn func(ctx context.Context) error) error {
	_, err := run[struct{}](ctx, g, nil, nil, fn)
	return err
}

// Call is [Guard.Do] for functions that return a value and want to know
// which attempt they run as. It uses the Guard's defaults; see [CallWith].
// When the call stops without success, the last attempt's value (often
// the zero value) is returned with the error.
func Call[T any](ctx context.Context, g *Guard, fn func(ctx context.Context, a Attempt) (T, error)) (T, error) {
	return run(ctx, g, nil, fn, nil)
}

// CallWith is [Call] with per-call options.
func CallWith[T any](ctx context.Context, g *Guard, o CallOptions[T], fn func(ctx context.Context, a Attempt) (T, error)) (T, error) {
	return run(ctx, g, &o, fn, nil)
}

// call is one intent's state in the Guard. It lives on the caller's stack.
type call[T any] struct {
	g  *Guard
	o  *CallOptions[T] // nil: defaults
	fn func(context.Context, Attempt) (T, error)
	do func(context.Context) error
	in Intent
	// ctx is the caller's context, handed to observers with each event.
	ctx context.Context
	// began is when the intent started, if the Guard read the clock.
	began time.Time
}

// result is one attempt's answer and how it was judged.
type result[T any] struct {
	v        T
	err      error
	o        Outcome
	retry    bool
	push     time.Duration
	release  func() // cancels the attempt's own context; nil when none
	idx      int    // hedging: which attempt
	panicked any    // hedging: the attempt panicked with this
	didPanic bool
}

func run[T any](ctx context.Context, g *Guard, o *CallOptions[T], fn func(context.Context, Attempt) (T, error), do func(context.Context) error) (T, error) {
	var zero T
	if !g.built() {
		return zero, ErrNotBuilt
	}
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	c := call[T]{g: g, o: o, fn: fn, do: do, ctx: ctx}
	c.in.Idempotent = g.s.Idempotency == Idempotent
	if o != nil || g.s.AutoKey {
		c.classify() // not called otherwise: a call costs on the fast path
	}
	g.st.intents.Add(1)
	// A panicking fn is counted and reported before its panic goes on:
	// round (or race) has already released what the attempt held.
	defer func() {
		if p := recover(); p != nil {
			g.st.panics.Add(1)
			g.st.failures.Add(1)
			c.done(c.began, fmt.Errorf("%w: %v", ErrPanicked, p))
			panic(p)
		}
	}()
	// The clock is read only when something needs a duration (the
	// slow-call rule, observers) or a decision needs the time: on this
	// machine's kind of VM a clock read costs more than the rest of a
	// successful call.
	timed := g.timed || g.observed()
	began := instant{g: g}
	if timed {
		began = at(g.Now())
	}
	c.began = began.t
	if g.p.Pacer != nil {
		if err := g.pace(ctx); err != nil {
			g.st.failures.Add(1)
			c.done(began.get(), err)
			return zero, err
		}
	}
	t, err := g.p.begin(&began, &c.in)
	if err != nil {
		g.st.firstRefusals.Add(1)
		return c.refused(ctx, began.t, began.get(), err, nil)
	}
	start := began
	for {
		r := c.round(ctx, t, &start, timed)
		if r.o == OutcomeSuccess {
			c.done(began.t, nil)
			return c.keep(r), nil
		}
		wait, stop := c.retryOrStop(ctx, r)
		if stop != nil {
			g.st.failures.Add(1)
			c.done(began.t, stop)
			return c.keep(r), stop
		}
		if stop := c.backOff(ctx, wait, r.err); stop != nil {
			g.st.failures.Add(1)
			c.done(began.t, stop)
			return zero, stop
		}
		start = at(g.Now())
		t, err = g.p.Resume(start.t, &c.in)
		if err != nil {
			return c.refused(ctx, began.t, start.t, err, r.err)
		}
		g.st.retries.Add(1)
	}
}

// classify applies the call's options and AutoKey to what the Policy is
// told of the intent, whose Idempotent holds the Guard's setting: the
// call's idempotency, its idempotency key (the call's, or a new one when
// asked or when AutoKey makes a non-idempotent Call retryable), and
// whether it may hedge. A call sent Once is neither idempotent nor keyed,
// so that the Policy refuses its every retry and hedge. Without options
// or AutoKey it has nothing to do.
func (c *call[T]) classify() {
	g, o := c.g, c.o
	if o != nil {
		switch o.Idempotency {
		case Idempotent:
			c.in.Idempotent = true
		case NotIdempotent:
			c.in.Idempotent = false
		}
		c.in.Key = o.Key
		c.in.NoHedge = o.NoHedge
		if c.in.Key == "" && o.NewKey {
			c.in.Key = g.newKey()
		}
	}
	switch {
	case o != nil && o.Once:
		// Neither idempotent nor keyed: the Policy refuses every retry and
		// hedge, so the single-attempt rule stays the Policy's.
		c.in.Idempotent, c.in.Key = false, ""
	case c.in.Key == "" && !c.in.Idempotent && g.s.AutoKey && c.do == nil:
		c.in.Key = g.newKey()
	}
}

// retryOrStop decides after round r failed: the *StopError the intent
// stops with (the caller gave up, r is not retryable, or the Policy says
// no, a refusal of the budget reported), or the wait before the retry,
// which is announced and r's value discarded.
func (c *call[T]) retryOrStop(ctx context.Context, r result[T]) (time.Duration, error) {
	g := c.g
	now := g.Now()
	var reason error
	var wait time.Duration
	switch {
	case ctx.Err() != nil:
		reason = ctx.Err()
	case !r.retry:
		reason = ErrNotRetryable
	default:
		wait, reason = g.p.Retry(now, &c.in, r.o, r.push, g.latest(ctx), &g.src)
	}
	if reason != nil {
		if reason == ErrBudgetExhausted {
			c.denied(now, c.next(KindRetry), r.err)
		}
		return 0, &StopError{Reason: reason, Last: r.err, Attempts: c.in.Attempts()}
	}
	if g.observed() {
		c.emit(Event{Kind: EventRetry, At: now, Attempt: c.next(KindRetry), Wait: wait, Err: r.err})
	}
	c.discard(r)
	return wait, nil
}

// backOff waits before a retry, then for the pacer if there is one. When
// ctx ends first the retry is abandoned (the Policy gives back what it
// took for it) and the *StopError returned wraps ctx's error and last,
// the failed attempt's.
func (c *call[T]) backOff(ctx context.Context, wait time.Duration, last error) error {
	g := c.g
	werr := g.sleep(ctx, wait)
	if werr == nil && g.p.Pacer != nil {
		werr = g.pace(ctx)
	}
	if werr != nil {
		g.p.Abandon(g.Now(), &c.in)
		return &StopError{Reason: werr, Last: last, Attempts: c.in.Attempts()}
	}
	return nil
}

// next describes the attempt that would be sent next.
func (c *call[T]) next(k Kind) Attempt {
	return Attempt{Number: c.in.Attempts() + 1, Kind: k, Key: c.in.Key}
}

// refused ends an intent the breaker or the throttler refused: the
// fallback answers if there is one.
func (c *call[T]) refused(ctx context.Context, began, now time.Time, err, last error) (T, error) {
	g := c.g
	a := Attempt{}
	if last != nil {
		a = c.next(KindRetry)
	}
	c.refusedLocally(now, a, err, last)
	if last != nil {
		err = &StopError{Reason: err, Last: last, Attempts: c.in.Attempts()}
	}
	var v T
	switch {
	case c.o != nil && c.o.Fallback != nil:
		v, err = c.o.Fallback(ctx, err)
	case g.s.Fallback != nil:
		err = g.s.Fallback(ctx, err)
	default:
		g.st.failures.Add(1)
		c.done(began, err)
		return v, err
	}
	g.st.fallbacks.Add(1)
	if g.observed() {
		c.emit(Event{Kind: EventFallback, At: g.Now(), Err: err})
	}
	c.done(began, err)
	return v, err
}

func (c *call[T]) done(began time.Time, err error) {
	if c.g.observed() {
		now := c.g.Now()
		c.emit(Event{Kind: EventDone, At: now, Took: now.Sub(began), Err: err})
	}
}

// keep hands the returned value over, with its context if it has one.
func (c *call[T]) keep(r result[T]) T {
	if r.release != nil {
		if c.o != nil && c.o.Keep != nil {
			return c.o.Keep(r.v, r.release)
		}
		r.release()
	}
	return r.v
}

// discard releases the value of an attempt whose result is dropped.
func (c *call[T]) discard(r result[T]) {
	if c.o != nil && c.o.Discard != nil {
		c.o.Discard(r.v)
	}
	if r.release != nil {
		r.release()
	}
}

func (c *call[T]) invoke(ctx context.Context, a Attempt) (T, error) {
	if c.do != nil {
		var zero T
		return zero, c.do(ctx)
	}
	return c.fn(ctx, a)
}

// round sends the attempt t admitted (and its hedges, if the policy
// hedges) and returns the answer that counts, already recorded with the
// policy.
func (c *call[T]) round(ctx context.Context, t Ticket, start *instant, timed bool) result[T] {
	g := c.g
	a := Attempt{Number: c.in.Attempts(), Kind: t.Kind(), Key: c.in.Key}
	if g.p.HedgeDelay(&c.in) > 0 {
		return c.race(ctx, t, start.get(), a)
	}
	actx := ctx
	var release func()
	if g.s.AttemptTimeout > 0 {
		actx, release = g.attemptContext(ctx)
	}
	ended := false
	defer func() {
		if !ended { // fn panicked: free the breaker's permit, then let it go on
			now := at(g.Now())
			g.p.end(&now, t, OutcomeIgnored, 0)
			if release != nil {
				release()
			}
		}
	}()
	v, err := c.invoke(actx, a)
	ended = true
	end := instant{g: g}
	var took time.Duration
	if timed {
		end = at(g.Now())
		took = end.t.Sub(start.t)
	}
	r := result[T]{v: v, err: err, release: release}
	judge(g, ctx, actx, &r)
	c.end(&end, t, a, &r, took)
	return r
}

// end records an attempt's outcome with the policy and tells the observers.
func (c *call[T]) end(now *instant, t Ticket, a Attempt, r *result[T], took time.Duration) {
	c.g.endAttempt(c.ctx, now, t, a, r.o, r.err, took)
}

// endAttempt records an attempt's outcome with the policy and tells the
// observers, with the caller's context ctx. It needs nothing else of the call, so a hedge that lost may call
// it after the call returned.
func (g *Guard) endAttempt(ctx context.Context, now *instant, t Ticket, a Attempt, o Outcome, err error, took time.Duration) {
	g.p.end(now, t, o, took)
	if g.observed() {
		g.emit(Event{Kind: EventAttempt, At: now.get(), Attempt: a, Outcome: o, Took: took, Err: err, Context: ctx})
	}
}

// judge decides how an attempt ended. The caller's context comes first: a
// caller who cancelled makes the attempt OutcomeIgnored, never a failure; a
// caller's deadline that passed makes it an OutcomeTimeout (the dependency was too
// slow for the caller). Then the per-attempt timeout, then the classifier.
func judge[T any](g *Guard, ctx, actx context.Context, r *result[T]) {
	if r.err == nil {
		r.o = OutcomeSuccess
		return
	}
	if err := ctx.Err(); err != nil {
		r.o = OutcomeIgnored
		if err == context.DeadlineExceeded {
			r.o = OutcomeTimeout
		}
		return
	}
	if actx != ctx && context.Cause(actx) == ErrAttemptTimeout {
		r.o, r.retry = OutcomeTimeout, true
		if !errors.Is(r.err, ErrAttemptTimeout) {
			r.err = &timedOut{r.err}
		}
	} else {
		r.o, r.retry = g.classify(r.err)
	}
	if r.retry {
		r.push, _ = PushbackOf(r.err)
	}
}

// attemptContext returns a context bounded by AttemptTimeout, and the
// function that releases it.
func (g *Guard) attemptContext(ctx context.Context) (context.Context, func()) {
	if g.real {
		actx, cancel := context.WithTimeoutCause(ctx, g.s.AttemptTimeout, ErrAttemptTimeout)
		return actx, cancel
	}
	actx, cancel := context.WithCancelCause(ctx)
	t := g.clock.AfterFunc(g.s.AttemptTimeout, func() { cancel(ErrAttemptTimeout) })
	return actx, func() {
		t.Stop()
		cancel(context.Canceled)
	}
}

// pace waits until the policy's Pacer lets an attempt go, or the caller
// gives up.
func (g *Guard) pace(ctx context.Context) error {
	for {
		d, err := g.p.Pace(g.Now())
		if err != nil || d == 0 {
			return err
		}
		if err := g.sleep(ctx, d); err != nil {
			return err
		}
	}
}

// latest is the last moment a retry may start: MinAttempt before the
// caller's deadline.
func (g *Guard) latest(ctx context.Context) time.Time {
	dl, ok := ctx.Deadline()
	if !ok {
		return time.Time{}
	}
	return dl.Add(-g.s.MinAttempt)
}

// sleep waits d on the Guard's clock, or until ctx is done.
func (g *Guard) sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	var t Timer
	if g.real {
		t = realTimer{time.NewTimer(d)}
	} else {
		t = g.clock.NewTimer(d)
	}
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		t.Stop()
		return ctx.Err()
	}
}

// refusedLocally counts an attempt the breaker (ErrBreakerOpen) or the
// throttler (ErrThrottled) refused, each apart, and tells the observers.
// last is the error of the attempt before it, if any.
func (c *call[T]) refusedLocally(now time.Time, a Attempt, reason, last error) {
	g := c.g
	kind := EventBreakerRefused
	if errors.Is(reason, ErrThrottled) {
		g.st.throttled.Add(1)
		kind = EventThrottled
	} else {
		g.st.refusals.Add(1)
	}
	if g.observed() {
		err := reason
		if last != nil {
			err = &StopError{Reason: reason, Last: last, Attempts: c.in.Attempts()}
		}
		c.emit(Event{Kind: kind, At: now, Attempt: a, Err: err})
	}
}

// denied counts a retry or hedge the budget refused, and tells the
// observers.
func (c *call[T]) denied(now time.Time, a Attempt, err error) {
	c.g.st.denials.Add(1)
	if c.g.observed() {
		c.emit(Event{Kind: EventBudgetDenied, At: now, Attempt: a, Err: err})
	}
}

// emit tells the observers of an event of this call, with its context.
func (c *call[T]) emit(e Event) {
	e.Context = c.ctx
	c.g.emit(e)
}

// lockedSource makes a rand.Source safe for the Guard's concurrent calls.
type lockedSource struct {
	mu  sync.Mutex
	src rand.Source
}

func (s *lockedSource) Uint64() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.src.Uint64()
}

// randomUUID returns a random (version 4) UUID from crypto/rand (see
// package entropy for the browser).
func randomUUID() string {
	var b [16]byte
	entropy.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	var s [36]byte
	hex.Encode(s[0:8], b[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], b[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], b[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], b[8:10])
	s[23] = '-'
	hex.Encode(s[24:], b[10:])
	return string(s[:])
}

var idempotencyNames = [...]string{"unset", "idempotent", "not_idempotent"}

// String returns "unset", "idempotent" or "not_idempotent".
func (i Idempotency) String() string {
	return enumString("Idempotency", idempotencyNames[:], uint8(i))
}
