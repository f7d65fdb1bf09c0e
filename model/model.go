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
	funding resil.Funding
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
	o := sc.Origin
	m.timeout = f.Timeout.Seconds()
	m.clients = float64(max(sc.Traffic.Clients, 1))
	m.rate = sc.Traffic.Rate
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
	// The step: at most a tenth of the shortest timeout (the fleet's or a
	// tier's) and 100ms, so that a timeout is ten steps or more, and a
	// whole fraction of the tick. A step of 50ms gave the same agreement
	// with the simulator at twice the cost (docs/model.md).
	shortest := m.timeout
	for _, t := range sc.Tiers {
		shortest = min(shortest, t.Client.Timeout.Seconds())
	}
	tick := sc.Tick.Seconds()
	m.perTick = max(1, int(math.Ceil(tick/min(0.1, shortest/10))))
	m.h = tick / float64(m.perTick)
	m.steps = int(math.Ceil(sc.Duration.Seconds()/tick)) * m.perTick

	m.maxRetries = finite(pol.MaxRetries)
	attempts := float64(m.maxRetries + 1)
	for _, t := range sc.Tiers {
		attempts += float64(finite(t.Client.Retry.MaxRetries) + 1)
	}
	if cells := float64(m.steps) * attempts * (nKinds + 5); cells > maxCells {
		return nil, fmt.Errorf("model: scenario %s would need %d steps of %v for %d attempt numbers, %w (%.0g numbers): shorten the run or lengthen the tick or the timeout",
			sc.Name, m.steps, time.Duration(m.h*float64(time.Second)), m.maxRetries+1, ErrTooLarge, float64(maxCells))
	}
	m.retryShare = 1
	if f.Retry.IdempotentOnly {
		m.retryShare = sc.Traffic.Idempotent + (1-sc.Traffic.Idempotent)*sc.Traffic.Keys
	}
	for k, word := range [nKinds]string{scenario.RetryOnError, scenario.RetryOnRejection, scenario.RetryOnTimeout, scenario.RetryOnRefused} {
		m.retryOn[k] = f.Retry.Retries(word)
	}
	m.delay = m.delays(pol.Backoff, m.maxRetries)
	for _, t := range sc.Tiers {
		p, err := t.NewPolicy()
		if err != nil {
			return nil, err
		}
		hop := tierHop{work: t.Server.Base.Seconds(), timeout: t.Client.Timeout.Seconds(), maxRetries: finite(p.MaxRetries)}
		for k, word := range [nKinds]string{scenario.RetryOnError, scenario.RetryOnRejection, scenario.RetryOnTimeout, scenario.RetryOnRefused} {
			hop.retryOn[k] = t.Client.Retry.Retries(word)
		}
		hop.delay = m.delays(p.Backoff, hop.maxRetries)
		m.tiers = append(m.tiers, hop)
	}

	if b, ok := pol.Budget.(*resil.TokenBucket); ok {
		m.budget = true
		m.ratio = f.Budget.Ratio
		if m.funding, err = funding(f.Budget.Funding); err != nil {
			return nil, err
		}
		// The bucket's defaults, read from a fresh bucket of resil's: it
		// starts at MinTokens, fills to MaxTokens, and Withdraw says what
		// a retry costs after a failure and after a timeout.
		now := time.Time{}
		m.minTok = b.Tokens(now)
		b.Refund(now, math.MaxFloat64)
		m.maxTok = b.Tokens(now)
		m.cost, _ = b.Withdraw(now, resil.OutcomeFailure)
		b.Refund(now, math.MaxFloat64)
		m.costTO, _ = b.Withdraw(now, resil.OutcomeTimeout)
	}
	if g, ok := pol.Budget.(*resil.GRPCThrottle); ok {
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
				return nil, err
			}
			fresh := p.Budget.(*resil.GRPCThrottle)
			fresh.Record(time.Time{}, o, 0)
			m.grpcCounted[kind] = fresh.Tokens(time.Time{}) < m.grpcMax
		}
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

