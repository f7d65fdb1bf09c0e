package lab

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/retrystorm/retrystorm/resil/budget"
	"github.com/retrystorm/retrystorm/scenario"
)

// ProbeOptions configure Probe.
type ProbeOptions struct {
	// Tick, when not zero, is a wall-clock tick preferred for the
	// scenario: it is taken when it holds the timeout the probe chooses
	// (see ProbeResult.plan); otherwise the probe names its own.
	Tick time.Duration
	// MaxRate bounds the ramp, in requests per second; zero means
	// MaxAttemptRate.
	MaxRate float64
	// Step is how long each rate of the ramp lasts; zero means a second.
	Step time.Duration
	// Log is told of each step; nil says nothing.
	Log io.Writer
}

// ProbeStep is one rate of the ramp and what the service did at it.
type ProbeStep struct {
	Rate       float64 `json:"rate"`       // requests sent per second
	Throughput float64 `json:"throughput"` // successes per second, over the step's second half
	P50        float64 `json:"p50_seconds"`
	P90        float64 `json:"p90_seconds"`
	P99        float64 `json:"p99_seconds"`
	Mean       float64 `json:"mean_seconds"`
	Errors     float64 `json:"error_share"` // failed (5xx, no answer) of those sent
	// LateP99 is how late the probe sent its requests (99th percentile,
	// seconds), and LabCPU the share of its cores it used: the probe's
	// own limits.
	LateP99 float64  `json:"late_p99_seconds"`
	LabCPU  *float64 `json:"lab_cpu_share,omitempty"`
}

// Who set the ceiling a probe found (ProbeResult.CeilingBy).
const (
	CeilingService = "service" // latency or errors rose, with the probe on time
	CeilingMachine = "machine" // the probe ran late or used its cores up first
	CeilingCap     = "cap"     // the ramp reached its cap, MaxRate, first
)

// ProbeResult is what Probe measured, in wall-clock units.
type ProbeResult struct {
	URL  string        `json:"url"`
	Rest time.Duration `json:"-"` // latency at rest: the median of sequential requests
	// RestSeconds is Rest; RestP50 and RestP99 the latency of the
	// ramp's first step, at a rate the service serves easily.
	RestSeconds float64 `json:"rest_seconds"`
	RestP50     float64 `json:"rest_p50_seconds"`
	RestP99     float64 `json:"rest_p99_seconds"`
	// Capacity is the highest throughput seen; Knee the step (an index
	// of Steps) of the highest rate served before latency or errors
	// rose; KneeP50 and KneeP99 the latency there.
	Capacity float64 `json:"capacity"`
	Knee     int     `json:"knee"`
	KneeP50  float64 `json:"knee_p50_seconds"`
	KneeP99  float64 `json:"knee_p99_seconds"`
	// Concurrency is the requests in the service at the knee by
	// Little's law: throughput × mean latency. Workers is capacity ×
	// latency at rest, the workers of a queue with that service time.
	Concurrency float64 `json:"concurrency"`
	Workers     int     `json:"workers"`
	// CeilingBy says whose ceiling Capacity is: CeilingService, or the
	// probe's own (CeilingMachine, CeilingCap); Why says it in words.
	CeilingBy string `json:"ceiling_by"`
	// Inconclusive says the probe could not measure the service at all
	// (its first step already beyond what this machine sends on time,
	// or nothing served): no scenario is written.
	Inconclusive bool        `json:"inconclusive"`
	Why          string      `json:"why"`
	Steps        []ProbeStep `json:"steps"`
	// Tick is the wall-clock tick the scenario is written for, and
	// Impose whether its replay imposes the scenario's origin on the
	// service (a service faster than the lab can storm on one machine).
	Tick   time.Duration `json:"-"`
	Impose bool          `json:"impose"`
	// Timeout is the fleets' timeout in wall-clock time: ten times the
	// latency the service showed, at least the lab's least with a margin.
	Timeout time.Duration `json:"-"`
	// TickSeconds is Tick; Replay the command that replays the scenario.
	TickSeconds float64 `json:"tick_seconds"`
	Replay      string  `json:"replay"`
}

// Bounds of a probe: the ramp's steps and how fast it grows.
const (
	ProbeMaxSteps = 14
	probeGrowth   = 1.5
)

