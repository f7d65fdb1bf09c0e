package cli

import (
	"flag"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/retrystorm/retrystorm/scenario"
	"github.com/retrystorm/retrystorm/sim"
)

// costValues bound what a scenario may cost before it runs (see
// sim.Estimate): --max-memory, --long; and --progress shows how far it is
// when standard error is not a terminal.
type costValues struct {
	maxMemory int64
	long      bool
	progress  bool
}

// longRun is the most simulated attempts a run may take without --long
// when nobody watches (standard error is not a terminal): about a minute
// and a half at sim.AttemptsPerSecond. On a terminal a longer run goes
// ahead, with its progress and the time left.
const longRun = 2e8

func addCostFlags(fs *flag.FlagSet, c *costValues) {
	addMemoryFlag(fs, c)
	fs.BoolVar(&c.long, "long", false, "run a scenario estimated to take long even when standard error is not a terminal")
	fs.BoolVar(&c.progress, "progress", false, "show progress on standard error even when it is not a terminal, one line every few seconds")
}

// addMemoryFlag adds --max-memory alone, for the commands that run many
// scenarios of their own making (check, advise): their refusal says
// "raise the limit", and this is how.
func addMemoryFlag(fs *flag.FlagSet, c *costValues) {
	if fs.Lookup("max-memory") != nil {
		return // a command with both groups: defined once
	}
	c.maxMemory = sim.DefaultLimits.Memory
	funcVar(fs, "max-memory", "refuse a scenario estimated to need more memory than `SIZE` (default 2GiB; units B, KiB, MiB, GiB, TiB)", func(s string) error {
		n, err := parseSize(s)
		if err != nil {
			return err
		}
		c.maxMemory = n
		return nil
	})
}

// parseSize reads a size such as 2GiB, 512MiB or 1000000 (bytes).
func parseSize(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   float64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1}}
	num, mult := s, 1.0
	for _, u := range units {
		if v, ok := strings.CutSuffix(s, u.suffix); ok {
			num, mult = strings.TrimSpace(v), u.mult
			break
		}
	}
	f, err := strconv.ParseFloat(num, 64)
	n := f * mult
	if err != nil || !(n >= 1<<20 && n <= 1<<50) {
		return 0, fmt.Errorf("want a size from 1MiB to 1PiB, such as 2GiB or 512MiB, got %q", s)
	}
	return int64(math.Round(n)), nil
}

// costFlags is the flag group of the commands that run the simulator.
func costFlags(fs *flag.FlagSet, inv *Invocation) { addCostFlags(fs, &inv.cost) }

// memoryFlag is --max-memory alone (check and advise take it with their
// own flags).
func memoryFlag(fs *flag.FlagSet, inv *Invocation) { addMemoryFlag(fs, &inv.cost) }

// Limits are the bounds every simulator run of this command gets.
func (inv *Invocation) Limits() sim.Limits {
	return sim.Limits{Memory: inv.cost.maxMemory}
}

// Admit checks a user's scenario before it runs: refused (a usage error,
// exit 2) when its estimated memory exceeds --max-memory, or when its
// estimated work is long and nobody watches unless --long says so.
func (inv *Invocation) Admit(sc *scenario.Scenario) error {
	cost := sim.Estimate(sc)
	if err := cost.Check(sc.Name, inv.Limits()); err != nil {
		return Usagef("%v (--max-memory sets the limit)", err)
	}
	if !inv.cost.long && !isTerminal(inv.Stderr) {
		if err := cost.Check(sc.Name, sim.Limits{Attempts: longRun}); err != nil {
			return Usagef("%v: pass --long to run it anyway (with --progress to follow it)", err)
		}
	}
	return nil
}

// AdmitSearch refuses a search of many runs (advise's) by the rule Admit
// applies to one scenario: when its estimated work, attempts simulated
// attempts in all, is long and nobody watches, unless --long says so.
func (inv *Invocation) AdmitSearch(what string, attempts float64) error {
	if inv.cost.long || isTerminal(inv.Stderr) {
		return nil
	}
	if err := (sim.Cost{Attempts: attempts}).Check(what, sim.Limits{Attempts: longRun}); err != nil {
		return Usagef("%v: pass --long to run it anyway (with --progress to follow it)", err)
	}
	return nil
}

// Progress returns the progress display of this command line (see
// newProgress) as the function a long run reports to, and the function
// that clears it once the run is over.
func (inv *Invocation) Progress(label string) (update func(done, total int), clear func()) {
	p := inv.newProgress(label)
	return p.update, p.clear
}

// newProgress is the progress display of this command line: a bar on a
// terminal (not with --json), lines with --progress elsewhere.
func (inv *Invocation) newProgress(label string) *progress {
	p := newProgress(inv.Stderr, !inv.JSON, label)
	if inv.cost.progress && !p.on {
		p.on, p.lines = true, true
	}
	return p
}
