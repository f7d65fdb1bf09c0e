package verdict

import (
	"math"
	"time"

	"github.com/retrystorm/retrystorm/sim"
)

// CheckCell is one fleet's run in one cell of the envelope.
type CheckCell struct {
	Ran           bool  `json:"ran"`
	Recovered     bool  `json:"recovered"`
	RecoveryTicks int   `json:"recovery_ticks"` // -1 when not recovered
	Intents       int64 `json:"intents"`
	Attempts      int64 `json:"attempts"`
	Retries       int64 `json:"retries"` // retries and hedges: the extra load
	IntentsLost   int64 `json:"intents_lost"`
	PeakOffered   int64 `json:"peak_offered"`
	// FaultIntents and FaultAttempts are the intents that arrived, and the
	// attempts sent (at the origin, through a stack's tiers), over the
	// fault and its recovery: from the fault's first tick to the tick the
	// run recovered, or to the run's end when it never did.
	FaultIntents  int64 `json:"fault_intents"`
	FaultAttempts int64 `json:"fault_attempts"`
	// FaultLoad is the mean offered load over the fault's ticks against
	// the origin's full capacity in a tick; Herd the most offered in one
	// tick of the herdTicks after the fault, against the same.
	FaultLoad float64 `json:"fault_load"`
	Herd      float64 `json:"herd"`
	// Source is where the numbers come from: "simulator", or "model" for
	// a cell check --model left to the analytic model (far from the
	// boundary, outside the realistic region). Empty in results from
	// before it was said: the simulator.
	Source string `json:"source,omitempty"`
	// NeverHealthy: the fleet failed most of its tries before the fault
	// (sim.Summary.NeverHealthy), so the cell is never recovered whatever
	// the retries do; left out of the JSON when false.
	NeverHealthy bool `json:"never_healthy,omitempty"`
	// EndedEarly, for a run check stopped once its collapse was certain
	// (docs/early-exit.md), says where and by which rule: its Recovered
	// and NeverHealthy are the whole run's, its other figures stop there
	// and nothing check prints uses them. Nil for a run to its end.
	EndedEarly *sim.EarlyEnd `json:"ended_early,omitempty"`
}

// perIntent is the attempts per intent over the fault and its recovery.
func (c CheckCell) perIntent() float64 {
	if c.FaultIntents <= 0 {
		return 0
	}
	return float64(c.FaultAttempts) / float64(c.FaultIntents)
}

// cellOf is fleet result f of cell (fault fi, load li) in check's units.
// A chain is judged where the load lands: the fleet's intents and
// recovery (what its users see), the attempts and offered load that
// reached the origin through the tiers.
func (e *envelope) cellOf(f *sim.FleetResult, fi, li int) CheckCell {
	s := f.Summary
	offered := f.Series.Offered
	if n := len(f.Tiers); n > 0 {
		org := f.Tiers[n-1]
		s.Attempts, s.PeakOffered = org.Summary.Attempts, org.Summary.PeakOffered
		s.Retries, s.Hedges = max(org.Summary.Attempts-s.Intents, 0), 0
		offered = org.Series.Offered
	}
	c := CheckCell{Ran: true, Source: sourceSimulator, Recovered: s.Recovered, RecoveryTicks: -1, Intents: s.Intents, Attempts: s.Attempts,
		Retries: s.Retries + s.Hedges, IntentsLost: s.IntentsLost, PeakOffered: s.PeakOffered, NeverHealthy: s.NeverHealthy}
	if s.Recovered {
		c.RecoveryTicks = *s.RecoveryTicks
	}
	if f.Ended != nil && f.Ended.Truncated {
		end := *f.Ended
		c.EndedEarly = &end
	}
	window(&c, e.base.Tick, e.at, e.faults[fi], e.base.Traffic.Rate/e.loads[li], offered, f.Series.Intents)
	return c
}

// window fills c's numbers over the fault (ft, starting at at) and its
// recovery from the per-tick offered load and intents of a run against an
// origin of capacity capacity (per second). Recovered and RecoveryTicks
// must be set.
func window[T int64 | float64](c *CheckCell, tick, at time.Duration, ft checkFault, capacity float64, offered, intents []T) {
	start := int(at / tick)
	end := int((at + time.Duration(ft.For*float64(time.Second)) + tick - 1) / tick)
	n := len(offered)
	until := n
	if c.Recovered {
		until = min(n, end+c.RecoveryTicks+1)
	}
	capTick := capacity * tick.Seconds()
	var sum T
	for k := start; k < min(end, n); k++ {
		sum += offered[k]
	}
	if end > start && capTick > 0 {
		c.FaultLoad = float64(sum) / float64(end-start) / capTick
	}
	var att, in T
	for k := start; k < until; k++ {
		att += offered[k]
		in += intents[k]
	}
	c.FaultAttempts, c.FaultIntents = int64(math.Round(float64(att))), int64(math.Round(float64(in)))
	var herd T
	for k := end; k < min(end+herdTicks, n); k++ {
		herd = max(herd, offered[k])
	}
	if capTick > 0 {
		c.Herd = float64(herd) / capTick
	}
}
