package balance

import (
	"sync"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/resil"
	"github.com/retrystorm/retrystorm/resil/outlier"
)

// TestConcurrentPicksAndEjections runs picks, releases, records and
// evaluations at once (meant for -race) and checks that every in-flight
// count returns to zero.
func TestConcurrentPicksAndEjections(t *testing.T) {
	s := outlier.EnvoyDefaults(6)
	s.MaxEjectionPercent = 50
	d, _ := outlier.New(s)
	d.Advance(t0)
	for _, p := range pickers(t, Settings{Hosts: 6, Detector: d}) {
		var wg sync.WaitGroup
		for g := 0; g < 4; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				for k := 0; k < 2000; k++ {
					now := t0.Add(time.Duration(k) * time.Millisecond)
					h, err := p.Pick(now)
					if err != nil {
						continue
					}
					r := outlier.Success
					if h == g%3 {
						r = outlier.Error5xx
					}
					d.Record(now, h, r)
					p.Done(now, h, time.Millisecond, resil.OutcomeSuccess)
					if k%100 == 0 {
						d.Advance(now.Add(time.Duration(k) * time.Second))
					}
				}
			}(g)
		}
		wg.Wait()
		type inflight interface{ InFlight(int) int64 }
		for h := 0; h < 6; h++ {
			if f := p.(inflight).InFlight(h); f != 0 {
				t.Errorf("%T: host %d has %d in flight after every Done", p, h, f)
			}
		}
	}
}
