// Package budgetcheck watches a budget from outside: a wrapper that passes
// every call through to the budget it wraps and checks each decision
// against a rule it computes on its own counts. Tests of the simulator and
// of the importers use it to show that a fleet's retries obey the rule of
// the system its config came from, whatever resil's code says.
package budgetcheck

import (
	"fmt"
	"sync"
	"time"

	"github.com/retrystorm/retrystorm/resil"
	"github.com/retrystorm/retrystorm/resil/budget"
)

// Concurrency checks Envoy's retry budget rule: a retry may be scheduled
// only while the retries active (scheduled and not yet ended) are fewer
// than max(⌊Percent/100 × requests active⌋, Min), requests active being
// the attempts in flight. It counts both itself from the calls it sees.
// Make one with Wrap; it is safe for concurrent use.
type Concurrency struct {
	// Percent and Min are the rule's two numbers.
	Percent float64
	Min     int64

	mu         sync.Mutex
	inner      budget.InFlight
	active     int64
	held       int64
	allowed    int64
	refused    int64
	peak       int64
	violations []string
}

// Wrap returns a checker around b, which must count attempts in flight
// (budget.InFlight): the checker has to see when retries are sent.
func Wrap(b resil.Budget, percent float64, min int64) (*Concurrency, error) {
	ib, ok := b.(budget.InFlight)
	if !ok {
		return nil, fmt.Errorf("budgetcheck: %T does not count attempts in flight", b)
	}
	return &Concurrency{Percent: percent, Min: min, inner: ib}, nil
}

func (c *Concurrency) limit() int64 {
	return max(int64(c.Percent/100*float64(c.active)), c.Min)
}

// Begin passes through and counts a first attempt in flight.
func (c *Concurrency) Begin(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.inner.Begin(now)
	c.active++
}

// Sent passes through and counts a retry in flight.
func (c *Concurrency) Sent(now time.Time, k resil.Kind) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.inner.Sent(now, k)
	c.active++
}

// Record passes through and counts an attempt's end.
func (c *Concurrency) Record(now time.Time, o resil.Outcome, paid float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.inner.Record(now, o, paid)
	c.active--
	if paid > 0 {
		c.held--
	}
}

// Withdraw passes through, and checks the answer against the rule.
func (c *Concurrency) Withdraw(now time.Time, after resil.Outcome) (float64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cost, ok := c.inner.Withdraw(now, after)
	want := c.held < c.limit()
	if ok != want && len(c.violations) < 10 {
		c.violations = append(c.violations, fmt.Sprintf("at %v: %d requests and %d retries active, limit %d: allowed %v",
			now, c.active, c.held, c.limit(), ok))
	}
	if ok {
		c.held++
		c.allowed++
		c.peak = max(c.peak, c.held)
	} else {
		c.refused++
	}
	return cost, ok
}

// Refund passes through and counts a retry given up.
func (c *Concurrency) Refund(now time.Time, cost float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.inner.Refund(now, cost)
	if cost > 0 {
		c.held--
	}
}

// Report says what the checker saw: retries allowed and refused, the most
// retries active at once, and the decisions that broke the rule (at most
// ten), or none.
func (c *Concurrency) Report() (allowed, refused, peak int64, violations []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.allowed, c.refused, c.peak, append([]string(nil), c.violations...)
}

// Watcher wraps every budget a simulator run builds in a Concurrency
// checker (for sim.Options.WrapBudget) and adds up what they saw. Make one
// with Watch; it is safe for concurrent use.
type Watcher struct {
	percent float64
	min     int64

	mu     sync.Mutex
	checks []*Concurrency
	err    error
}

// Watch returns a Watcher of the rule of percent and min.
func Watch(percent float64, min int64) *Watcher { return &Watcher{percent: percent, min: min} }

// Wrap is the sim.Options.WrapBudget function.
func (w *Watcher) Wrap(_, _ int, b resil.Budget) resil.Budget {
	c, err := Wrap(b, w.percent, w.min)
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		if w.err == nil {
			w.err = err
		}
		return b
	}
	w.checks = append(w.checks, c)
	return c
}

// Totals adds up every checker's Report: how many budgets were watched,
// retries allowed and refused, the most retries active at once in one
// client, and the decisions that broke the rule (each prefixed with its
// client's number). The error says a budget could not be watched.
func (w *Watcher) Totals() (clients int, allowed, refused, peak int64, violations []string, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, c := range w.checks {
		a, r, p, bad := c.Report()
		allowed, refused, peak = allowed+a, refused+r, max(peak, p)
		for _, v := range bad {
			violations = append(violations, fmt.Sprintf("client %d: %s", i, v))
		}
	}
	return len(w.checks), allowed, refused, peak, violations, w.err
}
