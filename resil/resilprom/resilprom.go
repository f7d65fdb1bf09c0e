// Package resilprom exports a [resil.Guard]'s signals as Prometheus
// metrics: intents, attempts, retries, hedges, budget denials, breaker
// refusals, adaptive-throttle refusals and fallbacks as counters; the
// breaker's state, the throttle's refusal probability, the budget's
// balance and retries per request as gauges; and a histogram of attempt
// durations. [RegisterShedder] exports a server's [admission.Shedder]: requests
// admitted, refused by reason and dropped, and the concurrency limit, the
// requests in flight and in the queue, and the service-time estimate. Every
// metric is named resil_* and carries a const label name (which guard or
// shedder). Collectors are registered on the Registerer given, never on
// the global one.
//
// Counters and gauges are read from [resil.Guard.Stats] at scrape time, so
// they cost the guarded calls nothing; the histogram is fed by an observer
// added with [resil.Guard.Observe], which makes every attempt read the clock
// twice.
package resilprom

import (
	"errors"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/retrystorm/retrystorm/resil"
)

// Options configures [RegisterWith]. The zero value is usable but for Name,
// which is required. RegisterWith copies what it needs; the Options may be
// reused.
type Options struct {
	// Name is the value of the name label that tells guards apart.
	// Required.
	Name string
	// Buckets are the attempt-duration histogram's upper bounds in
	// seconds. Nil means DefaultBuckets.
	Buckets []float64
	// ConstLabels are added to every metric, beside name.
	ConstLabels prometheus.Labels
}

// DefaultBuckets span 1ms to about 16s, doubling: attempt latencies from a
// cache hit to a timeout.
var DefaultBuckets = prometheus.ExponentialBuckets(0.001, 2, 15)

// Collector is the Prometheus collector of one Guard. Make one with
// [Register] or [RegisterWith]; the zero value is not usable. It is safe for
// concurrent use, as Prometheus requires.
type Collector struct {
	g        *resil.Guard
	counters []counterDesc
	state    *prometheus.Desc
	throttle *prometheus.Desc // nil: the policy has no throttler
	tokens   *prometheus.Desc
	rpr      *prometheus.Desc
	latency  *prometheus.HistogramVec
	// series caches latency's histogram of each kind and outcome, made
	// on first use (so that /metrics shows only what happened): looking a
	// series up by its labels hashes them, on every attempt.
	series [maxKinds][maxOutcomes]atomic.Pointer[series]

	mu         sync.Mutex
	unobserve  func()
	registerer prometheus.Registerer
}

// maxKinds and maxOutcomes bound the kinds and outcomes whose histogram
// series are cached; others are looked up by their labels.
const maxKinds, maxOutcomes = 4, 8

type series struct{ prometheus.Observer }

type counterDesc struct {
	desc *prometheus.Desc
	get  func(resil.Stats) uint64
}

// Register registers g's collectors on reg with the label name=name. It
// returns an error if reg refuses them (for example a second guard with the
// same name).
func Register(reg prometheus.Registerer, name string, g *resil.Guard) (*Collector, error) {
	return RegisterWith(reg, g, Options{Name: name})
}

