package origin

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/resil/admission"
	"github.com/retrystorm/retrystorm/scenario"
)

const ms = time.Millisecond

// log is a Driver that writes down every decision, and answers Deadline
// from a table of deadlines (a request without one has none) and a set of
// requests whose client is gone.
type log struct {
	lines    []string
	deadline map[Request]time.Duration
	gone     map[Request]bool
}

func (l *log) add(format string, args ...any) {
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}

func (l *log) Answer(r Request, at time.Duration)      { l.add("answer %d at %v", r, at) }
func (l *log) Serve(r Request, now, end time.Duration) { l.add("serve %d until %v", r, end) }
func (l *log) Reject(r Request, now time.Duration)     { l.add("reject %d", r) }
func (l *log) Drop(r Request, now time.Duration)       { l.add("drop %d at %v", r, now) }
func (l *log) Deadline(r Request) (time.Duration, bool, bool) {
	d, ok := l.deadline[r]
	return d, ok, l.gone[r]
}

// take returns what was decided since the last call.
func (l *log) take() string {
	s := strings.Join(l.lines, "; ")
	l.lines = nil
	return s
}

// step is one call to a model on the time grid, and what it must decide.
type step struct {
	at   time.Duration
	op   string // arrive, done, left, set
	r    Request
	c    Conditions // for set
	want string
}

func play(t *testing.T, m Model, l *log, steps []step) {
	t.Helper()
	for i, s := range steps {
		switch s.op {
		case "arrive":
			m.Arrive(s.at, s.r)
		case "done":
			m.Done(s.at, s.r)
		case "left":
			m.Left(s.at, s.r)
		case "set":
			m.SetConditions(s.at, s.c)
		}
		if got := l.take(); got != s.want {
			t.Fatalf("step %d (%s %d at %v): %q, want %q", i, s.op, s.r, s.at, got, s.want)
		}
	}
}

// TestCapacity: 10 per second keeps one request of credit in reserve; a
// rejection costs half a request of work, so rejections delay the next
// admission.
func TestCapacity(t *testing.T) {
	l := &log{}
	m, err := NewCapacity(CapacitySettings{Capacity: 10, Latency: 20 * ms, RejectionCost: 0.5}, l)
	if err != nil {
		t.Fatal(err)
	}
	play(t, m, l, []step{
		{0, "arrive", 1, Conditions{}, "answer 1 at 20ms"},
		{0, "arrive", 2, Conditions{}, "reject 2"},        // credit 0 - 0.5
		{100 * ms, "arrive", 3, Conditions{}, "reject 3"}, // -0.5 + 1 = 0.5: short, now 0
		{200 * ms, "arrive", 4, Conditions{}, "answer 4 at 220ms"},
		{200 * ms, "set", 0, Conditions{Capacity: 20, Factor: 5}, ""}, // the factor does not apply
		{250 * ms, "arrive", 5, Conditions{}, "answer 5 at 270ms"},    // 0 + 20 × 0.05 = 1
		{250 * ms, "done", 5, Conditions{}, ""},
		{250 * ms, "left", 5, Conditions{}, ""},
	})
	if m.WouldAnswer(250*ms, time.Second) || !m.WouldAnswer(350*ms, time.Second) || m.WouldAnswer(350*ms, 10*ms) {
		t.Error("WouldAnswer: no credit at 250ms; credit at 350ms, but not within 10ms")
	}
	if m.Queued() != 0 || m.Busy() != 0 {
		t.Error("a capacity model holds nothing")
	}
}

// TestQueueInfiniteCapacity: at an infinite capacity a request holds its
// worker for no time, and what waited is served at once: no limit.
func TestQueueInfiniteCapacity(t *testing.T) {
	l := &log{}
	m, err := NewQueue(QueueSettings{Capacity: 1, Workers: 1}, l)
	if err != nil {
		t.Fatal(err)
	}
	play(t, m, l, []step{
		{0, "arrive", 1, Conditions{}, "serve 1 until 1s"},
		{10 * ms, "arrive", 2, Conditions{}, ""},
		{20 * ms, "set", 0, Conditions{Capacity: math.Inf(1), Factor: 1}, ""},
		{30 * ms, "done", 1, Conditions{}, "serve 2 until 30ms"},
		{30 * ms, "done", 2, Conditions{}, ""},
		{40 * ms, "arrive", 3, Conditions{}, "serve 3 until 40ms"},
	})
}

