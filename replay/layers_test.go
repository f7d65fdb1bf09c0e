package replay

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"

	"github.com/retrystorm/retrystorm/calibrate"
	"github.com/retrystorm/retrystorm/scenario"
)

// TestLoopLayer: the replay names the layer the loop lives in, the one
// whose callers retry, whichever of the two it is (gen_test.go's
// layersYAML, and the same incident with the retries moved to the front
// proxy: web retries three times on a 2s timeout, api's sidecar not at
// all).
func TestLoopLayer(t *testing.T) {
	front := strings.NewReplacer(
		"      retry: {max_retries: 3, backoff: {use: exponential, base: 50ms, cap: 1s, jitter: full}}", "      retry: {max_retries: 0}",
		"    timeout: 5s\n    retry: {max_retries: 0}", "    timeout: 2s\n    retry: {max_retries: 3, backoff: {use: exponential, base: 50ms, cap: 1s, jitter: full}}",
	).Replace(layersYAML)
	if front == layersYAML {
		t.Fatal("the front variant is layersYAML itself")
	}
	for _, c := range []struct {
		name, yaml, lives string
	}{
		{"sidecar retries", layersYAML, "api-sidecar/db"},
		{"front proxy retries", front, "front-envoy/api"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, sc := layersMatrix(t, c.yaml)
			w := genWindow(m, 5*sc.Tick)
			r, err := Replay(context.Background(), w, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if !r.Incident || r.Layer != "api-sidecar/db" {
				t.Fatalf("incident %v at layer %q: want one, inferred at api-sidecar/db (the origin's callers)", r.Incident, r.Layer)
			}
			if r.LoopLayer != c.lives {
				for _, l := range r.Loops {
					t.Logf("%s: %s", l.Layer, l.Evidence)
				}
				t.Errorf("the loop lives in %q, want %q", r.LoopLayer, c.lives)
			}
		})
	}
}

// TestLayersOf: each source's layer labels split a window into its
// layers; a series that names no layer (a server's, which knows no
// caller) is every layer's; a window of one layer is not split.
func TestLayersOf(t *testing.T) {
	series := func(name string, ls model.LabelSet) (string, calibrate.Series) {
		return name, calibrate.Series{Labels: ls, Samples: []calibrate.Sample{{T: time.Unix(0, 0), V: 1}}}
	}
	for _, c := range []struct {
		name, source string
		series       [][2]any
		want         map[string][]string // layer: its metrics' series, by their labels
	}{
		{"grpc targets", "grpc", [][2]any{
			{"grpc_client_attempt_started_total", model.LabelSet{"job": "frontend", "grpc_target": "dns:///cart:443", "instance": "a"}},
			{"grpc_client_attempt_started_total", model.LabelSet{"job": "frontend", "grpc_target": "dns:///cart:443", "instance": "b"}},
			{"grpc_client_attempt_started_total", model.LabelSet{"job": "cart", "grpc_target": "dns:///db:443", "instance": "c"}},
			{"grpc_server_call_duration_seconds_count", model.LabelSet{"job": "db", "instance": "d"}},
		}, map[string][]string{
			"cart/dns:///db:443":       {"c", "d"},
			"frontend/dns:///cart:443": {"a", "b", "d"},
		}},
		// A middle tier's own server series (job cart: the calls into
		// cart, frontend's hop) are not the cart→db layer's: with them,
		// its answers and service time were cart's and db's together.
		{"grpc middle tier", "grpc", [][2]any{
			{"grpc_client_attempt_started_total", model.LabelSet{"job": "frontend", "grpc_target": "dns:///cart:443", "instance": "a"}},
			{"grpc_client_attempt_started_total", model.LabelSet{"job": "cart", "grpc_target": "dns:///db:443", "instance": "c"}},
			{"grpc_server_call_duration_seconds_count", model.LabelSet{"job": "cart", "instance": "c"}},
			{"grpc_server_call_duration_seconds_count", model.LabelSet{"job": "db", "instance": "d"}},
		}, map[string][]string{
			"cart/dns:///db:443":       {"c", "d"},
			"frontend/dns:///cart:443": {"a", "c", "d"},
		}},
		{"one envoy cluster", "envoy", [][2]any{
			{"envoy_cluster_upstream_rq_total", model.LabelSet{"job": "envoy", "envoy_cluster_name": "checkout", "instance": "a"}},
			{"envoy_cluster_upstream_rq_total", model.LabelSet{"job": "envoy", "envoy_cluster_name": "checkout", "instance": "b"}},
		}, nil},
		{"resil guards", "resil", [][2]any{
			{"resil_attempts_total", model.LabelSet{"job": "checkout", "name": "payments", "instance": "a"}},
			{"resil_attempts_total", model.LabelSet{"job": "payments", "name": "ledger", "instance": "b"}},
			{"resil_intents_total", model.LabelSet{"job": "payments", "name": "ledger", "instance": "b"}},
		}, map[string][]string{
			"checkout/payments": {"a"},
			"payments/ledger":   {"b", "b"},
		}},
		// A lab chain read as resil's: the gateway's Guards, one per
		// client (naive-00, naive-01), are one layer; the tier api's
		// Guard another.
		{"a lab chain", "resil", [][2]any{
			{"resil_attempts_total", model.LabelSet{"job": "lab", "name": "naive-00", "instance": "a"}},
			{"resil_attempts_total", model.LabelSet{"job": "lab", "name": "naive-01", "instance": "b"}},
			{"resil_attempts_total", model.LabelSet{"job": "lab", "name": "api", "instance": "c"}},
		}, map[string][]string{
			"lab/naive": {"a", "b"},
			"lab/api":   {"c"},
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			src, err := calibrate.SourceNamed(c.source)
			if err != nil {
				t.Fatal(err)
			}
			w := &calibrate.Window{Series: map[string][]calibrate.Series{}}
			for _, s := range c.series {
				name, ser := series(s[0].(string), s[1].(model.LabelSet))
				w.Series[name] = append(w.Series[name], ser)
			}
			ls := layersOf(w, src)
			if c.want == nil {
				if ls != nil {
					t.Fatalf("%d layers, want the window whole", len(ls))
				}
				return
			}
			if len(ls) != len(c.want) {
				t.Fatalf("%d layers, want %d", len(ls), len(c.want))
			}
			for _, l := range ls {
				want, ok := c.want[l.name]
				if !ok {
					t.Fatalf("layer %q, want one of %v", l.name, c.want)
				}
				var got []string
				for _, name := range l.w.Names() {
					for _, s := range l.w.Series[name] {
						got = append(got, string(s.Labels["instance"]))
					}
				}
				if strings.Join(got, ",") != strings.Join(want, ",") {
					t.Errorf("layer %s holds the series of instances %v, want %v", l.name, got, want)
				}
			}
		})
	}
}

