package replay

import (
	"math"
	"testing"

	"github.com/retrystorm/retrystorm/scenario"
)

// steady is a window of n steps of 50 intents/s, all answered in 100ms,
// no errors and no queue, on an origin of 60/s.
func steady(n int) *Measured {
	m := &Measured{Step: 1}
	for i := range n {
		m.T = append(m.T, float64(i+1))
		m.Intents = append(m.Intents, 50)
		m.Attempts = append(m.Attempts, 50)
		m.Errors = append(m.Errors, 0)
		m.ErrorRate = append(m.ErrorRate, 0)
		m.Served = append(m.Served, 50)
		m.Latency = append(m.Latency, 0.1)
		m.Queue = append(m.Queue, 0)
	}
	return m
}

// TestInfer: each kind of trigger, made in steps 10 to 14 of a steady
// window, is inferred with its span and size.
func TestInfer(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(m *Measured, i int)
		kind string
		mode string
		size float64
	}{
		{"stall", func(m *Measured, i int) { m.Served[i], m.Latency[i], m.Queue[i] = 0, 0, float64(50*(i-9)) }, scenario.TriggerOutage, scenario.OutageStall, 0},
		{"blackhole", func(m *Measured, i int) { m.Served[i], m.Latency[i] = 0, 0 }, scenario.TriggerOutage, scenario.OutageBlackhole, 0},
		{"load", func(m *Measured, i int) { m.Intents[i], m.Attempts[i], m.Served[i] = 100, 100, 60 }, scenario.TriggerLoad, "", 100},
		{"capacity", func(m *Measured, i int) { m.Served[i], m.Queue[i] = 20, float64(30*(i-9)) }, scenario.TriggerCapacity, "", 20},
		{"latency", func(m *Measured, i int) { m.Latency[i] = 0.5 }, scenario.TriggerLatency, "", 5},
		{"errors", func(m *Measured, i int) { m.Errors[i], m.ErrorRate[i] = 15, 0.3 }, scenario.TriggerErrors, "", 0.3},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := steady(40)
			for i := 10; i < 15; i++ {
				c.edit(m, i)
			}
			b := baselineOf(m)
			on := onset(m, b)
			if on != 10 {
				t.Fatalf("onset at step %d, want 10", on)
			}
			tr := infer(m, b, on, 60)
			if tr.Kind != c.kind || tr.Mode != c.mode || tr.start != 10 || tr.end != 15 || !tr.Ended {
				t.Errorf("inferred %s %s over steps %d to %d (ended %v), want %s %s over 10 to 15", tr.Kind, tr.Mode, tr.start, tr.end, tr.Ended, c.kind, c.mode)
			}
			if math.Abs(tr.Size-c.size) > 1e-9 {
				t.Errorf("size %g, want %g", tr.Size, c.size)
			}
			if tr.How == "" || tr.Confidence == "" {
				t.Errorf("no how or confidence: %+v", tr)
			}
		})
	}
	if on := onset(steady(40), baselineOf(steady(40))); on != -1 {
		t.Errorf("a steady window has an incident at step %d", on)
	}
}

// TestRecovery judges as the simulator does: the first step from which
// the error share stays within a point of the baseline to the end, with
// at least ten steps left.
func TestRecovery(t *testing.T) {
	rate := make([]float64, 30)
	for i := 10; i < 18; i++ {
		rate[i] = 0.5
	}
	if k, ok := recovery(rate, 15, 0); !ok || k != 3 {
		t.Errorf("recovery %d, %v; want 3 steps after the trigger", k, ok)
	}
	rate[25] = 0.02 // a blip past the tolerance: only 4 steps are left after it
	if _, ok := recovery(rate, 15, 0); ok {
		t.Error("recovered with fewer than ten steps left")
	}
}
