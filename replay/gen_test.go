package replay

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/common/model"

	"github.com/retrystorm/retrystorm/calibrate"
	"github.com/retrystorm/retrystorm/scenario"
	"github.com/retrystorm/retrystorm/sim"
)

// The generator turns a simulator run into the window of metrics an Envoy
// in front of each layer would have exported, as calibrate's gen_test.go
// turns its models into saved answers: each layer is one Envoy cluster
// (envoy_cluster_name) of one job, the calls into that layer. The names
// and units are Envoy's, as calibrate.Sources reads them (upstream_rq_time
// in milliseconds, in Envoy's default buckets).
//
// The simulator counts per tick the attempts, retries, failures and the
// queue of the layer's server, not the answers' latency nor when each
// answer left, so the generator derives them, by conservation and Little's
// law: the answers of a tick are the attempts that came in less what the
// queue grew by (a stalled server answers nothing and its queue grows; a
// server at a reduced capacity answers that capacity); their mean latency
// is the server's own service time (times the trigger's factor while a
// latency trigger holds) plus the wait the queue at the tick's end means
// at the capacity then, plus, for a layer whose server calls the next, the
// next layer's latency as many times as it made attempts per call. Each
// answer's latency is drawn lognormal (σ 0.3) about that mean.

// genLayer is what the generator knows of one layer, per tick.
type genLayer struct {
	job, cluster string
	s            sim.Series
	// capacity is the layer's server's answers per second at a tick (its
	// truth: the trigger's dip included); service its own mean service
	// time at a tick, seconds; workers its concurrency, for the busy
	// gauge.
	capacity func(tick int) float64
	service  func(tick int) float64
	// errShare is the share of its answers the server fails at a tick
	// (an errors trigger's); nil: none. The failures the simulator counts
	// beyond those were timeouts, which Envoy counts apart
	// (upstream_rq_timeout) as well as in the 5xx class (the router
	// charges a timeout's 504 as an upstream code: router.cc,
	// onUpstreamTimeoutAbort).
	errShare func(tick int) float64
	workers  int
	// timeout is the callers' attempt timeout: no caller waits longer, so
	// the wrapping layer's latency counts at most that of this one.
	timeout float64
}

// ticks derives the per-tick answers and mean latency of each layer,
// innermost last: a layer's latency wraps the next one's.
func genTicks(layers []genLayer, tick float64) (answered, latency [][]float64) {
	n := len(layers[0].s.Tick)
	answered = make([][]float64, len(layers))
	latency = make([][]float64, len(layers))
	for l := len(layers) - 1; l >= 0; l-- {
		g := &layers[l]
		answered[l] = make([]float64, n)
		latency[l] = make([]float64, n)
		for k := range n {
			q, prev := float64(g.s.Queue[k]), 0.0
			if k > 0 {
				prev = float64(g.s.Queue[k-1])
			}
			answered[l][k] = max(0, min(float64(g.s.Offered[k])+prev, float64(g.s.Offered[k])-(q-prev)))
			lat := g.service(k)
			if c := g.capacity(k); c > 0 {
				lat += q / c
			} else {
				lat += tick // a stalled server: what it answers at all waited the tick
			}
			if l+1 < len(layers) {
				in := &layers[l+1]
				per := 1.0
				if i := float64(in.s.Intents[k]); i > 0 {
					per = float64(in.s.Offered[k]) / i
				}
				lat += per * min(latency[l+1][k], in.timeout)
			}
			latency[l][k] = lat
		}
	}
	return answered, latency
}

// envoyBounds are Envoy's default histogram buckets, in ms
// (source/common/stats/histogram_impl.cc, defaultBuckets), as calibrate's
// generator has them.
var envoyBounds = []float64{0.5, 1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000, 300000, 600000, 1800000, 3600000}

var genStart = time.Date(2026, 11, 30, 14, 0, 0, 0, time.UTC)

