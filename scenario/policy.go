package scenario

import (
	"encoding"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/retrystorm/retrystorm/resil"
	"github.com/retrystorm/retrystorm/resil/admission"
)

// NewPolicy builds the resil.Policy one client of the fleet runs. Every
// call makes a new budget, breaker and throttler, because every client
// owns its own: call it once per client. The zero value of a kind ("") is
// read as "none". It fails only for a fleet that does not pass Validate.
// The throttler, if any, draws its refusals from a source seeded from
// crypto/rand; NewPolicyRand takes one, for runs that must repeat.
func (f Fleet) NewPolicy() (resil.Policy, error) { return f.NewPolicyRand(nil) }

// NewPolicyRand is NewPolicy with the source the throttler draws its
// refusals from (nil: seeded from crypto/rand). Give each client a source
// of its own: a throttler must not share one.
func (f Fleet) NewPolicyRand(src rand.Source) (resil.Policy, error) {
	p, err := f.policy(src)
	if err != nil {
		return resil.Policy{}, f.wrap(err)
	}
	return p, nil
}

// NewPolicy builds the resil.Policy one replica of the tier calls the next
// tier with: as Fleet.NewPolicy, one per replica, each with its own budget
// and breaker (labelled with the tier's name). A tier has no throttle.
func (t Tier) NewPolicy() (resil.Policy, error) {
	p, err := t.Client.Fleet(t.Name).policy(nil)
	if err != nil {
		return resil.Policy{}, fmt.Errorf("tier %q: %w", t.Name, err)
	}
	return p, nil
}

func (f Fleet) policy(src rand.Source) (resil.Policy, error) {
	p := resil.Policy{
		MaxRetries: f.Retry.MaxRetries,
		Hedge:      resil.HedgeSettings{Delay: f.Hedge.Delay, Max: f.Hedge.Max},
	}
	var err error
	if p.Backoff, err = f.Retry.Backoff.resil(); err != nil {
		return resil.Policy{}, err
	}
	if p.Budget, err = f.Budget.resil(f); err != nil {
		return resil.Policy{}, err
	}
	if p.Pacer, err = f.Budget.pacer(); err != nil {
		return resil.Policy{}, err
	}
	if p.Breaker, p.BreakerScope, err = f.Breaker.resil(f.Name); err != nil {
		return resil.Policy{}, err
	}
	if p.Throttle, err = f.Throttle.resil(src); err != nil {
		return resil.Policy{}, err
	}
	if err := p.Validate(); err != nil {
		return resil.Policy{}, err
	}
	return p, nil
}

func (f Fleet) wrap(err error) error { return fmt.Errorf("fleet %q: %w", f.Name, err) }

// readWord reads one of resil's enum values from its word, with resil's
// UnmarshalText: the empty word leaves the zero value. what names the
// field in the error.
func readWord(v encoding.TextUnmarshaler, what, word string) error {
	if word == "" {
		return nil
	}
	if err := v.UnmarshalText([]byte(word)); err != nil {
		return fmt.Errorf("unknown %s %q: %w", what, word, err)
	}
	return nil
}

func (b Backoff) resil() (resil.Backoff, error) {
	rb := resil.Backoff{Base: b.Base, Cap: b.Cap, Multiplier: b.Multiplier, Factor: b.Factor}
	if err := readWord(&rb.Schedule, "backoff use", b.Use); err != nil {
		return resil.Backoff{}, err
	}
	if err := readWord(&rb.Jitter, "jitter", b.Jitter); err != nil {
		return resil.Backoff{}, err
	}
	return rb, rb.Validate()
}

// NewLimiter builds one replica's concurrency limiter, or nil for none:
// every replica (every server) has its own, with these settings. It fails
// only for an origin that does not pass Validate.
func (o Origin) NewLimiter() (*admission.Limiter, error) {
	l := o.Limit
	if l.Use == LimitNone || l.Use == "" || !o.holds() {
		return nil, nil
	}
	var a admission.LimitAlgorithm
	if err := readWord(&a, "limit use", l.Use); err != nil {
		return nil, err
	}
	return admission.NewLimiter(l.settings(a))
}

// settings returns the limit's settings for algorithm a, in resil's type
// for it. The loader refuses a key that does not apply to the algorithm,
// so the fields left out here are zero.
func (l Limit) settings(a admission.LimitAlgorithm) admission.LimitSettings {
	switch a {
	case admission.LimitAIMD:
		return admission.AIMDLimit{Limit: l.Limit, MinLimit: l.MinLimit, MaxLimit: l.MaxLimit,
			Backoff: l.Backoff, SlowRTT: l.SlowRTT}
	case admission.LimitGradient:
		return admission.GradientLimit{Limit: l.Limit, MinLimit: l.MinLimit, MaxLimit: l.MaxLimit,
			Smoothing: l.Smoothing, Tolerance: l.Tolerance, Headroom: l.Headroom,
			Window: l.Window, WindowSamples: l.WindowSamples, LongWindow: l.LongWindow}
	case admission.LimitVegas:
		return admission.VegasLimit{Limit: l.Limit, MinLimit: l.MinLimit, MaxLimit: l.MaxLimit,
			Smoothing: l.Smoothing, Probe: l.Probe}
	}
	return admission.FixedLimit{Limit: l.Limit}
}

// QueueDiscipline returns the queue model's discipline as resil's value
// (FIFO for an empty one).
func (o Origin) QueueDiscipline() (admission.Discipline, error) {
	var d admission.Discipline
	err := readWord(&d, "discipline", o.Discipline)
	return d, err
}

// ServiceEstimate is the service time deadline shedding assumes on
// arrival: Shed.ServiceTime, or the origin's service time at its base
// capacity (workers / capacity for the queue model, base for the
// concurrency model). Without Shed.ServiceTime, the queue model decides
// again, when a worker would take a request, by its service time as it
// stands.
func (o Origin) ServiceEstimate() time.Duration {
	if o.Shed.ServiceTime > 0 {
		return o.Shed.ServiceTime
	}
	switch o.Model {
	case ModelQueue:
		if o.Capacity > 0 {
			return time.Duration(float64(o.Workers) / o.Capacity * float64(time.Second))
		}
	case ModelConcurrency:
		return o.Base
	}
	return 0
}
