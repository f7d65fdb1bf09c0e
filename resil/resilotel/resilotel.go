// Package resilotel reports a [resil.Guard] through OpenTelemetry: its
// counters and gauges as metrics, on the metric.MeterProvider you pass
// (never the global one unless Options.Global asks), an attempt-duration
// histogram, and each call's decisions as span events on the caller's span.
// On the server's side, [InstrumentShedder] reports a [admission.Shedder]'s
// admissions, refusals by reason and concurrency limit (see
// [ShedInstruments]).
//
// # Metrics
//
// The names follow OpenTelemetry's naming rules (lower case, dot
// namespaces, snake_case words, counters named for the things they count,
// no _total, units in UCUM with {annotations}, durations in seconds). No
// semantic convention covers retries; these live under resil.*, and every
// one carries the attribute resil.guard.name (which guard) plus
// Options.Attributes. The Prometheus exporter turns them into the names
// resil/resilprom registers, so both vocabularies say the same:
//
//	resil.intents               counter {intent}   resil_intents_total
//	resil.attempts              counter {attempt}  resil_attempts_total, by resil.attempt.kind:
//	                                               first, retry (resil_retries_total), hedge (resil_hedges_total)
//	resil.failures              counter {intent}   resil_failures_total
//	resil.budget.denials        counter {attempt}  resil_budget_denials_total
//	resil.breaker.refusals      counter {attempt}  resil_breaker_refusals_total
//	resil.throttle.refusals     counter {attempt}  resil_throttle_refusals_total
//	resil.fallbacks             counter {intent}   resil_fallbacks_total
//	resil.breaker.trips         counter {trip}     times the breaker opened from closed
//	resil.breaker.transitions   counter {transition} every state change
//	resil.breaker.state         gauge   {state}    resil_breaker_state: 0 closed, 1 open, 2 half-open
//	resil.budget.tokens         gauge   {token}    resil_budget_tokens
//	resil.throttle.probability  gauge   {probability} resil_throttle_probability (with a throttler)
//	resil.retries_per_request   gauge   {retry}/{request} resil_retries_per_request
//	resil.attempt.duration      histogram s        resil_attempt_duration_seconds, by kind and resil.attempt.outcome
//
// Counters and gauges are read from [resil.Guard.Stats] when the reader
// collects, so they cost the guarded calls nothing. The histogram and the
// span events come from an observer added with [resil.Guard.Observe], which
// makes every attempt read the clock twice.
//
// # Traces
//
// An attempt is a span event on the caller's span (the span in the context
// the call was made with), not a child span: the attempt's own RPC or HTTP
// span, when the client is instrumented (otelgrpc, otelhttp), is already
// the child, and an event per decision adds what resil decided without
// doubling the spans, at no cost when the span is not recording. The
// events:
//
//	resil.attempt        an attempt ended: resil.attempt.number, .kind, .outcome, .duration (s)
//	resil.retry          a retry was scheduled: resil.attempt.number (of the retry), resil.retry.wait (s)
//	resil.hedge          a hedge was sent: resil.attempt.number
//	resil.retry_refused  the budget, the breaker or the throttle refused an attempt: resil.attempt.kind, resil.refusal.reason
//	resil.fallback       a fallback answered a refused call
//	resil.done           the call ended without success: resil.refusal.reason, resil.attempts
//
// resil.refusal.reason is one of budget_exhausted, throttled, breaker_open,
// retries_exhausted, not_idempotent, not_retryable, no_time_left, pushback,
// canceled, deadline_exceeded, error.
package resilotel

import (
	"context"
	"errors"
	"sync"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/retrystorm/retrystorm/resil"
)

// ScopeName is the instrumentation scope of the meter resilotel uses.
const ScopeName = "github.com/retrystorm/retrystorm/resil/resilotel"

// nOutcomes is how many resil.Outcome values there are, OutcomeThrottled
// the last.
const nOutcomes = int(resil.OutcomeThrottled) + 1

// DefaultBuckets are the attempt-duration histogram's bounds in seconds:
// OpenTelemetry's recommended bounds for request durations, 5ms to 10s.
var DefaultBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}

// The attribute keys resilotel sets.
const (
	GuardName      = attribute.Key("resil.guard.name")
	AttemptKind    = attribute.Key("resil.attempt.kind")
	AttemptOutcome = attribute.Key("resil.attempt.outcome")
	AttemptNumber  = attribute.Key("resil.attempt.number")
	AttemptTook    = attribute.Key("resil.attempt.duration")
	RetryWait      = attribute.Key("resil.retry.wait")
	RefusalReason  = attribute.Key("resil.refusal.reason")
	Attempts       = attribute.Key("resil.attempts")
)

