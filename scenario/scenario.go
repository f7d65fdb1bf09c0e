// Package scenario is retrystorm's scenario file: the traffic, the origin,
// the triggers and the fleets of one run, read from strict YAML.
//
// Durations are Go duration strings ("30s", "100ms"); rates are per second;
// shares are in [0, 1]. The file format, with every field, its unit and its
// default, is documented in docs/scenario.md.
package scenario

import (
	"math"
	"slices"
	"time"
)

// Scenario is one run: the same traffic, origin and triggers for every
// fleet, each fleet on its own copy of the origin.
type Scenario struct {
	Name     string        // default: the file's base name, without extension
	Seed     uint64        // default 1
	Duration time.Duration // virtual time the run covers; required
	Tick     time.Duration // reporting interval; default 1s
	// Shared runs every fleet against one system (one origin, one chain
	// of tiers and caches), each fleet with its own traffic; false (the
	// default) gives each fleet its own copy of the whole scenario
	// (shared.go).
	Shared  bool
	Traffic Traffic
	Origin  Origin
	// Tiers are the services between the fleets and the origin,
	// outermost first: the fleets call the first, each calls the next,
	// the last calls the origin. None: the fleets call the origin.
	Tiers    []Tier
	Triggers []Trigger
	Fleets   []Fleet
}

// Traffic is the open-loop stream of intents.
type Traffic struct {
	// Rate is intents per second, > 0; required unless Series is set,
	// when it is the series' peak (Parse sets it, Validate checks it):
	// what the estimates and the ceiling go by.
	Rate float64
	// Series, when set, gives the rate tick by tick, from a CSV file.
	Series   *Series
	Arrivals string // "constant" (default) or "poisson"
	Clients  int    // clients the intents are spread over, round robin; default 1
	// Idempotent is the share of intents that are idempotent; default 1.
	Idempotent float64
	// Keys is the share of non-idempotent intents that carry an
	// idempotency key (and so may be retried); default 0.
	Keys float64
	// Think is a closed-loop client's wait between the end of one intent
	// and the start of its next (arrivals: closed), and ThinkDist how it
	// is drawn; Ramp changes an open loop's rate linearly over a span
	// (arrivals.go).
	Think     time.Duration
	ThinkDist string
	Ramp      Ramp
}

// Origin models.
const (
	ModelCapacity    = "capacity"
	ModelQueue       = "queue"
	ModelConcurrency = "concurrency"
)

// Origin is the dependency every fleet calls.
type Origin struct {
	Model string // capacity, queue or concurrency; required

	// Capacity is attempts answered per second (capacity model), or the
	// service rate of the whole origin (queue model). Required, > 0, for
	// both.
	Capacity float64
	// RejectionCost is the share of a request's work a rejection still
	// consumes (capacity model), in [0, 1]; default 0.
	RejectionCost float64
	// Latency is how long an admitted attempt takes (capacity model);
	// default 10ms.
	Latency time.Duration

	Workers    int    // queue model: requests served in parallel; default 1
	QueueLimit int    // queue model: waiting requests at most; 0 = unbounded
	Discipline string // queue model: "fifo" (default), "lifo" or "adaptive_lifo"
	// MaxQueueTime is how long a request may wait for a worker (queue
	// model); 0 = no limit. It needs a QueueLimit, as adaptive_lifo does.
	MaxQueueTime time.Duration
	// DropExpired (queue model) skips, when a worker would take it, a
	// request that cannot be answered before its client gives up, by the
	// service time as it stands, and stops serving one whose client gave
	// up. Shed.Deadline generalises it.
	DropExpired bool

	// Limit is the origin's concurrency limit (queue and concurrency
	// models): the requests it holds at once, queued or in service.
	Limit Limit
	// Shed is the origin's deadline shedding (queue and concurrency
	// models).
	Shed Shed

	Base        time.Duration // concurrency model: latency with nothing in flight; required there
	PerInflight time.Duration // concurrency model: added latency per request in flight

	// ErrorRate is the background share of attempts that fail, in [0, 1].
	ErrorRate float64
	// Broken is the share of the key space that always fails (partial
	// failure): an intent whose key falls there fails on every attempt.
	Broken float64
	// Replicas is how many replicas share the load; default 1. Each holds
	// an equal share of the capacity and workers. A fleet without a
	// balancer sends each attempt to a random one.
	Replicas int
	// Faults are replicas that misbehave for the whole run (the file's
	// replicas: {count, faults}); the origin only.
	Faults []Fault

	// ServiceTime is how each request's service time varies around the
	// model's mean (workers/capacity, base, or latency); the zero value
	// is fixed: every request takes the mean.
	ServiceTime ServiceTime
	// LoadLatency makes a queue model's service time grow with the share
	// of its workers busy (curve.go); the zero value is flat.
	LoadLatency LoadLatency
}

