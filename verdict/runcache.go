package verdict

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/retrystorm/retrystorm/scenario"
	"github.com/retrystorm/retrystorm/sim"
)

// RunCache keeps what check read from its simulator runs, by everything
// that decides a run (its scenario but for the names of the scenario, its
// fleet and its tiers; its early exit; the window the cell is read
// through), so that a run met again is made once. The names are left out
// because check's scenarios never refer to them: one fleet, and faults
// that target no fleet or tier by name (envelopeCell); a scenario that
// did (a trigger's fleet, a fleet's callee) must not be keyed this way.
// The runs met again are those with retries off: every chain of a manifests
// directory that differs only in its retries has the same ones, for its
// cells and its margin's search, and a check's runs with retries off for
// the cells that stopped early (settleStopped) are among those its
// verdict compares a collapse with (bareJobs).
//
// A run's result depends on its scenario alone (the simulator is
// deterministic, its randomness drawn from the scenario's seed), so what
// a check prints is the same with or without a cache;
// TestRunCacheChangesNothing holds it to that.
//
// The zero RunCache is empty and ready to use. It is safe for concurrent
// use. It grows by a few hundred bytes per distinct run, and check's runs
// are bounded (--max-runs).
type RunCache struct {
	mu    sync.Mutex
	cells map[runKey]CheckCell
	made  int // runs made through the cache
	hits  int // runs not made, their cell found
}

// noRunCache makes a check given no RunCache keep none (tests).
var noRunCache bool

// runKey is the SHA-256 of what decides a run and how it is read.
type runKey [sha256.Size]byte

// keyOf is the key of sc's run with early exit early, read as read says
// (the cell's window, or only whether it recovered). ok is false where sc
// cannot be keyed: it then runs uncached.
func keyOf(sc *scenario.Scenario, early sim.EarlyExit, read string) (k runKey, ok bool) {
	c := sc.Clone()
	c.Name = ""
	for i := range c.Fleets {
		c.Fleets[i].Name = ""
	}
	c.Tiers = append([]scenario.Tier(nil), c.Tiers...)
	for i := range c.Tiers {
		c.Tiers[i].Name = ""
	}
	b, err := json.Marshal(c)
	if err != nil {
		return k, false
	}
	h := sha256.New()
	fmt.Fprintf(h, "%d\x00%s\x00", early, read)
	h.Write(b)
	h.Sum(k[:0])
	return k, true
}

// find keys sc's run with early exit early, read as read says, and
// returns the cell kept under the key if any. keyed is false, and the run
// goes uncached, where there is no cache or sc cannot be keyed.
func (c *RunCache) find(sc *scenario.Scenario, early sim.EarlyExit, read string) (k runKey, keyed bool, cell CheckCell, hit bool) {
	if c == nil {
		return k, false, cell, false
	}
	if k, keyed = keyOf(sc, early, read); keyed {
		cell, hit = c.get(k)
	}
	return k, keyed, cell, hit
}

// get returns the cell kept under k.
func (c *RunCache) get(k runKey) (CheckCell, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cell, ok := c.cells[k]
	if ok {
		c.hits++
	}
	return cell, ok
}

// shared counts n runs not made, being the same as one made beside them.
func (c *RunCache) shared(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hits += n
}

// put keeps cell under k.
func (c *RunCache) put(k runKey, cell CheckCell) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cells == nil {
		c.cells = map[runKey]CheckCell{}
	}
	c.cells[k] = cell
	c.made++
}

// Counts reports how many runs were made through the cache and how many
// were not, being found in it.
func (c *RunCache) Counts() (made, shared int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.made, c.hits
}
