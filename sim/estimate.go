package sim

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"
	"unsafe"

	"github.com/retrystorm/retrystorm/resil"
	"github.com/retrystorm/retrystorm/resil/admission"
	"github.com/retrystorm/retrystorm/resil/budget"
	"github.com/retrystorm/retrystorm/scenario"
)

// Cost is what running a scenario will take, estimated from the scenario
// alone before anything is allocated: a small file can ask for a run that
// would not fit in memory (ten thousand fleets of a hundred thousand ticks,
// a million clients with a breaker window of a million calls each) or that
// would take days (a million intents a second for a month, unlimited
// retries followed for an hour each). Both figures are upper bounds of the
// simulator's own work, not predictions: a run usually costs less.
type Cost struct {
	// Memory is the bytes the run holds at its peak, about: every fleet's
	// per-tick series (and what the report and the JSON make of them),
	// its clients' policies (budgets, breakers, count windows), and the
	// intents and attempts in flight or queued at the origin.
	Memory int64
	// Attempts is the most attempts the run can simulate: intents times
	// the attempts the policy allows each (retries, hedges), capped by
	// the budget's share and floor, or by how often an intent can retry
	// in the time it is followed; and the pickers' work, in attempts'
	// worth: a least-request picker looks at every replica on every
	// attempt, ScanShare of an attempt each (over 10,000 replicas, some
	// 50 attempts a pick), where the others look at two at most.
	Attempts float64
}

// Limits bounds what a run may cost. A zero field means DefaultLimits'
// (so the zero Limits bound memory to 2 GiB); math.MaxInt64 and +Inf mean
// no bound.
type Limits struct {
	// Memory is the most bytes Cost.Memory may be.
	Memory int64
	// Attempts is the most simulated attempts Cost.Attempts may be.
	Attempts float64
}

// DefaultLimits are the bounds Run applies: 2 GiB of memory, which a
// laptop has to spare, and no bound on the work (Run reports progress and
// stops with its context; a command line decides how long is too long).
var DefaultLimits = Limits{Memory: 2 << 30}

// AttemptsPerSecond is about how many attempts the simulator plays a
// second on one core (BENCHMARKS.md: 2.6 to 2.8 million on a shared cloud
// VM), to turn Cost.Attempts into an expected time.
const AttemptsPerSecond = 2.5e6

// ScanShare is what looking at one replica costs a least-request pick,
// in simulated attempts: about 1.9 ns a replica (a run of 60,000 attempts
// over 10,000 replicas took 1.18 s with least_request and 0.07 s with
// round_robin; BENCHMARKS.md), against 1/AttemptsPerSecond (400 ns) an
// attempt.
const ScanShare = 1.9e-9 * AttemptsPerSecond

// scans is the work, in attempts' worth, of the picks of attempts
// attempts by b among hosts replicas: a least-request pick looks at every
// one.
func scans(b scenario.Balancer, attempts float64, hosts int) float64 {
	if b.Use != scenario.BalancerLeastRequest {
		return 0
	}
	return attempts * float64(max(hosts, 1)) * ScanShare
}

