package calibrate

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/retrystorm/retrystorm/scenario"
)

// Value is one fitted number and what the scenario file says of it.
type Value struct {
	V float64
	// Known is false when the metrics do not show it and V is a
	// default; Note says which, and why.
	Known bool
	// Note is the comment: the query it came from and how good the fit
	// is, or why it is not known and where the default comes from.
	Note string
}

// Result is a calibration: every value of the scenario with its note.
type Result struct {
	Source *Source
	Window *Window
	// Rate is the intent rate per second (the median of the window's
	// steps); Steady says whether it is steady enough for one number
	// (RateSeries is the per-step series otherwise).
	Rate       Value
	Steady     bool
	RateSeries []Sample
	// SeriesNote says how RateSeries was smoothed for writing (empty:
	// not smoothed).
	SeriesNote string
	// Missing is the share of the window's steps without a sample of the
	// attempts (Notes say it): unknown, in no rate.
	Missing    float64
	Attempts   Value // attempts per second at the origin (mean)
	Service    ServiceFit
	ServiceOK  bool
	ServiceNte string
	// ServiceTime is the fit in the scenario's words; Scale its mean, in
	// seconds, which the capacity is workers over.
	ServiceTime scenario.ServiceTime
	Scale       float64
	Workers     Value
	Capacity    Value
	Clients     Value
	RetryShare  Value // retries per intent
	ErrorRate   Value // background error share (median of the steps)
	Timeout     Value // seconds
	TimedOut    Value // share of attempts that timed out
	MaxRetries  Value
	Budget      Value // the ratio; Known false and V 0: none seen
	HasBudget   bool
	Breaker     bool
	BreakerNte  string
	Replicas    Value
	// Notes are what the file's head says besides the values.
	Notes []string
	// Config, when set (UseConfig), is the user's own retry policy,
	// written in place of the defaults above; Disagreements are where it
	// and the metrics differ.
	Config        *Config
	Disagreements []Disagreement
}

// Steadiness: a rate is steady when at least SteadyShare of the steps
// are within SteadyBand of the median.
const (
	SteadyBand  = 0.10
	SteadyShare = 0.90
	maxRate     = 1_000_000
)

// MinServiceTime is the shortest mean service time a fit takes: a mean
// gauge below it (HAProxy's is in whole milliseconds) is not a latency,
// and would make a capacity of millions. maxCapacity is the scenario's
// bound on the capacity (scenario/validate.go).
const (
	MinServiceTime = 1e-6 // seconds
	maxCapacity    = 1e9
)

// CoarseBuckets is how far (a factor) an empirical service time's mean,
// from its buckets, may be from the histogram's exact mean; MaxWorkers
// the most workers a fit may give (the scenario's limit).
const (
	CoarseBuckets = 3
	MaxWorkers    = 1_000_000
)

// ErrFit is wrapped by every error of Fit: the window cannot give a
// scenario, and no number is made up.
var ErrFit = errors.New("calibrate")

func fail(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrFit, fmt.Sprintf(format, args...))
}

// Fit fits a scenario to w, from src's metrics (nil: detected). Its
// errors wrap ErrFit and name where the window came from (its files, or
// the server), as w.Where says it.
func Fit(w *Window, src *Source) (*Result, error) {
	r, err := fit(w, src)
	if err != nil {
		return nil, NameWindow(err, ErrFit, w)
	}
	return r, nil
}

// NameWindow returns err, which wraps sentinel (its text "sentinel: ..."),
// with w's Where after the sentinel's text when err does not say it: an
// error about a window names its files or its server. Replay names its
// errors with it too.
func NameWindow(err, sentinel error, w *Window) error {
	if w == nil || w.Where == "" || strings.Contains(err.Error(), w.Where) {
		return err
	}
	msg, ok := strings.CutPrefix(err.Error(), sentinel.Error()+": ")
	if !ok || !errors.Is(err, sentinel) {
		return fmt.Errorf("%s: %w", w.Where, err)
	}
	return fmt.Errorf("%w: %s: %s", sentinel, w.Where, msg)
}

