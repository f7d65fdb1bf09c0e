package admission

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrystorm/retrystorm/resil"
)

func mustShedder(t testing.TB, s ShedderSettings) *Shedder {
	t.Helper()
	sh, err := NewShedder(s)
	if err != nil {
		t.Fatal(err)
	}
	return sh
}

// reasonOf returns the reason of a Shedder's refusal, ShedNone for nil.
func reasonOf(t *testing.T, err error) ShedReason {
	t.Helper()
	if err == nil {
		return ShedNone
	}
	se, ok := errors.AsType[*ShedError](err)
	if !ok || !errors.Is(err, ErrShed) {
		t.Fatalf("err = %v, want a *ShedError", err)
	}
	return se.Reason
}

func TestShedderSettings(t *testing.T) {
	lim := mustLimiter(t, FixedLimit{Limit: 1})
	for _, c := range []struct {
		s     ShedderSettings
		field string
	}{
		{ShedderSettings{Deadline: DeadlineSettings{ServiceTime: -1}}, "ShedderSettings.Deadline.ServiceTime"},
		{ShedderSettings{Queue: QueueSettings{MaxLen: 3, MaxWait: time.Second}}, "ShedderSettings.Queue.MaxLen"},
		{ShedderSettings{Limiter: lim, Queue: QueueSettings{MaxLen: 3}}, "ShedderSettings.Queue.MaxWait"},
		{ShedderSettings{RetryAfter: -time.Second}, "ShedderSettings.RetryAfter"},
		{ShedderSettings{RetryAfter: 2 * time.Hour}, "ShedderSettings.RetryAfter"},
	} {
		_, err := NewShedder(c.s)
		wantSettingError(t, err, c.field)
	}
}

func TestShedderDeadline(t *testing.T) {
	clk := newFakeClock(ts(10))
	sh := mustShedder(t, ShedderSettings{Deadline: DeadlineSettings{ServiceTime: 100 * time.Millisecond}, Clock: clk})
	ctx := context.Background()
	for _, c := range []struct {
		deadline time.Time
		want     ShedReason
	}{
		{time.Time{}, ShedNone},
		{ts(9), ShedExpired},
		{ts(10.05), ShedTooLate},
		{ts(10.2), ShedNone},
	} {
		tk, err := sh.Admit(ctx, c.deadline)
		if got := reasonOf(t, err); got != c.want || tk.Admitted() != (c.want == ShedNone) {
			t.Errorf("deadline %v: %v, want %v", c.deadline.Sub(ts(10)), got, c.want)
		}
		sh.Done(tk, false)
	}
	// The context's deadline counts when it is the earlier one.
	cctx, cancel := context.WithDeadline(ctx, ts(10.01))
	defer cancel()
	if _, err := sh.Admit(cctx, ts(20)); reasonOf(t, err) != ShedTooLate {
		t.Errorf("context deadline ignored: %v", err)
	}
	st := sh.Stats()
	if st.Admitted != 2 || st.Shed[ShedExpired] != 1 || st.Shed[ShedTooLate] != 2 || st.Refused() != 3 ||
		st.InFlight != 0 || st.HasLimit || st.ServiceTime != 100*time.Millisecond {
		t.Errorf("stats = %+v", st)
	}
}

