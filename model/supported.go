package model

import (
	"fmt"

	"github.com/retrystorm/retrystorm/resil/budget"
	"github.com/retrystorm/retrystorm/scenario"
)

// supportedTiers returns an *UnsupportedError for the first feature of
// sc's tiers the model does not describe. It follows a chain whose tiers
// queue nothing (the concurrency model with a fixed latency: a held worker
// costs no one a wait) and call the next layer with retries, backoff and a
// timeout; what a tier decides beyond that is a second control loop per
// hop the model does not follow.
func supportedTiers(sc *scenario.Scenario, f scenario.Fleet) error {
	if len(sc.Tiers) == 0 {
		return nil
	}
	if f.Breaker.Use != "" && f.Breaker.Use != scenario.BreakerNone {
		return unsupported("breaker (with tiers)", "a breaker's trial call is answered by the chain, whose state the model does not sum up for it")
	}
	for i, t := range sc.Tiers {
		at := func(key string) string { return fmt.Sprintf("tiers[%d] (%s): %s", i, t.Name, key) }
		srv, cl := t.Server, t.Client
		switch {
		case srv.Model != scenario.ModelConcurrency:
			return unsupported(at("server.model: "+srv.Model), "a tier holds its worker while it calls the next layer: a queue or a capacity there is a second queue, filled by the tier's own retries, the model does not describe")
		case srv.PerInflight > 0:
			return unsupported(at("server.per_inflight"), "a tier's latency that grows with its requests in flight, held by calls downstream, is not modelled")
		case srv.Limit.Use != "" && srv.Limit.Use != scenario.LimitNone:
			return unsupported(at("server.limit: "+srv.Limit.Use), "a concurrency limit at a tier is not modelled")
		case srv.Replicas > 1:
			return unsupported(at("server.replicas"), "a tier's replicas, each with its own policy, are not modelled")
		case len(srv.Faults) > 0:
			return unsupported(at("server.faults"), "a tier replica that misbehaves is not modelled")
		case srv.ErrorRate > 0 || srv.Broken > 0:
			return unsupported(at("server.error_rate"), "a tier's own errors are not modelled")
		case srv.Shed.Deadline || srv.Shed.ServiceTime > 0 || srv.Shed.Reserve > 0:
			return unsupported(at("server.shed"), "shedding at a tier is not modelled")
		case !srv.ServiceTime.IsFixed():
			return unsupported(at("server.service_time: "+srv.ServiceTime.Dist), "a tier's work is its fixed base latency in the model")
		case cl.Deadline > 0:
			return unsupported(at("client.deadline"), "a per-request deadline at a tier is not modelled")
		case cl.PropagateDeadline:
			return unsupported(at("client.propagate_deadline"), "cancelling the calls of a caller that left is not modelled: the model's tiers work on for nobody")
		case cl.Budget.Use != "" && cl.Budget.Use != scenario.BudgetNone:
			return unsupported(at("client.budget: "+cl.Budget.Use), "a tier's retry budget is a second budget, per hop, the model does not follow")
		case cl.Breaker.Use != "" && cl.Breaker.Use != scenario.BreakerNone:
			return unsupported(at("client.breaker: "+cl.Breaker.Use), "a tier's breaker is not modelled")
		case cl.Hedge.Delay > 0:
			return unsupported(at("client.hedge"), "hedged attempts race their originals; the model follows one attempt at a time")
		case cl.Retry.IdempotentOnly:
			return unsupported(at("client.retry.idempotent_only"), "a tier's share of retryable calls is not modelled")
		case cl.Retry.Backoff.Jitter == "decorrelated":
			return unsupported(at("client.retry.backoff.jitter: decorrelated"), "each delay depends on the one drawn before it")
		case cl.OutlierDetection.Use != "" && cl.OutlierDetection.Use != scenario.OutlierNone:
			return unsupported(at("client.outlier_detection: "+cl.OutlierDetection.Use), "ejecting a replica is a decision about one server of several; the model has one")
		}
	}
	return nil
}

