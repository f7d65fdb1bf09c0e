package scenario

import (
	"encoding"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/retrystorm/retrystorm/giveup"
	"github.com/retrystorm/retrystorm/resil"
	"github.com/retrystorm/retrystorm/resil/admission"
	"github.com/retrystorm/retrystorm/resil/budget"
)

// The file's shape: one table per YAML map, bound to the struct it fills,
// with each key's kinds, whether it is required, and the defaults. Keys
// appear in the order Marshal writes them. docs/scenario.md documents
// every one of them: keep it in step.

// Names of the kinds and choices, as the file spells them. The choices
// that are resil's (a backoff's schedule and jitter, a budget's funding, a
// breaker's rule and scope) are resil's own words, from its enums'
// MarshalText: the file takes its vocabulary from the library, and
// NewPolicy reads it back with UnmarshalText.
var (
	models       = []string{ModelCapacity, ModelQueue, ModelConcurrency}
	triggerKinds = append([]string{TriggerCapacity, TriggerErrors, TriggerOutage, TriggerLoad, TriggerLatency}, newTriggerKinds...)
	outageModes  = []string{OutageRefuse, OutageRefusePod, OutageBlackhole, OutageStall}
	errorAnswers = []string{AnswerError, AnswerRejection}
	budgetKinds  = []string{BudgetNone, BudgetTokenBucket, BudgetWindow, BudgetGRPC, BudgetAWS, BudgetConcurrency, BudgetAWSAdaptive}
	breakerRules = resilWords(resil.ConsecutiveFailures, resil.CountWindow, resil.TimeWindow)
	breakerKinds = append([]string{BreakerNone}, breakerRules...)
	schedules    = resilWords(resil.NoDelay, resil.Fixed, resil.Exponential)
	jitters      = resilWords(resil.NoJitter, resil.FullJitter, resil.EqualJitter, resil.DecorrelatedJitter, resil.FactorJitter)
	arrivals     = []string{"constant", "poisson", ArrivalsClosed}
	disciplines  = resilWords(admission.FIFO, admission.LIFO, admission.AdaptiveLIFO)
	limitAlgos   = resilWords(admission.LimitFixed, admission.LimitAIMD, admission.LimitGradient, admission.LimitVegas)
	limitKinds   = append([]string{LimitNone}, limitAlgos...)
	throttles    = []string{ThrottleNone, ThrottleAdaptive}
	fundings     = resilWords(budget.FundedBySuccess, budget.FundedByRequest, budget.FundedByAnswer)
	scopes       = resilWords(resil.GuardAll, resil.GuardRetries)
	failureKinds = giveup.Kinds // RetryOnError, RetryOnRejection, RetryOnGateway, RetryOnTimeout, RetryOnRefused
	protocols    = []string{ProtocolHTTP, ProtocolGRPC}
	products     = productWords()
	proxies      = products[1:] // the products that run beside a replica
)

// productWords are the products of package giveup.
func productWords() []string {
	out := make([]string, len(giveup.Products))
	for i, p := range giveup.Products {
		out[i] = string(p)
	}
	return out
}

// resilWords returns the words of resil's enum values vs. Every value given has
// one; a test checks that none is empty.
func resilWords[T encoding.TextMarshaler](vs ...T) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		b, _ := v.MarshalText()
		out[i] = string(b)
	}
	return out
}

// resilWord is the word of one of resil's enum values.
func resilWord(v encoding.TextMarshaler) string { return resilWords(v)[0] }

func scenarioObject(s *Scenario) *object {
	return &object{
		block: true,
		fields: []field{
			{key: "name", v: text{&s.Name}},
			{key: "seed", v: unsigned{&s.Seed}},
			{key: "duration", need: true, v: duration{&s.Duration}},
			{key: "tick", v: duration{&s.Tick}},
			{key: "shared", v: omitZero{boolean{&s.Shared}}},
			{key: "traffic", optional: func() bool { return s.Shared }, v: trafficValue{s}},
			{key: "origin", v: originObject(&s.Origin)},
			{key: "tiers", v: list[Tier]{&s.Tiers, tierObject}},
			{key: "triggers", v: list[Trigger]{&s.Triggers, triggerObject}},
			{key: "fleets", need: true, why: "(a scenario runs at least one fleet)", v: list[Fleet]{&s.Fleets, fleetObject}},
		},
		preset: func(string) { s.Seed, s.Tick = 1, time.Second },
		check:  s.check,
	}
}

