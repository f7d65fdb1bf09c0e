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

	"github.com/retrystorm/retrystorm/scenario"
)

// ProbeOptions configure Probe.
type ProbeOptions struct {
	// Tick is the lab's wall-clock tick the scenario is written for:
	// rates are scaled by Tick / 1s and durations by its inverse, so that
	// `retrystorm lab --tick Tick` replays the service as measured. Zero
	// means DefaultTick.
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
	P99        float64 `json:"p99_seconds"`
	Errors     float64 `json:"error_share"` // failed (5xx, no answer) of those sent
}

// ProbeResult is what Probe measured, in wall-clock units.
type ProbeResult struct {
	URL      string        `json:"url"`
	Rest     time.Duration `json:"-"` // latency at rest: the median of sequential requests
	Capacity float64       `json:"capacity"`
	Workers  int           `json:"workers"` // capacity × latency at rest (Little's law)
	Steps    []ProbeStep   `json:"steps"`
	Tick     time.Duration `json:"-"`
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
// settle. The capacity is the highest throughput seen.
func Probe(ctx context.Context, t *Target, opts ProbeOptions) (*ProbeResult, error) {
	if opts.Tick <= 0 {
		opts.Tick = DefaultTick
	}
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
	res := &ProbeResult{URL: t.URL.Redacted(), Rest: t.baseline, Tick: opts.Tick}
	timeout := max(20*t.baseline, time.Second)
	// Start where one request at a time would keep up: half the rate
	// its latency at rest allows, at least 10/s.
	rate := min(max(10, 0.5/t.baseline.Seconds()), opts.MaxRate)
	for range ProbeMaxSteps {
		st, err := probeStep(ctx, tr, t, rate, opts.Step, timeout)
		if err != nil {
			return nil, err
		}
		res.Steps = append(res.Steps, st)
		res.Capacity = max(res.Capacity, st.Throughput)
		if opts.Log != nil {
			fmt.Fprintf(opts.Log, "lab: probe: %6.0f/s sent, %6.0f/s served, p50 %s, p99 %s, %.1f%% failed\n",
				st.Rate, st.Throughput, seconds(st.P50), seconds(st.P99), 100*st.Errors)
		}
		saturated := st.Throughput < 0.8*st.Rate || st.P50 > 5*t.baseline.Seconds() || st.Errors > 0.05
		bound := t.Settle
		t.Settle = 5 * time.Second
		if _, err := t.pause(ctx, "the next step"); err != nil {
			return nil, err
		}
		t.Settle = bound
		if saturated || rate >= opts.MaxRate {
			break
		}
		rate = min(rate*probeGrowth, opts.MaxRate)
	}
	res.Workers = max(1, int(math.Round(res.Capacity*t.baseline.Seconds())))
	return res, nil
}

func seconds(s float64) string { return time.Duration(s * 1e9).Round(10 * time.Microsecond).String() }

// probeStep sends rate requests per second for d, open loop, each given
// timeout, and measures what came back.
func probeStep(ctx context.Context, tr http.RoundTripper, t *Target, rate float64, d, timeout time.Duration) (ProbeStep, error) {
	type sample struct {
		done time.Time
		took time.Duration
		ok   bool
	}
	n := int(rate * d.Seconds())
	samples := make([]sample, n)
	start := time.Now().Add(10 * time.Millisecond)
	var wg sync.WaitGroup
	for i := range n {
		if ctx.Err() != nil { // a loop behind its schedule stops too
			wg.Wait()
			return ProbeStep{}, ctx.Err()
		}
		due := start.Add(time.Duration(float64(i) / rate * 1e9))
		if w := time.Until(due); w > 0 {
			select {
			case <-ctx.Done():
				wg.Wait()
				return ProbeStep{}, ctx.Err()
			case <-time.After(w):
			}
		}
		wg.Go(func() {
			took, fail, _ := probeOnce(ctx, tr, t.URL, timeout)
			samples[i] = sample{done: time.Now(), took: took, ok: fail == nil}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return ProbeStep{}, err
	}
	st := ProbeStep{Rate: rate}
	half := start.Add(d / 2)
	end := start.Add(d)
	var took []float64
	served, failed := 0, 0
	for _, s := range samples {
		took = append(took, s.took.Seconds())
		if !s.ok {
			failed++
			continue
		}
		if !s.done.Before(half) && s.done.Before(end) {
			served++
		}
	}
	slices.Sort(took)
	if len(took) > 0 {
		st.P50, st.P99 = took[len(took)/2], took[min(len(took)-1, len(took)*99/100)]
		st.Errors = float64(failed) / float64(len(took))
	}
	st.Throughput = float64(served) / (d / 2).Seconds()
	return st, nil
}

// Scenario writes what the probe measured as a whole scenario file that
// `retrystorm run` and `retrystorm lab --target` accept: the service as a
// queue origin (its capacity, and as many workers as Little's law gives at
// its latency at rest), and the storm experiment's shape scaled to it: an
// intent rate at five sixths of the capacity, a dip to a third of it for
// ten ticks, a naive and a guarded fleet whose timeout is ten times the
// service time. Rates and durations are in scenario time for a lab tick of
// r.Tick (one scenario second lasts r.Tick of wall time); comments say what
// was measured, in wall-clock time.
func (r *ProbeResult) Scenario() []byte {
	scale := r.Tick.Seconds() // wall seconds per scenario second
	capacity := roundTo(r.Capacity*scale, 3)
	service := time.Duration(float64(r.Workers) / capacity * 1e9)
	timeout := max(roundDuration(10*service), time.Millisecond)
	sc := &scenario.Scenario{
		Name: "probed", Seed: 1, Duration: 120 * time.Second, Tick: time.Second,
		Traffic: scenario.Traffic{Rate: roundTo(capacity*5/6, 3), Arrivals: "constant", Clients: 200, Idempotent: 1},
		Origin: scenario.Origin{
			Model: scenario.ModelQueue, Capacity: capacity, Workers: r.Workers, Discipline: "fifo", Replicas: 1,
		},
		Triggers: []scenario.Trigger{{Kind: scenario.TriggerCapacity, At: 30 * time.Second, For: 10 * time.Second, Capacity: roundTo(capacity/3, 3)}},
		Fleets: []scenario.Fleet{
			{
				Name: "naive", Timeout: timeout,
				Retry:   scenario.Retry{MaxRetries: 3, Backoff: scenario.Backoff{Use: "exponential", Base: timeout / 10, Cap: 10 * timeout, Multiplier: 2, Jitter: "none"}},
				Budget:  scenario.Budget{Use: scenario.BudgetNone},
				Breaker: scenario.Breaker{Use: scenario.BreakerNone},
			},
			{
				Name: "guarded", Timeout: timeout,
				Retry:   scenario.Retry{MaxRetries: 3, IdempotentOnly: true, Backoff: scenario.Backoff{Use: "exponential", Base: timeout / 10, Cap: 10 * timeout, Multiplier: 2, Jitter: "full"}},
				Budget:  scenario.Budget{Use: scenario.BudgetTokenBucket, Ratio: 0.1, Funding: "success", MinTokens: 10, MaxTokens: 100, RetryCost: 1, TimeoutCost: 1},
				Breaker: scenario.Breaker{Use: scenario.BreakerConsecutive, Threshold: 5, Cooldown: 5 * timeout, Probes: 1, Scope: "all"},
			},
		},
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Measured by retrystorm lab --probe against %s:\n", r.URL)
	fmt.Fprintf(&b, "#   latency at rest %s (the median of %d requests one after the other);\n", r.Rest.Round(10*time.Microsecond), restProbes)
	fmt.Fprintf(&b, "#   capacity %.0f requests/s (the highest throughput of the ramp below);\n", r.Capacity)
	fmt.Fprintf(&b, "#   workers %d = capacity × latency at rest (Little's law).\n", r.Workers)
	fmt.Fprintf(&b, "# The ramp, open loop, in wall-clock time:\n")
	fmt.Fprintf(&b, "#   %8s %8s %10s %10s %7s\n", "sent/s", "served/s", "p50", "p99", "failed")
	for _, s := range r.Steps {
		fmt.Fprintf(&b, "#   %8.0f %8.0f %10s %10s %6.1f%%\n", s.Rate, s.Throughput, seconds(s.P50), seconds(s.P99), 100*s.Errors)
	}
	fmt.Fprintf(&b, "# Written for a lab tick of %s: one scenario second is %s of wall time, so\n", Short(r.Tick), Short(r.Tick))
	fmt.Fprintf(&b, "# the capacity is %g per scenario second and a request holds a worker %s.\n", capacity, roundDuration(service))
	fmt.Fprintf(&b, "# Replay it: retrystorm lab --target %s --tick %s --config THIS_FILE\n", r.URL, Short(r.Tick))
	fmt.Fprintf(&b, "# Simulate it: retrystorm run THIS_FILE\n")
	fmt.Fprintf(&b, "# The traffic, the dip and the fleets are the storm experiment's, scaled to\n")
	fmt.Fprintf(&b, "# this capacity, with a timeout of ten service times: edit them freely.\n")
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
