package resilotel_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/retrystorm/retrystorm/resil"
	"github.com/retrystorm/retrystorm/resil/admission"
	"github.com/retrystorm/retrystorm/resil/budget"
	"github.com/retrystorm/retrystorm/resil/resilotel"
)

// Report a Guard's metrics on a meter provider of your own, and its
// decisions as events on the caller's span.
func ExampleInstrument() {
	budget, _ := budget.NewTokenBucket(budget.TokenBucketSettings{Ratio: 0.1, Funding: budget.FundedByRequest, MinTokens: 1})
	guard, _ := resil.NewGuard(resil.GuardSettings{Idempotency: resil.Idempotent,
		Policy: resil.Policy{MaxRetries: 3, Budget: budget}})

	reader := sdkmetric.NewManualReader()
	meters := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer meters.Shutdown(context.Background())
	spans := tracetest.NewSpanRecorder()
	tracer := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	defer tracer.Shutdown(context.Background())

	inst, err := resilotel.Instrument(guard, resilotel.Options{Name: "payments", MeterProvider: meters})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer inst.Close()

	ctx, span := tracer.Tracer("app").Start(context.Background(), "checkout")
	err = guard.Do(ctx, func(context.Context) error { return errors.New("connection refused") })
	span.End()
	fmt.Println(resilotel.Reason(err))

	var rm metricdata.ResourceMetrics
	reader.Collect(context.Background(), &rm)
	for _, m := range rm.ScopeMetrics[0].Metrics {
		if s, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == "resil.budget.denials" {
			fmt.Println(m.Name, m.Unit, s.DataPoints[0].Value)
		}
	}
	for _, e := range spans.Ended()[0].Events() {
		fmt.Println(e.Name)
	}
	// Output:
	// budget_exhausted
	// resil.budget.denials {attempt} 1
	// resil.attempt
	// resil.retry
	// resil.attempt
	// resil.retry_refused
	// resil.done
}

// Report a server's admission control: the requests a admission.Shedder
// admitted, and those it refused, by reason.
func ExampleInstrumentShedder() {
	limit, _ := admission.NewLimiter(admission.FixedLimit{Limit: 1})
	shedder, _ := admission.NewShedder(admission.ShedderSettings{Limiter: limit})

	reader := sdkmetric.NewManualReader()
	meters := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer meters.Shutdown(context.Background())
	inst, err := resilotel.InstrumentShedder(shedder, resilotel.Options{Name: "api", MeterProvider: meters})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer inst.Close()

	ctx := context.Background()
	ticket, _ := shedder.Admit(ctx, time.Time{})
	_, err = shedder.Admit(ctx, time.Time{}) // over the limit of one
	fmt.Println(err)
	shedder.Done(ticket, false)

	var rm metricdata.ResourceMetrics
	reader.Collect(context.Background(), &rm)
	for _, m := range rm.ScopeMetrics[0].Metrics {
		s, ok := m.Data.(metricdata.Sum[int64])
		if !ok {
			continue
		}
		for _, p := range s.DataPoints {
			if p.Value == 0 {
				continue
			}
			if reason, ok := p.Attributes.Value(resilotel.ShedReason); ok {
				fmt.Println(m.Name, p.Value, reason.AsString())
			} else {
				fmt.Println(m.Name, p.Value)
			}
		}
	}
	// Output:
	// resil: request shed: limit
	// resil.shed.admitted 1
	// resil.shed.refused 1 limit
}
