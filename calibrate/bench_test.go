package calibrate_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/prometheus/common/model"

	"github.com/retrystorm/retrystorm/calibrate"
	"github.com/retrystorm/retrystorm/replay"
)

// BenchmarkHour times issue 23's target, "fitting an hour of 15 s data:
// under 10 s": calibrate's whole offline path (read the saved
// query_range answer, detect its source, fit, write the scenario) on an
// hour (240 steps) of gen_test.go's models, Envoy with 3 and 12 pods
// (31 series each: counters, gauges, and the 19 buckets, sum and count of
// upstream_rq_time) and gRPC's 4 instances beside a 41-bucket server
// histogram; and replay of the 12 pods' hour, whose 4-step burst to
// 1000/s is the incident, with and without advise's search:
//
//	go test ./calibrate -run '^$' -bench Hour -benchtime 3x
func BenchmarkHour(b *testing.B) {
	const hour = 240
	envoy, grpc := genModels["envoy"], genModels["grpc"]
	cases := []struct {
		name  string
		model genModel
		build func(genModel, []genStepOut) model.Matrix
	}{
		{"envoy-3", resized(envoy.model, 3, hour), envoy.build},
		{"envoy-12", resized(envoy.model, 12, hour), envoy.build},
		{"grpc-4", resized(grpc.model, 4, hour), grpc.build},
	}
	dir := b.TempDir()
	files := map[string]string{}
	for _, c := range cases {
		f := filepath.Join(dir, c.name+".json")
		m := c.build(c.model, c.model.run(1))
		writeAnswer(b, f, m)
		files[c.name] = f
		b.Logf("%s: %d series, %d samples", c.name, len(m), samples(m))
	}
	for _, c := range cases {
		b.Run("calibrate/"+c.name, func(b *testing.B) {
			for b.Loop() {
				w, err := calibrate.ReadAnswers([]string{files[c.name]}, calibrate.Selector{})
				if err != nil {
					b.Fatal(err)
				}
				src, err := calibrate.Detect(w)
				if err != nil {
					b.Fatal(err)
				}
				r, err := calibrate.Fit(w, src)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := calibrate.Write(r, ""); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	var once sync.Once
	for _, advise := range []bool{false, true} {
		b.Run(fmt.Sprintf("replay/envoy-12/advise=%v", advise), func(b *testing.B) {
			for b.Loop() {
				w, err := calibrate.ReadAnswers([]string{files["envoy-12"]}, calibrate.Selector{})
				if err != nil {
					b.Fatal(err)
				}
				r, err := replay.Replay(context.Background(), w, replay.Options{Advise: advise})
				if err != nil {
					b.Fatal(err)
				}
				if !r.Incident || (advise && r.AdviseNote != "") {
					b.Fatalf("the hour's burst replayed as %q (advise: %q)", r.Conclusion, r.AdviseNote)
				}
				once.Do(func() { b.Logf("%s", r.Conclusion) })
			}
		})
	}
}

// resized returns m over steps steps of instances instances, the same total
// rate spread over them.
func resized(m genModel, instances, steps int) genModel {
	m.instances, m.steps = instances, steps
	return m
}

func samples(m model.Matrix) int {
	n := 0
	for _, s := range m {
		n += len(s.Values)
	}
	return n
}
