package experiment

import (
	"fmt"
	"math"

	"github.com/retrystorm/retrystorm/report"
	"github.com/retrystorm/retrystorm/scenario"
	"github.com/retrystorm/retrystorm/sim"
)

// runJSON is the JSON of a run-based experiment: the run as DESIGN.md
// specifies it, and the claims.
type runJSON struct {
	*sim.Result
	Claims []report.Claim `json:"claims"`
	Notes  []string       `json:"notes,omitempty"`
}

// recoveryText says how long a fleet took to recover: "+3 ticks", "+0",
// "never", or "never healthy" for a fleet failing most of its tries
// before the trigger.
func recoveryText(s sim.Summary) string {
	switch {
	case s.NeverHealthy:
		return "never healthy"
	case !s.Recovered:
		return "never"
	case *s.RecoveryTicks == 0:
		return "+0"
	case *s.RecoveryTicks == 1:
		return "+1 tick"
	}
	return fmt.Sprintf("+%d ticks", *s.RecoveryTicks)
}

func ceilingText(s sim.Summary) string {
	if s.Ceiling == nil {
		return "none"
	}
	return report.Int(int64(math.Round(*s.Ceiling)))
}

// shade marks the trigger window on a run's charts.
func shade(res *sim.Result) []report.Span {
	if res.Trigger == nil {
		return nil
	}
	return []report.Span{{From: res.Trigger.Start, To: res.Trigger.End, Label: "trigger"}}
}

// runCharts draws the standard charts of a run, one per metric with every
// fleet as a line. dashed marks fleets to draw dashed (controls and
// counterfactuals).
func runCharts(res *sim.Result, sc *scenario.Scenario, dashed map[string]bool) []report.Chart {
	if len(res.Fleets) == 0 {
		return nil
	}
	n := len(res.Fleets[0].Series.Tick)
	x := make([]float64, n)
	for i := range x {
		x[i] = float64(i) * res.TickSeconds
	}
	tick := fmt.Sprintf("%g s", res.TickSeconds)
	if res.TickSeconds == 1 {
		tick = "s"
	}
	metric := func(title, unit string, pick func(sim.Series) []float64) report.Chart {
		c := report.Chart{Title: title, XLabel: "time (s)", YLabel: unit, X: x, Shade: shade(res)}
		for _, f := range res.Fleets {
			c.Lines = append(c.Lines, report.Line{Name: f.Name, Y: pick(f.Series), Dashed: dashed[f.Name]})
		}
		return c
	}
	ints := func(v []int64) []float64 {
		out := make([]float64, len(v))
		for i, n := range v {
			out[i] = float64(n)
		}
		return out
	}
	offered := "Offered load: attempts reaching the origin"
	if len(sc.Tiers) > 0 {
		offered = "Offered load: attempts reaching the first tier"
	}
	charts := []report.Chart{
		metric(offered, "attempts / "+tick, func(s sim.Series) []float64 { return ints(s.Offered) }),
		metric("Error rate: failed attempts / attempts sent", "share of attempts", func(s sim.Series) []float64 { return s.ErrorRate }),
		metric("Retries / requests: the early-warning signal", "retries per intent", func(s sim.Series) []float64 { return s.RetriesPerRequest }),
		metric("Goodput: successes whose caller still waited", "answers / "+tick, func(s sim.Series) []float64 { return ints(s.Goodput) }),
	}
	charts[1].Percent, charts[1].YMax = true, 1
	if len(sc.Tiers) > 0 {
		return append(charts, chainCharts(res, x, tick)...)
	}
	switch sc.Origin.Model {
	case scenario.ModelQueue:
		charts = append(charts, metric("Queue: requests waiting at the origin", "requests", func(s sim.Series) []float64 { return ints(s.Queue) }))
	case scenario.ModelConcurrency:
		charts = append(charts, metric("In flight at the origin", "requests", func(s sim.Series) []float64 { return ints(s.Queue) }))
	}
	return charts
}