// fit is Fit without the window's name on its errors. It reads the
// window source by source, each in a phase of its own: the traffic, the
// service time, the workers and capacity, the clients, the errors and
// the timeout, the retry policy, the replicas.
func fit(w *Window, src *Source) (*Result, error) {
	if src == nil {
		var err error
		if src, err = Detect(w); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrFit, err)
		}
	}
	r := &Result{Source: src, Window: w, Notes: slices.Clone(w.Notes)}
	q := func(x Ref) string {
		if x.Label == "" {
			return w.Query(x.Metric)
		}
		return x.String()
	}
	att, intents, err := r.fitTraffic(w, src, q)
	if err != nil {
		return nil, err
	}
	if err := r.fitService(w, src); err != nil {
		return nil, err
	}
	if err := r.fitCapacity(w, src, q); err != nil {
		return nil, err
	}
	r.fitClients(w, src, q)
	r.fitErrors(w, src, att, q)
	r.fitTimeout()
	r.fitPolicy(w, src, att, intents, q)
	if src.Healthy.ok() && w.Has(src.Healthy.Metric) {
		h := Gauge(w, src.Healthy)
		r.Replicas = Value{V: median(h.V), Known: true, Note: "the median of " + q(src.Healthy) + ": healthy replicas; the scenario keeps one origin of their total capacity"}
	}
	return r, nil
}

// retrySteps are the intents and the retries per step, from att, the
// attempts, and the query the retries were read from; "" when src shows
// no retries apart from first attempts (every attempt is an intent).
func retrySteps(w *Window, src *Source, att steps, q func(Ref) string) (intents, retries steps, query string) {
	switch {
	case src.Intents.ok() && w.Has(src.Intents.Metric):
		intents = Counter(w, src.Intents)
		retries = minus(att, intents)
		query = q(src.Attempts) + " − " + q(src.Intents)
		if src.Retries.ok() && w.Has(src.Retries.Metric) {
			retries, query = Counter(w, src.Retries), q(src.Retries)
		}
	case src.Retries.ok() && w.Has(src.Retries.Metric):
		retries = Counter(w, src.Retries)
		intents = minus(att, retries)
		query = q(src.Retries)
	default:
		intents = att
	}
	return intents, retries, query
}

// retryShare is the retries per intent over w, from retrySteps' answer
// and att, the attempts; false when w shows no retries apart from first
// attempts, or no intent. Fit's retry share and --config's cross-check
// both take it from here, so that the warning and the file agree.
//
// Where retries are attempts less intents, the totals are subtracted,
// not the steps: a source that counts its intents when they end (gRPC's
// call duration) counts them a step or more after their attempts started
// when calls queue, and a step's difference clamped at 0 would count
// those twice.
func retryShare(w *Window, src *Source, att, intents, retries steps, query string) (float64, bool) {
	in := intents.total()
	if query == "" || !(in > 0) {
		return 0, false
	}
	rt := retries.total()
	if !(src.Retries.ok() && w.Has(src.Retries.Metric)) {
		rt = att.total() - in
	}
	return max(0, rt) / in, true
}

