package model

import (
	"time"

	"github.com/retrystorm/retrystorm/scenario"
)

// Verdict is the model's answer for one scenario: whether the fleet
// recovers after the triggers, by the simulator's rule, and how long it
// takes.
type Verdict struct {
	Recovered     bool
	RecoveryTicks int // -1 when not recovered
}

// Verdict runs the model and returns its verdict.
func (m *Model) Verdict() Verdict {
	r := m.Run()
	return Verdict{Recovered: r.Recovered, RecoveryTicks: r.RecoveryTicks}
}

// Equilibrium is a steady state of the model at constant conditions, per
// second.
type Equilibrium struct {
	Offered float64 `json:"offered"` // attempts sent per second
	Goodput float64 `json:"goodput"` // successes per second
	Queue   float64 `json:"queue"`   // requests waiting, at the end
	// Growing is true when the backlog still grows: the state is stuck
	// and the queue has no bound but its limit.
	Growing bool `json:"growing"`
}

// equilibriumRun is how long the model runs to settle, and the ticks at
// its end it averages.
const (
	equilibriumRun  = 300 * time.Second
	equilibriumTail = 20
)

// Equilibria returns the model's steady states at the scenario's base
// conditions (its triggers left out): the healthy one, reached from an
// idle origin, and the stuck one, reached after a stall long enough to
// make every answer late (ten timeouts), or nil when the model leaves
// that state and settles on the healthy one again: then the fleet has no
// stuck state at this load, and no trigger tips it for good.
//
// These are the fixed points of the model's difference equations, found
// by iterating them from two starting points, as docs/model.md explains;
// for a fleet without a budget, breaker or throttle against a FIFO queue
// it has the closed form there (stuck exists iff λ·(1 + r·M) ≥ C).
func (m *Model) Equilibria() (healthy Equilibrium, stuck *Equilibrium) {
	healthy = m.settle(nil)
	stall := scenario.Trigger{Kind: scenario.TriggerOutage, Mode: scenario.OutageStall,
		At: 10 * time.Second, For: 10 * time.Duration(m.timeout*float64(time.Second))}
	s := m.settle(&stall)
	if s.Goodput < 0.99*healthy.Goodput || s.Growing {
		stuck = &s
	}
	return healthy, stuck
}

// settle runs the model at base conditions (with the trigger t, if any)
// for equilibriumRun and returns the average of the last ticks.
func (m *Model) settle(t *scenario.Trigger) Equilibrium {
	c := *m
	c.sc.Triggers = nil
	if t != nil {
		c.sc.Triggers = []scenario.Trigger{*t}
	}
	c.sc.Duration = equilibriumRun
	c.steps = int(equilibriumRun.Seconds()/c.sc.Tick.Seconds()) * c.perTick
	var st state
	r := c.run(&st)
	n := len(r.Series.Offered)
	from := max(0, n-equilibriumTail)
	var e Equilibrium
	if n == 0 {
		return e // a Model New did not make
	}
	for k := from; k < n; k++ {
		e.Offered += r.Series.Offered[k]
		e.Goodput += r.Series.Successes[k]
	}
	secs := float64(n-from) * c.sc.Tick.Seconds()
	e.Offered /= secs
	e.Goodput /= secs
	e.Queue = r.Queue
	e.Growing = n > from+1 && r.Series.Queue[n-1] > r.Series.Queue[from]+1
	return e
}

// NeverHealthy is a cell of Map whose fleet was never healthy: it failed
// more than sim.UnhealthyBaseline of its calls before the trigger, so
// the cell says nothing about the trigger.
const NeverHealthy = -2

// Map is the model's verdict over a grid of scenarios, built by cell.
// Cells[y][x] is the recovery in ticks, -1 for never, or NeverHealthy.
func Map(nx, ny int, cell func(x, y int) (*Model, error)) ([][]int, error) {
	out := make([][]int, ny)
	var st state
	for y := range out {
		out[y] = make([]int, nx)
		for x := range out[y] {
			m, err := cell(x, y)
			if err != nil {
				return nil, err
			}
			r := m.run(&st)
			out[y][x] = r.RecoveryTicks
			if r.NeverHealthy {
				out[y][x] = NeverHealthy
			}
		}
	}
	return out, nil
}

// Edge finds, by bisection over [lo, hi], the smallest trigger size at
// which the model says the fleet never recovers, assuming a larger
// trigger never helps. at builds the model for a size. It returns ok false
// when the fleet recovers even at hi, and lo when it fails at lo already.
// The answer is within tol of the model's edge.
func Edge(lo, hi, tol float64, at func(size float64) (*Model, error)) (edge float64, ok bool, err error) {
	var st state
	fails := func(x float64) (bool, error) {
		m, err := at(x)
		if err != nil {
			return false, err
		}
		return !m.run(&st).Recovered, nil
	}
	f, err := fails(hi)
	if err != nil || !f {
		return 0, false, err
	}
	if f, err = fails(lo); err != nil || f {
		return lo, err == nil, err
	}
	for hi-lo > tol {
		mid := (lo + hi) / 2
		f, err := fails(mid)
		if err != nil {
			return 0, false, err
		}
		if f {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi, true, nil
}
