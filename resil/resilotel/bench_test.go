package resilotel

import (
	"context"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/retrystorm/retrystorm/resil"
	"github.com/retrystorm/retrystorm/resil/budget"
)

// BenchmarkDo measures a successful guarded call, side by side: no
// instruments, resilotel's metrics, and metrics with a recording span.
func BenchmarkDo(b *testing.B) {
	fn := func(context.Context) error { return nil }
	for _, c := range []string{"bare", "metrics", "metrics+span"} {
		b.Run(c, func(b *testing.B) {
			budget, _ := budget.NewTokenBucket(budget.TokenBucketSettings{Ratio: 0.1, Funding: budget.FundedByRequest, MinTokens: 10})
			g, _ := resil.NewGuard(resil.GuardSettings{Idempotency: resil.Idempotent, Policy: resil.Policy{MaxRetries: 3, Budget: budget}})
			ctx := context.Background()
			if c != "bare" {
				mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
				defer mp.Shutdown(ctx)
				inst, err := Instrument(g, Options{Name: "g", MeterProvider: mp})
				if err != nil {
					b.Fatal(err)
				}
				defer inst.Close()
			}
			if c == "metrics+span" {
				tp := sdktrace.NewTracerProvider()
				defer tp.Shutdown(ctx)
				var span trace.Span
				ctx, span = tp.Tracer("b").Start(ctx, "caller")
				defer span.End()
			}
			b.ReportAllocs()
			for b.Loop() {
				_ = g.Do(ctx, fn)
			}
		})
	}
}
