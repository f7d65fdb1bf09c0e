// Package model is retrystorm's second engine: a deterministic fluid
// (mean-field) model of an origin and one fleet's retry policy, which
// answers in microseconds what the simulator answers in milliseconds per
// cell: does a trigger tip the system into its stuck state, how long does
// it take to recover, where is the boundary in load × trigger space.
//
// The model is built from the same scenario types the simulator runs and
// reads every policy setting through resil (the defaults of a budget, a
// breaker, a throttle, the backoff's delays), so it has no copies of
// resil's constants. It follows the fleet as flows: intents per second,
// attempts per second by attempt number, and the origin's backlog as a
// first-in-first-out queue of cohorts, integrated in small steps. A chain
// of tiers is a level of the same flows per hop, each tier answering its
// callers in order as its calls to the next layer end.
//
// Where a scenario uses something the model does not describe (hedging,
// replicas, LIFO queues, adaptive limits, budgets other than the token
// bucket and gRPC's throttle, tiers that queue or decide more than
// retries), [New] returns an [*UnsupportedError] saying which feature and
// why, rather than an answer. docs/model.md has the equations, the
// assumptions and how well it agrees with the simulator.
package model

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/retrystorm/retrystorm/resil"
	"github.com/retrystorm/retrystorm/resil/budget"
	"github.com/retrystorm/retrystorm/scenario"
)

// ErrUnsupported is what every [*UnsupportedError] matches with errors.Is.
var ErrUnsupported = errors.New("model: unsupported")

// ErrTooLarge is wrapped by New's error for a run longer, at its step,
// than the model holds (maxCells).
var ErrTooLarge = errors.New("more than the model holds")

// UnsupportedError says that the model does not describe a feature of the
// scenario, so it gives no answer: the simulator must.
type UnsupportedError struct {
	Feature string // the scenario's key, as the file writes it
	Reason  string // why the fluid model cannot answer for it
}

func (e *UnsupportedError) Error() string {
	return fmt.Sprintf("model: unsupported: %s: %s", e.Feature, e.Reason)
}

// Is makes errors.Is(err, ErrUnsupported) hold.
func (e *UnsupportedError) Is(target error) bool { return target == ErrUnsupported }

func unsupported(feature, reason string) error {
	return &UnsupportedError{Feature: feature, Reason: reason}
}

// Outcome kinds of an attempt, the failures as Retry.On names them.
const (
	kindError = iota
	kindRejection
	kindTimeout
	kindRefused
	nKinds
)

// Model is one fleet against one origin under one scenario's triggers,
// compiled into rates. Make one with [New]; a Model is read-only and safe
// for concurrent use ([Model.Run] allocates its own state). The zero
// Model has nothing to run: its verdict is not recovered.
type Model struct {
	sc    scenario.Scenario // the scenario, its fleets reduced to this one
	fleet scenario.Fleet

	h           float64 // step, seconds
	steps       int     // steps in the run
	perTick     int     // steps per tick
	timeout     float64 // per attempt, seconds
	clients     float64
	rate        float64 // intents per second, outside load triggers
	errRate     float64 // background error rate
	queue       bool    // queue model
	conc        bool    // concurrency model (neither: capacity model)
	base        float64 // concurrency model: latency with nothing in flight, seconds
	perInflight float64 // concurrency model: latency added per request in flight
	capacity    float64 // attempts per second
	workers     float64
	service     float64 // queue model: seconds a request holds a worker
	latency     float64 // capacity model: seconds an admitted attempt takes
	rejCost     float64 // capacity model: a rejection's share of the work
	limit       float64 // queue model: waiting requests at most; 0 = none
	drop        bool    // the origin drops, unanswered, a request it cannot answer in time
	shed        bool    // the origin refuses at once a request it cannot answer in time

	maxRetries int     // retries per intent (Unlimited made finite)
	retryShare float64 // share of intents that may be retried
	retryOn    [nKinds]bool
	// delay[k] is retry k+1's backoff as a distribution over whole
	// steps: resil's Backoff.Delay at stratified draws.
	delay [][]point

	budget  bool
	funding budget.Funding
	ratio   float64
	minTok  float64 // per client
	maxTok  float64
	cost    float64 // a retry after a failure
	costTO  float64 // a retry after a timeout
	// grpc is gRPC's retry throttle, followed as one client's average
	// tokens: a success adds grpcRatio, a counted failure takes 1, and a
	// retry goes while the tokens are above half of grpcMax.
	grpc        bool
	grpcMax     float64
	grpcRatio   float64
	grpcCounted [nKinds]bool
	breaker     bool
	brk         resil.BreakerSettings
	scopeAll    bool // the breaker guards first attempts too
	throttle    bool
	thr         resil.ThrottlerSettings

	// tiers is the chain's callers, outermost first: tiers[i] is tier i's
	// client, calling tier i+1 (the origin, for the last). The fleet calls
	// tier 0. Empty without tiers.
	tiers []tierHop
}

