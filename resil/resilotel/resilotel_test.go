package resilotel

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/goleak"

	"github.com/retrystorm/retrystorm/resil"
	"github.com/retrystorm/retrystorm/resil/budget"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var errBoom = errors.New("boom")

const ms = time.Millisecond

// collect reads every resil metric from the reader, by name.
func collect(t *testing.T, r *sdkmetric.ManualReader) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != ScopeName {
			continue
		}
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

// value returns the data point of m whose attributes include kv (all of
// them when kv is empty).
func value(t *testing.T, m metricdata.Metrics, kv ...attribute.KeyValue) float64 {
	t.Helper()
	match := func(s attribute.Set) bool {
		for _, x := range kv {
			if v, ok := s.Value(x.Key); !ok || v != x.Value {
				return false
			}
		}
		return true
	}
	switch d := m.Data.(type) {
	case metricdata.Sum[int64]:
		for _, p := range d.DataPoints {
			if match(p.Attributes) {
				return float64(p.Value)
			}
		}
	case metricdata.Gauge[int64]:
		for _, p := range d.DataPoints {
			if match(p.Attributes) {
				return float64(p.Value)
			}
		}
	case metricdata.Gauge[float64]:
		for _, p := range d.DataPoints {
			if match(p.Attributes) {
				return p.Value
			}
		}
	case metricdata.Histogram[float64]:
		for _, p := range d.DataPoints {
			if match(p.Attributes) {
				return float64(p.Count)
			}
		}
	}
	t.Fatalf("%s has no point with %v", m.Name, kv)
	return 0
}

// TestMetrics drives a Guard through successes, retries, a budget denial
// and a breaker trip, and reads every instrument back from the SDK's
// in-memory reader.
func TestMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		budget, _ := budget.NewTokenBucket(budget.TokenBucketSettings{Ratio: 0.1, Funding: budget.FundedByRequest, MinTokens: 2})
		breaker, _ := resil.NewBreaker(resil.BreakerSettings{Threshold: 3, Cooldown: time.Minute})
		g, err := resil.NewGuard(resil.GuardSettings{Idempotency: resil.Idempotent,
			Policy: resil.Policy{MaxRetries: 3, Budget: budget, Breaker: breaker,
				Backoff: resil.Backoff{Schedule: resil.Fixed, Base: 10 * ms}}})
		if err != nil {
			t.Fatal(err)
		}
		reader := sdkmetric.NewManualReader()
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
		defer mp.Shutdown(context.Background())
		inst, err := Instrument(g, Options{Name: "origin", MeterProvider: mp,
			Attributes: []attribute.KeyValue{attribute.String("tier", "edge")}})
		if err != nil {
			t.Fatal(err)
		}
		defer inst.Close()

		ctx := context.Background()
		for range 3 {
			g.Do(ctx, func(context.Context) error { time.Sleep(20 * ms); return nil })
		}
		// Fails throughout: two retries paid from 2.4 tokens, then the
		// budget refuses; the three failures in a row trip the breaker.
		g.Do(ctx, func(context.Context) error { time.Sleep(5 * ms); return errBoom })
		g.Do(ctx, func(context.Context) error { return nil }) // refused: open

		m := collect(t, reader)
		name := attribute.String("resil.guard.name", "origin")
		for _, c := range []struct {
			metric string
			kv     []attribute.KeyValue
			want   float64
		}{
			{"resil.intents", nil, 5},
			{"resil.attempts", []attribute.KeyValue{AttemptKind.String("first")}, 4},
			{"resil.attempts", []attribute.KeyValue{AttemptKind.String("retry")}, 2},
			{"resil.attempts", []attribute.KeyValue{AttemptKind.String("hedge")}, 0},
			{"resil.failures", nil, 2},
			{"resil.budget.denials", nil, 1},
			{"resil.breaker.refusals", nil, 1},
			{"resil.fallbacks", nil, 0},
			{"resil.breaker.trips", nil, 1},
			{"resil.breaker.transitions", nil, 1},
			{"resil.breaker.state", nil, 1},
			{"resil.retries_per_request", nil, 0.4},
			{"resil.attempt.duration", []attribute.KeyValue{AttemptKind.String("first"), AttemptOutcome.String("success")}, 3},
			{"resil.attempt.duration", []attribute.KeyValue{AttemptKind.String("retry"), AttemptOutcome.String("failure")}, 2},
		} {
			got, ok := m[c.metric]
			if !ok {
				t.Errorf("no %s", c.metric)
				continue
			}
			kv := append([]attribute.KeyValue{name, attribute.String("tier", "edge")}, c.kv...)
			if v := value(t, got, kv...); v < c.want-1e-9 || v > c.want+1e-9 {
				t.Errorf("%s%v = %v, want %v", c.metric, c.kv, v, c.want)
			}
		}
		if v := value(t, m["resil.budget.tokens"], name); v < 0.399 || v > 0.401 {
			t.Errorf("budget tokens %v, want 0.4 (2 + 4 deposits of 0.1 - 2 retries)", v)
		}
		h := m["resil.attempt.duration"].Data.(metricdata.Histogram[float64])
		for _, p := range h.DataPoints {
			if k, _ := p.Attributes.Value(AttemptKind); k.AsString() == "first" {
				if o, _ := p.Attributes.Value(AttemptOutcome); o.AsString() == "success" && (p.Sum < 0.0599 || p.Sum > 0.0601) {
					t.Errorf("three first attempts of 20ms sum to %vs", p.Sum)
				}
			}
		}
		for metric, unit := range map[string]string{"resil.intents": "{intent}", "resil.attempts": "{attempt}",
			"resil.attempt.duration": "s", "resil.breaker.state": "{state}", "resil.budget.tokens": "{token}"} {
			if m[metric].Unit != unit {
				t.Errorf("%s unit %q, want %q", metric, m[metric].Unit, unit)
			}
		}
	})
}

