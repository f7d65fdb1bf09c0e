package resilotel

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/retrystorm/retrystorm/resil/admission"
)

// TestShedderMetrics admits one request up to a limit of one, refuses the
// next, sheds one whose deadline has passed, ends the first dropped, and
// reads every instrument back from the SDK's in-memory reader.
func TestShedderMetrics(t *testing.T) {
	lim, err := admission.NewLimiter(admission.FixedLimit{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	sh, err := admission.NewShedder(admission.ShedderSettings{Limiter: lim,
		Deadline: admission.DeadlineSettings{ServiceTime: 20 * ms}})
	if err != nil {
		t.Fatal(err)
	}
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	inst, err := InstrumentShedder(sh, Options{Name: "api", MeterProvider: mp,
		Attributes: []attribute.KeyValue{attribute.String("tier", "edge")}})
	if err != nil {
		t.Fatal(err)
	}
	defer inst.Close()

	ctx := context.Background()
	first, err := sh.Admit(ctx, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sh.Admit(ctx, time.Time{}); err == nil {
		t.Fatal("a second request was admitted over a limit of one")
	}
	if _, err := sh.Admit(ctx, time.Now().Add(-time.Second)); err == nil {
		t.Fatal("a request past its deadline was admitted")
	}
	m := collect(t, reader)
	name, tier := ShedderName.String("api"), attribute.String("tier", "edge")
	for _, c := range []struct {
		metric string
		kv     []attribute.KeyValue
		want   float64
	}{
		{"resil.shed.admitted", nil, 1},
		{"resil.shed.refused", []attribute.KeyValue{ShedReason.String("limit")}, 1},
		{"resil.shed.refused", []attribute.KeyValue{ShedReason.String("expired")}, 1},
		{"resil.shed.refused", []attribute.KeyValue{ShedReason.String("queue_full")}, 0},
		{"resil.shed.inflight", nil, 1},
		{"resil.concurrency_limit", nil, 1},
		{"resil.shed.service_time", nil, 0.02},
	} {
		got, ok := m[c.metric]
		if !ok {
			t.Errorf("no %s", c.metric)
			continue
		}
		if v := value(t, got, append([]attribute.KeyValue{name, tier}, c.kv...)...); v < c.want-1e-9 || v > c.want+1e-9 {
			t.Errorf("%s%v = %v, want %v", c.metric, c.kv, v, c.want)
		}
	}
	sh.Done(first, true)
	m = collect(t, reader)
	if v := value(t, m["resil.shed.dropped"], name); v != 1 {
		t.Errorf("dropped %v, want 1", v)
	}
	if v := value(t, m["resil.shed.inflight"], name); v != 0 {
		t.Errorf("in flight %v after Done, want 0", v)
	}
	for metric, unit := range map[string]string{"resil.shed.admitted": "{request}", "resil.shed.service_time": "s"} {
		if m[metric].Unit != unit {
			t.Errorf("%s unit %q, want %q", metric, m[metric].Unit, unit)
		}
	}
	if err := inst.Close(); err != nil {
		t.Fatal(err)
	}
	if m := collect(t, reader); len(m) != 0 {
		t.Errorf("after Close the reader still sees %d metrics", len(m))
	}
}

func TestInstrumentShedderNeeds(t *testing.T) {
	sh, _ := admission.NewShedder(admission.ShedderSettings{})
	mp := sdkmetric.NewMeterProvider()
	defer mp.Shutdown(context.Background())
	for _, c := range []struct {
		s *admission.Shedder
		o Options
	}{
		{nil, Options{Name: "x", MeterProvider: mp}},
		{sh, Options{MeterProvider: mp}},
		{sh, Options{Name: "x"}},
	} {
		if _, err := InstrumentShedder(c.s, c.o); err == nil {
			t.Errorf("InstrumentShedder(%v, %+v) made instruments", c.s, c.o)
		}
	}
}