// TestQueueDisciplines: one worker at 10 per second holds each request for
// 100 ms; FIFO serves the oldest waiting request next, LIFO the newest.
func TestQueueDisciplines(t *testing.T) {
	for _, c := range []struct {
		lifo bool
		next string
	}{{false, "serve 2 until 200ms"}, {true, "serve 3 until 200ms"}} {
		l := &log{}
		d := admission.FIFO
		if c.lifo {
			d = admission.LIFO
		}
		m, err := NewQueue(QueueSettings{Capacity: 10, Workers: 1, Discipline: d}, l)
		if err != nil {
			t.Fatal(err)
		}
		play(t, m, l, []step{
			{0, "arrive", 1, Conditions{}, "serve 1 until 100ms"},
			{10 * ms, "arrive", 2, Conditions{}, ""},
			{20 * ms, "arrive", 3, Conditions{}, ""},
			{100 * ms, "done", 1, Conditions{}, c.next},
		})
		if m.Queued() != 1 || m.Busy() != 1 {
			t.Errorf("lifo %v: %d queued, %d busy", c.lifo, m.Queued(), m.Busy())
		}
	}
}

// TestQueueLimitAndStall: a full queue rejects; zero capacity stalls the
// workers, which start again, at the new service time, when capacity comes
// back.
func TestQueueLimitAndStall(t *testing.T) {
	l := &log{}
	m, err := NewQueue(QueueSettings{Capacity: 20, Workers: 2, Limit: 1}, l)
	if err != nil {
		t.Fatal(err)
	}
	play(t, m, l, []step{
		{0, "arrive", 1, Conditions{}, "serve 1 until 100ms"},
		{0, "arrive", 2, Conditions{}, "serve 2 until 100ms"},
		{0, "arrive", 3, Conditions{}, ""},
		{0, "arrive", 4, Conditions{}, "reject 4"},
		{50 * ms, "set", 0, Conditions{Capacity: 0, Factor: 1}, ""},
		{100 * ms, "done", 1, Conditions{}, ""}, // stalled: 3 waits
		{100 * ms, "done", 2, Conditions{}, ""},
		{150 * ms, "arrive", 5, Conditions{}, "reject 5"},
		{200 * ms, "set", 0, Conditions{Capacity: 10, Factor: 2}, "serve 3 until 600ms"}, // 2/10 s × 2
	})
	if m.WouldAnswer(200*ms, time.Second) != true || m.WouldAnswer(200*ms, 300*ms) {
		t.Error("WouldAnswer: a free worker serves in 400ms")
	}
}

// TestQueueDropExpired: a waiting request that cannot be answered in time
// is skipped when a worker frees up, and a request whose client leaves
// mid-service frees its worker. Without DropExpired, both are served.
func TestQueueDropExpired(t *testing.T) {
	for _, drop := range []bool{true, false} {
		l := &log{deadline: map[Request]time.Duration{2: 150 * ms, 3: 1000 * ms}}
		m, err := NewQueue(QueueSettings{Capacity: 10, Workers: 1, DropExpired: drop}, l)
		if err != nil {
			t.Fatal(err)
		}
		steps := []step{
			{0, "arrive", 1, Conditions{}, "serve 1 until 100ms"},
			{0, "arrive", 2, Conditions{}, ""},
			{0, "arrive", 3, Conditions{}, ""},
			{0, "arrive", 4, Conditions{}, ""},
		}
		if drop {
			steps = append(steps,
				step{100 * ms, "done", 1, Conditions{}, "drop 2 at 100ms; serve 3 until 200ms"}, // 2 would end at 200ms > 150ms
				step{150 * ms, "left", 3, Conditions{}, "drop 3 at 150ms; serve 4 until 250ms"},
			)
		} else {
			steps = append(steps,
				step{100 * ms, "done", 1, Conditions{}, "serve 2 until 200ms"},
				step{150 * ms, "left", 2, Conditions{}, ""},
				step{200 * ms, "done", 2, Conditions{}, "serve 3 until 300ms"},
			)
		}
		play(t, m, l, steps)
	}
}