// RegisterWith is [Register] with options.
func RegisterWith(reg prometheus.Registerer, g *resil.Guard, o Options) (*Collector, error) {
	if reg == nil || g == nil {
		return nil, errors.New("resilprom: a Registerer and a Guard are required")
	}
	labels, err := o.labels()
	if err != nil {
		return nil, err
	}
	desc := func(metric, help string) *prometheus.Desc {
		return prometheus.NewDesc("resil_"+metric, help, nil, labels)
	}
	c := &Collector{g: g, registerer: reg}
	for _, x := range []struct {
		metric, help string
		get          func(resil.Stats) uint64
	}{
		{"intents_total", "Guarded calls started.", func(s resil.Stats) uint64 { return s.Intents }},
		{"attempts_total", "Attempts sent: first attempts, retries and hedges.", func(s resil.Stats) uint64 { return s.Attempts }},
		{"retries_total", "Retries sent.", func(s resil.Stats) uint64 { return s.Retries }},
		{"hedges_total", "Hedged attempts sent.", func(s resil.Stats) uint64 { return s.Hedges }},
		{"failures_total", "Guarded calls that ended with an error.", func(s resil.Stats) uint64 { return s.Failures }},
		{"budget_denials_total", "Retries and hedges the retry budget refused.", func(s resil.Stats) uint64 { return s.BudgetDenials }},
		{"breaker_refusals_total", "Attempts the circuit breaker refused.", func(s resil.Stats) uint64 { return s.BreakerRefusals }},
		{"throttle_refusals_total", "Attempts the adaptive throttle refused locally.", func(s resil.Stats) uint64 { return s.ThrottleRefusals }},
		{"fallbacks_total", "Refused calls a fallback answered.", func(s resil.Stats) uint64 { return s.Fallbacks }},
	} {
		c.counters = append(c.counters, counterDesc{desc(x.metric, x.help), x.get})
	}
	c.state = desc("breaker_state", "Circuit breaker state: 0 closed, 1 open, 2 half-open.")
	if g.Policy().Throttle != nil {
		c.throttle = desc("throttle_probability", "Adaptive throttle's probability of refusing an attempt now.")
	}
	c.tokens = desc("budget_tokens", "Retry budget balance, in retries of unit cost.")
	c.rpr = desc("retries_per_request", "Retries sent per guarded call since start: the retry-storm early warning.")
	buckets := o.Buckets
	if buckets == nil {
		buckets = DefaultBuckets
	}
	c.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:        "resil_attempt_duration_seconds",
		Help:        "Duration of attempts, by kind (first, retry, hedge) and outcome.",
		ConstLabels: labels,
		Buckets:     buckets,
	}, []string{"kind", "outcome"})
	if err := reg.Register(c); err != nil {
		return nil, err
	}
	c.unobserve = g.Observe(c.observe)
	return c, nil
}

// labels returns the const labels: name and ConstLabels.
func (o Options) labels() (prometheus.Labels, error) {
	if o.Name == "" {
		return nil, errors.New("resilprom: Options.Name is required")
	}
	labels := prometheus.Labels{"name": o.Name}
	for k, v := range o.ConstLabels {
		labels[k] = v
	}
	return labels, nil
}

func (c *Collector) observe(e resil.Event) {
	if e.Kind == resil.EventAttempt {
		c.observer(e.Attempt.Kind, e.Outcome).Observe(e.Took.Seconds())
	}
}

// observer returns latency's series of kind k and outcome o.
func (c *Collector) observer(k resil.Kind, o resil.Outcome) prometheus.Observer {
	if int(k) >= maxKinds || int(o) >= maxOutcomes {
		return c.latency.WithLabelValues(k.String(), o.String())
	}
	p := &c.series[k][o]
	if s := p.Load(); s != nil {
		return s.Observer
	}
	s := &series{c.latency.WithLabelValues(k.String(), o.String())}
	p.Store(s) // a race stores the same series: WithLabelValues returns one per labels
	return s.Observer
}

// Describe sends the descriptors of every metric.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, x := range c.counters {
		ch <- x.desc
	}
	ch <- c.state
	if c.throttle != nil {
		ch <- c.throttle
	}
	ch <- c.tokens
	ch <- c.rpr
	c.latency.Describe(ch)
}

// Collect reads the Guard's Stats and sends the metrics.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	s := c.g.Stats()
	for _, x := range c.counters {
		ch <- prometheus.MustNewConstMetric(x.desc, prometheus.CounterValue, float64(x.get(s)))
	}
	ch <- prometheus.MustNewConstMetric(c.state, prometheus.GaugeValue, float64(s.BreakerState))
	if c.throttle != nil {
		ch <- prometheus.MustNewConstMetric(c.throttle, prometheus.GaugeValue, s.ThrottleProbability)
	}
	if s.HasBudgetTokens {
		ch <- prometheus.MustNewConstMetric(c.tokens, prometheus.GaugeValue, s.BudgetTokens)
	}
	ch <- prometheus.MustNewConstMetric(c.rpr, prometheus.GaugeValue, s.RetriesPerRequest)
	c.latency.Collect(ch)
}

// Unregister removes the collectors from the Registerer they were
// registered on and stops feeding the histogram. It reports whether they
// were registered.
func (c *Collector) Unregister() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.unobserve != nil {
		c.unobserve()
		c.unobserve = nil
	}
	return c.registerer.Unregister(c)
}
