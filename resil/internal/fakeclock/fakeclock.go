// Package fakeclock is a clock for the tests of resil and its
// sub-packages: it moves only when the test says so, and fires the timers
// that fall due, in order. Its NewTimer and AfterFunc return *Timer; a
// test wraps Clock in a type whose methods return resil.Timer (resil's
// own tests cannot import a package that imports resil).
package fakeclock

import (
	"sort"
	"sync"
	"time"
)

// Clock is a manual clock, safe for concurrent use.
type Clock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*Timer
	added  chan struct{} // receives once per timer made
}

// New returns a clock that reads now until it is moved.
func New(now time.Time) *Clock {
	return &Clock{now: now, added: make(chan struct{}, 100)}
}

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Set moves the clock to t without firing any timer.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// Added receives once for every timer made: a test waits on it to know
// that the code under test has started waiting.
func (c *Clock) Added() <-chan struct{} { return c.added }

// NewTimer returns a timer whose channel receives the time once d has
// passed on the clock.
func (c *Clock) NewTimer(d time.Duration) *Timer { return c.add(d, nil) }

// AfterFunc calls f once d has passed on the clock, in the goroutine that
// moves it.
func (c *Clock) AfterFunc(d time.Duration, f func()) *Timer { return c.add(d, f) }

func (c *Clock) add(d time.Duration, f func()) *Timer {
	c.mu.Lock()
	t := &Timer{c: c, when: c.now.Add(d), f: f}
	if f == nil {
		t.ch = make(chan time.Time, 1)
	}
	c.timers = append(c.timers, t)
	c.mu.Unlock()
	c.added <- struct{}{}
	return t
}

// Advance moves the clock by d and fires the timers that fall due, in
// order.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due []*Timer
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

// Timer is a timer of a Clock.
type Timer struct {
	c    *Clock
	when time.Time
	ch   chan time.Time
	f    func()
	done bool
}

// C is the channel the time is sent on (nil for AfterFunc's timers).
func (t *Timer) C() <-chan time.Time { return t.ch }

// Stop stops the timer; it reports whether the timer was still waiting.
func (t *Timer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := !t.done
	t.done = true
	return was
}