// TestLayersAdversarial: windows a reviewer made from testdata/layers.json
// (the two-tier capacity dip) that the per-layer reading got wrong.
//
//   - idle: api's sidecar has a second cluster, xds_cluster, that counted
//     no attempt: the replay exited 2 ("counted no attempt"); the layer is
//     left out with a note, and with one layer left the window is read
//     whole.
//   - rare: the second cluster, healthcheck, has traffic in 3 steps:
//     exit 2 ("has 3 steps with traffic"); left out likewise.
//   - siblings: api's sidecar alone, its db cluster collapsing while a
//     cache cluster with a tenth of its latency stays healthy: the two
//     were taken for a chain, the trigger looked for at the shorter
//     latency only (the cache), and the replay said "no incident".
//   - fallback: the front proxy's second cluster, fallback, gets traffic
//     only from the trigger on: its mean queue before the trigger was
//     the mean of no steps, NaN, and --json failed.
func TestLayersAdversarial(t *testing.T) {
	for _, c := range []struct {
		file  string
		layer string // the layer inferred at; empty: the window read whole
		loops int
		note  string
	}{
		{"idle.json", "", 1, "Layer api-sidecar/xds_cluster is left out"},
		{"rare.json", "", 1, "Layer api-sidecar/healthcheck is left out: the window has 3 steps with traffic"},
		{"siblings.json", "api-sidecar/db", 2, ""},
		{"fallback2.json", "api-sidecar/db", 3, "Layer front-envoy/fallback has no steps before the trigger"},
	} {
		t.Run(c.file, func(t *testing.T) {
			w, err := calibrate.ReadAnswers([]string{"testdata/" + c.file}, calibrate.Selector{})
			if err != nil {
				t.Fatal(err)
			}
			r, err := Replay(context.Background(), w, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if !r.Incident || r.Trigger.Kind != scenario.TriggerCapacity {
				t.Fatalf("incident %v, trigger %+v: %s; want the capacity dip", r.Incident, r.Trigger, r.Message)
			}
			if r.Layer != c.layer || len(r.Loops) != c.loops {
				t.Errorf("inferred at layer %q with %d loops, want %q and %d", r.Layer, len(r.Loops), c.layer, c.loops)
			}
			notes := strings.Join(r.Notes, "\n")
			if c.note != "" && !strings.Contains(notes, c.note) {
				t.Errorf("notes %q, want one saying %q", notes, c.note)
			}
			if _, err := json.Marshal(r); err != nil {
				t.Errorf("the JSON: %v", err)
			}
		})
	}
}

// TestOrderTotal: order is a total order, the same whatever the layers'
// order in, when some layers show a latency and others do not.
func TestOrderTotal(t *testing.T) {
	mk := func(name string, lat, rate float64) *layer {
		m := &Measured{}
		for range MinSteps {
			m.T = append(m.T, 0)
			m.Intents = append(m.Intents, rate)
			m.Attempts = append(m.Attempts, rate)
			m.Errors = append(m.Errors, 0)
			m.ErrorRate = append(m.ErrorRate, 0)
			m.Served = append(m.Served, rate)
			m.Latency = append(m.Latency, lat)
		}
		return &layer{name: name, m: m}
	}
	// With B between A and C by intents but without latency, comparing
	// by latency where two layers have one and by intents where not made
	// A > C (latency), C > B and B > A (intents): no order at all, and
	// the result depended on the input's order.
	a, b, c := mk("a", 0.01, 10), mk("b", 0, 20), mk("c", 0.1, 30)
	var want string
	for i, in := range [][]*layer{{a, b, c}, {c, b, a}, {b, a, c}, {b, c, a}, {a, c, b}, {c, a, b}} {
		ls := slices.Clone(in)
		order(ls)
		var got []string
		for _, l := range ls {
			got = append(got, l.name)
		}
		if i == 0 {
			want = strings.Join(got, ",")
			if want != "a,b,c" {
				t.Errorf("order %s, want a,b,c: by intents, fewest first, where a layer shows no latency", want)
			}
		}
		if g := strings.Join(got, ","); g != want {
			t.Errorf("order of %d: %s, of the first %s", i, g, want)
		}
	}
}

// TestLayerLoopsBeforeTrigger: a layer whose traffic ended before the
// trigger began (a cluster drained earlier) has no loop to read; read, it
// was judged never to have recovered from a trigger it never saw.
func TestLayerLoopsBeforeTrigger(t *testing.T) {
	t0 := time.Unix(1796047200, 0)
	mk := func(name string, n int) *layer {
		m := &Measured{Step: 1, start: t0}
		for i := range n {
			m.T = append(m.T, float64(i+1))
			m.Intents = append(m.Intents, 10)
			m.Attempts = append(m.Attempts, 10)
			m.Errors = append(m.Errors, 0)
			m.ErrorRate = append(m.ErrorRate, 0)
			m.Served = append(m.Served, 10)
			m.Latency = append(m.Latency, 0.01)
		}
		return &layer{name: name, m: m}
	}
	live, drained := mk("live", 60), mk("drained", 25)
	src, err := calibrate.SourceNamed("envoy")
	if err != nil {
		t.Fatal(err)
	}
	trig := Trigger{Kind: scenario.TriggerCapacity, Ended: true, start: 30, end: 35}
	loops, _, notes := layerLoops([]*layer{drained, live}, trig, live.m, &calibrate.Result{}, src)
	if len(loops) != 1 || loops[0].Layer != "live" {
		for _, l := range loops {
			t.Logf("%s: %s (%s)", l.Layer, l.Evidence, l.Verdict)
		}
		t.Errorf("%d loops, want the live layer's only", len(loops))
	}
	if !strings.Contains(strings.Join(notes, " "), "Layer drained's traffic ends before the trigger") {
		t.Errorf("notes %q, want one for the drained layer", notes)
	}
}

// TestChainLayers replays testdata/chain.json, a real window: the lab's
// two-tier chain (reallayers_test.go's chainYAML: the users call edge,
// edge calls api, and only api retries) through a 4 s blackhole, as a
// real Prometheus scraped the gateway's and the tiers' resil metrics
// (go test ./replay -run TestRealPrometheusLayers -capture). Its layers
// are the Guards': the users' (users-00 to users-03, one layer), edge's
// and api's. The outage begins within a step; edge's answers, which wrap
// api's, fell below the saturation mark in that step and api's did not,
// so edge's incident began a step before api's and the trigger was
// inferred at edge, whose callers do not retry. A trigger within a step
// shows in that step at every layer of a chain, each by its own
// threshold: the innermost layer whose incident begins within a step of
// the first is the origin's callers'.
func TestChainLayers(t *testing.T) {
	w, err := calibrate.ReadAnswers([]string{"testdata/chain.json"}, calibrate.Selector{})
	if err != nil {
		t.Fatal(err)
	}
	src, err := calibrate.SourceNamed("resil")
	if err != nil {
		t.Fatal(err)
	}
	r, err := Replay(context.Background(), w, Options{Source: src})
	if err != nil {
		t.Fatal(err)
	}
	var layers []string
	for _, l := range r.Loops {
		layers = append(layers, l.Layer)
	}
	if want := []string{"lab/users", "lab/edge", "lab/api"}; !slices.Equal(layers, want) {
		t.Errorf("layers %q, want %q (outermost first)", layers, want)
	}
	if !r.Incident || r.Trigger.Kind != scenario.TriggerOutage || !r.Trigger.Ended {
		t.Fatalf("incident %v, trigger %+v: %s; want the outage, ended", r.Incident, r.Trigger, r.Message)
	}
	if r.Layer != "lab/api" || r.LoopLayer != "lab/api" {
		t.Errorf("inferred at %q, the loop in %q: want both lab/api (the origin's callers, the one tier that retries)", r.Layer, r.LoopLayer)
	}
	if r.Verdict.Recovered || r.AsIs.Verdict.Recovered || !r.Agrees {
		t.Errorf("the window's verdict %s, the replay's %s: want both never", r.Verdict, r.AsIs.Verdict)
	}
}