// Probe measures a service's capacity and latency curve with a short,
// bounded, open-loop ramp: its latency at rest first (requests one after
// the other), then rates growing by half each step, from a rate it
// serves easily, until its throughput falls behind the rate sent, its
// median latency passes five times its latency at rest, a twentieth
// fails, or the rate would pass MaxRate. At most ProbeMaxSteps steps of
// Step each, with a pause of at most 5 s after each for the service to
// settle. The capacity is the highest throughput seen; the knee the last
// step before the service fell behind. Every step is watched as the lab
// watches a fleet: when the probe itself sent late or used its cores up
// at the step that ended the ramp, or the ramp reached MaxRate, the
// ceiling is said to be the probe's, not the service's.
func Probe(ctx context.Context, t *Target, opts ProbeOptions) (*ProbeResult, error) {
	if opts.MaxRate <= 0 {
		opts.MaxRate = MaxAttemptRate
	}
	if opts.Step <= 0 {
		opts.Step = time.Second
	}
	if t.Log == nil {
		t.Log = opts.Log
	}
	if err := t.rest(ctx); err != nil {
		return nil, err
	}
	tr, done := t.transport()
	defer done()
	res := &ProbeResult{URL: t.URL.Redacted(), Rest: t.baseline, RestSeconds: t.baseline.Seconds(), CeilingBy: CeilingService}
	timeout := max(20*t.baseline, time.Second)
	// Start where one request at a time would keep up: half the rate
	// its latency at rest allows, at least 10/s.
	rate := min(max(10, 0.5/t.baseline.Seconds()), opts.MaxRate)
	for i := range ProbeMaxSteps {
		st, err := probeStep(ctx, tr, t, rate, opts.Step, timeout)
		if err != nil {
			return nil, err
		}
		res.Steps = append(res.Steps, st)
		res.Capacity = max(res.Capacity, st.Throughput)
		if opts.Log != nil {
			fmt.Fprintf(opts.Log, "lab: probe: %6.0f/s sent, %6.0f/s served, p50 %s, p99 %s, %.1f%% failed; sent p99 %s late\n",
				st.Rate, st.Throughput, seconds(st.P50), seconds(st.P99), 100*st.Errors, seconds(st.LateP99))
		}
		saturated := st.Throughput < 0.8*st.Rate || st.P50 > 5*t.baseline.Seconds() || st.Errors > 0.05
		if i == 0 {
			res.RestP50, res.RestP99 = st.P50, st.P99
		}
		if !saturated {
			res.Knee = i
		}
		bound := t.Settle
		t.Settle = 5 * time.Second
		if _, err := t.pause(ctx, "the next step"); err != nil {
			return nil, err
		}
		t.Settle = bound
		if saturated {
			// Whose limit: the probe's, when it could not send on time
			// or kept its cores busy at this step.
			gap := 1 / st.Rate
			switch {
			case st.LabCPU != nil && *st.LabCPU > CPUShare:
				res.CeilingBy, res.Why = CeilingMachine, fmt.Sprintf("at %.0f/s the probe kept %.0f%% of its cores busy: the ceiling found is this machine's, not the service's", st.Rate, 100**st.LabCPU)
			case st.LateP99 > max(10*gap, 0.005):
				res.CeilingBy, res.Why = CeilingMachine, fmt.Sprintf("at %.0f/s the probe sent its requests %s late (p99): the ceiling found is this machine's, not the service's", st.Rate, seconds(st.LateP99))
			default:
				res.Why = fmt.Sprintf("at %.0f/s the service fell behind (%.0f/s served, p50 %s, %.1f%% failed) with the probe on time", st.Rate, st.Throughput, seconds(st.P50), 100*st.Errors)
			}
			break
		}
		if rate >= opts.MaxRate {
			res.CeilingBy, res.Why = CeilingCap, fmt.Sprintf("the ramp reached its cap of %.0f requests/s with the service keeping up: its capacity is higher than found", opts.MaxRate)
			break
		}
		rate = min(rate*probeGrowth, opts.MaxRate)
	}
	if res.Capacity == 0 || (res.CeilingBy == CeilingMachine && len(res.Steps) == 1) {
		// Not a rate the service fell behind at, but the probe at its
		// first: nothing was measured of the service.
		res.Inconclusive = true
		return res, nil
	}
	k := res.Steps[res.Knee]
	res.KneeP50, res.KneeP99 = k.P50, k.P99
	res.Concurrency = round3(k.Throughput * k.Mean)
	res.Workers = max(1, int(math.Round(res.Capacity*t.baseline.Seconds())))
	res.plan(opts.Tick)
	return res, nil
}

