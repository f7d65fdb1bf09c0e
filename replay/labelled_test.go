package replay

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/calibrate"
	"github.com/retrystorm/retrystorm/internal/race"
	"github.com/retrystorm/retrystorm/scenario"
)

// A labelled set of incidents: simulator runs of each kind of trigger, at
// a few sizes, durations and loads, each fleet of a run a seed of its own
// (the simulator runs each fleet on its own), turned into the window an
// Envoy in front of the origin would have exported (gen_test.go), and read
// as replay reads a window (diagnose). The truth is the scenario's trigger.

const (
	labCapacity = 100.0            // the origin's requests/s
	labService  = 0.1              // its mean service time, s: 10 workers
	labAt       = 62 * time.Second // 2s into a step
	labRun      = 240 * time.Second
	labPer      = 5  // ticks of 1s a step
	labFrom     = 10 // the window begins at 10s: the simulator's start is no part of it
	// labErrors is the origin's background error share: a real window is
	// never free of errors, and its noise is what a threshold must clear.
	labErrors = 0.01
)

// labSeeds: the thresholds were tuned on the first three seeds; the last
// three are held out.
var labSeeds = []uint64{1, 2, 3, 4, 5, 6}

const labTrain = 3

// labCase is one incident's truth.
type labCase struct {
	name string
	// kind is the kind replay should infer: the scenario trigger's, an
	// outage of mode stall for the stall.
	kind, mode string
	trig       scenario.Trigger
	load       float64 // share of the capacity
	// queue: the origin is the queue model (workers/capacity per
	// request); else the capacity model, whose latency trigger leaves its
	// capacity whole.
	queue bool
	seed  uint64
	// size is the truth in the unit of Trigger.Size; NaN where there is
	// none (an outage).
	size float64
}

func labCases() []labCase {
	var out []labCase
	for _, l := range []float64{0.5, 0.7, 0.85} {
		rate := l * labCapacity
		add := func(name, kind, mode string, tr scenario.Trigger, queue bool, size float64) {
			tr.At = labAt
			out = append(out, labCase{name: fmt.Sprintf("%s at %.0f%%", name, 100*l), kind: kind, mode: mode, trig: tr, load: l, queue: queue, size: size})
		}
		// A steady window: no incident to find.
		add("steady", "", "", scenario.Trigger{}, true, math.NaN())
		for _, d := range []time.Duration{5 * time.Second, 10 * time.Second, 30 * time.Second} {
			for _, f := range []float64{0.3, 0.6, 0.85} {
				c := math.Round(f * rate)
				add(fmt.Sprintf("capacity to %g/s for %s", c, d), scenario.TriggerCapacity, "", scenario.Trigger{Kind: scenario.TriggerCapacity, For: d, Capacity: c}, true, c)
			}
			for _, e := range []float64{0.05, 0.1, 0.2, 0.5} {
				add(fmt.Sprintf("errors %g for %s", e, d), scenario.TriggerErrors, "", scenario.Trigger{Kind: scenario.TriggerErrors, For: d, ErrorRate: e}, true, e)
			}
			for _, f := range []float64{1.5, 2, 3, 6} {
				add(fmt.Sprintf("latency ×%g for %s", f, d), scenario.TriggerLatency, "", scenario.Trigger{Kind: scenario.TriggerLatency, For: d, Factor: f}, false, f)
			}
		}
		for _, d := range []time.Duration{2 * time.Second, 5 * time.Second, 15 * time.Second} {
			add(fmt.Sprintf("stall for %s", d), scenario.TriggerOutage, scenario.OutageStall, scenario.Trigger{Kind: scenario.TriggerOutage, For: d, Mode: scenario.OutageStall}, true, math.NaN())
		}
	}
	return out
}

