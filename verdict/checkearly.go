package verdict

import (
	"context"
	"fmt"
	"sync"

	"github.com/retrystorm/retrystorm/grid"
	"github.com/retrystorm/retrystorm/sim"
)

// Check's runs end early where the simulator's rules prove that what is
// left changes nothing check reads (docs/early-exit.md). By the figures
// each run gives:
//
//   - the runs with retries off play to their end, and only the open
//     intents after it go unfollowed when none of them can succeed
//     (sim.SkipCertainDrain): every figure of the cell is the whole run's;
//   - the runs at the verdict's client count, whose figures the map, the
//     findings and the JSON print, stop once the queue rule proves that
//     the fleet cannot recover and that every intent left is lost
//     (sim.StopWhenLost): their recovery, intents and intents lost are
//     the whole run's; their attempts stop there, so no amplification is
//     judged or printed for them. Their collapse is their finding;
//     CheckOptions.CountCollapsed plays them to their end (SkipCertainDrain);
//   - the runs of the other client counts and of a changed assumption,
//     of which check reads only the verdict's level, and the margin's
//     runs, of which it reads only whether they recovered, stop as soon
//     as their collapse is certain (sim.StopWhenDecided).
//
// A stopped cell (not one never healthy, whose finding makes the level
// UNSAFE by itself) keeps its level only when the same cell with retries
// off recovers: the collapse is then UNSAFE whatever its other figures.
// Where retries off collapse too, or the fleet does not retry, the cell
// is run again to its end, and its amplification judged. A stopped cell
// says where (CheckCell.EndedEarly) and the result says how many (a
// note). CheckOptions.FullRuns turns it all off.

// earlyFor is how far job j's run may end early.
func (c *checkRun) earlyFor(j job) sim.EarlyExit {
	switch {
	case j.variant == assumed || j.clients > 0:
		return sim.StopWhenDecided
	case j.variant != retriesOff && c.lost:
		return sim.StopWhenLost
	}
	return sim.SkipCertainDrain
}

// earlyExit is a grid's Early for runs that may end early by m, when the
// check lets runs end early; nil otherwise.
func (c *checkRun) earlyExit(m sim.EarlyExit) func(int) sim.EarlyExit {
	if !c.early {
		return nil
	}
	return func(int) sim.EarlyExit { return m }
}

// settleStopped makes sure that the stopped runs among jobs (which ran,
// and whose cells cells gives) keep their fleet's level: it runs the same
// cells with retries off, and again to their end each whose retries-off
// run does not recover, or whose fleet does not retry; refile files a
// cell run again.
func (c *checkRun) settleStopped(ctx context.Context, jobs []job, cells func(j job) *CheckCell, refile func(j job, cell CheckCell)) error {
	var stopped []job
	for _, j := range jobs {
		if cell := cells(j); cell.Ran && cell.EndedEarly != nil && !cell.NeverHealthy {
			stopped = append(stopped, j)
		}
	}
	if len(stopped) == 0 {
		return nil
	}
	type key struct{ fleet, seed, fault, load int }
	recovers := map[key]bool{}
	var bare []job
	for _, j := range stopped {
		k := key{j.fleet, j.seed, j.fault, j.load}
		if _, ok := recovers[k]; !ok && chainRetries(c.in[j.fleet]) {
			recovers[k] = false
			bare = append(bare, job{j.fleet, retriesOff, 0, j.seed, j.fault, j.load, sim.SkipCertainDrain})
		}
	}
	var mu sync.Mutex // the grid's workers call back at once: a map takes no concurrent writes, even to keys of their own
	err := c.e.runJobs(ctx, bare, c.fleet, c.name, grid.Shard{}, c.opts, func(j job, cell CheckCell) {
		mu.Lock()
		recovers[key{j.fleet, j.seed, j.fault, j.load}] = cell.Recovered
		mu.Unlock()
	})
	if err != nil {
		return err
	}
	var again []job
	for _, j := range stopped {
		if !recovers[key{j.fleet, j.seed, j.fault, j.load}] {
			j.early = sim.SkipCertainDrain
			again = append(again, j)
		}
	}

	return c.e.runJobs(ctx, again, c.fleet, c.name, grid.Shard{}, c.opts, refile)
}

// earlyNote says how many of the result's cells stopped early, if any:
// at the verdict's client count, and at the others (or with an
// assumption changed).
func (r *CheckResult) earlyNote() []string {
	var stopped, runs [2]int
	count := func(k int, seeds [][][]CheckCell) {
		for _, s := range seeds {
			for _, row := range s {
				for _, c := range row {
					if c.Ran {
						runs[k]++
						if c.EndedEarly != nil {
							stopped[k]++
						}
					}
				}
			}
		}
	}
	for _, f := range r.Fleets {
		for i, k := range f.Runs {
			count(min(i, 1), k)
		}
		if f.Assumed != nil {
			count(1, f.Assumed.Runs)
		}
	}
	var out []string
	if stopped[0] > 0 {
		out = append(out, fmt.Sprintf("%d of the %d runs at the verdict's client count stopped once their collapse was certain and every intent left was lost (docs/early-exit.md): their recovery (never) and intents lost are the whole run's, their attempts stop there, so the map and the worst numbers give no amplification for them (their collapse is the finding); --full-runs plays them to their end",
			stopped[0], runs[0]))
	}
	if stopped[1] > 0 {
		out = append(out, fmt.Sprintf("%d of the %d runs at the other client counts (or with an assumption changed) stopped once their collapse was certain (docs/early-exit.md): each stays collapsed, its level counts in the verdict, and no number printed comes from it (--json marks them: ended_early)",
			stopped[1], runs[1]))
	}
	return out
}
