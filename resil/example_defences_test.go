package resil_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/retrystorm/retrystorm/resil"
)

// Adaptive throttling sheds only the excess. Against a dependency that
// fails 30% of the requests whatever the load, it refuses nothing at K = 2:
// a breaker with a failure-rate rule would have shed them all. Against one
// that can accept only 30 of the 100 requests a second it is sent, it sends
// about K = 2 per accepted one, and refuses the rest locally. The random
// source is seeded, so the run is the same every time.
func ExampleThrottler() {
	run := func(accept func(now time.Time, i int) bool) {
		th, err := resil.NewThrottler(resil.ThrottlerSettings{K: 2, Window: time.Minute, Rand: rand.NewPCG(1, 2)})
		if err != nil {
			panic(err)
		}
		now := time.Unix(0, 0)
		sent, accepted := 0, 0
		for i := range 12000 { // two minutes at 100 a second
			now = now.Add(10 * time.Millisecond)
			if th.Allow(now) != nil {
				continue
			}
			sent++
			o := resil.OutcomeFailure
			if accept(now, i) {
				o = resil.OutcomeSuccess
				accepted++
			}
			th.Record(now, o)
		}
		fmt.Printf("sent %d of 12000, accepted %d, p = %.2f\n", sent, accepted, th.Probability(now))
	}
	run(func(_ time.Time, i int) bool { return i%10 >= 3 }) // 30% broken
	var credit float64
	last := time.Unix(0, 0)
	run(func(now time.Time, _ int) bool { // 30 a second
		credit = min(credit+now.Sub(last).Seconds()*30, 10)
		last = now
		if credit >= 1 {
			credit--
			return true
		}
		return false
	})
	// Output:
	// sent 11915 of 12000, accepted 8344, p = 0.00
	// sent 7183 of 12000, accepted 3599, p = 0.40
}

// The throttler as a Policy component beside a breaker, against a
// dependency that is down. Each is asked in turn, the throttler first, and
// a Guard counts their refusals apart: here the throttler refuses so much
// that the breaker never sees the five failures in a row that trip it.
func ExampleThrottler_policy() {
	th, _ := resil.NewThrottler(resil.ThrottlerSettings{Rand: rand.NewPCG(3, 4)})
	br, _ := resil.NewBreaker(resil.BreakerSettings{Threshold: 5, Cooldown: time.Hour})
	g, _ := resil.NewGuard(resil.GuardSettings{
		Policy: resil.Policy{Breaker: br, Throttle: th},
		Rand:   rand.NewPCG(5, 6),
	})
	down := errors.New("unavailable")
	for range 40 {
		_ = g.Do(context.Background(), func(context.Context) error { return down })
	}
	st := g.Stats()
	fmt.Printf("attempts %d, throttled %d, breaker refusals %d\n", st.Attempts, st.ThrottleRefusals, st.BreakerRefusals)
	// Output: attempts 4, throttled 36, breaker refusals 0
}
