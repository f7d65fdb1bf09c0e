package configcmd

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/retrystorm/retrystorm/experiment"
	"github.com/retrystorm/retrystorm/importer"
	"github.com/retrystorm/retrystorm/report"
	"github.com/retrystorm/retrystorm/scenario"
	"github.com/retrystorm/retrystorm/verdict"
)

// RunAdviseStack is advise --stack (and --manifests) with check's options
// alone: the advice printed, nothing written (RunAdviseChains writes).
func RunAdviseStack(ctx context.Context, files []string, c CheckOptions, o IO) error {
	return RunAdviseChains(ctx, files, AdviseOptions{CheckOptions: c}, o)
}

// RunAdviseChains is advise --stack and advise --manifests: for each
// chain (the one --stack gives, or each distinct chain the manifests
// name) it says at which layer to retry, which layers should not, and
// which budget and breaker each layer should have, by checking the chain
// as it is and each placement of stackCandidates through check's
// envelope (the work counted first, and refused past --max-runs); then
// it writes each layer's change into that layer's own file under
// importer.Edit's rules (only what changes, in place, read back), and
// with --write DIR or --in-place applies them as advise on one file does.
func RunAdviseChains(ctx context.Context, files []string, a AdviseOptions, o IO) error {
	c := a.CheckOptions
	var chains [][]stackFile
	var st *stack
	var err error
	if c.Manifests != "" {
		if len(files) > 0 || len(c.Stack) > 0 {
			return usagef("advise --manifests %s takes no files and no --stack: it finds the chains in the directory", c.Manifests)
		}
		if st, chains, err = readManifestChains(o, c); err != nil {
			return err
		}
	} else {
		if st, err = readStack(o, "advise", files, c); err != nil {
			return err
		}
		chains = [][]stackFile{st.files}
	}
	if st.shard.Count > 1 {
		return usagef("--shard is not supported with advise --stack or --manifests yet")
	}
	co := verdict.CheckOptions{Base: st.base, Load: c.Load, Dip: c.Dip, Seeds: c.Seeds, Clients: c.Clients, NoMargin: true, CountCollapsed: true}
	runs, per := 0, make([]int, len(chains))
	for k, ch := range chains {
		n, err := verdict.StackRuns(co, layersOf(ch))
		if err != nil {
			return usagef("%v", err)
		}
		per[k] = n
		runs += n * len(stackCandidates(ch))
	}
	most := cmp.Or(c.MaxRuns, defaultMaxRuns)
	count := fmt.Sprintf("%d placements × %d simulations each = %d simulations", len(stackCandidates(chains[0])), per[0], runs)
	if len(chains) > 1 {
		count = fmt.Sprintf("%d chains, %d simulations in all", len(chains), runs)
	}
	if runs > most {
		return usagef("advise: %s, more than --max-runs %d: give fewer --seeds or raise --max-runs", count, most)
	}
	if !c.JSON {
		fmt.Fprintf(o.Stderr, "advise: %s.\n", count)
	}
	var all []chainAdvice
	for _, ch := range chains {
		adv, err := adviseChain(ctx, ch, co, st.opts)
		if err != nil {
			return err
		}
		all = append(all, adv)
	}
	if c.JSON {
		if c.Manifests == "" {
			return writeJSON(o.Stdout, all[0])
		}
		return writeJSON(o.Stdout, struct {
			Source string        `json:"source"`
			Chains []chainAdvice `json:"chains"`
		}{"--manifests " + c.Manifests, all})
	}
	edits := fileEdits{assume: c.assume()}
	for k, adv := range all {
		if len(all) > 1 {
			fmt.Fprintf(o.Stdout, "\n== Chain %d of %d: %s\n\n", k+1, len(all), adv.Chain)
		}
		if err := adv.print(o, chains[k], &edits); err != nil {
			return err
		}
		if as := adv.asItIs(); as.Verdict > edits.worst {
			edits.worst = as.Verdict
		}
		if adv.best.changed > 0 {
			edits.advised = append(edits.advised, adv.Chain+": "+adv.best.Name)
		}
	}
	return edits.apply(o, a, append(manifestInputs(chains), a.Inputs...))
}

// chainAdvice is advise's answer for one chain: every placement tried,
// ranked, and the best one its layers' formats can write.
type chainAdvice struct {
	Chain       string           `json:"chain"`
	Candidates  []stackCandidate `json:"candidates"`
	Recommended string           `json:"recommended"`
	best, top   stackCandidate
}

// asItIs is the chain as it is, among the placements tried.
func (adv chainAdvice) asItIs() stackCandidate {
	for _, c := range adv.Candidates {
		if c.At == -1 && c.changed == 0 {
			return c
		}
	}
	return adv.Candidates[0]
}

// layersOf is a chain's layers as the verdict engine takes them.
func layersOf(files []stackFile) []verdict.StackLayer {
	var out []verdict.StackLayer
	for _, f := range files {
		out = append(out, f.layer)
	}
	return out
}

