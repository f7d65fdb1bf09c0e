package origin

import (
	"fmt"
	"math"
	"time"
)

// CapacitySettings configure a [Capacity] model.
type CapacitySettings struct {
	// Capacity is the requests per second the server answers; more than 0.
	Capacity float64
	// Latency is how long an admitted request takes; not negative.
	Latency time.Duration
	// RejectionCost is the share of a request's work a rejection still
	// consumes, in [0, 1].
	RejectionCost float64
	// Service draws each admitted request's latency, as a factor of
	// Latency; nil: every one takes Latency.
	Service *Sampler
}

// Capacity answers up to its capacity and rejects the rest at once.
// Capacity is a rate: the server earns credit at its capacity per second,
// keeps at most a tenth of a second of it in reserve (so Poisson arrivals
// below capacity are absorbed), and spends 1 per admitted request and
// rejection_cost per rejection. Rejections that cost work take credit from
// admissions, so with rejection_cost c an offered load L leaves
// (C - cL)/(1 - c) answered: above C/c the server answers nothing, and the
// collapse can outlive its cause. With c = 0 it always recovers once load
// is below capacity.
//
// An admitted request is answered after the latency: the model is done
// with it at once (Driver.Answer), and Done and Left do nothing. Credit is
// refilled lazily, when a request arrives or the conditions change.
type Capacity struct {
	d       Driver
	latency time.Duration
	sampler *Sampler
	cost    float64
	rate    float64 // per second
	credit  float64
	last    time.Duration // when credit was last brought up to date
}

// NewCapacity returns a capacity model with a full reserve of credit, or an
// error naming an invalid setting.
func NewCapacity(s CapacitySettings, d Driver) (*Capacity, error) {
	if !(s.Capacity > 0) || math.IsInf(s.Capacity, 0) {
		return nil, fmt.Errorf("origin: capacity must be more than 0, got %g", s.Capacity)
	}
	if s.Latency < 0 || !(s.RejectionCost >= 0 && s.RejectionCost <= 1) {
		return nil, fmt.Errorf("origin: latency %v and rejection cost %g: want latency >= 0, cost in [0, 1]", s.Latency, s.RejectionCost)
	}
	c := &Capacity{d: d, latency: s.Latency, sampler: s.Service, cost: s.RejectionCost, rate: s.Capacity}
	c.credit = c.reserve()
	return c, nil
}

func (c *Capacity) reserve() float64 { return max(1, c.rate/10) }

// refill brings the credit up to now at the current rate.
func (c *Capacity) refill(now time.Duration) {
	if dt := now - c.last; dt > 0 {
		c.credit = min(c.reserve(), c.credit+c.rate*float64(dt)/1e9)
		c.last = now
	}
}

// Arrive admits r if the credit covers it, and rejects it otherwise.
func (c *Capacity) Arrive(now time.Duration, r Request) {
	c.refill(now)
	if c.credit >= 1 {
		c.credit--
		c.d.Answer(r, now+c.sampler.Draw(c.latency))
		return
	}
	// A rejection still costs work; the debt is bounded so that a long
	// overload does not leave a debt that outlives it.
	c.credit = max(c.credit-c.cost, -c.reserve())
	c.d.Reject(r, now)
}

// Done does nothing: an admitted request needs nothing more.
func (c *Capacity) Done(time.Duration, Request) {}

// Left does nothing: an admitted request is answered anyway.
func (c *Capacity) Left(time.Duration, Request) {}

// SetConditions refills at the old rate up to now, then takes the new
// capacity. The latency factor does not apply to this model.
func (c *Capacity) SetConditions(now time.Duration, x Conditions) {
	c.refill(now)
	c.rate = x.Capacity
}

// WouldAnswer reports whether the credit would admit a request now and the
// latency is within timeout. Refilling is lazy and pure: it changes no
// decision.
func (c *Capacity) WouldAnswer(now, timeout time.Duration) bool {
	c.refill(now)
	return c.credit >= 1 && c.latency <= timeout
}

// Queued returns 0: nothing waits.
func (c *Capacity) Queued() int { return 0 }

// Busy returns 0: the model does not hold requests.
func (c *Capacity) Busy() int { return 0 }