// genMatrix is the layers' Envoy series from tick from on (the ticks
// before, the simulator's start from an empty origin, are no part of a
// real window), every per ticks summed into a step (the scrape interval),
// counters from a base of 1000 as if running before the window.
func genMatrix(layers []genLayer, tick time.Duration, per, from int, seed uint64) model.Matrix {
	r := rand.New(rand.NewPCG(seed, 0x23))
	answered, latency := genTicks(layers, tick.Seconds())
	n := (len(layers[0].s.Tick) - from) / per
	var out model.Matrix
	series := map[string]*model.SampleStream{}
	add := func(name string, labels model.LabelSet, step int, v float64, counter bool) {
		ls := model.Metric{model.MetricNameLabel: model.LabelValue(name)}
		for k, x := range labels {
			ls[k] = x
		}
		key := ls.String()
		ss := series[key]
		if ss == nil {
			ss = &model.SampleStream{Metric: ls}
			series[key] = ss
			out = append(out, ss)
		}
		if counter {
			v += 1000
			if len(ss.Values) > 0 {
				v += float64(ss.Values[len(ss.Values)-1].Value) - 1000
			}
		}
		at := genStart.Add(time.Duration(step+1) * time.Duration(per) * tick) // step -1: the counters' base at time 0
		ss.Values = append(ss.Values, model.SamplePair{Timestamp: model.TimeFromUnixNano(at.UnixNano()), Value: model.SampleValue(v)})
	}
	for l, g := range layers {
		labels := model.LabelSet{"job": model.LabelValue(g.job), "instance": model.LabelValue("10.0." + strconv.Itoa(l) + ".1:9901"), "envoy_cluster_name": model.LabelValue(g.cluster)}
		with := func(k, v string) model.LabelSet {
			c := labels.Clone()
			c[model.LabelName(k)] = model.LabelValue(v)
			return c
		}
		for s := -1; s < n; s++ {
			if s < 0 {
				// The samples at time 0: the counters' base, the gauges
				// at rest.
				for _, name := range []string{"envoy_cluster_upstream_rq_total", "envoy_cluster_upstream_rq_retry", "envoy_cluster_upstream_rq_timeout", "envoy_cluster_upstream_rq_time_sum", "envoy_cluster_upstream_rq_time_count"} {
					add(name, labels, s, 0, true)
				}
				for _, c := range []string{"2", "5"} {
					add("envoy_cluster_upstream_rq_xx", with("envoy_response_code_class", c), s, 0, true)
				}
				for _, b := range envoyBounds {
					add("envoy_cluster_upstream_rq_time_bucket", with("le", strconv.FormatFloat(b, 'g', -1, 64)), s, 0, true)
				}
				add("envoy_cluster_upstream_rq_time_bucket", with("le", "+Inf"), s, 0, true)
				add("envoy_cluster_upstream_rq_active", labels, s, 0, false)
				add("envoy_cluster_upstream_rq_pending_active", labels, s, 0, false)
				add("envoy_cluster_membership_healthy", labels, s, 1, false)
				continue
			}
			var att, ret, errs, tos, ans, sum float64
			var obs []float64
			for k := from + s*per; k < from+(s+1)*per; k++ {
				att += float64(g.s.Offered[k])
				ret += float64(g.s.Retries[k])
				errs += float64(g.s.FailedAttempts[k])
				a := math.Round(answered[l][k])
				ans += a
				failed := float64(g.s.FailedAttempts[k])
				if g.errShare != nil {
					failed -= math.Round(a * g.errShare(k))
				}
				tos += max(0, failed)
				for range int(a) {
					ms := 1000 * latency[l][k] * math.Exp(0.3*r.NormFloat64()-0.045)
					obs = append(obs, ms)
					sum += ms
				}
			}
			last := from + (s+1)*per - 1
			q := float64(g.s.Queue[last])
			busy := float64(g.workers)
			if q == 0 {
				busy = min(busy, math.Round(answered[l][last]/tick.Seconds()*g.service(last)))
			}
			add("envoy_cluster_upstream_rq_total", labels, s, att, true)
			add("envoy_cluster_upstream_rq_retry", labels, s, ret, true)
			add("envoy_cluster_upstream_rq_timeout", labels, s, min(tos, errs), true)
			add("envoy_cluster_upstream_rq_xx", with("envoy_response_code_class", "2"), s, max(0, att-errs), true)
			add("envoy_cluster_upstream_rq_xx", with("envoy_response_code_class", "5"), s, errs, true)
			for _, b := range envoyBounds {
				c := 0
				for _, o := range obs {
					if o <= b {
						c++
					}
				}
				add("envoy_cluster_upstream_rq_time_bucket", with("le", strconv.FormatFloat(b, 'g', -1, 64)), s, float64(c), true)
			}
			add("envoy_cluster_upstream_rq_time_bucket", with("le", "+Inf"), s, float64(len(obs)), true)
			add("envoy_cluster_upstream_rq_time_sum", labels, s, sum, true)
			add("envoy_cluster_upstream_rq_time_count", labels, s, float64(len(obs)), true)
			add("envoy_cluster_upstream_rq_active", labels, s, busy, false)
			add("envoy_cluster_upstream_rq_pending_active", labels, s, q, false)
			add("envoy_cluster_membership_healthy", labels, s, 1, false)
		}
	}
	return out
}

