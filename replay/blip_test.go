package replay

import (
	"fmt"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/common/model"

	"github.com/retrystorm/retrystorm/calibrate"
	"github.com/retrystorm/retrystorm/scenario"
)

// blipWindow is the window a client and its server export through an
// error blip, as source src names the metrics: 50 calls/s on a server of
// 80ms calls; from step 20 to 25 a share p of attempts is answered with
// an error within a millisecond, and the client retries each failed
// attempt (two retries: 1+p+p² attempts per call, p³ of the calls failing
// every attempt). Nothing is short of capacity.
//
//   - grpc: grpc-go v1.85.0 stats/opentelemetry (client_metrics.go,
//     server_metrics.go): the client's attempts started and attempt and
//     call durations by grpc_status, the server's calls started and call
//     duration by grpc_status; the errors UNAVAILABLE.
//   - resil: resilprom's attempts, intents, retries and attempt duration
//     by outcome (resil/outcome.go's names); the errors "failure".
func blipWindow(src string, p float64) *calibrate.Window {
	const (
		n    = 60
		step = 5 * time.Second
		rate = 50.0 // calls/s
		svc  = 0.08
	)
	t0 := time.Unix(1796047200, 0).UTC()
	w := &calibrate.Window{Start: t0, End: t0.Add(n * step), Step: step, Series: map[string][]calibrate.Series{}, Where: "blipWindow"}
	idx := map[string]map[model.Fingerprint]int{}
	add := func(name string, ls model.LabelSet, i int, inc float64) {
		if idx[name] == nil {
			idx[name] = map[model.Fingerprint]int{}
		}
		j, ok := idx[name][ls.Fingerprint()]
		if !ok {
			j = len(w.Series[name])
			idx[name][ls.Fingerprint()] = j
			w.Series[name] = append(w.Series[name], calibrate.Series{Labels: ls, Samples: []calibrate.Sample{{T: t0, V: 0}}})
		}
		s := &w.Series[name][j]
		s.Samples = append(s.Samples, calibrate.Sample{T: t0.Add(time.Duration(i+1) * step), V: s.Samples[len(s.Samples)-1].V + inc})
	}
	// hist adds a histogram's count, sum and buckets: the successes take
	// svc each, the errors a millisecond.
	hist := func(base string, ls model.LabelSet, label model.LabelName, okName, errName string, i int, ok, fail float64) {
		for _, c := range []struct {
			status   string
			n, taken float64
		}{{okName, ok, svc}, {errName, fail, 0.001}} {
			l := ls.Merge(model.LabelSet{label: model.LabelValue(c.status)})
			add(base+"_count", l, i, c.n)
			add(base+"_sum", l, i, c.n*c.taken)
			for _, le := range []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, math.Inf(1)} {
				in := 0.0
				if le >= c.taken {
					in = c.n
				}
				name := model.LabelValue(strconv.FormatFloat(le, 'g', -1, 64))
				if math.IsInf(le, 1) {
					name = "+Inf"
				}
				add(base+"_bucket", l.Merge(model.LabelSet{"le": name}), i, in)
			}
		}
	}
	for i := range n {
		q := 0.0
		if i >= 20 && i < 26 {
			q = p
		}
		calls := rate * step.Seconds()
		att := calls * (1 + q + q*q)
		fail := att * q
		exhausted := calls * q * q * q
		switch src {
		case "grpc":
			client := model.LabelSet{"job": "client", "instance": "c1:9464", "grpc_method": "svc/M", "grpc_target": "dns:///svc:443"}
			server := model.LabelSet{"job": "server", "instance": "s1:9464", "grpc_method": "svc/M"}
			status := func(s string) model.LabelSet { return model.LabelSet{"grpc_status": model.LabelValue(s)} }
			add("grpc_client_attempt_started_total", client, i, att)
			add("grpc_client_attempt_duration_seconds_count", client.Merge(status("OK")), i, att-fail)
			add("grpc_client_attempt_duration_seconds_count", client.Merge(status("UNAVAILABLE")), i, fail)
			add("grpc_client_call_duration_seconds_count", client.Merge(status("OK")), i, calls-exhausted)
			add("grpc_client_call_duration_seconds_count", client.Merge(status("UNAVAILABLE")), i, exhausted)
			add("grpc_server_call_started_total", server, i, att)
			hist("grpc_server_call_duration_seconds", server, "grpc_status", "OK", "UNAVAILABLE", i, att-fail, fail)
		case "resil":
			client := model.LabelSet{"job": "client", "instance": "c1:9464", "name": "svc"}
			add("resil_attempts_total", client, i, att)
			add("resil_intents_total", client, i, calls)
			add("resil_retries_total", client, i, att-calls)
			hist("resil_attempt_duration_seconds", client.Merge(model.LabelSet{"kind": "first"}), "outcome", "success", "failure", i, att-fail, fail)
		}
	}
	return w
}

// TestErrorBlip: an error blip is an error blip whatever its size.
// Counting only gRPC's OK calls (resil's successes) as answers made a blip
// of more than a tenth look like a shortage (more attempts than answers)
// and it was inferred a capacity drop: an error the origin answered is an
// answer (answerStatus).
func TestErrorBlip(t *testing.T) {
	for _, c := range []struct {
		src string
		p   float64
	}{
		{"grpc", 0.08}, {"grpc", 0.15}, {"grpc", 0.3}, {"grpc", 0.5}, {"grpc", 0.9},
		{"resil", 0.08}, {"resil", 0.15}, {"resil", 0.3}, {"resil", 0.5}, {"resil", 0.9},
	} {
		t.Run(fmt.Sprintf("%s %g", c.src, c.p), func(t *testing.T) {
			src, err := calibrate.SourceNamed(c.src)
			if err != nil {
				t.Fatal(err)
			}
			p := c.p
			d, err := diagnose(blipWindow(c.src, p), src, nil)
			if err != nil {
				t.Fatal(err)
			}
			if d.on < 0 {
				t.Fatal("no incident")
			}
			tr := d.trig
			if tr.Kind != scenario.TriggerErrors || tr.At != 100 || tr.For != 30 {
				t.Fatalf("%s for %gs at %gs (%s), want an error blip at 100s for 30s", tr.What(), tr.For, tr.At, tr.How)
			}
			if math.Abs(tr.Size-p) > 0.1*p {
				t.Errorf("size %.3g, want %g within a tenth", tr.Size, p)
			}
		})
	}
}