func seconds(s float64) string { return time.Duration(s * 1e9).Round(10 * time.Microsecond).String() }

// probeStep sends rate requests per second for d, open loop, each given
// timeout, and measures what came back, and how the probe kept up.
func probeStep(ctx context.Context, tr http.RoundTripper, t *Target, rate float64, d, timeout time.Duration) (ProbeStep, error) {
	type sample struct {
		done time.Time
		took time.Duration
		ok   bool
	}
	n := max(1, int(rate*d.Seconds()))
	samples := make([]sample, n)
	late := make([]float64, 0, n)
	w := startWatch(uint64(n))
	start := time.Now().Add(10 * time.Millisecond)
	var wg sync.WaitGroup
	stop := func() (ProbeStep, error) {
		wg.Wait()
		w.finish()
		return ProbeStep{}, ctx.Err()
	}
	for i := range n {
		if ctx.Err() != nil { // a loop behind its schedule stops too
			return stop()
		}
		due := start.Add(time.Duration(float64(i) / rate * 1e9))
		if w := time.Until(due); w > 0 {
			select {
			case <-ctx.Done():
				return stop()
			case <-time.After(w):
			}
		}
		late = append(late, time.Since(due).Seconds())
		wg.Go(func() {
			r, _ := probeOnce(ctx, tr, t.URL, timeout)
			samples[i] = sample{done: time.Now(), took: r.took, ok: r.fail == nil}
		})
	}
	wg.Wait()
	seen := w.finish()
	if err := ctx.Err(); err != nil {
		return ProbeStep{}, err
	}
	st := ProbeStep{Rate: rate, LabCPU: seen.LabCPU}
	half := start.Add(d / 2)
	end := start.Add(d)
	var took []float64
	served, failed, sum := 0, 0, 0.0
	for _, s := range samples {
		took = append(took, s.took.Seconds())
		sum += s.took.Seconds()
		if !s.ok {
			failed++
			continue
		}
		if !s.done.Before(half) && s.done.Before(end) {
			served++
		}
	}
	slices.Sort(took)
	slices.Sort(late)
	q := func(v []float64, p float64) float64 { return v[min(len(v)-1, int(float64(len(v))*p))] }
	st.P50, st.P90, st.P99 = q(took, 0.5), q(took, 0.9), q(took, 0.99)
	st.Mean = sum / float64(len(took))
	st.Errors = float64(failed) / float64(len(took))
	st.LateP99 = q(late, 0.99)
	st.Throughput = float64(served) / (d / 2).Seconds()
	return st, nil
}

// The scenario a probe writes (see ProbeResult.plan).
const (
	// probeLoad is the intent rate as a share of the capacity: the
	// storm experiment's 100 of 120.
	probeLoad = 5.0 / 6
	// probeRetries is its fleets' retries: the naive fleet's attempts
	// peak at (1 + probeRetries) times the intent rate.
	probeRetries = 3
	// maxProbeTick is the longest tick a probe writes for: the storm's
	// three fleets of up to maxProbeTicks ticks then take at most an hour.
	maxProbeTick  = 5 * time.Second
	maxProbeTicks = 240
	// probeHeadroom is the share of MaxAttemptRate the written scenario
	// may reach at its peak.
	probeHeadroom = 0.8
)

