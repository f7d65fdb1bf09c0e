package verdict

import (
	"fmt"
	"strings"

	"github.com/retrystorm/retrystorm/report"
)

// Level is a verdict's grade (docs/check.md, "The verdict").
type Level int

const (
	// Safe: the fleet recovers in every realistic cell without amplifying
	// past the thresholds, and collapses outside the region only where
	// the same system without retries does too.
	Safe Level = iota
	// AtRisk: it recovers in the realistic region, but amplifies past a
	// threshold in some fault it retries on, or collapses outside the
	// region where the same system without retries recovers.
	AtRisk
	// Unsafe: it stays collapsed in some realistic cell where the same
	// system without retries recovers (a sustaining loop), or it was
	// never healthy.
	Unsafe
)

var levelWords = [...]string{Safe: "SAFE", AtRisk: "AT RISK", Unsafe: "UNSAFE"}
var levelKeys = [...]string{Safe: "safe", AtRisk: "at_risk", Unsafe: "unsafe"}

// String is the level as the verdict prints it: SAFE, AT RISK, UNSAFE.
func (l Level) String() string {
	if l < Safe || l > Unsafe {
		return fmt.Sprintf("Level(%d)", int(l))
	}
	return levelWords[l]
}

// MarshalText is the level as the JSON has it: safe, at_risk, unsafe.
func (l Level) MarshalText() ([]byte, error) {
	if l < Safe || l > Unsafe {
		return nil, fmt.Errorf("verdict: level %d", int(l))
	}
	return []byte(levelKeys[l]), nil
}

// UnmarshalText reads MarshalText's words.
func (l *Level) UnmarshalText(b []byte) error {
	for i, k := range levelKeys {
		if string(b) == k {
			*l = Level(i)
			return nil
		}
	}
	return fmt.Errorf("verdict: level %q: want safe, at_risk or unsafe", b)
}

// What a finding found in a cell.
const (
	findCollapse     = "collapse"         // a realistic cell stays collapsed; retries off recover
	findNeverHealthy = "never_healthy"    // the fleet failed most of its tries before the fault
	findOutside      = "collapse_outside" // a cell outside the region stays collapsed; retries off recover
	findSystem       = "collapse_anyway"  // a cell stays collapsed with retries off too: not the policy's
	findWork         = "work"             // attempts per intent past maxWorkAmplification
	findLoad         = "load"             // mean offered load past maxWorkLoad
	findInstant      = "instant"          // attempts per intent past maxInstantAmplification
	findHerd         = "herd"             // the herd at recovery past maxHerd
)

// Finding is one reason a cell gives against a fleet: what happened, in
// how many seeds, the worst value measured and the threshold it passed.
type Finding struct {
	What      string  `json:"what"`
	Fault     int     `json:"fault"`
	Load      int     `json:"load"`
	Seeds     int     `json:"seeds"`
	Value     float64 `json:"value,omitempty"`
	Threshold float64 `json:"threshold,omitempty"`
}

// level is the grade a finding gives.
func (f Finding) level() Level {
	switch f.What {
	case findCollapse, findNeverHealthy:
		return Unsafe
	case findSystem:
		return Safe
	}
	return AtRisk
}

// judgement is a fleet's verdict at one client count, with its reasons.
type judgement struct {
	Level    Level
	Findings []Finding
}

// count is how many findings give level l.
func (j judgement) count(l Level) int {
	n := 0
	for _, f := range j.Findings {
		if f.level() == l {
			n++
		}
	}
	return n
}

// assessment is what judge needs of a result: the envelope's axes and
// realistic region.
type assessment struct {
	loads    []float64
	faults   []checkFault
	realLoad float64
}

// judge grades one fleet's runs at one client count: runs and bare are
// [seed][fault][load], the fleet as configured and with retries off (nil
// when the fleet does not retry: it is its own retries-off), judged
// which faults it is judged on. Only realistic cells ran at a client
// count other than the first; the cells outside the region are judged
// where they ran.
func (a assessment) judge(runs, bare [][][]CheckCell, judged []bool) judgement {
	var j judgement
	for fi, ft := range a.faults {
		if fi < len(judged) && !judged[fi] {
			continue
		}
		for li := range a.loads {
			real := realisticCell(a.loads, a.faults, a.realLoad, fi, li)
			if f, ok := a.collapse(runs, bare, fi, li, real); ok {
				j.Findings = append(j.Findings, f)
			}
			if real {
				j.Findings = append(j.Findings, a.amplification(runs, ft, fi, li)...)
			}
		}
	}
	for _, f := range j.Findings {
		j.Level = max(j.Level, f.level())
	}
	return j
}

