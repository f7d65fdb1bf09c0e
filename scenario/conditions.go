package scenario

import (
	"cmp"
	"time"
)

// Conditions are what triggers change: the origin's capacity and error
// rate, whether it answers at all, each replica's latency factor, and the
// intent rate. The simulator and the lab both take them from At, so a
// trigger means the same in both.
type Conditions struct {
	Capacity  float64 // per second
	ErrorRate float64 // background and trigger error rates combined
	// RejectRate is the share of answers that errors triggers with
	// answer: rejection turn into overload rejections, among those
	// ErrorRate leaves successful.
	RejectRate float64
	Outage     bool      // nothing answers
	Mode       string    // the outage's mode, while Outage: OutageRefuse, OutageBlackhole or OutageStall
	Rate       float64   // intents per second
	Factor     []float64 // latency multiplier, per replica
	// ReplicaErrorRate is, per replica, the error rate of its answers:
	// ErrorRate combined with the replica's own faults and triggers. Nil
	// when no fault or trigger names a replica: ErrorRate is every one's.
	ReplicaErrorRate []float64
	// ReplicaOutage is, per replica, the mode of an outage of that replica
	// alone (OutageBlackhole or OutageRefuse), or "" for none. Nil when no
	// fault or trigger names a replica.
	ReplicaOutage []string
}

// NamesReplicas reports whether the scenario has faults or triggers that
// name a replica.
func (s *Scenario) NamesReplicas() bool {
	if len(s.Origin.Faults) > 0 {
		return true
	}
	for _, t := range s.Triggers {
		if t.Replica != nil {
			return true
		}
	}
	return false
}

// Base returns the conditions of the scenario without any trigger, for
// replicas replicas.
func (s *Scenario) Base(replicas int) Conditions {
	c := Conditions{Capacity: s.Origin.Capacity, ErrorRate: s.Origin.ErrorRate, Rate: s.Traffic.Rate, Factor: make([]float64, replicas)}
	for i := range c.Factor {
		c.Factor[i] = 1
	}
	if !s.NamesReplicas() {
		return c
	}
	c.ReplicaErrorRate, c.ReplicaOutage = make([]float64, replicas), make([]string, replicas)
	for _, f := range s.Origin.Faults {
		if f.Replica < 0 || f.Replica >= replicas {
			continue
		}
		switch f.Kind {
		case FaultLatency:
			c.Factor[f.Replica] *= f.Factor
		case FaultErrors:
			c.ReplicaErrorRate[f.Replica] = 1 - (1-c.ReplicaErrorRate[f.Replica])*(1-f.ErrorRate)
		case FaultBlackhole:
			c.ReplicaOutage[f.Replica] = OutageBlackhole
		}
	}
	// Until At combines them, the replicas' rates are their own faults'.
	return c
}

// combineReplicas folds the origin-wide error rate into each replica's.
func (c *Conditions) combineReplicas() {
	for i, e := range c.ReplicaErrorRate {
		c.ReplicaErrorRate[i] = 1 - (1-c.ErrorRate)*(1-e)
	}
}

// At returns base changed by the triggers in force at t. Overlapping
// triggers combine: the lowest capacity, error rates as independent causes,
// any outage (in the mode of the one that started last), the latest load
// change, latency factors multiplied. A latency trigger on N replicas slows
// the first N; a trigger with a Replica hits that one alone. base is not
// changed.
func At(base Conditions, triggers []Trigger, t time.Duration) Conditions {
	c := base
	c.Factor = append([]float64(nil), base.Factor...)
	if base.ReplicaErrorRate != nil {
		c.ReplicaErrorRate = append([]float64(nil), base.ReplicaErrorRate...)
		c.ReplicaOutage = append([]string(nil), base.ReplicaOutage...)
	}
	loadFrom, outageFrom := time.Duration(-1), time.Duration(-1)
	burst := 0.0
	for _, tr := range triggers {
		if t < tr.At || t >= tr.End() {
			continue
		}
		if r := tr.Replica; r != nil && *r >= 0 && *r < len(c.ReplicaErrorRate) {
			switch tr.Kind {
			case TriggerErrors:
				c.ReplicaErrorRate[*r] = 1 - (1-c.ReplicaErrorRate[*r])*(1-tr.ErrorRate)
			case TriggerOutage:
				if c.ReplicaOutage[*r] == "" || Refuses(tr.Mode) {
					c.ReplicaOutage[*r] = cmp.Or(tr.Mode, OutageBlackhole)
				}
			case TriggerLatency:
				c.Factor[*r] *= tr.Factor
			case TriggerCPU:
				c.Factor[*r] /= tr.Share
			}
			continue
		}
		switch tr.Kind {
		case TriggerCapacity:
			c.Capacity = min(c.Capacity, tr.Capacity)
		case TriggerErrors:
			if tr.Answer == AnswerRejection {
				c.RejectRate = 1 - (1-c.RejectRate)*(1-tr.ErrorRate)
			} else {
				c.ErrorRate = 1 - (1-c.ErrorRate)*(1-tr.ErrorRate)
			}
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
		case TriggerBurst, TriggerCPU:
			burst += newConditions(&c, tr)
		}
	}
	c.Rate += burst
	if c.ReplicaErrorRate != nil {
		c.combineReplicas()
	}
	return c
}