// fitWorkers sets Workers and Capacity.
func (r *Result) fitWorkers(w *Window, src *Source, svc float64, q func(Ref) string) {
	littleL := r.Attempts.V * svc // Little's law: requests in service
	little := fmt.Sprintf("Little's law gives %.3g in service on average (%.4g attempts/s × %s)", littleL, r.Attempts.V, sec(svc))
	var busy steps
	hasBusy := src.Busy.ok() && w.Has(src.Busy.Metric)
	if hasBusy {
		busy = Gauge(w, src.Busy)
		little += fmt.Sprintf("; %s averaged %.3g", q(src.Busy), mean(busy.V))
	}
	switch {
	case src.Limit.ok() && w.Has(src.Limit.Metric):
		lim := median(Gauge(w, src.Limit).V)
		if lim > 0 {
			r.Workers = Value{V: math.Round(lim), Known: true, Note: fmt.Sprintf("the configured limit, the median of %s summed over the servers; %s", q(src.Limit), little)}
			break
		}
		fallthrough
	case hasBusy && src.Queue.ok() && w.Has(src.Queue.Metric):
		queue := Gauge(w, src.Queue)
		var sat []float64
		for i, t := range busy.T {
			if v, ok := queue.at(t); ok && v > 0 {
				sat = append(sat, busy.V[i])
			}
		}
		if len(sat) > 0 {
			r.Workers = Value{V: math.Round(median(sat)), Known: true, Note: fmt.Sprintf("the median of %s over the %d steps where %s > 0 (saturated: requests waited, so every worker was busy); %s",
				q(src.Busy), len(sat), q(src.Queue), little)}
			break
		}
		fallthrough
	case hasBusy:
		peak := quantile(busy.V, 1)
		r.Workers = Value{V: max(1, math.Ceil(peak)), Note: fmt.Sprintf("the origin never saturated in the window (no step with a queue): the workers are at least the peak of %s, %.0f, taken as the default; %s", q(src.Busy), peak, little)}
	case r.inFlight(w, src, svc, q, little):
	default:
		peak := quantile(rateValues(r.RateSeries), 1) * (1 + max(0, r.RetryShare.V)) * svc
		r.Workers = Value{V: max(1, math.Ceil(peak/0.8)), Note: fmt.Sprintf("%s exports no gauge of requests in service: Little's law at the peak rate gives %.3g in service; the default assumes that was 80%% of the workers; %s", src.Name, peak, little)}
	}
	r.Capacity = Value{V: roundTo(r.Workers.V/svc, 6), Known: r.Workers.Known,
		Note: fmt.Sprintf("requests/s = workers / the mean service time of service_time (%.0f / %s)", r.Workers.V, sec(svc))}
	if !r.Workers.Known {
		r.Capacity.Note += ": as uncertain as the workers"
	}
	if src.Capacity.ok() && w.Has(src.Capacity.Metric) {
		r.Capacity.Note += fmt.Sprintf("; the origin's own %s said %.4g (a cross-check, not used)", q(src.Capacity), median(Gauge(w, src.Capacity).V))
	}
}

// Saturation from calls in flight (Source.Started and Finished): a step
// is taken as saturated when the calls in the origin at both its ends
// exceed the most workers any step kept busy on average by a quarter of
// them (and by at least one): calls waited for a worker all the step.
const inFlightMargin = 0.25

// inFlight sets Workers from the calls in flight, where src counts the
// calls its origin started and finished and exports no gauge of those in
// service: in a step where calls waited all along, every worker was busy,
// so the workers are the calls finished in it times the service time
// over the step. It reports whether it found such steps.
func (r *Result) inFlight(w *Window, src *Source, svc float64, q func(Ref) string, little string) bool {
	if !(src.Started.ok() && src.Finished.ok() && w.Has(src.Started.Metric) && w.Has(src.Finished.Metric)) {
		return false
	}
	started, finished, done := Gauge(w, src.Started), Gauge(w, src.Finished), Counter(w, src.Finished)
	in := func(t time.Time) (float64, bool) {
		a, ok := started.at(t)
		b, ok2 := finished.at(t)
		return max(0, a-b), ok && ok2
	}
	step := w.Step.Seconds()
	peak := 0.0
	busy := make([]float64, len(done.V))
	for i, n := range done.V {
		busy[i] = n / step * svc
		peak = max(peak, busy[i])
	}
	bar := max(peak*(1+inFlightMargin), peak+1)
	var sat []float64
	for i, t := range done.T {
		end, ok := in(t)
		begin, ok2 := in(t.Add(-w.Step))
		if ok && ok2 && begin > bar && end > bar {
			sat = append(sat, busy[i])
		}
	}
	if len(sat) == 0 {
		return false
	}
	r.Workers = Value{V: math.Round(median(sat)), Known: true, Note: fmt.Sprintf("the median over the %d saturated steps of the calls finished (%s) per second times the mean service time: the workers busy on average; a step is saturated when the calls in the origin (%s − %s) exceed %.3g at both its ends (the most busy in any step, %.3g, and a quarter more): calls waited for a worker all along; %s",
		len(sat), q(src.Finished), q(src.Started), q(src.Finished), bar, peak, little)}
	return true
}

