package verdict

import (
	"errors"
	"fmt"
	"slices"

	"github.com/retrystorm/retrystorm/grid"
)

// MergeCheck puts the results of the shards of one check together. Every
// shard must have checked the same fleets on the same envelope, every
// cell must have been run by exactly one of them, and one of them (the
// first) searched the margins.
func MergeCheck(parts []*CheckResult) (*CheckResult, error) {
	if len(parts) == 0 {
		return nil, errors.New("merge: no results")
	}
	m := *parts[0]
	m.Shard = grid.Shard{}.String()
	m.Fleets = slices.Clone(parts[0].Fleets)
	for i := range m.Fleets {
		f := &m.Fleets[i]
		f.Runs, f.Margin = m.newRuns(), nil
		if f.Bare != nil {
			f.Bare = newSeedCells(len(m.Seeds), len(m.Faults), len(m.Loads))
		}
		if f.Assumed != nil {
			a := *f.Assumed
			a.Runs = newSeedCells(len(m.Seeds), len(m.Faults), len(m.Loads))
			f.Assumed = &a
		}
	}
	for _, p := range parts {
		if err := m.sameRun(p); err != nil {
			return nil, err
		}
		for i, f := range p.Fleets {
			if err := m.Fleets[i].merge(f, len(m.Clients), len(m.Seeds)); err != nil {
				return nil, fmt.Errorf("merge: shard %s: %w", p.Shard, err)
			}
		}
	}
	for i := range m.Fleets {
		f := &m.Fleets[i]
		for _, seed := range f.Runs[0] {
			if !complete(seed, f.Judged) {
				return nil, fmt.Errorf("merge: fleet %q has cells no shard ran: give every shard's result", f.Name)
			}
		}
	}
	m.keepBare()
	m.finish()
	return &m, nil
}

// sameRun checks that shard p is of the same check as m.
func (m *CheckResult) sameRun(p *CheckResult) error {
	if p.Schema != m.Schema || p.Scenario != m.Scenario || p.Seed != m.Seed || !slices.Equal(p.Loads, m.Loads) || !slices.EqualFunc(p.Faults, m.Faults, checkFault.same) ||
		!slices.Equal(p.Seeds, m.Seeds) || !slices.Equal(p.Clients, m.Clients) ||
		p.RealLoad != m.RealLoad || p.RealDip != m.RealDip || len(p.Fleets) != len(m.Fleets) {
		return fmt.Errorf("merge: shard %s checked another scenario, envelope or set of fleets", p.Shard)
	}
	for i, f := range p.Fleets {
		g := m.Fleets[i]
		if f.Name != g.Name || !slices.Equal(f.Risks, g.Risks) || !slices.Equal(f.Judged, g.Judged) ||
			(f.Bare == nil) != (g.Bare == nil) || (f.Assumed == nil) != (g.Assumed == nil) {
			return fmt.Errorf("merge: shard %s's fleet %d is %q, not %q as the first checked it", p.Shard, i, f.Name, g.Name)
		}
	}
	return nil
}

// merge copies into f the cells shard part ran, and its margin.
func (f *CheckFleet) merge(part CheckFleet, clients, seeds int) error {
	if len(part.Runs) != clients || part.Bare != nil && len(part.Bare) != seeds || part.Assumed != nil && len(part.Assumed.Runs) != seeds {
		return fmt.Errorf("fleet %q has another set of runs", f.Name)
	}
	into := func(dst, src [][][]CheckCell) error {
		if len(src) != len(dst) {
			return fmt.Errorf("fleet %q has another set of runs", f.Name)
		}
		for s := range src {
			if err := mergeCells(dst[s], src[s]); err != nil {
				return fmt.Errorf("a cell of fleet %q %v", f.Name, err)
			}
		}
		return nil
	}
	for k := range part.Runs {
		if err := into(f.Runs[k], part.Runs[k]); err != nil {
			return err
		}
	}
	if part.Bare != nil {
		if err := into(f.Bare, part.Bare); err != nil {
			return err
		}
	}
	if part.Assumed != nil {
		if err := into(f.Assumed.Runs, part.Assumed.Runs); err != nil {
			return err
		}
	}
	if part.Margin != nil {
		if f.Margin != nil {
			return fmt.Errorf("fleet %q's margin was searched by two shards", f.Name)
		}
		f.Margin = part.Margin
	}
	return nil
}
