package sim

import (
	"time"

	"github.com/retrystorm/retrystorm/origin"
	"github.com/retrystorm/retrystorm/scenario"
)

// rejectDelay is how long an overload rejection takes to reach its client:
// "at once", but not in zero time, so a client that retries without backoff
// still lets virtual time move.
const rejectDelay = int64(time.Millisecond)

// originDriver is the fleet as the driver of its origin's models (package
// origin): what a model decides about an attempt becomes an event on the
// fleet's queue. A Request is an attempt's slot.
type originDriver fleet

// newOrigin returns the fleet's origin: one model per replica, each
// reporting to the fleet.
func (f *fleet) newOrigin(o *scenario.Origin, replicas int) error {
	f.origin = make([]origin.Model, replicas)
	for r := range f.origin {
		m, err := origin.New(o, r, replicas, (*originDriver)(f))
		if err != nil {
			return err
		}
		f.origin[r] = m
	}
	return nil
}

// Answer is an answer known on arrival: its outcome is drawn now.
func (d *originDriver) Answer(r origin.Request, at time.Duration) {
	f := (*fleet)(d)
	f.answerAt(int32(r), int64(at), f.outcome(int32(r)))
}

// Serve schedules the end of the attempt's service.
func (d *originDriver) Serve(r origin.Request, _, end time.Duration) {
	f := (*fleet)(d)
	f.atts[r].serving = true
	f.complete(int32(r), int64(end))
}

// Reject answers the attempt with an overload rejection.
func (d *originDriver) Reject(r origin.Request, now time.Duration) {
	(*fleet)(d).reject(int32(r), int64(now))
}

// Drop is a shedding origin skipping the attempt, unanswered.
func (d *originDriver) Drop(r origin.Request, _ time.Duration) {
	f := (*fleet)(d)
	f.atts[r].serving = false
	f.drop(int32(r))
}

// Deadline is the attempt's deadline, which every attempt propagates: an
// answer at it is in time. Its client is gone once it no longer waits.
func (d *originDriver) Deadline(r origin.Request) (time.Duration, bool, bool) {
	x := &(*fleet)(d).atts[r]
	return time.Duration(x.deadline), true, x.state != waiting
}

// setConditions puts the env in force at the origin's replicas from now:
// each holds an equal share of the capacity.
func (f *fleet) setConditions(now int64) {
	share := f.env.capacity / float64(len(f.origin))
	for r, m := range f.origin {
		m.SetConditions(time.Duration(now), origin.Conditions{Capacity: share, Factor: f.env.factor[r]})
	}
}

// queued is the origin's queue series: the sum over its replicas.
func (f *fleet) queued() int64 {
	n := 0
	for _, m := range f.origin {
		n += m.Queued()
	}
	return int64(n)
}
