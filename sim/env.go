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
	outage   bool      // nothing answers
	mode     string    // how, while outage: scenario.OutageRefuse, OutageBlackhole or OutageStall
	rate     float64   // intents per second
	factor   []float64 // latency multiplier per replica
}

// schedule is the sorted list of moments the env changes, and the env from
// each on.
type schedule struct {
	at   []int64
	envs []env
}

// buildSchedule precomputes the env between every pair of trigger
// boundaries, so the run loop only switches from one to the next.
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
	return sc
}

// envAt is the env at time t: the scenario's conditions, as the triggers
// in force change them.
func envAt(s *scenario.Scenario, replicas int, t time.Duration) env {
	c := scenario.At(s.Base(replicas), s.Triggers, t)
	return env{capacity: c.Capacity, errRate: c.ErrorRate, outage: c.Outage, mode: c.Mode, rate: c.Rate, factor: c.Factor}
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