// chainCharts draws a chain's layers, for each fleet: the load offered to
// each layer and each layer's queue, one line per layer.
func chainCharts(res *sim.Result, x []float64, tick string) []report.Chart {
	var charts []report.Chart
	for _, f := range res.Fleets {
		load := report.Chart{Title: f.Name + ": offered load at each layer", XLabel: "time (s)", YLabel: "attempts / " + tick, X: x, Shade: shade(res)}
		queue := report.Chart{Title: f.Name + ": queue (or in flight) at each layer", XLabel: "time (s)", YLabel: "requests", X: x, Shade: shade(res)}
		for _, t := range f.Tiers {
			load.Lines = append(load.Lines, report.Line{Name: t.Name, Y: floats(t.Series.Offered)})
			queue.Lines = append(queue.Lines, report.Line{Name: t.Name, Y: floats(t.Series.Queue)})
		}
		charts = append(charts, load, queue)
	}
	return charts
}

// chainTables are a chain's layers, one table per fleet: the calls made
// into each layer and the attempts they sent, the amplification, how its
// callers fared, whether it recovered, the calls that were lost, and the
// work it did for callers that had left (layerNote says so in words). The
// queues are in the charts.
func chainTables(res *sim.Result) []report.Table {
	var out []report.Table
	for _, f := range res.Fleets {
		if len(f.Tiers) == 0 {
			continue
		}
		t := report.Table{
			Title: f.Name + ": layer by layer",
			Columns: []report.Column{{Name: "layer"}, {Name: "calls", Align: report.Right}, {Name: "attempts", Align: report.Right},
				{Name: "×intent", Align: report.Right}, {Name: "peak/tick", Align: report.Right}, {Name: "failures", Align: report.Right},
				{Name: "recovery", Align: report.Right}, {Name: "lost", Align: report.Right}, {Name: "wasted", Align: report.Right}},
			Emphasis: map[[2]int]bool{},
		}
		for i, l := range f.Tiers {
			s := l.Summary
			t.Rows = append(t.Rows, []string{l.Name, report.Int(s.Intents), report.Int(s.Attempts), report.Float(l.Amplification, 2),
				report.Int(s.PeakOffered), report.Int(s.Failures), recoveryText(s), report.Int(s.IntentsLost), report.Int(s.WastedWork)})
			if !s.Recovered {
				t.Emphasis[[2]int{i, 6}] = true
			}
		}
		out = append(out, t)
	}
	return out
}

// replicaLayer is one set of replicas a fleet's run reports: the layer
// the fleet calls (the origin, or a chain's first tier), or a later layer
// of its chain, as its callers' attempts saw it.
type replicaLayer struct {
	name     string // "fleet" or "fleet → layer"
	replicas []sim.ReplicaResult
	noHost   int64
	attempts int64 // the callers' attempts into the layer
}

// replicaLayers lists every layer of res that reports its replicas.
func replicaLayers(res *sim.Result) []replicaLayer {
	var out []replicaLayer
	for _, f := range res.Fleets {
		if len(f.Tiers) == 0 {
			if len(f.Replicas) > 0 {
				out = append(out, replicaLayer{f.Name, f.Replicas, f.NoHealthyReplica, f.Summary.Attempts})
			}
			continue
		}
		for _, t := range f.Tiers {
			if len(t.Replicas) > 0 {
				out = append(out, replicaLayer{f.Name + " → " + t.Name, t.Replicas, t.NoHealthyReplica, t.Summary.Attempts})
			}
		}
	}
	return out
}

// replicaTables are the fleets' ground truth per replica, for the runs
// that report it (a balancer, outlier detection, or a replica named), layer
// by layer in a chain: what each replica got, how it answered, and how
// long it was ejected.
func replicaTables(res *sim.Result) []report.Table {
	var out []report.Table
	for _, f := range replicaLayers(res) {
		t := report.Table{
			Title: f.name + ": replica by replica",
			Columns: []report.Column{{Name: "replica", Align: report.Right}, {Name: "attempts", Align: report.Right},
				{Name: "share", Align: report.Right}, {Name: "successes", Align: report.Right}, {Name: "failures", Align: report.Right},
				{Name: "cancelled", Align: report.Right}, {Name: "ejections", Align: report.Right}, {Name: "ejected", Align: report.Right}},
			Emphasis: map[[2]int]bool{},
		}
		for i, r := range f.replicas {
			t.Rows = append(t.Rows, []string{report.Int(int64(r.Replica)), report.Int(r.Attempts),
				pct(float64(r.Attempts) / float64(max(f.attempts, 1))), report.Int(r.Successes), report.Int(r.Failures),
				report.Int(r.Cancelled), report.Int(r.Ejections), fmt.Sprintf("%.0f s", r.EjectedSeconds)})
			if r.Failures > r.Successes {
				t.Emphasis[[2]int{i, 4}] = true
			}
		}
		if f.noHost > 0 {
			t.Rows = append(t.Rows, []string{"none", report.Int(f.noHost),
				pct(float64(f.noHost) / float64(max(f.attempts, 1))), "0", report.Int(f.noHost), "", "", ""})
			t.Emphasis[[2]int{len(t.Rows) - 1, 0}] = true
		}
		out = append(out, t)
	}
	return out
}