// labScenario is c's scenario: Poisson arrivals on an origin with
// exponential service times and a background error share, and a fleet of
// 20 clients, a 1s timeout, two retries with jittered backoff, no budget.
// (The fleets of one scenario share its arrivals, so each seed is a
// scenario of its own.)
func labScenario(t testing.TB, c labCase) *scenario.Scenario {
	var y strings.Builder
	fmt.Fprintf(&y, "name: labelled\nseed: %d\ntick: 1s\nduration: %s\n", c.seed, labRun)
	fmt.Fprintf(&y, "traffic: {rate: %g, arrivals: poisson, clients: 20}\n", c.load*labCapacity)
	if c.queue {
		fmt.Fprintf(&y, "origin: {model: queue, capacity: %g, workers: %d, error_rate: %g, service_time: {dist: exponential}}\n", labCapacity, int(labCapacity*labService), labErrors)
	} else {
		// Admission by credit at twice the queue origin's capacity: at
		// the queue origin's, Poisson bursts at 85% are refused now and
		// then, overloads of their own in a window about latency.
		fmt.Fprintf(&y, "origin: {model: capacity, capacity: %g, latency: %s, error_rate: %g, service_time: {dist: exponential}}\n", 2*labCapacity, time.Duration(labService*float64(time.Second)), labErrors)
	}
	tr := c.trig
	if tr.Kind == "" {
		y.WriteString("fleets:\n")
	} else {
		fmt.Fprintf(&y, "triggers:\n  - {kind: %s, at: %s, for: %s", tr.Kind, tr.At, tr.For)
		switch tr.Kind {
		case scenario.TriggerCapacity:
			fmt.Fprintf(&y, ", capacity: %g", tr.Capacity)
		case scenario.TriggerErrors:
			fmt.Fprintf(&y, ", error_rate: %g", tr.ErrorRate)
		case scenario.TriggerLatency:
			fmt.Fprintf(&y, ", factor: %g", tr.Factor)
		case scenario.TriggerOutage:
			fmt.Fprintf(&y, ", mode: %s", tr.Mode)
		}
		y.WriteString("}\nfleets:\n")
	}
	y.WriteString("  - {name: clients, timeout: 1s, retry: {max_retries: 2, backoff: {use: exponential, base: 50ms, cap: 1s, jitter: full}}, budget: {use: none}}\n")
	sc, err := scenario.Parse("labelled.yaml", []byte(y.String()))
	if err != nil {
		t.Fatalf("%v\n%s", err, y.String())
	}
	return sc
}

// labResult is what the inference made of one incident.
type labResult struct {
	c       labCase
	got     Trigger
	none    bool // no incident found
	short   bool // a stall too short to show as one, taken as a capacity drop
	err     error
	kind    bool
	onset   bool
	size    bool
	dur     bool
	onsetS  float64
	sizeErr float64
	durErr  float64
}

// Tolerances of the measure: the onset within a step, the duration within
// a quarter or a step, the size within a quarter.
const (
	labOnsetSteps = 1
	labDurShare   = 0.25
	labSizeShare  = 0.25
)

func runLabelled(t testing.TB, cases []labCase) []labResult {
	envoy, err := calibrate.SourceNamed("envoy")
	if err != nil {
		t.Fatal(err)
	}
	var out []labResult
	for _, c := range cases {
		for _, seed := range labSeeds {
			cs := c
			cs.seed = seed
			sc := labScenario(t, cs)
			f := runSim(t, sc)[0]
			capAt, svcAt, errAt := triggerAt(sc, sc.Origin.Capacity, labService, c.queue)
			g := genLayer{job: "front", cluster: "origin", s: f.Series, capacity: capAt, service: svcAt, errShare: errAt, workers: int(labCapacity * labService), timeout: 1}
			w := genWindow(genMatrix([]genLayer{g}, sc.Tick, labPer, labFrom, cs.seed), labPer*sc.Tick)
			out = append(out, judge(cs, w, envoy))
		}
	}
	return out
}

func judge(c labCase, w *calibrate.Window, src *calibrate.Source) labResult {
	r := labResult{c: c}
	d, err := diagnose(w, src, nil)
	switch {
	case err != nil:
		r.err = err
		return r
	case d.on < 0:
		r.none = true
		r.kind, r.onset, r.size, r.dur = c.kind == "", true, true, true
		return r
	case c.kind == "":
		r.got = d.trig
		return r
	}
	t := d.trig
	r.got = t
	step := d.m.Step
	r.kind = t.Kind == c.kind && t.Mode == c.mode
	if c.kind == scenario.TriggerOutage && t.Kind == scenario.TriggerCapacity && c.trig.For < 2*time.Duration(step*float64(time.Second)) {
		// A stall shorter than two steps leaves no step silent: at the
		// window's resolution it is a drop in answers, and replayed as
		// one it takes the same work away.
		r.kind, r.short = true, true
	}
	at := c.trig.At.Seconds() - labFrom
	r.onsetS = t.At - at
	r.onset = math.Abs(r.onsetS) <= labOnsetSteps*step
	truthFor := c.trig.For.Seconds()
	r.durErr = (t.For - truthFor) / truthFor
	r.dur = t.Ended && math.Abs(t.For-truthFor) <= max(step, labDurShare*truthFor)
	switch {
	case !r.kind:
	case math.IsNaN(c.size):
		r.size = true
	default:
		r.sizeErr = (t.Size - c.size) / c.size
		r.size = math.Abs(r.sizeErr) <= labSizeShare
	}
	return r
}

// labTable is the confusion table (truth by row, inferred by column) and
// the shares of onsets, sizes and durations within their tolerance.
type labScore struct {
	n, kind, onset, size, dur int
	// long counts the incidents of kind correct whose trigger lasted two
	// steps or more, and their sizes and durations within tolerance: a
	// shorter one covers parts of two steps, and its size and length
	// cannot both be told from their averages.
	long, longSize, longDur int
	confusion               map[string]map[string]int
}