// funding reads a token bucket's funded_by with resil's words.
func funding(word string) (resil.Funding, error) {
	f := resil.FundedBySuccess
	if word == "" {
		return f, nil
	}
	err := f.UnmarshalText([]byte(word))
	return f, err
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

// supportedTiers returns an *UnsupportedError for the first feature of
// sc's tiers the model does not describe. It follows a chain whose tiers
// queue nothing (the concurrency model with a fixed latency: a held worker
// costs no one a wait) and call the next layer with retries, backoff and a
// timeout; what a tier decides beyond that is a second control loop per
// hop the model does not follow.
func supportedTiers(sc *scenario.Scenario, f scenario.Fleet) error {
	if len(sc.Tiers) == 0 {
		return nil
	}
	if f.Breaker.Use != "" && f.Breaker.Use != scenario.BreakerNone {
		return unsupported("breaker (with tiers)", "a breaker's trial call is answered by the chain, whose state the model does not sum up for it")
	}
	for i, t := range sc.Tiers {
		at := func(key string) string { return fmt.Sprintf("tiers[%d] (%s): %s", i, t.Name, key) }
		srv, cl := t.Server, t.Client
		switch {
		case srv.Model != scenario.ModelConcurrency:
			return unsupported(at("server.model: "+srv.Model), "a tier holds its worker while it calls the next layer: a queue or a capacity there is a second queue, filled by the tier's own retries, the model does not describe")
		case srv.PerInflight > 0:
			return unsupported(at("server.per_inflight"), "a tier's latency that grows with its requests in flight, held by calls downstream, is not modelled")
		case srv.Limit.Use != "" && srv.Limit.Use != scenario.LimitNone:
			return unsupported(at("server.limit: "+srv.Limit.Use), "a concurrency limit at a tier is not modelled")
		case srv.Replicas > 1:
			return unsupported(at("server.replicas"), "a tier's replicas, each with its own policy, are not modelled")
		case len(srv.Faults) > 0:
			return unsupported(at("server.faults"), "a tier replica that misbehaves is not modelled")
		case srv.ErrorRate > 0 || srv.Broken > 0:
			return unsupported(at("server.error_rate"), "a tier's own errors are not modelled")
		case srv.Shed.Deadline || srv.Shed.ServiceTime > 0 || srv.Shed.Reserve > 0:
			return unsupported(at("server.shed"), "shedding at a tier is not modelled")
		case !srv.ServiceTime.IsFixed():
			return unsupported(at("server.service_time: "+srv.ServiceTime.Dist), "a tier's work is its fixed base latency in the model")
		case cl.Deadline > 0:
			return unsupported(at("client.deadline"), "a per-request deadline at a tier is not modelled")
		case cl.PropagateDeadline:
			return unsupported(at("client.propagate_deadline"), "cancelling the calls of a caller that left is not modelled: the model's tiers work on for nobody")
		case cl.Budget.Use != "" && cl.Budget.Use != scenario.BudgetNone:
			return unsupported(at("client.budget: "+cl.Budget.Use), "a tier's retry budget is a second budget, per hop, the model does not follow")
		case cl.Breaker.Use != "" && cl.Breaker.Use != scenario.BreakerNone:
			return unsupported(at("client.breaker: "+cl.Breaker.Use), "a tier's breaker is not modelled")
		case cl.Hedge.Delay > 0:
			return unsupported(at("client.hedge"), "hedged attempts race their originals; the model follows one attempt at a time")
		case cl.Retry.IdempotentOnly:
			return unsupported(at("client.retry.idempotent_only"), "a tier's share of retryable calls is not modelled")
		case cl.Retry.Backoff.Jitter == "decorrelated":
			return unsupported(at("client.retry.backoff.jitter: decorrelated"), "each delay depends on the one drawn before it")
		case cl.OutlierDetection.Use != "" && cl.OutlierDetection.Use != scenario.OutlierNone:
			return unsupported(at("client.outlier_detection: "+cl.OutlierDetection.Use), "ejecting a replica is a decision about one server of several; the model has one")
		}
	}
	return nil
}

// supported returns an *UnsupportedError for the first feature of sc or f
// the model does not describe.
func supported(sc *scenario.Scenario, f scenario.Fleet) error {
	o := sc.Origin
	switch {
	case o.Model != scenario.ModelQueue && o.Model != scenario.ModelCapacity && o.Model != scenario.ModelConcurrency:
		return unsupported("origin.model", fmt.Sprintf("unknown model %q", o.Model))
	case o.Replicas > 1:
		return unsupported("origin.replicas", "random spreading over separate queues is not one queue of the summed capacity")
	case len(o.Faults) > 0:
		return unsupported("origin.replicas.faults", "a replica that misbehaves for the whole run is a second server the model does not describe")
	case !o.ServiceTime.IsFixed():
		return unsupported("origin.service_time: "+o.ServiceTime.Dist, "the fluid model serves every request in the mean time; a spread of service times lengthens waits, and so timeouts, by more than the mean says")
	case f.OutlierDetection.Use != "" && f.OutlierDetection.Use != scenario.OutlierNone:
		return unsupported("outlier_detection: "+f.OutlierDetection.Use, "ejecting a replica is a decision about one server of several; the model has one")
	case o.Discipline != "" && o.Discipline != "fifo":
		return unsupported("origin.discipline: "+o.Discipline, "the model's backlog is first in, first out")
	case o.MaxQueueTime > 0:
		return unsupported("origin.max_queue_time", "a bounded wait is not modelled")
	case o.Limit.Use != "" && o.Limit.Use != scenario.LimitNone:
		return unsupported("origin.limit: "+o.Limit.Use, "a concurrency limit that learns from latency is a control loop the model does not follow")
	case o.Shed.ServiceTime > 0 || o.Shed.Reserve > 0:
		return unsupported("origin.shed", "only deadline shedding by the service time as it stands, with no reserve, is modelled")
	case o.Broken > 0:
		return unsupported("origin.broken", "a broken share of keys fails every attempt of some intents: a second population the model does not follow")
	case sc.Traffic.Series != nil:
		return unsupported("traffic.series", "the model takes a constant rate and load triggers")
	case sc.Traffic.Ramp.For > 0:
		return unsupported("traffic.ramp", "the model takes a constant rate and load triggers")
	case sc.System():
		return unsupported("a system: caches, pools, shared fleets, closed loops, flushes or partitions", "the model follows one fleet's retries against one server")
	case !o.LoadLatency.Flat():
		return unsupported("origin.load_latency", "a service time that grows with the load makes the capacity a function of the backlog the model does not follow")
	case f.Hedge.Delay > 0:
		return unsupported("hedge", "hedged attempts race their originals; the model follows one attempt at a time")
	case f.Deadline > 0:
		return unsupported("deadline", "a per-intent deadline is not modelled")
	case f.Budget.Use != "" && f.Budget.Use != scenario.BudgetNone && f.Budget.Use != scenario.BudgetTokenBucket && f.Budget.Use != scenario.BudgetGRPC:
		return unsupported("budget: "+f.Budget.Use, "only the token bucket and gRPC's throttle are modelled")
	case f.Budget.Use == scenario.BudgetTokenBucket && f.Budget.Funding == "answer":
		return unsupported("budget.funded_by: answer", "only success and request funding are modelled")
	case f.Breaker.Use == scenario.BreakerTimeWindow || f.Breaker.Use == scenario.BreakerCountWindow:
		if f.Breaker.SlowCallRate > 0 {
			return unsupported("breaker.slow_call_rate", "the model does not follow latencies")
		}
	}
	if f.Retry.Backoff.Jitter == "decorrelated" {
		return unsupported("backoff.jitter: decorrelated", "each delay depends on the one drawn before it")
	}
	if err := supportedTiers(sc, f); err != nil {
		return err
	}
	for _, t := range sc.Triggers {
		if o.Model == scenario.ModelConcurrency && t.Kind == scenario.TriggerOutage && t.Mode == scenario.OutageStall {
			return unsupported("triggers: a stall of the concurrency model", "the simulator holds every answer due in a stall to its end; the model does not follow that for the concurrency model")
		}
		if t.Replica != nil {
			return unsupported("triggers: "+t.Kind+" on one replica", "the model has one server")
		}
		switch t.Kind {
		case scenario.TriggerCapacity, scenario.TriggerErrors, scenario.TriggerOutage, scenario.TriggerLoad:
		case scenario.TriggerLatency:
			if t.Replicas != 0 {
				return unsupported("triggers: latency on some replicas", "the model has one server")
			}
		default:
			return unsupported("triggers: "+t.Kind, "unknown trigger")
		}
	}
	return nil
}
