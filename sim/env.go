package sim

import (
	"slices"
	"time"

	"github.com/retrystorm/retrystorm/scenario"
)

// env is the state of the world the triggers set: it changes only at a
// trigger's start or end.
type env struct {
	capacity float64   // origin capacity per second
	errRate  float64   // background and trigger error rates combined
	rejRate  float64   // answers a rejection trigger turns into overload rejections (of those errRate leaves)
	outage   bool      // nothing answers
	mode     string    // how, while outage: scenario.OutageRefuse, OutageBlackhole or OutageStall
	rate     float64   // intents per second
	factor   []float64 // latency multiplier per replica
	// repErr and repOut are, per replica, its error rate (errRate and its
	// own combined) and the mode of its own outage ("" for none); nil when
	// no fault or trigger names a replica, which keeps the common run's
	// checks to one nil test.
	repErr []float64
	repOut []string
	// smooth marks an env that a rate series' change starts: constant
	// arrivals keep their phase through it (see switchEnv).
	smooth bool
}

// schedule is the sorted list of moments the env changes, and the env from
// each on.
type schedule struct {
	at   []int64
	envs []env
}

// buildSchedule precomputes the env between every pair of trigger
// boundaries, and at every tick a rate series changes the rate, so the run
// loop only switches from one to the next.
func buildSchedule(s *scenario.Scenario, replicas int) schedule {
	points := []int64{0}
	for _, t := range s.Triggers {
		points = append(points, int64(t.At), int64(t.End()))
	}
	slices.Sort(points)
	points = slices.Compact(points)
	var sc schedule
	for _, p := range points {
		sc.at = append(sc.at, p)
		sc.envs = append(sc.envs, envAt(s, replicas, time.Duration(p)))
	}
	if changes := s.Traffic.RateChanges(s.Tick, s.Duration); len(changes) > 0 {
		sc = sc.withRates(s, changes)
	}
	return sc
}

// withRates adds to sc the moments a rate series changes the rate: at each,
// the env in force with the rate the series and the load triggers give.
// The new envs share their latency factors with the env they copy.
func (sc schedule) withRates(s *scenario.Scenario, changes []time.Duration) schedule {
	var out schedule
	i := 0
	for _, c := range changes {
		for i < len(sc.at) && sc.at[i] <= int64(c) {
			out.at, out.envs = append(out.at, sc.at[i]), append(out.envs, sc.envs[i])
			i++
		}
		if last := len(out.at) - 1; out.at[last] == int64(c) {
			continue // a trigger boundary: its env has the rate already
		}
		e := out.envs[len(out.envs)-1]
		e.rate, e.smooth = rateAt(s, c), true
		out.at, out.envs = append(out.at, int64(c)), append(out.envs, e)
	}
	out.at, out.envs = append(out.at, sc.at[i:]...), append(out.envs, sc.envs[i:]...)
	return out
}

// envAt is the env at time t: the scenario's conditions, as the triggers
// in force change them.
func envAt(s *scenario.Scenario, replicas int, t time.Duration) env {
	base := s.Base(replicas)
	base.Rate = s.Traffic.RateAt(t, s.Tick)
	c := scenario.At(base, s.Triggers, t)
	return env{capacity: c.Capacity, errRate: c.ErrorRate, rejRate: c.RejectRate, outage: c.Outage, mode: c.Mode, rate: c.Rate, factor: c.Factor,
		repErr: c.ReplicaErrorRate, repOut: c.ReplicaOutage}
}

// rateAt is the intent rate at t: the traffic's, or a load trigger's.
func rateAt(s *scenario.Scenario, t time.Duration) float64 {
	return scenario.At(scenario.Conditions{Rate: s.Traffic.RateAt(t, s.Tick)}, s.Triggers, t).Rate
}

// window returns the span the triggers cover: the earliest start and the
// latest end. ok is false without triggers.
func triggerWindow(s *scenario.Scenario) (start, end time.Duration, ok bool) {
	for i, t := range s.Triggers {
		if i == 0 || t.At < start {
			start = t.At
		}
		if i == 0 || t.End() > end {
			end = t.End()
		}
	}
	return start, end, len(s.Triggers) > 0
}