func trafficObject(t *Traffic) *object {
	return &object{
		fields: []field{
			{key: "rate", need: true, why: "(it has no default; or give a series)", unless: "series", optional: t.Closed, v: rate{t}},
			{key: "series", v: series{&t.Series}},
			{key: "arrivals", v: word{p: &t.Arrivals, words: arrivals}},
			{key: "clients", v: integer{&t.Clients}},
			{key: "idempotent", v: number{&t.Idempotent}},
			{key: "keys", v: number{&t.Keys}},
			{key: "think", v: omitZero{duration{&t.Think}}},
			{key: "think_dist", v: optWord{word{p: &t.ThinkDist, words: thinkDists}}},
			{key: "ramp", v: rampValue(&t.Ramp)},
		},
		preset: func(string) { t.Arrivals, t.Clients, t.Idempotent = "constant", 1, 1 },
		finish: func(func(string) bool) {
			if t.Series != nil {
				t.Rate = t.Series.Peak()
			}
			if t.Closed() && t.ThinkDist == "" {
				t.ThinkDist = ThinkFixed
			}
		},
		check: t.check,
	}
}

func seriesObject(s *Series) *object {
	return &object{
		fields: []field{
			{key: "file", need: true, v: text{&s.File}},
			{key: "column", v: text{&s.Column}},
			{key: "scale", v: number{&s.Scale}},
		},
		preset: func(string) { s.Scale = 1 },
		check:  s.check,
	}
}

func originObject(o *Origin) *object {
	var (
		withCapacity = []string{ModelCapacity, ModelQueue}
		capacity     = []string{ModelCapacity}
		queue        = []string{ModelQueue}
		concurrency  = []string{ModelConcurrency}
		holding      = []string{ModelQueue, ModelConcurrency} // models that hold requests
	)
	return &object{
		selector: "model", kind: &o.Model, kinds: models, what: "the %s model",
		fields: []field{
			{key: "capacity", kinds: withCapacity, need: true, v: number{&o.Capacity}},
			{key: "rejection_cost", kinds: capacity, v: number{&o.RejectionCost}},
			{key: "latency", kinds: capacity, v: duration{&o.Latency}},
			{key: "workers", kinds: queue, v: integer{&o.Workers}},
			{key: "queue_limit", kinds: queue, v: integer{&o.QueueLimit}},
			{key: "drop_expired", kinds: queue, v: boolean{&o.DropExpired}},
			{key: "discipline", kinds: queue, v: word{p: &o.Discipline, words: disciplines}},
			{key: "max_queue_time", kinds: queue, v: duration{&o.MaxQueueTime}},
			{key: "base", kinds: concurrency, need: true, v: duration{&o.Base}},
			{key: "per_inflight", kinds: concurrency, v: duration{&o.PerInflight}},
			{key: "error_rate", v: number{&o.ErrorRate}},
			{key: "broken", v: number{&o.Broken}},
			{key: "replicas", v: replicas{o}},
			{key: "limit", kinds: holding, v: limitObject(&o.Limit)},
			{key: "shed", kinds: holding, v: shedObject(&o.Shed)},
			{key: "service_time", v: serviceTime{&o.ServiceTime}},
			{key: "load_latency", kinds: queue, v: loadLatencyValue(&o.LoadLatency)},
		},
		preset: func(model string) {
			o.Replicas = 1
			switch model {
			case ModelCapacity:
				o.Latency = 10 * time.Millisecond
			case ModelQueue:
				o.Workers, o.Discipline = 1, "fifo"
			}
		},
		check: o.check,
	}
}

func triggerObject(t *Trigger) *object {
	return &object{
		selector: "kind", kind: &t.Kind, kinds: triggerKinds, what: "kind: %s",
		fields: append([]field{
			{key: "at", v: duration{&t.At}},
			{key: "for", need: true, optional: func() bool { return t.Kind == TriggerFlush }, v: duration{&t.For}},
			{key: "capacity", kinds: []string{TriggerCapacity}, need: true, v: number{&t.Capacity}},
			{key: "error_rate", kinds: []string{TriggerErrors}, need: true, v: number{&t.ErrorRate}},
			{key: "rate", kinds: []string{TriggerLoad}, need: true, v: number{&t.Rate}},
			{key: "factor", kinds: []string{TriggerLatency}, need: true, v: number{&t.Factor}},
			{key: "replicas", kinds: []string{TriggerLatency}, v: integer{&t.Replicas}},
			{key: "replica", kinds: []string{TriggerErrors, TriggerOutage, TriggerLatency, TriggerCPU}, unless: "replicas", v: optReplica{&t.Replica}},
			{key: "mode", kinds: []string{TriggerOutage}, v: word{p: &t.Mode, words: outageModes, unset: OutageBlackhole}},
			{key: "answer", kinds: []string{TriggerErrors}, v: word{p: &t.Answer, words: errorAnswers, unset: AnswerError}},
		}, triggerFields(t)...),
		preset: func(kind string) {
			switch kind {
			case TriggerOutage:
				t.Mode = OutageBlackhole
			case TriggerErrors:
				t.Answer = AnswerError
			case TriggerFlush:
				t.Mode = FlushHard
			}
		},
		check: t.check,
	}
}

