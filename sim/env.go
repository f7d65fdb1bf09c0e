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

// envAt is the env at time t. Overlapping triggers combine: the lowest
// capacity, error rates as independent causes, the latest load change,
// latency factors multiplied.
func envAt(s *scenario.Scenario, replicas int, t time.Duration) env {
	e := env{
		capacity: s.Origin.Capacity,
		errRate:  s.Origin.ErrorRate,
		rate:     s.Traffic.Rate,
		factor:   make([]float64, replicas),
	}
	for i := range e.factor {
		e.factor[i] = 1
	}
	loadFrom := time.Duration(-1)
	for _, tr := range s.Triggers {
		if t < tr.At || t >= tr.End() {
			continue
		}
		switch tr.Kind {
		case scenario.TriggerCapacity:
			e.capacity = min(e.capacity, tr.Capacity)
		case scenario.TriggerErrors:
			e.errRate = 1 - (1-e.errRate)*(1-tr.ErrorRate)
		case scenario.TriggerOutage:
			e.outage = true
		case scenario.TriggerLoad:
			if tr.At > loadFrom {
				e.rate, loadFrom = tr.Rate, tr.At
			}
		case scenario.TriggerLatency:
			n := tr.Replicas
			if n <= 0 || n > replicas {
				n = replicas
			}
			for i := range n {
				e.factor[i] *= tr.Factor
			}
		}
	}
	return e
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