// TestConcurrency: every request is served at once, for base + per ×
// (requests in service) × factor.
func TestConcurrency(t *testing.T) {
	l := &log{}
	m, err := NewConcurrency(ConcurrencySettings{Base: 100 * ms, PerInflight: 10 * ms}, l)
	if err != nil {
		t.Fatal(err)
	}
	play(t, m, l, []step{
		{0, "arrive", 1, Conditions{}, "serve 1 until 100ms"},
		{0, "arrive", 2, Conditions{}, "serve 2 until 110ms"},
		{50 * ms, "set", 0, Conditions{Capacity: 0, Factor: 2}, ""}, // capacity does not apply
		{50 * ms, "arrive", 3, Conditions{}, "serve 3 until 290ms"}, // (100 + 20) × 2
		{60 * ms, "left", 3, Conditions{}, ""},                      // it goes on
		{100 * ms, "done", 1, Conditions{}, ""},
	})
	if m.Queued() != 2 || m.Busy() != 2 {
		t.Errorf("%d queued, %d busy, want the 2 in service", m.Queued(), m.Busy())
	}
	if !m.WouldAnswer(100*ms, 240*ms) || m.WouldAnswer(100*ms, 239*ms) {
		t.Error("WouldAnswer: a request now takes (100 + 20) × 2 = 240ms")
	}
}