// Options configures [Instrument]. The zero value is not usable: Name and
// a MeterProvider (or Global) are required. Instrument copies what it needs.
type Options struct {
	// Name tells guards apart: the value of resil.guard.name. Required.
	Name string
	// MeterProvider makes the meter. Required unless Global.
	MeterProvider metric.MeterProvider
	// Global uses otel.GetMeterProvider() when MeterProvider is nil.
	Global bool
	// Attributes are added to every metric, beside resil.guard.name.
	Attributes []attribute.KeyValue
	// Buckets are the attempt-duration histogram's bounds in seconds. Nil
	// means DefaultBuckets.
	Buckets []float64
	// NoSpanEvents turns the span events off.
	NoSpanEvents bool
}

// meter returns the meter the options name, or an error saying what is
// missing.
func (o Options) meter() (metric.Meter, error) {
	if o.Name == "" {
		return nil, errors.New("resilotel: Options.Name is required")
	}
	mp := o.MeterProvider
	if mp == nil {
		if !o.Global {
			return nil, errors.New("resilotel: Options.MeterProvider is required (or Global to use the global one)")
		}
		mp = otel.GetMeterProvider()
	}
	return mp.Meter(ScopeName), nil
}

// Instruments are one Guard's OpenTelemetry instruments. Make them with
// [Instrument]; the zero value is not usable. They are safe for concurrent
// use.
type Instruments struct {
	g        *resil.Guard
	reg      metric.Registration
	duration metric.Float64Histogram
	// opts[kind][outcome] are the histogram's attribute options, built
	// once so that recording allocates nothing.
	opts  [3][nOutcomes][]metric.RecordOption
	spans bool

	mu        sync.Mutex
	unobserve func()
}

// counter is one counter read from Stats: adding a counter is a line.
type counter struct {
	name, unit, desc string
	get              func(resil.Stats) uint64
}

var counters = []counter{
	{"resil.intents", "{intent}", "Guarded calls started.", func(s resil.Stats) uint64 { return s.Intents }},
	{"resil.failures", "{intent}", "Guarded calls that ended with an error.", func(s resil.Stats) uint64 { return s.Failures }},
	{"resil.budget.denials", "{attempt}", "Retries and hedges the retry budget refused.", func(s resil.Stats) uint64 { return s.BudgetDenials }},
	{"resil.breaker.refusals", "{attempt}", "Attempts the circuit breaker refused.", func(s resil.Stats) uint64 { return s.BreakerRefusals }},
	{"resil.throttle.refusals", "{attempt}", "Attempts the adaptive throttle refused locally.", func(s resil.Stats) uint64 { return s.ThrottleRefusals }},
	{"resil.fallbacks", "{intent}", "Refused calls a fallback answered.", func(s resil.Stats) uint64 { return s.Fallbacks }},
}

// Instrument creates g's instruments on the meter provider and starts
// reporting. Call Close to stop.
func Instrument(g *resil.Guard, o Options) (*Instruments, error) {
	if g == nil {
		return nil, errors.New("resilotel: a Guard is required")
	}
	m, err := o.meter()
	if err != nil {
		return nil, err
	}
	buckets := o.Buckets
	if buckets == nil {
		buckets = DefaultBuckets
	}
	base := append([]attribute.KeyValue{GuardName.String(o.Name)}, o.Attributes...)
	with := func(kv ...attribute.KeyValue) metric.MeasurementOption {
		return metric.WithAttributeSet(attribute.NewSet(append(append([]attribute.KeyValue(nil), base...), kv...)...))
	}
	i := &Instruments{g: g, spans: !o.NoSpanEvents}
	obs, err := newObservables(m)
	if err != nil {
		return nil, err
	}
	if err := i.register(m, obs, metric.WithAttributeSet(attribute.NewSet(base...)), with); err != nil {
		return nil, err
	}
	i.duration, err = m.Float64Histogram("resil.attempt.duration", metric.WithUnit("s"),
		metric.WithDescription("Duration of attempts, by kind (first, retry, hedge) and outcome."),
		metric.WithExplicitBucketBoundaries(buckets...))
	if err != nil {
		_ = i.reg.Unregister()
		return nil, err
	}
	for k := range 3 {
		for out := range nOutcomes {
			i.opts[k][out] = []metric.RecordOption{with(
				AttemptKind.String(resil.Kind(k).String()), AttemptOutcome.String(resil.Outcome(out).String()))}
		}
	}
	i.unobserve = g.Observe(i.observe)
	return i, nil
}

