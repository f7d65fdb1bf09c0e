package resilotel

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/retrystorm/retrystorm/resil"
	"github.com/retrystorm/retrystorm/resil/admission"
	"github.com/retrystorm/retrystorm/resil/budget"
	"github.com/retrystorm/retrystorm/resil/resilprom"
)

// names gathers the resil_* metric names a registry exposes.
func names(t *testing.T, reg *prometheus.Registry) []string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), "resil_") {
			out = append(out, mf.GetName())
		}
	}
	slices.Sort(out)
	return out
}

// exported returns a meter provider whose reader is OpenTelemetry's
// Prometheus exporter on the registry returned, shut down when the test
// ends.
func exported(t *testing.T) (*prometheus.Registry, *sdkmetric.MeterProvider) {
	t.Helper()
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	return reg, mp
}

// TestSameVocabularyAsResilprom exports one Guard both ways: through
// resilprom, and through resilotel and OpenTelemetry's Prometheus exporter.
// Every name resilprom registers must come out of the exporter the same,
// but retries and hedges, which OpenTelemetry counts as attempts of a kind.
func TestSameVocabularyAsResilprom(t *testing.T) {
	budget, _ := budget.NewTokenBucket(budget.TokenBucketSettings{Ratio: 0.1, Funding: budget.FundedByRequest, MinTokens: 1})
	breaker, _ := resil.NewBreaker(resil.BreakerSettings{Threshold: 5})
	throttle, _ := resil.NewThrottler(resil.ThrottlerSettings{})
	g, _ := resil.NewGuard(resil.GuardSettings{Idempotency: resil.Idempotent,
		Policy: resil.Policy{MaxRetries: 1, Budget: budget, Breaker: breaker, Throttle: throttle}})

	preg := prometheus.NewRegistry()
	if _, err := resilprom.Register(preg, "g", g); err != nil {
		t.Fatal(err)
	}
	oreg, mp := exported(t)
	inst, err := Instrument(g, Options{Name: "g", MeterProvider: mp})
	if err != nil {
		t.Fatal(err)
	}
	defer inst.Close()
	g.Do(context.Background(), func(context.Context) error { return errBoom })

	fromProm, fromOTel := names(t, preg), names(t, oreg)
	t.Logf("resilprom: %v\nresilotel: %v", fromProm, fromOTel)
	for _, n := range fromProm {
		if n == "resil_retries_total" || n == "resil_hedges_total" {
			continue // resil_attempts_total{resil_attempt_kind="retry"|"hedge"}
		}
		if !slices.Contains(fromOTel, n) {
			t.Errorf("resilprom's %s is not exported by resilotel (it exports %v)", n, fromOTel)
		}
	}
	for _, n := range fromOTel {
		if !slices.Contains(fromProm, n) && n != "resil_breaker_trips_total" && n != "resil_breaker_transitions_total" {
			t.Errorf("resilotel exports %s, which resilprom does not name", n)
		}
	}
}

// TestShedderSameVocabularyAsResilprom: a Shedder exported through
// resilotel and OpenTelemetry's Prometheus exporter comes out under the
// names resilprom.RegisterShedder gives it, and no others.
func TestShedderSameVocabularyAsResilprom(t *testing.T) {
	lim, _ := admission.NewLimiter(admission.FixedLimit{Limit: 4})
	sh, _ := admission.NewShedder(admission.ShedderSettings{Limiter: lim})
	preg := prometheus.NewRegistry()
	if _, err := resilprom.RegisterShedder(preg, "s", sh); err != nil {
		t.Fatal(err)
	}
	oreg, mp := exported(t)
	inst, err := InstrumentShedder(sh, Options{Name: "s", MeterProvider: mp})
	if err != nil {
		t.Fatal(err)
	}
	defer inst.Close()
	fromProm, fromOTel := names(t, preg), names(t, oreg)
	t.Logf("resilprom: %v\nresilotel: %v", fromProm, fromOTel)
	if !slices.Equal(fromProm, fromOTel) {
		t.Errorf("resilprom exports %v, resilotel %v", fromProm, fromOTel)
	}
}
