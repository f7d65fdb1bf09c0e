package verdict

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/retrystorm/retrystorm/experiment"
	"github.com/retrystorm/retrystorm/grid"

	"github.com/retrystorm/retrystorm/internal/safetext"
	"github.com/retrystorm/retrystorm/scenario"
)

// Merged is the shards of one sweep, check or advise put together:
// exactly one field is set, the same result one run on one machine gives.
type Merged struct {
	Sweep  *experiment.Outcome
	Check  *CheckResult
	Advise *AdviseResult
	Lab    *experiment.Outcome // the shards of a lab run (see MergeLab)
	Stack  *StackShard         // the shards of check --stack or --manifests (see MergeStack)
}

// What merge takes. A shard's JSON comes from anywhere (a job's log, a
// bucket): every size is checked against these before anything is made
// from it, so that the memory merge needs stays within a small multiple
// of what it reads.
const (
	// MaxShards is the most shard results one merge takes.
	MaxShards = 1024
	// MaxMergeBytes is the most JSON one merge reads over all its shards.
	MaxMergeBytes = 256 << 20
	// maxEnvelope is the most loads, and the most faults, of a check or
	// advise envelope (checkEnvelope makes 4 and 6).
	maxEnvelope = 16
	// maxMergedCells is the most cells a merged result holds: fleets or
	// candidates × seeds × faults × loads (an advise of 100 seeds holds
	// 132,000).
	maxMergedCells = 1 << 20
	// maxCheckClients is the most client counts a check shard holds: the
	// verdict's, a quarter and four times it.
	maxCheckClients = 3
	// maxReplicas bounds a fault's replica: the scenario's most replicas.
	maxReplicas = 10_000
	// maxSeeds is advise's bound on --seeds.
	maxSeeds = 100
	// maxRecoveryTicks bounds a recovery time, in ticks.
	maxRecoveryTicks = experiment.MaxRecoveryTicks
)

// Merge reads the JSON results of every shard of one sweep, check or
// advise (as --shard i/n --json writes them) and puts them together. Its
// messages call them "result 1", "result 2"...; see [MergeFiles].
func Merge(parts [][]byte) (*Merged, error) { return MergeFiles(nil, parts) }

// MergeFiles is [Merge] with the name of each part's file, for messages.
// Every shard is checked against its schema before any of it is used:
// the sizes of its axes and maps against the bounds above, every value
// against its range, every shard against the first. Any mistake is an
// error naming the file and the field (never a panic), and names taken
// from the shards (policies, fleets, faults) are quoted when they hold
// anything a terminal would act on, as run quotes a file's name.
func MergeFiles(names []string, parts [][]byte) (*Merged, error) {
	if len(parts) == 0 {
		return nil, errors.New("merge: no shard results given")
	}
	if len(parts) > MaxShards {
		return nil, fmt.Errorf("merge: %d results: at most %d", len(parts), MaxShards)
	}
	name := func(i int) string {
		if i < len(names) {
			return safetext.Name(names[i])
		}
		return fmt.Sprintf("result %d", i+1)
	}
	kind, err := shardsKind(parts, name)
	if err != nil {
		return nil, err
	}
	return mergeKind(kind, parts, name)
}

// shardsKind is the kind of shard every part is (sweep, check, stack,
// advise or lab), read from its top-level keys before any of it is
// decoded: the parts' total size is bounded, every part must be of the
// first one's kind, and no shard may come twice. name(i) names part i.
func shardsKind(parts [][]byte, name func(int) string) (string, error) {
	total := 0
	kind := ""
	shards := map[string]int{} // "i/n" → the first part that is it
	for i, p := range parts {
		if total += len(p); total > MaxMergeBytes {
			return "", fmt.Errorf("merge: %s: the results are too large together: at most %d bytes", name(i), MaxMergeBytes)
		}
		var keys map[string]json.RawMessage
		if err := json.Unmarshal(p, &keys); err != nil {
			return "", fmt.Errorf("merge: %s is not a shard's JSON: %v", name(i), err)
		}
		k := shardKind(keys)
		if k == "" {
			return "", fmt.Errorf("merge: %s is not the JSON of a sweep, check, check --stack or advise shard", name(i))
		}
		if kind != "" && k != kind {
			return "", fmt.Errorf("merge: %s is a %s, %s a %s", name(i), k, name(0), kind)
		}
		kind = k
		// The same shard given twice (a file named twice, or copied):
		// said here, by file, rather than cell by cell.
		part := shardPart(keys, k)
		if j, ok := shards[part]; ok && part != "" {
			return "", fmt.Errorf("merge: %s: shard: %q again: %s is that shard too", name(i), part, name(j))
		}
		shards[part] = i
	}
	return kind, nil
}

