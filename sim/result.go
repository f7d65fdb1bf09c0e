package sim

import "github.com/retrystorm/retrystorm/resil"

// Result is one run of a scenario: every fleet's summary and per-tick
// series. Its JSON form is the contract in DESIGN.md; times are seconds.
type Result struct {
	Scenario    string        `json:"scenario"`
	Seed        uint64        `json:"seed"`
	TickSeconds float64       `json:"tick_seconds"`
	Trigger     *Window       `json:"trigger"`
	Fleets      []FleetResult `json:"fleets"`
	// Layers are, for a shared scenario (every fleet in one system), the
	// layers every fleet's calls load, outermost first, the origin last:
	// each layer's hop is the sum of its callers'. None otherwise: a
	// fleet's own layers are in its Tiers.
	Layers []TierResult `json:"layers,omitempty"`
}

// Window is a span of the run, in seconds from its start.
type Window struct {
	Start float64 `json:"start"`
	End   float64 `json:"end"`
}

// FleetResult is one fleet's run. Its summary and series are the fleet's
// calls to the first layer: the origin, or the first tier of a chain.
type FleetResult struct {
	Name    string  `json:"name"`
	Summary Summary `json:"summary"`
	Series  Series  `json:"series"`
	// Tiers are the layers of a chain, each tier and then the origin,
	// outermost first; none without tiers.
	Tiers []TierResult `json:"tiers,omitempty"`
	// Replicas is the ground truth per replica of the layer the fleet
	// calls (the origin, or a chain's first tier), when the fleet
	// balances or ejects, or (without tiers) the scenario names a replica;
	// none otherwise. A chain's other layers have theirs in Tiers.
	Replicas []ReplicaResult `json:"replicas,omitempty"`
	// NoHealthyReplica counts the attempts the fleet's picker found no
	// replica for (every one ejected, panic mode off), sent during the
	// run: they failed at once and reached no replica.
	NoHealthyReplica int64 `json:"no_healthy_replica,omitempty"`
	// Calls names the layer the fleet calls, in a shared scenario.
	Calls string `json:"calls,omitempty"`
	// Ended says where, and by which rule, a run with Options.EarlyExit
	// stopped early; nil for a run followed to its end.
	Ended *EarlyEnd `json:"ended_early,omitempty"`
}

// ReplicaResult is one replica of the origin as the fleet's attempts saw
// it. Attempts count those sent during the run; each ended as a success,
// a failure (an error, a rejection, a timeout, a refused connection), or
// cancelled when another attempt of its intent won, or was still out when
// the run ended.
type ReplicaResult struct {
	Replica   int   `json:"replica"`
	Attempts  int64 `json:"attempts"`
	Successes int64 `json:"successes"`
	Failures  int64 `json:"failures"`
	Cancelled int64 `json:"cancelled"`
	// Ejections counts the outlier detector's ejections of the replica;
	// EjectedSeconds is how long it was ejected, sampled at each tick's
	// end (to the tick).
	Ejections      int64   `json:"ejections"`
	EjectedSeconds float64 `json:"ejected_seconds"`
	// Series is the replica tick by tick, for the runs of at most
	// MaxReplicaSeries replicas (a plot of more is unreadable) and at most
	// 262,144 replica-ticks (its memory grows with replicas × ticks); nil
	// otherwise.
	Series *ReplicaSeries `json:"series,omitempty"`
}

// MaxReplicaSeries is the most replicas a run keeps series for.
const MaxReplicaSeries = 16

// ReplicaSeries is one replica's ground truth per tick: the attempts sent
// to it in the tick and how those ended (by the tick they were sent in,
// as Series counts failed attempts), and whether the outlier detector had
// it ejected at the tick's end (no Ejected without a detector).
type ReplicaSeries struct {
	Attempts  []int64 `json:"attempts"`
	Successes []int64 `json:"successes"`
	Failures  []int64 `json:"failures"`
	Ejected   []bool  `json:"ejected,omitempty"`
}

