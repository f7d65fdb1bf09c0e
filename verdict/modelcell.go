package verdict

import (
	"math"
	"time"

	"github.com/retrystorm/retrystorm/experiment"

	"github.com/retrystorm/retrystorm/model"
	"github.com/retrystorm/retrystorm/scenario"
)

// Where a cell's or a candidate's numbers came from, as the JSON says
// it ("source").
const (
	sourceSimulator = experiment.SourceSimulator
	sourceModel     = experiment.SourceModel
	// sourceScreen is one seed of the simulator: what a candidate the
	// model does not describe was screened with.
	sourceScreen = "simulator, 1 seed"
	// sourceMixed is a screen of the model where it applies and of one
	// seed of the simulator in the other cells.
	sourceMixed = "model, and simulator (1 seed) where it does not apply"
)

// modelCell answers one cell of an envelope (sc, with its one fleet) with
// the analytic model instead of the simulator, in check's units: counts
// rounded from the model's flows. It returns the model's error, an
// *model.UnsupportedError when the model does not describe the cell.
func modelCell(sc *scenario.Scenario) (CheckCell, error) {
	f := sc.Fleets[0]
	if deadlineNeverBinds(f) {
		// Every config imported from a proxy has a deadline (Envoy's
		// route timeout, 15 s by default), which the model does not
		// follow; one that no intent can reach changes nothing.
		f.Deadline = 0
	}
	m, err := model.New(sc, f)
	if err != nil {
		return CheckCell{}, err
	}
	r := m.Run()
	var intents, attempts, retries, successes, peak float64
	s := r.Series
	for k := range s.Intents {
		intents += s.Intents[k]
		attempts += s.Offered[k]
		retries += s.Retries[k]
		successes += s.Successes[k]
		peak = max(peak, s.Offered[k])
	}
	round := func(x float64) int64 { return int64(math.Round(x)) }
	c := CheckCell{Ran: true, Source: sourceModel, Recovered: r.Recovered, RecoveryTicks: r.RecoveryTicks, Intents: round(intents), Attempts: round(attempts),
		Retries: round(retries), IntentsLost: max(0, round(intents-successes)), PeakOffered: round(peak)}
	if !c.Recovered {
		c.RecoveryTicks = -1
	}
	if len(sc.Triggers) > 0 {
		t := sc.Triggers[0]
		window(&c, sc.Tick, t.At, checkFault{For: t.For.Seconds()}, sc.Origin.Capacity, s.Offered, s.Intents)
	}
	return c, nil
}

// deadlineNeverBinds reports whether fleet f's per-intent deadline is
// longer than any of its intents can last: every attempt timing out, each
// retry after the longest backoff its settings allow. Then the deadline
// stops nothing, and a run without it is the same run.
func deadlineNeverBinds(f scenario.Fleet) bool {
	n := f.Retry.MaxRetries
	if f.Deadline <= 0 || n < 0 || f.Hedge.Delay > 0 || f.Timeout <= 0 {
		return false
	}
	b := f.Retry.Backoff
	var longest time.Duration
	switch b.Use {
	case "", "none":
	case "fixed":
		longest = b.Base
	case "exponential":
		if b.Cap <= 0 {
			return false
		}
		longest = b.Cap
	default:
		return false
	}
	switch b.Jitter {
	case "", "none", "full", "equal":
	case "factor":
		longest += time.Duration(float64(longest) * max(b.Factor, 0))
	default:
		return false
	}
	// Twice the longest backoff: room for any rounding of resil's.
	last := time.Duration(n+1)*f.Timeout + time.Duration(n)*2*longest
	return last < f.Deadline
}

// Margins of check --model: a cell is left to the model only when the
// model says it recovers within farRecovery ticks, with its amplification
// under farAmplification of check's thresholds, and still does with the
// fault made harder (farLoad more load, the fault farLonger times as
// long); or never recovers, and still does not with the fault made as
// much easier. Near the boundary the model and the simulator disagree
// (docs/model.md), so those cells go to the simulator.
const (
	farRecovery      = 2
	farAmplification = 0.75
	farLoad          = 0.1
	farLonger        = 1.5
)

// farCell answers cell (fault fi, load li) of fleet f, at the verdict's
// client count, with the model, when the model places it far from the
// boundary; ok is false otherwise, and the simulator must run it.
func (e *envelope) farCell(f scenario.Fleet, fi, li int) (c CheckCell, ok bool) {
	at := func(load, longer float64) (CheckCell, bool) {
		ft := e.faults[fi]
		ft.For *= longer
		sc := envelopeCell(e.base, load, ft, e.at)
		sc.Seed, sc.Traffic.Clients, sc.Fleets = e.seeds[0], e.clients[0], []scenario.Fleet{f}
		if sc.Validate() != nil {
			return CheckCell{}, false
		}
		c, err := modelCell(sc)
		return c, err == nil
	}
	load := e.loads[li]
	c, ok = at(load, 1)
	if !ok {
		return c, false
	}
	ft := e.faults[fi]
	if c.Recovered {
		if c.RecoveryTicks > farRecovery || !under(c, ft, farAmplification) {
			return c, false
		}
		h, ok := at(min(load+farLoad, 0.975), farLonger)
		return c, ok && h.Recovered && h.RecoveryTicks <= farRecovery && under(h, ft, 1)
	}
	easy, ok := at(max(load-farLoad, 0.05), 1/farLonger)
	return c, ok && !easy.Recovered
}

// modelFar answers with the model every cell of jobs outside the
// realistic region that it places far from the boundary (at the verdict's
// client count, for every seed: the model has no noise), and returns the
// jobs left for the simulator.
func (r *CheckResult) modelFar(e *envelope, fleets []scenario.Fleet, jobs []job) []job {
	type key struct{ fleet, fault, load int }
	far := map[key]*CheckCell{}
	for i, f := range fleets {
		for fi := range e.faults {
			for li := range e.loads {
				if realisticCell(e.loads, e.faults, e.realLoad, fi, li) || !judges(f, e.faults[fi]) {
					continue
				}
				if c, ok := e.farCell(f, fi, li); ok {
					far[key{i, fi, li}] = &c
				}
			}
		}
	}
	left := jobs[:0:0]
	for _, j := range jobs {
		if c := far[key{j.fleet, j.fault, j.load}]; c != nil && j.clients == 0 {
			r.Fleets[j.fleet].Runs[0][j.seed][j.fault][j.load] = *c
			r.Fleets[j.fleet].ModelRuns++
			continue
		}
		left = append(left, j)
	}
	return left
}
