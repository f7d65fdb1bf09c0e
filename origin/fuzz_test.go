package origin

import (
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/resil/admission"
	"github.com/retrystorm/retrystorm/scenario"
)

// reqState is where a request stands, as a checking driver sees it.
type reqState uint8

const (
	unseen reqState = iota
	waiting
	serving
	finished // answered, rejected or dropped
)

// checker is a Driver that keeps each request's state and fails on any
// decision a model may not make: serving a request twice, deciding about
// one that is not waiting, ending service before it starts.
type checker struct {
	t        *testing.T
	now      time.Duration
	state    []reqState
	end      []time.Duration // when each request's service ends, if serving
	deadline []time.Duration
	answered int
}

func (c *checker) decided(r Request, from reqState, to reqState, what string) {
	if c.state[r] != from {
		c.t.Fatalf("%v: %s %d, which is in state %d", c.now, what, r, c.state[r])
	}
	c.state[r] = to
}

func (c *checker) Answer(r Request, at time.Duration) {
	if at < c.now {
		c.t.Fatalf("%v: answer %d at %v, in the past", c.now, r, at)
	}
	c.decided(r, waiting, finished, "answer")
	c.answered++
}

func (c *checker) Serve(r Request, now, end time.Duration) {
	if now != c.now || end < now {
		c.t.Fatalf("%v: serve %d from %v until %v", c.now, r, now, end)
	}
	c.decided(r, waiting, serving, "serve")
	c.end[r] = end
}

func (c *checker) Reject(r Request, now time.Duration) { c.decided(r, waiting, finished, "reject") }

func (c *checker) Drop(r Request, now time.Duration) {
	if c.state[r] != waiting && c.state[r] != serving {
		c.t.Fatalf("%v: drop %d in state %d", c.now, r, c.state[r])
	}
	c.state[r] = finished
}

func (c *checker) Deadline(r Request) (time.Duration, bool, bool) {
	return c.deadline[r], true, c.deadline[r] < c.now
}