func fleetObject(f *Fleet) *object {
	return &object{
		block: true,
		fields: []field{
			{key: "name", need: true, v: text{&f.Name}},
			{key: "timeout", need: true, v: duration{&f.Timeout}},
			{key: "deadline", v: duration{&f.Deadline}},
			{key: "retry", v: retryObject(&f.Retry)},
			{key: "budget", need: true, why: "(write budget: {use: none} for none)", v: budgetObject(&f.Budget)},
			{key: "breaker", v: breakerObject(&f.Breaker)},
			{key: "throttle", v: throttleObject(&f.Throttle)},
			{key: "hedge", v: hedgeObject(&f.Hedge)},
			{key: "balancer", v: balancerValue(&f.Balancer)},
			{key: "outlier_detection", v: outlierValue(&f.OutlierDetection)},
			{key: "protocol", v: omitZero{word{p: &f.Protocol, words: protocols, unset: ProtocolHTTP}}},
			{key: "product", v: omitZero{word{p: &f.Product, words: products, unset: string(giveup.App)}}},
			{key: "inbound", v: omitZero{inboundObject(&f.Inbound)}},
			{key: "traffic", v: fleetTraffic{&f.Traffic}},
			{key: "calls", v: omitZero{text{&f.Callee}}},
			{key: "pool", v: poolValue(&f.Pool)},
		},
		check: f.check,
	}
}

func tierObject(t *Tier) *object {
	return &object{
		block: true,
		fields: []field{
			{key: "name", need: true, v: text{&t.Name}},
			{key: "server", need: true, why: "(the tier's server: an origin model, such as {model: queue, capacity: 400, workers: 40}; or a cache: {...})", unless: "cache", v: tierServer{t}},
			{key: "client", need: true, why: "(how the tier calls the next one: at least a timeout and a budget)", v: clientObject(&t.Client)},
			{key: "cache", v: cacheValue{&t.Cache}},
		},
		check: t.check,
	}
}

func clientObject(c *Client) *object {
	return &object{
		block: true,
		fields: []field{
			{key: "timeout", need: true, v: duration{&c.Timeout}},
			{key: "deadline", v: duration{&c.Deadline}},
			{key: "retry", v: retryObject(&c.Retry)},
			{key: "budget", need: true, why: "(write budget: {use: none} for none)", v: budgetObject(&c.Budget)},
			{key: "breaker", v: breakerObject(&c.Breaker)},
			{key: "hedge", v: hedgeObject(&c.Hedge)},
			{key: "propagate_deadline", v: boolean{&c.PropagateDeadline}},
			{key: "balancer", v: balancerValue(&c.Balancer)},
			{key: "outlier_detection", v: outlierValue(&c.OutlierDetection)},
			{key: "protocol", v: omitZero{word{p: &c.Protocol, words: protocols, unset: ProtocolHTTP}}},
			{key: "product", v: omitZero{word{p: &c.Product, words: products, unset: string(giveup.App)}}},
			{key: "inbound", v: omitZero{inboundObject(&c.Inbound)}},
			{key: "pool", v: poolValue(&c.Pool)},
		},
		check: c.check,
	}
}

// omitZero is a value Marshal leaves out while it is zero: a key added
// after files were written (a fleet's protocol, product and inbound
// proxy; its pool and the layer it calls), whose zero is what a file
// without it always meant, so that those files marshal as they always
// did.
type omitZero struct{ value }

func (v omitZero) write() *yaml.Node {
	if v.zero() {
		return nil
	}
	return v.value.write()
}

func (v omitZero) validate(c *checker, path string) {
	if w, ok := v.value.(validator); ok {
		w.validate(c, path)
	}
}

func inboundObject(ib *Inbound) *object {
	return &object{
		fields: []field{
			{key: "product", v: word{p: &ib.Product, words: proxies, unset: string(giveup.Envoy)}},
			{key: "retries", v: integer{&ib.Retries}},
		},
		check: ib.check,
	}
}

func retryObject(r *Retry) *object {
	return &object{
		fields: []field{
			{key: "max_retries", v: retries{&r.MaxRetries}},
			{key: "idempotent_only", v: boolean{&r.IdempotentOnly}},
			{key: "on", v: wordList{&r.On, failureKinds}},
			{key: "backoff", v: backoffObject(&r.Backoff)},
		},
		check: r.check,
	}
}

