package lab

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/resil/budget"
	"github.com/retrystorm/retrystorm/scenario"
)

// rates are the float fields of a scenario that are per second: Scale
// divides them. Every other float is a count or a share and stays.
var rates = map[string]bool{
	"Traffic.Rate": true, "Traffic.Ramp.From": true, "Origin.Capacity": true,
	"Triggers.Capacity": true, "Triggers.Rate": true,
	"Fleets.Budget.Window.MinRetriesPerSecond": true, "Fleets.Budget.Pacer.MinFillRate": true,
	"Tiers.Server.Capacity":                          true,
	"Tiers.Client.Budget.Window.MinRetriesPerSecond": true, "Tiers.Client.Budget.Pacer.MinFillRate": true,
}

// perSecond4 are the float fields in rate per second cubed (CUBIC's C:
// a rate that grows with the cube of time): Scale divides them by f⁴.
var perSecond4 = map[string]bool{"Fleets.Budget.Pacer.ScaleConstant": true, "Tiers.Client.Budget.Pacer.ScaleConstant": true}

// notRates are the float fields Scale must leave alone. A float field in
// neither list fails the test: decide which it is.
var notRates = map[string]bool{
	"Traffic.Idempotent": true, "Traffic.Keys": true,
	"Origin.RejectionCost": true, "Origin.ErrorRate": true, "Origin.Broken": true,
	"Triggers.ErrorRate": true, "Triggers.Factor": true,
	"Fleets.Retry.Backoff.Multiplier": true, "Fleets.Retry.Backoff.Factor": true,
	"Fleets.Budget.TokenBucket.Ratio": true, "Fleets.Budget.TokenBucket.MinTokens": true, "Fleets.Budget.TokenBucket.MaxTokens": true,
	"Fleets.Budget.TokenBucket.RetryCost": true, "Fleets.Budget.TokenBucket.TimeoutCost": true, "Fleets.Budget.Window.Ratio": true,
	"Fleets.Budget.Window.RetryCost": true, "Fleets.Budget.Window.TimeoutCost": true, "Fleets.Budget.GRPC.MaxTokens": true,
	"Fleets.Budget.GRPC.TokenRatio": true, "Fleets.Budget.Pacer.RequestCost": true,
	"Fleets.Breaker.FailureRate": true, "Fleets.Breaker.SlowCallRate": true,
	"Fleets.Budget.Concurrency.Percent": true, "Fleets.Budget.Pacer.Beta": true, "Fleets.Budget.Pacer.Smoothing": true,
	// A limit's factors and its headroom (requests) have no unit of time.
	"Origin.Limit.Backoff": true, "Origin.Limit.Smoothing": true, "Origin.Limit.Tolerance": true, "Origin.Limit.Headroom": true,
	"Fleets.Throttle.ThrottlerSettings.K": true, "Fleets.Throttle.ThrottlerSettings.Padding": true, "Fleets.Throttle.ThrottlerSettings.MaxProbability": true,
	"Tiers.Server.RejectionCost": true, "Tiers.Server.ErrorRate": true, "Tiers.Server.Broken": true,
	"Tiers.Client.Retry.Backoff.Multiplier": true, "Tiers.Client.Retry.Backoff.Factor": true,
	"Tiers.Client.Budget.TokenBucket.Ratio": true, "Tiers.Client.Budget.TokenBucket.MinTokens": true, "Tiers.Client.Budget.TokenBucket.MaxTokens": true,
	"Tiers.Client.Budget.TokenBucket.RetryCost": true, "Tiers.Client.Budget.TokenBucket.TimeoutCost": true, "Tiers.Client.Budget.Window.Ratio": true,
	"Tiers.Client.Budget.Window.RetryCost": true, "Tiers.Client.Budget.Window.TimeoutCost": true, "Tiers.Client.Budget.GRPC.MaxTokens": true,
	"Tiers.Client.Budget.GRPC.TokenRatio": true, "Tiers.Client.Budget.Pacer.RequestCost": true,
	"Tiers.Client.Breaker.FailureRate": true, "Tiers.Client.Breaker.SlowCallRate": true,
	"Tiers.Client.Budget.Concurrency.Percent": true, "Tiers.Client.Budget.Pacer.Beta": true, "Tiers.Client.Budget.Pacer.Smoothing": true,
	// A service time's shape: its spread and its buckets' shares.
	"Origin.ServiceTime.Sigma": true, "Origin.ServiceTime.Buckets.Fraction": true,
	"Tiers.Server.ServiceTime.Sigma": true, "Tiers.Server.ServiceTime.Buckets.Fraction": true,
	// A replica's fault is a factor or a share; so is the outlier
	// detector's stdev factor.
	"Origin.Faults.Factor": true, "Origin.Faults.ErrorRate": true,
	"Tiers.Server.Faults.Factor": true, "Tiers.Server.Faults.ErrorRate": true,
	"Fleets.OutlierDetection.Settings.SuccessRateStdevFactor": true, "Tiers.Client.OutlierDetection.Settings.SuccessRateStdevFactor": true,
	"Tiers.Server.Limit.Backoff": true, "Tiers.Server.Limit.Smoothing": true, "Tiers.Server.Limit.Tolerance": true, "Tiers.Server.Limit.Headroom": true,
	// The latency's growth with load is a factor of utilization; a
	// burst's size is a count (its span is scaled), a CPU cut a share.
	"Origin.LoadLatency.Factor": true, "Origin.LoadLatency.Exponent": true,
	"Tiers.Server.LoadLatency.Factor": true, "Tiers.Server.LoadLatency.Exponent": true,
	"Triggers.Count": true, "Triggers.Share": true,
}

