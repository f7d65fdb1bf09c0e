package replay

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/retrystorm/retrystorm/scenario"
)

// Trigger is the cause inferred from the window: its kind (a scenario
// trigger's: capacity, errors, latency, outage, load), when it began and
// ended (seconds from the window's start; steps Start to End-1), how
// large it was, how confident the inference is and how it was made.
type Trigger struct {
	Kind string  `json:"kind"`
	Mode string  `json:"mode,omitempty"` // outage: stall or blackhole
	At   float64 `json:"at_seconds"`
	// Time is when it began, on the wall clock (the start of its first
	// step).
	Time time.Time `json:"time"`
	For  float64   `json:"for_seconds"`
	// Size is, by kind: capacity, the requests/s served during the drop;
	// errors, the extra error share; latency, the factor on the mean
	// latency; load, the intents/s during the spike; outage, 0.
	Size float64 `json:"size"`
	// Ended says whether the window shows the trigger's end; a window
	// that ends within it cannot show what followed.
	Ended bool `json:"ended"`
	// Requests says a load trigger's size is requests, not intents: the
	// source counts its clients' retries as requests
	// (calibrate.Source.RetriesUnseen), and the rise may be retries.
	Requests   bool   `json:"size_is_requests,omitempty"`
	Confidence string `json:"confidence"` // high, medium or low
	How        string `json:"how"`
	start, end int    // steps
}

// Describe says the trigger in a sentence.
func (t Trigger) Describe() string {
	return fmt.Sprintf("%s at %s (%s confidence)", t.What(), t.When(), t.Confidence)
}

// What is the trigger's kind and size.
func (t Trigger) What() string {
	switch t.Kind {
	case scenario.TriggerCapacity:
		return fmt.Sprintf("a capacity drop to %.4g requests/s", t.Size)
	case scenario.TriggerErrors:
		return fmt.Sprintf("an error blip (%.0f%% extra errors)", 100*t.Size)
	case scenario.TriggerLatency:
		return fmt.Sprintf("added latency (%.3g× the mean)", t.Size)
	case scenario.TriggerOutage:
		return fmt.Sprintf("an outage (%s: no answers)", t.Mode)
	case scenario.TriggerLoad:
		if t.Requests {
			return fmt.Sprintf("a rise of requests to %.4g/s (new calls or retries: the metrics cannot tell)", t.Size)
		}
		return fmt.Sprintf("a load spike to %.4g intents/s", t.Size)
	}
	return t.Kind
}

// When is when the trigger began and how long it lasted.
func (t Trigger) When() string {
	end := fmt.Sprintf("for %gs", t.For)
	if !t.Ended {
		end = "to the window's end"
	}
	return fmt.Sprintf("%s (%gs in) %s", t.Time.Format("15:04:05Z07:00"), t.At, end)
}

// infer classifies the incident that begins at step on, given the
// baseline and the calibrated capacity (requests/s), by what its first
// steps show, in this order: no answers at all (an outage); more intents
// than the base rate (load); a saturated origin serving less than its
// capacity (a capacity drop); latency up with capacity intact and no
// queue (added latency); errors up with latency normal (an error blip);
// else saturation of unknown cause, taken for a capacity drop with low
// confidence. The trigger lasts while its own signal does.
func infer(m *Measured, b baseline, on int, capacity float64) Trigger {
	r := reading{m: m, b: b, on: on, capacity: capacity}
	saturated := m.saturated
	t := Trigger{start: on}
	switch {
	case r.zero(on):
		t.Kind = scenario.TriggerOutage
		t.end = r.span(r.zero)
		t.Confidence, t.How = "high", "no answers while attempts arrived"+r.outageMode(&t)
	case b.rate > 0 && m.Intents[on] > b.rateHi:
		r.load(&t)
	case saturated(on) && m.Served[on] < CapacityDrop*capacity:
		r.capacityDrop(&t)
	case b.latency > 0 && m.Latency[on]-m.wait(on) > b.latHi && !saturated(on):
		t.Kind = scenario.TriggerLatency
		t.end = r.span(func(i int) bool { return m.Latency[i] > (b.latency+b.latHi)/2 })
		t.Size = level(r.of(m.Latency, t.end), true) / b.latency
		t.Confidence = "medium"
		t.How = fmt.Sprintf("the mean latency rose %.3g× from %.3gs with the origin unsaturated (capacity intact)", t.Size, b.latency)
	case errorBlip(m, b, on, capacity):
		r.errorBlip(&t)
	case !saturated(on) && m.ErrorRate[on] > b.errHi:
		// Errors with the origin keeping up: a blip, whatever the
		// latency says.
		t.Kind = scenario.TriggerErrors
		t.end = r.span(func(i int) bool { return m.ErrorRate[i] > b.errHi && !saturated(i) })
		t.Size = max(0.01, min(1, level(r.of(m.ErrorRate, t.end), true)-b.errShare))
		t.Confidence = "medium"
		t.How = fmt.Sprintf("the error share rose %.0f points above its baseline %.1f%% with the origin keeping up with its attempts", 100*t.Size, 100*b.errShare)
	default:
		t.Kind = scenario.TriggerCapacity
		t.end = r.span(func(i int) bool { return m.Served[i] < CapacityBack*capacity })
		t.Size = math.Min(capacity, median(r.of(m.Served, t.end)))
		t.Confidence = "low"
		t.How = "the origin saturated without a clear cause in the metrics (no drop in answers, latency or load that stands out): taken as a capacity drop to what it served"
	}
	n := m.n()
	t.Ended = t.end < n
	if g := m.prevKnown(on-1) + 1; on > 0 && g < on && m.known(g-1) {
		// The step before the first abnormal one has no value: the
		// trigger began within the gap, when is not known: taken as its
		// middle, as an end within a gap is.
		t.start = g + (on-g)/2
	}
	t.unsure(m)
	t.At = float64(t.start) * m.Step
	t.Time = m.start.Add(time.Duration(t.At * float64(time.Second))).UTC()
	t.For = float64(t.end-t.start) * m.Step
	return t
}