// Service-time distributions.
const (
	DistFixed       = "fixed"
	DistExponential = "exponential"
	DistLognormal   = "lognormal"
	DistEmpirical   = "empirical"
)

// ServiceTime is the distribution of an origin's service times. Its mean
// is the model's (workers/capacity for the queue model, base + per_inflight
// × in service for the concurrency model, latency for the capacity model),
// as the conditions of the moment scale it; the distribution gives the
// shape around that mean. A scale written here (Mean, Median, Buckets) is
// the reader's, and a fitter's: it must agree with the model's mean within
// 1%, so a file cannot say two things.
type ServiceTime struct {
	// Dist is fixed (the zero value: every request takes the mean),
	// exponential, lognormal or empirical.
	Dist string
	// Mean is the mean (fixed and exponential); 0: the model's.
	Mean time.Duration
	// Median is the median (lognormal); 0: the one the model's mean and
	// Sigma give.
	Median time.Duration
	// Sigma is the standard deviation of the service time's logarithm
	// (lognormal); required, in (0, 4]. p99/p50 = exp(2.326 sigma).
	Sigma float64
	// Buckets are a histogram's cumulative buckets (empirical), as
	// Prometheus's le buckets read: a draw is uniform within its bucket,
	// from 0 in the first, and one in a +Inf bucket takes the last finite
	// bound, as histogram_quantile does.
	Buckets []Bucket
}

// Bucket is one cumulative bucket of an empirical service time: the share
// Fraction of requests takes at most Le (Inf for +Inf).
type Bucket struct {
	Le       time.Duration
	Fraction float64
}

// Inf is the bound of a +Inf bucket.
const Inf = time.Duration(math.MaxInt64)

// IsFixed reports whether every request takes the mean: Dist fixed or
// unset.
func (st ServiceTime) IsFixed() bool { return st.Dist == "" || st.Dist == DistFixed }

// Scale returns the mean service time the distribution states itself
// (Mean, Median and Sigma, or Buckets), and false when it leaves the mean
// to the model. A fitter that writes a scale sets the model's capacity
// (queue: workers / mean), base or latency from it.
func (st ServiceTime) Scale() (time.Duration, bool) {
	switch st.Dist {
	case DistLognormal:
		if st.Median > 0 {
			return time.Duration(min(float64(st.Median)*math.Exp(st.Sigma*st.Sigma/2), 1e18)), true
		}
	case DistEmpirical:
		if m := st.BucketMean(); m > 0 {
			return time.Duration(min(m, 1e18)), true
		}
	default:
		if st.Mean > 0 {
			return st.Mean, true
		}
	}
	return 0, false
}

// Scaled returns st with every time it states (Mean, Median, the finite
// bucket bounds) multiplied by f, so that it agrees with a model whose mean
// service time was multiplied by f: the lab's scaling to wall time, or
// check's origin at another capacity. The shape is unchanged; Buckets is a
// copy.
func (st ServiceTime) Scaled(f float64) ServiceTime {
	d := func(x time.Duration) time.Duration { return time.Duration(min(float64(x)*f, float64(Inf-1))) }
	st.Mean, st.Median = d(st.Mean), d(st.Median)
	if st.Buckets != nil {
		b := make([]Bucket, len(st.Buckets))
		for i, x := range st.Buckets {
			b[i] = x
			if x.Le != Inf {
				b[i].Le = d(x.Le)
			}
		}
		st.Buckets = b
	}
	return st
}