func TestShedderLimit(t *testing.T) {
	lim := mustLimiter(t, FixedLimit{Limit: 1})
	sh := mustShedder(t, ShedderSettings{Limiter: lim, RetryAfter: 2 * time.Second})
	ctx := context.Background()
	a, err := sh.Admit(ctx, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = sh.Admit(ctx, time.Time{})
	se, _ := errors.AsType[*ShedError](err)
	if reasonOf(t, err) != ShedLimit || se.Wait != 2*time.Second {
		t.Fatalf("over the limit: %v", err)
	}
	if st := sh.Stats(); st.InFlight != 1 || st.Limit != 1 || !st.HasLimit {
		t.Errorf("stats = %+v", st)
	}
	sh.Done(a, false)
	b, err := sh.Admit(ctx, time.Time{})
	if err != nil {
		t.Fatal("a slot freed by Done was not taken:", err)
	}
	sh.Ignore(b)
	sh.Ignore(b) // ended twice: ignored by the limiter
	if lim.InFlight() != 0 {
		t.Errorf("in flight %d", lim.InFlight())
	}
	// Deadline refusals suggest no wait: retrying cannot help.
	_, err = sh.Admit(ctx, time.Now().Add(-time.Second))
	if se, _ := errors.AsType[*ShedError](err); se == nil || se.Wait != 0 {
		t.Errorf("expired: %v", err)
	}
}

func TestShedderZeroAndNil(t *testing.T) {
	for _, sh := range []*Shedder{{}, nil} {
		tk, err := sh.Admit(context.Background(), time.Time{})
		if reasonOf(t, err) != ShedLimit || !errors.Is(err, resil.ErrNotBuilt) || tk.Admitted() {
			t.Errorf("an unbuilt Shedder admitted: %v", err)
		}
		sh.Done(tk, false)
		sh.Ignore(tk)
		_ = sh.Stats()
	}
}

// TestShedderQueue: requests over the limit wait in order, are handed the
// freed slots, and leave when the queue is full, when they have waited
// their time, when their deadline gets too near or when their caller goes.
func TestShedderQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := mustLimiter(t, FixedLimit{Limit: 1})
		sh := mustShedder(t, ShedderSettings{
			Limiter:  lim,
			Queue:    QueueSettings{MaxLen: 2, MaxWait: time.Second},
			Deadline: DeadlineSettings{ServiceTime: 100 * time.Millisecond},
		})
		ctx := context.Background()
		start := time.Now()
		first, err := sh.Admit(ctx, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var order []string
		var wg sync.WaitGroup
		admit := func(name string, ctx context.Context, deadline time.Time) {
			wg.Go(func() {
				tk, err := sh.Admit(ctx, deadline)
				mu.Lock()
				order = append(order, name+":"+reasonOf(t, err).String()+":"+time.Since(start).String())
				mu.Unlock()
				if err == nil {
					time.Sleep(10 * time.Millisecond)
					sh.Done(tk, false)
				}
			})
			synctest.Wait() // queued, in this order
		}
		admit("b", ctx, time.Time{})
		admit("c", ctx, time.Time{})
		if _, err := sh.Admit(ctx, time.Time{}); reasonOf(t, err) != ShedQueueFull {
			t.Errorf("a full queue: %v", err)
		}
		if st := sh.Stats(); st.Queued != 2 || st.InFlight != 1 {
			t.Errorf("stats = %+v", st)
		}
		time.Sleep(50 * time.Millisecond)
		sh.Done(first, false)
		wg.Wait()
		want := []string{"b:none:50ms", "c:none:60ms"}
		if len(order) != 2 || order[0] != want[0] || order[1] != want[1] {
			t.Errorf("order = %v, want %v", order, want)
		}

		// Nobody frees the slot now: the waiters leave, each for its reason.
		order = nil
		start = time.Now()
		hold, _ := sh.Admit(ctx, time.Time{})
		admit("timeout", ctx, time.Time{})
		admit("late", ctx, start.Add(400*time.Millisecond)) // too late from 300ms
		cctx, cancel := context.WithCancel(ctx)
		admit("left", cctx, time.Time{})
		// The queue held two: "left" was refused at once.
		time.Sleep(100 * time.Millisecond)
		cancel()
		wg.Wait()
		want = []string{"left:queue_full:0s", "late:too_late:300ms", "timeout:queue_timeout:1s"}
		if len(order) != 3 || order[0] != want[0] || order[1] != want[1] || order[2] != want[2] {
			t.Errorf("order = %v, want %v", order, want)
		}
		sh.Done(hold, false)

		// A caller who leaves while waiting.
		order = nil
		start = time.Now()
		hold, _ = sh.Admit(ctx, time.Time{})
		cctx, cancel = context.WithCancel(ctx)
		admit("left", cctx, time.Time{})
		time.Sleep(100 * time.Millisecond)
		cancel()
		wg.Wait()
		if len(order) != 1 || order[0] != "left:caller_left:100ms" {
			t.Errorf("order = %v", order)
		}
		sh.Done(hold, false)
		st := sh.Stats()
		if st.Queued != 0 || st.InFlight != 0 || lim.InFlight() != 0 || st.Shed[ShedQueueFull] != 2 ||
			st.Shed[ShedQueueTimeout] != 1 || st.Shed[ShedTooLate] != 1 || st.Shed[ShedCallerLeft] != 1 || st.Admitted != 5 {
			t.Errorf("stats = %+v, limiter in flight %d", st, lim.InFlight())
		}
	})
}