// reading is what infer reads a trigger from: the measured window, its
// baseline, the trigger's first step and the calibrated capacity.
type reading struct {
	m        *Measured
	b        baseline
	on       int
	capacity float64
}

// zero reports whether step i had attempts but (almost) no answers.
func (r reading) zero(i int) bool {
	m := r.m
	return m.known(i) && m.Attempts[i] > 0 && m.Served[i] < 0.05*min(m.Attempts[i], max(r.b.served, 1e-9))
}

// span runs while the trigger's own signal does, through a gap (steps
// without a value) when the first known step after it still shows the
// signal: a trigger is not cut short by the scrapes its overload failed.
// One whose signal is gone after the gap ended within it, when is not
// known: it is taken to end in the gap's middle; one that runs into a gap
// at the window's end, to last to the end.
func (r reading) span(while func(int) bool) int {
	m, n, e := r.m, r.m.n(), r.on
	for e < n {
		if !m.known(e) {
			next := m.nextKnown(e)
			if next == n {
				// The window ends in the gap: it does not show the
				// trigger's end.
				e = n
				break
			}
			if !while(next) {
				e += (next - e + 1) / 2
				break
			}
			e = next
		}
		if !while(e) {
			break
		}
		e++
	}
	return max(e, r.on+1)
}

// of is v's known values over the trigger's steps, up to end.
func (r reading) of(v []float64, end int) []float64 { return r.m.knownOf(v, r.on, end) }

// outageMode sets an outage's mode: a stall when the queue grew over it,
// else a blackhole; and says which, as the end of its How.
func (r reading) outageMode(t *Trigger) string {
	m := r.m
	t.Mode = scenario.OutageBlackhole
	if m.Queue != nil && m.Queue[t.end-1] > m.Queue[m.prevKnown(r.on-1)] {
		t.Mode = scenario.OutageStall
		return ", the queue growing meanwhile (a stall: requests accepted, none served)"
	}
	return ", no queue growing (requests vanished: a blackhole)"
}

// load reads a load spike: more intents than the base rate.
func (r reading) load(t *Trigger) {
	m, b := r.m, r.b
	t.Kind = scenario.TriggerLoad
	t.end = r.span(func(i int) bool { return m.Intents[i] > (b.rate+b.rateHi)/2 })
	t.Confidence = "high"
	if m.retriesUnseen != "" {
		// Once calls fail, the requests are retries too: the spike
		// is the steps before the errors, its rise perhaps the
		// retries of a failure upstream, which the source cannot
		// see.
		t.end = r.span(func(i int) bool {
			return m.Intents[i] > (b.rate+b.rateHi)/2 && (i == r.on || m.ErrorRate[i] <= b.errHi)
		})
		t.Confidence, t.Requests = "medium", true
	}
	t.Size = mean(r.of(m.Intents, t.end))
	t.How = fmt.Sprintf("the intents rose from a base of %.4g/s to %.4g/s", b.rate, t.Size)
	if m.retriesUnseen != "" {
		t.How = fmt.Sprintf("the requests rose from a base of %.4g/s to %.4g/s until calls failed; %s, so the rise may be its clients' retries after a failure it did not see (upstream of it), and the intents after it are not known", b.rate, t.Size, m.retriesUnseen)
	}
}

// capacityDrop reads a saturated origin serving less than its capacity:
// a capacity drop, or an outage that began within a step.
func (r reading) capacityDrop(t *Trigger) {
	m, b, on, capacity := r.m, r.b, r.on, r.capacity
	t.Kind = scenario.TriggerCapacity
	t.end = r.span(func(i int) bool { return m.Served[i] < CapacityBack*capacity && m.saturated(i) })
	t.Size = level(r.of(m.Served, t.end), false)
	t.Confidence = "high"
	if t.end-on < 2 {
		t.Confidence = "medium"
	}
	t.How = fmt.Sprintf("the origin was saturated (more attempts than answers, or a growing queue) yet served %.4g/s, below %.0f%% of its calibrated capacity %.4g/s, until it served %.0f%% of it again (or kept up with its attempts)", t.Size, 100*CapacityDrop, capacity, 100*CapacityBack)
	z := slices.IndexFunc(m.Served[on:t.end], func(v float64) bool { return v < 0.05*max(b.served, 1e-9) })
	if z < 0 || !r.zero(on+z) {
		return
	}
	// A stall that begins within a step shows first as a drop: the step
	// before its first silent one answered for part of its time. No
	// answers at all in the span make it an outage, which ends when
	// answers come back, as one read from its first silent step does: not
	// when the origin serves its capacity again, which a retry storm
	// after it may never let the callers see
	// (TestInferOutageWithinAStep).
	e := on + z
	for e < m.n() && r.zero(e) {
		e++
	}
	t.end = max(e, on+z+1)
	t.Kind, t.Size = scenario.TriggerOutage, 0
	t.How = "answers stopped altogether within a drop of the origin's answers" + r.outageMode(t)
}

