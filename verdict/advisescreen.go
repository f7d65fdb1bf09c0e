package verdict

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/retrystorm/retrystorm/experiment"
	"github.com/retrystorm/retrystorm/grid"
	"github.com/retrystorm/retrystorm/report"
	"github.com/retrystorm/retrystorm/sim"
)

// An unsharded advise screens its candidates before it simulates them at
// every seed (issue 29): a candidate the analytic model describes is
// screened by the model (one run per cell, about a millisecond for the
// whole envelope), any other by one seed of the simulator. Then every
// candidate that can still win runs at every seed, and the ranking and
// the recommendation rest on those runs only. The screen decides what
// is simulated, never what is recommended.
//
// The screen's simulator runs stop once a collapse is certain and every
// intent left is lost (sim.StopWhenLost): what the screen ranks by (the
// cells that never recover or amplify, those that never recover, the
// intents lost) is the whole run's, and only its tie-break, the extra
// attempts, stops there. A candidate that goes on runs such a cell again,
// to its end.
const (
	// adviseConfirm is how many candidates, besides yours, go on to
	// every seed at least: the screen's best.
	adviseConfirm = 4
	// screenSlack: a candidate whose screen has no more bad cells than
	// the screen's best and loses at most this share more intents goes
	// on too. One seed is one draw (its intents lost move by well under
	// a per cent from seed to seed on the storm's envelope) and the
	// model's intents lost are an estimate, so the screen cannot tell
	// apart candidates this close; the simulator at every seed does.
	screenSlack      = 0.02
	modelScreenSlack = 0.05
	// modelMargin: a cell of the model amplifies, for the screen, only
	// this far past check's thresholds. Near them the model's peak is
	// too close to call, and the candidate stays in the running.
	modelMargin = 0.1
)

// screenKey is a candidate's screen in the ranking's order: cells that
// never recover or amplify, cells that never recover, intents lost, extra
// attempts, the slowest recovery.
type screenKey struct {
	bad, never   int
	lost, extra  int64
	slowest      int
	fromTheModel bool
}

func (a screenKey) compare(b screenKey) int {
	return cmp.Or(cmp.Compare(a.bad, b.bad), cmp.Compare(a.never, b.never), cmp.Compare(a.lost, b.lost),
		cmp.Compare(a.extra, b.extra), cmp.Compare(a.slowest, b.slowest))
}

// screenOf totals a candidate's screen. A model cell counts as amplifying
// only past the thresholds with modelMargin to spare.
func (r *AdviseResult) screenOf(c *AdviseCandidate) screenKey {
	k := screenKey{fromTheModel: c.ScreenSource != sourceScreen}
	for fi, row := range c.Screen {
		if !c.Judged[fi] {
			continue
		}
		for _, cell := range row {
			margin := 1.0
			if cell.Source == sourceModel {
				margin += modelMargin
			}
			amp := !under(cell, r.Faults[fi], margin)
			if !cell.Recovered {
				k.never++
			}
			if !cell.Recovered || amp {
				k.bad++
			}
			k.lost += cell.IntentsLost
			k.extra += cell.Retries
			k.slowest = max(k.slowest, cell.RecoveryTicks)
		}
	}
	return k
}

// get returns the screen kept for name; a nil cache keeps none.
func (c *ScreenCache) get(name string) (screenEntry, bool) {
	if c == nil {
		return screenEntry{}, false
	}
	s, ok := c.m[name]
	return s, ok
}

// put keeps name's screen; a nil cache keeps nothing.
func (c *ScreenCache) put(name string, s screenEntry) {
	if c == nil {
		return
	}
	if c.m == nil {
		c.m = map[string]screenEntry{}
	}
	c.m[name] = s
}

// ScreenBetter reports whether candidate i's screen does better than your
// policy's (candidate 0's), in the ranking's order: fewer cells that never
// recover or amplify, then fewer that never recover, then fewer intents
// lost. False without a screen.
func (r *AdviseResult) ScreenBetter(i int) bool {
	if i >= len(r.screenKeys) {
		return false
	}
	return r.screenKeys[i].compare(r.screenKeys[0]) < 0
}