// tierHop is one tier of a chain: the work its server does before it calls
// the next layer (the concurrency model's base latency: nothing queues at
// it) and the policy it calls with, retries and backoff only.
type tierHop struct {
	work       float64 // seconds of the tier's own work before its call
	timeout    float64 // per attempt of its call, seconds
	maxRetries int
	retryOn    [nKinds]bool
	delay      [][]point
}

// point is one value of a delay's distribution: a whole number of steps
// and its weight.
type point struct {
	steps  int
	weight float64
}

// stratified is a rand.Source whose draws are fixed quantiles: resil's
// Backoff.Delay drawn at u = (i+0.5)/n gives the delay's distribution as n
// equally likely values, whatever the jitter. resil draws from the low 53
// bits, as math/rand/v2's Float64 does.
type stratified struct{ u float64 }

func (s stratified) Uint64() uint64 { return uint64(s.u * (1 << 53)) }

// maxCells bounds the numbers one run holds (per step, per attempt
// number: the cohort, its outcomes and retries due), 8 bytes each: 240 MB.
// The sweep's cells hold about 45,000.
const maxCells = 3e7

// draws is how many values of each backoff delay the model follows.
const draws = 8

// maxUnlimited is the retries the model follows for an unlimited policy:
// past it, every intent of a collapsed fleet has long given up in any
// run the model is asked about (or a budget has stopped it).
const maxUnlimited = 30

// New compiles fleet f of sc into a model, or says why it cannot: an
// error from resil for settings that do not build (as the simulator would
// refuse them), or an *UnsupportedError for a feature the model does not
// describe. sc must have passed scenario.Validate.
func New(sc *scenario.Scenario, f scenario.Fleet) (*Model, error) {
	if sc.Duration <= 0 || sc.Tick <= 0 || f.Timeout <= 0 || !(sc.Traffic.Rate >= 0) {
		return nil, fmt.Errorf("model: scenario %s: duration, tick and the fleet's timeout must be more than 0 and the rate at least 0 (run scenario.Validate)", sc.Name)
	}
	if err := supported(sc, f); err != nil {
		return nil, err
	}
	pol, err := f.NewPolicyRand(rand.NewPCG(1, 2))
	if err != nil {
		return nil, err
	}
	m := &Model{sc: *sc, fleet: f}
	m.sc.Fleets = []scenario.Fleet{f}
	m.timeout = f.Timeout.Seconds()
	m.clients = float64(max(sc.Traffic.Clients, 1))
	m.rate = sc.Traffic.Rate
	m.setOrigin(sc.Origin)
	m.setStep(sc)
	if err := m.setRetries(sc, f, &pol); err != nil {
		return nil, err
	}
	if err := m.setBudget(f, &pol); err != nil {
		return nil, err
	}
	if pol.Breaker != nil {
		m.breaker = true
		m.brk = pol.Breaker.Settings()
		m.scopeAll = pol.BreakerScope == resil.GuardAll
	}
	if pol.Throttle != nil {
		m.throttle = true
		m.thr = pol.Throttle.Settings()
	}
	return m, nil
}

// setOrigin reads the origin's model and its rates: a queue of workers, a
// latency that grows with the requests in flight, or a capacity.
func (m *Model) setOrigin(o scenario.Origin) {
	m.errRate = o.ErrorRate
	m.capacity = o.Capacity
	switch o.Model {
	case scenario.ModelQueue:
		m.queue = true
		m.workers = float64(max(o.Workers, 1))
		m.service = m.workers / o.Capacity
		m.limit = float64(o.QueueLimit)
		m.drop = o.DropExpired
		m.shed = o.Shed.Deadline
	case scenario.ModelConcurrency:
		m.conc = true
		m.base, m.perInflight = o.Base.Seconds(), o.PerInflight.Seconds()
		m.drop = o.Shed.Deadline
	case scenario.ModelCapacity:
		m.latency = o.Latency.Seconds()
		m.rejCost = o.RejectionCost
	}
}

// setStep sets the step and the run's length in steps. The step is at most
// a tenth of the shortest timeout (the fleet's or a tier's) and 100ms, so
// that a timeout is ten steps or more, and a whole fraction of the tick. A
// step of 50ms gave the same agreement with the simulator at twice the
// cost (docs/model.md). m.timeout must be set.
func (m *Model) setStep(sc *scenario.Scenario) {
	shortest := m.timeout
	for _, t := range sc.Tiers {
		shortest = min(shortest, t.Client.Timeout.Seconds())
	}
	tick := sc.Tick.Seconds()
	m.perTick = max(1, int(math.Ceil(tick/min(0.1, shortest/10))))
	m.h = tick / float64(m.perTick)
	m.steps = int(math.Ceil(sc.Duration.Seconds()/tick)) * m.perTick
}