// emptyQueue returns the steps whose queue was empty at both ends (nil:
// every step, when src has no queue gauge nor latency histogram), and a
// note.
func emptyQueue(w *Window, src *Source) (func(time.Time) bool, string) {
	if !(src.Queue.ok() && w.Has(src.Queue.Metric)) {
		return steadyLatency(w, src)
	}
	qg := Gauge(w, src.Queue)
	empty := map[int64]bool{}
	n := 0
	for i, t := range qg.T {
		if qg.V[i] == 0 && i > 0 && qg.V[i-1] == 0 {
			empty[t.UnixMilli()] = true
			n++
		}
	}
	return func(t time.Time) bool { return empty[t.UnixMilli()] },
		fmt.Sprintf("the %d of %d steps with %s at 0 at both ends (no queueing)", n, len(qg.T), src.Queue.Metric)
}

// countAt is how many series of r have a sample at t.
func countAt(w *Window, r Ref, t time.Time) int {
	n := 0
	for _, s := range w.Series[r.Metric] {
		for _, p := range s.Samples {
			if p.T.Equal(t) {
				n++
				break
			}
		}
	}
	return n
}

// minus is a − b per step, at a's times where b is not Unknown (a time b
// has no value at because b has none there is 0).
func minus(a, b steps) steps {
	out := steps{Unknown: slices.Clone(a.Unknown)}
	for i, t := range a.T {
		if _, gap := slices.BinarySearchFunc(b.Unknown, t, time.Time.Compare); gap {
			out.Unknown = append(out.Unknown, t)
			continue
		}
		v, _ := b.at(t)
		out.T = append(out.T, t)
		out.V = append(out.V, max(0, a.V[i]-v))
	}
	slices.SortFunc(out.Unknown, time.Time.Compare)
	return out
}

func rateValues(s []Sample) []float64 {
	out := make([]float64, len(s))
	for i, p := range s {
		out[i] = p.V
	}
	return out
}

func orQuery(retry, attempts string, intents Ref, w *Window) string {
	if intents.ok() && w.Has(intents.Metric) {
		if intents.Label == "" {
			return w.Query(intents.Metric)
		}
		return intents.String()
	}
	if retry != "" {
		return attempts + " − " + retry
	}
	return attempts
}

// sec writes seconds as a short duration.
func sec(s float64) string {
	d := time.Duration(s * float64(time.Second))
	switch {
	case d >= time.Second:
		return d.Round(time.Millisecond).String()
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond).String()
	}
	return d.Round(time.Microsecond).String()
}

// roundTo rounds x to n significant digits.
func roundTo(x float64, n int) float64 {
	if x == 0 || math.IsInf(x, 0) || math.IsNaN(x) {
		return x
	}
	p := math.Pow(10, float64(n)-math.Ceil(math.Log10(math.Abs(x))))
	return math.Round(x*p) / p
}

