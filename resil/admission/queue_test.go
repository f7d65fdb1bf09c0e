package admission

import (
	"testing"
	"time"
)

func mustQueue(t testing.TB, s QueueSettings) *WaitQueue[string] {
	t.Helper()
	q, err := NewWaitQueue[string](s)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func TestQueueSettings(t *testing.T) {
	for _, c := range []struct {
		s     QueueSettings
		field string
	}{
		{QueueSettings{MaxLen: -1}, "QueueSettings.MaxLen"},
		{QueueSettings{MaxLen: 2_000_000, MaxWait: time.Second}, "QueueSettings.MaxLen"},
		{QueueSettings{MaxWait: time.Second}, "QueueSettings.MaxLen"},
		{QueueSettings{Discipline: LIFO}, "QueueSettings.MaxLen"},
		{QueueSettings{MaxLen: 1, Discipline: 7, MaxWait: time.Second}, "QueueSettings.Discipline"},
		{QueueSettings{MaxLen: 1}, "QueueSettings.MaxWait"},
		{QueueSettings{MaxLen: 1, MaxWait: -time.Second}, "QueueSettings.MaxWait"},
		{QueueSettings{MaxLen: 1, MaxWait: time.Second, OverloadWait: 2 * time.Second}, "QueueSettings.OverloadWait"},
		{QueueSettings{MaxLen: 1, MaxWait: time.Second, OverloadWait: -1}, "QueueSettings.OverloadWait"},
	} {
		_, err := NewWaitQueue[int](c.s)
		wantSettingError(t, err, c.field)
	}
}

// qstep is one operation on a queue at a time on the grid: push v, or take
// the next entry (v is what must come out, r why).
type qstep struct {
	at   float64
	push string
	want string
	r    ShedReason
}

func runQueue(t *testing.T, q *WaitQueue[string], steps []qstep) {
	t.Helper()
	for i, s := range steps {
		if s.push != "" {
			if !q.Push(ts(s.at), s.push) {
				t.Fatalf("step %d: push %s refused", i, s.push)
			}
			continue
		}
		v, _, r, ok := q.Next(ts(s.at))
		if s.want == "" {
			if ok {
				t.Fatalf("step %d: got %s, want an empty queue", i, v)
			}
			continue
		}
		if !ok || v != s.want || r != s.r {
			t.Fatalf("step %d: got %q %v %v, want %q %v", i, v, r, ok, s.want, s.r)
		}
	}
}

func TestQueueDisciplines(t *testing.T) {
	push := func(at float64, v string) qstep { return qstep{at: at, push: v} }
	next := func(at float64, v string, r ShedReason) qstep { return qstep{at: at, want: v, r: r} }
	abc := []qstep{push(0, "a"), push(0.1, "b"), push(0.2, "c")}
	for _, c := range []struct {
		name  string
		s     QueueSettings
		steps []qstep
	}{
		{"fifo", QueueSettings{MaxLen: 4, MaxWait: time.Second},
			append(abc[:3:3], next(0.3, "a", ShedNone), next(0.3, "b", ShedNone), next(0.3, "c", ShedNone), next(0.3, "", 0))},
		{"lifo", QueueSettings{MaxLen: 4, Discipline: LIFO, MaxWait: time.Second},
			append(abc[:3:3], next(0.3, "c", ShedNone), next(0.3, "b", ShedNone), next(0.3, "a", ShedNone))},
		{"timeouts come first, oldest first", QueueSettings{MaxLen: 4, Discipline: LIFO, MaxWait: time.Second},
			append(abc[:3:3], next(1.05, "a", ShedQueueTimeout), next(1.05, "c", ShedNone), next(1.05, "b", ShedNone))},
		{"adaptive lifo", QueueSettings{MaxLen: 4, Discipline: AdaptiveLIFO, MaxWait: time.Second}, []qstep{
			push(0, "a"), push(0.5, "b"),
			next(0.6, "a", ShedNone), // a burst: FIFO
			push(0.9, "c"), push(1.1, "d"),
			next(1.2, "d", ShedNone), // not empty since 0: overloaded, LIFO
			next(1.6, "b", ShedQueueTimeout),
			next(1.6, "c", ShedNone),
			push(1.7, "e"), push(1.8, "f"),
			next(1.9, "e", ShedNone), // emptied at 1.6: FIFO again
		}},
		{"codel", QueueSettings{MaxLen: 4, MaxWait: time.Second, OverloadWait: 100 * time.Millisecond}, []qstep{
			push(0, "a"), push(0.95, "b"),
			next(1.0, "a", ShedQueueTimeout), // overloaded: 100ms is the most
			next(1.0, "b", ShedNone),
		}},
	} {
		t.Run(c.name, func(t *testing.T) { runQueue(t, mustQueue(t, c.s), c.steps) })
	}
}

func TestQueueBoundsAndRemove(t *testing.T) {
	q := mustQueue(t, QueueSettings{MaxLen: 3, MaxWait: time.Second, OverloadWait: 100 * time.Millisecond})
	for i, v := range []string{"a", "b", "c"} {
		if !q.Push(ts(float64(i)/10), v) {
			t.Fatal("push refused")
		}
	}
	if q.Push(ts(0.3), "d") || q.Len() != 3 {
		t.Error("a full queue took another")
	}
	if q.MaxWait(ts(0.5)) != time.Second || q.Overloaded(ts(0.5)) {
		t.Error("overloaded too early")
	}
	if q.MaxWait(ts(1)) != 100*time.Millisecond || !q.Overloaded(ts(1)) {
		t.Error("not overloaded after a second")
	}
	if !q.Remove(ts(0.5), "b") || q.Remove(ts(0.5), "b") || q.Len() != 2 {
		t.Fatal("remove")
	}
	runQueue(t, q, []qstep{{at: 0.5, want: "a"}, {at: 0.5, push: "e"}, {at: 0.5, push: "f"}, {at: 0.5, want: "c"}})
	if !q.Remove(ts(0.6), "e") || !q.Remove(ts(0.6), "f") || q.Len() != 0 {
		t.Fatal("remove to empty")
	}
	// Emptied at 0.6: a push at 1.2 is not overloaded at 1.5.
	q.Push(ts(1.2), "g")
	if q.Overloaded(ts(1.5)) {
		t.Error("a queue emptied by Remove still counts as overloaded")
	}
	var zero WaitQueue[int]
	if zero.Push(t0, 1) || zero.Len() != 0 {
		t.Error("the zero queue took an entry")
	}
	if _, _, _, ok := zero.Next(t0); ok {
		t.Error("the zero queue returned an entry")
	}
	if FIFO.String() != "fifo" || AdaptiveLIFO.String() != "adaptive_lifo" || Discipline(9).String() != "Discipline(9)" {
		t.Error("discipline names")
	}
}