// adviseChain checks every placement of a chain, each on the faults the
// chain as it is is judged on (and those it retries on), and ranks them:
// the best verdict, then the fewest cells against it, then the fewest
// intents lost, then the least amplification, then the fewest changes;
// ties keep the chain as it is first.
func adviseChain(ctx context.Context, files []stackFile, co verdict.CheckOptions, opts experiment.Options) (chainAdvice, error) {
	var names []string
	for _, f := range files {
		names = append(names, f.layer.Name)
	}
	cands := stackCandidates(files)
	for k := range cands {
		cand := &cands[k]
		layers := layersOf(files)
		for i := range layers {
			layers[i].Input.Fleet = cand.fleets[i]
		}
		r, err := verdict.CheckStack(ctx, layers, co, opts)
		if err != nil {
			return chainAdvice{}, costly(err)
		}
		if k == 0 {
			// The chain as it is comes first: every other placement is
			// judged on the faults it is judged on too, so that one that
			// retries less is not better for running fewer cells.
			co.JudgeOn = nil
			for i, ft := range r.Check.Faults {
				if r.Check.Fleets[0].Judged[i] {
					co.JudgeOn = append(co.JudgeOn, ft.Name)
				}
			}
		}
		cand.Verdict, cand.FailingCells, cand.Result = r.Level, r.Check.FailingCells(0), r
		cand.Writable, cand.Unwritable = writable(files, cand)
		cand.Origin = r.Layers[len(r.Layers)-1].Simulated
		for _, row := range r.Check.Fleets[0].Cells {
			for _, cell := range row {
				cand.IntentsLost += cell.IntentsLost
			}
		}
	}
	ranked := slices.Clone(cands)
	slices.SortStableFunc(ranked, func(a, b stackCandidate) int {
		return cmp.Or(cmp.Compare(a.Verdict, b.Verdict), cmp.Compare(a.FailingCells, b.FailingCells), cmp.Compare(a.IntentsLost, b.IntentsLost), cmp.Compare(a.Origin, b.Origin), cmp.Compare(a.changed, b.changed))
	})
	// The recommendation is the best placement the files can say; one
	// ranked above it needs what no format writes (resil's breaker in
	// front of the calls), and is said as such.
	adv := chainAdvice{Chain: strings.Join(names, " → "), Candidates: ranked, best: ranked[0], top: ranked[0]}
	for _, cd := range ranked {
		if cd.Writable {
			adv.best = cd
			break
		}
	}
	adv.Recommended = adv.best.Name
	return adv, nil
}

// writable reports whether every layer cand changes can say its new
// policy in its own files, and why not when one cannot: its format has
// no such setting (no config format has a breaker on the whole
// dependency: resil's, or the mesh's, goes in front of the calls), or
// the edit of its files does not read back as the policy (an Istio
// VirtualService alone has no DestinationRule for a retry budget).
func writable(files []stackFile, cand *stackCandidate) (bool, string) {
	for i, f := range files {
		if want := cand.fleets[i]; cand.Changes[i] != "as it is" && !importer.Expressible(want, f.from.Format) {
			if hasBreaker(want) {
				return false, "no layer's format can write it (a breaker on the whole dependency is resil's, or the mesh's, in front of the calls)"
			}
			return false, fmt.Sprintf("%s's format cannot write it", f.layer.Name)
		}
	}
	for i, f := range files {
		if cand.Changes[i] == "as it is" {
			continue
		}
		if _, _, err := importer.Edit(f.srcs, f.from, layerPolicy(f, cand.fleets[i])); err != nil {
			return false, fmt.Sprintf("%s's files cannot hold it (%v)", f.layer.Name, err)
		}
	}
	return true, ""
}

// layerPolicy is layer f's policy as advised: its own, with want's
// retries, budget and breaker.
func layerPolicy(f stackFile, want scenario.Fleet) scenario.Fleet {
	rec := f.from.Fleet
	rec.Retry.MaxRetries, rec.Budget, rec.Breaker = want.Retry.MaxRetries, want.Budget, want.Breaker
	return rec
}

// print writes the ranking, the recommendation and each layer's change
// (a diff of its own file), and keeps the edits in edits.
func (adv chainAdvice) print(o IO, files []stackFile, edits *fileEdits) error {
	t := report.Table{Title: fmt.Sprintf("Where to retry, and with what, in %s (check's faults, loads and seeds; ranked)", adv.Chain),
		Columns: []report.Column{{Name: "placement"}, {Name: "verdict"}, {Name: "cells against it", Align: report.Right}, {Name: "intents lost", Align: report.Right}, {Name: "attempts per intent at the origin, total outage", Align: report.Right}}}
	for _, cd := range adv.Candidates {
		t.Rows = append(t.Rows, []string{cd.Name, cd.Verdict.String(), fmt.Sprint(cd.FailingCells), report.Int(cd.IntentsLost), fmt.Sprintf("%.3g", cd.Origin)})
	}
	if err := t.Render(o.Stdout, o.Style); err != nil {
		return err
	}
	best := adv.best
	fmt.Fprintf(o.Stdout, "\nRecommendation: %s.\n", best.Name)
	if adv.top.Name != best.Name {
		fmt.Fprintf(o.Stdout, "Ranked above it, %s: %s.\n", adv.top.Name, adv.top.Unwritable)
	}
	if best.changed == 0 {
		fmt.Fprintln(o.Stdout, "Keep every layer as it is: no placement tried does better here.")
		return nil
	}
	for i, f := range files {
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
		rec := layerPolicy(f, want)
		if f.embedded {
			fmt.Fprintf(o.Stdout, "\n%s: %s. Its change, in the config its data holds (%s, line %d on): not written, as the manifest holds it as a string; change it there:\n", f.layer.Name, best.Changes[i], f.layer.File, f.layer.Line)
		} else {
			fmt.Fprintf(o.Stdout, "\n%s: %s. Its change, in its own file:\n", f.layer.Name, best.Changes[i])
		}
		diff, notes, err := edits.add(f, rec)
		switch {
		case errors.Is(err, importer.ErrNotAccepted), errors.Is(err, importer.ErrReadBack):
			return fmt.Errorf("advise: %s: %w", f.layer.Name, err) // a bug of ours, never advice
		case err != nil:
			fmt.Fprintf(o.Stdout, "  (not written: %v)\n", err)
			continue
		}
		fmt.Fprint(o.Stdout, diff)
		for _, n := range notes {
			fmt.Fprintf(o.Stdout, "  note: %s\n", n)
		}
	}
	return nil
}
