package outlier

import (
	"testing"
)

// BenchmarkRecord is the detector's hot path: one answer recorded, no
// ejection. Run: go test -run '^$' -bench Record -benchmem ./resil/outlier
func BenchmarkRecord(b *testing.B) {
	for _, fl := range []Flavor{Envoy, GRPC} {
		b.Run(fl.String(), func(b *testing.B) {
			s := EnvoyDefaults(16)
			if fl == GRPC {
				s = GRPCDefaults(16)
			}
			d, _ := New(s)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					d.Record(t0, i&15, Success)
					i++
				}
			})
		})
	}
}

func TestRecordAllocatesNothing(t *testing.T) {
	d, _ := New(EnvoyDefaults(4))
	if a := testing.AllocsPerRun(1000, func() {
		d.Record(t0, 1, Success)
		d.Record(t0, 2, Error5xx)
	}); a != 0 {
		t.Errorf("Record allocates %v times", a)
	}
}
