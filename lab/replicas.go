package lab

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retrystorm/retrystorm/resil/balance"
	"github.com/retrystorm/retrystorm/resil/outlier"
	"github.com/retrystorm/retrystorm/resil/resilhttp"
	"github.com/retrystorm/retrystorm/scenario"
	"github.com/retrystorm/retrystorm/sim"
)

// Replicas in the lab: an origin of N replicas is N Origins, one server
// each on 127.0.0.1, and the HTTP gateway sends every attempt through
// resilhttp.Replicas with the fleet's picker (resil/balance) and outlier
// detector (resil/outlier), one of each per client, as each proxy and
// each gRPC channel keeps its own and as the simulator does
// (sim/replicas.go). The gateway counts each replica's ground truth as the
// simulator does: attempts sent during the run, how they ended, ejections
// (summed over the clients' detectors), and the ticks each replica ended
// ejected by at least half of them.

// balanced reports whether the lab runs sc's origin as replicas behind a
// picker: the origin is several replicas, a fault or trigger names one, or
// a fleet balances or detects outliers.
func balanced(sc *scenario.Scenario) bool {
	if sc.Origin.Replicas > 1 || sc.NamesReplicas() {
		return true
	}
	for i := range sc.Fleets {
		if reportsReplicas(sc, i) {
			return true
		}
	}
	return false
}

// reportsReplicas reports whether fleet i's result carries the ground
// truth per replica: when the simulator's does (sim's newReplicaState), so
// that the two results have the same shape.
func reportsReplicas(sc *scenario.Scenario, i int) bool {
	f := &sc.Fleets[i]
	return f.Balancer.Use != "" || f.OutlierDetection.Detects() || sc.NamesReplicas()
}

// refuseReplicas reports what the lab does not play of sc's replicas, by
// the key: run as if it were absent, a scenario would be measured as
// something it does not say.
func refuseReplicas(sc *scenario.Scenario) error {
	for i, t := range sc.Tiers {
		switch {
		case t.Client.Balancer.Use != "":
			return fmt.Errorf("lab: tiers[%d].client.balancer: the lab's tiers call one server each: run it in the simulator", i)
		case t.Client.OutlierDetection.Detects():
			return fmt.Errorf("lab: tiers[%d].client.outlier_detection: the lab's tiers call one server each: run it in the simulator", i)
		case len(t.Server.Faults) > 0:
			return fmt.Errorf("lab: tiers[%d].server.replicas.faults: the lab's tiers are one server each: run it in the simulator", i)
		}
	}
	if !balanced(sc) {
		return nil
	}
	if len(sc.Tiers) > 0 {
		return fmt.Errorf("lab: origin.replicas with tiers: the lab's tiers call one origin server: run it in the simulator")
	}
	for i, f := range sc.Fleets {
		if f.Hedge.Delay > 0 {
			return fmt.Errorf("lab: fleets[%d].hedge with origin.replicas: the lab's gateway would not send a hedge to another replica than its attempt's, as the simulator does: run it in the simulator", i)
		}
		if f.OutlierDetection.Use == scenario.OutlierEnvoy && f.OutlierDetection.Settings.Enforcing.ConsecutiveGatewayFailure > 0 {
			return fmt.Errorf("lab: fleets[%d].outlier_detection.enforcing_consecutive_gateway_failure: the lab's origin answers its error share with a 503, a gateway error, where the simulator's answers a 5xx: run it in the simulator", i)
		}
	}
	return nil
}

// originSet is an origin of several replicas, one Origin each, as the
// rig's server: each is served on its own listener (rig.serveOrigin).
type originSet struct {
	reps []*Origin
	mu   sync.Mutex
	rng  *rand.Rand // which replica a refused attempt would have reached
}

// newOriginSet returns the replicas of cfg's origin, each with its share
// of the capacity and its own faults, sharing one idempotency ledger.
func newOriginSet(cfg OriginConfig) (*originSet, error) {
	n := max(cfg.Origin.Replicas, 1)
	s := &originSet{rng: rand.New(rand.NewPCG(cfg.Seed, 0x7e91<<48))}
	cfg.book = newLedger(1 << 16)
	for r := range n {
		c := cfg
		c.Replica = r
		o, err := NewOrigin(c)
		if err != nil {
			return nil, err
		}
		s.reps = append(s.reps, o)
	}
	return s, nil
}

