package outlier_test

import (
	"fmt"
	"time"

	"github.com/retrystorm/retrystorm/resil/outlier"
)

// Envoy's 2023 change, on the issue's case: three hosts, two failing,
// max_ejection_percent 67. Before it, the share was checked before each
// ejection; today after it.
func Example() {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, rule := range []outlier.MaxEjectionRule{outlier.CheckBefore, outlier.CheckAfter} {
		s := outlier.EnvoyDefaults(3)
		s.MaxEjectionPercent = 67
		s.MaxEjectionRule = rule
		d, err := outlier.New(s)
		if err != nil {
			panic(err)
		}
		for host := 0; host < 3; host++ { // all three fail
			for i := 0; i < 5; i++ {
				d.Record(start, host, outlier.FromHTTPStatus(500))
			}
		}
		fmt.Printf("%s: %d of 3 ejected, panic mode %v\n", rule, d.EjectedCount(),
			outlier.Panic(3-d.EjectedCount(), 3, 50))
	}
	// Output:
	// before: 3 of 3 ejected, panic mode true
	// after: 2 of 3 ejected, panic mode true
}

// An ejection lasts base_ejection_time × the number of recent ejections,
// and the host comes back at the first evaluation after that.
func ExampleDetector_Advance() {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := outlier.EnvoyDefaults(10) // interval 10s, base 30s, 10%
	d, _ := outlier.New(s)
	d.Advance(start)
	for i := 0; i < 5; i++ {
		d.Record(start.Add(5*time.Second), 0, outlier.Error5xx)
	}
	for _, sec := range []int{5, 30, 35, 40} {
		d.Advance(start.Add(time.Duration(sec) * time.Second))
		fmt.Printf("%2ds: host 0 ejected %v\n", sec, d.Ejected(0))
	}
	// Output:
	//  5s: host 0 ejected true
	// 30s: host 0 ejected true
	// 35s: host 0 ejected true
	// 40s: host 0 ejected false
}