// TestSpanEvents: each decision of a call is an event on the caller's
// span, with the attempt number, kind, outcome and why a retry was refused.
func TestSpanEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		budget, _ := budget.NewTokenBucket(budget.TokenBucketSettings{Ratio: 0.1, Funding: budget.FundedByRequest, MinTokens: 1})
		g, _ := resil.NewGuard(resil.GuardSettings{Idempotency: resil.Idempotent,
			Policy: resil.Policy{MaxRetries: 3, Budget: budget, Backoff: resil.Backoff{Schedule: resil.Fixed, Base: 10 * ms}}})
		rec := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
		defer tp.Shutdown(context.Background())
		reader := sdkmetric.NewManualReader()
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
		defer mp.Shutdown(context.Background())
		inst, err := Instrument(g, Options{Name: "g", MeterProvider: mp})
		if err != nil {
			t.Fatal(err)
		}
		defer inst.Close()

		ctx, span := tp.Tracer("test").Start(context.Background(), "caller")
		err = g.Do(ctx, func(context.Context) error { return errBoom })
		span.End()
		if !errors.Is(err, resil.ErrBudgetExhausted) {
			t.Fatalf("err %v", err)
		}
		spans := rec.Ended()
		if len(spans) != 1 {
			t.Fatalf("%d spans: the attempts must be events, not spans", len(spans))
		}
		var got []string
		for _, e := range spans[0].Events() {
			s := e.Name
			for _, a := range e.Attributes {
				s += fmt.Sprintf(" %s=%s", a.Key, a.Value.Emit())
			}
			got = append(got, s)
		}
		want := []string{
			"resil.attempt resil.attempt.number=1 resil.attempt.kind=first resil.attempt.outcome=failure resil.attempt.duration=0",
			"resil.retry resil.attempt.number=2 resil.retry.wait=0.01",
			"resil.attempt resil.attempt.number=2 resil.attempt.kind=retry resil.attempt.outcome=failure resil.attempt.duration=0",
			"resil.retry_refused resil.attempt.kind=retry resil.attempt.number=3 resil.refusal.reason=budget_exhausted",
			"resil.done resil.refusal.reason=budget_exhausted resil.attempts=2",
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("events:\n%s\nwant:\n%s", join(got), join(want))
		}
		// A call without a recording span costs no event and no panic.
		g.Do(context.Background(), func(context.Context) error { return nil })
	})
}

func join(s []string) string {
	out := ""
	for _, x := range s {
		out += "  " + x + "\n"
	}
	return out
}

func TestReason(t *testing.T) {
	for err, want := range map[error]string{
		&resil.StopError{Reason: resil.ErrRetriesExhausted, Last: context.DeadlineExceeded}: "retries_exhausted",
		&resil.StopError{Reason: context.Canceled, Last: errBoom}:                           "canceled",
		resil.ErrTooManyProbes:                                      "breaker_open",
		fmt.Errorf("x: %w", resil.ErrNoTimeLeft):                    "no_time_left",
		&resil.StopError{Reason: resil.ErrPushback}:                 "pushback",
		&resil.StopError{Reason: resil.ErrThrottled, Last: errBoom}: "throttled",
		errBoom: "error",
	} {
		if got := Reason(err); got != want {
			t.Errorf("Reason(%v) = %q, want %q", err, got, want)
		}
	}
}

// TestOptions: a meter provider is required unless the global one is
// asked for; Close stops every report.
func TestOptions(t *testing.T) {
	g, _ := resil.NewGuard(resil.GuardSettings{})
	if _, err := Instrument(g, Options{Name: "g"}); err == nil {
		t.Error("no MeterProvider, and Global not asked: accepted")
	}
	if _, err := Instrument(g, Options{MeterProvider: otel.GetMeterProvider()}); err == nil {
		t.Error("no Name: accepted")
	}
	if _, err := Instrument(nil, Options{Name: "g", Global: true}); err == nil {
		t.Error("no Guard: accepted")
	}
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	prev := otel.GetMeterProvider()
	otel.SetMeterProvider(mp)
	defer otel.SetMeterProvider(prev)
	inst, err := Instrument(g, Options{Name: "g", Global: true})
	if err != nil {
		t.Fatal(err)
	}
	g.Do(context.Background(), func(context.Context) error { return nil })
	if m := collect(t, reader); len(m) == 0 {
		t.Fatal("nothing reported through the global provider")
	}
	if err := inst.Close(); err != nil {
		t.Fatal(err)
	}
	g.Do(context.Background(), func(context.Context) error { return nil })
	m := collect(t, reader)
	if _, ok := m["resil.intents"]; ok {
		t.Error("resil.intents still reported after Close")
	}
}
