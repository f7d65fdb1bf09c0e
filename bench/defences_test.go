package bench

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/failsafe-go/failsafe-go/adaptivelimiter"
	"github.com/failsafe-go/failsafe-go/adaptivethrottler"

	"github.com/retrystorm/retrystorm/resil"
	"github.com/retrystorm/retrystorm/resil/admission"
)

// The adaptive throttlers: one attempt's two steps, admit and record.
// failsafe-go reads the clock inside both steps; resil takes the time, so
// it is measured reading time.Now for each step like failsafe-go (the
// like-for-like figure) and with a time the caller already has. "healthy"
// records successes only: neither refuses. "throttling" records failures
// for two attempts in three at K = 2 (failsafe-go: a failure-rate threshold
// of 0.5), so both refuse a share and draw on every admit.

func oursThrottler(b *testing.B) *resil.Throttler {
	th, err := resil.NewThrottler(resil.ThrottlerSettings{K: 2, Window: time.Minute, Rand: rand.NewPCG(1, 2)})
	if err != nil {
		b.Fatal(err)
	}
	return th
}

func failsafeThrottler() adaptivethrottler.AdaptiveThrottler[any] {
	return adaptivethrottler.NewBuilder[any]().WithFailureRateThreshold(0.5, 0, time.Minute).Build()
}

func BenchmarkThrottler(b *testing.B) {
	for _, throttling := range []bool{false, true} {
		name := "healthy"
		if throttling {
			name = "throttling"
		}
		outcome := func(i int) bool { return !throttling || i%3 == 0 }
		ours, i := oursThrottler(b), 0
		serialAndParallel(b, name+"/resil/time.Now", func() {
			i++
			if ours.Allow(time.Now()) == nil {
				o := resil.OutcomeSuccess
				if !outcome(i) {
					o = resil.OutcomeFailure
				}
				ours.Record(time.Now(), o)
			}
		})
		ours2, j := oursThrottler(b), 0
		now := time.Now()
		serialAndParallel(b, name+"/resil/given-time", func() {
			j++
			if ours2.Allow(now) == nil {
				o := resil.OutcomeSuccess
				if !outcome(j) {
					o = resil.OutcomeFailure
				}
				ours2.Record(now, o)
			}
		})
		fs, k := failsafeThrottler(), 0
		serialAndParallel(b, name+"/failsafe-go", func() {
			k++
			if fs.TryAcquirePermit() {
				if outcome(k) {
					fs.RecordSuccess()
				} else {
					fs.RecordFailure()
				}
			}
		})
	}
}

// The adaptive concurrency limiters: acquire a permit and release it with
// a latency sample, far below the limit. failsafe-go's limiter is its own
// gradient design (a t-digest of recent latencies against a moving
// baseline); resil's LimitGradient is Gradient2's, windowed, LimitVegas
// Vegas's, and LimitAIMD the simplest. failsafe-go reads the clock at
// acquire and at release; resil is measured doing the same (time.Now) and
// with the time passed in.

var errRefused = errors.New("refused")

func BenchmarkLimiter(b *testing.B) {
	for _, s := range []admission.LimitSettings{
		admission.GradientLimit{Limit: 100, MaxLimit: 200},
		admission.VegasLimit{Limit: 100, MaxLimit: 200},
		admission.AIMDLimit{Limit: 100, MaxLimit: 200},
	} {
		alg := s.Algorithm()
		l, err := admission.NewLimiter(s)
		if err != nil {
			b.Fatal(err)
		}
		serialAndParallel(b, "resil/"+alg.String()+"/time.Now", func() {
			p, ok := l.Acquire(time.Now())
			if !ok {
				b.Fatal(errRefused)
			}
			l.Release(time.Now(), p, false)
		})
		// The time passed in, as a simulator or a driver that has read it
		// already does: 1ms per request, so the windows close.
		now := time.Now()
		serialAndParallel(b, "resil/"+alg.String()+"/given-time", func() {
			p, ok := l.Acquire(now)
			if !ok {
				b.Fatal(errRefused)
			}
			l.Release(now.Add(time.Millisecond), p, false)
		})
	}
	fs := adaptivelimiter.NewBuilder[any]().WithLimits(1, 200, 100).Build()
	serialAndParallel(b, "failsafe-go", func() {
		p, ok := fs.TryAcquirePermit()
		if !ok {
			b.Fatal(errRefused)
		}
		p.Record()
	})
}
