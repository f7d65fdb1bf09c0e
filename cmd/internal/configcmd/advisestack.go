package configcmd

import (
	"slices"
	"time"

	"github.com/retrystorm/retrystorm/importer"
	"github.com/retrystorm/retrystorm/resil/budget"
	"github.com/retrystorm/retrystorm/scenario"
	"github.com/retrystorm/retrystorm/verdict"
)

// stackCandidate is one way to place the retries, budgets and breakers
// of a stack: as it is, or changed layer by layer.
type stackCandidate struct {
	Name string `json:"name"`
	// At is the layer that keeps its retries; -1: no one layer (every
	// layer keeps its own, or none retries).
	At int `json:"retrying_layer"`
	// Changes says what each layer becomes, in order: "as it is", "no
	// retries", "+ budget (...)", "+ breaker".
	Changes []string `json:"changes"`
	// Writable is whether each changed layer's files can say its new
	// policy: its format can (importer.Expressible; no config format here
	// has a breaker on the whole dependency), and the edit of its own
	// files reads back as the policy (importer.Edit: an Istio
	// VirtualService alone has no place for a retry budget). Unwritable
	// says why not, when it is not.
	Writable     bool                 `json:"writable"`
	Unwritable   string               `json:"unwritable,omitempty"`
	Verdict      verdict.Level        `json:"verdict"`
	FailingCells int                  `json:"failing_cells"`
	IntentsLost  int64                `json:"intents_lost"`
	Origin       float64              `json:"attempts_per_intent_at_origin_in_outage"`
	Result       *verdict.StackResult `json:"-"`
	fleets       []scenario.Fleet     // each layer's policy in this candidate
	changed      int                  // how many settings it changes: fewer wins a tie
}

// formatBudget is the retry budget a layer's own format writes, the one
// advise tries at that layer: what its product offers (importer.Expressible).
// ok is false for a format with none to add (Linkerd's routes have theirs
// or none the annotations can say).
func formatBudget(f importer.Format) (b scenario.Budget, name string, ok bool) {
	switch f {
	case importer.Envoy, importer.Istio:
		return scenario.Budget{Use: scenario.BudgetConcurrency, Concurrency: budget.ConcurrencySettings{Percent: 20, MinConcurrency: 3}}, "a retry budget of 20% in flight, at least 3", true
	case importer.GRPC:
		return scenario.Budget{Use: scenario.BudgetGRPC, GRPC: budget.GRPCThrottleSettings{MaxTokens: 10, TokenRatio: 0.1}}, "retryThrottling 10 tokens, ratio 0.1", true
	case importer.AWS:
		return scenario.Budget{Use: scenario.BudgetAWS, AWS: budget.AWSQuotaSettings{Capacity: 500, RetryCost: 5, TimeoutCost: 10, NoRetryIncrement: 1}}, "the AWS retry quota (standard mode)", true
	case importer.ScenarioFleet:
		return scenario.Budget{Use: scenario.BudgetTokenBucket, TokenBucket: budget.TokenBucketSettings{Ratio: 0.1, Funding: budget.FundedBySuccess, MinTokens: 10, MaxTokens: 100, RetryCost: 1, TimeoutCost: 1}}, "a token bucket of 10%", true
	}
	return scenario.Budget{}, "", false
}

// stackBreaker is the breaker advise tries at a layer: resil's, as advise
// on one file tries it.
var stackBreaker = scenario.Breaker{Use: scenario.BreakerConsecutive, Threshold: 5, Cooldown: 5 * time.Second, Probes: 1, Scope: "all"}

func hasBudget(f scenario.Fleet) bool {
	return f.Budget.Use != "" && f.Budget.Use != scenario.BudgetNone
}

func hasBreaker(f scenario.Fleet) bool {
	return f.Breaker.Use != "" && f.Breaker.Use != scenario.BreakerNone
}