// shardKind is the kind of shard a result's top-level keys say it is, or
// "" for none.
func shardKind(keys map[string]json.RawMessage) string {
	switch {
	case keys["lab_shard"] != nil:
		return "lab"
	case keys["stack_shard"] != nil:
		return "stack"
	case keys["candidates"] != nil:
		return "advise"
	case keys["faults"] != nil && keys["fleets"] != nil:
		return "check"
	case keys["policies"] != nil && keys["shard"] != nil:
		return "sweep"
	}
	return ""
}

// shardPart is a shard's "i/n", or "" when it says none. A sweep's shard
// is {"part": "i/n", ...}, a stack's is its stack_shard, the others'
// shard is "i/n".
func shardPart(keys map[string]json.RawMessage, kind string) string {
	var sh struct {
		Part string `json:"part"`
	}
	if json.Unmarshal(keys["shard"], &sh) != nil {
		_ = json.Unmarshal(keys["shard"], &sh.Part)
	}
	if kind == "stack" {
		_ = json.Unmarshal(keys["stack_shard"], &sh.Part)
	}
	return sh.Part
}

// mergeKind decodes every part as a shard of kind, each checked against
// its schema and the first, and merges them.
func mergeKind(kind string, parts [][]byte, name func(int) string) (*Merged, error) {
	switch kind {
	case "stack":
		ps := make([]*StackShard, len(parts))
		for i, p := range parts {
			ps[i] = new(StackShard)
			if err := grid.Decode(p, ps[i], name(i), func(c *grid.Checker) { checker{c}.stack(ps[i], ps[0]) }); err != nil {
				return nil, err
			}
		}
		r, err := MergeStack(ps)
		return &Merged{Stack: r}, err
	case "lab":
		o, err := experiment.MergeLab(parts)
		return &Merged{Lab: o}, err
	case "sweep":
		names := make([]string, len(parts))
		for i := range parts {
			names[i] = name(i)
		}
		o, err := experiment.MergeSweep(names, parts)
		return &Merged{Sweep: o}, err
	case "check":
		ps := make([]*CheckResult, len(parts))
		for i, p := range parts {
			ps[i] = new(CheckResult)
			if err := grid.Decode(p, ps[i], name(i), func(c *grid.Checker) { checker{c}.check(ps[i], ps[0]) }); err != nil {
				return nil, err
			}
		}
		r, err := MergeCheck(ps)
		return &Merged{Check: r}, err
	}
	ps := make([]*AdviseResult, len(parts))
	for i, p := range parts {
		ps[i] = new(AdviseResult)
		if err := grid.Decode(p, ps[i], name(i), func(c *grid.Checker) { checker{c}.advise(ps[i], ps[0]) }); err != nil {
			return nil, err
		}
	}
	r, err := MergeAdvise(ps)
	return &Merged{Advise: r}, err
}

// checker checks the shards of a check, an advise search or a stack.
type checker struct{ *grid.Checker }

// loads checks a check or advise envelope's loads, ascending.
func (s checker) loads(field string, ls []float64) {
	if s.Count(field, len(ls), 1, maxEnvelope) {
		for i, l := range ls {
			s.Number(fmt.Sprintf("%s[%d]", field, i), l, 1e-9, 1)
		}
	}
}

