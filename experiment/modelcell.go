package experiment

import (
	"math"
	"time"

	"github.com/retrystorm/retrystorm/model"
	"github.com/retrystorm/retrystorm/scenario"
)

// Where a cell's or a candidate's numbers came from, as the JSON says
// it ("source").
const (
	sourceSimulator = "simulator"
	sourceModel     = "model"
	// sourceScreen is one seed of the simulator: what a candidate the
	// model does not describe was screened with.
	sourceScreen = "simulator, 1 seed"
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
	return CheckCell{Ran: true, Recovered: r.Recovered, RecoveryTicks: r.RecoveryTicks, Intents: round(intents), Attempts: round(attempts),
		Retries: round(retries), IntentsLost: max(0, round(intents-successes)), PeakOffered: round(peak)}, nil
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
