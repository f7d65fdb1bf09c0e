package replay

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/common/model"

	"github.com/retrystorm/retrystorm/calibrate"
	"github.com/retrystorm/retrystorm/internal/safetext"
)

// layerLabels are, per source, the labels whose values name a layer: the
// hop from one set of callers to one service. docs/replay.md says why
// each.
//
//   - Envoy: the job (a front proxy and a sidecar are scraped as two jobs)
//     and envoy_cluster_name (each upstream cluster is a hop of its own);
//     the pods of one job are instances of one layer.
//   - gRPC: the job and grpc_target (each client channel's target); the
//     server's metrics carry no target and are every layer's.
//   - HAProxy: the job and the backend (proxy).
//   - resil: the job and the Guard's name (resilprom's name, resilotel's
//     resil_guard_name): a Guard wraps the calls to one dependency. A
//     name's numeric suffix (-00, -01) is dropped: the lab names its
//     gateway's Guards <fleet>-NN, one per client, all of one layer.
//   - the lab: the job; its origin's counters carry no other label.
var layerLabels = map[string][]model.LabelName{
	"envoy":   {"job", "envoy_cluster_name"},
	"grpc":    {"job", "grpc_target"},
	"haproxy": {"job", "proxy"},
	"resil":   {"job", "name", "resil_guard_name"},
	"lab":     {"job"},
}

// instanceSuffix is a Guard name's per-client number (lab/gateway.go
// names its clients' Guards <fleet>-NN).
var instanceSuffix = regexp.MustCompile(`-[0-9]{2,}$`)

// layer is one layer's part of a window.
type layer struct {
	name string
	// job is the layer's callers' job (its job label): the layers of one
	// job are siblings, called side by side, not a chain.
	job string
	w   *calibrate.Window
	m   *Measured
	d   *diagnosis
}

// layersOf splits w into its layers, as the distinct values of src's
// layer labels on its attempts counter name them: each layer's window
// holds the series whose labels name it, and the series that name no
// layer (a server's metrics, which know no caller). One layer or none:
// nil, and the window is read whole, as it always was.
func layersOf(w *calibrate.Window, src *calibrate.Source) []*layer {
	labels := layerLabels[src.Name]
	if len(labels) == 0 {
		return nil
	}
	key := func(ls model.LabelSet) string {
		var parts []string
		for _, l := range labels {
			v := string(ls[l])
			if l == "name" || l == "resil_guard_name" {
				v = instanceSuffix.ReplaceAllString(v, "")
			}
			if v != "" {
				parts = append(parts, v)
			}
		}
		return strings.Join(parts, "/")
	}
	var names []string
	for _, s := range w.Series[src.Attempts.Metric] {
		if k := key(s.Labels); !slices.Contains(names, k) {
			names = append(names, k)
		}
	}
	if len(names) < 2 {
		return nil
	}
	slices.Sort(names)
	job := map[string]string{}
	for _, s := range w.Series[src.Attempts.Metric] {
		job[key(s.Labels)] = string(s.Labels["job"])
	}
	out := make([]*layer, len(names))
	for i, n := range names {
		// The name is the labels' values: printed, it must not carry an
		// escape sequence to the terminal.
		out[i] = &layer{name: safetext.Escape(n), job: job[n], w: &calibrate.Window{Start: w.Start, End: w.End, Step: w.Step, Where: w.Where, Queries: w.Queries, Series: map[string][]calibrate.Series{}}}
	}
	for metric, ss := range w.Series {
		for _, s := range ss {
			k := key(s.Labels)
			i := slices.Index(names, k)
			for j, l := range out {
				if i == j || i < 0 && (l.job == "" || string(s.Labels["job"]) != l.job) {
					l.w.Series[metric] = append(l.w.Series[metric], s)
				}
			}
		}
	}
	return out
}

