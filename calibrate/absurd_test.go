package calibrate_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/retrystorm/retrystorm/calibrate"
	"github.com/retrystorm/retrystorm/internal/promtest"
)

// TestAbsurdHistogram: a latency histogram that cannot describe the
// service time is refused (ErrFit: exit 2), naming the metric and why,
// never fitted into a made-up service time and capacity. Before, buckets
// all 0 beside a positive _count gave an empirical median of 1m40s (the
// last bound) and 49,843 workers, exit 0.
func TestAbsurdHistogram(t *testing.T) {
	// grpc-real.json with every bucket of every histogram at 0; _count
	// and _sum as scraped.
	a := promtest.ReadAnswer(t, "testdata/grpc-real.json").Edited(func(s promtest.AnswerSeries) promtest.AnswerSeries {
		if strings.HasSuffix(s.Metric["__name__"], "_bucket") {
			for i := range s.Values {
				s.Values[i][1] = "0"
			}
		}
		return s
	})
	noBuckets := a.Write(t, filepath.Join(t.TempDir(), "nobuckets.json"))

	// resil's attempts: 90% at 1µs, 10% at 1.2ms, in resilprom's default
	// buckets, whose first is (0, 1ms]: the buckets' mean (0.63ms, each
	// share at its bucket's middle) is five times the exact one (0.12ms).
	var m matrix
	l := map[string]string{"job": "checkout", "instance": "10.0.0.1:9090", "name": "payments"}
	ok := map[string]string{"job": "checkout", "instance": "10.0.0.1:9090", "name": "payments", "kind": "first", "outcome": "success"}
	var lat []float64
	for i := range 100 {
		lat = append(lat, map[bool]float64{true: 1e-6, false: 0.0012}[i < 90])
	}
	for s := range 10 {
		m.add("resil_intents_total", l, s, 100, true)
		m.add("resil_attempts_total", l, s, 100, true)
		m.add("resil_retries_total", l, s, 0, true)
		m.histogram("resil_attempt_duration_seconds", ok, s, lat, resilBounds, 1, 'g')
	}
	coarse := filepath.Join(t.TempDir(), "coarse.json")
	writeAnswer(t, coarse, m.result())

	for _, c := range []struct {
		name, file string
		want       []string
	}{
		{"buckets all 0", noBuckets, []string{"grpc_server_call_duration_seconds_bucket", "the +Inf bucket counted 0 observations and _count 3397"}},
		{"buckets too coarse", coarse, []string{"resil_attempt_duration_seconds_bucket", "the buckets are too coarse"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			w, err := calibrate.ReadAnswers([]string{c.file}, calibrate.Selector{})
			if err != nil {
				t.Fatal(err)
			}
			r, err := calibrate.Fit(w, nil)
			if err == nil {
				t.Fatalf("fitted: service time %+v, %v workers", r.ServiceTime, r.Workers.V)
			}
			if !errors.Is(err, calibrate.ErrFit) {
				t.Errorf("error %v is not ErrFit (bad input)", err)
			}
			for _, want := range c.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q, want it to say %q", err, want)
				}
			}
		})
	}
}

// TestFitServiceBucketsDisagree: buckets that disagree with the count or
// the mean describe no distribution.
func TestFitServiceBucketsDisagree(t *testing.T) {
	le := []float64{0.005, 0.01, 0.025, 0.05, 0.1}
	for _, c := range []struct {
		name string
		b    calibrate.Buckets
		want string // "" fits
	}{
		{"consistent", calibrate.Buckets{Le: le, Cum: []float64{0, 100, 100, 100, 100}, Count: 100, Sum: 0.8, Inf: true, Counted: 100}, ""},
		{"+Inf bucket is not the count", calibrate.Buckets{Le: le, Cum: []float64{0, 50, 50, 50, 50}, Count: 50, Sum: 0.8, Inf: true, Counted: 100}, "the +Inf bucket counted 50 observations and _count 100"},
		// Every observation at most 10ms, the mean 1s.
		{"mean above every bucket", calibrate.Buckets{Le: le, Cum: []float64{0, 100, 100, 100, 100}, Count: 100, Sum: 100, Inf: true, Counted: 100}, "the buckets put it between 5ms and 10ms"},
		// Every observation above 100ms, the mean 8ms.
		{"mean below every bucket", calibrate.Buckets{Le: le, Cum: []float64{0, 0, 0, 0, 0}, Count: 100, Sum: 0.8, Inf: true, Counted: 100}, "the buckets put it between 100ms and +Inf"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := calibrate.FitService(c.b)
			switch {
			case c.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Errorf("error %v, want it to say %q", err, c.want)
			}
		})
	}
}
