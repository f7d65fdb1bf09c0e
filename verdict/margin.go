package verdict

import (
	"context"
	"fmt"
	"math"
	"sync"

	"github.com/retrystorm/retrystorm/grid"
	"github.com/retrystorm/retrystorm/report"
	"github.com/retrystorm/retrystorm/scenario"
	"github.com/retrystorm/retrystorm/sim"
)

// Margin is how far a fleet is from collapse, beside the same fleet with
// retries off: the highest base load at which it recovers from the
// realistic dip, and the deepest dip it recovers from at the realistic
// load, each in every seed, found by bisection with the simulator.
type Margin struct {
	Fault string `json:"fault"` // the realistic dip, as the map names it
	// Load and LoadNoRetries are the highest base loads found; nil when it
	// does not recover even at the lowest searched (marginLowest).
	Load          *float64 `json:"load"`
	LoadNoRetries *float64 `json:"load_without_retries"`
	// Dip and DipNoRetries are the deepest dips found (a share of the
	// capacity), at the realistic load; nil when even marginLowest is
	// too deep.
	Dip          *float64 `json:"dip"`
	DipNoRetries *float64 `json:"dip_without_retries"`
	// Step is the search's precision; Seeds the seeds every point ran.
	Step  float64 `json:"step"`
	Seeds int     `json:"seeds"`
	// For a fleet that is not SAFE and whose budget has a floor per client
	// instance (Floor says it), SafeClients is the most client instances
	// at which the cells against it are clean at the same total load (0:
	// not even one), and SafePerClient the intents per second each then
	// sees: below it, the floors add up past the thresholds.
	Floor         string   `json:"floor,omitempty"`
	SafeClients   int      `json:"safe_clients,omitempty"`
	SafePerClient *float64 `json:"safe_intents_per_client,omitempty"`
}

// The margin's search: loads from marginLowest to marginHighestLoad (the
// highest realistic load check takes), dips from marginLowest to the
// whole capacity for the realistic dip's length, each to within
// marginStep.
const (
	marginLowest      = 0.05
	marginHighestLoad = 0.975
	marginStep        = 0.02
)

// margins searches every fleet's margin at the first client count.
func (c *checkRun) margins(ctx context.Context) error {
	dip := c.e.faults[0] // the realistic dip: checkEnvelope's first fault
	for i := range c.r.Fleets {
		m := &Margin{Fault: dip.Name, Step: marginStep, Seeds: len(c.e.seeds)}
		type search struct {
			into    **float64
			variant int
			byLoad  bool
		}
		searches := []search{{&m.Load, asConfigured, true}, {&m.Dip, asConfigured, false}}
		if chainRetries(c.in[i]) {
			searches = append(searches, search{&m.LoadNoRetries, retriesOff, true}, search{&m.DipNoRetries, retriesOff, false})
		}
		var wg sync.WaitGroup
		errs := make([]error, len(searches))
		for k, s := range searches {
			wg.Go(func() {
				hi := marginHighestLoad
				if !s.byLoad {
					hi = 1
				}
				*s.into, errs[k] = edge(marginLowest, hi, func(x float64) (bool, error) {
					ft, load := dip, c.e.realLoad
					if s.byLoad {
						load = x
					} else {
						ft.Dip, ft.Name = x, fmt.Sprintf("capacity dip of %s", report.Percent(x, 0))
					}
					return c.recoversAt(ctx, i, s.variant, load, ft)
				})
			})
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				return err
			}
		}
		if !chainRetries(c.in[i]) {
			m.LoadNoRetries, m.DipNoRetries = m.Load, m.Dip
		}
		if err := c.floorMargin(ctx, i, m); err != nil {
			return err
		}
		c.r.Fleets[i].Margin = m
	}
	return nil
}

// edge is the highest x in [lo, hi] for which ok holds, to within
// marginStep, assuming ok holds below some edge and not above it; nil
// when it does not hold at lo.
func edge(lo, hi float64, ok func(float64) (bool, error)) (*float64, error) {
	round := func(x float64) *float64 { x = math.Round(x*1000) / 1000; return &x }
	if good, err := ok(lo); err != nil || !good {
		return nil, err
	}
	if good, err := ok(hi); err != nil || good {
		return round(hi), err
	}
	for hi-lo > marginStep {
		mid := (lo + hi) / 2
		good, err := ok(mid)
		if err != nil {
			return nil, err
		}
		if good {
			lo = mid
		} else {
			hi = mid
		}
	}
	return round(lo), nil
}