// plan chooses what the scenario replays and at what tick, from what was
// measured: the timeout is ten times the latency the service showed (at
// rest, or at the knee, whichever is longer) and at least the lab's
// shortest timeout with a margin; one scenario second lasts a timeout of
// wall time (so the scenario's timeout is 1 s, the storm's), or the tick
// the caller prefers when it is longer, at most maxProbeTick. A service whose
// capacity needs more attempts per second at the storm's peak than the lab
// sends on one machine (or whose ceiling was the probe's own) is replayed
// with --impose at the capacity the lab can storm.
func (r *ProbeResult) plan(prefer time.Duration) {
	latency := max(r.Rest.Seconds(), r.KneeP50)
	r.Timeout = niceTick(max(time.Duration(10*latency*1e9), MinScaledTimeout*6/5))
	r.Tick = min(max(r.Timeout, prefer), maxProbeTick)
	drivable := probeHeadroom * MaxAttemptRate / ((1 + probeRetries) * probeLoad)
	r.Impose = r.CeilingBy != CeilingService || r.Capacity > drivable
	r.TickSeconds = r.Tick.Seconds()
	flag := ""
	if r.Impose {
		flag = " --impose"
	}
	r.Replay = fmt.Sprintf("retrystorm lab --target %s --tick %s%s --config FILE", r.URL, Short(r.Tick), flag)
}