// order sorts the layers outermost first, so that the last is the one
// whose callers call the origin: by their mean latency before the
// incident, longest first, as each layer's calls wrap the next one's (an
// outer call lasts its own service and the inner calls it makes); where
// a layer shows no latency, all of them by their intents, fewest first
// (each layer's callers are the outer layer's attempts). One criterion
// for the whole set, then the name, keeps the order total: comparing by
// latency where both layers have one and by intents where not is not
// transitive (a latency-less layer between two others can rank each
// above the next).
func order(ls []*layer) {
	type key struct{ lat, rate float64 }
	keys := map[*layer]key{}
	latency := true
	for _, l := range ls {
		b := baselineOf(l.m)
		keys[l] = key{b.latency, b.rate}
		latency = latency && b.latency > 0
	}
	slices.SortFunc(ls, func(a, b *layer) int {
		ka, kb := keys[a], keys[b]
		if latency {
			if c := cmp.Compare(kb.lat, ka.lat); c != 0 {
				return c
			}
		}
		if c := cmp.Compare(ka.rate, kb.rate); c != 0 {
			return c
		}
		return strings.Compare(a.name, b.name)
	})
}

// measurable keeps the layers that can be read on their own: whose
// attempts counter carries traffic in MinSteps steps at least. Each
// layer left out is said in a note (an idle cluster, a health check's
// few calls). Fewer than two left: nil, and the window is read whole.
func measurable(ls []*layer, src *calibrate.Source) ([]*layer, []string) {
	var keep []*layer
	var notes []string
	for _, l := range ls {
		m, err := measure(l.w, src)
		if err == nil {
			if k := traffic(m); k < MinSteps {
				err = fmt.Errorf("it has traffic in %d steps, fewer than the %d a layer needs", k, MinSteps)
			}
		}
		if err != nil {
			notes = append(notes, fmt.Sprintf("Layer %s is left out: %s.", l.name, strings.TrimPrefix(err.Error(), ErrInput.Error()+": ")))
			continue
		}
		l.m = m
		keep = append(keep, l)
	}
	if len(keep) < 2 {
		if len(ls) >= 2 {
			notes = append(notes, fmt.Sprintf("Fewer than two of the window's %d layers can be read on their own: the window is read whole.", len(ls)))
		}
		return nil, notes
	}
	return keep, notes
}

// traffic is the number of m's steps with attempts.
func traffic(m *Measured) int {
	k := 0
	for _, a := range m.Attempts {
		if a > 0 {
			k++
		}
	}
	return k
}

// pick diagnoses every layer (ordered outermost first) and returns the
// one the trigger is inferred at: of the layers with an incident, the
// innermost whose incident begins within a step of the first one's (in a
// chain the trigger at the origin shows at its callers first, and the
// outer layers' latencies wrap theirs; a trigger that begins within a
// step shows in that step at every layer, each by its own threshold, so
// an outer layer, whose answers wrap the inner ones', may cross its
// threshold a step before: testdata/chain.json, a real window). Layers of one job are siblings
// (one proxy's clusters, called side by side): the incident is where it
// shows, in whichever of them, not in the one with the shortest latency.
// Without an incident in any layer, the innermost, whose diagnosis says
// why there is none; a layer that could not be diagnosed (an incident
// too early in the window to calibrate before it) is an error unless
// another layer has an incident, and then a note: never "no incident"
// while a layer has one.
func pick(ls []*layer, src *calibrate.Source, cfg *calibrate.Config) (*layer, []string, error) {
	var notes []string
	var failed error
	var first time.Time // the first incident's first step
	for _, l := range ls {
		d, err := diagnoseMeasured(l.w, l.m, src, cfg)
		if err != nil {
			err = fmt.Errorf("layer %s: %w", l.name, err)
			failed = cmp.Or(failed, err)
			notes = append(notes, fmt.Sprintf("Layer %s was not diagnosed: %v.", l.name, err))
			continue
		}
		l.d = d
		if d.on < 0 {
			continue
		}
		if on := d.m.time(d.on); first.IsZero() || on.Before(first) {
			first = on
		}
	}
	var at *layer
	for _, l := range ls {
		if l.d == nil || l.d.on < 0 {
			continue
		}
		step := time.Duration(l.m.Step * float64(time.Second))
		if !l.d.m.time(l.d.on).After(first.Add(step)) {
			at = l
		}
	}
	switch {
	case at != nil:
		return at, notes, nil
	case failed != nil:
		return nil, nil, failed
	}
	return ls[len(ls)-1], nil, nil
}

