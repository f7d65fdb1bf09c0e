package scenario

import "time"

// Conditions are what triggers change: the origin's capacity and error
// rate, whether it answers at all, each replica's latency factor, and the
// intent rate. The simulator and the lab both take them from At, so a
// trigger means the same in both.
type Conditions struct {
	Capacity  float64   // per second
	ErrorRate float64   // background and trigger error rates combined
	Outage    bool      // nothing answers
	Mode      string    // the outage's mode, while Outage: OutageRefuse, OutageBlackhole or OutageStall
	Rate      float64   // intents per second
	Factor    []float64 // latency multiplier, per replica
}

// Base returns the conditions of the scenario without any trigger, for
// replicas replicas.
func (s *Scenario) Base(replicas int) Conditions {
	c := Conditions{Capacity: s.Origin.Capacity, ErrorRate: s.Origin.ErrorRate, Rate: s.Traffic.Rate, Factor: make([]float64, replicas)}
	for i := range c.Factor {
		c.Factor[i] = 1
	}
	return c
}

// At returns base changed by the triggers in force at t. Overlapping
// triggers combine: the lowest capacity, error rates as independent causes,
// any outage (in the mode of the one that started last), the latest load
// change, latency factors multiplied. A latency trigger on N replicas slows
// the first N. base is not changed.
func At(base Conditions, triggers []Trigger, t time.Duration) Conditions {
	c := base
	c.Factor = append([]float64(nil), base.Factor...)
	loadFrom, outageFrom := time.Duration(-1), time.Duration(-1)
	for _, tr := range triggers {
		if t < tr.At || t >= tr.End() {
			continue
		}
		switch tr.Kind {
		case TriggerCapacity:
			c.Capacity = min(c.Capacity, tr.Capacity)
		case TriggerErrors:
			c.ErrorRate = 1 - (1-c.ErrorRate)*(1-tr.ErrorRate)
		case TriggerOutage:
			c.Outage = true
			if tr.At >= outageFrom {
				c.Mode, outageFrom = tr.Mode, tr.At
				if c.Mode == "" {
					c.Mode = OutageBlackhole
				}
			}
		case TriggerLoad:
			if tr.At > loadFrom {
				c.Rate, loadFrom = tr.Rate, tr.At
			}
		case TriggerLatency:
			n := tr.Replicas
			if n <= 0 || n > len(c.Factor) {
				n = len(c.Factor)
			}
			for i := range n {
				c.Factor[i] *= tr.Factor
			}
		}
	}
	return c
}
