package configcmd

import (
	"context"
	"slices"
	"strconv"

	"github.com/retrystorm/retrystorm/experiment"
	"github.com/retrystorm/retrystorm/scenario"
	"github.com/retrystorm/retrystorm/verdict"
)

// The writable search screens (the model, or one seed of the simulator)
// the candidates that change one setting of the format (its retries, its
// per-try timeout, its back-off, its limit, its outlier detection...),
// then climbs: from the best screened so far, every candidate one setting
// away, for at most climbSteps steps, while one does better. The best
// topSingles of all that were screened, the climb's end, and what code
// would add to your policy and to the best that still retries then run
// as a search of their own (screened again from the cache, the best at
// every seed): every comparison printed rests on that last search. Its
// cost grows with the settings' choices times the steps, not with their
// product.
const (
	topSingles = 4
	climbSteps = 3
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
	ao.Screens = &verdict.ScreenCache{}
	screen := func(idx []int) (*verdict.AdviseResult, error) {
		s := ao
		s.Space, s.Writable, s.ScreenOnly = []scenario.Fleet{}, e.fleetsOf(idx), true
		return verdict.Advise(ctx, start, s, opts)
	}
	var singles []int
	for i, c := range e.cands[1:] {
		if changedSettings(c.Pick) == 1 {
			singles = append(singles, i+1)
		}
	}
	r, err := screen(singles)
	if err != nil {
		return nil, err
	}
	top := e.screenTop(r)
	screened := map[int]bool{}
	for _, i := range singles {
		screened[i] = true
	}
	// Climb from the best screened and from the best that still retries
	// (no retries at all screens well in a storm, and is a dead end to
	// climb from): each step screens both one setting further.
	starts := e.climbStarts(r)
	for range climbSteps {
		var next []int
		for _, c := range starts {
			next = append(next, e.neighbours(c, screened)...)
		}
		if len(next) == 0 {
			break
		}
		if r, err = screen(append(next, starts...)); err != nil {
			return nil, err
		}
		better := e.climbStarts(r)
		if slices.Equal(better, starts) {
			break
		}
		starts = better
	}
	round := top
	for _, c := range starts {
		if !slices.Contains(round, c) {
			round = append(round, c)
		}
	}
	ao.Writable = e.fleetsOf(round)
	// What code would add: to your policy, and to the best that still
	// retries.
	ao.Space = verdict.CodeAdditions(start.Fleet)
	for _, i := range append(starts, top...) {
		if f := e.cands[i].Fleet.Fleet; retries(f) {
			f.Name = e.nameOf(i)
			ao.Space = append(ao.Space, verdict.CodeAdditions(f)...)
			break
		}
	}
	return verdict.Advise(ctx, start, ao, opts)
}

// screenTop returns the topSingles best writable candidates of a screen
// (indexes into e.cands; yours left out).
func (e *editTarget) screenTop(r *verdict.AdviseResult) []int {
	var top []int
	for _, k := range r.ScreenOrder {
		if i, ok := e.byName[r.Candidates[k].Name]; ok && k != 0 && len(top) < topSingles {
			top = append(top, i)
		}
	}
	return top
}

// climbStarts returns, of a screen, the best writable candidate that
// screens better than yours, and the best that still retries if that is
// another one (indexes into e.cands); none when yours screens best.
func (e *editTarget) climbStarts(r *verdict.AdviseResult) []int {
	var out []int
	retrying := false
	for _, k := range r.ScreenOrder {
		if k == 0 || !r.ScreenBetter(k) {
			continue
		}
		i, ok := e.byName[r.Candidates[k].Name]
		if !ok {
			continue
		}
		rt := retries(e.cands[i].Fleet.Fleet)
		switch {
		case len(out) == 0:
			out, retrying = append(out, i), rt
		case !retrying && rt:
			return append(out, i)
		}
		if retrying {
			break
		}
	}
	return out
}

// neighbours are the candidates one setting away from candidate cur (one
// setting changed, added or taken back) that were not screened yet; they
// are marked screened.
func (e *editTarget) neighbours(cur int, screened map[int]bool) []int {
	var out []int
	for i := 1; i < len(e.cands); i++ {
		if screened[i] || i == cur || differ(e.cands[i].Pick, e.cands[cur].Pick) != 1 {
			continue
		}
		screened[i] = true
		out = append(out, i)
	}
	return out
}

// differ counts the settings two picks set differently.
func differ(a, b []int) int {
	n := 0
	for d := range a {
		if a[d] != b[d] {
			n++
		}
	}
	return n
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

// fleetsOf are the candidates at indexes idx as advise takes them, named
// uniquely within a fleet name's length; byName maps those names back.
func (e *editTarget) fleetsOf(idx []int) []scenario.Fleet {
	out := []scenario.Fleet{}
	for _, i := range idx {
		c := e.cands[i]
		f := c.Fleet.Fleet
		f.Name = e.nameOf(i)
		e.byName[f.Name] = i
		out = append(out, f)
	}
	return out
}

// nameOf is writable candidate i's name for advise: its changes in the
// product's words, cut to a fleet name's length, numbered only when
// another candidate has that name already.
func (e *editTarget) nameOf(i int) string {
	name := shorten(e.cands[i].Name)
	if j, taken := e.byName[name]; taken && j != i || name == e.from.Fleet.Name {
		name = shorten(e.cands[i].Name + " #" + strconv.Itoa(i))
	}
	return name
}
