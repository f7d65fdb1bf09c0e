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
// FIFO, LIFO or adaptive LIFO queue, bounded or not, that serve requests
// whose client left unless the server sheds them) and [Concurrency] (no
// queue; latency grows with the requests in service). [New] makes the one
// a scenario names, behind its [Admission] when the scenario asks for a
// concurrency limit or deadline shedding. A Model is one server: an origin
// of N replicas is N Models, and which one a request reaches (load
// balancing) is the driver's choice.
//
// # Driving a model
//
// A model is a deterministic state machine. It reads no clock and starts no
// goroutine: every method takes the time, as a duration since the run
// began, and the model never changes unless called. It keeps no table of
// requests either (but for an Admission's permits, while a limit holds
// them): a [Request] is the driver's number for one, and the model tells
// the driver what it decides through the [Driver] it was made with, during
// the call that made the decision:
//
//   - Answer(r, at): admitted; the model is done with r, the driver answers
//     it at at (the capacity model).
//   - Serve(r, now, end): r is in service from now; the model's own service
//     would end at end. The driver calls Done(end, r) when service ends (an
//     origin at end; a server whose service is a call to the next tier when
//     that call returns) after it has answered r.
//   - Reject(r, now): refused at once, overloaded or shed; its client hears
//     so at once.
//   - Drop(r, now): skipped, or stopped mid-service, unanswered, because its
//     client will not wait for it (Driver.Deadline said so).
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
// # Service times
//
// Each model has a mean service time, as the scenario's fields and the
// conditions in force make it, and the origin's service_time
// (scenario.ServiceTime) says how each request's time varies around it: a
// [Sampler] draws a factor of mean 1 from the distribution, and the model
// multiplies its mean by it. The mean stays the model's, so a capacity
// dip or a latency trigger scales the whole distribution. Per model:
//
//   - [Queue]: a request holds its worker for workers/capacity × factor ×
//     the draw, made when a worker takes it. One worker, Poisson arrivals
//     and exponential times are the M/M/1 queue; any other distribution
//     M/G/1 (the tests check both against theory).
//   - [Concurrency]: a request takes (base + per_inflight × in service) ×
//     factor × the draw, made on arrival for the load it found.
//   - [Capacity]: an admitted request is answered after latency × the
//     draw; admission, by credit, is unchanged.
//
// What the server decides before it serves (deadline shedding, and
// WouldAnswer's estimate) goes by the mean: a server cannot know how long
// a request will take before it has served it. The draws come from the
// *rand.Rand the driver gives each model (Options.Rand): the simulator's
// streams and the lab's seed, so the same seed gives the same times. The
// fixed distribution draws nothing, and a model without a distribution
// runs as it always did.
//
// # Shedding and limits
//
// Every decision to shed is resil's, made on the model's time: a server
// that sheds by deadline asks a admission.DeadlineShedder whether a request
// can still be answered in time, from the deadline its client propagated
// (Driver.Deadline), on arrival and again when a worker would take it; a
// server with a concurrency limit asks a admission.Limiter for a permit on
// arrival and gives it back when it is done with the request; a queue that
// times its waiters or serves adaptive LIFO is a admission.WaitQueue. On
// arrival, both are a admission.Shedder's, as resilhttp.Shed would make them in
// front of an HTTP handler: the simulator drives an [Admission], the lab
// the middleware itself.
//
// A model is not safe for concurrent use: its driver serialises the calls.
// Its memory is fixed but for the queue model's queue (four bytes per
// waiting request; 32 in a admission.WaitQueue, which takes its room up front)
// and an Admission's table of permits (by request number, while a limit
// holds them).
package origin

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/retrystorm/retrystorm/resil"
	"github.com/retrystorm/retrystorm/resil/admission"
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
	// Reject: r is refused at once, and its client told so: the model is
	// overloaded, or sheds it.
	Reject(r Request, now time.Duration)
	// Drop: r is skipped without service, or its service stopped,
	// unanswered, because its client will not wait for the answer.
	Drop(r Request, now time.Duration)
	// Deadline reports what the server knows of r's client: deadline is
	// the last moment an answer still reaches it in time, when ok (a
	// client that propagated no deadline gives none), and gone reports
	// that it has already stopped waiting (it gave up, or another attempt
	// answered it).
	Deadline(r Request) (deadline time.Duration, ok, gone bool)
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

// New returns server replica (from 0) of an origin of replicas servers, as
// o describes the whole origin, reporting to d: each server has an equal
// share of the capacity, the queue limit and the workers (the first
// servers take the remainder), and a concurrency limit of its own. It is
// the model behind its Admission when o has a limit or sheds by deadline.
// Its conditions are o's until SetConditions.
func New(o *scenario.Origin, replica, replicas int, d Driver) (Model, error) {
	return NewWith(o, replica, replicas, d, Options{})
}

// Options say what a driver does itself around the model.
type Options struct {
	// Shedder is the admission the driver applies itself before Arrive,
	// as the lab's HTTP middleware does: the server is then the model
	// alone, and its queue sheds by the Shedder's DeadlineShedder. Nil:
	// the server admits through an Admission of its own, as o asks.
	Shedder *admission.Shedder
	// Reserve is the time the server keeps for the answer's way back over
	// the wire (the lab's), on top of the scenario's shed.reserve; a
	// Shedder's deadline settings must hold both.
	Reserve time.Duration
	// Rand is the source the server draws its service times from, when
	// the origin's service_time is a distribution (see [Sampler]); the
	// model keeps it, and draws from it only. A distribution without one
	// is an error. Nil is fine for the fixed distribution.
	Rand *rand.Rand
}