func backoffObject(b *Backoff) *object {
	return &object{
		selector: "use", kind: &b.Use, kinds: schedules, defKind: resilWord(resil.NoDelay), absentKind: resilWord(resil.NoDelay), what: "use: %s",
		fields: []field{
			{key: "base", v: duration{&b.Base}},
			{key: "cap", v: duration{&b.Cap}},
			{key: "multiplier", kinds: []string{resilWord(resil.Exponential)}, v: number{&b.Multiplier}},
			{key: "jitter", v: word{p: &b.Jitter, words: jitters}},
			{key: "factor", v: number{&b.Factor}},
		},
		preset: func(use string) {
			b.Jitter = resilWord(resil.NoJitter)
			if use == resilWord(resil.Exponential) {
				b.Multiplier = 2
			}
		},
		check: b.check,
	}
}

func hedgeObject(h *Hedge) *object {
	return &object{
		fields: []field{
			{key: "delay", v: duration{&h.Delay}},
			{key: "max", v: integer{&h.Max}},
		},
		finish: func(has func(string) bool) {
			if h.Delay > 0 && !has("max") {
				h.Max = 1
			}
		},
	}
}

func limitObject(l *Limit) *object {
	var (
		adaptive = []string{LimitAIMD, LimitGradient, LimitVegas}
		aimd     = []string{LimitAIMD}
		gradient = []string{LimitGradient}
		vegas    = []string{LimitVegas}
	)
	settings := &object{
		kind: &l.Use, absentKind: LimitNone, what: "%s",
		fields: []field{
			{key: "limit", kinds: []string{LimitFixed}, need: true, v: integer{&l.Limit}},
			{key: "limit", kinds: adaptive, v: integer{&l.Limit}},
			{key: "min_limit", kinds: adaptive, v: integer{&l.MinLimit}},
			{key: "max_limit", kinds: adaptive, v: integer{&l.MaxLimit}},
			{key: "backoff", kinds: aimd, v: number{&l.Backoff}},
			{key: "slow_rtt", kinds: aimd, v: duration{&l.SlowRTT}},
			{key: "smoothing", kinds: []string{LimitGradient, LimitVegas}, v: number{&l.Smoothing}},
			{key: "tolerance", kinds: gradient, v: number{&l.Tolerance}},
			{key: "headroom", kinds: gradient, v: number{&l.Headroom}},
			{key: "window", kinds: gradient, v: duration{&l.Window}},
			{key: "window_samples", kinds: gradient, v: integer{&l.WindowSamples}},
			{key: "long_window", kinds: gradient, v: integer{&l.LongWindow}},
			{key: "probe", kinds: vegas, v: integer{&l.Probe}},
		},
		// The adaptive algorithms' defaults are resil's own, read back
		// from a limiter built with none set.
		preset: func(use string) { l.presetDefaults(use) },
	}
	return &object{
		selector: "use", kind: &l.Use, kinds: limitKinds, absentKind: LimitNone, what: "%s",
		fields: []field{{key: "settings", v: settings}},
		check:  l.check,
	}
}

// DefaultLimit returns the limit of kind use as the loader reads
// "limit: {use: USE}": the adaptive algorithms with resil's defaults
// written out. A fixed limit still needs its Limit.
func DefaultLimit(use string) Limit {
	l := Limit{Use: use}
	l.presetDefaults(use)
	return l
}

// presetDefaults fills in resil's defaults for an adaptive algorithm.
func (l *Limit) presetDefaults(use string) {
	var a admission.LimitAlgorithm
	if use == LimitNone || use == LimitFixed || a.UnmarshalText([]byte(use)) != nil {
		return
	}
	lim, err := admission.NewLimiter(Limit{}.settings(a))
	if err != nil {
		return
	}
	switch s := lim.Settings().(type) {
	case admission.AIMDLimit:
		l.Limit, l.MinLimit, l.MaxLimit = s.Limit, s.MinLimit, s.MaxLimit
		l.Backoff, l.SlowRTT = s.Backoff, s.SlowRTT
	case admission.GradientLimit:
		l.Limit, l.MinLimit, l.MaxLimit = s.Limit, s.MinLimit, s.MaxLimit
		l.Smoothing, l.Tolerance, l.Headroom = s.Smoothing, s.Tolerance, s.Headroom
		l.Window, l.WindowSamples, l.LongWindow = s.Window, s.WindowSamples, s.LongWindow
	case admission.VegasLimit:
		l.Limit, l.MinLimit, l.MaxLimit = s.Limit, s.MinLimit, s.MaxLimit
		l.Smoothing, l.Probe = s.Smoothing, s.Probe
	}
}

func shedObject(s *Shed) *object {
	return &object{
		fields: []field{
			{key: "deadline", v: boolean{&s.Deadline}},
			{key: "service_time", v: duration{&s.ServiceTime}},
			{key: "reserve", v: duration{&s.Reserve}},
		},
		check: s.check,
	}
}