// readCounter is a counter's instrument and how it reads Stats.
type readCounter struct {
	inst metric.Int64ObservableCounter
	get  func(resil.Stats) uint64
}

// observables are the instruments the callback reports, read from Stats
// when the meter collects: the counters of the table above and those
// with attributes or a condition of their own.
type observables struct {
	counters                     []readCounter
	attempts, trips, transitions metric.Int64ObservableCounter
	state                        metric.Int64ObservableGauge
	tokens, rpr, throttle        metric.Float64ObservableGauge
	all                          []metric.Observable // every one, for RegisterCallback
}

// newObservables creates the observable instruments on m, the table's
// counters first.
func newObservables(m metric.Meter) (*observables, error) {
	o := &observables{}
	var err error
	for _, c := range counters {
		inst, err := m.Int64ObservableCounter(c.name, metric.WithUnit(c.unit), metric.WithDescription(c.desc))
		if err != nil {
			return nil, err
		}
		o.counters = append(o.counters, readCounter{inst, c.get})
		o.all = append(o.all, inst)
	}
	o.attempts, err = m.Int64ObservableCounter("resil.attempts", metric.WithUnit("{attempt}"),
		metric.WithDescription("Attempts sent, by kind: first attempts, retries and hedges."))
	if err != nil {
		return nil, err
	}
	o.trips, err = m.Int64ObservableCounter("resil.breaker.trips", metric.WithUnit("{trip}"),
		metric.WithDescription("Times the circuit breaker opened from closed."))
	if err != nil {
		return nil, err
	}
	o.transitions, err = m.Int64ObservableCounter("resil.breaker.transitions", metric.WithUnit("{transition}"),
		metric.WithDescription("Circuit breaker state changes."))
	if err != nil {
		return nil, err
	}
	o.state, err = m.Int64ObservableGauge("resil.breaker.state", metric.WithUnit("{state}"),
		metric.WithDescription("Circuit breaker state: 0 closed, 1 open, 2 half-open."))
	if err != nil {
		return nil, err
	}
	o.tokens, err = m.Float64ObservableGauge("resil.budget.tokens", metric.WithUnit("{token}"),
		metric.WithDescription("Retry budget balance, in retries of unit cost."))
	if err != nil {
		return nil, err
	}
	// {retry}/{request}, not 1: the Prometheus exporter would add _ratio.
	o.rpr, err = m.Float64ObservableGauge("resil.retries_per_request", metric.WithUnit("{retry}/{request}"),
		metric.WithDescription("Retries sent per guarded call since start: the retry-storm early warning."))
	if err != nil {
		return nil, err
	}
	// {probability}, not 1, for the same reason.
	o.throttle, err = m.Float64ObservableGauge("resil.throttle.probability", metric.WithUnit("{probability}"),
		metric.WithDescription("Adaptive throttle's probability of refusing an attempt now."))
	if err != nil {
		return nil, err
	}
	o.all = append(o.all, o.attempts, o.trips, o.transitions, o.state, o.tokens, o.rpr, o.throttle)
	return o, nil
}

// register registers the callback that reports obs from the Guard's
// Stats at each collection, with the Guard's attributes (all) and the
// attempts by kind (with adds the kind); the breaker's counters only with
// a breaker, the budget's tokens only when it has them, the throttle's
// probability only with a throttle.
func (i *Instruments) register(m metric.Meter, obs *observables, all metric.MeasurementOption, with func(...attribute.KeyValue) metric.MeasurementOption) error {
	g := i.g
	byKind := [3]metric.MeasurementOption{
		with(AttemptKind.String(resil.KindFirst.String())),
		with(AttemptKind.String(resil.KindRetry.String())),
		with(AttemptKind.String(resil.KindHedge.String())),
	}
	breaker, throttled := g.Policy().Breaker, g.Policy().Throttle != nil
	var err error
	i.reg, err = m.RegisterCallback(func(_ context.Context, ob metric.Observer) error {
		s := g.Stats()
		for _, c := range obs.counters {
			ob.ObserveInt64(c.inst, int64(c.get(s)), all)
		}
		ob.ObserveInt64(obs.attempts, int64(s.Attempts-s.Retries-s.Hedges), byKind[resil.KindFirst])
		ob.ObserveInt64(obs.attempts, int64(s.Retries), byKind[resil.KindRetry])
		ob.ObserveInt64(obs.attempts, int64(s.Hedges), byKind[resil.KindHedge])
		if breaker != nil {
			ob.ObserveInt64(obs.trips, int64(breaker.Trips()), all)
			ob.ObserveInt64(obs.transitions, int64(breaker.Generation()-1), all)
		}
		ob.ObserveInt64(obs.state, int64(s.BreakerState), all)
		if s.HasBudgetTokens {
			ob.ObserveFloat64(obs.tokens, s.BudgetTokens, all)
		}
		ob.ObserveFloat64(obs.rpr, s.RetriesPerRequest, all)
		if throttled {
			ob.ObserveFloat64(obs.throttle, s.ThrottleProbability, all)
		}
		return nil
	}, obs.all...)
	return err
}

