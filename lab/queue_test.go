package lab

import (
	"slices"
	"testing"
)

// order pops every request and returns their ticks, ghosts as negative.
func order(q *jobQueue, lifo bool) []int {
	var out []int
	for q.len() > 0 {
		j := q.pop(lifo)
		if j.state == jobGhost {
			out = append(out, -j.tick)
		} else {
			out = append(out, j.tick)
		}
	}
	return out
}

func TestQueueGhostsKeepTheirPlace(t *testing.T) {
	for _, lifo := range []bool{false, true} {
		var q jobQueue
		jobs := make([]*job, 6)
		for i := range jobs {
			jobs[i] = &job{tick: 10 + i/2} // two arrivals per tick
			q.push(jobs[i])
		}
		q.haunt(jobs[1]) // tick 10
		q.haunt(jobs[3]) // tick 11: not merged with tick 10
		q.haunt(jobs[2]) // tick 11: merged with jobs[3]
		if q.len() != 6 {
			t.Fatalf("len = %d, want 6: ghosts still wait", q.len())
		}
		entries := 0
		for j := q.head; j != nil; j = j.next {
			entries++
		}
		if entries != 5 {
			t.Errorf("%d entries, want 5: the two ghosts of tick 11 share one", entries)
		}
		want := []int{10, -10, -11, -11, 12, 12}
		if lifo {
			want = []int{12, 12, -11, -11, -10, 10}
		}
		if got := order(&q, lifo); !slices.Equal(got, want) {
			t.Errorf("lifo=%v: served %v, want %v", lifo, got, want)
		}
	}
}

func TestQueueRemove(t *testing.T) {
	var q jobQueue
	a, b, c := &job{tick: 1}, &job{tick: 2}, &job{tick: 3}
	q.push(a)
	q.push(b)
	q.push(c)
	q.remove(b)
	if got := order(&q, false); !slices.Equal(got, []int{1, 3}) {
		t.Errorf("served %v, want [1 3]", got)
	}
}

func TestQueueGhostWithSideEffectKeepsItsEntry(t *testing.T) {
	var q jobQueue
	a := &job{tick: 1}
	b := &job{tick: 1, exec: &execution{intent: "7"}}
	q.push(a)
	q.push(b)
	q.haunt(a)
	q.haunt(b)
	if q.head == q.tail {
		t.Fatal("a ghost with a side effect to count was merged away")
	}
	if j := q.pop(false); j.exec != nil {
		t.Error("popped the wrong ghost first")
	}
	if j := q.pop(false); j.exec == nil || j.exec.intent != "7" {
		t.Error("the ghost with a side effect lost it")
	}
}

// TestQueueGhostRunsStayMerged: a job leaving between two ghost runs of
// its tick joins them into one.
func TestQueueGhostRunsStayMerged(t *testing.T) {
	var q jobQueue
	jobs := make([]*job, 5)
	for i := range jobs {
		jobs[i] = &job{tick: 1}
		q.push(jobs[i])
	}
	q.haunt(jobs[1])
	q.haunt(jobs[3])
	q.haunt(jobs[2])
	entries := 0
	for j := q.head; j != nil; j = j.next {
		entries++
	}
	if entries != 3 || q.len() != 5 {
		t.Errorf("%d entries for %d requests, want 3 (live, one run of three ghosts, live)", entries, q.len())
	}
}
