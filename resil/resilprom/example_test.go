package resilprom_test

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/retrystorm/retrystorm/resil"
	"github.com/retrystorm/retrystorm/resil/admission"
	"github.com/retrystorm/retrystorm/resil/resilprom"
)

// Register a guard's metrics on a registry of your own (here a fresh one;
// in a service, the one your /metrics handler serves).
func ExampleRegister() {
	g, _ := resil.NewGuard(resil.GuardSettings{})
	reg := prometheus.NewRegistry()
	if _, err := resilprom.Register(reg, "payments", g); err != nil {
		panic(err)
	}
	for range 3 {
		g.Do(context.Background(), func(context.Context) error { return nil })
	}
	n, _ := testutil.GatherAndCount(reg, "resil_intents_total", "resil_retries_per_request")
	fmt.Println(n, "series")
	// Output:
	// 2 series
}

// Register a server's Shedder: requests admitted and refused by reason,
// the concurrency limit, in flight and queued.
func ExampleRegisterShedder() {
	lim, _ := admission.NewLimiter(admission.AIMDLimit{})
	sh, _ := admission.NewShedder(admission.ShedderSettings{Limiter: lim})
	reg := prometheus.NewRegistry()
	if _, err := resilprom.RegisterShedder(reg, "origin", sh); err != nil {
		panic(err)
	}
	n, _ := testutil.GatherAndCount(reg, "resil_shed_refused_total", "resil_concurrency_limit")
	fmt.Println(n, "series")
	// Output:
	// 7 series
}
