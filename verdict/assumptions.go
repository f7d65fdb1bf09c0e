package verdict

import (
	"fmt"
	"math"
	"time"

	"github.com/retrystorm/retrystorm/report"
	"github.com/retrystorm/retrystorm/scenario"
)

// BaseAssumptions are the numbers a check took from a base scenario that
// is neither the user's nor a product's documented default (the embedded
// storm, when no --base is given), each with its value, so that the user
// can see what a verdict rests on before reading it: the load, the
// origin, the client instances, the realistic dip. from names the base
// ("the storm scenario's").
func BaseAssumptions(r *CheckResult, base *scenario.Scenario, from string) []string {
	o := base.Origin
	capacity := r.Rate / r.RealLoad
	out := []string{
		fmt.Sprintf("the base load: %s of the origin's capacity (%g intents/s against %.4g/s), %s; --load SHARE says yours",
			report.Percent(r.RealLoad, 0), r.Rate, capacity, from),
		fmt.Sprintf("the realistic dip: %s of the capacity for %d s, %s; --dip SHARE says yours", report.Percent(r.RealDip, 0), faultSeconds, from),
		fmt.Sprintf("%d client instances, each with its own budget and breaker, %s; --clients N says yours (the verdict is also judged at %s)",
			r.Clients[0], from, clientList(r.Clients[1:])),
	}
	switch o.Model {
	case scenario.ModelQueue:
		queue := "an unbounded queue"
		if o.QueueLimit > 0 {
			queue = fmt.Sprintf("a queue of at most %d", o.QueueLimit)
		}
		served := "serving the work of callers that already gave up"
		if o.DropExpired {
			served = "dropping the work of callers that gave up"
		}
		out = append(out, fmt.Sprintf("the origin: %d workers taking %v each on average%s, %s (%s), %s, %s",
			o.Workers, o.ServiceEstimate().Round(time.Millisecond), replicasOf(o), queue, o.Discipline, served, from))
	case scenario.ModelCapacity:
		out = append(out, fmt.Sprintf("the origin: %.4g requests a second, the rest rejected at once, %s", capacity, from))
	}
	if len(base.Fleets) > 0 {
		out = append(out, fmt.Sprintf("an attempt timeout of %v where a config cannot say one and its product has none either is judged both ways (\"depends on the attempt timeout\"), %s",
			base.Fleets[0].Timeout, from))
	}
	out = append(out, "give --base FILE (your own scenario, or what retrystorm calibrate writes from your metrics) to judge your system instead")
	return out
}

// replicasOf says over how many replicas the origin's workers are shared,
// when more than one: the count an imported config gives (its endpoints)
// is the user's.
func replicasOf(o scenario.Origin) string {
	if o.Replicas <= 1 {
		return ""
	}
	return fmt.Sprintf(" over %d replicas", o.Replicas)
}

func clientList(ns []int) string {
	var s string
	for i, n := range ns {
		if i > 0 {
			s += " and "
		}
		s += fmt.Sprint(n)
	}
	if s == "" {
		return "no other count"
	}
	return s
}

// WorstScenario is the worst cell of the worst fleet that is not SAFE, as
// a scenario file run and lab reproduce: its fault at its load, the seed
// of its worst run, the verdict's client count, and notes saying what it
// shows. ok is false when every fleet is SAFE. fleets are the fleets as
// checked (the check's inputs, in order).
func (r *CheckResult) WorstScenario(in []CheckInput, base *scenario.Scenario) (sc *scenario.Scenario, notes scenario.Notes, ok bool, err error) {
	fi, x, ok := r.worstFinding()
	if !ok {
		return nil, notes, false, nil
	}
	e, err := newEnvelope(base, r.RealLoad, r.RealDip, len(r.Seeds), r.Clients[0], false)
	if err != nil {
		return nil, notes, false, err
	}
	e.faults = r.Faults
	seed := r.worstSeed(fi, x)
	f := in[fi]
	sc, err = e.scenarioAt(f.Fleet, f.Tiers, r.Clients[0], seed, r.Loads[x.Load], r.Faults[x.Fault])
	if err != nil {
		return nil, notes, false, err
	}
	sc.Name = "worst"
	a := r.assessment()
	// The lab runs a tier of one replica; a stack's tiers have one per
	// client instance.
	how := "retrystorm run\nand retrystorm lab reproduce it."
	for _, t := range sc.Tiers {
		if t.Server.Replicas > 1 {
			how = "retrystorm run\nreproduces it (the lab runs tiers of one replica, and these have more)."
			break
		}
	}
	notes.Head = fmt.Sprintf("The worst cell of retrystorm check's verdict on %s (%s): %s.\nIt is the envelope's cell at seed %d with %d client instances; %s",
		r.Fleets[fi].Name, r.Fleets[fi].Verdict, a.words(x, len(r.Seeds)), sc.Seed, r.Clients[0], how)
	return sc, notes, true, nil
}

// worstFinding is the fleet and finding the worst cell is: the first
// fleet of the worst level, and among its findings a collapse first, then
// the one furthest past its threshold.
func (r *CheckResult) worstFinding() (fleet int, worst Finding, ok bool) {
	level := Safe
	for i, f := range r.Fleets {
		if f.Verdict > level {
			level, fleet = f.Verdict, i
		}
	}
	if level == Safe {
		return 0, Finding{}, false
	}
	score := func(x Finding) float64 {
		switch {
		case x.level() == Unsafe:
			return math.Inf(1)
		case x.Threshold > 0:
			return x.Value / x.Threshold
		case x.level() == AtRisk:
			return 1
		}
		return 0
	}
	for _, x := range r.judge(fleet, 0).Findings {
		if x.level() > Safe && (!ok || score(x) > score(worst)) {
			worst, ok = x, true
		}
	}
	return fleet, worst, ok
}

// worstSeed is the index of the seed whose run of finding x's cell was
// worst: one that never recovered, else the highest value.
func (r *CheckResult) worstSeed(fleet int, x Finding) int {
	best, score := 0, math.Inf(-1)
	for s, seed := range r.Fleets[fleet].Runs[0] {
		c := seed[x.Fault][x.Load]
		v := math.Max(c.perIntent(), math.Max(c.FaultLoad, c.Herd))
		if !c.Recovered {
			v = math.Inf(1)
		}
		if v > score {
			best, score = s, v
		}
	}
	return best
}
