package admission_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/retrystorm/retrystorm/resil/admission"
	"github.com/retrystorm/retrystorm/resil/resilhttp"
)

// An AIMD limit learns from drops: it grows by one per request completed
// while the limiter is at least half used, and shrinks by Backoff on a
// drop. Time is an argument.
func ExampleLimiter() {
	l, err := admission.NewLimiter(admission.AIMDLimit{Limit: 4, MaxLimit: 10, Backoff: 0.5})
	if err != nil {
		panic(err)
	}
	now := time.Unix(0, 0)
	var held []admission.LimitPermit
	for {
		p, ok := l.Acquire(now)
		if !ok {
			break
		}
		held = append(held, p)
	}
	fmt.Printf("limit %d, admitted %d\n", l.Limit(), len(held))
	now = now.Add(50 * time.Millisecond)
	l.Release(now, held[3], false) // completed in 50ms, 4 in flight: grow
	l.Release(now, held[2], false)
	fmt.Println("after two completions:", l.Limit())
	l.Release(now, held[1], true) // dropped: halve
	fmt.Println("after a drop:", l.Limit())
	l.Ignore(held[0]) // the caller cancelled: no sample
	fmt.Println("in flight:", l.InFlight())
	// Output:
	// limit 4, admitted 4
	// after two completions: 6
	// after a drop: 3
	// in flight: 0
}

// A Limiter on the client side, around calls to a dependency: the calls
// over the limit fail at once instead of piling up on a slow dependency.
func ExampleLimiter_client() {
	l, _ := admission.NewLimiter(admission.GradientLimit{Limit: 10})
	call := func(ctx context.Context) error {
		p, ok := l.Acquire(time.Now())
		if !ok {
			return errors.New("too many calls in flight")
		}
		err := ctx.Err() // the call to the dependency
		l.Release(time.Now(), p, errors.Is(err, context.DeadlineExceeded))
		return err
	}
	fmt.Println(call(context.Background()), l.InFlight())
	// Output: <nil> 0
}

// A wait queue decides who is served next and who waited too long; the
// driver does the waiting. Adaptive LIFO serves FIFO while the queue
// drains, and LIFO once it has not been empty for MaxWait.
func ExampleWaitQueue() {
	q, err := admission.NewWaitQueue[string](admission.QueueSettings{MaxLen: 8, Discipline: admission.AdaptiveLIFO, MaxWait: time.Second})
	if err != nil {
		panic(err)
	}
	t := time.Unix(0, 0)
	at := func(ms int) time.Time { return t.Add(time.Duration(ms) * time.Millisecond) }
	q.Push(at(0), "a")
	q.Push(at(100), "b")
	v, _, _, _ := q.Next(at(200))
	fmt.Println("burst:", v)
	q.Push(at(900), "c")
	q.Push(at(1000), "d")
	for {
		v, waited, r, ok := q.Next(at(1150))
		if !ok {
			break
		}
		fmt.Println("backlog:", v, waited, r)
	}
	// Output:
	// burst: a
	// backlog: b 1.05s queue_timeout
	// backlog: d 150ms none
	// backlog: c 250ms none
}

// The deadline shedder's three decisions, for a service that needs 100ms.
func ExampleDeadlineShedder() {
	d, err := admission.NewDeadlineShedder(admission.DeadlineSettings{ServiceTime: 100 * time.Millisecond})
	if err != nil {
		panic(err)
	}
	now := time.Unix(0, 0)
	for _, left := range []time.Duration{-time.Millisecond, 50 * time.Millisecond, 300 * time.Millisecond} {
		fmt.Printf("%v left: %v\n", left, d.Decide(now, now.Add(left)))
	}
	fmt.Println("no deadline:", d.Decide(now, time.Time{}))
	// Output:
	// -1ms left: expired
	// 50ms left: too_late
	// 300ms left: none
	// no deadline: none
}

// A Shedder in front of a server's work: deadline checks and a fixed limit
// of one, without a queue. A transport (resilhttp.Shed, a gRPC interceptor)
// does exactly this around its handler.
func ExampleShedder() {
	lim, _ := admission.NewLimiter(admission.FixedLimit{Limit: 1})
	sh, err := admission.NewShedder(admission.ShedderSettings{
		Limiter:    lim,
		Deadline:   admission.DeadlineSettings{ServiceTime: 20 * time.Millisecond},
		RetryAfter: time.Second,
	})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	t, err := sh.Admit(ctx, sh.Now().Add(time.Second))
	fmt.Println("first:", err)
	_, err = sh.Admit(ctx, time.Time{})
	var se *admission.ShedError
	errors.As(err, &se)
	fmt.Println("second:", se.Reason, se.RetryAfter())
	_, err = sh.Admit(ctx, sh.Now().Add(5*time.Millisecond))
	fmt.Println("third:", err)
	sh.Done(t, false)
	st := sh.Stats()
	fmt.Println("admitted", st.Admitted, "over the limit", st.Shed[admission.ShedLimit], "too late", st.Shed[admission.ShedTooLate])
	// Output:
	// first: <nil>
	// second: limit 1s
	// third: resil: request shed: too_late
	// admitted 1 over the limit 1 too late 1
}

// The README's server side: a Shedder with a gradient limit, a learned
// service time and an adaptive-LIFO queue in front of a handler. A request
// with time enough is served; one whose caller has no time left is refused
// at once.
func ExampleShedder_readme() {
	mux := http.NewServeMux()
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "served") })
	// snippet: README.md
	limit, _ := admission.NewLimiter(admission.GradientLimit{})
	shedder, _ := admission.NewShedder(admission.ShedderSettings{
		Limiter:  limit,
		Deadline: admission.DeadlineSettings{Learn: true},
		Queue:    admission.QueueSettings{MaxLen: 100, Discipline: admission.AdaptiveLIFO, MaxWait: 100 * time.Millisecond},
	})
	mux.Handle("/", resilhttp.Shed(shedder)(handler))
	// end snippet
	for _, left := range []string{"1S", "0n"} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set(resilhttp.TimeoutHeader, left)
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, r)
		fmt.Println(left, w.Code, w.Body.String())
	}
	// Output:
	// 1S 200 served
	// 0n 503 resil: request shed: expired
}
