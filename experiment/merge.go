package experiment

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/retrystorm/retrystorm/internal/safetext"
	"github.com/retrystorm/retrystorm/scenario"
)

// Merged is the shards of one sweep, check or advise put together:
// exactly one field is set, the same result one run on one machine gives.
type Merged struct {
	Sweep  *Outcome
	Check  *CheckResult
	Advise *AdviseResult
	Lab    *Outcome    // the shards of a lab run (see MergeLab)
	Stack  *StackShard // the shards of check --stack or --manifests (see MergeStack)
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
	// maxSweepGrid is the most points on each axis of a sweep (runSweep's
	// --grid bound).
	maxSweepGrid = 200
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
	maxRecoveryTicks = 1 << 30
)

// sweepPolicies is how many policies a sweep maps (runSweep's list).
const sweepPolicies = 6

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
	total := 0
	kind := ""
	shards := map[string]int{} // "i/n" → the first part that is it
	for i, p := range parts {
		if total += len(p); total > MaxMergeBytes {
			return nil, fmt.Errorf("merge: %s: the results are too large together: at most %d bytes", name(i), MaxMergeBytes)
		}
		var keys map[string]json.RawMessage
		if err := json.Unmarshal(p, &keys); err != nil {
			return nil, fmt.Errorf("merge: %s is not a shard's JSON: %v", name(i), err)
		}
		k := ""
		switch {
		case keys["lab_shard"] != nil:
			k = "lab"
		case keys["stack_shard"] != nil:
			k = "stack"
		case keys["candidates"] != nil:
			k = "advise"
		case keys["faults"] != nil && keys["fleets"] != nil:
			k = "check"
		case keys["policies"] != nil && keys["shard"] != nil:
			k = "sweep"
		default:
			return nil, fmt.Errorf("merge: %s is not the JSON of a sweep, check, check --stack or advise shard", name(i))
		}
		if kind != "" && k != kind {
			return nil, fmt.Errorf("merge: %s is a %s, %s a %s", name(i), k, name(0), kind)
		}
		kind = k
		// The same shard given twice (a file named twice, or copied):
		// said here, by file, rather than cell by cell.
		// A sweep's shard is {"part": "i/n", ...}, the others' "i/n".
		var sh struct {
			Part string `json:"part"`
		}
		if json.Unmarshal(keys["shard"], &sh) != nil {
			_ = json.Unmarshal(keys["shard"], &sh.Part)
		}
		if k == "stack" {
			_ = json.Unmarshal(keys["stack_shard"], &sh.Part)
		}
		if j, ok := shards[sh.Part]; ok && sh.Part != "" {
			return nil, fmt.Errorf("merge: %s: shard: %q again: %s is that shard too", name(i), sh.Part, name(j))
		}
		shards[sh.Part] = i
	}
	switch kind {
	case "stack":
		ps := make([]*StackShard, len(parts))
		for i, p := range parts {
			ps[i] = new(StackShard)
			if err := decodeShard(p, ps[i], name(i), func(s *shardCheck) { s.stack(ps[i], ps[0]) }); err != nil {
				return nil, err
			}
		}
		r, err := MergeStack(ps)
		return &Merged{Stack: r}, err
	case "lab":
		o, err := MergeLab(parts)
		return &Merged{Lab: o}, err
	case "sweep":
		ps := make([]sweepJSON, len(parts))
		for i, p := range parts {
			if err := decodeShard(p, &ps[i], name(i), func(s *shardCheck) { s.sweep(&ps[i], &ps[0]) }); err != nil {
				return nil, err
			}
		}
		o, err := mergeSweep(ps)
		return &Merged{Sweep: o}, err
	case "check":
		ps := make([]*CheckResult, len(parts))
		for i, p := range parts {
			ps[i] = new(CheckResult)
			if err := decodeShard(p, ps[i], name(i), func(s *shardCheck) { s.check(ps[i], ps[0]) }); err != nil {
				return nil, err
			}
		}
		r, err := MergeCheck(ps)
		return &Merged{Check: r}, err
	}
	ps := make([]*AdviseResult, len(parts))
	for i, p := range parts {
		ps[i] = new(AdviseResult)
		if err := decodeShard(p, ps[i], name(i), func(s *shardCheck) { s.advise(ps[i], ps[0]) }); err != nil {
			return nil, err
		}
	}
	r, err := MergeAdvise(ps)
	return &Merged{Advise: r}, err
}

