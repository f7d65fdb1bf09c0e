package outlier

import (
	"math/rand/v2"
	"testing"
	"time"
)

// bound is the most hosts a product's rule lets be ejected at once: under
// CheckAfter the largest k with 100k/n <= max; under CheckBefore ejections
// go on while 100e/n < max, so the smallest k with 100k/n >= max;
// always_eject_one_host adds one when that is 0.
func bound(rule MaxEjectionRule, n, maxPct int, alwaysOne bool) int {
	k := 0
	if rule == CheckBefore {
		for k < n && 100*k < maxPct*n {
			k++
		}
	} else {
		for k < n && 100*(k+1) <= maxPct*n {
			k++
		}
	}
	if alwaysOne && k == 0 && n > 0 {
		k = 1
	}
	return k
}

// FuzzDetector drives a detector with arbitrary results and times and
// checks its invariants: it never ejects more hosts than its product's
// rule allows, its count matches its hosts, and an ejected host is back
// within its ejection time and one interval.
func FuzzDetector(f *testing.F) {
	f.Add(uint8(3), uint8(67), uint8(0), []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})
	f.Add(uint8(10), uint8(10), uint8(7), []byte{0, 0, 0, 0, 0, 255, 255, 255})
	f.Add(uint8(5), uint8(100), uint8(2), []byte{9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 200, 1, 2})
	f.Fuzz(func(t *testing.T, n, maxPct, mode uint8, ops []byte) {
		hosts := int(n%12) + 1
		s := EnvoyDefaults(hosts)
		if mode&1 != 0 {
			s = GRPCDefaults(hosts)
			s.Enforcing.FailurePercentage = 100
		} else {
			s.SplitExternalLocalOriginErrors = mode&2 != 0
			s.AlwaysEjectOneHost = mode&4 != 0
			s.Enforcing.ConsecutiveGatewayFailure = 50
			s.MaxEjectionTimeJitter = time.Duration(mode>>3) * time.Second
		}
		if mode&8 != 0 {
			s.MaxEjectionRule = CheckBefore
		}
		s.MaxEjectionPercent = int(maxPct % 101)
		s.SuccessRateMinimumHosts, s.SuccessRateRequestVolume = 2, 3
		s.FailurePercentageMinimumHosts, s.FailurePercentageRequestVolume = 1, 3
		s.Interval, s.BaseEjectionTime, s.MaxEjectionTime = time.Second, 2*time.Second, 7*time.Second
		s.Rand = rand.NewPCG(uint64(n), uint64(mode))
		d, err := New(s)
		if err != nil {
			t.Skip(err)
		}
		s = d.Settings()
		limit := bound(s.MaxEjectionRule, hosts, s.MaxEjectionPercent, s.AlwaysEjectOneHost)
		longest := s.MaxEjectionTime + s.MaxEjectionTimeJitter + s.Interval
		now := t0
		d.Advance(now)
		for _, op := range ops {
			switch {
			case op >= 240: // time passes
				now = now.Add(time.Duration(op-239) * 300 * time.Millisecond)
				d.Advance(now)
			default:
				d.Record(now, int(op)%hosts, Result(op/16%4))
			}
			count := 0
			for i := 0; i < hosts; i++ {
				if d.Ejected(i) {
					count++
					if h := d.Host(i); now.Sub(h.Since) > longest {
						t.Fatalf("host %d ejected since %v, still out at %v (longest %v)", i, h.Since.Sub(t0), now.Sub(t0), longest)
					}
				}
			}
			if count != d.EjectedCount() {
				t.Fatalf("EjectedCount %d, hosts ejected %d", d.EjectedCount(), count)
			}
			if count > limit {
				t.Fatalf("%d of %d hosts ejected, the rule %v at %d%% allows %d", count, hosts, s.MaxEjectionRule, s.MaxEjectionPercent, limit)
			}
		}
	})
}