// Scenario writes what the probe measured as a whole scenario file that
// `retrystorm run` and `retrystorm lab --target` accept, at the tick and
// with the flags of r.Replay: the service as a queue origin (its capacity,
// or with --impose the capacity the lab can storm, and as many workers as
// Little's law gives at its latency at rest), and the storm experiment's
// shape scaled to it: an intent rate at five sixths of the capacity, a dip
// to a third of it for ten ticks, a naive and a guarded fleet whose
// timeout is one tick. Rates and durations are in scenario time for a lab
// tick of r.Tick (one scenario second lasts r.Tick of wall time); comments
// say what was measured, in wall-clock time.
func (r *ProbeResult) Scenario() []byte {
	scale := r.Tick.Seconds() // wall seconds per scenario second
	wallCap := r.Capacity
	if r.Impose {
		wallCap = min(wallCap, probeHeadroom*MaxAttemptRate/((1+probeRetries)*probeLoad))
	}
	capacity := roundTo(wallCap*scale, 3)
	workers := max(1, int(math.Round(wallCap*r.Rest.Seconds())))
	service := time.Duration(float64(workers) / capacity * 1e9)
	// One tick, or as many whole scenario seconds as the wall-clock
	// timeout takes at the longest tick.
	timeout := max(time.Second, time.Duration(math.Ceil(float64(r.Timeout)/float64(r.Tick)))*time.Second)
	sc := &scenario.Scenario{
		Name: "probed", Seed: 1, Duration: 120 * time.Second, Tick: time.Second,
		Traffic: scenario.Traffic{Rate: roundTo(capacity*probeLoad, 3), Arrivals: "constant", Clients: 200, Idempotent: 1},
		Origin: scenario.Origin{
			Model: scenario.ModelQueue, Capacity: capacity, Workers: workers, Discipline: "fifo", Replicas: 1,
		},
		Triggers: []scenario.Trigger{{Kind: scenario.TriggerCapacity, At: 30 * time.Second, For: 10 * time.Second, Capacity: roundTo(capacity/3, 3)}},
		Fleets: []scenario.Fleet{
			{
				Name: "naive", Timeout: timeout,
				Retry:   scenario.Retry{MaxRetries: probeRetries, Backoff: scenario.Backoff{Use: "exponential", Base: timeout / 10, Cap: 10 * timeout, Multiplier: 2, Jitter: "none"}},
				Budget:  scenario.Budget{Use: scenario.BudgetNone},
				Breaker: scenario.Breaker{Use: scenario.BreakerNone},
			},
			{
				Name: "guarded", Timeout: timeout,
				Retry:   scenario.Retry{MaxRetries: probeRetries, IdempotentOnly: true, Backoff: scenario.Backoff{Use: "exponential", Base: timeout / 10, Cap: 10 * timeout, Multiplier: 2, Jitter: "full"}},
				Budget:  scenario.Budget{Use: scenario.BudgetTokenBucket, TokenBucket: budget.TokenBucketSettings{Ratio: 0.1, Funding: budget.FundedBySuccess, MinTokens: 10, MaxTokens: 100, RetryCost: 1, TimeoutCost: 1}},
				Breaker: scenario.Breaker{Use: scenario.BreakerConsecutive, Threshold: 5, Cooldown: 5 * timeout, Probes: 1, Scope: "all"},
			},
		},
	}
	// Long enough for the claims about recovery (MinDuration), in tens
	// of ticks.
	if need, _, err := MinDuration(context.Background(), sc); err == nil && need > sc.Duration {
		sc.Duration = min((need + 10*sc.Tick - 1).Truncate(10*sc.Tick), maxProbeTicks*sc.Tick)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Measured by retrystorm lab --probe against %s:\n", r.URL)
	fmt.Fprintf(&b, "#   latency at rest %s (the median of %d requests one after the other);\n", r.Rest.Round(10*time.Microsecond), restProbes)
	fmt.Fprintf(&b, "#   at %.0f/s (the ramp's first step): p50 %s, p99 %s;\n", r.Steps[0].Rate, seconds(r.RestP50), seconds(r.RestP99))
	fmt.Fprintf(&b, "#   the knee at %.0f/s sent: p50 %s, p99 %s; %.1f requests in the service\n", r.Steps[r.Knee].Rate, seconds(r.KneeP50), seconds(r.KneeP99), r.Concurrency)
	fmt.Fprintf(&b, "#     (Little's law: throughput × mean latency);\n")
	fmt.Fprintf(&b, "#   capacity %.0f requests/s (the highest throughput of the ramp below):\n", r.Capacity)
	fmt.Fprintf(&b, "#     %s;\n", r.Why)
	fmt.Fprintf(&b, "#   workers %d = capacity × latency at rest (Little's law).\n", r.Workers)
	fmt.Fprintf(&b, "# The ramp, open loop, in wall-clock time:\n")
	fmt.Fprintf(&b, "#   %8s %8s %10s %10s %10s %7s %10s\n", "sent/s", "served/s", "p50", "p90", "p99", "failed", "sent late")
	for _, s := range r.Steps {
		fmt.Fprintf(&b, "#   %8.0f %8.0f %10s %10s %10s %6.1f%% %10s\n", s.Rate, s.Throughput, seconds(s.P50), seconds(s.P90), seconds(s.P99), 100*s.Errors, seconds(s.LateP99))
	}
	if r.Impose {
		fmt.Fprintf(&b, "# The lab cannot storm %.0f requests/s on one machine (the naive fleet's\n", r.Capacity)
		fmt.Fprintf(&b, "# retries would need %.0f attempts/s, beyond its %.0f): the replay imposes a\n", r.Capacity*(1+probeRetries)*probeLoad, MaxAttemptRate)
		fmt.Fprintf(&b, "# queue of %.0f requests/s on the service (--impose); to storm it at its own\n", wallCap)
		fmt.Fprintf(&b, "# capacity, split the load over machines (--shard i/n, docs/lab.md).\n")
	}
	fmt.Fprintf(&b, "# Written for a lab tick of %s (a timeout of %s: ten times the latency seen): one\n", Short(r.Tick), Short(r.Timeout))
	fmt.Fprintf(&b, "# scenario second is %s of wall time, so the capacity is %g per scenario\n", Short(r.Tick), capacity)
	fmt.Fprintf(&b, "# second and a request holds a worker %s of scenario time.\n", roundDuration(service))
	fmt.Fprintf(&b, "# Replay it: %s\n", r.Replay)
	fmt.Fprintf(&b, "# Simulate it: retrystorm run FILE\n")
	fmt.Fprintf(&b, "# The traffic, the dip and the fleets are the storm experiment's, scaled to\n")
	fmt.Fprintf(&b, "# this capacity: edit them freely.\n")
	b.Write(scenario.Marshal(sc))
	return []byte(b.String())
}

// roundTo rounds x to n significant digits.
func roundTo(x float64, n int) float64 {
	if x == 0 || math.IsInf(x, 0) || math.IsNaN(x) {
		return x
	}
	p := math.Pow(10, float64(n)-math.Ceil(math.Log10(math.Abs(x))))
	return math.Round(x*p) / p
}

// roundDuration rounds d to two significant digits, at least a millisecond.
func roundDuration(d time.Duration) time.Duration {
	if d < time.Millisecond {
		return time.Millisecond
	}
	return time.Duration(roundTo(float64(d.Milliseconds()), 2)) * time.Millisecond
}
