// Package origin is the model of the dependency retrystorm's fleets call: a
// server with finite capacity, as a scenario's origin describes it. It is
// written once and driven twice: the simulator runs it on virtual time,
// from its event queue, and the lab on the wall clock, behind a real HTTP
// or gRPC server. As the fleets of both share resil's policies, both share this
// model, so what the lab measures and what the simulator computes can only
// differ by what the wire and the clock add.
//
// # Models
//
// One type per model of the scenario file: [Capacity] (admission up to a
// rate, rejections that still cost work), [Queue] (workers in front of a
// FIFO or LIFO queue, bounded or not, that serve requests whose client
// left unless drop_expired) and [Concurrency] (no queue; latency grows with
// the requests in service). [New] makes the one a scenario names. A Model is
// one server: an origin of N replicas is N Models, and which one a request
// reaches (load balancing) is the driver's choice.
//
// # Driving a model
//
// A model is a deterministic state machine. It reads no clock and starts no
// goroutine: every method takes the time, as a duration since the run
// began, and the model never changes unless called. It keeps no table of
// requests either: a [Request] is the driver's number for one, and the
// model tells the driver what it decides through the [Driver] it was made
// with, during the call that made the decision:
//
//   - Answer(r, at): admitted; the model is done with r, the driver answers
//     it at at (the capacity model).
//   - Serve(r, now, end): r is in service from now; the model's own service
//     would end at end. The driver calls Done(end, r) when service ends (an
//     origin at end; a server whose service is a call to the next tier when
//     that call returns) after it has answered r.
//   - Reject(r, now): refused at once, overloaded.
//   - Drop(r, now): skipped, or stopped mid-service, because its client
//     will not wait for it (Expired said so): drop_expired.
//
// The driver tells the model of arrivals (Arrive), ends of service (Done),
// clients that gave up on a request in service (Left) and trigger
// boundaries (SetConditions). It must call them in time order: a driver on
// the wall clock handles the ends of service that fell due, at the time they
// were due, before an arrival it handles now. The simulator does this with
// its event queue; the lab with a heap of due times, one timer, and a
// goroutine per request that waits on a channel for its answer.
//
// Errors are not the model's: whether an answer is a success (the
// background error share, a broken key) is drawn by the driver, as is what
// an outage does in each of its modes (refuse, blackhole, stall: the
// scenario package says what each means); the model decides only who is
// served, when, and who is refused.
//
// # Extending it
//
// A new admission rule (deadline shedding, an adaptive concurrency limit
// from resil) belongs in a model's Arrive, where it may Reject at once, and
// in Done, where capacity comes back (a limit that learns from latency will
// want Done to say how long service took, which the driver knows: it saw
// Serve). The Driver's Expired says whether a request can still be
// answered by a given time, which is all deadline shedding needs. A tier
// in front of another is a model whose driver answers Serve by calling the
// next tier and calls Done when that call returns.
//
// A model is not safe for concurrent use: its driver serialises the calls.
// Its memory is fixed but for the queue model's queue: four bytes per
// waiting request.
package origin

import (
	"fmt"
	"time"

	"github.com/retrystorm/retrystorm/scenario"
)

// Request is the driver's number for one request: an index in a table of
// its own. The model keeps it only while the request waits in a queue.
type Request int32

// Driver is what a model reports its decisions to: the simulator's fleet,
// or the lab's origin server. Its methods are called during the model's,
// in the order the model decides, and must not call the model back.
type Driver interface {
	// Answer: r was admitted, and the model is done with it; the driver
	// answers it at at.
	Answer(r Request, at time.Duration)
	// Serve: r is in service from now; the model's service time would end
	// it at end. The driver calls Done when service ends.
	Serve(r Request, now, end time.Duration)
	// Reject: r is refused at once: the model is overloaded.
	Reject(r Request, now time.Duration)
	// Drop: r is skipped without service, or its service stopped, because
	// its client will not wait for the answer.
	Drop(r Request, now time.Duration)
	// Expired reports whether r's client has stopped waiting for it, or
	// will have by at.
	Expired(r Request, at time.Duration) bool
}

// Conditions are what the triggers change for one server: its capacity
// (requests per second; the queue model's service rate) and its latency
// factor.
type Conditions struct {
	Capacity float64
	Factor   float64
}

// Model is one server of an origin. See the package documentation for how
// a driver uses it.
type Model interface {
	// Arrive is request r reaching the server at now.
	Arrive(now time.Duration, r Request)
	// Done is the end of r's service (after Serve), once the driver has
	// answered it: the server may start what waits.
	Done(now time.Duration, r Request)
	// Left tells the server that the client of r, in service, gave up.
	Left(now time.Duration, r Request)
	// SetConditions puts c in force from now.
	SetConditions(now time.Duration, c Conditions)
	// WouldAnswer reports whether a request arriving now would be answered
	// within timeout, without changing what the server decides: the ground
	// truth for the calls a breaker refused.
	WouldAnswer(now, timeout time.Duration) bool
	// Queued is the load the queue series shows: requests waiting for a
	// worker or, in a model without a queue, those in service.
	Queued() int
	// Busy is the requests in service.
	Busy() int
}

// New returns the model of server replica (from 0) of an origin of
// replicas servers, as o describes the whole origin, reporting to d: each
// server has an equal share of the capacity, the queue limit and the
// workers (the first servers take the remainder). Its conditions are o's
// until SetConditions.
func New(o *scenario.Origin, replica, replicas int, d Driver) (Model, error) {
	if replicas < 1 || replica < 0 || replica >= replicas {
		return nil, fmt.Errorf("origin: replica %d of %d", replica, replicas)
	}
	switch o.Model {
	case scenario.ModelCapacity:
		return NewCapacity(CapacitySettings{Capacity: o.Capacity / float64(replicas), Latency: o.Latency, RejectionCost: o.RejectionCost}, d)
	case scenario.ModelQueue:
		s := QueueSettings{
			Capacity: o.Capacity / float64(replicas), Workers: o.Workers / replicas,
			LIFO: o.Discipline == "lifo", DropExpired: o.DropExpired,
		}
		if replica < o.Workers%replicas {
			s.Workers++
		}
		if o.QueueLimit > 0 {
			s.Limit = (o.QueueLimit + replicas - 1) / replicas
		}
		return NewQueue(s, d)
	case scenario.ModelConcurrency:
		return NewConcurrency(ConcurrencySettings{Base: o.Base, PerInflight: o.PerInflight}, d)
	}
	return nil, fmt.Errorf("origin: unknown model %q", o.Model)
}
