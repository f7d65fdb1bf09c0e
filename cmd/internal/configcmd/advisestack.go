package configcmd

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/retrystorm/retrystorm/importer"
	"github.com/retrystorm/retrystorm/report"
	"github.com/retrystorm/retrystorm/resil/budget"
	"github.com/retrystorm/retrystorm/scenario"
	"github.com/retrystorm/retrystorm/verdict"
)

// stackCandidate is one way to place the retries, budgets and breakers
// of a stack: as it is, or changed layer by layer.
type stackCandidate struct {
	Name string `json:"name"`
	// At is the layer that keeps its retries; -1: every layer keeps its
	// own.
	At int `json:"retrying_layer"`
	// Changes says what each layer becomes, in order: "as it is", "no
	// retries", "+ budget (...)", "+ breaker".
	Changes []string `json:"changes"`
	// Writable is whether each changed layer's format can say its new
	// policy (importer.Expressible): no config format here has a breaker
	// on the whole dependency, so a placement with one is not.
	Writable     bool                 `json:"writable"`
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
// format's budget, then with a breaker too; and every retrying layer
// keeping its retries with its format's budget added.
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
		out = append(out, only)
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

// RunAdviseStack is advise --stack: it says at which layer of the chain
// to retry, which layers should not, and which budget and breaker each
// layer should have, by checking the stack as it is and each placement
// of stackCandidates through check's envelope (the work counted first,
// and refused past --max-runs); then it writes each layer's change into
// that layer's own file, as a diff (importer.Edit's rules: only what
// changes, in place).
func RunAdviseStack(ctx context.Context, files []string, c CheckOptions, o IO) error {
	st, err := readStack(o, "advise", files, c)
	if err != nil {
		return err
	}
	if st.shard.Count > 1 {
		return usagef("--shard is not supported with advise --stack yet")
	}
	var names []string
	for _, f := range st.files {
		names = append(names, f.layer.Name)
	}
	chain := strings.Join(names, " → ")
	co := verdict.CheckOptions{Base: st.base, Load: c.Load, Dip: c.Dip, Seeds: c.Seeds, Clients: c.Clients, NoMargin: true}
	cands := stackCandidates(st.files)
	var layers []verdict.StackLayer
	for _, f := range st.files {
		layers = append(layers, f.layer)
	}
	per, err := verdict.StackRuns(co, layers)
	if err != nil {
		return usagef("%v", err)
	}
	most := cmp.Or(c.MaxRuns, defaultMaxRuns)
	if runs := per * len(cands); runs > most {
		return usagef("advise --stack: %d placements × %d simulations each = %d simulations, more than --max-runs %d: give fewer --seeds or raise --max-runs", len(cands), per, runs, most)
	}
	if !c.JSON {
		fmt.Fprintf(o.Stderr, "advise --stack: %d placements × %d simulations each = %d simulations.\n", len(cands), per, per*len(cands))
	}
	for k := range cands {
		cand := &cands[k]
		var layers []verdict.StackLayer
		for i, f := range st.files {
			l := f.layer
			l.Input.Fleet = cand.fleets[i]
			layers = append(layers, l)
		}
		r, err := verdict.CheckStack(ctx, layers, co, st.opts)
		if err != nil {
			return costly(err)
		}
		cand.Verdict, cand.FailingCells, cand.Result = r.Level, r.Check.FailingCells(0), r
		cand.Writable = true
		for i, f := range st.files {
			if cand.Changes[i] != "as it is" && !importer.Expressible(cand.fleets[i], f.from.Format) {
				cand.Writable = false
			}
		}
		cand.Origin = r.Layers[len(r.Layers)-1].Simulated
		for _, row := range r.Check.Fleets[0].Cells {
			for _, cell := range row {
				cand.IntentsLost += cell.IntentsLost
			}
		}
	}
	// The best verdict, then the fewest cells against it, then the
	// fewest intents lost, then the least amplification, then the fewest
	// changes; ties keep the stack as it is first.
	ranked := slices.Clone(cands)
	slices.SortStableFunc(ranked, func(a, b stackCandidate) int {
		return cmp.Or(cmp.Compare(a.Verdict, b.Verdict), cmp.Compare(a.FailingCells, b.FailingCells), cmp.Compare(a.IntentsLost, b.IntentsLost), cmp.Compare(a.Origin, b.Origin), cmp.Compare(a.changed, b.changed))
	})
	// The recommendation is the best placement the files can say; one
	// ranked above it needs what no format writes (resil's breaker in
	// front of the calls), and is said as such.
	best, top := ranked[0], ranked[0]
	for _, cd := range ranked {
		if cd.Writable {
			best = cd
			break
		}
	}
	if c.JSON {
		return writeJSON(o.Stdout, struct {
			Chain       string           `json:"chain"`
			Candidates  []stackCandidate `json:"candidates"`
			Recommended string           `json:"recommended"`
		}{chain, ranked, best.Name})
	}
	t := report.Table{Title: fmt.Sprintf("Where to retry, and with what, in %s (check's faults, loads and seeds; ranked)", chain),
		Columns: []report.Column{{Name: "placement"}, {Name: "verdict"}, {Name: "cells against it", Align: report.Right}, {Name: "intents lost", Align: report.Right}, {Name: "attempts per intent at the origin, total outage", Align: report.Right}}}
	for _, cd := range ranked {
		t.Rows = append(t.Rows, []string{cd.Name, cd.Verdict.String(), fmt.Sprint(cd.FailingCells), report.Int(cd.IntentsLost), fmt.Sprintf("%.3g", cd.Origin)})
	}
	if err := t.Render(o.Stdout, o.Style); err != nil {
		return err
	}
	fmt.Fprintf(o.Stdout, "\nRecommendation: %s.\n", best.Name)
	if top.Name != best.Name {
		fmt.Fprintf(o.Stdout, "Ranked above it, %s: no layer's format can write it (a breaker on the whole dependency is resil's, or the mesh's, in front of the calls).\n", top.Name)
	}
	if best.changed == 0 {
		fmt.Fprintln(o.Stdout, "Keep every layer as it is: no placement tried does better here.")
		return nil
	}
	for i, f := range st.files {
		rec := f.from.Fleet
		user := f.layer.Input.Fleet
		want := best.fleets[i]
		if want.Retry.MaxRetries == user.Retry.MaxRetries && want.Budget.Equal(user.Budget) && want.Breaker == user.Breaker {
			what := "keeps its retries"
			if user.Retry.MaxRetries == 0 {
				what = "does not retry"
			}
			fmt.Fprintf(o.Stdout, "\n%s %s: unchanged.\n", f.layer.Name, what)
			continue
		}
		rec.Retry.MaxRetries, rec.Budget, rec.Breaker = want.Retry.MaxRetries, want.Budget, want.Breaker
		fmt.Fprintf(o.Stdout, "\n%s: %s. Its change, in its own file:\n", f.layer.Name, best.Changes[i])
		edited, notes, err := importer.Edit(f.srcs, f.from, rec)
		if err != nil {
			fmt.Fprintf(o.Stdout, "  (not written: %v)\n", err)
			continue
		}
		for _, e := range edited {
			fmt.Fprint(o.Stdout, e.Diff)
		}
		for _, n := range notes {
			fmt.Fprintf(o.Stdout, "  note: %s\n", n)
		}
	}
	return nil
}
