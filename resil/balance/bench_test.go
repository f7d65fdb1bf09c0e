package balance

import (
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/resil"
)

// BenchmarkPickDone is each picker's pick and release over 16 hosts, one
// of them ejected, from parallel goroutines. Run:
//
//	go test -run '^$' -bench PickDone -benchmem ./resil/balance
func BenchmarkPickDone(b *testing.B) {
	names := []string{"round_robin", "random", "p2c", "least_request", "peak_ewma"}
	for k, p := range pickers(b, Settings{Hosts: 16, Detector: ejected(b, 16, 5)}) {
		b.Run(names[k], func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					h, err := p.Pick(t0)
					if err != nil {
						b.Fatal(err)
					}
					p.Done(t0, h, time.Millisecond, resil.OutcomeSuccess)
				}
			})
		})
	}
}