func score(rs []labResult) labScore {
	s := labScore{confusion: map[string]map[string]int{}}
	for _, r := range rs {
		s.n++
		truth := r.c.kind + r.c.mode
		if truth == "" {
			truth = "none"
		}
		got := r.got.Kind + r.got.Mode
		switch {
		case r.err != nil:
			got = "error"
		case r.none:
			got = "none"
		}
		if s.confusion[truth] == nil {
			s.confusion[truth] = map[string]int{}
		}
		s.confusion[truth][got]++
		if r.kind {
			s.kind++
			if r.onset {
				s.onset++
			}
			if r.size {
				s.size++
			}
			if r.dur {
				s.dur++
			}
			if r.c.trig.For >= 2*labPer*time.Second {
				s.long++
				if r.size {
					s.longSize++
				}
				if r.dur {
					s.longDur++
				}
			}
		}
	}
	return s
}

var labKinds = []string{"capacity", "errors", "latency", "outagestall", "outageblackhole", "load", "none", "error"}

func (s labScore) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-12s", "truth \\ got")
	for _, k := range labKinds {
		fmt.Fprintf(&b, " %8s", strings.TrimPrefix(k, "outage"))
	}
	b.WriteString("\n")
	for _, truth := range labKinds {
		row, ok := s.confusion[truth]
		if !ok {
			continue
		}
		fmt.Fprintf(&b, "%-12s", strings.TrimPrefix(truth, "outage"))
		for _, k := range labKinds {
			fmt.Fprintf(&b, " %8d", row[k])
		}
		b.WriteString("\n")
	}
	pc := func(a, n int) float64 { return 100 * float64(a) / float64(max(n, 1)) }
	fmt.Fprintf(&b, "kind correct %d/%d (%.0f%%); of those, onset within a step %.0f%%, size within %.0f%% %.0f%%, duration within %.0f%% or a step %.0f%%\n",
		s.kind, s.n, pc(s.kind, s.n), pc(s.onset, s.kind), 100*labSizeShare, pc(s.size, s.kind), 100*labDurShare, pc(s.dur, s.kind))
	fmt.Fprintf(&b, "triggers of two steps or more: %d, size within %.0f%% %.0f%%, duration %.0f%%\n", s.long, 100*labSizeShare, pc(s.longSize, s.long), pc(s.longDur, s.long))
	return b.String()
}

// TestLabelledIncidents measures the inference on the labelled set, the
// held-out seeds apart, and keeps it at what the tuning reached
// (docs/replay.md, "How the trigger is inferred", has the table). About
// 666 incidents: 10 to 15 s in the plain pass; skipped under -short and the
// race detector.
func TestLabelledIncidents(t *testing.T) {
	if testing.Short() || race.Enabled {
		t.Skip("the labelled set runs 666 simulated incidents: not under -short or -race")
	}
	rs := runLabelled(t, labCases())
	var train, held []labResult
	for _, r := range rs {
		if r.c.seed <= labSeeds[labTrain-1] {
			train = append(train, r)
		} else {
			held = append(held, r)
		}
		if testing.Verbose() && !(r.kind && r.onset && r.size && r.dur) {
			t.Logf("seed %d %s: got %s %s at %gs (%+gs) for %gs (%+.0f%%), size %.4g (%+.0f%%) %s; err %v none %v",
				r.c.seed, r.c.name, r.got.Kind, r.got.Mode, r.got.At, r.onsetS, r.got.For, 100*r.durErr, r.got.Size, 100*r.sizeErr, r.got.Confidence, r.err, r.none)
		}
	}
	st, sh := score(train), score(held)
	t.Logf("tuning seeds:\n%s", st)
	t.Logf("held-out seeds:\n%s", sh)
	min := func(name string, got, n int, want float64) {
		if float64(got) < want*float64(n) {
			t.Errorf("held out: %s %d/%d, below %.0f%%", name, got, n, 100*want)
		}
	}
	// Overall accuracy alone would let a threshold that finds incidents
	// in quiet windows pass: a steady window has no incident to find, on
	// any held-out seed.
	steady, quiet := 0, sh.confusion["none"]["none"]
	for _, k := range sh.confusion["none"] {
		steady += k
	}
	if steady == 0 || quiet != steady {
		t.Errorf("held out: steady windows with no incident found %d/%d, want all (and some)", quiet, steady)
	}
	min("kind correct", sh.kind, sh.n, labMinKind)
	min("onset within a step", sh.onset, sh.kind, labMinOnset)
	min("size within a quarter, triggers of two steps or more", sh.longSize, sh.long, labMinSize)
	min("duration within a quarter or a step, triggers of two steps or more", sh.longDur, sh.long, labMinDur)
}

// What the held-out seeds reached when the thresholds were tuned, less a
// margin for a change of the simulator's streams.
const (
	labMinKind  = 0.88
	labMinOnset = 0.93
	labMinSize  = 0.90
	labMinDur   = 0.88
)