// genWindow is m as calibrate reads it: by metric name, each metric's
// series sorted by their labels.
func genWindow(m model.Matrix, step time.Duration) *calibrate.Window {
	w := &calibrate.Window{Step: step, Where: "the generator", Series: map[string][]calibrate.Series{}, Queries: map[string]string{}}
	for _, ss := range m {
		ls := model.LabelSet(ss.Metric).Clone()
		name := string(ls[model.MetricNameLabel])
		delete(ls, model.MetricNameLabel)
		s := calibrate.Series{Labels: ls}
		for _, p := range ss.Values {
			t := p.Timestamp.Time().UTC()
			s.Samples = append(s.Samples, calibrate.Sample{T: t, V: float64(p.Value)})
			if w.Start.IsZero() || t.Before(w.Start) {
				w.Start = t
			}
			if t.After(w.End) {
				w.End = t
			}
		}
		w.Series[name] = append(w.Series[name], s)
	}
	for _, ss := range w.Series {
		slices.SortFunc(ss, func(a, b calibrate.Series) int { return cmp.Compare(a.Labels.String(), b.Labels.String()) })
	}
	return w
}

// writeAnswer saves m as the query_range answer Prometheus's HTTP API
// gives, for a golden test to read as a user's saved window.
func writeAnswer(t *testing.T, file string, m model.Matrix) {
	t.Helper()
	a := map[string]any{"status": "success", "data": map[string]any{"resultType": "matrix", "result": m}}
	b, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}

// runSim runs sc and returns its fleets' results.
func runSim(t testing.TB, sc *scenario.Scenario) []sim.FleetResult {
	t.Helper()
	if err := sc.Validate(); err != nil {
		t.Fatal(err)
	}
	out, err := sim.Run(context.Background(), sc)
	if err != nil {
		t.Fatal(err)
	}
	return out.Fleets
}