// decodeShard reads one shard's JSON into v and checks it.
func decodeShard(data []byte, v any, file string, check func(*shardCheck)) error {
	if err := json.Unmarshal(data, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return fmt.Errorf("merge: %s: %s: want a JSON %s, got %s", file, te.Field, te.Type, te.Value)
		}
		return fmt.Errorf("merge: %s: %v", file, err)
	}
	s := &shardCheck{file: file}
	check(s)
	return s.err
}

// shardCheck checks one shard, field by field, and keeps the first
// mistake.
type shardCheck struct {
	file string
	err  error
}

func (s *shardCheck) failf(field, format string, args ...any) {
	if s.err == nil {
		s.err = fmt.Errorf("merge: %s: %s: %s", s.file, field, fmt.Sprintf(format, args...))
	}
}

// count checks that a list has from lo to hi entries.
func (s *shardCheck) count(field string, n, lo, hi int) bool {
	if n < lo || n > hi {
		s.failf(field, "%d entries: want %d to %d", n, lo, hi)
		return false
	}
	return true
}

// number checks a number in [lo, hi].
func (s *shardCheck) number(field string, v, lo, hi float64) {
	if math.IsNaN(v) || v < lo || v > hi {
		s.failf(field, "%g: want %g to %g", v, lo, hi)
	}
}

// shard checks a shard's "i/n" against the first shard's n.
func (s *shardCheck) shard(field, v, first string) {
	sh, err := ParseShard(v)
	if err != nil {
		s.failf(field, "%q: want i/n, as --shard takes it", v)
		return
	}
	if f, err := ParseShard(first); err == nil && f.Count != sh.Count {
		s.failf(field, "%q is a shard of %d, the first result's of %d", v, sh.Count, f.Count)
	}
}

// same checks that a shard was of the same run as the first one.
func (s *shardCheck) same(field string, equal bool) {
	if !equal {
		s.failf(field, "differs from the first result's: the shards are of different runs")
	}
}

// loads checks a check or advise envelope's loads, ascending.
func (s *shardCheck) loads(field string, ls []float64) {
	if s.count(field, len(ls), 1, maxEnvelope) {
		for i, l := range ls {
			s.number(fmt.Sprintf("%s[%d]", field, i), l, 1e-9, 1)
		}
	}
}

func (s *shardCheck) faults(field string, fs []checkFault) {
	if !s.count(field, len(fs), 1, maxEnvelope) {
		return
	}
	for i := range fs {
		f := &fs[i]
		at := fmt.Sprintf("%s[%d]", field, i)
		switch f.Kind {
		case scenario.TriggerCapacity, scenario.TriggerErrors, scenario.TriggerOutage, scenario.TriggerLatency:
		default:
			s.failf(at+".kind", "%q: want capacity, errors, outage or latency", f.Kind)
		}
		if f.Replica != nil && (*f.Replica < 0 || *f.Replica >= maxReplicas) {
			s.failf(at+".replica", "%d: want 0 to %d", *f.Replica, maxReplicas-1)
		}
		s.number(at+".factor", f.Factor, 0, 1e6)
		s.number(at+".dip", f.Dip, 0, 1)
		s.number(at+".rate", f.Rate, 0, 1)
		s.number(at+".for_seconds", f.For, 0, 1e6)
		f.Name = safetext.Name(f.Name)
	}
}

// cells checks a map of faults × loads.
func (s *shardCheck) cells(field string, cs [][]CheckCell, faults, loads int) {
	if !s.count(field, len(cs), faults, faults) {
		return
	}
	for fi, row := range cs {
		if !s.count(fmt.Sprintf("%s[%d]", field, fi), len(row), loads, loads) {
			return
		}
		for li, c := range row {
			at := fmt.Sprintf("%s[%d][%d]", field, fi, li)
			switch {
			case !c.Ran && c != (CheckCell{}):
				s.failf(at, "a cell not run holds numbers")
			case c.Ran && c.Recovered && (c.RecoveryTicks < 0 || c.RecoveryTicks > maxRecoveryTicks):
				s.failf(at+".recovery_ticks", "%d: want 0 to %d when recovered", c.RecoveryTicks, maxRecoveryTicks)
			case c.Ran && !c.Recovered && c.RecoveryTicks != -1:
				s.failf(at+".recovery_ticks", "%d: want -1 when not recovered", c.RecoveryTicks)
			case c.Intents < 0 || c.Attempts < 0 || c.Retries < 0 || c.PeakOffered < 0:
				s.failf(at, "a count is negative")
			case c.Source != "" && c.Source != sourceSimulator:
				s.failf(at+".source", "%q: a shard's cells are the simulator's (check --model does not shard)", c.Source)
			case c.IntentsLost < 0 || c.IntentsLost > c.Intents:
				s.failf(at+".intents_lost", "%d: want 0 to the intents, %d", c.IntentsLost, c.Intents)
			}
		}
	}
}

