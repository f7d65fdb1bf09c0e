package budget

import (
	"math"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/resil"
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
				b.Record(t0, resil.OutcomeSuccess, 0)
				if !byRequest {
					deposits++
				}
			case 2:
				b.Record(t0, resil.OutcomeFailure, 0)
			case 3, 5:
				after := resil.OutcomeFailure
				if op%6 == 5 {
					after = resil.OutcomeTimeout
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
	resil.Budget
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
		win, _ := NewWindow(WindowSettings{Ratio: 0.5, Funding: FundedByRequest, MinRetriesPerSecond: 1, TTL: time.Second})
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
					c.b.Record(now, resil.OutcomeSuccess, 0)
				case 2:
					c.b.Record(now, resil.OutcomeFailure, 0)
				case 3:
					c.b.Record(now, resil.OutcomeTimeout, 0)
				case 4:
					if cost, ok := c.b.Withdraw(now, resil.OutcomeFailure); ok {
						pending = append(pending, cost)
					}
				case 5:
					if cost, ok := c.b.Withdraw(now, resil.OutcomeTimeout); ok {
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
		win, _ := NewWindow(WindowSettings{Ratio: 1, Funding: FundedByRequest, MinRetriesPerSecond: 1, TTL: time.Second})
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
					c.b.Record(now, resil.OutcomeSuccess, x)
					c.b.Record(now, resil.OutcomeSuccess, y)
				case 3:
					c.b.Withdraw(now, resil.OutcomeFailure)
					now = now.Add(100 * time.Millisecond)
				}
				if tok := c.b.Tokens(now); !(tok >= 0 && tok <= c.max) {
					t.Fatalf("%T after %v, %v: tokens %v outside [0, %v]", c.b, x, y, tok, c.max)
				}
			}
			// Refilled by ordinary traffic, it grants a retry again.
			for range 200 {
				c.b.Begin(now)
				c.b.Record(now, resil.OutcomeSuccess, 0)
			}
			now = now.Add(2 * time.Second)
			for range 20 {
				c.b.Begin(now)
				c.b.Record(now, resil.OutcomeSuccess, 0)
			}
			if _, ok := c.b.Withdraw(now, resil.OutcomeFailure); !ok {
				t.Fatalf("%T after %v, %v: refilled, it still refuses a retry (tokens %v)", c.b, x, y, c.b.Tokens(now))
			}
		}
	})
}