// BucketMean is the mean of the empirical distribution of Buckets, in
// nanoseconds: each bucket's share at the middle of its bounds (from 0 for
// the first), the +Inf bucket's at the last finite bound. It is 0 without
// a finite bucket.
func (st ServiceTime) BucketMean() float64 {
	var sum, lo, prev float64
	finite := false
	for _, b := range st.Buckets {
		if b.Le == Inf {
			sum += (b.Fraction - prev) * lo
			prev = b.Fraction
			continue
		}
		hi := float64(b.Le)
		sum += (b.Fraction - prev) * (lo + hi) / 2
		lo, prev, finite = hi, b.Fraction, true
	}
	if !finite {
		return 0
	}
	return sum
}

// Limit kinds: "none" and resil's limit algorithms.
const (
	LimitNone     = "none"
	LimitFixed    = "fixed"
	LimitAIMD     = "aimd"
	LimitGradient = "gradient"
	LimitVegas    = "vegas"
)

// Limit is the origin's concurrency limit, admission.Limiter in the file's
// words: Use picks the algorithm ("none" or absent: no limit), the other
// fields are its settings, zero where resil's default applies.
type Limit struct {
	Use      string
	Limit    int // fixed: the limit, required; adaptive: the initial limit
	MinLimit int // adaptive: the least the limit falls to
	MaxLimit int // adaptive: the most the limit grows to

	Backoff float64       // aimd: what a drop multiplies the limit by
	SlowRTT time.Duration // aimd: a latency above it counts as a drop; 0 = none

	Smoothing     float64       // gradient, vegas: the weight of each update
	Tolerance     float64       // gradient: the short RTT's allowance over the long one
	Headroom      float64       // gradient: what each update adds
	Window        time.Duration // gradient: the least span of a window of samples
	WindowSamples int           // gradient: the least samples of a window
	LongWindow    int           // gradient: windows the long RTT averages over
	Probe         int           // vegas: samples × limit between no-load probes; 0 = never
}

// Shed is the origin's deadline shedding: every attempt tells the origin
// how long its client will wait (deadline propagation), and with Deadline
// on the origin refuses at once, on arrival and when a worker would take
// it, a request that cannot be answered in time, and stops serving one
// whose client gave up.
type Shed struct {
	Deadline bool
	// ServiceTime is the origin's estimate of a request's service time;
	// 0 means what the origin knows: on arrival its service time at its
	// base capacity (queue model: workers / capacity; concurrency model:
	// base), and when a worker would take a request its service time as
	// it stands.
	ServiceTime time.Duration
	// Reserve is the time kept for the answer's way back: a request must
	// be answered Reserve before its client's deadline.
	Reserve time.Duration
}

// Trigger kinds.
const (
	TriggerCapacity = "capacity" // capacity dips to Capacity
	TriggerErrors   = "errors"   // extra error rate ErrorRate
	TriggerOutage   = "outage"   // nothing answers, in a Mode
	TriggerLoad     = "load"     // intent rate changes to Rate
	TriggerLatency  = "latency"  // latency multiplied by Factor on Replicas replicas
)

