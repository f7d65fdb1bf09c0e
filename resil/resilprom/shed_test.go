package resilprom

import (
	"context"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/retrystorm/retrystorm/resil"
	"github.com/retrystorm/retrystorm/resil/admission"
)

func TestThrottleMetrics(t *testing.T) {
	th, _ := resil.NewThrottler(resil.ThrottlerSettings{Rand: rand.NewPCG(1, 1)})
	g, _ := resil.NewGuard(resil.GuardSettings{Policy: resil.Policy{Throttle: th}})
	reg := prometheus.NewPedanticRegistry()
	if _, err := Register(reg, "api", g); err != nil {
		t.Fatal(err)
	}
	for range 20 {
		_ = g.Do(context.Background(), func(context.Context) error { return errBoom })
	}
	st := g.Stats()
	want := `
# HELP resil_throttle_refusals_total Attempts the adaptive throttle refused locally.
# TYPE resil_throttle_refusals_total counter
resil_throttle_refusals_total{name="api"} ` + strconv.FormatUint(st.ThrottleRefusals, 10) + `
# HELP resil_breaker_refusals_total Attempts the circuit breaker refused.
# TYPE resil_breaker_refusals_total counter
resil_breaker_refusals_total{name="api"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "resil_throttle_refusals_total", "resil_breaker_refusals_total"); err != nil {
		t.Fatal(err)
	}
	if st.ThrottleRefusals == 0 {
		t.Fatal("nothing throttled")
	}
	p := testutil.ToFloat64(onlyMetric(t, reg, "resil_throttle_probability"))
	if p <= 0.5 || p >= 1 {
		t.Errorf("throttle probability %v", p)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %v", problems, err)
	}
	// A guard without a throttler has no probability gauge.
	g2, _ := resil.NewGuard(resil.GuardSettings{})
	reg2 := prometheus.NewPedanticRegistry()
	Register(reg2, "plain", g2)
	if n, _ := testutil.GatherAndCount(reg2, "resil_throttle_probability"); n != 0 {
		t.Errorf("%d probability series without a throttler", n)
	}
}

func TestShedderMetrics(t *testing.T) {
	lim, _ := admission.NewLimiter(admission.FixedLimit{Limit: 1})
	sh, _ := admission.NewShedder(admission.ShedderSettings{Limiter: lim, Deadline: admission.DeadlineSettings{ServiceTime: 250 * time.Millisecond}})
	reg := prometheus.NewPedanticRegistry()
	c, err := RegisterShedder(reg, "origin", sh)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	tk, _ := sh.Admit(ctx, time.Time{})
	sh.Admit(ctx, time.Time{})                          // limit
	sh.Admit(ctx, time.Now().Add(-time.Second))         // expired
	sh.Admit(ctx, time.Now().Add(100*time.Millisecond)) // too late: sooner than the 250 ms service time
	want := `
# HELP resil_shed_admitted_total Requests the server admitted.
# TYPE resil_shed_admitted_total counter
resil_shed_admitted_total{name="origin"} 1
# HELP resil_shed_refused_total Requests the server refused before their work, by reason.
# TYPE resil_shed_refused_total counter
resil_shed_refused_total{name="origin",reason="caller_left"} 0
resil_shed_refused_total{name="origin",reason="expired"} 1
resil_shed_refused_total{name="origin",reason="limit"} 1
resil_shed_refused_total{name="origin",reason="queue_full"} 0
resil_shed_refused_total{name="origin",reason="queue_timeout"} 0
resil_shed_refused_total{name="origin",reason="too_late"} 1
# HELP resil_shed_dropped_total Admitted requests that ended dropped: their deadline passed while they ran.
# TYPE resil_shed_dropped_total counter
resil_shed_dropped_total{name="origin"} 0
# HELP resil_shed_inflight Requests admitted and not yet ended.
# TYPE resil_shed_inflight gauge
resil_shed_inflight{name="origin"} 1
# HELP resil_shed_queued Requests waiting for a slot under the concurrency limit.
# TYPE resil_shed_queued gauge
resil_shed_queued{name="origin"} 0
# HELP resil_concurrency_limit The concurrency limit now.
# TYPE resil_concurrency_limit gauge
resil_concurrency_limit{name="origin"} 1
# HELP resil_shed_service_time_seconds The service-time estimate the deadline checks use.
# TYPE resil_shed_service_time_seconds gauge
resil_shed_service_time_seconds{name="origin"} 0.25
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
	sh.Done(tk, true)
	if got := testutil.ToFloat64(onlyMetric(t, reg, "resil_shed_dropped_total")); got != 1 {
		t.Errorf("dropped = %v", got)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %v", problems, err)
	}
	if _, err := RegisterShedder(reg, "origin", sh); err == nil {
		t.Error("duplicate registration accepted")
	}
	if _, err := RegisterShedder(reg, "", sh); err == nil {
		t.Error("empty name accepted")
	}
	if _, err := RegisterShedder(nil, "x", sh); err == nil {
		t.Error("nil registerer accepted")
	}
	if !c.Unregister() {
		t.Error("Unregister")
	}
	// Without a limiter there is no limit gauge.
	sh2, _ := admission.NewShedder(admission.ShedderSettings{})
	reg2 := prometheus.NewPedanticRegistry()
	RegisterShedder(reg2, "plain", sh2)
	if n, _ := testutil.GatherAndCount(reg2, "resil_concurrency_limit"); n != 0 {
		t.Errorf("%d limit series without a limiter", n)
	}
}

// onlyMetric gathers reg and returns a collector of the one series named
// name, for testutil.ToFloat64.
func onlyMetric(t *testing.T, reg *prometheus.Registry, name string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			m := mf.GetMetric()[0]
			v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
			g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "x"})
			g.Set(v)
			return g
		}
	}
	t.Fatalf("no single series %s", name)
	return nil
}
