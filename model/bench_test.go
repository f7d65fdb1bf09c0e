package model

import (
	"testing"

	"github.com/retrystorm/retrystorm/scenario"
)

// sweepScenario is the sweep experiment's scenario, read from its file.
func sweepScenario(tb testing.TB) *scenario.Scenario {
	tb.Helper()
	sc, err := scenario.Load("../experiment/scenarios/sweep.yaml")
	if err != nil {
		tb.Fatal(err)
	}
	return sc
}

// cell is the sweep's cell: the base load sets the capacity, the dip the
// capacity during the trigger (experiment.sweepCell, which this package
// cannot import).
func cell(base *scenario.Scenario, f scenario.Fleet, load, dip float64) *scenario.Scenario {
	c := *base
	c.Triggers = append([]scenario.Trigger(nil), base.Triggers...)
	c.Origin.Capacity = base.Traffic.Rate / load
	c.Triggers[0].Capacity = c.Origin.Capacity * (1 - dip)
	c.Fleets = []scenario.Fleet{f}
	return &c
}

// BenchmarkMap40 is a full 40 × 40 map of the sweep's grid for each of
// its two fleets, on one core: the target is under a second per
// map (BENCHMARKS.md):
//
//	go test -run '^$' -bench Map40 -cpu 1 -benchtime 5x ./model
func BenchmarkMap40(b *testing.B) {
	sc := sweepScenario(b)
	const n = 40
	for _, f := range sc.Fleets {
		b.Run(f.Name, func(b *testing.B) {
			for b.Loop() {
				_, err := Map(n, n, func(x, y int) (*Model, error) {
					load := 0.5 + 0.475*float64(x)/(n-1)
					dip := 0.05 + 0.95*float64(y)/(n-1)
					return New(cell(sc, f, load, dip), f)
				})
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n*n*b.N)/b.Elapsed().Seconds(), "cells/s")
		})
	}
}