// QueuedLatency: without a queue gauge, a step whose mean latency is more
// than this share over the window's median step mean is taken as queued
// (its requests waited), and so are its neighbours (queueing builds and
// drains within a step): the service time is fitted from the others.
//
// A step's mean is of its own observations, and wanders by CV/√n of the
// mean with n of them (CV the latency's coefficient of variation): a bar
// nearer than that drops the steps that happened to draw long service
// times and keeps those that drew short ones, and fits the service time
// short (by 13% at 10 observations a step of an exponential, 30% at 5 of
// a lognormal of σ 1, each step against 25%). So the bar is the larger of
// QueuedLatency and NoiseBars step-mean deviations, CV estimated from the
// steps' own spread (the median absolute deviation of their means, scaled
// by √n: queued steps, fewer than half, do not move it); and with fewer
// than MinSteadyObs observations a step (the median step's) no step is
// dropped: the noise is then as large as any queueing.
const (
	QueuedLatency = 0.25
	NoiseBars     = 4
	MinSteadyObs  = 10
)

// steadyLatency returns the steps that did not queue by their mean
// latency (the histogram's _sum over its _count per step), for a source
// with a latency histogram and no queue gauge.
func steadyLatency(w *Window, src *Source) (func(time.Time) bool, string) {
	all := "every step counted (no queue gauge: the latency may include queueing)"
	if !src.Latency.ok() {
		return nil, all
	}
	f := src.Latency.Filter
	sums := Counter(w, Ref{Metric: src.Latency.Base + "_sum", Label: f.Label, Values: f.Values, Not: f.Not})
	counts := Counter(w, Ref{Metric: src.Latency.Base + "_count", Label: f.Label, Values: f.Values, Not: f.Not})
	var means, ns []float64
	var ts []time.Time
	for i, t := range counts.T {
		if s, ok := sums.at(t); ok && counts.V[i] > 0 {
			means = append(means, s/counts.V[i])
			ns = append(ns, counts.V[i])
			ts = append(ts, t)
		}
	}
	if len(means) < 3 {
		return nil, all
	}
	if n := median(ns); n < MinSteadyObs {
		return nil, fmt.Sprintf("every step counted: the median step has %.3g observations, fewer than %d, so its mean latency is too noisy to tell a queued step (no queue gauge: the latency may include queueing)", n, MinSteadyObs)
	}
	med := median(means)
	dev := make([]float64, len(means))
	for i, m := range means {
		dev[i] = math.Abs(m-med) / med * math.Sqrt(ns[i])
	}
	cv := 1.4826 * median(dev) // the MAD of a normal is 0.6745 σ
	queued := make([]bool, len(means))
	noisy := 0
	for i, m := range means {
		over := QueuedLatency
		if noise := NoiseBars * cv / math.Sqrt(ns[i]); noise > over {
			over = noise
			noisy++
		}
		queued[i] = m > med*(1+over)
	}
	keep := map[int64]bool{}
	for i, t := range ts {
		near := queued[i] || (i > 0 && queued[i-1]) || (i+1 < len(ts) && queued[i+1])
		if !near {
			keep[t.UnixMilli()] = true
		}
	}
	over := fmt.Sprintf("more than %.0f%% over the median step's", 100*QueuedLatency)
	within := fmt.Sprintf("within %.0f%% of the median step's", 100*QueuedLatency)
	if noisy > 0 {
		noise := fmt.Sprintf(" or, in the %d steps with so few observations that their mean wanders more, %d times its noise (the latency's CV, %.2f by the steps' spread, over √n)", noisy, NoiseBars, cv)
		over += noise
		within += noise
	}
	if len(keep) == len(ts) {
		return nil, fmt.Sprintf("every step counted: no step's mean latency was %s (no queue gauge: a steady queue would not show)", over)
	}
	return func(t time.Time) bool { return keep[t.UnixMilli()] },
		fmt.Sprintf("the %d of %d steps whose mean latency, and their neighbours', was %s (no queue gauge: a step over it is taken as queued)", len(keep), len(ts), within)
}

// MinExhausted is the fewest calls that failed every attempt from which
// fitAttempts estimates the attempts a call gets.
const MinExhausted = 5

