package verdict

import (
	"fmt"
	"strings"

	"github.com/retrystorm/retrystorm/report"
	"github.com/retrystorm/retrystorm/scenario"
)

// risks lists the fleet's settings that can keep a storm going, in plain
// words, for the report to blame when the fleet stays collapsed. A
// setting listed in fromBase came from the base scenario or a product's
// default, not from the user's file: it is not blamed (the verdict says
// where it came from instead).
func risks(f scenario.Fleet, base *scenario.Scenario, fromBase []string) []string {
	var out []string
	mine := func(setting string) bool {
		for _, b := range fromBase {
			// A backoff whose base is a default is not the file's.
			if b == setting || strings.HasPrefix(setting, b+".") || b == setting+".base" {
				return false
			}
		}
		return true
	}
	clients := max(base.Traffic.Clients, 1)
	n := f.Retry.MaxRetries
	retriesMine := mine("retry.max_retries") || mine("budget")
	switch {
	case n == 0 || !retriesMine:
	case n > 0 && f.Budget.Use != scenario.BudgetNone && mine("retry.max_retries") &&
		(!mine("budget") || f.Budget.Use == scenario.BudgetConcurrency && f.Budget.Concurrency.Percent == 0 && !mine("budget.min_retry_concurrency")):
		// The budget is the product's default, not the file's: blame the
		// retries the file asks for.
		out = append(out, fmt.Sprintf("max_retries %d with no budget of your own: a failed intent sends up to %d attempts, held back only by the product's default (%s)", n, n+1, f.Budget.Use))
	case f.Budget.Use == scenario.BudgetNone && n < 0:
		out = append(out, "unlimited retries with no budget: nothing bounds the retries but the deadline")
	case f.Budget.Use == scenario.BudgetNone:
		out = append(out, fmt.Sprintf("max_retries %d with no budget: when everything fails, each intent sends up to %d attempts, %d× the load", n, n+1, n+1))
	case f.Budget.Use == scenario.BudgetConcurrency && f.Budget.Concurrency.Percent == 0:
		c := f.Budget.Concurrency
		out = append(out, fmt.Sprintf("at most %d retries active at once per client (%d over the fleet's %d clients), whatever the traffic: a cap on concurrency, not a share of requests", c.MinConcurrency, c.MinConcurrency*clients, clients))
	case f.Budget.Use == scenario.BudgetConcurrency:
		c := f.Budget.Concurrency
		out = append(out, fmt.Sprintf("a concurrency budget of %g%% with min_retry_concurrency %d per client (%d over %d clients): a slow dependency holds more requests in flight, which raises the allowance when it should fall", c.Percent, c.MinConcurrency, c.MinConcurrency*clients, clients))
	case f.Budget.Use == scenario.BudgetWindow && f.Budget.Window.MinRetriesPerSecond > 0:
		// The floor is per client: many small clients get past it
		// together, and in an outage it is what gets through.
		w := f.Budget.Window
		floor := w.MinRetriesPerSecond * float64(clients)
		how := "or the floor, whichever is larger"
		if w.Tower {
			how = "plus the floor (tower's rule)"
		}
		out = append(out, fmt.Sprintf("a budget of ratio %g %s, the floor %g retries a second per client (%g over the fleet's %d clients): retries may add %s to the load, and in a total outage the floor still gets through",
			w.Ratio, how, w.MinRetriesPerSecond, floor, clients, report.Percent(w.Ratio, 0)))
	case f.Budget.Use == scenario.BudgetTokenBucket || f.Budget.Use == scenario.BudgetWindow:
		out = append(out, fmt.Sprintf("a budget of ratio %g: retries may add up to %s to the load", f.Budget.Ratio(), report.Percent(f.Budget.Ratio(), 0)))
	case f.Budget.Use == scenario.BudgetAWS || f.Budget.Use == scenario.BudgetAWSAdaptive:
		out = append(out, fmt.Sprintf("the AWS retry quota: %d tokens per client that refill only on success, spent %d per retry", f.Budget.AWS.Capacity, f.Budget.AWS.RetryCost))
	}
	if n != 0 && f.Retry.Backoff.Jitter == "none" && f.Retry.Backoff.Use != "none" && mine("retry.backoff") {
		out = append(out, "backoff without jitter: clients that failed together retry together")
	}
	if n != 0 && (f.Retry.Backoff.Use == "none" || f.Retry.Backoff.Base == 0) && f.Retry.Backoff.Jitter != "decorrelated" && mine("retry.backoff") {
		out = append(out, "no backoff: a failed attempt is retried at once")
	}
	if base.Origin.Model == scenario.ModelQueue && f.Retry.Retries(scenario.RetryOnTimeout) && n != 0 && mine("timeout") {
		out = append(out, fmt.Sprintf("timeout %v against a queue: once the backlog is longer than the origin serves in %v, every answer is late, and each retry of a timeout adds to the backlog", f.Timeout, f.Timeout))
	}
	if f.Breaker.Use == scenario.BreakerNone || f.Breaker.Use == "" {
		out = append(out, "no circuit breaker")
	}
	return out
}

// perClientFloor says the floor of f's budget that every client instance
// has of its own, whatever its traffic, and whether there is one: what
// adds up past the thresholds when many instances share little traffic.
func perClientFloor(f scenario.Fleet) (string, bool) {
	b := f.Budget
	switch {
	case f.Retry.MaxRetries == 0:
	case b.Use == scenario.BudgetWindow && b.Window.MinRetriesPerSecond > 0:
		return fmt.Sprintf("%g retries a second per instance", b.Window.MinRetriesPerSecond), true
	case b.Use == scenario.BudgetTokenBucket && b.TokenBucket.MinTokens > 0:
		return fmt.Sprintf("%g tokens per instance", b.TokenBucket.MinTokens), true
	case b.Use == scenario.BudgetConcurrency && b.Concurrency.MinConcurrency > 0:
		return fmt.Sprintf("%d retries in flight per instance", b.Concurrency.MinConcurrency), true
	case b.Use == scenario.BudgetGRPC:
		return fmt.Sprintf("%g tokens per channel", b.GRPC.MaxTokens), true
	case b.Use == scenario.BudgetAWS || b.Use == scenario.BudgetAWSAdaptive:
		return fmt.Sprintf("a quota of %d per client", b.AWS.Capacity), true
	}
	return "", false
}