// TierResult is one layer of a chain (a tier, or the origin, called
// "origin") as the hop into it saw it: the load offered to it (attempts
// of its callers, the fleet's or the tier above's, by kind), its answers
// (successes, goodput, failures as the callers saw them), its queue, and
// its callers' calls (intents: the calls begun; lost: those that never
// succeeded) and breakers. The first layer's is the fleet's own. Its
// Summary's Ceiling is the fleet's, on the first layer only.
type TierResult struct {
	Name string `json:"name"`
	// Amplification is the attempts that reached the layer per intent of
	// the fleet.
	Amplification float64 `json:"amplification"`
	Summary       Summary `json:"summary"`
	Series        Series  `json:"series"`
	// Replicas is the layer's ground truth per replica, as its callers'
	// attempts saw it, when they balance or eject, or, at the origin, a
	// replica is named; NoHealthyReplica counts their attempts that found
	// no replica. The first layer's are the fleet's.
	Replicas         []ReplicaResult `json:"replicas,omitempty"`
	NoHealthyReplica int64           `json:"no_healthy_replica,omitempty"`
	// Cache is the layer's cache (a tier with cache: {...}); Pool, the
	// connection pools of the calls into the layer. Nil without.
	Cache *CacheResult `json:"cache,omitempty"`
	Pool  *PoolResult  `json:"pool,omitempty"`
}

// Summary is a fleet's run in numbers. Attempt counts cover attempts sent
// during the run (the series' sums); intent counts cover every intent that
// arrived during the run, followed to its end after the run if need be.
type Summary struct {
	Intents  int64 `json:"intents"`
	Attempts int64 `json:"attempts"`
	Retries  int64 `json:"retries"`
	Hedges   int64 `json:"hedges"`
	// Successes are attempts the origin answered with success, in time or
	// not; Goodput those whose caller still waited.
	Successes int64 `json:"successes"`
	Goodput   int64 `json:"goodput"`
	// Failures = FailedAttempts + BreakerRefusals + ThrottleRefusals.
	Failures        int64 `json:"failures"`
	FailedAttempts  int64 `json:"failed_attempts"`
	Timeouts        int64 `json:"timeouts"`
	BreakerRefusals int64 `json:"breaker_refusals"`
	// ThrottleRefusals are attempts the adaptive throttle refused, apart
	// from the breaker's; left out of the JSON when zero (a fleet without
	// a throttle), as the series of them.
	ThrottleRefusals int64 `json:"throttle_refusals,omitempty"`
	// InboundRetries are the retries the proxy beside each replica of the
	// layer called made on its own (an Istio server sidecar retrying a
	// refused connection to its application, scenario.Inbound): attempts
	// that reached the layer's application, apart from the callers' own.
	// Left out of the JSON when zero.
	InboundRetries int64 `json:"inbound_retries,omitempty"`
	// FailuresAfterClear are failures in the ticks after the trigger ended.
	FailuresAfterClear int64 `json:"failures_after_clear"`
	// Victims are intents that arrived after the trigger ended and still
	// saw a failure.
	Victims int64 `json:"victims"`
	// Recovered: from some tick after the trigger to the end of the run
	// (RecoveryTail ticks at least), every tick's failure share stayed
	// within a point of the baseline. Never for a fleet that was never
	// healthy (NeverHealthy).
	Recovered bool `json:"recovered"`
	// RecoveryTicks is nil when Recovered is false.
	RecoveryTicks *int `json:"recovery_ticks"`
	// NeverHealthy: the fleet failed more than UnhealthyBaseline of its
	// tries before the trigger, so it never was healthy and does not
	// recover; left out of the JSON when false.
	NeverHealthy bool `json:"never_healthy,omitempty"`
	// IntentsLost never succeeded; LostBy says why.
	IntentsLost int64  `json:"intents_lost"`
	LostBy      LostBy `json:"lost_by"`
	// Ceiling is the most offered load per tick the policy permits at the
	// base intent rate; nil when it has none (unlimited retries).
	Ceiling           *float64 `json:"ceiling"`
	PeakOffered       int64    `json:"peak_offered"`
	RetriesPerRequest float64  `json:"retries_per_request"`
	// AnswersThrownAway are attempts a breaker or the adaptive throttle
	// refused whose ground-truth outcome was success.
	AnswersThrownAway int64 `json:"answers_thrown_away"`
	// WastedWork is attempts the origin served after their client gave up.
	WastedWork int64 `json:"wasted_work"`
	// Dropped is attempts a drop_expired origin skipped.
	Dropped int64 `json:"dropped"`
	// BudgetDenials are retries and hedges the budget refused.
	BudgetDenials int64 `json:"budget_denials"`
	// BreakerTrips counts the times a client's breaker opened from
	// closed, over all clients.
	BreakerTrips int64 `json:"breaker_trips"`
	// Latency of the intents that succeeded, from arrival to answer, in
	// seconds.
	LatencyP50 float64 `json:"latency_p50"`
	LatencyP99 float64 `json:"latency_p99"`
	// BaselineErrorRate is the failure share before the trigger, against
	// which recovery is judged.
	BaselineErrorRate float64 `json:"baseline_error_rate"`
}

