package admission

import (
	"sort"
	"sync"
	"time"

	"github.com/retrystorm/retrystorm/resil"
)

// fakeClock is a resil.Clock that moves only when the test says so: a
// copy of resil's own test clock (clock_test.go), which this package's
// tests cannot import.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
	added  chan struct{} // receives once per timer made
}

func newFakeClock(now time.Time) *fakeClock {
	return &fakeClock{now: now, added: make(chan struct{}, 100)}
}

type fakeTimer struct {
	c    *fakeClock
	when time.Time
	ch   chan time.Time
	f    func()
	done bool
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) add(d time.Duration, f func()) *fakeTimer {
	c.mu.Lock()
	t := &fakeTimer{c: c, when: c.now.Add(d), f: f}
	if f == nil {
		t.ch = make(chan time.Time, 1)
	}
	c.timers = append(c.timers, t)
	c.mu.Unlock()
	c.added <- struct{}{}
	return t
}

func (c *fakeClock) NewTimer(d time.Duration) resil.Timer            { return c.add(d, nil) }
func (c *fakeClock) AfterFunc(d time.Duration, f func()) resil.Timer { return c.add(d, f) }

// Advance moves the clock by d and fires the timers that fall due, in
// order.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due []*fakeTimer
	keep := c.timers[:0]
	for _, t := range c.timers {
		if !t.done && !t.when.After(c.now) {
			t.done = true
			due = append(due, t)
		} else if !t.done {
			keep = append(keep, t)
		}
	}
	c.timers = keep
	now := c.now
	c.mu.Unlock()
	sort.Slice(due, func(i, j int) bool { return due[i].when.Before(due[j].when) })
	for _, t := range due {
		if t.f != nil {
			t.f()
		} else {
			t.ch <- now
		}
	}
}

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := !t.done
	t.done = true
	return was
}
