package scenario

import (
	"fmt"
	"reflect"

	"github.com/retrystorm/retrystorm/resil"
	"github.com/retrystorm/retrystorm/resil/budget"
)

// Budget kinds.
const (
	BudgetNone        = "none"
	BudgetTokenBucket = "token_bucket"
	BudgetWindow      = "window"
	BudgetGRPC        = "grpc"
	BudgetAWS         = "aws"
	BudgetConcurrency = "concurrency"
	BudgetAWSAdaptive = "aws_adaptive"
)

// Budget is the retry budget: Use picks the kind, "none" being the
// control, and the field of that kind holds its settings in resil's own
// type (package resil/budget), the others' being zero. Their defaults,
// their ranges and what they mean are resil's: Parse fills in resil's
// defaults (and funded_by: success, the file's own default), and the
// loader reports resil's refusals at the file's line and key. The lists
// that say which failures the fleet retries (WindowSettings.Retried,
// GRPCThrottleSettings.Uncounted) are left empty: NewPolicy makes them
// from the fleet's retry.on.
//
// A Budget is not comparable with ==: use Equal.
type Budget struct {
	Use         string
	TokenBucket budget.TokenBucketSettings  // token_bucket
	Window      budget.WindowSettings       // window
	GRPC        budget.GRPCThrottleSettings // grpc
	// AWS is the quota of aws and aws_adaptive. The file's
	// no_retry_increment: 0 is NoIncrement (a first attempt's success adds
	// nothing), as aws-sdk-go-v2's adaptive mode ships.
	AWS         budget.AWSQuotaSettings
	Concurrency budget.ConcurrencySettings // concurrency: Envoy's retry budget
	// Pacer is aws_adaptive's client-side rate limiter.
	Pacer budget.ClientRateLimiterSettings
}

// Equal reports whether b and c are the same budget with the same
// settings.
func (b Budget) Equal(c Budget) bool { return reflect.DeepEqual(b, c) }

// Ratio returns the budget's budget_ratio: the token bucket's or the
// window's Ratio, zero for the kinds that have none.
func (b Budget) Ratio() float64 {
	switch b.Use {
	case BudgetTokenBucket:
		return b.TokenBucket.Ratio
	case BudgetWindow:
		return b.Window.Ratio
	}
	return 0
}

// IsNone reports whether b is the control: no budget.
func (b Budget) IsNone() bool { return b.Use == BudgetNone || b.Use == "" }

// withDefaults returns b with resil's defaults in the zero fields of its
// kind's settings.
func (b Budget) withDefaults() Budget {
	switch b.Use {
	case BudgetTokenBucket:
		b.TokenBucket = b.TokenBucket.WithDefaults()
	case BudgetWindow:
		b.Window = b.Window.WithDefaults()
	case BudgetAWS:
		b.AWS = b.AWS.WithDefaults()
	case BudgetAWSAdaptive:
		b.AWS, b.Pacer = b.AWS.WithDefaults(), b.Pacer.WithDefaults()
	}
	return b
}

// validate returns resil's refusal of b's settings, if any, and the
// settings struct it is about.
func (b *Budget) validate() (settings any, err error) {
	switch b.Use {
	case BudgetTokenBucket:
		return &b.TokenBucket, b.TokenBucket.Validate()
	case BudgetWindow:
		return &b.Window, b.Window.Validate()
	case BudgetGRPC:
		return &b.GRPC, b.GRPC.Validate()
	case BudgetConcurrency:
		return &b.Concurrency, b.Concurrency.Validate()
	case BudgetAWS, BudgetAWSAdaptive:
		if err := b.AWS.Validate(); err != nil || b.Use == BudgetAWS {
			return &b.AWS, err
		}
		return &b.Pacer, b.Pacer.Validate()
	}
	return nil, nil
}