// Time is how long the run takes at AttemptsPerSecond on one core, if it
// costs all of Attempts.
func (c Cost) Time() time.Duration {
	s := c.Attempts / AttemptsPerSecond
	if !(s < float64(math.MaxInt64/int64(time.Second))) {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(s * float64(time.Second))
}

// ErrTooCostly is what CostError wraps: a run that would not fit the
// limits.
var ErrTooCostly = errors.New("sim: the run would cost more than allowed")

// CostError refuses a run: it says what it would cost and what the limit
// is, so that the user can shrink the scenario or raise the limit.
type CostError struct {
	Scenario string
	Cost     Cost
	Limits   Limits
	// Memory is true when the memory is over the limit, false when the
	// work is.
	Memory bool
}

func (e *CostError) Error() string {
	if e.Memory {
		return fmt.Sprintf("scenario %s would need about %s of memory, more than the limit of %s: use fewer fleets, ticks (a longer tick), clients or a smaller breaker window, or raise the limit",
			e.Scenario, Bytes(e.Cost.Memory), Bytes(e.Limits.Memory))
	}
	return fmt.Sprintf("scenario %s may simulate up to %.3g attempts, about %s of work at %.3g attempts/s, more than the limit of %.3g: shorten it, lower the rate or bound the retries, or allow a long run",
		e.Scenario, e.Cost.Attempts, roundTime(e.Cost.Time()), float64(AttemptsPerSecond), e.Limits.Attempts)
}

func (e *CostError) Unwrap() error { return ErrTooCostly }

// Check returns a *CostError if c exceeds l, or nil.
func (c Cost) Check(name string, l Limits) error {
	if l.Memory == 0 {
		l.Memory = DefaultLimits.Memory
	}
	if l.Attempts == 0 {
		l.Attempts = DefaultLimits.Attempts
	}
	switch {
	case l.Memory > 0 && c.Memory > l.Memory:
		return &CostError{Scenario: name, Cost: c, Limits: l, Memory: true}
	case l.Attempts > 0 && c.Attempts > l.Attempts:
		return &CostError{Scenario: name, Cost: c, Limits: l}
	}
	return nil
}

// Bytes writes n in binary units: "2 GiB", "941 GiB", "12.5 MiB".
func Bytes(n int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	f, i := float64(n), 0
	for f >= 1024 && i < len(units)-1 {
		f /= 1024
		i++
	}
	if f == math.Trunc(f) || f >= 100 {
		return fmt.Sprintf("%.0f %s", f, units[i])
	}
	return fmt.Sprintf("%.3g %s", f, units[i])
}

func roundTime(d time.Duration) string {
	switch {
	case d >= 48*time.Hour:
		return fmt.Sprintf("%.1f days", d.Hours()/24)
	case d >= time.Hour:
		return fmt.Sprintf("%.1f hours", d.Hours())
	case d >= time.Minute:
		return fmt.Sprintf("%.0f minutes", d.Minutes())
	}
	return d.Round(time.Second).String()
}

// Sizes of what a run holds, in bytes.
const (
	// tickBytes is one fleet's tick: the 15 series and the counters the
	// run keeps (192 bytes), and about twice that again for what the
	// report's charts and the JSON make of them.
	tickBytes = 640
	// attemptBytes is an attempt in flight: its slot, its request at the
	// origin, and its events. requestBytes is a request the origin holds
	// after its client left (a queue's backlog): its slot and its place
	// in the queue. intentBytes is an intent's slot. Each has 8 more for
	// its place in a free list.
	attemptBytes = int64(unsafe.Sizeof(attempt{})) + requestBytes + 2*int64(unsafe.Sizeof(event{})) + 8
	requestBytes = int64(unsafe.Sizeof(request{})) + 4 + 8
	intentBytes  = int64(unsafe.Sizeof(intent{})) + 8
	treqBytes    = int64(unsafe.Sizeof(treq{})) + 4
)

// policyBytes is a client's Policy and the structs of its budget and
// breaker, at their largest (a window budget, a breaker with a time
// window), with their allocation headers; a count window adds its window
// size, and a throttle throttleBytes (its window and its random source).
var (
	policyBytes   = int64(unsafe.Sizeof(resil.Policy{}) + unsafe.Sizeof(*new(budget.Window)) + unsafe.Sizeof(*new(resil.Breaker)) + 2*16)
	throttleBytes = int64(unsafe.Sizeof(*new(resil.Throttler)) + unsafe.Sizeof(rand.PCG{}) + 2*16)
)

// The origin's own memory: a place in resil's wait queue (a request
// number and the time it came), taken up front for the whole queue, and
// an admission ticket per request a limit holds.
const (
	waitQueueBytes = 32
	ticketBytes    = int64(unsafe.Sizeof(admission.ShedTicket{}))
)

// Estimate returns what running sc will cost at most. It reads the
// scenario only; sc need not be valid (what Validate would refuse still
// gets a finite estimate).
func Estimate(sc *scenario.Scenario) Cost {
	if sc.System() {
		return estimateSystem(sc) // sysestimate.go
	}
	var c Cost
	ticks := int64(1)
	if sc.Tick > 0 {
		ticks = max(1, int64((sc.Duration+sc.Tick-1)/sc.Tick))
	}
	intents, peakRate := intentsOf(sc)
	// Each fleet holds the schedule of conditions: one env per trigger
	// boundary and per tick a rate series changes the rate.
	envs := int64(1 + 2*len(sc.Triggers) + len(sc.Traffic.RateChanges(sc.Tick, sc.Duration)))
	schedBytes := satMul(envs, int64(unsafe.Sizeof(env{}))+8)
	// A chain's tiers: each replica holds a policy, each hop its ticks.
	tiers := make([]scenario.Fleet, len(sc.Tiers))
	var tierMem int64
	for l := range sc.Tiers {
		tiers[l] = sc.Tiers[l].Client.Fleet(sc.Tiers[l].Name)
		replicas := int64(max(sc.Tiers[l].Server.Replicas, 1))
		tierMem = satAdd(tierMem, satMul(replicas, perClientBytes(&tiers[l])+replicaStateBytes(&tiers[l], layerReplicas(sc, l+1)))+satMul(ticks, tickBytes))
	}
	for i := range sc.Fleets {
		f := &sc.Fleets[i]
		perIntent, lifetime := attemptsPerIntent(sc, f, layerServer(sc, 0))
		attempts := intents * perIntent
		if share, floor, ok := budgetShare(f, sc.Duration+lifetime); ok {
			clients := float64(max(sc.Traffic.Clients, 1))
			attempts = min(attempts, intents*(1+share)+clients*floor)
		}
		c.Attempts += attempts + scans(f.Balancer, attempts, layerServer(sc, 0).Replicas)
		// The hops of the chain below: each attempt that reaches tier l
		// may become a call of its own, which may send as many attempts
		// as its policy allows to the layer below. Calls live no longer
		// than the call above them, and hold their attempts and
		// requests.
		chainHeld, above := 0.0, attempts
		for l := range tiers {
			per, life := attemptsPerIntent(sc, &tiers[l], layerServer(sc, l+1))
			below := above * per
			if share, floor, ok := budgetShare(&tiers[l], sc.Duration+life); ok {
				below = min(below, above*(1+share)+float64(max(sc.Tiers[l].Server.Replicas, 1))*floor)
			}
			c.Attempts += below + scans(sc.Tiers[l].Client.Balancer, below, layerServer(sc, l+1).Replicas)
			if intents > 0 {
				chainHeld += min(below, peakRate*lifetime.Seconds()*(above+below)/intents)
			}
			above = below
		}

		clients := int64(max(sc.Traffic.Clients, 1))
		mem := satAdd(satMul(ticks, tickBytes)+satMul(clients, perClientBytes(f)+replicaStateBytes(f, layerReplicas(sc, 0))), schedBytes)
		mem = satAdd(mem, satAdd(tierMem, toBytes(chainHeld, attemptBytes+intentBytes+treqBytes)))
		// Intents live at most their lifetime, each with an attempt out
		// and its hedges, unless a queue keeps attempts after their
		// client left (ghosts are served, and hold their slot, later).
		inflight := min(intents, peakRate*lifetime.Seconds())
		out := 1.0
		if f.Hedge.Delay > 0 {
			out += float64(max(f.Hedge.Max, 1))
		}
		held := min(attempts, inflight*out)
		o := &sc.Origin
		backlog := 0.0
		if o.Model == scenario.ModelQueue && !o.DropExpired && !o.Shed.Deadline {
			perOrigin := perIntent // attempts at the origin per intent
			if len(tiers) > 0 && intents > 0 {
				perOrigin = above / intents
			}
			backlog = max(0, peakRate*perOrigin-o.Capacity) * sc.Duration.Seconds()
			if o.QueueLimit > 0 {
				backlog = min(backlog, float64(o.QueueLimit))
			}
			backlog = min(backlog, attempts-held)
		}
		mem = satAdd(mem, satAdd(toBytes(inflight, intentBytes), toBytes(held, attemptBytes)))
		mem = satAdd(mem, toBytes(backlog, requestBytes))
		if o.Model == scenario.ModelQueue && (o.MaxQueueTime > 0 || o.Discipline == "adaptive_lifo") {
			mem = satAdd(mem, satMul(int64(max(o.QueueLimit, 0))+int64(max(o.Replicas, 1)), waitQueueBytes))
		}
		if o.Limit.Use != "" && o.Limit.Use != scenario.LimitNone {
			// An admission ticket per request slot, waiting or out.
			mem = satAdd(mem, toBytes(held+backlog, ticketBytes))
		}
		c.Memory = satAdd(c.Memory, mem)
	}
	return c
}

// replicaStateBytes is what one client instance of f holds to pick among
// and eject n replicas: its picker and its detector, each with a record per
// replica (counts, times, estimates), when it has either.
func replicaStateBytes(f *scenario.Fleet, n int) int64 {
	if f.Balancer.Use == "" && !f.OutlierDetection.Detects() {
		return 0
	}
	const fixed, perReplica = 1 << 10, 192
	return satAdd(fixed, satMul(int64(n), perReplica))
}

// layerReplicas is how many replicas the hop into layer l calls: the
// tier's server's, or the origin's.
func layerReplicas(sc *scenario.Scenario, l int) int {
	if l < len(sc.Tiers) {
		return max(sc.Tiers[l].Server.Replicas, 1)
	}
	return max(sc.Origin.Replicas, 1)
}

// perClientBytes is what one client of f holds: its policy, its breaker's
// count window, and its throttle.
func perClientBytes(f *scenario.Fleet) int64 {
	b := policyBytes
	if f.Breaker.Use == scenario.BreakerCountWindow {
		b += int64(max(f.Breaker.WindowSize, 0))
	}
	if f.Throttle.Use == scenario.ThrottleAdaptive {
		b += throttleBytes
	}
	return b
}

// layerServer is the server of layer l of sc's chain: tier l's, or the
// origin past the last tier.
func layerServer(sc *scenario.Scenario, l int) *scenario.Origin {
	if l < len(sc.Tiers) {
		return &sc.Tiers[l].Server
	}
	return &sc.Origin
}

// intentsOf returns the intents the run starts, by its rate and the load
// triggers, and the highest rate.
func intentsOf(sc *scenario.Scenario) (total, peak float64) {
	if sc.Duration <= 0 {
		return 0, 0
	}
	s := buildSchedule(sc, max(sc.Origin.Replicas, 1))
	for i, at := range s.at {
		if at >= int64(sc.Duration) {
			break
		}
		end := int64(sc.Duration)
		if i+1 < len(s.at) {
			end = min(end, s.at[i+1])
		}
		r := max(s.envs[i].rate, 0)
		total += r*float64(end-at)/1e9 + 1
		peak = max(peak, r)
	}
	if sc.Traffic.Arrivals == "poisson" {
		// Poisson arrivals vary: ten standard deviations above the mean
		// is never reached in practice.
		total += 10*math.Sqrt(total) + 10
	}
	return total, peak
}

// attemptsPerIntent returns the most attempts one intent of fleet f (or
// one call of a tier's client) can send to the server o, and how long it
// can live.
func attemptsPerIntent(sc *scenario.Scenario, f *scenario.Fleet, o *scenario.Origin) (float64, time.Duration) {
	follow := sc.Duration + time.Duration(drainLimit)
	if f.Deadline > 0 {
		follow = min(follow, f.Deadline)
	}
	retries := math.Inf(1)
	if f.Retry.MaxRetries >= 0 {
		retries = float64(f.Retry.MaxRetries)
	}
	n := min(1+retries, attemptsIn(f, quickest(o, f), follow))
	if f.Hedge.Delay > 0 {
		n += n * float64(max(f.Hedge.Max, 1)) // every attempt may be hedged
	}
	// It lives until its last attempt times out and its last backoff
	// ends, at most as long as it is followed.
	life := follow
	if !math.IsInf(retries, 1) {
		longest := f.Timeout + max(f.Retry.Backoff.Cap, f.Retry.Backoff.Base)
		life = time.Duration(min(float64(follow), (1+retries)*float64(longest)))
	}
	return n, life
}

// quickest is the soonest an attempt of fleet f to server o can end: an
// overload rejection (from a capacity model, or a bounded queue), an error
// after the server's least latency, or the fleet's timeout. A service time
// drawn from a distribution may be as short as the draw makes it, near
// nothing: its least is not the mean.
func quickest(o *scenario.Origin, f *scenario.Fleet) time.Duration {
	q := f.Timeout
	if !o.ServiceTime.IsFixed() {
		return time.Nanosecond
	}
	switch o.Model {
	case scenario.ModelCapacity:
		q = min(q, time.Duration(rejectDelay), o.Latency)
	case scenario.ModelQueue:
		if o.Capacity > 0 && o.Workers > 0 {
			q = min(q, time.Duration(float64(o.Workers)/o.Capacity*float64(time.Second)))
		}
		if o.QueueLimit > 0 {
			q = min(q, time.Duration(rejectDelay))
		}
	case scenario.ModelConcurrency:
		q = min(q, o.Base)
	}
	return max(q, time.Nanosecond)
}

// attemptsIn returns how many attempts an intent can fit into follow if
// each ends as soon as it can and every backoff is its shortest, as resil
// draws it.
func attemptsIn(f *scenario.Fleet, quickest, follow time.Duration) float64 {
	g := *f // its backoff alone: a budget or a breaker changes no delay
	g.Budget, g.Breaker, g.Hedge = scenario.Budget{Use: scenario.BudgetNone}, scenario.Breaker{}, scenario.Hedge{}
	p, err := g.NewPolicy()
	if err != nil {
		return 1 + follow.Seconds()/quickest.Seconds()
	}
	b := p.Backoff
	least := 1.0 // of the schedule's delay
	switch b.Jitter {
	case resil.FullJitter:
		least = 0
	case resil.EqualJitter:
		least = 0.5
	case resil.FactorJitter:
		least = 1 - b.Factor
	}
	sched := b
	sched.Jitter = resil.NoJitter
	n, t, gap := 1.0, time.Duration(0), quickest
	for i := 1; i <= 10_000; i++ {
		d := time.Duration(least * float64(sched.Delay(i, 0, nil)))
		if b.Jitter == resil.DecorrelatedJitter {
			d = b.Base
		}
		if i > 1 && quickest+d == gap {
			break // the delay stopped growing
		}
		gap = quickest + d
		if t += gap; t > follow {
			return n
		}
		n++
	}
	// The delays have reached their cap: the rest come at the same pace.
	return n + (follow-t).Seconds()/gap.Seconds()
}

// budgetShare returns the share of intents a fleet's budget lets retry
// (and hedge), and the retries each client may send whatever the traffic
// while any intent lives, d (the run and the longest life of an intent
// after it), or false for no budget.
func budgetShare(f *scenario.Fleet, d time.Duration) (share, floor float64, ok bool) {
	b := f.Budget
	switch b.Use {
	case scenario.BudgetTokenBucket:
		tb := b.TokenBucket
		cost := max(tb.RetryCost, 1e-6)
		return tb.Ratio / cost, tb.MinTokens / cost, true
	case scenario.BudgetWindow:
		// The floor renews as the window moves: over a run it adds up.
		w := b.Window
		cost := max(w.RetryCost, 1e-6)
		return w.Ratio / cost, w.MinRetriesPerSecond * d.Seconds() / cost, true
	case scenario.BudgetAWS, scenario.BudgetAWSAdaptive:
		q := b.AWS
		c := float64(max(q.RetryCost, 1))
		return float64(max(q.NoRetryIncrement, 1)) / c, float64(max(q.Capacity, 0)) / c, true
	case scenario.BudgetGRPC:
		// Retries go while the bucket is over half full; each failure
		// takes a token and each success gives TokenRatio back.
		return b.GRPC.TokenRatio, b.GRPC.MaxTokens / 2, true
	}
	// BudgetConcurrency caps retries in flight, not a share of traffic:
	// the retry count bounds the work.
	return 0, 0, false
}

func satMul(a, b int64) int64 {
	if a > 0 && b > math.MaxInt64/a {
		return math.MaxInt64
	}
	return a * b
}

func toBytes(n float64, size int64) int64 {
	b := n * float64(size)
	if !(b < math.MaxInt64) {
		return math.MaxInt64
	}
	return int64(b)
}
