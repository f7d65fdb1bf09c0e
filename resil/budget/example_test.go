package budget_test

import (
	"fmt"
	"time"

	"github.com/retrystorm/retrystorm/resil"
	"github.com/retrystorm/retrystorm/resil/budget"
)

// A retry budget funded by requests: each intent adds 0.1 token, a retry
// costs 1, and the floor of 2 lets a quiet client retry twice.
func ExampleTokenBucket() {
	b, err := budget.NewTokenBucket(budget.TokenBucketSettings{
		Ratio:     0.1,
		Funding:   budget.FundedByRequest,
		MinTokens: 2,
	})
	if err != nil {
		panic(err)
	}
	now := time.Unix(0, 0)
	for i := range 3 {
		_, ok := b.Withdraw(now, resil.OutcomeFailure)
		fmt.Printf("retry %d allowed: %v\n", i+1, ok)
	}
	for range 10 { // ten intents fund one retry
		b.Begin(now)
	}
	_, ok := b.Withdraw(now, resil.OutcomeFailure)
	fmt.Printf("after 10 intents: %v, tokens left %.1f\n", ok, b.Tokens(now))
	// Output:
	// retry 1 allowed: true
	// retry 2 allowed: true
	// retry 3 allowed: false
	// after 10 intents: true, tokens left 0.0
}
