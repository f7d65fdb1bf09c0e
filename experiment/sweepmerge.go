package experiment

import (
	"fmt"
	"slices"

	"github.com/retrystorm/retrystorm/grid"
	"github.com/retrystorm/retrystorm/internal/safetext"
)

// What a sweep shard may hold: every size is checked against these before
// anything is made from it (see MergeSweep).
const (
	// maxSweepGrid is the most points on each axis of a sweep (runSweep's
	// --grid bound).
	maxSweepGrid = 200
	// sweepPolicies is how many policies a sweep maps (runSweep's list).
	sweepPolicies = 6
	// MaxRecoveryTicks bounds a recovery time in a shard, in ticks.
	MaxRecoveryTicks = 1 << 30
)

// MergeSweep puts the JSON results of every shard of one sweep together
// (as sweep --shard i/n --json writes them), named names[i] in messages.
// Every shard is checked against its schema before any of it is used.
func MergeSweep(names []string, parts [][]byte) (*Outcome, error) {
	ps := make([]sweepJSON, len(parts))
	for i, p := range parts {
		if err := grid.Decode(p, &ps[i], names[i], func(c *grid.Checker) { sweepChecker{c}.sweep(&ps[i], &ps[0]) }); err != nil {
			return nil, err
		}
	}
	return mergeSweep(ps)
}

// sweepChecker checks a sweep's shard.
type sweepChecker struct{ *grid.Checker }

// sweep checks a sweep shard; first is the first shard's, checked
// before.
func (s sweepChecker) sweep(js, first *sweepJSON) {
	if js.Shard == nil {
		s.Failf("shard", "missing: this is not a shard's result (sweep --shard i/n --json writes one)")
		return
	}
	s.Shard("shard.part", js.Shard.Part, first.Shard.Part)
	s.Number("shard.rate", js.Shard.Rate, 1e-9, 1e9)
	s.Number("shard.for_seconds", js.Shard.ForSeconds, 0, 1e6)
	if !s.Count("load", len(js.Load), 2, maxSweepGrid) || !s.Count("dip", len(js.Dip), 2, maxSweepGrid) ||
		!s.Count("policies", len(js.Policies), sweepPolicies, sweepPolicies) {
		return
	}
	for i, l := range js.Load {
		s.Number(fmt.Sprintf("load[%d]", i), l, 1e-9, 1)
	}
	for i, d := range js.Dip {
		s.Number(fmt.Sprintf("dip[%d]", i), d, 0, 1)
	}
	for i := range js.Policies {
		p := &js.Policies[i]
		if p.Source != "" && p.Source != SourceSimulator || p.Simulated != nil {
			s.Failf(fmt.Sprintf("policies[%d].source", i), "%q: a sweep's shards are the simulator's (--engine model and both do not shard)", p.Source)
			return
		}
		at := fmt.Sprintf("policies[%d].recovery_ticks", i)
		if !s.Count(at, len(p.Recovery), len(js.Dip), len(js.Dip)) {
			return
		}
		for y, row := range p.Recovery {
			if !s.Count(fmt.Sprintf("%s[%d]", at, y), len(row), len(js.Load), len(js.Load)) {
				return
			}
			for x, v := range row {
				if v < notRun || v > MaxRecoveryTicks {
					s.Failf(fmt.Sprintf("%s[%d][%d]", at, y, x), "%d: want ticks, -1 (never) or -2 (another shard's)", v)
				}
			}
		}
		p.Policy = safetext.Name(p.Policy)
	}
	js.Scenario = safetext.Name(js.Scenario)
	if s.Err() != nil || js == first {
		return
	}
	s.Same("scenario", js.Scenario == first.Scenario)
	s.Same("seed", js.Seed == first.Seed)
	s.Same("load", slices.Equal(js.Load, first.Load))
	s.Same("dip", slices.Equal(js.Dip, first.Dip))
	s.Same("shard.rate", js.Shard.Rate == first.Shard.Rate)
	s.Same("shard.for_seconds", js.Shard.ForSeconds == first.Shard.ForSeconds)
	for i := range js.Policies {
		s.Same(fmt.Sprintf("policies[%d].policy", i), js.Policies[i].Policy == first.Policies[i].Policy)
	}
}
