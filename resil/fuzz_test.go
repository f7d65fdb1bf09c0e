package resil

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// FuzzTokenBucket checks the budget's two invariants over any sequence of
// operations, for both fundings: the balance stays in [0, MaxTokens], and
// what retries were charged (net of refunds) never exceeds Ratio ×
// deposits + MinTokens. With unit costs (TimeoutCost 1) the charge is the
// number of retries.
func FuzzTokenBucket(f *testing.F) {
	f.Add(uint16(100), uint8(10), uint8(100), false, uint8(1), []byte{0, 1, 2, 3, 3, 3, 4, 3})
	f.Add(uint16(999), uint8(0), uint8(3), true, uint8(1), []byte{3, 0, 0, 3, 5, 3, 4, 4})
	f.Add(uint16(1), uint8(255), uint8(0), false, uint8(3), []byte{5, 5, 5, 5, 4, 1, 1, 1, 1})
	f.Add(uint16(500), uint8(1), uint8(1), true, uint8(2), []byte{0, 0, 0, 0, 3, 3, 3, 3, 3})
	f.Fuzz(func(t *testing.T, ratio uint16, minTok, maxTok uint8, byRequest bool, timeoutCost uint8, ops []byte) {
		s := TokenBucketSettings{
			Ratio:       float64(ratio%1000+1) / 1000,
			Funding:     FundedBySuccess,
			MaxTokens:   float64(maxTok) + 1,
			RetryCost:   1,
			TimeoutCost: math.Min(float64(timeoutCost%3+1), float64(maxTok)+1),
		}
		s.MinTokens = math.Min(float64(minTok), s.MaxTokens)
		if byRequest {
			s.Funding = FundedByRequest
		}
		b, err := NewTokenBucket(s)
		if err != nil {
			t.Fatal(err)
		}
		var deposits, charged int64 // charged in fixed point
		var pending []float64       // charges of retries scheduled, not yet sent
		for _, op := range ops {
			switch op % 6 {
			case 0:
				b.Begin(t0)
				if byRequest {
					deposits++
				}
			case 1:
				b.Record(t0, OutcomeSuccess, 0)
				if !byRequest {
					deposits++
				}
			case 2:
				b.Record(t0, OutcomeFailure, 0)
			case 3, 5:
				after := OutcomeFailure
				if op%6 == 5 {
					after = OutcomeTimeout
				}
				if c, ok := b.Withdraw(t0, after); ok {
					charged += toFixed(c)
					pending = append(pending, c)
				}
			case 4:
				if len(pending) > 0 {
					c := pending[len(pending)-1]
					pending = pending[:len(pending)-1]
					b.Refund(t0, c)
					charged -= toFixed(c)
				}
			}
			tok := b.Tokens(t0)
			if tok < 0 || tok > s.MaxTokens {
				t.Fatalf("tokens %v outside [0, %v]", tok, s.MaxTokens)
			}
			if limit := toFixed(s.Ratio)*deposits + toFixed(s.MinTokens); charged > limit {
				t.Fatalf("charged %v > ratio %v × %d deposits + floor %v", fromFixed(charged), s.Ratio, deposits, s.MinTokens)
			}
		}
	})
}

// reportingBudget is a budget that reports its balance, as all of this
// package's do.
type reportingBudget interface {
	Budget
	TokenReporter
}

// FuzzBudgetTokens checks that every budget's balance stays in [0, max]
// over any sequence of operations and times.
func FuzzBudgetTokens(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7})
	f.Add([]byte{3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 1, 7, 7, 7, 7})
	f.Add([]byte{2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 5, 5})
	f.Fuzz(func(t *testing.T, ops []byte) {
		grpc, _ := NewGRPCThrottle(GRPCThrottleSettings{MaxTokens: 10, TokenRatio: 0.1})
		aws, _ := NewAWSQuota(AWSQuotaSettings{Capacity: 50})
		win, _ := NewWindowBudget(WindowBudgetSettings{Ratio: 0.5, Funding: FundedByRequest, MinRetriesPerSecond: 1, TTL: time.Second})
		for _, c := range []struct {
			b   reportingBudget
			max float64
		}{{grpc, 10}, {aws, 50}, {win, math.Inf(1)}} {
			now := t0
			var pending []float64
			for _, op := range ops {
				switch op % 8 {
				case 0:
					c.b.Begin(now)
				case 1:
					c.b.Record(now, OutcomeSuccess, 0)
				case 2:
					c.b.Record(now, OutcomeFailure, 0)
				case 3:
					c.b.Record(now, OutcomeTimeout, 0)
				case 4:
					if cost, ok := c.b.Withdraw(now, OutcomeFailure); ok {
						pending = append(pending, cost)
					}
				case 5:
					if cost, ok := c.b.Withdraw(now, OutcomeTimeout); ok {
						pending = append(pending, cost)
					}
				case 6:
					if len(pending) > 0 {
						c.b.Refund(now, pending[0])
						pending = pending[1:]
					}
				case 7:
					now = now.Add(time.Duration(op) * 10 * time.Millisecond)
				}
				if tok := c.b.Tokens(now); tok < 0 || tok > c.max {
					t.Fatalf("%T: tokens %v outside [0, %v]", c.b, tok, c.max)
				}
			}
		}
	})
}