// Trigger is a temporary change of the origin or the traffic.
type Trigger struct {
	Kind string
	At   time.Duration // start, from the beginning of the run; >= 0, default 0
	For  time.Duration // length; required, > 0

	Capacity  float64 // capacity trigger: the capacity during the dip, >= 0
	ErrorRate float64 // errors trigger: extra error rate, in (0, 1]
	Rate      float64 // load trigger: the intent rate during the trigger, >= 0
	Factor    float64 // latency trigger: latency multiplier, >= 1
	Replicas  int     // latency trigger: replicas affected; 0 = all
	// Replica, if set, is the one replica an errors, outage or latency
	// trigger hits (from 0); nil: every replica (or Replicas of them).
	Replica *int
	// Mode is what an outage trigger does to the requests: OutageRefuse,
	// OutageRefusePod, OutageBlackhole (the default; empty reads as it)
	// or OutageStall; and what a flush does to the entries: FlushHard
	// (the default) or FlushSoft.
	Mode string
	// Answer is what an errors trigger's failed answers are: AnswerError
	// (the default; empty reads as it) or AnswerRejection.
	Answer string

	// The kinds of triggers.go: a burst's extra intents; the cache a
	// flush empties; the CPU share a cut leaves; the link a partition
	// cuts; and, in a shared scenario, the fleet a load or burst
	// trigger changes ("" for every fleet).
	Count    float64
	Cache    string
	Share    float64
	From, To string
	Fleet    string
}

// What an errors trigger answers.
const (
	// AnswerError is an error answer: HTTP 500, gRPC INTERNAL. The server
	// did the request's work.
	AnswerError = "error"
	// AnswerRejection is an overload rejection answered at once: HTTP 503
	// or 429, gRPC UNAVAILABLE or RESOURCE_EXHAUSTED.
	AnswerRejection = "rejection"
)

// Outage modes: how nothing answers.
const (
	// OutageRefuse fails every request at once, as a refused connection
	// does: a crashed process, a port nobody listens on, a load balancer
	// with no healthy backend. Requests in progress fail too.
	OutageRefuse = "refuse"
	// OutageRefusePod is OutageRefuse with any proxy beside the replica
	// down too (scenario.Inbound): a pod being replaced, its sidecar
	// gone, refuses at its address, so the caller's own proxy sees the
	// refused connection, where OutageRefuse (the application restarting
	// behind a running sidecar) reaches it as the sidecar's answer.
	// Without an inbound proxy the two are one.
	OutageRefusePod = "refuse_pod"
	// OutageBlackhole loses every request: the client times out and the
	// server does no work for it, as when a network partition or a
	// misrouted firewall rule drops packets. Answers due meanwhile are
	// lost too.
	OutageBlackhole = "blackhole"
	// OutageStall accepts requests into the server's queue and serves
	// nothing until it ends, then goes on: a stop-the-world garbage
	// collection, a lock held too long, a database failover. Nothing comes
	// out meanwhile, rejections included.
	OutageStall = "stall"
)

// Refuses reports whether an outage of mode refuses connections:
// OutageRefuse or OutageRefusePod.
func Refuses(mode string) bool { return mode == OutageRefuse || mode == OutageRefusePod }

// End returns when the trigger ends.
func (t Trigger) End() time.Duration { return t.At + t.For }

// Fleet is one population of clients and the policy they all run. Each
// client has its own budget and breaker.
type Fleet struct {
	Name     string
	Timeout  time.Duration // per attempt; required, > 0
	Deadline time.Duration // per intent, from its arrival; 0 = none
	Retry    Retry
	Budget   Budget
	Breaker  Breaker
	Throttle Throttle
	Hedge    Hedge
	// Balancer picks the replica of each attempt, and OutlierDetection
	// ejects the replicas that fail: one of each per client, as each
	// proxy (each gRPC channel) has its own. Absent: a random replica per
	// attempt.
	Balancer         Balancer
	OutlierDetection OutlierDetection
	// Traffic, in a shared scenario, is the fleet's own traffic; nil
	// takes the scenario's. Callee names the layer the fleet calls (a
	// tier or cache, or "origin"); "" is the first. Pool is the
	// connection pool each client sends its attempts through (pool.go).
	Traffic *Traffic
	Callee  string
	Pool    Pool
	// Calls says how the fleet's clients speak to the layer they call and
	// what runs at their own layer: see Calls.
	Calls
}