// layerLoops reads the loop at each layer: the trigger (inferred at the
// origin's callers) mapped to the layer's steps by time, and the layer's
// own verdict, amplification and backlog. It returns the loops and the
// layer the loop lives in: of the layers that never recovered, the one
// whose attempts per intent rose most (retries amplify there); where none
// rose, the innermost whose backlog grew; else none.
func layerLoops(ls []*layer, t Trigger, tm *Measured, fit *calibrate.Result, src *calibrate.Source) ([]Loop, string, []string) {
	first, last := tm.time(t.start), tm.time(max(t.end-1, t.start))
	var loops []Loop
	var notes []string
	lives, rise := "", 0.0
	for _, l := range ls {
		m := l.m
		if m.time(m.n() - 1).Before(first) {
			// Its traffic ended before the trigger began (a cluster
			// drained before the incident): the layer has no loop to
			// read, and judging its end would find it never recovered.
			notes = append(notes, fmt.Sprintf("Layer %s's traffic ends before the trigger: its loop is not read.", l.name))
			continue
		}
		lt := Trigger{Ended: t.Ended, start: m.step(first), end: m.step(last) + 1}
		lt.end = min(max(lt.end, lt.start+1), m.n())
		v := judgeWindow(m, lt)
		lp := loopOf(m, lt, v, fit, src)
		lp.Layer = l.name
		lp.Verdict = &v
		if lt.start == 0 {
			// The layer's traffic begins at the trigger: it has no
			// before to compare with (a mean of no steps is NaN, which
			// JSON cannot carry).
			lp.Retries = false
			if lp.Sustained {
				lp.Evidence = "the layer's traffic begins at the trigger: no steps before it to compare with"
			}
			notes = append(notes, fmt.Sprintf("Layer %s has no steps before the trigger (its traffic begins with it): its error share, attempts per intent and queue before the trigger are not measured, and its end is judged against no errors.", l.name))
		}
		if m.Queue != nil && lt.start > 0 {
			lp.BacklogBefore = meanOr0(m.knownOf(m.Queue, 0, lt.start))
			if lt.Ended && lt.end < m.n() {
				lp.BacklogAfter = meanOr0(m.knownOf(m.Queue, lt.end, m.n()))
			}
		}
		if lp.Sustained && lp.Retries && lp.AmplificationBefore > 0 {
			if r := lp.AmplificationAfter / lp.AmplificationBefore; r > rise {
				lives, rise = l.name, r
			}
		}
		loops = append(loops, lp)
	}
	if lives == "" {
		for i := len(loops) - 1; i >= 0; i-- {
			if lp := loops[i]; lp.Sustained && (lp.Wasted || lp.BacklogAfter > 2*lp.BacklogBefore+1) {
				lives = lp.Layer
				break
			}
		}
	}
	for i := range loops {
		loops[i].Lives = loops[i].Layer == lives
	}
	return loops, lives, notes
}

// step is the index of the step that ends at or after t.
func (m *Measured) step(t time.Time) int {
	for i := range m.n() {
		if !m.time(i).Before(t) {
			return i
		}
	}
	return m.n() - 1
}

// layerNote says, for the conclusion, where the loop lives.
func layerNote(loops []Loop, lives string) string {
	if len(loops) < 2 {
		return ""
	}
	if lives == "" {
		return fmt.Sprintf(" Of its %d layers, none shows the loop after the trigger.", len(loops))
	}
	for _, l := range loops {
		if l.Layer == lives {
			return fmt.Sprintf(" Of its %d layers, the loop lives in %s: %s.", len(loops), lives, l.Evidence)
		}
	}
	return ""
}