// collapse is the finding of a cell where some seed never recovered: a
// fleet that was never healthy, a collapse the retries keep going (the
// same seed recovers with retries off), or one the system makes without
// them.
func (a assessment) collapse(runs, bare [][][]CheckCell, fi, li int, real bool) (Finding, bool) {
	var never, sick, anyway int
	for s, seed := range runs {
		c := seed[fi][li]
		if !c.Ran || c.Recovered {
			continue
		}
		switch {
		case c.NeverHealthy:
			sick++
		case bare == nil:
			anyway++
		case s < len(bare) && bare[s][fi][li].Ran && !bare[s][fi][li].Recovered:
			anyway++
		default:
			never++
		}
	}
	f := Finding{Fault: fi, Load: li}
	switch {
	case sick > 0:
		f.What, f.Seeds = findNeverHealthy, sick
	case never > 0 && real:
		f.What, f.Seeds = findCollapse, never
	case never > 0:
		f.What, f.Seeds = findOutside, never
	case anyway > 0:
		f.What, f.Seeds = findSystem, anyway
	default:
		return Finding{}, false
	}
	return f, true
}

// amplification is the findings of a realistic cell past the thresholds
// for its fault's cost, and its herd at recovery, each with the worst
// value over the seeds.
func (a assessment) amplification(runs [][][]CheckCell, ft checkFault, fi, li int) []Finding {
	type test struct {
		what      string
		threshold float64
		value     func(CheckCell) float64
	}
	tests := []test{{findHerd, maxHerd, func(c CheckCell) float64 { return c.Herd }}}
	if ft.Instant {
		tests = append(tests, test{findInstant, maxInstantAmplification, CheckCell.perIntent})
	} else {
		tests = append(tests, test{findWork, maxWorkAmplification, CheckCell.perIntent},
			test{findLoad, maxWorkLoad, func(c CheckCell) float64 { return c.FaultLoad }})
	}
	var out []Finding
	for _, t := range tests {
		f := Finding{What: t.what, Fault: fi, Load: li, Threshold: t.threshold}
		for _, seed := range runs {
			c := seed[fi][li]
			if !c.Ran || c.NeverHealthy || c.EndedEarly != nil {
				continue // a stopped run's attempts stop where it did: its collapse is its finding
			}
			if v := t.value(c); v > t.threshold {
				f.Seeds++
				f.Value = max(f.Value, v)
			}
		}
		if f.Seeds > 0 {
			out = append(out, f)
		}
	}
	return out
}

// words says a finding in plain words.
func (a assessment) words(f Finding, seeds int) string {
	at := fmt.Sprintf("%s at %s load", a.faults[f.Fault].Name, report.Percent(a.loads[f.Load], 0))
	of := fmt.Sprintf("%d of %d seeds", f.Seeds, seeds)
	switch f.What {
	case findCollapse:
		return fmt.Sprintf("stays collapsed after %s (%s) where it recovers with retries off", at, of)
	case findNeverHealthy:
		return fmt.Sprintf("was never healthy before %s (%s): it failed most of its tries before the fault", at, of)
	case findOutside:
		return fmt.Sprintf("stays collapsed after %s, outside the realistic region (%s), where it recovers with retries off", at, of)
	case findSystem:
		return fmt.Sprintf("stays collapsed after %s with retries off too (%s): the origin cannot recover from it at that load, whatever the retries", at, of)
	case findWork:
		return fmt.Sprintf("%.2f attempts per intent over %s and its recovery (%s; threshold %g for faults whose attempts take the origin's work)", f.Value, at, of, f.Threshold)
	case findLoad:
		return fmt.Sprintf("a mean offered load of %.2f× the origin's full capacity over %s (%s; threshold %g×)", f.Value, at, of, f.Threshold)
	case findInstant:
		return fmt.Sprintf("%.1f attempts per intent over %s and its recovery (%s; threshold %g for failures that cost the origin little: every proxy still carries them)", f.Value, at, of, f.Threshold)
	case findHerd:
		return fmt.Sprintf("a herd of %.1f× the origin's capacity in one tick as it comes back from %s (%s; threshold %g×)", f.Value, at, of, f.Threshold)
	}
	return f.What
}

// summary says a judgement in one line: the level and its counts.
func (j judgement) summary() string {
	var why []string
	if n := j.count(Unsafe); n > 0 {
		why = append(why, fmt.Sprintf("%d realistic cell%s stay%s collapsed", n, plural(n), map[bool]string{true: "s", false: ""}[n == 1]))
	}
	if n := j.count(AtRisk); n > 0 {
		why = append(why, fmt.Sprintf("%d finding%s past the thresholds or outside the region", n, plural(n)))
	}
	if len(why) == 0 {
		return j.Level.String()
	}
	return j.Level.String() + " (" + strings.Join(why, ", ") + ")"
}

// under reports whether cell c of fault ft stays under every
// amplification threshold its fault is judged by, each scaled by frac
// (below 1: with room to spare; above: only past it by that much).
func under(c CheckCell, ft checkFault, frac float64) bool {
	if c.Herd > maxHerd*frac {
		return false
	}
	if ft.Instant {
		return c.perIntent() <= maxInstantAmplification*frac
	}
	return c.perIntent() <= maxWorkAmplification*frac && c.FaultLoad <= maxWorkLoad*frac
}