// fitAttempts estimates the retry policy from failures by status, where
// src counts failed attempts and failed calls by the same status label
// (gRPC): a failed attempt that did not end its call was retried, so a
// status whose failed attempts outnumber its failed calls is retryable;
// and when a share p of the attempts fail with retryable statuses, each
// independently, a call fails all of its M attempts with probability
// p^M, so the calls that failed with them, over all calls, give M.
func (r *Result) fitAttempts(w *Window, src *Source, attempts, calls float64, q func(Ref) string) {
	if !(src.FailedIntents.ok() && w.Has(src.FailedIntents.Metric) && src.Errors.ok() && w.Has(src.Errors.Metric)) || !(calls > 0) || src.Errors.Label == "" {
		return
	}
	byStatus := func(ref Ref) map[string]float64 {
		out := map[string]float64{}
		for _, s := range w.Series[ref.Metric] {
			if v := string(s.Labels[ref.Label]); ref.keeps(s.Labels) {
				if _, done := out[v]; !done {
					out[v] = Counter(w, Ref{Metric: ref.Metric, Label: ref.Label, Values: []string{v}}).total()
				}
			}
		}
		return out
	}
	failed, ended := byStatus(src.Errors), byStatus(src.FailedIntents)
	var retried []string
	var fail, exhausted float64
	for code, f := range failed {
		// A few calls straddle the window's ends: a status counts as
		// retried when at least a tenth of its failed attempts, and 3,
		// did not end their call.
		if f-ended[code] >= max(3, 0.1*f) {
			retried = append(retried, code)
			fail += f
			exhausted += ended[code]
		}
	}
	if len(retried) == 0 {
		return
	}
	slices.Sort(retried)
	p := fail / attempts
	codes := strings.Join(retried, ", ")
	what := fmt.Sprintf("%s (%s, %s) were retried: %.3g%% of the attempts failed with them and %.0f of %.0f calls failed every attempt", codes, q(src.Errors), q(src.FailedIntents), 100*p, exhausted, calls)
	if !(p > 0 && p < 1) {
		return
	}
	if exhausted < MinExhausted {
		atLeast := math.Ceil(math.Log(1/calls) / math.Log(p))
		r.MaxRetries.Note = fmt.Sprintf("%s; %s: too few to estimate the attempts (at least %d), so %s", src.Policy, what, MinExhausted, strings.TrimPrefix(r.MaxRetries.Note, src.Policy+"; "))
		if atLeast >= 2 {
			r.MaxRetries.Note += fmt.Sprintf("; so few suggest %.0f attempts or more, if failures are independent", atLeast)
		}
		return
	}
	m := math.Log(exhausted/calls) / math.Log(p)
	n := max(1, math.Round(m))
	est := fmt.Sprintf("(%.3g)^M = %.3g gives M = %.2f attempts a call, if each attempt fails independently (failures that come together, as in an overload, make M look smaller)", p, exhausted/calls, m)
	if src.MaxAttempts > 0 && n > float64(src.MaxAttempts) {
		n = float64(src.MaxAttempts)
		est += fmt.Sprintf("; taken as %d: %s", src.MaxAttempts, src.MaxAttemptsWhy)
	}
	// No call makes more than M attempts: the attempts per call bound M
	// from below (a hundredth of a call is left for the window's edges,
	// whose attempts belong to calls begun outside it). An estimate
	// below them says the failures were not independent, and M is not
	// known.
	if per := attempts / calls; per > n+0.01 {
		r.MaxRetries.Note = fmt.Sprintf("%s; %s: %s, but the window shows %.3g attempts a call, more than %.0f: the failures were not independent, and the estimate is not used, so %s",
			src.Policy, what, est, per, n, strings.TrimPrefix(r.MaxRetries.Note, src.Policy+"; "))
		return
	}
	r.MaxRetries = Value{V: n - 1, Known: true, Note: fmt.Sprintf("%s; %s: %s", src.Policy, what, est)}
}