// Handler serves replica 0 (the rig serves every replica on its own).
func (s *originSet) Handler() http.Handler { return s.reps[0].Handler() }

// Run runs every replica until ctx is done.
func (s *originSet) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, o := range s.reps {
		wg.Go(func() { o.Run(ctx) })
	}
	wg.Wait()
}

// Queued is the origin's queue: the sum over its replicas, as the
// simulator's.
func (s *originSet) Queued() int {
	n := 0
	for _, o := range s.reps {
		n += o.Queued()
	}
	return n
}

// WouldAnswer asks a replica drawn at random, as the simulator asks the
// replica a refused attempt would have reached.
func (s *originSet) WouldAnswer(timeout time.Duration) bool {
	s.mu.Lock()
	r := s.rng.IntN(len(s.reps))
	s.mu.Unlock()
	return s.reps[r].WouldAnswer(timeout)
}

// Counts sums the replicas' waste and drops; the executions are the shared
// ledger's.
func (s *originSet) Counts() OriginCounts {
	var c OriginCounts
	for _, o := range s.reps {
		oc := o.Counts()
		c.Wasted += oc.Wasted
		c.Dropped += oc.Dropped
		c.Executions, c.Duplicates, c.Replayed = oc.Executions, oc.Duplicates, oc.Replayed
	}
	return c
}

// Streams of the gateway's picker and detector, as the simulator's
// (sim/replicas.go), apart from the clients' jitter.
const (
	pickerStream   = 0xba1a << 48
	detectorStream = 0x0e1e << 48
)

// replicaSet is a gateway's replicas: per client, the resilhttp.Replicas
// its attempts go through with its picker and detector; and the ground
// truth per replica. It is the RoundTripper below the clients' Guards,
// sending each attempt through its client's Replicas.
type replicaSet struct {
	inst []replicaInstance // one per client
	eps  []*url.URL
	reps []replicaCount
	// noHost counts the attempts sent during the run that found no
	// replica (every one ejected, panic mode off).
	noHost atomic.Int64
}

// replicaInstance is one client's Replicas and detector.
type replicaInstance struct {
	rt  *resilhttp.Replicas
	det *outlier.Detector // nil: no outlier detection
}

// replicaCount is one replica's ground truth.
type replicaCount struct {
	attempts, successes, failures, cancelled atomic.Int64
	ejectedTicks                             atomic.Int64 // ticks that ended with it ejected
}

// newReplicaSet builds each client's detector and picker for its
// gateway's endpoints, as the simulator does (Fleet.OutlierDetection.
// NewDetector, Fleet.Balancer.NewPicker, from the streams of the client);
// without either, a replica drawn at random per attempt, as the
// simulator's default. The detectors' first interval starts at
// cfg.Start, the run's time 0.
func newReplicaSet(cfg GatewayConfig, base http.RoundTripper) (*replicaSet, error) {
	n := len(cfg.Endpoints)
	s := &replicaSet{eps: cfg.Endpoints, reps: make([]replicaCount, n)}
	hosts := make(map[string]int, n)
	urls := make([]string, n)
	for i, u := range cfg.Endpoints {
		hosts[u.Host] = i
		urls[i] = (&url.URL{Scheme: u.Scheme, Host: u.Host}).String()
	}
	ep := &endpointTransport{base: base, hosts: hosts, set: s}
	start := cfg.Start
	if start.IsZero() {
		start = time.Now()
	}
	for k := range max(cfg.Clients, 1) {
		in, err := newReplicaInstance(cfg, k, urls, ep, start)
		if err != nil {
			return nil, err
		}
		s.inst = append(s.inst, in)
	}
	return s, nil
}

// newReplicaInstance builds client k's picker, detector and Replicas.
func newReplicaInstance(cfg GatewayConfig, k int, urls []string, ep http.RoundTripper, start time.Time) (replicaInstance, error) {
	fl, key := cfg.Fleet, uint64(k)<<32
	det, err := fl.OutlierDetection.NewDetector(len(urls), rand.NewPCG(cfg.Seed, detectorStream|key))
	if err != nil {
		return replicaInstance{}, fmt.Errorf("lab: fleet %s: outlier_detection: %w", fl.Name, err)
	}
	src := rand.NewPCG(cfg.Seed, pickerStream|key)
	pick, err := fl.Balancer.NewPicker(len(urls), det, src)
	if err == nil && pick == nil {
		pick, err = balance.NewRandom(balance.Settings{Hosts: len(urls), Rand: src})
	}
	if err != nil {
		return replicaInstance{}, fmt.Errorf("lab: fleet %s: balancer: %w", fl.Name, err)
	}
	if det != nil {
		_ = det.Advance(start) // starts its first interval
	}
	rt, err := resilhttp.NewReplicas(resilhttp.ReplicaSettings{Endpoints: urls, Picker: pick, Detector: det, Base: ep})
	if err != nil {
		return replicaInstance{}, fmt.Errorf("lab: %w", err)
	}
	return replicaInstance{rt: rt, det: det}, nil
}