func (s checker) faults(field string, fs []checkFault) {
	if !s.Count(field, len(fs), 1, maxEnvelope) {
		return
	}
	for i := range fs {
		f := &fs[i]
		at := fmt.Sprintf("%s[%d]", field, i)
		switch f.Kind {
		case scenario.TriggerCapacity, scenario.TriggerErrors, scenario.TriggerOutage, scenario.TriggerLatency:
		default:
			s.Failf(at+".kind", "%q: want capacity, errors, outage or latency", f.Kind)
		}
		if f.Replica != nil && (*f.Replica < 0 || *f.Replica >= maxReplicas) {
			s.Failf(at+".replica", "%d: want 0 to %d", *f.Replica, maxReplicas-1)
		}
		s.Number(at+".factor", f.Factor, 0, 1e6)
		s.Number(at+".dip", f.Dip, 0, 1)
		s.Number(at+".rate", f.Rate, 0, 1)
		s.Number(at+".for_seconds", f.For, 0, 1e6)
		f.Name = safetext.Name(f.Name)
	}
}

// cells checks a map of faults × loads.
func (s checker) cells(field string, cs [][]CheckCell, faults, loads int) {
	if !s.Count(field, len(cs), faults, faults) {
		return
	}
	for fi, row := range cs {
		if !s.Count(fmt.Sprintf("%s[%d]", field, fi), len(row), loads, loads) {
			return
		}
		for li, c := range row {
			at := fmt.Sprintf("%s[%d][%d]", field, fi, li)
			switch {
			case !c.Ran && c != (CheckCell{}):
				s.Failf(at, "a cell not run holds numbers")
			case c.Ran && c.Recovered && (c.RecoveryTicks < 0 || c.RecoveryTicks > maxRecoveryTicks):
				s.Failf(at+".recovery_ticks", "%d: want 0 to %d when recovered", c.RecoveryTicks, maxRecoveryTicks)
			case c.Ran && !c.Recovered && c.RecoveryTicks != -1:
				s.Failf(at+".recovery_ticks", "%d: want -1 when not recovered", c.RecoveryTicks)
			case c.Intents < 0 || c.Attempts < 0 || c.Retries < 0 || c.PeakOffered < 0:
				s.Failf(at, "a count is negative")
			case c.Source != "" && c.Source != sourceSimulator:
				s.Failf(at+".source", "%q: a shard's cells are the simulator's (check --model does not shard)", c.Source)
			case c.IntentsLost < 0 || c.IntentsLost > c.Intents:
				s.Failf(at+".intents_lost", "%d: want 0 to the intents, %d", c.IntentsLost, c.Intents)
			}
		}
	}
}

// check checks a check shard; first is the first shard's, checked
// before.
func (s checker) check(r, first *CheckResult) {
	s.Shard("shard", r.Shard, first.Shard)
	s.Number("rate", r.Rate, 1e-9, 1e9)
	s.Number("tick_seconds", r.Tick, 1e-6, 1e6)
	s.Number("realistic_load", r.RealLoad, 1e-9, 1)
	s.Number("realistic_dip", r.RealDip, 1e-9, 1)
	s.loads("loads", r.Loads)
	s.faults("faults", r.Faults)
	if s.Err() != nil || !s.Count("seeds", len(r.Seeds), 1, maxSeeds) || !s.Count("clients", len(r.Clients), 1, maxCheckClients) {
		return
	}
	for i, n := range r.Clients {
		if n < 1 || n > 4*maxClients {
			s.Failf(fmt.Sprintf("clients[%d]", i), "%d: want 1 to %d", n, 4*maxClients)
		}
	}
	perFleet := len(r.Loads) * len(r.Faults) * len(r.Seeds) * len(r.Clients)
	if s.Err() != nil || !s.Count("fleets", len(r.Fleets), 1, maxMergedCells/perFleet) {
		return
	}
	for i := range r.Fleets {
		f := &r.Fleets[i]
		at := fmt.Sprintf("fleets[%d]", i)
		// A shard holds its runs; the maps (cells) are made once merged.
		if !s.Count(at+".runs", len(f.Runs), len(r.Clients), len(r.Clients)) {
			return
		}
		for k, seeds := range f.Runs {
			if !s.Count(fmt.Sprintf("%s.runs[%d]", at, k), len(seeds), len(r.Seeds), len(r.Seeds)) {
				return
			}
			for sd, cs := range seeds {
				s.cells(fmt.Sprintf("%s.runs[%d][%d]", at, k, sd), cs, len(r.Faults), len(r.Loads))
			}
		}
		f.Name, f.Origin = safetext.Name(f.Name), safetext.Name(f.Origin)
		for k := range f.Risks {
			f.Risks[k] = safetext.Escape(f.Risks[k])
		}
	}
	if s.Count("notes", len(r.Notes), 0, 2*len(r.Fleets)) { // balancing, never healthy: at most one each a fleet
		for k := range r.Notes {
			r.Notes[k] = safetext.Escape(r.Notes[k])
		}
	}
	r.Scenario = safetext.Name(r.Scenario)
	if s.Err() != nil || r == first {
		return
	}
	s.Same("scenario", r.Scenario == first.Scenario)
	s.Same("seed", r.Seed == first.Seed)
	s.Same("loads", slices.Equal(r.Loads, first.Loads))
	s.Same("faults", slices.EqualFunc(r.Faults, first.Faults, checkFault.same))
	s.Same("notes", slices.Equal(r.Notes, first.Notes))
	s.Same("realistic_load", r.RealLoad == first.RealLoad)
	s.Same("realistic_dip", r.RealDip == first.RealDip)
	s.Same("fleets", len(r.Fleets) == len(first.Fleets))
	if s.Err() != nil {
		return
	}
	for i := range r.Fleets {
		s.Same(fmt.Sprintf("fleets[%d].name", i), r.Fleets[i].Name == first.Fleets[i].Name)
	}
}