// FuzzBreakerProbes checks that a breaker never has more than Probes trial
// calls in flight at once, of any generation, whatever the sequence of
// calls, outcomes and times.
func FuzzBreakerProbes(f *testing.F) {
	f.Add(uint8(1), []byte{1, 0, 0, 0, 9, 0, 0, 1, 2, 3})
	f.Add(uint8(3), []byte{1, 9, 0, 0, 0, 0, 4, 0, 5, 0, 6, 9, 0, 0, 0})
	f.Add(uint8(2), []byte{1, 9, 0, 0, 3, 0, 3, 0, 2, 9, 0, 0, 0, 1, 1})
	f.Fuzz(func(t *testing.T, probes uint8, ops []byte) {
		n := int(probes%4) + 1
		b := mustBreaker(t, BreakerSettings{Threshold: 1, Cooldown: time.Second, MaxCooldown: 4 * time.Second, Probes: n})
		now := t0
		var held []Permit
		for _, op := range ops {
			switch op % 10 {
			case 0:
				if p, err := b.Allow(now); err == nil {
					held = append(held, p)
				}
			case 9:
				now = now.Add(time.Duration(op/10+1) * 100 * time.Millisecond)
			default:
				if len(held) == 0 {
					// Record a fresh closed-state call's failure to trip it.
					if p, err := b.Allow(now); err == nil {
						b.Record(now, p, OutcomeFailure, 0)
					}
					break
				}
				i := int(op) % len(held)
				o := [...]Outcome{OutcomeSuccess, OutcomeFailure, OutcomeTimeout, OutcomeIgnored}[op%4]
				b.Record(now, held[i], o, 0)
				held = append(held[:i], held[i+1:]...)
			}
			inflight := 0
			for _, p := range held {
				if p.probe {
					inflight++
				}
			}
			if inflight > n {
				t.Fatalf("%d probes in flight, limit %d", inflight, n)
			}
		}
	})
}

// FuzzBackoffDelay checks that every valid Backoff's delays stay in
// [0, Cap] (or are non-negative without a cap), in [0, Cap × (1 + Factor)]
// with UncappedJitter, and never exceed MaxDelay, whatever the draw: a draw
// the fuzzer picks (all ones included) and one from a seeded source.
func FuzzBackoffDelay(f *testing.F) {
	f.Add(uint8(2), uint8(1), int64(100e6), int64(1e9), 2.0, 0.0, 10, int64(0), uint64(1))
	f.Add(uint8(2), uint8(3), int64(1e6), int64(30e9), 0.0, 0.0, 50, int64(29e9), uint64(7))
	f.Add(uint8(1), uint8(4), int64(1e9), int64(0), 0.0, 1.0, 1, int64(0), uint64(math.MaxUint64))
	f.Add(uint8(2), uint8(2), int64(1), int64(math.MaxInt64), 1000.0, 0.0, 1<<20, int64(0), uint64(3))
	f.Add(uint8(0), uint8(3), int64(1<<60), int64(1<<62), 0.0, 0.0, 1, int64(1<<61+255), uint64(math.MaxUint64))
	f.Fuzz(func(t *testing.T, sched, jit uint8, base, capD int64, mult, factor float64, retry int, prev int64, seed uint64) {
		b := Backoff{Schedule: Schedule(sched % 3), Jitter: Jitter(jit % 5), Base: time.Duration(base),
			Cap: time.Duration(capD), Multiplier: mult, Factor: factor}
		if b.Validate() != nil {
			return
		}
		bound := b.MaxDelay(retry, time.Duration(prev))
		if bound < 0 || (b.Cap > 0 && bound > b.Cap) {
			t.Fatalf("%+v: MaxDelay(%d, %v) = %v outside [0, %v]", b, retry, time.Duration(prev), bound, b.Cap)
		}
		for _, src := range []rand.Source{constantDraw(seed), rand.NewPCG(seed, seed>>1)} {
			d := b.Delay(retry, time.Duration(prev), src)
			if d < 0 || (b.Cap > 0 && d > b.Cap) {
				t.Fatalf("%+v: Delay(%d, %v) = %v outside [0, %v]", b, retry, time.Duration(prev), d, b.Cap)
			}
			if d > bound {
				t.Fatalf("%+v: Delay(%d, %v) = %v above MaxDelay %v", b, retry, time.Duration(prev), d, bound)
			}
		}
		if b.Jitter != FactorJitter {
			return
		}
		// Uncapped, the jitter may take a delay past Cap, by Factor at most.
		b.UncappedJitter = true
		bound = b.MaxDelay(retry, time.Duration(prev))
		for _, src := range []rand.Source{constantDraw(seed), rand.NewPCG(seed, seed>>1)} {
			d := b.Delay(retry, time.Duration(prev), src)
			if d < 0 || (b.Cap > 0 && float64(d) > float64(b.Cap)*(1+b.Factor)+1) {
				t.Fatalf("%+v: Delay(%d, %v) = %v outside [0, Cap×(1+Factor)]", b, retry, time.Duration(prev), d)
			}
			if d > bound {
				t.Fatalf("%+v: Delay(%d, %v) = %v above MaxDelay %v", b, retry, time.Duration(prev), d, bound)
			}
		}
	})
}