// LostBy splits IntentsLost by the reason the last attempt was not
// followed by another. Add files resil's reasons into these columns;
// Unfinished is for the intents the run ended before they did.
type LostBy struct {
	RetriesExhausted int64 `json:"retries_exhausted"`
	Budget           int64 `json:"budget"`
	Breaker          int64 `json:"breaker"`
	// Throttled is the intents the adaptive throttle refused last; left
	// out of the JSON when zero.
	Throttled     int64 `json:"throttled,omitempty"`
	NotIdempotent int64 `json:"not_idempotent"`
	Deadline      int64 `json:"deadline"`
	Unfinished    int64 `json:"unfinished"`
}

// Add counts one intent resil stopped for reason r (see resil.ReasonOf),
// the breaker's refusals and the throttle's apart:
// the reasons the dependency's answers gave (retries exhausted, an error
// not worth a retry, pushback) and a reason resil did not give (StopNone)
// are RetriesExhausted; the caller's time running out, or its cancelling,
// is Deadline. The simulator and the lab both count with it, so that a
// reason is filed in one column everywhere.
func (l *LostBy) Add(r resil.StopReason) {
	switch r {
	case resil.StopBudget:
		l.Budget++
	case resil.StopBreaker:
		l.Breaker++
	case resil.StopThrottled:
		l.Throttled++
	case resil.StopNotIdempotent:
		l.NotIdempotent++
	case resil.StopDeadline, resil.StopCanceled:
		l.Deadline++
	default:
		l.RetriesExhausted++
	}
}

// Series holds per-tick arrays, all of the same length. Attempt counts are
// attributed to the tick the attempt was sent in; breaker refusals and
// intents to the tick they happened in; Queue and BreakerOpen are sampled at
// the end of each tick.
type Series struct {
	Tick            []int   `json:"tick"`
	Intents         []int64 `json:"intents"`
	Offered         []int64 `json:"offered"`
	FirstAttempts   []int64 `json:"first_attempts"`
	Retries         []int64 `json:"retries"`
	Hedges          []int64 `json:"hedges"`
	Successes       []int64 `json:"successes"`
	Goodput         []int64 `json:"goodput"`
	Failures        []int64 `json:"failures"`
	FailedAttempts  []int64 `json:"failed_attempts"`
	BreakerRefusals []int64 `json:"breaker_refusals"`
	// ThrottleRefusals is nil, and left out of the JSON, when the run had
	// none.
	ThrottleRefusals  []int64   `json:"throttle_refusals,omitempty"`
	ErrorRate         []float64 `json:"error_rate"`
	RetriesPerRequest []float64 `json:"retries_per_request"`
	Queue             []int64   `json:"queue"`
	BreakerOpen       []float64 `json:"breaker_open"`
}

func newSeries(n int) Series {
	s := Series{
		Tick:              make([]int, n),
		Intents:           make([]int64, n),
		Offered:           make([]int64, n),
		FirstAttempts:     make([]int64, n),
		Retries:           make([]int64, n),
		Hedges:            make([]int64, n),
		Successes:         make([]int64, n),
		Goodput:           make([]int64, n),
		Failures:          make([]int64, n),
		FailedAttempts:    make([]int64, n),
		BreakerRefusals:   make([]int64, n),
		ThrottleRefusals:  make([]int64, n),
		ErrorRate:         make([]float64, n),
		RetriesPerRequest: make([]float64, n),
		Queue:             make([]int64, n),
		BreakerOpen:       make([]float64, n),
	}
	for i := range s.Tick {
		s.Tick[i] = i
	}
	return s
}
