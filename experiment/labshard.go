package experiment

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/retrystorm/retrystorm/internal/safetext"
	"github.com/retrystorm/retrystorm/report"
	"github.com/retrystorm/retrystorm/scenario"
	"github.com/retrystorm/retrystorm/sim"
)

// LabShard is what the JSON of one shard of a lab run (lab --target
// --shard i/n --json) says of the run, under "lab_shard": merge puts the
// shards of one run together, and refuses shards of different runs.
type LabShard struct {
	Index int `json:"index"` // from 1
	Count int `json:"count"`
	// Run names the run: the scenario, tick, target, shard count and
	// start, hashed; the shards of one run share it.
	Run       string `json:"run"`
	StartUnix int64  `json:"start_unix"`
	// Scenario is the whole scenario (not the shard's share), as YAML.
	Scenario string `json:"scenario_yaml"`
	Target   string `json:"target"`
	// Impose says the target was made to behave as the scenario's origin
	// (lab --impose): the claims are then the model's, else the service's.
	Impose          bool    `json:"impose,omitempty"`
	WallTickSeconds float64 `json:"wall_tick_seconds"`
	Protocol        string  `json:"protocol"`
	// Schema is the version of this record: 1 (or absent) has no
	// Latency; LabShardSchema adds it.
	Schema int `json:"schema,omitempty"`
	// Latency is, per fleet in the result's order, the latencies of the
	// intents the shard's clients got answered, in wall-clock
	// nanoseconds, counted in buckets: merge adds them up and reads the
	// run's quantiles from the sum.
	Latency []*sim.Histogram `json:"latency_wall_ns,omitempty"`
}

// LabShardSchema is the version of LabShard that lab writes.
const LabShardSchema = 2

// labShardJSON is what MergeLab reads of a shard's JSON.
type labShardJSON struct {
	sim.Result
	Simulator *sim.Result `json:"simulator"`
	Shard     *LabShard   `json:"lab_shard"`
	Verdict   string      `json:"verdict"`
}

// escape makes the shard's texts safe to print: a shard's JSON comes from
// outside, and its target, run, protocol, scenario and fleet names are
// printed in the merged tables and errors (issue 37: an ESC, a BEL or a
// U+202E in a target reached the terminal). A printable text stays as it
// is; another is quoted with its escapes shown (safetext.Name).
func (js *labShardJSON) escape() {
	sh := js.Shard
	sh.Target, sh.Run, sh.Protocol = safetext.Name(sh.Target), safetext.Name(sh.Run), safetext.Name(sh.Protocol)
	for _, r := range []*sim.Result{&js.Result, js.Simulator} {
		r.Scenario = safetext.Name(r.Scenario)
		for i := range r.Fleets {
			r.Fleets[i].Name = safetext.Name(r.Fleets[i].Name)
		}
	}
}

// maxLabShardFleets bounds the fleets and ticks a lab shard may bring,
// before anything is allocated for them.
const (
	maxLabShardFleets = 64
	maxLabShardTicks  = 1 << 20
)

// MergeLab puts the shards of one lab run together: every fleet's counts
// per tick summed over the shards (the share of breakers open averaged),
// its summary recomputed from them as a run's is, and the lab's outcome
// set beside the simulator's run of the whole scenario as `lab` sets it.
// Shards of different runs, a shard twice or one missing are refused.
func MergeLab(parts [][]byte) (*Outcome, error) {
	shards, err := decodeLabShards(parts)
	if err != nil {
		return nil, err
	}
	first := shards[0].Shard
	sc, err := scenario.ParseContained("lab_shard.scenario_yaml", []byte(first.Scenario))
	if err != nil {
		return nil, fmt.Errorf("merge: lab shard 1: %v", err)
	}
	start, end := sim.TriggerTicks(sc)
	merged := &sim.Result{Scenario: shards[0].Scenario, Seed: shards[0].Seed, TickSeconds: shards[0].TickSeconds, Trigger: shards[0].Trigger}
	inconclusive := 0
	for _, s := range shards {
		if s.Verdict == "inconclusive" {
			inconclusive++
		}
	}
	hists, err := shardLatencies(shards)
	if err != nil {
		return nil, err
	}
	for f := range shards[0].Fleets {
		out, err := mergeLabFleet(shards, f, hists, start, end)
		if err != nil {
			return nil, err
		}
		merged.Fleets = append(merged.Fleets, out)
	}
	wall := time.Duration(first.WallTickSeconds * float64(time.Second))
	o := LabOutcome(sc, shards[0].Simulator, merged, LabOptions{
		WallTick: wall, Target: first.Target, Protocol: first.Protocol,
		CounterfactualName: "",
	})
	var model []report.Claim
	if first.Target != "" && !first.Impose {
		// As one process's run against a target: the claims are what the
		// service did, the model only a comparison (LabAboutService).
		if model, err = aboutService(o, sc, merged); err != nil {
			return nil, err
		}
	}
	o.Section.Intro = append(o.Section.Intro, fmt.Sprintf("Merged from %d load processes (run %s, started at Unix time %d): each sent the intents of its share of the clients, on one schedule, through a fault proxy with its share of the origin's capacity.", first.Count, first.Run, first.StartUnix))
	js := &MergedLabJSON{labJSON: o.JSON.(labJSON), Shards: first.Count, Run: first.Run, ModelComparison: model}
	if model != nil {
		js.Claims = o.Claims
	}
	if inconclusive > 0 {
		o.Section.Intro = append([]string{fmt.Sprintf("INCONCLUSIVE: %d of the %d shards could not measure (see each shard's reasons), so no claim is judged.", inconclusive, first.Count)}, o.Section.Intro...)
		for _, c := range o.Claims {
			o.Section.Notes = append(o.Section.Notes, fmt.Sprintf("Not judged: %s (%s).", c.Text, c.Detail))
		}
		js.Verdict, js.NotJudged = "inconclusive", o.Claims
		js.Claims = []report.Claim{}
		o.Claims, o.Section.Claims = nil, nil
	}
	o.JSON = js
	return o, nil
}