// errorBlip reads an error blip: more attempts answered with an error.
func (r reading) errorBlip(t *Trigger) {
	m, b := r.m, r.b
	t.Kind = scenario.TriggerErrors
	t.end = r.span(func(i int) bool { return errorBlip(m, b, i, r.capacity) })
	t.Size = max(0.01, min(1, level(answered(m, r.on, t.end), true)-b.answered))
	t.Confidence = "medium"
	if m.timeouts != nil {
		t.Confidence = "high"
		t.How = fmt.Sprintf("the share of attempts answered with an error (timeouts apart) rose %.0f points above its baseline %.1f%%, the origin serving at its capacity or unsaturated", 100*t.Size, 100*b.answered)
	} else {
		t.How = fmt.Sprintf("the error share rose %.0f points above its baseline %.1f%% with the latency normal or the origin serving at its capacity; overload errors look alike, so it lasts while that holds", 100*t.Size, 100*b.errShare)
	}
}

// MissingMuch is the share of a window's steps without a value past which
// every inference from it is one confidence level less sure.
const MissingMuch = 0.10

// unsure lowers t's confidence for the steps of m without a value: a level
// when one is next to the trigger or inside it (when it began or ended is
// then less sure, and a failed scrape is what an overloaded target
// produces), another when more than MissingMuch of the window has none;
// How says so.
func (t *Trigger) unsure(m *Measured) {
	if m.Unknown == 0 {
		return
	}
	near := 0
	for i := max(0, t.start-1); i <= min(t.end, m.n()-1); i++ {
		if !m.known(i) {
			near++
		}
	}
	levels := []string{"low", "medium", "high"}
	l := slices.Index(levels, t.Confidence)
	var why []string
	if near > 0 {
		l--
		why = append(why, fmt.Sprintf("%d step(s) in it or next to it have no value (failed scrapes, or a gap in the saved answers), so when it began and ended is less sure", near))
	}
	if share := m.MissingShare(); share > MissingMuch {
		l--
		why = append(why, fmt.Sprintf("%.0f%% of the window's steps have no value", 100*share))
	}
	if len(why) == 0 {
		return
	}
	t.Confidence = levels[max(0, l)]
	t.How += "; " + strings.Join(why, ", and ") + ": the confidence is lowered"
}

// errorBlip: step i's answered errors (Measured.answeredErrors) are
// ErrorJump above the baseline's, and the errors are not overload's: the
// source counts timeouts apart (so these are answers), or the latency is
// normal, or the origin served at least CapacityDrop of its capacity (it
// was not short of capacity: an error blip whose retries saturate it).
func errorBlip(m *Measured, b baseline, i int, capacity float64) bool {
	if !m.known(i) || m.answeredErrors(i) <= b.ansHi {
		return false
	}
	return m.timeouts != nil || b.latency == 0 || m.Latency[i] < b.latHi || m.Served[i] >= CapacityDrop*capacity
}

// answered is the answered-error shares of steps [from, to).
func answered(m *Measured, from, to int) []float64 {
	out := make([]float64, 0, to-from)
	for i := from; i < to; i++ {
		if m.known(i) {
			out = append(out, m.answeredErrors(i))
		}
	}
	return out
}

// level is a trigger's size from the values of its steps: the median of
// the steps wholly inside it (all but the first and the last, which a
// trigger that begins or ends within a step covers only in part) where
// there are such, else the most extreme value (the largest when most,
// else the smallest), the step it covered most.
func level(v []float64, most bool) float64 {
	switch {
	case len(v) >= 3:
		return median(v[1 : len(v)-1])
	case most:
		return slices.Max(v)
	}
	return slices.Min(v)
}

// saturated: at step i the origin had more work than it did: a queue of
// more than QueueShare of the step's attempts, not shrinking, or more
// attempts than answers by a tenth. A smaller queue is the ordinary
// burst of a busy origin (Poisson arrivals queue now and then at any
// load), not a shortage.
func (m *Measured) saturated(i int) bool {
	if !m.known(i) {
		return false
	}
	if m.Queue != nil && m.Queue[i] > QueueShare*m.Attempts[i]*m.Step && (i == 0 || m.Queue[i] >= m.Queue[m.prevKnown(i-1)]) {
		return true
	}
	return m.Attempts[i] > 1.1*m.Served[i]
}
