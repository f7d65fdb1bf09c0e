package calibrate_test

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/calibrate"
	"github.com/retrystorm/retrystorm/internal/promtest"
	"github.com/retrystorm/retrystorm/internal/servertest"
	"github.com/retrystorm/retrystorm/internal/testlock"
	"github.com/retrystorm/retrystorm/lab"
	"github.com/retrystorm/retrystorm/scenario"
)

// TestRealHAProxy calibrates HAProxy, scraped through its built-in
// exporter (promex) by a real Prometheus, in front of a service of known
// capacity: a Lua service inside the same HAProxy that takes 20 ms a
// request, 12 at a time (server maxconn 12): 600 requests a second, as
// docs/lab.md sets it up. 300 intents a second, with a burst to 900 for
// 2 s that fills HAProxy's queue.
func TestRealHAProxy(t *testing.T) {
	t.Parallel() // see realTimeParallel
	prom := promtest.Bin(t, "the real-HAProxy test takes about 30 s")
	hap := servertest.Need(t, "haproxy", "haproxy")
	// The lock is TestMain's.
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second) // up to testlock.Tries runs
	defer cancel()

	front, stats := servertest.StartHAProxy(t, ctx, servertest.HAProxy{Bin: hap, Service: 20 * time.Millisecond, Maxconn: 12, Queue: 5 * time.Second, Exporter: true})
	promURL := promtest.Start(t, ctx, prom, promtest.Static(stats))

	sc, err := scenario.Parse("haproxy.yaml", []byte(`
duration: 30s
traffic: {rate: 300, arrivals: constant, clients: 1}
origin: {model: queue, capacity: 600, workers: 12}
triggers: [{kind: load, at: 10s, for: 2s, rate: 900}]
fleets: [{name: f, timeout: 5s, budget: {use: none}}]
`))
	if err != nil {
		t.Fatal(err)
	}
	// A load generator that could not keep its schedule measured the
	// machine: the run is run again (HAProxy's queue drains in the 3 s at
	// rest before each).
	var begin, end time.Time
	testlock.Conclusive(t, func(int) string {
		begin = time.Now()
		time.Sleep(3 * time.Second)
		stats0, err := lab.RunLoad(ctx, lab.LoadConfig{Target: mustURL(t, "http://"+front+"/"), Traffic: sc.Traffic, Triggers: sc.Triggers,
			Tick: time.Second, Duration: 20 * time.Second, Deadline: 6 * time.Second, ClearAt: -1, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("load: %+v", stats0)
		if stats0.LateP99 > maxLate {
			return fmt.Sprintf("the load generator sent its intents up to %.0fms late (p99; at most %.0fms): the machine is too busy", 1000*stats0.LateP99, 1000*maxLate)
		}
		time.Sleep(2500 * time.Millisecond)
		end = time.Now()
		return ""
	})
	sel, _ := calibrate.ParseSelector(`{proxy="origin"}`)
	src, _ := calibrate.SourceNamed("haproxy")
	w, err := calibrate.Fetch(ctx, calibrate.Live{URL: promURL, Start: begin.Add(3 * time.Second), End: end.Add(-2 * time.Second), Step: time.Second, Selector: sel, Source: src, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	r, err := calibrate.Fit(w, src)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		what      string
		got, want float64
		tol       float64
	}{
		{"capacity", r.Capacity.V, 600, 0.10},
		{"median service time", r.Service.Median, 0.020, 0.10},
		{"base rate", r.Rate.V, 300, 0.05},
		{"workers", r.Workers.V, 12, 0},
	} {
		off := math.Abs(c.got-c.want) / c.want
		t.Logf("%-20s calibrated %-10.4g truth %-10.4g off %.1f%%", c.what, c.got, c.want, 100*off)
		if off > c.tol+1e-9 {
			t.Errorf("%s: calibrated %g, truth %g: off by %.1f%%, more than %.0f%%", c.what, c.got, c.want, 100*off, 100*c.tol)
		}
	}
	t.Logf("service: %s", r.ServiceNte)
	t.Logf("workers: %s", r.Workers.Note)
}