// NewWith is New with the driver's options.
func NewWith(o *scenario.Origin, replica, replicas int, d Driver, opts Options) (Model, error) {
	if replicas < 1 || replica < 0 || replica >= replicas {
		return nil, fmt.Errorf("origin: replica %d of %d", replica, replicas)
	}
	service, err := NewSampler(o.ServiceTime, opts.Rand)
	if err != nil {
		return nil, err
	}
	if o.Model == scenario.ModelCapacity {
		return NewCapacity(CapacitySettings{Capacity: o.Capacity / float64(replicas), Latency: o.Latency, RejectionCost: o.RejectionCost, Service: service}, d)
	}
	sh, inner := opts.Shedder, d
	var adm *Admission
	if sh == nil {
		adm = &Admission{d: d}
		own, err := NewShedder(o, &adm.clock)
		switch {
		case err != nil:
			return nil, err
		case own == nil:
			adm = nil // nothing to admit by
		default:
			adm.sh, sh, inner = own, own, adm
		}
	}
	var m Model
	switch o.Model {
	case scenario.ModelQueue:
		s := QueueSettings{
			Capacity: o.Capacity / float64(replicas), Workers: o.Workers / replicas,
			MaxWait: o.MaxQueueTime, Shed: o.Shed.Deadline, DropExpired: o.DropExpired, Reserve: opts.Reserve,
			Service: service, Load: o.LoadLatency,
		}
		if o.Shed.Deadline {
			s.Reserve += o.Shed.Reserve
			if o.Shed.ServiceTime > 0 {
				s.Estimate = sh.Deadline() // the admission's, with its estimate and reserve
			}
		}
		if s.Discipline, err = o.QueueDiscipline(); err != nil {
			return nil, fmt.Errorf("origin: %w", err)
		}
		if replica < o.Workers%replicas {
			s.Workers++
		}
		if o.QueueLimit > 0 {
			s.Limit = (o.QueueLimit + replicas - 1) / replicas
		}
		m, err = NewQueue(s, inner)
	case scenario.ModelConcurrency:
		m, err = NewConcurrency(ConcurrencySettings{Base: o.Base, PerInflight: o.PerInflight, StopLeft: o.Shed.Deadline, Service: service}, inner)
	default:
		return nil, fmt.Errorf("origin: unknown model %q", o.Model)
	}
	if err != nil || adm == nil {
		return m, err
	}
	adm.inner = m
	return adm, nil
}

// ShedderSettings returns the settings of the admission.Shedder that admits
// o's requests on one server: its deadline settings (the service-time
// estimate and the reserve) when o sheds by deadline, a limiter of its own
// when o has a limit, and no queue: the model's queue is the server's. ok
// is false when o asks for neither, and the server admits everything.
func ShedderSettings(o *scenario.Origin) (s admission.ShedderSettings, ok bool, err error) {
	lim, err := o.NewLimiter()
	if err != nil {
		return s, false, fmt.Errorf("origin: the limit: %w", err)
	}
	s.Limiter = lim
	if o.Shed.Deadline {
		s.Deadline = admission.DeadlineSettings{ServiceTime: o.ServiceEstimate(), Reserve: o.Shed.Reserve}
	}
	return s, lim != nil || o.Shed.Deadline, nil
}

// NewShedder returns the admission.Shedder that admits o's requests on one
// server (see ShedderSettings), on clock (nil: the wall clock), or nil when
// o asks for no admission.
func NewShedder(o *scenario.Origin, clock resil.Clock) (*admission.Shedder, error) {
	s, ok, err := ShedderSettings(o)
	if !ok || err != nil {
		return nil, err
	}
	s.Clock = clock
	sh, err := admission.NewShedder(s)
	if err != nil {
		return nil, fmt.Errorf("origin: %w", err)
	}
	return sh, nil
}

// instant is a time on the model's timeline as the time.Time resil takes:
// its decisions depend only on differences of times.
func instant(d time.Duration) time.Time { return time.Unix(0, int64(d)) }

// Renew is New, with the memory of old when old is a model of the same
// kind (a queue keeps its queue's buffer): a driver that runs many short
// runs one after another, as a sweep does, then does not grow a queue anew
// for each. old may be nil; it must not be used again.
func Renew(old Model, o *scenario.Origin, replica, replicas int, d Driver) (Model, error) {
	return RenewWith(old, o, replica, replicas, d, Options{})
}

// RenewWith is Renew with the driver's options.
func RenewWith(old Model, o *scenario.Origin, replica, replicas int, d Driver, opts Options) (Model, error) {
	m, err := NewWith(o, replica, replicas, d, opts)
	if err != nil {
		return nil, err
	}
	if q, prev := queueOf(m), queueOf(old); q != nil && prev != nil {
		q.q = deque{buf: prev.q.buf}
	}
	return m, nil
}

// queueOf returns m's queue model, behind its Admission if it has one, or
// nil when m is no queue.
func queueOf(m Model) *Queue {
	if a, ok := m.(*Admission); ok {
		m = a.inner
	}
	q, _ := m.(*Queue)
	return q
}
