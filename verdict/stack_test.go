package verdict

import (
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/resil/budget"
	"github.com/retrystorm/retrystorm/scenario"
)

// TestEveryRiskHasASetting: every risk check can blame names a setting,
// so that a blame in SARIF points at the line that sets it; a new risk
// that riskSettings does not know fails here.
func TestEveryRiskHasASetting(t *testing.T) {
	base := &scenario.Scenario{Traffic: scenario.Traffic{Clients: 20}, Origin: scenario.Origin{Model: scenario.ModelQueue}}
	retry := func(n int, jitter string) scenario.Retry {
		return scenario.Retry{MaxRetries: n, Backoff: scenario.Backoff{Use: "exponential", Base: 100 * time.Millisecond, Jitter: jitter}}
	}
	fleets := []scenario.Fleet{
		{Timeout: time.Second, Retry: retry(3, "none"), Budget: scenario.Budget{Use: scenario.BudgetNone}},
		{Timeout: time.Second, Retry: retry(-1, "full"), Budget: scenario.Budget{Use: scenario.BudgetNone}},
		{Timeout: time.Second, Retry: retry(3, "full"), Budget: scenario.Budget{Use: scenario.BudgetConcurrency, Concurrency: budget.ConcurrencySettings{MinConcurrency: 3}}},
		{Timeout: time.Second, Retry: retry(3, "full"), Budget: scenario.Budget{Use: scenario.BudgetConcurrency, Concurrency: budget.ConcurrencySettings{Percent: 20, MinConcurrency: 3}}},
		{Timeout: time.Second, Retry: retry(3, "full"), Budget: scenario.Budget{Use: scenario.BudgetWindow, Window: budget.WindowSettings{Ratio: 0.2, MinRetriesPerSecond: 10}}},
		{Timeout: time.Second, Retry: retry(3, "full"), Budget: scenario.Budget{Use: scenario.BudgetTokenBucket, TokenBucket: budget.TokenBucketSettings{Ratio: 0.1}}},
		{Timeout: time.Second, Retry: retry(3, "full"), Budget: scenario.Budget{Use: scenario.BudgetAWS, AWS: budget.AWSQuotaSettings{Capacity: 500, RetryCost: 5}}},
		{Timeout: time.Second, Retry: scenario.Retry{MaxRetries: 2, Backoff: scenario.Backoff{Use: "none"}}, Budget: scenario.Budget{Use: scenario.BudgetNone}},
	}
	seen := 0
	for _, f := range fleets {
		for _, why := range risks(f, base, nil) {
			seen++
			if riskSettings(why) == nil {
				t.Errorf("no setting for the risk %q", why)
			}
		}
	}
	if seen < 10 {
		t.Errorf("only %d risks: the fleets no longer exercise them", seen)
	}
}
