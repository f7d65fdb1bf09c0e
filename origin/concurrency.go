package origin

import (
	"fmt"
	"time"
)

// ConcurrencySettings configure a [Concurrency] model.
type ConcurrencySettings struct {
	// Base is the latency with nothing else in service; more than 0.
	Base time.Duration
	// PerInflight is the latency each request in service adds; not
	// negative.
	PerInflight time.Duration
	// StopLeft stops serving a request whose client gives up (Left), as
	// a server that sheds by deadline does: its service ends at once,
	// unanswered (Drop), and it no longer slows the others.
	StopLeft bool
	// Service draws each request's latency, as a factor of the one the
	// load gives it, on arrival; nil: every request takes that latency.
	Service *Sampler
}

// Concurrency has no queue: every request is served at once, but takes
// base + per_inflight × (requests in service) times the latency factor, as
// the server found it on arrival. So latency grows with load, and requests
// whose client gave up still occupy the server until their service ends:
// it does not notice that a client left, unless StopLeft.
type Concurrency struct {
	d         Driver
	base, per time.Duration
	inflight  int64
	factor    float64
	stopLeft  bool
	sampler   *Sampler
}

// NewConcurrency returns a concurrency model with nothing in service, or
// an error naming an invalid setting.
func NewConcurrency(s ConcurrencySettings, d Driver) (*Concurrency, error) {
	if s.Base <= 0 || s.PerInflight < 0 {
		return nil, fmt.Errorf("origin: the concurrency model needs base > 0 and per_inflight >= 0, got %v and %v", s.Base, s.PerInflight)
	}
	return &Concurrency{d: d, base: s.Base, per: s.PerInflight, factor: 1, stopLeft: s.StopLeft, sampler: s.Service}, nil
}

// latency is how long a request arriving now takes.
func (c *Concurrency) latency() time.Duration {
	l := float64(c.base+c.per*time.Duration(c.inflight)) * c.factor
	return time.Duration(min(l, 1e18)) // the builtin: math.Min's result, NaN included, without its call
}

// Arrive serves r at once, for the latency the load in service gives it.
func (c *Concurrency) Arrive(now time.Duration, r Request) {
	l := c.sampler.Draw(c.latency())
	c.inflight++
	c.d.Serve(r, now, now+l)
}

// Done ends r's service.
func (c *Concurrency) Done(time.Duration, Request) { c.inflight-- }

// Left stops r's service under StopLeft; otherwise the server goes on
// serving.
func (c *Concurrency) Left(now time.Duration, r Request) {
	if c.stopLeft {
		c.inflight--
		c.d.Drop(r, now)
	}
}

// SetConditions takes the latency factor for the requests that arrive from
// now; capacity does not apply to this model.
func (c *Concurrency) SetConditions(now time.Duration, x Conditions) { c.factor = x.Factor }

// WouldAnswer reports whether a request arriving now would be answered
// within timeout.
func (c *Concurrency) WouldAnswer(now, timeout time.Duration) bool { return c.latency() <= timeout }

// Queued returns the requests in service: the load that sets the latency.
func (c *Concurrency) Queued() int { return int(c.inflight) }

// Busy returns the requests in service.
func (c *Concurrency) Busy() int { return int(c.inflight) }