// replicaCharts draw the fleets' ground truth per replica tick by tick,
// for the runs that keep it (sim.MaxReplicaSeries replicas at most): the
// attempts each replica got, the share of them that failed, and, with
// outlier detection, how many replicas were ejected. Past the palette's
// colours the lines are dashed, so that no two look alike.
func replicaCharts(res *sim.Result) []report.Chart {
	var charts []report.Chart
	for _, f := range replicaLayers(res) {
		if f.replicas[0].Series == nil {
			continue
		}
		n := len(f.replicas[0].Series.Attempts)
		x := make([]float64, n)
		for i := range x {
			x[i] = float64(i) * res.TickSeconds
		}
		tick := fmt.Sprintf("%g s", res.TickSeconds)
		load := report.Chart{Title: f.name + ": attempts at each replica", XLabel: "time (s)", YLabel: "attempts / " + tick, X: x, Shade: shade(res)}
		fail := report.Chart{Title: f.name + ": failed share of each replica's attempts", XLabel: "time (s)", YLabel: "share of attempts", X: x,
			Shade: shade(res), Percent: true, YMax: 1}
		ejected := make([]float64, n)
		detects := false
		for i, r := range f.replicas {
			rs := r.Series
			name, dashed := fmt.Sprintf("replica %d", r.Replica), i >= len(report.Palette)
			load.Lines = append(load.Lines, report.Line{Name: name, Y: floats(rs.Attempts), Dashed: dashed})
			share := make([]float64, n)
			for k, a := range rs.Attempts {
				if a > 0 {
					share[k] = float64(rs.Failures[k]) / float64(a)
				}
			}
			fail.Lines = append(fail.Lines, report.Line{Name: name, Y: share, Dashed: dashed})
			for k, e := range rs.Ejected {
				detects = true
				if e {
					ejected[k]++
				}
			}
		}
		charts = append(charts, load, fail)
		if detects {
			charts = append(charts, report.Chart{Title: f.name + ": replicas ejected by outlier detection", XLabel: "time (s)", YLabel: "replicas",
				X: x, Shade: shade(res), YMax: float64(len(f.replicas)), Lines: []report.Line{{Name: "ejected", Y: ejected}}})
		}
	}
	return charts
}

// layerNote says what the columns of chainTables count at a layer.
const layerNote = "Layer by layer: calls are the calls made into the layer (the fleet's intents, then each tier's calls to the next), attempts what those calls sent, ×intent the attempts per fleet intent; failures and lost are its callers' (attempts that failed, calls that never succeeded); wasted is the work the layer did for callers that had already left. Each tier makes at most one call per attempt it receives."

func floats(v []int64) []float64 {
	out := make([]float64, len(v))
	for i, n := range v {
		out[i] = float64(n)
	}
	return out
}

// mean averages v over [from, to).
func mean(v []int64, from, to int) float64 {
	from, to = max(from, 0), min(to, len(v))
	if to <= from {
		return 0
	}
	sum := int64(0)
	for _, x := range v[from:to] {
		sum += x
	}
	return float64(sum) / float64(to-from)
}

func maxOf(v []float64) float64 {
	m := 0.0
	for _, x := range v {
		m = max(m, x)
	}
	return m
}

// triggerEndTick is the first tick wholly after the triggers.
func triggerEndTick(res *sim.Result) int {
	if res.Trigger == nil {
		return 0
	}
	return int(math.Ceil(res.Trigger.End/res.TickSeconds - 1e-9))
}

// perTick turns a per-second rate into a per-tick count.
func perTick(rate float64, res *sim.Result) float64 { return rate * res.TickSeconds }

func round1(x float64) float64 { return math.Round(x*10) / 10 }
func round3(x float64) float64 { return math.Round(x*1000) / 1000 }