// stackCandidates are the placements advise tries: the stack as it is;
// for each layer that retries, the retries there only, then with its
// format's budget, then with a breaker too; for each layer that retries
// more than once, one retry there only; no retries at any layer; and
// every retrying layer keeping its retries with its format's budget
// added.
func stackCandidates(files []stackFile) []stackCandidate {
	as := func() []scenario.Fleet {
		var fs []scenario.Fleet
		for _, f := range files {
			fs = append(fs, f.layer.Input.Fleet)
		}
		return fs
	}
	same := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = "as it is"
		}
		return out
	}
	out := []stackCandidate{{Name: "as it is", At: -1, fleets: as(), Changes: same(len(files))}}
	for at, f := range files {
		if f.layer.Input.Fleet.Retry.MaxRetries == 0 {
			continue // a layer that does not retry cannot be the one that does
		}
		only := stackCandidate{Name: "retry at " + f.layer.Name + " only", At: at, fleets: as(), Changes: same(len(files))}
		for i := range files {
			if i != at && only.fleets[i].Retry.MaxRetries != 0 {
				only.fleets[i].Retry.MaxRetries = 0
				only.Changes[i] = "no retries"
				only.changed++
			}
		}
		if only.changed > 0 { // else it is the chain as it is: one layer retries
			out = append(out, only)
		}
		b, bname, ok := formatBudget(f.from.Format)
		budgeted := only
		if ok && !hasBudget(f.layer.Input.Fleet) {
			budgeted.fleets, budgeted.Changes = slices.Clone(only.fleets), slices.Clone(only.Changes)
			budgeted.fleets[at].Budget = b
			budgeted.Changes[at] = "+ budget (" + bname + ")"
			budgeted.Name += ", with " + bname
			budgeted.changed++
			out = append(out, budgeted)
		}
		if !hasBreaker(f.layer.Input.Fleet) {
			br := budgeted
			br.fleets, br.Changes = slices.Clone(budgeted.fleets), slices.Clone(budgeted.Changes)
			br.fleets[at].Breaker = stackBreaker
			if br.Changes[at] == "as it is" {
				br.Changes[at] = "+ breaker"
			} else {
				br.Changes[at] += " + breaker"
			}
			br.Name += ", and a breaker"
			if budgeted.Name == only.Name {
				br.Name = only.Name + ", with a breaker"
			}
			br.changed++
			out = append(out, br)
		}
	}
	// Placements every format writes (a layer's retries fewer, or none),
	// so that a chain none of whose budgets its files can hold (an Istio
	// VirtualService without a DestinationRule) still gets advice that
	// its files can take.
	none := stackCandidate{Name: "no retries at any layer", At: -1, fleets: as(), Changes: same(len(files))}
	for i := range files {
		if none.fleets[i].Retry.MaxRetries != 0 {
			none.fleets[i].Retry.MaxRetries = 0
			none.Changes[i] = "no retries"
			none.changed++
		}
	}
	for at, f := range files {
		if f.layer.Input.Fleet.Retry.MaxRetries <= 1 {
			continue // once already, or never, or without a limit (Linkerd's, bounded by its budget)
		}
		once := stackCandidate{Name: "retry at " + f.layer.Name + " only, once", At: at, fleets: slices.Clone(none.fleets), Changes: slices.Clone(none.Changes), changed: none.changed}
		once.fleets[at].Retry.MaxRetries = 1
		once.Changes[at] = "one retry"
		out = append(out, once)
	}
	if none.changed > 0 {
		out = append(out, none)
	}
	every := stackCandidate{Name: "every layer's retries, each with a budget", At: -1, fleets: as(), Changes: same(len(files))}
	for i, f := range files {
		b, bname, ok := formatBudget(f.from.Format)
		if f.layer.Input.Fleet.Retry.MaxRetries != 0 && ok && !hasBudget(f.layer.Input.Fleet) {
			every.fleets[i].Budget = b
			every.Changes[i] = "+ budget (" + bname + ")"
			every.changed++
		}
	}
	if every.changed > 0 {
		out = append(out, every)
	}
	return out
}
