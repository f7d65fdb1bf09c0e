package resilprom_test

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/retrystorm/retrystorm/resil"
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
