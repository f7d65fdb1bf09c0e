package configcmd

import (
	"cmp"
	"context"
	"slices"
	"strconv"

	"github.com/retrystorm/retrystorm/experiment"
	"github.com/retrystorm/retrystorm/importer"
	"github.com/retrystorm/retrystorm/scenario"
	"github.com/retrystorm/retrystorm/verdict"
)

// The writable search goes setting by setting: the candidates that change
// one setting of the format (its retries, its per-try timeout, its
// back-off, its limit, its outlier detection...), then the best
// topPerSetting values of each setting that did better than yours, taken
// together (at most maxCombos of them), beside the best of the first
// round and what code would add to it. Its cost grows with the sum of the
// settings' choices, not their product.
const (
	topPerSetting = 2
	maxCombos     = 24
	topSingles    = 4
)

// writableSearch is advise's search for a user's config whose format
// importer.Writable searches: every candidate simulated as the product
// reads its edited file, every comparison over the same cells and seeds.
// exhaustive runs every candidate the format writes, and advise's own
// space of code policies, at every seed (--exhaustive).
func writableSearch(ctx context.Context, start verdict.CheckInput, e *editTarget, ao verdict.AdviseOptions, opts experiment.Options, exhaustive bool) (*verdict.AdviseResult, error) {
	if exhaustive || ao.Shard.Count > 1 {
		all := make([]int, 0, len(e.cands)-1)
		for i := 1; i < len(e.cands); i++ {
			all = append(all, i)
		}
		ao.Writable, ao.Exhaustive = e.fleetsOf(all), true
		return verdict.Advise(ctx, start, ao, opts)
	}
	// Round 1: one setting at a time.
	var singles []int
	for i, c := range e.cands[1:] {
		if changedSettings(c.Pick) == 1 {
			singles = append(singles, i+1)
		}
	}
	ao.Space, ao.Writable = []scenario.Fleet{}, e.fleetsOf(singles)
	r1, err := verdict.Advise(ctx, start, ao, opts)
	if err != nil {
		return nil, err
	}
	yours := r1.Candidates[0]
	best := map[int][]int{} // setting → the options that did better than yours, best first
	var top []int
	for _, k := range r1.Ranking {
		c := r1.Candidates[k]
		i, ok := e.byName[c.Name]
		if !ok || !c.Simulated() {
			continue
		}
		if len(top) < topSingles {
			top = append(top, i)
		}
		if !verdict.Better(c, yours) {
			continue
		}
		d := settingOf(e.cands[i].Pick)
		if len(best[d]) < topPerSetting {
			best[d] = append(best[d], e.cands[i].Pick[d])
		}
	}
	// Round 2: the best of each setting together, the best singles
	// again, and code on top of the best single.
	round := slices.Clone(top)
	var combos []int
	for i, c := range e.cands[1:] {
		if changedSettings(c.Pick) >= 2 && takes(c.Pick, best) {
			combos = append(combos, i+1)
		}
	}
	slices.SortStableFunc(combos, func(a, b int) int {
		return cmp.Compare(-changedSettings(e.cands[a].Pick), -changedSettings(e.cands[b].Pick))
	})
	round = append(round, combos[:min(len(combos), maxCombos)]...)
	ao.Writable = e.fleetsOf(round)
	// What code would add: to your policy, and to the best single that
	// still retries.
	ao.Space = verdict.CodeAdditions(start.Fleet)
	for _, i := range top {
		if f := e.cands[i].Fleet.Fleet; retries(f) {
			f.Name = shorten(candidateName(e.cands[i], i))
			ao.Space = append(ao.Space, verdict.CodeAdditions(f)...)
			break
		}
	}
	return verdict.Advise(ctx, start, ao, opts)
}

// retries reports whether f sends attempts past the first.
func retries(f scenario.Fleet) bool { return f.Retry.MaxRetries != 0 || f.Hedge.Delay > 0 }

// changedSettings counts the settings a pick changes.
func changedSettings(pick []int) int {
	n := 0
	for _, i := range pick {
		if i != 0 {
			n++
		}
	}
	return n
}

// settingOf is the one setting a single's pick changes.
func settingOf(pick []int) int {
	for d, i := range pick {
		if i != 0 {
			return d
		}
	}
	return -1
}

// takes reports whether every setting pick changes takes one of the
// options best lists for it.
func takes(pick []int, best map[int][]int) bool {
	for d, i := range pick {
		if i != 0 && !slices.Contains(best[d], i) {
			return false
		}
	}
	return true
}

// fleetsOf are the candidates at indexes idx as advise takes them, named
// uniquely within a fleet name's length; byName maps those names back.
func (e *editTarget) fleetsOf(idx []int) []scenario.Fleet {
	out := []scenario.Fleet{}
	for _, i := range idx {
		c := e.cands[i]
		f := c.Fleet.Fleet
		f.Name = shorten(candidateName(c, i))
		e.byName[f.Name] = i
		out = append(out, f)
	}
	return out
}

// candidateName is a writable candidate's name for advise: its changes
// in the product's words, numbered.
func candidateName(c importer.Candidate, i int) string {
	return c.Name + " #" + strconv.Itoa(i)
}