// advise checks an advise shard; first is the first shard's, checked
// before.
func (s checker) advise(r, first *AdviseResult) {
	s.Shard("shard", r.Shard, first.Shard)
	s.Number("realistic_load", r.RealLoad, 1e-9, 1)
	s.Number("realistic_dip", r.RealDip, 1e-9, 1)
	s.loads("loads", r.Loads)
	s.faults("faults", r.Faults)
	s.Count("seeds", len(r.Seeds), 1, maxSeeds)
	if s.Err() != nil {
		return
	}
	perCandidate := len(r.Seeds) * len(r.Faults) * len(r.Loads)
	s.Count("exhaustive_runs", r.Exhaustive, 0, maxMergedCells)
	s.Count("simulator_runs", r.Runs, 0, max(r.Exhaustive, 0))
	if !s.Count("candidates", len(r.Candidates), 1, maxMergedCells/perCandidate) {
		return
	}
	for i := range r.Candidates {
		c := &r.Candidates[i]
		at := fmt.Sprintf("candidates[%d]", i)
		// The fleet is printed and written back in the user's format:
		// it must be one the scenario format takes.
		if err := validFleet(c.Fleet); err != nil {
			s.Failf(at+".fleet", "%v", err)
			return
		}
		// A shard is never screened: every candidate ran at every seed.
		if c.Source != "" && c.Source != sourceSimulator {
			s.Failf(at+".source", "%q: a shard's candidates are simulated at every seed (a screened search is not sharded)", c.Source)
			return
		}
		if !s.Count(at+".cells", len(c.Cells), len(r.Seeds), len(r.Seeds)) {
			return
		}
		for k, seed := range c.Cells {
			s.cells(fmt.Sprintf("%s.cells[%d]", at, k), seed, len(r.Faults), len(r.Loads))
		}
		c.Name = safetext.Name(c.Name)
	}
	r.Scenario = safetext.Name(r.Scenario)
	if s.Err() != nil || r == first {
		return
	}
	s.Same("scenario", r.Scenario == first.Scenario)
	s.Same("seeds", slices.Equal(r.Seeds, first.Seeds))
	s.Same("loads", slices.Equal(r.Loads, first.Loads))
	s.Same("faults", slices.EqualFunc(r.Faults, first.Faults, checkFault.same))
	s.Same("realistic_load", r.RealLoad == first.RealLoad)
	s.Same("realistic_dip", r.RealDip == first.RealDip)
	s.Same("candidates", len(r.Candidates) == len(first.Candidates))
	if s.Err() != nil {
		return
	}
	for i := range r.Candidates {
		s.Same(fmt.Sprintf("candidates[%d].name", i), r.Candidates[i].Name == first.Candidates[i].Name)
	}
}

// validFleet checks a fleet as the scenario loader would, in the storm.
func validFleet(f scenario.Fleet) error {
	sc, err := experiment.DefaultScenario("storm")
	if err != nil {
		return err
	}
	sc.Fleets = []scenario.Fleet{f}
	return sc.Validate()
}