// fill sets every duration and float field reachable from v to a value of
// its own, and returns the paths it set.
func fill(v reflect.Value, path string, n *int) {
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			f := v.Type().Field(i)
			fill(v.Field(i), strings.TrimPrefix(path+"."+f.Name, "."), n)
		}
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(v.Index(0), path, n)
	case reflect.Int64:
		if v.Type() == reflect.TypeFor[time.Duration]() {
			*n++
			v.SetInt(int64(*n) * int64(time.Second))
		}
	case reflect.Float64:
		*n++
		v.SetFloat(float64(*n))
	}
}

// walk calls f on every duration and float field of a and b side by side.
func walk(a, b reflect.Value, path string, f func(path string, a, b reflect.Value)) {
	switch a.Kind() {
	case reflect.Struct:
		for i := range a.NumField() {
			walk(a.Field(i), b.Field(i), strings.TrimPrefix(path+"."+a.Type().Field(i).Name, "."), f)
		}
	case reflect.Slice:
		for i := range a.Len() {
			walk(a.Index(i), b.Index(i), path, f)
		}
	case reflect.Int64, reflect.Float64:
		f(path, a, b)
	}
}

// TestScaleEveryField scales every duration and every rate of a scenario,
// and nothing else: a field added to the scenario later is caught here.
func TestScaleEveryField(t *testing.T) {
	var sc scenario.Scenario
	n := 0
	fill(reflect.ValueOf(&sc).Elem(), "", &n)
	const f = 0.1
	got := Scale(&sc, f)
	walk(reflect.ValueOf(sc), reflect.ValueOf(*got), "", func(path string, a, b reflect.Value) {
		switch {
		case a.Type() == reflect.TypeFor[time.Duration]():
			if want := time.Duration(float64(a.Int()) * f); time.Duration(b.Int()) != want {
				t.Errorf("%s: %v scaled to %v, want %v", path, time.Duration(a.Int()), time.Duration(b.Int()), want)
			}
		case a.Kind() == reflect.Float64 && rates[path]:
			if want := a.Float() / f; b.Float() != want {
				t.Errorf("%s (a rate): %g scaled to %g, want %g", path, a.Float(), b.Float(), want)
			}
		case a.Kind() == reflect.Float64 && perSecond4[path]:
			x := float64(f) // a variable, as in Scale: a constant would fold exactly
			if want := a.Float() / (x * x * x * x); b.Float() != want {
				t.Errorf("%s (per second⁴): %g scaled to %g, want %g", path, a.Float(), b.Float(), want)
			}
		case a.Kind() == reflect.Float64 && notRates[path]:
			if b.Float() != a.Float() {
				t.Errorf("%s (not a rate): %g changed to %g", path, a.Float(), b.Float())
			}
		case a.Kind() == reflect.Float64:
			t.Errorf("%s: a float field Scale does not know; add it to rates or notRates (and to Scale if it is a rate)", path)
		}
	})
	if &got.Fleets[0] == &sc.Fleets[0] || &got.Triggers[0] == &sc.Triggers[0] || &got.Origin.ServiceTime.Buckets[0] == &sc.Origin.ServiceTime.Buckets[0] {
		t.Error("Scale shares its input's slices")
	}
}

// TestScaleDefaults writes out the defaults resil would read in real
// seconds, so they scale too.
func TestScaleDefaults(t *testing.T) {
	sc := &scenario.Scenario{Tick: time.Second, Duration: time.Minute, Fleets: []scenario.Fleet{{
		Breaker: scenario.Breaker{Use: scenario.BreakerConsecutive, Threshold: 3},
		Budget:  scenario.Budget{Use: scenario.BudgetWindow, Window: budget.WindowSettings{Ratio: 0.1}},
	}}}
	got := Scale(sc, 0.1)
	if c := got.Fleets[0].Breaker.Cooldown; c != 500*time.Millisecond {
		t.Errorf("cooldown = %v, want 500ms (5s scaled)", c)
	}
	if ttl := got.Fleets[0].Budget.Window.TTL; ttl != time.Second {
		t.Errorf("ttl = %v, want 1s (10s scaled)", ttl)
	}
	if sc.Fleets[0].Breaker.Cooldown != 0 {
		t.Error("Scale changed its input")
	}
	// The outlier detector's and the EWMA picker's (resil/outlier,
	// resil/balance: 10s, 30s, 300s; 10s, 30ms).
	sc.Fleets[0].OutlierDetection.Use = scenario.OutlierEnvoy
	sc.Fleets[0].Balancer.Use = scenario.BalancerEWMA
	got = Scale(sc, 0.1)
	od, b := got.Fleets[0].OutlierDetection.Settings, got.Fleets[0].Balancer
	if od.Interval != time.Second || od.BaseEjectionTime != 3*time.Second || od.MaxEjectionTime != 30*time.Second {
		t.Errorf("outlier detection: interval %v, base ejection %v, max ejection %v; want 1s, 3s, 30s", od.Interval, od.BaseEjectionTime, od.MaxEjectionTime)
	}
	if b.Decay != time.Second || b.DefaultRTT != 3*time.Millisecond {
		t.Errorf("ewma: decay %v, default rtt %v; want 1s, 3ms", b.Decay, b.DefaultRTT)
	}
}