// TestNewSplitsTheOrigin: each replica gets its share of the capacity, the
// limit and the workers; the first take the remainder.
func TestNewSplitsTheOrigin(t *testing.T) {
	o := &scenario.Origin{Model: scenario.ModelQueue, Capacity: 120, Workers: 7, QueueLimit: 10, Discipline: "lifo"}
	var workers []int
	for r := range 3 {
		m, err := New(o, r, 3, &log{})
		if err != nil {
			t.Fatal(err)
		}
		q := m.(*Queue)
		workers = append(workers, q.workers)
		if q.rate != 40 || q.limit != 4 || !q.lifo {
			t.Errorf("replica %d: rate %g, limit %d, lifo %v", r, q.rate, q.limit, q.lifo)
		}
	}
	if fmt.Sprint(workers) != "[3 2 2]" {
		t.Errorf("workers %v", workers)
	}
	for _, bad := range []*scenario.Origin{
		{Model: "teapot"},
		{Model: scenario.ModelQueue, Capacity: 10, Workers: 0},
		{Model: scenario.ModelCapacity, Capacity: 0},
		{Model: scenario.ModelConcurrency},
	} {
		if _, err := New(bad, 0, 1, &log{}); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
	if _, err := New(o, 3, 3, &log{}); err == nil {
		t.Error("replica 3 of 3: no error")
	}
}

// TestQueueShedFollows: without an estimate of its own, a shedding queue
// decides by its service time as it stands: a dip that makes the work
// longer makes it refuse sooner.
func TestQueueShedFollows(t *testing.T) {
	l := &log{deadline: map[Request]time.Duration{2: 250 * ms, 3: 300 * ms}}
	m, err := NewQueue(QueueSettings{Capacity: 10, Workers: 1, Shed: true}, l)
	if err != nil {
		t.Fatal(err)
	}
	play(t, m, l, []step{
		{0, "arrive", 1, Conditions{}, "serve 1 until 100ms"},
		{0, "arrive", 2, Conditions{}, ""},
		{0, "arrive", 3, Conditions{}, ""},
		{50 * ms, "set", 0, Conditions{Capacity: 5, Factor: 1}, ""}, // 200 ms of work each from now
		{100 * ms, "done", 1, Conditions{}, "reject 2; serve 3 until 300ms"},
	})
}

// TestQueueShed: with deadline shedding (an estimate of 100 ms), a waiting
// request that cannot be answered in time is refused at once when a worker
// frees up, one whose client is gone is dropped unanswered, and a client
// that leaves mid-service frees its worker.
func TestQueueShed(t *testing.T) {
	dl, err := admission.NewDeadlineShedder(admission.DeadlineSettings{ServiceTime: 100 * ms})
	if err != nil {
		t.Fatal(err)
	}
	l := &log{deadline: map[Request]time.Duration{2: 150 * ms, 3: 1000 * ms, 4: time.Second, 5: time.Second}, gone: map[Request]bool{4: true}}
	m, err := NewQueue(QueueSettings{Capacity: 10, Workers: 1, Shed: true, Estimate: dl}, l)
	if err != nil {
		t.Fatal(err)
	}
	play(t, m, l, []step{
		{0, "arrive", 1, Conditions{}, "serve 1 until 100ms"},
		{0, "arrive", 2, Conditions{}, ""},
		{0, "arrive", 3, Conditions{}, ""},
		{0, "arrive", 4, Conditions{}, ""},
		{0, "arrive", 5, Conditions{}, ""},
		{100 * ms, "done", 1, Conditions{}, "reject 2; serve 3 until 200ms"}, // 50ms left, 100ms to go
		{150 * ms, "left", 3, Conditions{}, "drop 3 at 150ms; drop 4 at 150ms; serve 5 until 250ms"},
	})
}

// TestQueueWaitQueue: with resil's wait queue a request that waited longer
// than MaxWait is refused (or dropped, its client gone) when a worker next
// looks, a full queue rejects, and adaptive LIFO serves the newest first
// once the queue has not been empty for MaxWait.
func TestQueueWaitQueue(t *testing.T) {
	l := &log{gone: map[Request]bool{3: true}}
	m, err := NewQueue(QueueSettings{Capacity: 10, Workers: 1, Limit: 3, Discipline: admission.AdaptiveLIFO, MaxWait: 150 * ms}, l)
	if err != nil {
		t.Fatal(err)
	}
	play(t, m, l, []step{
		{0, "arrive", 1, Conditions{}, "serve 1 until 100ms"},
		{10 * ms, "arrive", 2, Conditions{}, ""},
		{20 * ms, "arrive", 3, Conditions{}, ""},
		{80 * ms, "arrive", 4, Conditions{}, ""},
		{90 * ms, "arrive", 5, Conditions{}, "reject 5"},           // full
		{100 * ms, "done", 1, Conditions{}, "serve 2 until 200ms"}, // not overloaded yet: FIFO
		{120 * ms, "arrive", 6, Conditions{}, ""},                  // 3, 4, 6 wait
		// 3 waited 180ms, and its client is gone; the queue has not been
		// empty for 190ms, overloaded: the newest next.
		{200 * ms, "done", 2, Conditions{}, "drop 3 at 200ms; serve 6 until 300ms"},
		{300 * ms, "done", 6, Conditions{}, "reject 4"}, // waited 220ms
	})
	if m.Queued() != 0 || m.Busy() != 0 {
		t.Errorf("%d queued, %d busy", m.Queued(), m.Busy())
	}
	if _, err := NewQueue(QueueSettings{Capacity: 10, Workers: 1, Discipline: admission.AdaptiveLIFO, MaxWait: 150 * ms}, l); err == nil {
		t.Error("a wait queue without a limit: no error")
	}
}

// TestAdmission: a fixed limit of 2 refuses the third request the server
// holds, waiting or in service, and takes one again when the model is
// done with one; deadline shedding refuses on arrival a request whose
// deadline is nearer than the estimate.
func TestAdmission(t *testing.T) {
	o := &scenario.Origin{
		Model: scenario.ModelQueue, Capacity: 10, Workers: 1, Discipline: "fifo",
		Limit: scenario.Limit{Use: scenario.LimitFixed, Limit: 2},
		Shed:  scenario.Shed{Deadline: true},
	}
	l := &log{deadline: map[Request]time.Duration{1: time.Second, 2: time.Second, 3: time.Second, 4: 150 * ms, 5: time.Second}}
	m, err := New(o, 0, 1, l)
	if err != nil {
		t.Fatal(err)
	}
	a, ok := m.(*Admission)
	if !ok {
		t.Fatalf("New made a %T, want an *Admission", m)
	}
	play(t, m, l, []step{
		{0, "arrive", 1, Conditions{}, "serve 1 until 100ms"},
		{0, "arrive", 2, Conditions{}, ""},
		{0, "arrive", 3, Conditions{}, "reject 3"}, // two held
		{100 * ms, "done", 1, Conditions{}, "serve 2 until 200ms"},
		{100 * ms, "arrive", 4, Conditions{}, "reject 4"}, // 50ms to its deadline, 100ms of work
		{100 * ms, "arrive", 5, Conditions{}, ""},
	})
	st := a.Shedder().Stats()
	if st.Admitted != 3 || st.Shed[admission.ShedLimit] != 1 || st.Shed[admission.ShedTooLate] != 1 || st.InFlight != 2 {
		t.Errorf("stats %+v", st)
	}
	if a.WouldAnswer(100*ms, time.Second) {
		t.Error("WouldAnswer with the limit reached")
	}
	// No limit and no shedding: the model alone.
	o.Limit, o.Shed = scenario.Limit{Use: scenario.LimitNone}, scenario.Shed{}
	if m, _ := New(o, 0, 1, l); m == nil {
		t.Fatal("no model")
	} else if _, ok := m.(*Queue); !ok {
		t.Errorf("New made a %T without admission, want a *Queue", m)
	}
}

// TestAdmissionLearns: an adaptive limit hears how each request ended: an
// answer in time is a sample, one after its deadline a drop, so AIMD
// shrinks the limit when the queue makes answers late.
func TestAdmissionLearns(t *testing.T) {
	o := &scenario.Origin{
		Model: scenario.ModelQueue, Capacity: 10, Workers: 1, Discipline: "fifo",
		Limit: scenario.Limit{Use: scenario.LimitAIMD, Limit: 4, MinLimit: 1, MaxLimit: 10, Backoff: 0.5},
	}
	l := &log{deadline: map[Request]time.Duration{1: time.Second, 2: 150 * ms}}
	m, err := New(o, 0, 1, l)
	if err != nil {
		t.Fatal(err)
	}
	lim := m.(*Admission).Shedder().Limiter()
	play(t, m, l, []step{
		{0, "arrive", 1, Conditions{}, "serve 1 until 100ms"},
		{0, "arrive", 2, Conditions{}, ""},
		{100 * ms, "done", 1, Conditions{}, "serve 2 until 200ms"},
	})
	if lim.Limit() != 4 {
		t.Fatalf("limit %d after an answer in time with 2 of 4 in flight, want 4", lim.Limit())
	}
	play(t, m, l, []step{{200 * ms, "done", 2, Conditions{}, ""}}) // 50ms late
	if lim.Limit() != 2 || lim.InFlight() != 0 {
		t.Errorf("limit %d, %d in flight after a late answer, want 2 and 0", lim.Limit(), lim.InFlight())
	}
}

// TestRenewStartsAfresh: a queue renewed from a busy queue decides as a
// new one does, with the old one's buffer; from another kind, or from
// nothing, it is New.
func TestRenewStartsAfresh(t *testing.T) {
	o := &scenario.Origin{Model: scenario.ModelQueue, Capacity: 10, Workers: 1, Discipline: "fifo"}
	busy := &log{}
	old, err := New(o, 0, 1, busy)
	if err != nil {
		t.Fatal(err)
	}
	for r := range Request(100) {
		old.Arrive(0, r)
	}
	steps := []step{
		{0, "arrive", 1, Conditions{}, "serve 1 until 100ms"},
		{10 * ms, "arrive", 2, Conditions{}, ""},
		{100 * ms, "done", 1, Conditions{}, "serve 2 until 200ms"},
	}
	for _, prev := range []Model{old, nil, &Concurrency{}} {
		l := &log{}
		m, err := Renew(prev, o, 0, 1, l)
		if err != nil {
			t.Fatal(err)
		}
		if m.Queued() != 0 || m.Busy() != 0 {
			t.Fatalf("renewed from %T: %d queued, %d busy", prev, m.Queued(), m.Busy())
		}
		play(t, m, l, steps)
	}
	m, _ := Renew(old, o, 0, 1, &log{})
	if got, want := len(m.(*Queue).q.buf), len(old.(*Queue).q.buf); got != want || want < 100 {
		t.Errorf("renewed queue's buffer holds %d, the old one's %d", got, want)
	}
	if _, err := Renew(old, &scenario.Origin{Model: "nonsense"}, 0, 1, &log{}); err == nil {
		t.Error("Renew took an unknown model")
	}
}