// screened is Advise's search with a screen: it screens every candidate,
// runs the ones that can still win at every seed, ranks, and, when the
// best of those still fails or amplifies in some cell (so that a
// candidate left out could rank above it), runs every other candidate at
// every seed too.
func (r *AdviseResult) screened(ctx context.Context, e *envelope, name func(int) string, opts experiment.Options, only bool, cache *ScreenCache) error {
	nS, nF, nL := len(e.seeds), len(e.faults), len(e.loads)
	var first []job
	for i := range r.Candidates {
		c := &r.Candidates[i]
		if s, ok := cache.get(c.Name); ok {
			c.Screen, c.ScreenSource, c.Cells = s.cells, s.source, nil
			continue
		}
		c.Screen, c.Cells = newCells(nF, nL), nil
		var model, simulated int
		for fi := range nF {
			if !c.Judged[fi] {
				continue
			}
			for li := range nL {
				sc, err := e.cell(c.Fleet, 0, 0, fi, li)
				if err != nil {
					return fmt.Errorf("%s: %w", name(i), err)
				}
				cell, err := modelCell(sc)
				if err != nil {
					// Unsupported, or settings the simulator will name:
					// either way the simulator answers this cell.
					first = append(first, job{fleet: i, fault: fi, load: li, early: sim.StopWhenLost})
					simulated++
					continue
				}
				c.Screen[fi][li] = cell
				model++
			}
		}
		switch {
		case simulated == 0:
			c.ScreenSource = sourceModel
		case model == 0:
			c.ScreenSource = sourceScreen
		default:
			c.ScreenSource = sourceMixed
		}
	}
	if err := r.run(ctx, e, first, name, grid.Shard{}, opts); err != nil {
		return err
	}
	for _, c := range r.Candidates {
		cache.put(c.Name, screenEntry{cells: c.Screen, source: c.ScreenSource})
	}

	keys := make([]screenKey, len(r.Candidates))
	order := make([]int, len(r.Candidates))
	for i := range r.Candidates {
		keys[i], order[i] = r.screenOf(&r.Candidates[i]), i
	}
	slices.SortStableFunc(order, func(a, b int) int { return keys[a].compare(keys[b]) })
	r.ScreenOrder, r.screenKeys = order, keys
	if only {
		for i := range r.Candidates {
			r.Candidates[i].Source = r.Candidates[i].ScreenSource
		}
		return nil
	}
	best := keys[order[0]]
	confirm := make([]bool, len(r.Candidates))
	confirm[0] = true // yours: the claims compare with it
	writable := 0
	for pos, i := range order {
		k := keys[i]
		slack := screenSlack
		if k.fromTheModel {
			slack = modelScreenSlack
		}
		if pos < adviseConfirm || k.bad <= best.bad && k.never <= best.never && float64(k.lost) <= float64(best.lost)*(1+slack) {
			confirm[i] = true
		}
		// The screen never drops the best the user's format can write:
		// its top candidates go on to every seed too, whatever the others.
		if r.Candidates[i].Writable {
			if writable < adviseConfirm {
				confirm[i] = true
			}
			writable++
		}
	}

	for {
		var jobs []job
		for i, ok := range confirm {
			c := &r.Candidates[i]
			if !ok || c.Cells != nil {
				continue
			}
			c.Cells = newSeedCells(nS, nF, nL)
			for _, j := range r.candidateJobs(i, 0) {
				if sc := c.Screen[j.fault][j.load]; j.seed == 0 && sc.Source == sourceSimulator && sc.EndedEarly == nil {
					// The screen's run of the cell is its first seed,
					// unless it stopped once its collapse was certain:
					// its retries are counted to its end here.
					c.Cells[0][j.fault][j.load] = sc
					continue
				}
				jobs = append(jobs, j)
			}
		}
		if err := r.run(ctx, e, jobs, name, grid.Shard{}, opts); err != nil {
			return err
		}
		all := true
		for i := range r.Candidates {
			c := &r.Candidates[i]
			if c.Cells != nil {
				c.Source = sourceSimulator
			} else {
				c.Source, all = c.ScreenSource, false
			}
		}
		if err := r.run(ctx, e, r.bareJobs(false), name, grid.Shard{}, opts); err != nil {
			return err
		}
		r.rank()
		if b := r.Best(); b.Level == Safe || all {
			return nil
		}
		for i := range confirm {
			confirm[i] = true
		}
	}
}

// screenNote says, for the report, how the search spent its runs: which
// candidates the model or one seed screened out, and how many runs that
// saved. Empty for an exhaustive search.
func (r *AdviseResult) screenNote() string {
	var model, oneSeed, sim int
	for _, c := range r.Candidates {
		switch {
		case c.simulated():
			sim++
		case c.Source == sourceModel:
			model++
		default:
			oneSeed++
		}
	}
	if model+oneSeed == 0 {
		return ""
	}
	return fmt.Sprintf("Screened first: the analytic model (docs/model.md) answered for the candidates it describes, one seed of the simulator for the others; "+
		"the %d that could still win ran in the simulator at every seed, and the ranking rests on those runs (\"from\": simulator). "+
		"%d candidates were left out after the model's screen and %d after one seed: their numbers are over one pass of the cells. "+
		"%s simulator runs of the %s an exhaustive search makes (--exhaustive).",
		sim, model, oneSeed, report.Int(int64(r.Runs)), report.Int(int64(r.Exhaustive)))
}