// sweep checks a sweep shard; first is the first shard's, checked
// before.
func (s *shardCheck) sweep(js, first *sweepJSON) {
	if js.Shard == nil {
		s.failf("shard", "missing: this is not a shard's result (sweep --shard i/n --json writes one)")
		return
	}
	s.shard("shard.part", js.Shard.Part, first.Shard.Part)
	s.number("shard.rate", js.Shard.Rate, 1e-9, 1e9)
	s.number("shard.for_seconds", js.Shard.ForSeconds, 0, 1e6)
	if !s.count("load", len(js.Load), 2, maxSweepGrid) || !s.count("dip", len(js.Dip), 2, maxSweepGrid) ||
		!s.count("policies", len(js.Policies), sweepPolicies, sweepPolicies) {
		return
	}
	for i, l := range js.Load {
		s.number(fmt.Sprintf("load[%d]", i), l, 1e-9, 1)
	}
	for i, d := range js.Dip {
		s.number(fmt.Sprintf("dip[%d]", i), d, 0, 1)
	}
	for i := range js.Policies {
		p := &js.Policies[i]
		if p.Source != "" && p.Source != sourceSimulator || p.Simulated != nil {
			s.failf(fmt.Sprintf("policies[%d].source", i), "%q: a sweep's shards are the simulator's (--engine model and both do not shard)", p.Source)
			return
		}
		at := fmt.Sprintf("policies[%d].recovery_ticks", i)
		if !s.count(at, len(p.Recovery), len(js.Dip), len(js.Dip)) {
			return
		}
		for y, row := range p.Recovery {
			if !s.count(fmt.Sprintf("%s[%d]", at, y), len(row), len(js.Load), len(js.Load)) {
				return
			}
			for x, v := range row {
				if v < notRun || v > maxRecoveryTicks {
					s.failf(fmt.Sprintf("%s[%d][%d]", at, y, x), "%d: want ticks, -1 (never) or -2 (another shard's)", v)
				}
			}
		}
		p.Policy = safetext.Name(p.Policy)
	}
	js.Scenario = safetext.Name(js.Scenario)
	if s.err != nil || js == first {
		return
	}
	s.same("scenario", js.Scenario == first.Scenario)
	s.same("seed", js.Seed == first.Seed)
	s.same("load", slices.Equal(js.Load, first.Load))
	s.same("dip", slices.Equal(js.Dip, first.Dip))
	s.same("shard.rate", js.Shard.Rate == first.Shard.Rate)
	s.same("shard.for_seconds", js.Shard.ForSeconds == first.Shard.ForSeconds)
	for i := range js.Policies {
		s.same(fmt.Sprintf("policies[%d].policy", i), js.Policies[i].Policy == first.Policies[i].Policy)
	}
}