// Calls is what a layer's give-up answers depend on (package giveup):
// the protocol it speaks to the layer it calls, the product it runs, and
// the proxy beside each replica of the layer it calls. The zero value is
// an HTTP application calling replicas that have no proxy of their own.
type Calls struct {
	// Protocol is ProtocolHTTP ("" reads as it) or ProtocolGRPC: a gRPC
	// caller hears a layer's give-up as a gRPC status (Envoy's 503 and
	// 504 are UNAVAILABLE to it).
	Protocol string
	// Product runs at this layer (giveup.Product: app, the default,
	// envoy, linkerd, nginx, haproxy): what the layer answers its caller
	// when it gives up, once it is a tier. A fleet keeps it for when a
	// stack makes it one.
	Product string
	// Inbound is the proxy beside each replica of the layer called (an
	// Istio server sidecar); its zero value is none.
	Inbound Inbound
}

// The protocols of Calls.Protocol.
const (
	ProtocolHTTP = "http"
	ProtocolGRPC = "grpc"
)

// Plain reports whether c is an HTTP application's calls to replicas
// with no proxy beside them: the zero value, or its defaults written out.
func (c Calls) Plain() bool {
	return (c.Protocol == "" || c.Protocol == ProtocolHTTP) && (c.Product == "" || c.Product == "app") && c.Inbound.Product == ""
}

// GRPC reports whether the calls speak gRPC.
func (c Calls) GRPC() bool { return c.Protocol == ProtocolGRPC }

// Inbound is a proxy beside each replica of the layer called, in front of
// its application, as Istio's server-side sidecar is: a connection the
// application refuses reaches the caller as the proxy's answer (Envoy's
// 503), after the proxy's own retries of it on the same replica, never
// another. Istio 1.24 and later retry a reset before the request was sent
// twice on HTTP routes (pilot's default inbound retry policy,
// reset-before-request with 2 retries), none on gRPC ones.
type Inbound struct {
	// Product is the proxy (giveup.Product); "" is none.
	Product string
	// Retries is how many times it retries a refused connection, in
	// [0, 10].
	Retries int
}

// Retry is the per-call retry rule.
type Retry struct {
	// MaxRetries is retries after the first attempt; resil.Unlimited (-1)
	// for no limit (written "unlimited" in YAML). Default 0.
	MaxRetries int
	// IdempotentOnly retries only idempotent intents and those with a key.
	// Default false: every failed intent may be retried.
	IdempotentOnly bool
	// On lists the failures that are retried: RetryOnError,
	// RetryOnRejection, RetryOnGateway, RetryOnTimeout, RetryOnRefused.
	// Empty (the default) retries all five.
	On      []string
	Backoff Backoff
}

// The failures a fleet may retry (Retry.On).
const (
	RetryOnError     = "error"     // an error answer (a 5xx that is not an overload rejection)
	RetryOnRejection = "rejection" // an overload rejection (503, 429: a throttle)
	// RetryOnGateway is an answer by which a tier below gave up: a 502 or
	// 504 (a proxy's), or a gRPC application's DEADLINE_EXCEEDED. The
	// origin never sends one (package giveup).
	RetryOnGateway = "gateway"
	RetryOnTimeout = "timeout" // no answer within the attempt's timeout
	RetryOnRefused = "refused" // a refused connection: an outage with mode: refuse
)

// Retries reports whether a failure of kind k (RetryOnError,
// RetryOnRejection, RetryOnGateway, RetryOnTimeout, RetryOnRefused) may be
// retried.
func (r *Retry) Retries(k string) bool {
	return len(r.On) == 0 || slices.Contains(r.On, k)
}

// Backoff is resil.Backoff in the file's words.
type Backoff struct {
	Use        string        // none (default), fixed, exponential
	Base       time.Duration // required by fixed, exponential and decorrelated jitter
	Cap        time.Duration // 0 = no cap
	Multiplier float64       // exponential growth; default 2
	Jitter     string        // none (default), full, equal, decorrelated, factor
	Factor     float64       // factor jitter's spread, in (0, 1]
}

