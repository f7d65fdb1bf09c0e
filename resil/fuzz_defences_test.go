package resil

import (
	"math/rand/v2"
	"testing"
	"time"
)

// FuzzThrottler checks the throttle's invariants over any sequence of
// outcomes, refusals and times: the probability is in [0, 1] and is the
// SRE formula on the window's counts, accepts never outnumber requests, and
// an attempt is never refused while requests <= K × accepts.
func FuzzThrottler(f *testing.F) {
	f.Add(uint8(10), uint8(1), uint8(0), []byte{1, 1, 1, 3, 3, 0, 3, 7, 3})
	f.Add(uint8(0), uint8(7), uint8(50), []byte{0, 0, 1, 1, 1, 1, 3, 3, 3, 255, 3})
	f.Add(uint8(200), uint8(0), uint8(99), []byte{2, 2, 1, 3, 0, 3, 1, 3})
	f.Fuzz(func(t *testing.T, k, padding, maxP uint8, ops []byte) {
		s := ThrottlerSettings{
			K:              1 + float64(k)/20,
			Padding:        1 + float64(padding),
			MaxProbability: float64(maxP%100+1) / 100,
			Window:         10 * time.Second,
			Rand:           rand.NewPCG(uint64(k), uint64(padding)),
		}
		th, err := NewThrottler(s)
		if err != nil {
			t.Fatal(err)
		}
		now := t0
		for _, op := range ops {
			now = now.Add(time.Duration(op>>2) * 100 * time.Millisecond)
			req, acc := th.Counts(now)
			p := th.Probability(now)
			if p < 0 || p > 1 || p > s.MaxProbability || acc > req || acc < 0 {
				t.Fatalf("p = %v with %d requests, %d accepts", p, req, acc)
			}
			want := 0.0
			if e := float64(req) - s.K*float64(acc); e > 0 {
				want = min(e/(float64(req)+s.Padding), s.MaxProbability)
			}
			if !near(p, want) {
				t.Fatalf("p = %v, want %v at %d requests, %d accepts", p, want, req, acc)
			}
			switch op % 4 {
			case 0:
				th.Record(now, OutcomeSuccess)
			case 1:
				th.Record(now, OutcomeFailure)
			case 2:
				th.Record(now, OutcomeIgnored)
			case 3:
				if err := th.Allow(now); err != nil && float64(req) <= s.K*float64(acc) {
					t.Fatalf("refused with %d requests <= K × %d accepts", req, acc)
				}
			}
		}
	})
}