// triggerAt returns, for a tick, the trigger's effect on the origin: its
// capacity then (answers/s) and its mean service time, from capacity and
// service outside any trigger. In the queue model a latency trigger
// lengthens each request's hold on its worker, so it lowers the capacity
// by its factor too; in the capacity model it does not (queue says which).
func triggerAt(sc *scenario.Scenario, capacity, service float64, queue bool) (capAt, svcAt, errAt func(int) float64) {
	tick := sc.Tick
	active := func(k int) *scenario.Trigger {
		at := time.Duration(k) * tick
		for i := range sc.Triggers {
			tr := &sc.Triggers[i]
			if at >= tr.At && at < tr.At+tr.For {
				return tr
			}
		}
		return nil
	}
	errAt = func(k int) float64 {
		e := sc.Origin.ErrorRate
		if tr := active(k); tr != nil && tr.Kind == scenario.TriggerErrors {
			e = 1 - (1-e)*(1-tr.ErrorRate)
		}
		return e
	}
	return func(k int) float64 {
			switch tr := active(k); {
			case tr == nil:
				return capacity
			case tr.Kind == scenario.TriggerCapacity:
				return tr.Capacity
			case tr.Kind == scenario.TriggerOutage:
				return 0
			case tr.Kind == scenario.TriggerLatency && queue:
				return capacity / tr.Factor
			}
			return capacity
		}, func(k int) float64 {
			if tr := active(k); tr != nil && tr.Kind == scenario.TriggerLatency {
				return service * tr.Factor
			}
			return service
		}, errAt
}

var makeTestdata = flag.Bool("make-testdata", false, "TestMakeTestdata: rewrite testdata/layers.json from its simulator run")

// layersYAML is a two-layer incident whose loop lives in a known layer:
// web clients call api through a front proxy that does not retry (job
// front-envoy, cluster api); api calls the origin through its sidecar
// (job api-sidecar, cluster db), which retries three times on a 1s
// timeout. The origin's capacity dips from 100/s to 30/s for 15s; its
// queue outlasts the sidecar's timeout, the sidecar's retries keep it
// full, and the loop lives between api and db. The front proxy sees its
// calls fail, never more of them.
const layersYAML = `name: layers
seed: 3
tick: 1s
duration: 250s
traffic: {rate: 60, arrivals: poisson, clients: 20}
origin: {model: queue, capacity: 100, workers: 10, error_rate: 0.005, service_time: {dist: exponential}}
tiers:
  - name: api
    server: {model: capacity, capacity: 5000, latency: 5ms}
    client:
      timeout: 1s
      retry: {max_retries: 3, backoff: {use: exponential, base: 50ms, cap: 1s, jitter: full}}
      budget: {use: none}
triggers:
  - {kind: capacity, at: 72s, for: 15s, capacity: 30}
fleets:
  - name: web
    timeout: 5s
    retry: {max_retries: 0}
    budget: {use: none}
`

// layersMatrix is the Envoy window of layersYAML's run, from 10s on, 5s
// steps.
func layersMatrix(t testing.TB, yaml string) (model.Matrix, *scenario.Scenario) {
	sc, err := scenario.Parse("layers.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	f := runSim(t, sc)[0]
	if len(f.Tiers) != 2 {
		t.Fatalf("%d layers, want 2", len(f.Tiers))
	}
	capAt, svcAt, errAt := triggerAt(sc, sc.Origin.Capacity, float64(sc.Origin.Workers)/sc.Origin.Capacity, true)
	tier := sc.Tiers[0].Server
	ls := []genLayer{
		{job: "front-envoy", cluster: "api", s: f.Tiers[0].Series, workers: int(tier.Capacity * tier.Latency.Seconds()), timeout: 5,
			capacity: func(int) float64 { return tier.Capacity }, service: func(int) float64 { return tier.Latency.Seconds() }},
		{job: "api-sidecar", cluster: "db", s: f.Tiers[1].Series, workers: sc.Origin.Workers, timeout: 1,
			capacity: capAt, service: svcAt, errShare: errAt},
	}
	return genMatrix(ls, sc.Tick, 5, 10, 3), sc
}

// TestMakeTestdata writes testdata/layers.json, the saved answers
// TestGolden's layers case replays: go test ./replay -run
// TestMakeTestdata -make-testdata.
func TestMakeTestdata(t *testing.T) {
	if !*makeTestdata {
		t.Skip("-make-testdata rewrites testdata/layers.json")
	}
	m, _ := layersMatrix(t, layersYAML)
	writeAnswer(t, "testdata/layers.json", m)
}