// check checks a check shard; first is the first shard's, checked
// before.
func (s *shardCheck) check(r, first *CheckResult) {
	s.shard("shard", r.Shard, first.Shard)
	s.number("rate", r.Rate, 1e-9, 1e9)
	s.number("tick_seconds", r.Tick, 1e-6, 1e6)
	s.number("realistic_load", r.RealLoad, 1e-9, 1)
	s.number("realistic_dip", r.RealDip, 1e-9, 1)
	s.loads("loads", r.Loads)
	s.faults("faults", r.Faults)
	if s.err != nil || !s.count("seeds", len(r.Seeds), 1, maxSeeds) || !s.count("clients", len(r.Clients), 1, maxCheckClients) {
		return
	}
	for i, n := range r.Clients {
		if n < 1 || n > 4*maxClients {
			s.failf(fmt.Sprintf("clients[%d]", i), "%d: want 1 to %d", n, 4*maxClients)
		}
	}
	perFleet := len(r.Loads) * len(r.Faults) * len(r.Seeds) * len(r.Clients)
	if s.err != nil || !s.count("fleets", len(r.Fleets), 1, maxMergedCells/perFleet) {
		return
	}
	for i := range r.Fleets {
		f := &r.Fleets[i]
		at := fmt.Sprintf("fleets[%d]", i)
		// A shard holds its runs; the maps (cells) are made once merged.
		if !s.count(at+".runs", len(f.Runs), len(r.Clients), len(r.Clients)) {
			return
		}
		for k, seeds := range f.Runs {
			if !s.count(fmt.Sprintf("%s.runs[%d]", at, k), len(seeds), len(r.Seeds), len(r.Seeds)) {
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
	if s.count("notes", len(r.Notes), 0, 2*len(r.Fleets)) { // balancing, never healthy: at most one each a fleet
		for k := range r.Notes {
			r.Notes[k] = safetext.Escape(r.Notes[k])
		}
	}
	r.Scenario = safetext.Name(r.Scenario)
	if s.err != nil || r == first {
		return
	}
	s.same("scenario", r.Scenario == first.Scenario)
	s.same("seed", r.Seed == first.Seed)
	s.same("loads", slices.Equal(r.Loads, first.Loads))
	s.same("faults", slices.EqualFunc(r.Faults, first.Faults, checkFault.same))
	s.same("notes", slices.Equal(r.Notes, first.Notes))
	s.same("realistic_load", r.RealLoad == first.RealLoad)
	s.same("realistic_dip", r.RealDip == first.RealDip)
	s.same("fleets", len(r.Fleets) == len(first.Fleets))
	if s.err != nil {
		return
	}
	for i := range r.Fleets {
		s.same(fmt.Sprintf("fleets[%d].name", i), r.Fleets[i].Name == first.Fleets[i].Name)
	}
}

// advise checks an advise shard; first is the first shard's, checked
// before.
func (s *shardCheck) advise(r, first *AdviseResult) {
	s.shard("shard", r.Shard, first.Shard)
	s.number("realistic_load", r.RealLoad, 1e-9, 1)
	s.number("realistic_dip", r.RealDip, 1e-9, 1)
	s.loads("loads", r.Loads)
	s.faults("faults", r.Faults)
	s.count("seeds", len(r.Seeds), 1, maxSeeds)
	if s.err != nil {
		return
	}
	perCandidate := len(r.Seeds) * len(r.Faults) * len(r.Loads)
	s.count("exhaustive_runs", r.Exhaustive, 0, maxMergedCells)
	s.count("simulator_runs", r.Runs, 0, max(r.Exhaustive, 0))
	if !s.count("candidates", len(r.Candidates), 1, maxMergedCells/perCandidate) {
		return
	}
	for i := range r.Candidates {
		c := &r.Candidates[i]
		at := fmt.Sprintf("candidates[%d]", i)
		// The fleet is printed and written back in the user's format:
		// it must be one the scenario format takes.
		if err := validFleet(c.Fleet); err != nil {
			s.failf(at+".fleet", "%v", err)
			return
		}
		// A shard is never screened: every candidate ran at every seed.
		if c.Source != "" && c.Source != sourceSimulator {
			s.failf(at+".source", "%q: a shard's candidates are simulated at every seed (a screened search is not sharded)", c.Source)
			return
		}
		if !s.count(at+".cells", len(c.Cells), len(r.Seeds), len(r.Seeds)) {
			return
		}
		for k, seed := range c.Cells {
			s.cells(fmt.Sprintf("%s.cells[%d]", at, k), seed, len(r.Faults), len(r.Loads))
		}
		c.Name = safetext.Name(c.Name)
	}
	r.Scenario = safetext.Name(r.Scenario)
	if s.err != nil || r == first {
		return
	}
	s.same("scenario", r.Scenario == first.Scenario)
	s.same("seeds", slices.Equal(r.Seeds, first.Seeds))
	s.same("loads", slices.Equal(r.Loads, first.Loads))
	s.same("faults", slices.EqualFunc(r.Faults, first.Faults, checkFault.same))
	s.same("realistic_load", r.RealLoad == first.RealLoad)
	s.same("realistic_dip", r.RealDip == first.RealDip)
	s.same("candidates", len(r.Candidates) == len(first.Candidates))
	if s.err != nil {
		return
	}
	for i := range r.Candidates {
		s.same(fmt.Sprintf("candidates[%d].name", i), r.Candidates[i].Name == first.Candidates[i].Name)
	}
}

// validFleet checks a fleet as the scenario loader would, in the storm.
func validFleet(f scenario.Fleet) error {
	sc, err := scenarioFor("storm", Options{})
	if err != nil {
		return err
	}
	sc.Fleets = []scenario.Fleet{f}
	return sc.Validate()
}