// supported returns an *UnsupportedError for the first feature of sc or f
// the model does not describe.
func supported(sc *scenario.Scenario, f scenario.Fleet) error {
	o := sc.Origin
	switch {
	case o.Model != scenario.ModelQueue && o.Model != scenario.ModelCapacity && o.Model != scenario.ModelConcurrency:
		return unsupported("origin.model", fmt.Sprintf("unknown model %q", o.Model))
	case o.Replicas > 1:
		return unsupported("origin.replicas", "random spreading over separate queues is not one queue of the summed capacity")
	case len(o.Faults) > 0:
		return unsupported("origin.replicas.faults", "a replica that misbehaves for the whole run is a second server the model does not describe")
	case !o.ServiceTime.IsFixed():
		return unsupported("origin.service_time: "+o.ServiceTime.Dist, "the fluid model serves every request in the mean time; a spread of service times lengthens waits, and so timeouts, by more than the mean says")
	case f.OutlierDetection.Use != "" && f.OutlierDetection.Use != scenario.OutlierNone:
		return unsupported("outlier_detection: "+f.OutlierDetection.Use, "ejecting a replica is a decision about one server of several; the model has one")
	case o.Discipline != "" && o.Discipline != "fifo":
		return unsupported("origin.discipline: "+o.Discipline, "the model's backlog is first in, first out")
	case o.MaxQueueTime > 0:
		return unsupported("origin.max_queue_time", "a bounded wait is not modelled")
	case o.Limit.Use != "" && o.Limit.Use != scenario.LimitNone:
		return unsupported("origin.limit: "+o.Limit.Use, "a concurrency limit that learns from latency is a control loop the model does not follow")
	case o.Shed.ServiceTime > 0 || o.Shed.Reserve > 0:
		return unsupported("origin.shed", "only deadline shedding by the service time as it stands, with no reserve, is modelled")
	case o.Broken > 0:
		return unsupported("origin.broken", "a broken share of keys fails every attempt of some intents: a second population the model does not follow")
	case sc.Traffic.Series != nil:
		return unsupported("traffic.series", "the model takes a constant rate and load triggers")
	case sc.Traffic.Ramp.For > 0:
		return unsupported("traffic.ramp", "the model takes a constant rate and load triggers")
	case sc.System():
		return unsupported("a system: caches, pools, shared fleets, closed loops, flushes or partitions", "the model follows one fleet's retries against one server")
	case !o.LoadLatency.Flat():
		return unsupported("origin.load_latency", "a service time that grows with the load makes the capacity a function of the backlog the model does not follow")
	case f.Hedge.Delay > 0:
		return unsupported("hedge", "hedged attempts race their originals; the model follows one attempt at a time")
	case f.Deadline > 0:
		return unsupported("deadline", "a per-intent deadline is not modelled")
	case f.Budget.Use != "" && f.Budget.Use != scenario.BudgetNone && f.Budget.Use != scenario.BudgetTokenBucket && f.Budget.Use != scenario.BudgetGRPC:
		return unsupported("budget: "+f.Budget.Use, "only the token bucket and gRPC's throttle are modelled")
	case f.Budget.Use == scenario.BudgetTokenBucket && f.Budget.TokenBucket.Funding == budget.FundedByAnswer:
		return unsupported("budget.funded_by: answer", "only success and request funding are modelled")
	case f.Breaker.Use == scenario.BreakerTimeWindow || f.Breaker.Use == scenario.BreakerCountWindow:
		if f.Breaker.SlowCallRate > 0 {
			return unsupported("breaker.slow_call_rate", "the model does not follow latencies")
		}
	}
	if f.Retry.Backoff.Jitter == "decorrelated" {
		return unsupported("backoff.jitter: decorrelated", "each delay depends on the one drawn before it")
	}
	if err := supportedTiers(sc, f); err != nil {
		return err
	}
	for _, t := range sc.Triggers {
		if o.Model == scenario.ModelConcurrency && t.Kind == scenario.TriggerOutage && t.Mode == scenario.OutageStall {
			return unsupported("triggers: a stall of the concurrency model", "the simulator holds every answer due in a stall to its end; the model does not follow that for the concurrency model")
		}
		if t.Replica != nil {
			return unsupported("triggers: "+t.Kind+" on one replica", "the model has one server")
		}
		switch t.Kind {
		case scenario.TriggerErrors:
			if t.Answer == scenario.AnswerRejection {
				return unsupported("triggers: errors answered as rejections", "the model's error answers are errors; it does not follow rejections retried apart")
			}
		case scenario.TriggerCapacity, scenario.TriggerOutage, scenario.TriggerLoad:
		case scenario.TriggerLatency:
			if t.Replicas != 0 {
				return unsupported("triggers: latency on some replicas", "the model has one server")
			}
		default:
			return unsupported("triggers: "+t.Kind, "unknown trigger")
		}
	}
	return nil
}