// Close stops reporting: it unregisters the callback and the observer.
func (i *Instruments) Close() error {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.unobserve != nil {
		i.unobserve()
		i.unobserve = nil
	}
	return i.reg.Unregister()
}

func (i *Instruments) observe(e resil.Event) {
	ctx := e.Context
	if ctx == nil {
		ctx = context.Background()
	}
	if e.Kind == resil.EventAttempt && int(e.Attempt.Kind) < 3 && int(e.Outcome) < nOutcomes {
		i.duration.Record(ctx, e.Took.Seconds(), i.opts[e.Attempt.Kind][e.Outcome]...)
	}
	if !i.spans {
		return
	}
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	switch e.Kind {
	case resil.EventAttempt:
		span.AddEvent("resil.attempt", trace.WithTimestamp(e.At), trace.WithAttributes(
			AttemptNumber.Int(e.Attempt.Number), AttemptKind.String(e.Attempt.Kind.String()),
			AttemptOutcome.String(e.Outcome.String()), AttemptTook.Float64(e.Took.Seconds())))
	case resil.EventRetry:
		span.AddEvent("resil.retry", trace.WithTimestamp(e.At), trace.WithAttributes(
			AttemptNumber.Int(e.Attempt.Number), RetryWait.Float64(e.Wait.Seconds())))
	case resil.EventHedge:
		span.AddEvent("resil.hedge", trace.WithTimestamp(e.At), trace.WithAttributes(AttemptNumber.Int(e.Attempt.Number)))
	case resil.EventBudgetDenied, resil.EventBreakerRefused, resil.EventThrottled:
		reason := "budget_exhausted"
		switch e.Kind {
		case resil.EventBreakerRefused:
			reason = "breaker_open"
		case resil.EventThrottled:
			reason = "throttled"
		}
		span.AddEvent("resil.retry_refused", trace.WithTimestamp(e.At), trace.WithAttributes(
			AttemptKind.String(e.Attempt.Kind.String()), AttemptNumber.Int(e.Attempt.Number), RefusalReason.String(reason)))
	case resil.EventFallback:
		span.AddEvent("resil.fallback", trace.WithTimestamp(e.At))
	case resil.EventDone:
		if e.Err == nil {
			return
		}
		n := 0
		if se, ok := errors.AsType[*resil.StopError](e.Err); ok {
			n = se.Attempts
		}
		span.AddEvent("resil.done", trace.WithTimestamp(e.At), trace.WithAttributes(
			RefusalReason.String(Reason(e.Err)), Attempts.Int(n)))
	}
}

// Reason names why a guarded call stopped, as resil.refusal.reason says
// it: the first of resil's reasons that err wraps, else "error".
func Reason(err error) string {
	// The reason first: a StopError wraps both its reason and the last
	// attempt's error, which may itself be a context error.
	if se, ok := errors.AsType[*resil.StopError](err); ok {
		err = se.Reason
	}
	for _, r := range reasons {
		if errors.Is(err, r.err) {
			return r.name
		}
	}
	return "error"
}

var reasons = []struct {
	err  error
	name string
}{
	{resil.ErrBudgetExhausted, "budget_exhausted"},
	{resil.ErrThrottled, "throttled"},
	{resil.ErrBreakerOpen, "breaker_open"},
	{resil.ErrRetriesExhausted, "retries_exhausted"},
	{resil.ErrNotIdempotent, "not_idempotent"},
	{resil.ErrNotRetryable, "not_retryable"},
	{resil.ErrNoTimeLeft, "no_time_left"},
	{resil.ErrPushback, "pushback"},
	{context.Canceled, "canceled"},
	{context.DeadlineExceeded, "deadline_exceeded"},
}