// Hedge is hedged requests: after Delay without an answer, another attempt.
type Hedge struct {
	Delay time.Duration // 0 = no hedging
	Max   int           // hedges per intent; default 1 when Delay is set
}

// MaxTiers is the most tiers a scenario may have: a chain of eight
// services retrying three times each could send 65,536 attempts to the
// origin for one intent.
const MaxTiers = 8

// Tier is a service between the fleets and the origin: a server, as an
// origin is one, whose work for each request is a call to the next tier
// (or to the origin) with its client's policy. A request holds one of the
// server's workers (queue model), or its place in flight (concurrency
// model), while that call and its retries go on; the tier answers success
// when the call succeeds and failure when its policy gives up. Triggers
// act on the origin alone.
type Tier struct {
	Name   string
	Server Origin
	Client Client
	// Cache, when set, makes the tier a look-aside cache instead of a
	// server (cache.go): its Server is unused, and its Client is how it
	// fills a miss from the next layer.
	Cache *Cache
}

// Client is the policy a tier calls the next one with: a fleet's, less
// its name, and whether it propagates its callers' deadlines.
type Client struct {
	Timeout  time.Duration // per attempt; required, > 0
	Deadline time.Duration // per request, from its arrival at the tier; 0 = none
	Retry    Retry
	Budget   Budget
	Breaker  Breaker
	Hedge    Hedge
	// PropagateDeadline makes the tier's call downstream its caller's: it
	// sends the time its caller has left (resilhttp's Resil-Timeout
	// header) with each attempt, no retry starts after the caller's
	// deadline, and when the caller gives up the call is cancelled and the
	// worker freed. Without it the tier works on for a caller that left
	// (an answer after that is wasted work) and the next server does not
	// know the deadline, only that the tier gave up when it does.
	PropagateDeadline bool
	// Balancer and OutlierDetection are how the tier picks the next
	// layer's replica and ejects them, as a fleet's: one picker and one
	// detector per replica of the tier, as each Envoy has its own.
	Balancer         Balancer
	OutlierDetection OutlierDetection
	// Calls: the protocol the tier speaks to the next layer, the product
	// it runs (what it answers its callers when it gives up), the proxy
	// beside each replica of the next layer.
	Calls
	// Pool is the connection pool each replica of the tier (or the cache)
	// calls the next layer through (pool.go).
	Pool Pool
}

// Fleet returns the client as a fleet called name: the same policy.
func (c Client) Fleet(name string) Fleet {
	return Fleet{Name: name, Timeout: c.Timeout, Deadline: c.Deadline, Retry: c.Retry, Budget: c.Budget, Breaker: c.Breaker, Hedge: c.Hedge,
		Balancer: c.Balancer, OutlierDetection: c.OutlierDetection, Calls: c.Calls, Pool: c.Pool}
}

// Client returns the fleet's policy as a tier's client, every setting a
// client has (a throttle it has not): a stack makes a layer's fleet a tier
// with it.
func (f Fleet) Client() Client {
	return Client{Timeout: f.Timeout, Deadline: f.Deadline, Retry: f.Retry, Budget: f.Budget, Breaker: f.Breaker, Hedge: f.Hedge,
		Balancer: f.Balancer, OutlierDetection: f.OutlierDetection, Calls: f.Calls, Pool: f.Pool}
}

// Clone copies the scenario deeply enough to change it: its triggers and
// fleets are its own (a fleet's own slices are shared: replace them,
// never change them in place).
func (s *Scenario) Clone() *Scenario {
	c := *s
	c.Triggers = slices.Clone(s.Triggers)
	c.Fleets = slices.Clone(s.Fleets)
	return &c
}

// SetCapacity gives o capacity c. The queue model's mean service time is
// workers / capacity, so a service time that states its own scale (a
// calibrated one) is scaled with it, as the file's validation requires.
func (o *Origin) SetCapacity(c float64) {
	if o.Model == ModelQueue && o.Capacity > 0 {
		o.ServiceTime = o.ServiceTime.Scaled(o.Capacity / c)
	}
	o.Capacity = c
}
