package balance_test

import (
	"fmt"
	"time"

	"github.com/retrystorm/retrystorm/resil"
	"github.com/retrystorm/retrystorm/resil/balance"
	"github.com/retrystorm/retrystorm/resil/outlier"
)

// Round robin over four replicas, one ejected by five 5xx in a row; then
// three ejected, which is below Envoy's 50% panic threshold: the balancer
// uses every host again.
func Example() {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := outlier.EnvoyDefaults(4)
	s.MaxEjectionPercent = 100
	det, _ := outlier.New(s)
	rr, _ := balance.NewRoundRobin(balance.Settings{Hosts: 4, Detector: det})

	pick := func() []int {
		var got []int
		for i := 0; i < 4; i++ {
			h, err := rr.Pick(now)
			if err != nil {
				panic(err)
			}
			rr.Done(now, h, time.Millisecond, resil.OutcomeSuccess)
			got = append(got, h)
		}
		return got
	}
	fail := func(host int) {
		for i := 0; i < 5; i++ {
			det.Record(now, host, outlier.FromHTTPStatus(503))
		}
	}
	fail(1)
	fmt.Println("host 1 out:", pick())
	fail(0)
	fail(2)
	fmt.Println("three out, panic:", pick())
	// Output:
	// host 1 out: [0 2 3 0]
	// three out, panic: [0 1 2 3]
}