// FuzzBudgetArithmetic feeds every budget extreme amounts (huge, tiny,
// negative, NaN, infinite refunds and paid charges) between ordinary
// operations, and checks that the balance stays in [0, max] and that a
// budget that held tokens before can still grant a retry once refilled.
func FuzzBudgetArithmetic(f *testing.F) {
	f.Add(1e300, -1e300, []byte{0, 1, 2, 3})
	f.Add(math.Inf(1), math.NaN(), []byte{1, 1, 0, 2, 3, 3})
	f.Add(9.223372036854775807e12, 4.5e15, []byte{0, 0, 1, 2})
	f.Add(math.MaxFloat64, math.SmallestNonzeroFloat64, []byte{3, 2, 1, 0})
	f.Fuzz(func(t *testing.T, x, y float64, ops []byte) {
		tb, _ := NewTokenBucket(TokenBucketSettings{Ratio: 1, Funding: FundedByRequest, MaxTokens: 10, MinTokens: 5})
		win, _ := NewWindowBudget(WindowBudgetSettings{Ratio: 1, Funding: FundedByRequest, MinRetriesPerSecond: 1, TTL: time.Second})
		grpc, _ := NewGRPCThrottle(GRPCThrottleSettings{MaxTokens: 10, TokenRatio: 1})
		aws, _ := NewAWSQuota(AWSQuotaSettings{Capacity: 50})
		for _, c := range []struct {
			b   reportingBudget
			max float64
		}{{tb, 10}, {win, 1e6}, {grpc, 10}, {aws, 50}} {
			now := t0
			for _, op := range ops {
				switch op % 4 {
				case 0:
					c.b.Refund(now, x)
				case 1:
					c.b.Refund(now, y)
				case 2:
					c.b.Record(now, OutcomeSuccess, x)
					c.b.Record(now, OutcomeSuccess, y)
				case 3:
					c.b.Withdraw(now, OutcomeFailure)
					now = now.Add(100 * time.Millisecond)
				}
				if tok := c.b.Tokens(now); !(tok >= 0 && tok <= c.max) {
					t.Fatalf("%T after %v, %v: tokens %v outside [0, %v]", c.b, x, y, tok, c.max)
				}
			}
			// Refilled by ordinary traffic, it grants a retry again.
			for range 200 {
				c.b.Begin(now)
				c.b.Record(now, OutcomeSuccess, 0)
			}
			now = now.Add(2 * time.Second)
			for range 20 {
				c.b.Begin(now)
				c.b.Record(now, OutcomeSuccess, 0)
			}
			if _, ok := c.b.Withdraw(now, OutcomeFailure); !ok {
				t.Fatalf("%T after %v, %v: refilled, it still refuses a retry (tokens %v)", c.b, x, y, c.b.Tokens(now))
			}
		}
	})
}

// constantDraw is a source that always draws the same number.
type constantDraw uint64

func (c constantDraw) Uint64() uint64 { return uint64(c) }
