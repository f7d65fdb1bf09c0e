package scenario

import (
	"slices"
	"testing"
	"time"
)

func TestConditionsAt(t *testing.T) {
	s := &Scenario{
		Traffic: Traffic{Rate: 100},
		Origin:  Origin{Capacity: 120, ErrorRate: 0.1},
		Triggers: []Trigger{
			{Kind: TriggerCapacity, At: 10 * time.Second, For: 10 * time.Second, Capacity: 40},
			{Kind: TriggerCapacity, At: 15 * time.Second, For: 10 * time.Second, Capacity: 80},
			{Kind: TriggerErrors, At: 10 * time.Second, For: 5 * time.Second, ErrorRate: 0.5},
			{Kind: TriggerOutage, At: 30 * time.Second, For: time.Second},
			{Kind: TriggerLoad, At: 40 * time.Second, For: 10 * time.Second, Rate: 300},
			{Kind: TriggerLoad, At: 45 * time.Second, For: 10 * time.Second, Rate: 0},
			{Kind: TriggerLatency, At: 60 * time.Second, For: 10 * time.Second, Factor: 10, Replicas: 1},
			{Kind: TriggerLatency, At: 65 * time.Second, For: 10 * time.Second, Factor: 2},
			{Kind: TriggerOutage, At: 80 * time.Second, For: 10 * time.Second, Mode: OutageStall},
			{Kind: TriggerOutage, At: 85 * time.Second, For: 2 * time.Second, Mode: OutageRefuse},
		},
	}
	base := s.Base(3)
	for _, c := range []struct {
		at   time.Duration
		want Conditions
	}{
		{0, Conditions{Capacity: 120, ErrorRate: 0.1, Rate: 100, Factor: []float64{1, 1, 1}}},
		{10 * time.Second, Conditions{Capacity: 40, ErrorRate: 1 - 0.9*0.5, Rate: 100, Factor: []float64{1, 1, 1}}},
		{17 * time.Second, Conditions{Capacity: 40, ErrorRate: 0.1, Rate: 100, Factor: []float64{1, 1, 1}}},                                       // the lowest capacity wins
		{20 * time.Second, Conditions{Capacity: 80, ErrorRate: 0.1, Rate: 100, Factor: []float64{1, 1, 1}}},                                       // the first dip ended
		{30 * time.Second, Conditions{Capacity: 120, ErrorRate: 0.1, Outage: true, Mode: OutageBlackhole, Rate: 100, Factor: []float64{1, 1, 1}}}, // no mode reads as blackhole
		{46 * time.Second, Conditions{Capacity: 120, ErrorRate: 0.1, Rate: 0, Factor: []float64{1, 1, 1}}},                                        // the latest load change
		{66 * time.Second, Conditions{Capacity: 120, ErrorRate: 0.1, Rate: 100, Factor: []float64{20, 2, 2}}},                                     // factors multiply
		{80 * time.Second, Conditions{Capacity: 120, ErrorRate: 0.1, Outage: true, Mode: OutageStall, Rate: 100, Factor: []float64{1, 1, 1}}},
		{86 * time.Second, Conditions{Capacity: 120, ErrorRate: 0.1, Outage: true, Mode: OutageRefuse, Rate: 100, Factor: []float64{1, 1, 1}}}, // the latest outage's mode
		{88 * time.Second, Conditions{Capacity: 120, ErrorRate: 0.1, Outage: true, Mode: OutageStall, Rate: 100, Factor: []float64{1, 1, 1}}},
	} {
		got := At(base, s.Triggers, c.at)
		if got.Capacity != c.want.Capacity || got.ErrorRate != c.want.ErrorRate || got.Outage != c.want.Outage || got.Mode != c.want.Mode ||
			got.Rate != c.want.Rate || !slices.Equal(got.Factor, c.want.Factor) {
			t.Errorf("At(%v) = %+v, want %+v", c.at, got, c.want)
		}
	}
	if !slices.Equal(base.Factor, []float64{1, 1, 1}) {
		t.Errorf("At changed its base: %v", base.Factor)
	}
}