// setRetries reads the fleet's retries and each tier's (how many, on which
// outcomes, after which backoff), refusing a run longer than the model
// holds (maxCells) before it builds the delays. The step must be set.
func (m *Model) setRetries(sc *scenario.Scenario, f scenario.Fleet, pol *resil.Policy) error {
	m.maxRetries = finite(pol.MaxRetries)
	attempts := float64(m.maxRetries + 1)
	for _, t := range sc.Tiers {
		attempts += float64(finite(t.Client.Retry.MaxRetries) + 1)
	}
	if cells := float64(m.steps) * attempts * (nKinds + 5); cells > maxCells {
		return fmt.Errorf("model: scenario %s would need %d steps of %v for %d attempt numbers, %w (%.0g numbers): shorten the run or lengthen the tick or the timeout",
			sc.Name, m.steps, time.Duration(m.h*float64(time.Second)), m.maxRetries+1, ErrTooLarge, float64(maxCells))
	}
	m.retryShare = 1
	if f.Retry.IdempotentOnly {
		m.retryShare = sc.Traffic.Idempotent + (1-sc.Traffic.Idempotent)*sc.Traffic.Keys
	}
	m.retryOn = retryOn(&f.Retry)
	m.delay = m.delays(pol.Backoff, m.maxRetries)
	for _, t := range sc.Tiers {
		p, err := t.NewPolicy()
		if err != nil {
			return err
		}
		hop := tierHop{work: t.Server.Base.Seconds(), timeout: t.Client.Timeout.Seconds(), maxRetries: finite(p.MaxRetries)}
		hop.retryOn = retryOn(&t.Client.Retry)
		hop.delay = m.delays(p.Backoff, hop.maxRetries)
		m.tiers = append(m.tiers, hop)
	}
	return nil
}

// retryOn is which outcome kinds r retries.
func retryOn(r *scenario.Retry) [nKinds]bool {
	var on [nKinds]bool
	for k, word := range [nKinds]string{scenario.RetryOnError, scenario.RetryOnRejection, scenario.RetryOnTimeout, scenario.RetryOnRefused} {
		on[k] = r.Retries(word)
	}
	return on
}

// setBudget reads the fleet's retry budget: the token bucket's settings,
// or gRPC's throttle's, as resil builds them.
func (m *Model) setBudget(f scenario.Fleet, pol *resil.Policy) error {
	if f.Budget.Use == scenario.BudgetTokenBucket {
		// The bucket's settings, with resil's defaults filled in: it
		// starts at MinTokens, fills to MaxTokens, and a retry costs
		// RetryCost after a failure and TimeoutCost after a timeout.
		s := f.Budget.TokenBucket.WithDefaults()
		m.budget, m.ratio, m.funding = true, s.Ratio, s.Funding
		m.minTok, m.maxTok, m.cost, m.costTO = s.MinTokens, s.MaxTokens, s.RetryCost, s.TimeoutCost
	}
	g, ok := pol.Budget.(*budget.GRPCThrottle)
	if !ok {
		return nil
	}
	m.grpc = true
	m.grpcMax = g.Tokens(time.Time{}) // a new throttle is full
	m.grpcRatio = g.RetryShare()
	// Which failures take a token is resil's rule (and the fleet's
	// retry conditions): ask a fresh throttle of the fleet's.
	// A refused connection is a rejection to the policy, as the
	// simulator tells it (sim.policyOutcome).
	for kind, o := range [nKinds]resil.Outcome{resil.OutcomeFailure, resil.OutcomeThrottled, resil.OutcomeTimeout, resil.OutcomeThrottled} {
		p, err := f.NewPolicyRand(rand.NewPCG(1, 2))
		if err != nil {
			return err
		}
		fresh := p.Budget.(*budget.GRPCThrottle)
		fresh.Record(time.Time{}, o, 0)
		m.grpcCounted[kind] = fresh.Tokens(time.Time{}) < m.grpcMax
	}
	return nil
}

// finite is a policy's retries, Unlimited made finite.
func finite(retries int) int {
	if retries == resil.Unlimited || retries > maxUnlimited {
		return maxUnlimited
	}
	return retries
}

// delays returns each retry's backoff, up to retries, as a distribution
// over whole steps: resil's Backoff.Delay at stratified draws. m.h and
// m.steps must be set.
func (m *Model) delays(b resil.Backoff, retries int) [][]point {
	var out [][]point
	var prev time.Duration
	for r := 1; r <= retries; r++ {
		var pts []point
		var sum time.Duration
		for i := range draws {
			d := b.Delay(r, prev, stratified{(float64(i) + 0.5) / draws})
			sum += d
			// Clamped past the run's end: a retry due then is never sent.
			steps := min(float64(m.steps+1), math.Round(d.Seconds()/m.h))
			pts = append(pts, point{steps: int(steps), weight: 1.0 / draws})
		}
		prev = sum / draws
		out = append(out, merge(pts))
	}
	return out
}

// merge adds up the weights of points on the same step.
func merge(pts []point) []point {
	var out []point
	for _, p := range pts {
		if n := len(out); n > 0 && out[n-1].steps == p.steps {
			out[n-1].weight += p.weight
			continue
		}
		out = append(out, p)
	}
	return out
}