// decodeLabShards reads the JSON of each shard of a lab run, and checks
// that they are the shards of one run, each once, none missing.
func decodeLabShards(parts [][]byte) ([]labShardJSON, error) {
	var shards []labShardJSON
	for i, p := range parts {
		var js labShardJSON
		if err := json.Unmarshal(p, &js); err != nil {
			return nil, fmt.Errorf("merge: lab shard %d: %v", i+1, err)
		}
		if js.Shard == nil || js.Simulator == nil {
			return nil, fmt.Errorf("merge: result %d is not a lab shard's JSON (lab --target URL --shard i/n --json)", i+1)
		}
		js.escape()
		shards = append(shards, js)
	}
	first := shards[0].Shard
	if first.Count < 1 || first.Count > 10000 {
		return nil, fmt.Errorf("merge: lab shard 1: count %d out of [1, 10000]", first.Count)
	}
	seen := make([]bool, first.Count)
	for i, s := range shards {
		sh := s.Shard
		switch {
		case sh.Run != first.Run || sh.Count != first.Count:
			return nil, fmt.Errorf("merge: lab shard %d is of another run (run %s of %d shards; the first is run %s of %d): merge the shards of one run", i+1, sh.Run, sh.Count, first.Run, first.Count)
		case sh.Index < 1 || sh.Index > sh.Count:
			return nil, fmt.Errorf("merge: lab shard %d: index %d out of [1, %d]", i+1, sh.Index, sh.Count)
		case seen[sh.Index-1]:
			return nil, fmt.Errorf("merge: lab shard %d/%d is given twice", sh.Index, sh.Count)
		case len(s.Fleets) != len(shards[0].Fleets) || len(s.Fleets) > maxLabShardFleets:
			return nil, fmt.Errorf("merge: lab shard %d has %d fleets, the first %d", i+1, len(s.Fleets), len(shards[0].Fleets))
		}
		seen[sh.Index-1] = true
	}
	var missing []string
	for i, ok := range seen {
		if !ok {
			missing = append(missing, fmt.Sprintf("%d/%d", i+1, first.Count))
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("merge: lab shards missing: %s", strings.Join(missing, ", "))
	}
	return shards, nil
}

// mergeLabFleet merges fleet f of the shards: their series and counts
// add; the latency quantiles are those of the summed histograms (hists,
// nil when a shard has none), else the worst shard's. start and end are
// the trigger's ticks.
func mergeLabFleet(shards []labShardJSON, f int, hists []*sim.Histogram, start, end int) (sim.FleetResult, error) {
	n := len(shards[0].Fleets[f].Series.Tick)
	if n > maxLabShardTicks {
		return sim.FleetResult{}, fmt.Errorf("merge: lab shard 1: %d ticks, more than %d", n, maxLabShardTicks)
	}
	out := sim.FleetResult{Name: shards[0].Fleets[f].Name, Series: sim.NewSeries(n)}
	var sum sim.Summary
	for i, s := range shards {
		in := s.Fleets[f]
		if in.Name != out.Name || !seriesLen(in.Series, n) {
			return sim.FleetResult{}, fmt.Errorf("merge: lab shard %d: fleet %d is %q of %d ticks, the first's %q of %d", i+1, f+1, in.Name, len(in.Series.Tick), out.Name, n)
		}
		addSeries(&out.Series, in.Series, len(shards))
		addSummary(&sum, in.Summary)
	}
	if hists != nil {
		// Counts add: the run's quantiles are the summed
		// histogram's, in scenario time as a run's are.
		scale := shards[0].Shard.WallTickSeconds / shards[0].TickSeconds
		sum.LatencyP50 = hists[f].Quantile(0.50).Seconds() / scale
		sum.LatencyP99 = hists[f].Quantile(0.99).Seconds() / scale
	}
	sim.Summarize(&out.Series, &sum, start, end)
	out.Summary = sum
	return out, nil
}

// addSummary adds a shard's summary x to s: counts add; quantiles do
// not, so s keeps the worst shard's.
func addSummary(s *sim.Summary, x sim.Summary) {
	s.Timeouts += x.Timeouts
	s.Victims += x.Victims
	s.IntentsLost += x.IntentsLost
	l := &s.LostBy
	l.RetriesExhausted += x.LostBy.RetriesExhausted
	l.Budget += x.LostBy.Budget
	l.Breaker += x.LostBy.Breaker
	l.Throttled += x.LostBy.Throttled
	l.NotIdempotent += x.LostBy.NotIdempotent
	l.Deadline += x.LostBy.Deadline
	l.Unfinished += x.LostBy.Unfinished
	s.AnswersThrownAway += x.AnswersThrownAway
	s.WastedWork += x.WastedWork
	s.Dropped += x.Dropped
	s.BudgetDenials += x.BudgetDenials
	s.BreakerTrips += x.BreakerTrips
	s.Ceiling = x.Ceiling
	// Quantiles do not add: without the shards' histograms,
	// the worst shard's.
	s.LatencyP50 = max(s.LatencyP50, x.LatencyP50)
	s.LatencyP99 = max(s.LatencyP99, x.LatencyP99)
}

// MergedLabJSON is the JSON of a lab run's shards merged: the lab's, with
// the run and, when a shard could not measure, the verdict
// "inconclusive" and the claims not judged.
type MergedLabJSON struct {
	labJSON
	Shards    int            `json:"shards"`
	Run       string         `json:"run"`
	Verdict   string         `json:"verdict,omitempty"`
	NotJudged []report.Claim `json:"claims_not_judged,omitempty"`
	// ModelComparison is the model's claims, not judged, in a merge of
	// shards run against a target without --impose (LabAboutService).
	ModelComparison []report.Claim `json:"model_comparison,omitempty"`
}

// Inconclusive reports whether a shard of the run could not measure.
func (j *MergedLabJSON) Inconclusive() bool { return j.Verdict == "inconclusive" }

// seriesLen reports whether every per-tick array of s has n entries.
func seriesLen(s sim.Series, n int) bool {
	for _, l := range []int{len(s.Tick), len(s.Intents), len(s.Offered), len(s.FirstAttempts), len(s.Retries), len(s.Hedges),
		len(s.Successes), len(s.Goodput), len(s.FailedAttempts), len(s.BreakerRefusals), len(s.Queue), len(s.BreakerOpen)} {
		if l != n {
			return false
		}
	}
	return s.ThrottleRefusals == nil || len(s.ThrottleRefusals) == n
}

// addSeries adds a shard's counts per tick to the sum's, and its share of
// breakers open as one of shards equal parts.
func addSeries(sum *sim.Series, s sim.Series, shards int) {
	for k := range sum.Tick {
		sum.Intents[k] += s.Intents[k]
		sum.Offered[k] += s.Offered[k]
		sum.FirstAttempts[k] += s.FirstAttempts[k]
		sum.Retries[k] += s.Retries[k]
		sum.Hedges[k] += s.Hedges[k]
		sum.Successes[k] += s.Successes[k]
		sum.Goodput[k] += s.Goodput[k]
		sum.FailedAttempts[k] += s.FailedAttempts[k]
		sum.BreakerRefusals[k] += s.BreakerRefusals[k]
		if s.ThrottleRefusals != nil {
			sum.ThrottleRefusals[k] += s.ThrottleRefusals[k]
		}
		sum.Queue[k] += s.Queue[k]
		sum.BreakerOpen[k] += s.BreakerOpen[k] / float64(shards)
	}
}

// shardLatencies sums the shards' latency histograms, one per fleet, or
// returns nil when a shard has none (a shard of schema 1): merge then
// takes the worst shard's quantiles. A shard of schema 2 whose histograms
// do not pair with its fleets is refused.
func shardLatencies(shards []labShardJSON) ([]*sim.Histogram, error) {
	fleets := len(shards[0].Fleets)
	sum := make([]*sim.Histogram, fleets)
	for f := range sum {
		sum[f] = new(sim.Histogram)
	}
	whole := true
	for i, s := range shards {
		sh := s.Shard
		if sh.Schema < LabShardSchema {
			whole = false
			continue
		}
		if len(sh.Latency) != fleets {
			return nil, fmt.Errorf("merge: lab shard %d: lab_shard.latency_wall_ns has %d histograms for %d fleets", i+1, len(sh.Latency), fleets)
		}
		if s.TickSeconds <= 0 || sh.WallTickSeconds <= 0 {
			return nil, fmt.Errorf("merge: lab shard %d: tick %g s, wall tick %g s: want both positive", i+1, s.TickSeconds, sh.WallTickSeconds)
		}
		for f, h := range sh.Latency {
			if h == nil {
				return nil, fmt.Errorf("merge: lab shard %d: lab_shard.latency_wall_ns[%d] is null", i+1, f)
			}
			sum[f].Merge(h)
		}
	}
	if !whole {
		return nil, nil
	}
	return sum, nil
}