// recoversAt reports whether fleet i as variant v recovers, in every
// seed, from fault ft at base load load. A seed's run the cache has
// (the same fleet's, or another chain's with retries off) is not made
// again.
func (c *checkRun) recoversAt(ctx context.Context, i, v int, load float64, ft checkFault) (bool, error) {
	e := c.e
	f, tiers := c.fleet(i, v)
	early := sim.NoEarlyExit
	if c.early {
		early = sim.StopWhenDecided // only whether it recovered counts
	}
	var (
		todo []*scenario.Scenario
		keys []runKey
		kept []bool
	)
	for s := range e.seeds {
		sc, err := e.scenarioAt(f, tiers, e.clients[0], s, load, ft)
		if err != nil {
			return false, err
		}
		k, ok, cell, hit := e.cache.find(sc, early, "recovered")
		if hit {
			if !cell.Recovered {
				return false, nil
			}
			continue
		}
		todo, keys, kept = append(todo, sc), append(keys, k), append(kept, ok)
	}
	var mu sync.Mutex
	all := true
	g := grid.Grid{Cells: len(todo), Cell: func(s int) (*scenario.Scenario, error) {
		return todo[s], nil
	}, Early: func(int) sim.EarlyExit { return early }}
	opts := c.opts.GridOptions()
	opts.Progress = nil
	err := grid.Run(ctx, g, opts, func(s int, r *sim.FleetResult) {
		if kept[s] {
			e.cache.put(keys[s], CheckCell{Ran: true, Recovered: r.Summary.Recovered})
		}
		mu.Lock()
		all = all && r.Summary.Recovered
		mu.Unlock()
	})
	return all, err
}

// marginText says a margin in a line: "recovers from a dip of 33% up to
// 78% load (without retries: 91%); survives dips up to 40% at 83% load
// (without retries: 55%)".
func (m *Margin) text(realLoad, realDip float64) string {
	pct := func(x *float64, capped float64) string {
		switch {
		case x == nil:
			return "none"
		case *x >= capped:
			return "≥ " + report.Percent(capped, 1)
		}
		return report.Percent(*x, 0)
	}
	s := fmt.Sprintf("recovers from a dip of %s up to %s load (without retries: %s); survives dips up to %s at %s load (without retries: %s), in each of %d seeds, to within %s",
		report.Percent(realDip, 0), pct(m.Load, marginHighestLoad), pct(m.LoadNoRetries, marginHighestLoad),
		pct(m.Dip, 1), report.Percent(realLoad, 0), pct(m.DipNoRetries, 1), m.Seeds, report.Percent(m.Step, 0))
	switch {
	case m.Floor == "":
	case m.SafePerClient == nil:
		s += fmt.Sprintf("; its floor (%s) is not what keeps it from SAFE: not even one client instance is", m.Floor)
	default:
		s += fmt.Sprintf("; SAFE where each client instance (proxy) sees at least %g intents/s (%d instances at this load): below that its floor (%s) adds up past the thresholds",
			*m.SafePerClient, m.SafeClients, m.Floor)
	}
	return s
}

// marginRuns bounds the runs of one fleet's margin: four searches, each
// its two ends and a bisection to marginStep, every seed.
func marginRuns(seeds int) int {
	steps := 2 + int(math.Ceil(math.Log2((1-marginLowest)/marginStep)))
	return 4 * steps * seeds
}

// floorMargin finds, for fleet i when it is not SAFE and its budget has a
// floor per client instance, the most client instances (so the least
// traffic each) at which every cell against it is clean: recovered (or
// collapsed with retries off too) and under every threshold, in every
// seed, at the same total load.
func (c *checkRun) floorMargin(ctx context.Context, i int, m *Margin) error {
	f := &c.r.Fleets[i]
	floor, ok := perClientFloor(c.in[i].Fleet)
	j := c.r.assessment().judge(f.Runs[0], f.Bare, f.Judged)
	if !ok || j.Level == Safe {
		return nil
	}
	var cells [][2]int
	for _, x := range j.Findings {
		if x.level() > Safe && x.What != findNeverHealthy {
			cells = append(cells, [2]int{x.Fault, x.Load})
		}
	}
	if len(cells) == 0 {
		return nil
	}
	clean := func(n int) (bool, error) {
		var mu sync.Mutex
		good := true
		type run struct{ cell, seed int }
		var runs []run
		for k := range cells {
			for s := range c.e.seeds {
				runs = append(runs, run{k, s})
			}
		}
		fl, tiers := c.fleet(i, asConfigured)
		g := grid.Grid{Cells: len(runs), Cell: func(k int) (*scenario.Scenario, error) {
			x := cells[runs[k].cell]
			return c.e.scenarioAt(fl, tiers, n, runs[k].seed, c.e.loads[x[1]], c.e.faults[x[0]])
		}, Early: c.earlyExit(sim.SkipCertainDrain)}
		opts := c.opts.GridOptions()
		opts.Progress = nil
		err := grid.Run(ctx, g, opts, func(k int, r *sim.FleetResult) {
			x := cells[runs[k].cell]
			cell := c.e.cellOf(r, x[0], x[1])
			bareNever := f.Bare != nil && f.Bare[runs[k].seed][x[0]][x[1]].Ran && !f.Bare[runs[k].seed][x[0]][x[1]].Recovered
			ok := (cell.Recovered || bareNever) && under(cell, c.e.faults[x[0]], 1)
			mu.Lock()
			good = good && ok
			mu.Unlock()
		})
		return good, err
	}
	m.Floor = floor
	hi := c.e.clients[0]
	if good, err := clean(1); err != nil || !good {
		return err // not even one client: SafeClients stays 0
	}
	lo := 1 // clean at lo, not at hi
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		good, err := clean(mid)
		if err != nil {
			return err
		}
		if good {
			lo = mid
		} else {
			hi = mid
		}
	}
	rate := math.Round(c.e.base.Traffic.Rate/float64(lo)*10) / 10
	m.SafeClients, m.SafePerClient = lo, &rate
	return nil
}