// TestShedderTooLateAfterWait: a request handed a slot after a wait that
// made it too late is refused, and the slot goes to the next waiter.
func TestShedderTooLateAfterWait(t *testing.T) {
	clk := newFakeClock(t0)
	lim := mustLimiter(t, FixedLimit{Limit: 1})
	sh := mustShedder(t, ShedderSettings{Limiter: lim, Clock: clk,
		Queue:    QueueSettings{MaxLen: 4, MaxWait: time.Hour},
		Deadline: DeadlineSettings{ServiceTime: 100 * time.Millisecond}})
	hold, _ := sh.Admit(context.Background(), time.Time{})
	done := make(chan error, 1)
	go func() {
		_, err := sh.Admit(context.Background(), t0.Add(time.Second))
		done <- err
	}()
	<-clk.Added() // its timer: it waits
	// The clock jumps past the deadline without the timer firing, as a
	// stalled process would see it; then the slot frees.
	clk.Set(t0.Add(950 * time.Millisecond))
	sh.Done(hold, false)
	if err := <-done; reasonOf(t, err) != ShedTooLate {
		t.Errorf("after the wait: %v, want too_late", err)
	}
	if lim.InFlight() != 0 {
		t.Errorf("the slot was not given back: %d in flight", lim.InFlight())
	}
}

// TestShedderConcurrent: many requests at once through a small limit and
// queue, some callers leaving: the limit is never exceeded, every request
// is admitted or refused once, and nothing is left in flight or queued.
func TestShedderConcurrent(t *testing.T) {
	lim := mustLimiter(t, AIMDLimit{Limit: 3, MaxLimit: 4})
	sh := mustShedder(t, ShedderSettings{Limiter: lim,
		Queue: QueueSettings{MaxLen: 4, Discipline: AdaptiveLIFO, MaxWait: 2 * time.Millisecond}})
	const workers, each = 8, 150
	var running, peak, admitted, refused atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				ctx, cancel := context.WithCancel(context.Background())
				if i%7 == 0 {
					cancel() // a caller that has already left
				}
				tk, err := sh.Admit(ctx, time.Time{})
				cancel()
				if err != nil {
					refused.Add(1)
					continue
				}
				admitted.Add(1)
				n := running.Add(1)
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				if (w+i)%3 == 0 {
					time.Sleep(50 * time.Microsecond)
				}
				running.Add(-1)
				sh.Done(tk, (w+i)%11 == 0)
			}
		})
	}
	wg.Wait()
	st := sh.Stats()
	if peak.Load() > 4 || admitted.Load()+refused.Load() != workers*each ||
		st.Admitted != uint64(admitted.Load()) || st.Refused() != uint64(refused.Load()) ||
		st.InFlight != 0 || st.Queued != 0 || lim.InFlight() != 0 {
		t.Errorf("peak %d, admitted %d, refused %d; stats %+v, limiter in flight %d",
			peak.Load(), admitted.Load(), refused.Load(), st, lim.InFlight())
	}
}

// TestShedderLIFO: with a LIFO queue the newest waiter gets the freed
// slot first.
func TestShedderLIFO(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sh := mustShedder(t, ShedderSettings{Limiter: mustLimiter(t, FixedLimit{Limit: 1}),
			Queue: QueueSettings{MaxLen: 3, Discipline: LIFO, MaxWait: time.Minute}})
		ctx := context.Background()
		hold, _ := sh.Admit(ctx, time.Time{})
		var mu sync.Mutex
		var order []string
		var wg sync.WaitGroup
		for _, name := range []string{"a", "b", "c"} {
			wg.Go(func() {
				tk, err := sh.Admit(ctx, time.Time{})
				if err != nil {
					t.Errorf("%s: %v", name, err)
					return
				}
				mu.Lock()
				order = append(order, name)
				mu.Unlock()
				time.Sleep(time.Millisecond)
				sh.Done(tk, false)
			})
			synctest.Wait()
		}
		sh.Done(hold, false)
		wg.Wait()
		if len(order) != 3 || order[0] != "c" || order[1] != "b" || order[2] != "a" {
			t.Errorf("order = %v, want c b a", order)
		}
	})
}
