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
	all := func(int) bool { return true }
	if k, ok := recovery(rate, all, 15, 0); !ok || k != 3 {
		t.Errorf("recovery %d, %v; want 3 steps after the trigger", k, ok)
	}
	// Steps without a value (a failed scrape) count toward no tail.
	if _, ok := recovery(rate, func(i int) bool { return i < 22 }, 15, 0); ok {
		t.Error("recovered on 4 known steps and 8 unknown ones")
	}
	if k, ok := recovery(rate, func(i int) bool { return i != 18 }, 15, 0); !ok || k != 4 {
		t.Errorf("recovery %d, %v; want 4 steps: the first known step under the tolerance", k, ok)
	}
	rate[25] = 0.02 // a blip past the tolerance: only 4 steps are left after it
	if _, ok := recovery(rate, all, 15, 0); ok {
		t.Error("recovered with fewer than ten steps left")
	}
}

// TestInferEdges: what the labelled set (labelled_test.go) taught the
// inference, each in a steady window of 50 intents/s on an origin of
// 60/s: an error blip whose retries saturate the origin is a blip, not a
// capacity drop; a one-step latency burst behind a queue is no incident;
// a stall that begins within a step, whose first step still answered
// some, is a stall.
func TestInferEdges(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(m *Measured)
		kind string // "" for no incident
		mode string
	}{
		{"blip saturating", func(m *Measured) {
			for i := 10; i < 15; i++ {
				// Retries push the attempts past the capacity: a queue,
				// latency up, all 60/s served, 30% of them errors.
				m.Attempts[i], m.Served[i], m.Errors[i], m.ErrorRate[i] = 75, 60, 18, 18.0/75
				m.Latency[i], m.Queue[i] = 0.5, float64(15*(i-9))
			}
		}, scenario.TriggerErrors, ""},
		{"queue burst", func(m *Measured) {
			m.Latency[10], m.Queue[10] = 0.3, 20 // 20 queued wait 0.4s at 50/s
		}, "", ""},
		{"stall within a step", func(m *Measured) {
			m.Served[10], m.Latency[10], m.Queue[10] = 20, 0.4, 30
			for i := 11; i < 14; i++ {
				m.Served[i], m.Latency[i], m.Queue[i] = 0, 0, float64(30+50*(i-10))
			}
			m.Served[14], m.Queue[14] = 60, 170
		}, scenario.TriggerOutage, scenario.OutageStall},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := steady(40)
			c.edit(m)
			b := baselineOf(m)
			on := onset(m, b)
			if c.kind == "" {
				if on >= 0 {
					t.Fatalf("an incident at step %d, want none", on)
				}
				return
			}
			if on != 10 {
				t.Fatalf("onset at step %d, want 10", on)
			}
			if tr := infer(m, b, on, 60); tr.Kind != c.kind || tr.Mode != c.mode {
				t.Errorf("inferred %s %s (%s), want %s %s", tr.Kind, tr.Mode, tr.How, c.kind, c.mode)
			}
		})
	}
}

// TestInferOutageWithinAStep: an outage that begins within a step shows
// first as a drop of the answers, and is read as one (the capacity
// case, then an outage for its silent steps); it ends when answers come
// back, as an outage read from its first silent step does, not when the
// origin serves its capacity again: a retry storm after it keeps the
// origin saturated with few answers in time, and the outage was taken to
// last to the window's end, the loop after it not read. The series are
// api's in a real window (TestRealPrometheusLayers: the lab's chain, a
// 4 s blackhole, api's resil metrics): a partial step 8, steps 9 to 11
// silent, answers from step 12 on, fewer as the retries fill the queue.
func TestInferOutageWithinAStep(t *testing.T) {
	m := &Measured{
		Step:     1,
		Attempts: []float64{85, 85, 85, 85, 85, 85, 85, 85, 85, 147, 233, 312, 336, 240, 237, 246, 256, 263, 284, 290, 309, 324, 328, 334, 283},
		Served:   []float64{85, 85, 85, 85, 85, 85, 85, 85, 28, 0, 0, 0, 64, 72, 34, 31, 28, 22, 17, 14, 8, 2, 0, 0, 0},
		Latency:  []float64{0.081, 0.081, 0.081, 0.081, 0.081, 0.081, 0.081, 0.081, 0.081, 0, 0, 0, 0.28, 0.77, 0.98, 0.98, 0.98, 0.98, 0.99, 0.99, 0.99, 0.99, 0, 0, 0},
	}
	for i := range m.Attempts {
		m.T = append(m.T, float64(i+1))
		m.Intents = append(m.Intents, 85)
		errs := m.Attempts[i] - m.Served[i]
		m.Errors = append(m.Errors, errs)
		m.ErrorRate = append(m.ErrorRate, errs/m.Attempts[i])
	}
	b := baselineOf(m)
	on := onset(m, b)
	if on != 8 {
		t.Fatalf("onset %d, want 8 (the partial step)", on)
	}
	tr := infer(m, b, on, 111)
	if tr.Kind != scenario.TriggerOutage || tr.start != 8 || tr.end != 12 || !tr.Ended {
		t.Errorf("inferred %s from step %d to %d (ended %v), want an outage from 8 to 12, ended", tr.Kind, tr.start, tr.end, tr.Ended)
	}
}

// TestJudgeWindowNeverHealthy: a window that failed most of its attempts
// before the trigger had no health to recover to, and is never
// recovered, as the simulator judges its runs (sim.UnhealthyBaseline);
// one failing a tenth before and after recovers, as before.
func TestJudgeWindowNeverHealthy(t *testing.T) {
	for _, c := range []struct {
		rate          float64 // the error share at every step but the trigger's
		wantRecovered bool
		wantText      string
	}{
		{0.1, true, "after 0s"},
		{0.5, true, "after 0s"},
		{0.8, false, "never healthy"},
	} {
		const n = 40
		m := &Measured{Step: 1, Attempts: make([]float64, n), Errors: make([]float64, n), ErrorRate: make([]float64, n)}
		for k := range n {
			m.Attempts[k] = 100
			m.ErrorRate[k] = c.rate
			if k >= 10 && k < 15 {
				m.ErrorRate[k] = 1
			}
			m.Errors[k] = m.ErrorRate[k] * m.Attempts[k]
		}
		v := judgeWindow(m, Trigger{Ended: true, start: 10, end: 15})
		if v.Recovered != c.wantRecovered || v.NeverHealthy == c.wantRecovered || v.String() != c.wantText {
			t.Errorf("error share %g at rest: recovered %v, never healthy %v, %q; want recovered %v, %q", c.rate, v.Recovered, v.NeverHealthy, v.String(), c.wantRecovered, c.wantText)
		}
	}
}
