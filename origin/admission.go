package origin

import (
	"context"
	"time"

	"github.com/retrystorm/retrystorm/resil"
	"github.com/retrystorm/retrystorm/resil/admission"
)

// Admission is a server's admission control in front of its model, as
// resilhttp.Shed is in front of an HTTP handler, on the model's time: on
// arrival it asks a admission.Shedder (without a queue: the model's is the
// server's) to admit the request, which refuses it at once when its
// deadline has passed or is too near for the service-time estimate, or
// when the concurrency limit is reached; and it ends the Shedder's ticket
// when the model is done with the request, as the middleware does when the
// handler returns: a drop (a congestion signal for an adaptive limit) when
// the request's deadline passed before then or the model dropped it while
// its client waited, nothing when the model dropped it after its client
// went away early, and otherwise a latency sample, from arrival to the
// answer or refusal. The limit so counts every request the server holds,
// waiting or in service, until it answers, refuses or drops it.
//
// New makes one when the scenario's origin has a limit or sheds by
// deadline. Its memory is a ticket (72 bytes) per request number the
// limit has admitted; without a limit it holds none.
type Admission struct {
	inner   Model
	d       Driver
	sh      *admission.Shedder
	clock   clock
	tickets []admission.ShedTicket // by request, while admitted under a limit
}

// Arrive admits r through the Shedder and hands it to the model, or
// refuses it at once.
func (a *Admission) Arrive(now time.Duration, r Request) {
	a.clock.now = instant(now)
	var deadline time.Time
	if at, ok, _ := a.d.Deadline(r); ok {
		deadline = instant(at)
	}
	t, err := a.sh.Admit(context.Background(), deadline)
	if err != nil {
		a.d.Reject(r, now)
		return
	}
	if a.sh.Limiter() != nil {
		if int(r) >= len(a.tickets) {
			a.tickets = append(a.tickets, make([]admission.ShedTicket, int(r)+1-len(a.tickets))...)
		}
		a.tickets[r] = t
	}
	a.inner.Arrive(now, r)
}

// end gives r's ticket back at now, the model being done with it, by the
// middleware's rule: a drop when r's deadline had passed, and otherwise a
// latency sample, unless the model dropped r unanswered: then a drop while
// its client waited, and nothing when it had gone (another attempt
// answered it: the end says nothing about the load).
func (a *Admission) end(now time.Duration, r Request, dropped bool) {
	if int(r) >= len(a.tickets) || !a.tickets[r].Admitted() {
		return
	}
	t := a.tickets[r]
	a.tickets[r] = admission.ShedTicket{}
	a.clock.now = instant(now)
	at, ok, gone := a.d.Deadline(r)
	switch late := ok && now > at; {
	case late:
		a.sh.Done(t, true)
	case dropped && gone:
		a.sh.Ignore(t)
	default:
		a.sh.Done(t, dropped)
	}
}

// Done ends r's service in the model, then gives its ticket back.
func (a *Admission) Done(now time.Duration, r Request) {
	a.end(now, r, false)
	a.inner.Done(now, r)
}

// Left tells the model that r's client gave up.
func (a *Admission) Left(now time.Duration, r Request) { a.inner.Left(now, r) }

// SetConditions puts c in force in the model.
func (a *Admission) SetConditions(now time.Duration, c Conditions) { a.inner.SetConditions(now, c) }

// WouldAnswer reports whether a request arriving now would be admitted
// and answered within timeout: not when the limit is reached or the
// timeout is shorter than the service-time estimate.
func (a *Admission) WouldAnswer(now, timeout time.Duration) bool {
	if l := a.sh.Limiter(); l != nil && l.InFlight() >= l.Limit() {
		return false
	}
	if dl := a.sh.Deadline(); dl != nil && dl.Decide(instant(now), instant(now+timeout)) != admission.ShedNone {
		return false
	}
	return a.inner.WouldAnswer(now, timeout)
}

// Queued returns the model's.
func (a *Admission) Queued() int { return a.inner.Queued() }

// Busy returns the model's.
func (a *Admission) Busy() int { return a.inner.Busy() }

// Shedder returns the admission.Shedder the admission drives.
func (a *Admission) Shedder() *admission.Shedder { return a.sh }

// The Admission is the model's driver: it sees what the model decides
// about each request, to give its ticket back, and passes it on.

// Answer passes r's answer on; the capacity model, which answers on
// arrival, has no Admission.
func (a *Admission) Answer(r Request, at time.Duration) { a.d.Answer(r, at) }

// Serve passes r's service on.
func (a *Admission) Serve(r Request, now, end time.Duration) { a.d.Serve(r, now, end) }

// Reject gives r's ticket back and passes the refusal on.
func (a *Admission) Reject(r Request, now time.Duration) {
	a.end(now, r, false)
	a.d.Reject(r, now)
}

// Drop gives r's ticket back and passes the drop on.
func (a *Admission) Drop(r Request, now time.Duration) {
	a.end(now, r, true)
	a.d.Drop(r, now)
}

// Deadline passes the driver's.
func (a *Admission) Deadline(r Request) (time.Duration, bool, bool) { return a.d.Deadline(r) }

// clock is an Admission's resil.Clock: the model's time, set before each
// call to the Shedder. A Shedder without a queue makes no timer.
type clock struct{ now time.Time }

func (c *clock) Now() time.Time                              { return c.now }
func (c *clock) NewTimer(time.Duration) resil.Timer          { return noTimer{} }
func (c *clock) AfterFunc(time.Duration, func()) resil.Timer { return noTimer{} }

// noTimer never fires.
type noTimer struct{}

func (noTimer) C() <-chan time.Time { return nil }
func (noTimer) Stop() bool          { return true }