// RoundTrip sends an attempt through the Replicas of the client its
// trace names (the first without one).
func (s *replicaSet) RoundTrip(r *http.Request) (*http.Response, error) {
	k := 0
	if tr := traceOf(r.Context()); tr != nil && tr.client < len(s.inst) {
		k = tr.client
	}
	return s.inst[k].rt.RoundTrip(r)
}

// sentTo is what the gateway knows of an attempt's replica: the tick it
// was sent in and the replica its pick chose (-1 until one did).
type sentTo struct {
	tick    int
	replica int
}

type sentToKey struct{}

// endpointTransport is below resilhttp.Replicas: it sees each attempt
// once its replica is picked, counts it there, and sends it.
type endpointTransport struct {
	base  http.RoundTripper
	hosts map[string]int
	set   *replicaSet
}

func (t *endpointTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	// Replicas keeps the caller's Host, as Envoy forwards the downstream
	// authority; each of the lab's servers answers at its own address
	// only (a 421 otherwise), so the attempt names its replica's. r is
	// Replicas' own copy of the request.
	r.Host = r.URL.Host
	if to, ok := r.Context().Value(sentToKey{}).(*sentTo); ok {
		if i, ok := t.hosts[r.URL.Host]; ok {
			to.replica = i
			if to.tick >= 0 {
				t.set.reps[i].attempts.Add(1)
			}
		}
	}
	return t.base.RoundTrip(r)
}

// attemptOutcome is how an attempt ended, for its replica's count.
type attemptOutcome uint8

const (
	endSuccess   attemptOutcome = iota // answered in time with success: goodput
	endFailure                         // an error, a rejection, a timeout, a refused connection
	endCancelled                       // another attempt of its intent won
)

// ended counts an attempt's end at its replica, or as finding none.
func (s *replicaSet) ended(to *sentTo, o attemptOutcome) {
	if to.tick < 0 {
		return
	}
	if to.replica < 0 {
		s.noHost.Add(1)
		return
	}
	r := &s.reps[to.replica]
	switch o {
	case endSuccess:
		r.successes.Add(1)
	case endCancelled:
		r.cancelled.Add(1)
	default:
		r.failures.Add(1)
	}
}

// sampleEjected counts a tick, ending now, for each replica at least half
// of the clients' detectors (and one) eject then, once their evaluations
// due have run (the simulator samples at each tick's end the same way).
func (s *replicaSet) sampleEjected(now time.Time) {
	if s.inst[0].det == nil {
		return
	}
	for _, in := range s.inst {
		_ = in.det.Advance(now)
	}
	for i := range s.reps {
		n := 0
		for _, in := range s.inst {
			if in.det.Ejected(i) {
				n++
			}
		}
		if n > 0 && 2*n >= len(s.inst) {
			s.reps[i].ejectedTicks.Add(1)
		}
	}
}

// results returns the ground truth per replica in the simulator's terms,
// a tick of the scenario lasting tick, and the attempts that found none.
func (s *replicaSet) results(tick time.Duration) ([]sim.ReplicaResult, int64) {
	out := make([]sim.ReplicaResult, len(s.reps))
	for i := range s.reps {
		r := &s.reps[i]
		out[i] = sim.ReplicaResult{
			Replica: i, Attempts: r.attempts.Load(), Successes: r.successes.Load(),
			Failures: r.failures.Load(), Cancelled: r.cancelled.Load(),
			EjectedSeconds: float64(r.ejectedTicks.Load()) * tick.Seconds(),
		}
		for _, in := range s.inst {
			if in.det != nil {
				out[i].Ejections += int64(in.det.Host(i).Ejections)
			}
		}
	}
	return out, s.noHost.Load()
}