// FuzzModels drives every model with any sequence of arrivals, ends of
// service (in time order), clients leaving and condition changes, and
// checks the invariants: a request is decided once and never after it is
// finished; the workers in service never exceed their number; the queue
// never exceeds its limit; Busy and Queued count what the driver sees.
func FuzzModels(f *testing.F) {
	f.Add(uint8(1), uint8(2), uint8(3), false, []byte{0, 0, 0, 0, 1, 1, 2, 3, 1, 0, 1})
	f.Add(uint8(1), uint8(1), uint8(0), true, []byte{0, 0, 0, 0, 0, 2, 1, 4, 1, 1, 1, 5, 1})
	f.Add(uint8(0), uint8(0), uint8(0), false, []byte{0, 0, 3, 0, 4, 0, 1, 0})
	f.Add(uint8(2), uint8(3), uint8(1), false, []byte{0, 0, 0, 2, 1, 0, 1, 1})
	f.Add(uint8(3), uint8(0), uint8(2), true, []byte{0, 0, 0, 0, 9, 17, 2, 4, 25, 3, 1})
	f.Add(uint8(4), uint8(1), uint8(1), true, []byte{0, 0, 0, 0, 1, 2, 4, 3, 0, 1})
	f.Add(uint8(5), uint8(1), uint8(2), false, []byte{0, 8, 0, 0, 1, 2, 4, 3, 0, 1, 2, 3})
	f.Fuzz(func(t *testing.T, kind, workers, limit uint8, flag bool, ops []byte) {
		if len(ops) > 400 {
			ops = ops[:400]
		}
		c := &checker{t: t}
		var m Model
		var err error
		dl, _ := admission.NewDeadlineShedder(admission.DeadlineSettings{ServiceTime: 40 * ms})
		discipline := admission.Discipline(limit % 3)
		switch kind % 6 {
		case 0:
			m, err = NewCapacity(CapacitySettings{Capacity: 20, Latency: 30 * ms, RejectionCost: float64(limit%5) / 4}, c)
		case 1:
			m, err = NewQueue(QueueSettings{Capacity: 20, Workers: int(workers%4) + 1, Limit: int(limit % 4), Discipline: discipline % 2, DropExpired: !flag || limit%2 == 1}, c)
		case 2:
			m, err = NewConcurrency(ConcurrencySettings{Base: 50 * ms, PerInflight: ms, StopLeft: flag}, c)
		case 3: // deadline shedding, and resil's wait queue
			s := QueueSettings{Capacity: 20, Workers: int(workers%4) + 1, Limit: int(limit%4) + 1, Discipline: discipline, Shed: true, Reserve: 5 * ms}
			if workers%2 == 0 {
				s.Estimate = dl // else the service time as it stands
			}
			if flag || discipline == admission.AdaptiveLIFO {
				s.MaxWait = time.Duration(workers%5+1) * 20 * ms
			}
			m, err = NewQueue(s, c)
		case 4, 5: // behind an Admission: a limit and deadline shedding
			o := &scenario.Origin{
				Model: scenario.ModelQueue, Capacity: 20, Workers: int(workers%4) + 1, QueueLimit: int(limit % 4), Discipline: "fifo",
				Limit: scenario.Limit{Use: scenario.LimitFixed, Limit: int(limit%5) + 1},
				Shed:  scenario.Shed{Deadline: flag},
			}
			if kind%6 == 5 {
				o.Model, o.Base, o.PerInflight = scenario.ModelConcurrency, 50*ms, ms
				o.Limit = scenario.Limit{Use: scenario.LimitAIMD, Limit: int(limit%5) + 1, MinLimit: 1, MaxLimit: 8, Backoff: 0.5}
			}
			m, err = New(o, 0, 1, c)
		}
		if err != nil {
			t.Fatal(err)
		}
		adm, _ := m.(*Admission)
		inner := m
		if adm != nil {
			inner = adm.inner
		}
		q, _ := inner.(*Queue)
		for i, op := range ops {
			c.now += time.Duration(op>>3) * 7 * ms
			switch op % 6 {
			case 0, 1: // an arrival
				r := Request(len(c.state))
				c.state = append(c.state, waiting)
				c.end = append(c.end, 0)
				c.deadline = append(c.deadline, c.now+time.Duration(op%4)*60*ms)
				m.Arrive(c.now, r)
			case 2, 3: // the earliest end of service falls due
				r, at := Request(-1), time.Duration(0)
				for j, s := range c.state {
					if s == serving && (r < 0 || c.end[j] < at) {
						r, at = Request(j), c.end[j]
					}
				}
				if r >= 0 {
					c.now = max(c.now, at)
					c.state[r] = finished
					c.answered++
					m.Done(c.now, r)
				}
			case 4: // a client in service leaves
				for j, s := range c.state {
					if s == serving && c.deadline[j] < c.now {
						m.Left(c.now, Request(j))
						break
					}
				}
			case 5:
				m.SetConditions(c.now, Conditions{Capacity: float64(op%3) * 10, Factor: 1 + float64(op%2)})
			}
			var inService, queued int
			for _, s := range c.state {
				switch s {
				case serving:
					inService++
				case waiting:
					queued++
				}
			}
			if kind%6 == 0 && queued != 0 {
				t.Fatalf("op %d: the capacity model left %d undecided", i, queued)
			}
			wantQueued := queued
			if q == nil {
				wantQueued = inService // without a queue, the load in service
			}
			if kind%6 != 0 && (m.Busy() != inService || m.Queued() != wantQueued) {
				t.Fatalf("op %d: Busy %d, Queued %d; the driver sees %d in service, %d waiting", i, m.Busy(), m.Queued(), inService, queued)
			}
			if q != nil && (q.busy > q.workers || (q.limit > 0 && q.len() > q.limit)) {
				t.Fatalf("op %d: %d of %d workers busy, %d queued (limit %d)", i, q.busy, q.workers, q.len(), q.limit)
			}
			if adm != nil {
				// Every request the server holds has a permit, and no
				// other: the limit counts them.
				if l := adm.Shedder().Limiter(); l.InFlight() != queued+inService || l.InFlight() > max(l.Limit(), maxLimit(l.Settings())) {
					t.Fatalf("op %d: %d in flight (limit %d); the driver sees %d held", i, l.InFlight(), l.Limit(), queued+inService)
				}
			}
		}
	})
}

// maxLimit is the most an adaptive limit may grow to; for a fixed limit,
// the limit.
func maxLimit(s admission.LimitSettings) int {
	switch s := s.(type) {
	case admission.AIMDLimit:
		return s.MaxLimit
	case admission.GradientLimit:
		return s.MaxLimit
	case admission.VegasLimit:
		return s.MaxLimit
	case admission.FixedLimit:
		return s.Limit
	}
	return 0
}