func budgetObject(b *Budget) *object {
	var (
		bucket = []string{BudgetTokenBucket}
		window = []string{BudgetWindow}
		grpc   = []string{BudgetGRPC}
		aws    = []string{BudgetAWS, BudgetAWSAdaptive}
		conc   = []string{BudgetConcurrency}
		pacer  = []string{BudgetAWSAdaptive}
	)
	tb, w, q, p := &b.TokenBucket, &b.Window, &b.AWS, &b.Pacer
	// The keys are in the order Marshal writes them, each kind's as before
	// its settings were resil's types.
	settings := &object{
		kind: &b.Use, what: "%s",
		fields: []field{
			{key: "budget_ratio", kinds: bucket, need: true, v: number{&tb.Ratio}},
			{key: "budget_ratio", kinds: window, need: true, v: number{&w.Ratio}},
			{key: "min_tokens", kinds: bucket, v: number{&tb.MinTokens}},
			{key: "max_tokens", kinds: bucket, v: number{&tb.MaxTokens}},
			{key: "max_tokens", kinds: grpc, need: true, v: number{&b.GRPC.MaxTokens}},
			{key: "token_ratio", kinds: grpc, need: true, v: number{&b.GRPC.TokenRatio}},
			{key: "funded_by", kinds: bucket, v: enumWord{&tb.Funding, fundings}},
			{key: "funded_by", kinds: window, v: enumWord{&w.Funding, fundings}},
			{key: "capacity", kinds: aws, v: integer{&q.Capacity}},
			{key: "retry_cost", kinds: bucket, v: number{&tb.RetryCost}},
			{key: "retry_cost", kinds: window, v: number{&w.RetryCost}},
			{key: "retry_cost", kinds: aws, v: integer{&q.RetryCost}},
			{key: "timeout_cost", kinds: bucket, v: number{&tb.TimeoutCost}},
			{key: "timeout_cost", kinds: window, v: number{&w.TimeoutCost}},
			{key: "timeout_cost", kinds: aws, v: integer{&q.TimeoutCost}},
			{key: "no_retry_increment", kinds: aws, v: increment{q}},
			{key: "min_retries_per_second", kinds: window, v: number{&w.MinRetriesPerSecond}},
			{key: "ttl", kinds: window, v: duration{&w.TTL}},
			{key: "tower", kinds: window, v: boolean{&w.Tower}},
			{key: "budget_percent", kinds: conc, need: true, v: number{&b.Concurrency.Percent}},
			{key: "min_retry_concurrency", kinds: conc, need: true, v: integer{&b.Concurrency.MinConcurrency}},
			{key: "beta", kinds: pacer, v: number{&p.Beta}},
			{key: "scale_constant", kinds: pacer, v: number{&p.ScaleConstant}},
			{key: "smoothing", kinds: pacer, v: number{&p.Smoothing}},
			{key: "min_fill_rate", kinds: pacer, v: number{&p.MinFillRate}},
			{key: "fail_on_no_tokens", kinds: pacer, v: boolean{&p.FailOnNoTokens}},
		},
		// resil's defaults, written out so that a file shows them, and
		// the file's own: a budget is funded by successes unless it says.
		preset: func(use string) {
			*b = Budget{Use: use}.withDefaults()
			b.Pacer.RequestCost = 0 // no key of the file: resil's default, unwritten
			switch use {
			case BudgetTokenBucket:
				b.TokenBucket.Funding = budget.FundedBySuccess
			case BudgetWindow:
				b.Window.Funding = budget.FundedBySuccess
			}
		},
		// A retry after a timeout costs what any retry costs unless the
		// file says otherwise: resil's default, from the retry_cost given.
		finish: func(has func(string) bool) {
			if !has("timeout_cost") {
				switch b.Use {
				case BudgetTokenBucket:
					tb.TimeoutCost = budget.TokenBucketSettings{RetryCost: tb.RetryCost}.WithDefaults().TimeoutCost
				case BudgetWindow:
					w.TimeoutCost = budget.WindowSettings{RetryCost: w.RetryCost}.WithDefaults().TimeoutCost
				}
			}
		},
	}
	return &object{
		selector: "use", kind: &b.Use, kinds: budgetKinds, what: "%s",
		fields: []field{{key: "settings", v: settings}},
		check:  b.check,
	}
}

// check refuses what resil refuses, at the file's key.
func (b *Budget) check(c *checker, path string) {
	filled := b.withDefaults()
	settings, err := b.validate()
	c.settings(join(path, "settings"), b.Use, budgetObject(b).fields[0].v.(*object), budgetObject(&filled).fields[0].v.(*object), settings, err)
}

// retried lists the failed outcomes the fleet retries.
func (f Fleet) retried() []resil.Outcome {
	var r []resil.Outcome
	if f.Retry.Retries(RetryOnError) {
		r = append(r, resil.OutcomeFailure)
	}
	if f.Retry.Retries(RetryOnRejection) {
		r = append(r, resil.OutcomeThrottled)
	}
	if f.Retry.Retries(RetryOnTimeout) {
		r = append(r, resil.OutcomeTimeout)
	}
	return r
}

// uncounted lists the failures a gRPC throttle takes no token for: those
// the fleet does not retry, as grpc-go counts only retryable statuses, and
// timeouts when the attempt's timeout is the call's own deadline (gRPC's
// only timeout), which ends the call without touching the bucket (grpc-go
// stream.go, csAttempt.shouldRetry: a finished call returns before the
// throttle is asked).
func (f Fleet) uncounted() []resil.Outcome {
	var u []resil.Outcome
	if !f.Retry.Retries(RetryOnError) {
		u = append(u, resil.OutcomeFailure)
	}
	if !f.Retry.Retries(RetryOnRejection) {
		u = append(u, resil.OutcomeThrottled)
	}
	if !f.Retry.Retries(RetryOnTimeout) || (f.Deadline > 0 && f.Timeout >= f.Deadline) {
		u = append(u, resil.OutcomeTimeout)
	}
	return u
}

// resil returns a new budget, or nil for none: a nil Budget is resil's "no
// budget". f is the fleet it guards: which failures it retries matters to
// a gRPC throttle and to a budget funded by answers.
func (b Budget) resil(f Fleet) (resil.Budget, error) {
	switch b.Use {
	case BudgetNone, "":
		return nil, nil
	case BudgetTokenBucket:
		return budget.NewTokenBucket(b.TokenBucket)
	case BudgetWindow:
		s := b.Window
		s.Retried = f.retried()
		return budget.NewWindow(s)
	case BudgetGRPC:
		s := b.GRPC
		s.Uncounted = f.uncounted()
		return budget.NewGRPCThrottle(s)
	case BudgetConcurrency:
		return budget.NewConcurrency(b.Concurrency)
	case BudgetAWS, BudgetAWSAdaptive:
		// aws_adaptive is the standard mode's quota plus a rate limiter,
		// which NewPolicy adds as the policy's Pacer.
		return budget.NewAWSQuota(b.AWS)
	}
	return nil, fmt.Errorf("unknown budget use %q", b.Use)
}

// pacer returns the policy's Pacer: aws_adaptive's rate limiter, or nil
// (an interface holding no pointer: resil's "no pacer").
func (b Budget) pacer() (resil.Pacer, error) {
	if b.Use != BudgetAWSAdaptive {
		return nil, nil
	}
	l, err := budget.NewClientRateLimiter(b.Pacer)
	if err != nil {
		return nil, err
	}
	return l, nil
}
