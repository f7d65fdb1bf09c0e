package calibrate_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/retrystorm/retrystorm/calibrate"
)

// TestAbsurdGauges: a gauge of requests below 0, or a limit or a mean
// latency so small that it makes no worker or a capacity of millions, is
// an error that names the metric (ErrFit: exit 2), never a fit and never
// "calibrate wrote a scenario it cannot read back (a bug; please report
// it)" (issue 37: a limit of 1e-9 made 0 workers and that message, and a
// negative replica gauge was written as -5 healthy replicas).
func TestAbsurdGauges(t *testing.T) {
	orig := readAnswerFile(t, "testdata/haproxy.json")
	for _, c := range []struct {
		metric, value, want string
	}{
		{"haproxy_server_limit_sessions", "1e-9", "fewer than one"},
		{"haproxy_server_limit_sessions", "-5", "never negative"},
		{"haproxy_server_current_sessions", "-5", "never negative"},
		{"haproxy_backend_current_queue", "-1e-9", "never negative"},
		{"haproxy_backend_active_servers", "-5", "never negative"},
		{"haproxy_backend_response_time_average_seconds", "1e-9", "not a service time"},
		{"haproxy_backend_response_time_average_seconds", "-0.05", "not a service time"},
	} {
		t.Run(c.metric+"="+c.value, func(t *testing.T) {
			a := orig
			a.Data.Result = nil
			for _, s := range orig.Data.Result {
				if s.Metric["__name__"] == c.metric {
					vs := make([][2]any, len(s.Values))
					for i, v := range s.Values {
						vs[i] = [2]any{v[0], c.value}
					}
					s.Values = vs
				}
				a.Data.Result = append(a.Data.Result, s)
			}
			file := a.write(t, filepath.Join(t.TempDir(), "absurd.json"))
			w, err := calibrate.ReadAnswers([]string{file}, calibrate.Selector{})
			if err != nil {
				t.Fatal(err)
			}
			r, err := calibrate.Fit(w, nil)
			if err == nil {
				_, err = calibrate.Write(r, "")
				t.Fatalf("fitted: capacity %g, workers %g, replicas %g; Write: %v", r.Capacity.V, r.Workers.V, r.Replicas.V, err)
			}
			if !errors.Is(err, calibrate.ErrFit) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.metric) {
				t.Errorf("error %v: want ErrFit naming %s and saying %q", err, c.metric, c.want)
			}
		})
	}
}
