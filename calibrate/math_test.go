package calibrate

import (
	"testing"
	"time"

	"github.com/prometheus/common/model"
)

// TestCounterBornInWindow: a counter series that appears in the window
// while its target was already scraped began at 0 there (the OTel SDK
// creates grpc-go's UNAVAILABLE series at the first failure), so its
// first value is an increase; a target's first series, which cannot be
// told from a target whose scrapes began in the window, is not.
func TestCounterBornInWindow(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Second) }
	series := func(inst, status string, from int, vs ...float64) Series {
		s := Series{Labels: model.LabelSet{"instance": model.LabelValue(inst), "grpc_status": model.LabelValue(status)}}
		for i, v := range vs {
			s.Samples = append(s.Samples, Sample{T: at(from + i), V: v})
		}
		return s
	}
	for _, c := range []struct {
		name   string
		series []Series
		want   float64
	}{
		{"from the window's start", []Series{series("a", "OK", 0, 100, 110, 120)}, 20},
		{"born in the window", []Series{series("a", "OK", 0, 100, 110, 120), series("a", "UNAVAILABLE", 1, 3, 5)}, 25},
		{"a target first seen in the window", []Series{series("a", "OK", 0, 100, 110, 120), series("b", "OK", 1, 500, 510)}, 30},
		{"a reset", []Series{series("a", "OK", 0, 100, 110, 4)}, 14},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := &Window{Start: t0, End: at(2), Step: time.Second, Series: map[string][]Series{"m": c.series}}
			got := 0.0
			for _, v := range Counter(w, Ref{Metric: "m"}).V {
				got += v
			}
			if got != c.want {
				t.Errorf("increase %g, want %g", got, c.want)
			}
		})
	}
}
