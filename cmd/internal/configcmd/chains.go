package configcmd

import (
	"cmp"
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/retrystorm/retrystorm/experiment"
	"github.com/retrystorm/retrystorm/grid"
	"github.com/retrystorm/retrystorm/verdict"
)

// defaultMaxRuns is --max-runs' default: the most simulations a check of
// a stack or of manifests, or an advise search, makes.
const defaultMaxRuns = 20_000

// chainSet is what check --stack or --manifests checks: its chains, in
// order, and what could not be matched.
type chainSet struct {
	source    string // "--stack a,b,c" or "--manifests DIR"
	single    bool   // --stack: one chain, printed as a stack
	chains    [][]verdict.StackLayer
	unmatched []string
}

// runChains checks the chains of set: identical ones (the same policies
// layer by layer, and instances) once, the work counted before it starts
// and refused past --max-runs. With --shard it runs the shard's part of
// every distinct chain and prints it for merge; else it prints each
// chain's verdict and gates.
func (c *CheckOptions) runChains(ctx context.Context, o IO, set chainSet, co verdict.CheckOptions, opts experiment.Options, sh grid.Shard) error {
	head := o.Stdout
	if c.JSON {
		head = o.Stderr // the JSON has it too
	}
	index := map[string]int{}
	var distinct [][]verdict.StackLayer
	of := make([]int, len(set.chains))
	for i, ch := range set.chains {
		key := chainKey(ch)
		k, ok := index[key]
		if !ok {
			k = len(distinct)
			index[key] = k
			distinct = append(distinct, ch)
		}
		of[i] = k
	}
	runs := 0
	for _, ch := range distinct {
		per, err := verdict.StackRuns(co, ch)
		if err != nil {
			return usagef("%v", err)
		}
		runs += per
	}
	most := cmp.Or(c.MaxRuns, defaultMaxRuns)
	if runs > most {
		return usagef("%s: %d distinct chains (of %d), %d simulations in all, more than --max-runs %d: give fewer --seeds, raise --max-runs, split the work with --shard, or split the directory", set.source, len(distinct), len(set.chains), runs, most)
	}
	if !set.single {
		fmt.Fprintf(head, "%d distinct chains of %d, %d simulations in all.\n\n", len(distinct), len(set.chains), runs)
	}
	m := &verdict.StackShard{Shard: sh.String(), Source: set.source, Unmatched: set.unmatched}
	if m.Unmatched == nil {
		m.Unmatched = []string{}
	}
	results, err := checkChains(ctx, distinct, co, opts, sh)
	if err != nil {
		return costly(err)
	}
	m.Results = results
	if set.single && c.EmitWorst != "" && sh.Count <= 1 {
		inputs := slices.Clone(c.Inputs)
		for _, l := range set.chains[0] {
			inputs = append(inputs, l.File)
		}
		if err := emitWorst(o, results[0].Check, []verdict.CheckInput{verdict.StackInput(set.chains[0])}, co.Base, c.EmitWorst, inputs); err != nil {
			return err
		}
	}
	for i, ch := range set.chains {
		r := m.Results[of[i]]
		sc := verdict.StackShardChain{Chain: chainName(ch), Distinct: of[i]}
		for k, l := range ch {
			lr := r.Layers[k]
			lr.Name, lr.File, lr.Line, lr.Via, lr.Origin = l.Name, l.File, l.Line, l.Via, l.Input.Origin
			// Every setting that would be blamed, at this chain's own
			// files: kept when the verdict is unsafe.
			lr.Blame = verdict.BlameAt(l.Name, l.File, l.Settings, blameWhys(r.Layers[k].Blame))
			sc.Layers = append(sc.Layers, lr)
		}
		m.Chains = append(m.Chains, sc)
	}
	if sh.Count > 1 {
		return writeJSON(o.Stdout, m) // the verdicts wait for merge
	}
	return c.printChains(o, m, set.single)
}

// printChains prints the chains of a whole (or merged) stack shard and
// gates on their verdicts: a --stack as its one chain, manifests chain
// by chain.
func (c *CheckOptions) printChains(o IO, m *verdict.StackShard, single bool) error {
	var vs []verdict.CIResult
	var results []*verdict.StackResult
	seen := map[int]bool{}
	for i := range m.Chains {
		own := m.StackRun(i)
		results = append(results, own)
		v := verdict.StackFindings(own)
		v[0].Name = own.Chain
		vs = append(vs, v...)
		if c.JSON {
			continue
		}
		if !single {
			fmt.Fprintf(o.Stdout, "Chain: %s\n", own.Chain)
			for _, l := range own.Layers {
				if l.Via != "" {
					fmt.Fprintf(o.Stdout, "    via %s\n", l.Via)
				}
				fmt.Fprintf(o.Stdout, "  %s (%s), %s\n", l.Name, fileLine(l.File, l.Line), instances(l.Instances))
			}
			if seen[m.Chains[i].Distinct] {
				fmt.Fprintln(o.Stdout, "  (the same policies as a chain above: simulated once)")
			}
		}
		seen[m.Chains[i].Distinct] = true
		if err := own.Render(o.Stdout, o.Style); err != nil {
			return err
		}
		if single {
			if err := writeReport(o, c.Out, own.Check.Section(), "retrystorm check "+m.Source); err != nil {
				return err
			}
		}
	}
	if c.JSON {
		var err error
		if single {
			err = writeJSON(o.Stdout, results[0])
		} else {
			err = writeJSON(o.Stdout, m.Manifests())
		}
		if err != nil {
			return err
		}
	}
	var settings verdict.Settings
	if len(results) > 0 {
		settings = verdict.SettingsOf(results[0].Check)
	}
	return c.gate(o, vs, settings)
}

// chainsAtOnce is how many distinct chains a check of manifests checks at
// a time. Each chain's runs come in a few grids, one after another (its
// cells, its runs with retries off, its margin's searches, its outage
// run), and a grid's last runs leave cores idle: with one chain at a
// time, BenchmarkManifests1000 kept two cores 88% busy.
const chainsAtOnce = 2

// checkChains checks the distinct chains, chainsAtOnce at a time, and
// returns their results in their order. The chains at once share
// opts.Workers (--workers bounds the simulations at once, whatever the
// chains). Their identical runs (with retries off) are made once, or
// twice where two chains at once meet one together: what is printed is
// the same either way (RunCache). Progress counts chains, not runs: the
// chains' grids interleave. The error is the first chain's, in their
// order, as when they ran one after another: a chain that fails stops
// only the chains after it.
func checkChains(ctx context.Context, distinct [][]verdict.StackLayer, co verdict.CheckOptions, opts experiment.Options, sh grid.Shard) ([]*verdict.StackResult, error) {
	shared := new(verdict.RunCache)
	workers := opts.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	at := max(1, min(chainsAtOnce, workers, len(distinct)))
	progress := opts.Progress
	if at > 1 {
		opts.Progress = nil
	}
	opts.Workers = max(1, workers/at)
	results := make([]*verdict.StackResult, len(distinct))
	errs := make([]error, len(distinct))
	cancels := make([]context.CancelFunc, len(distinct))
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		done   int
		failed = len(distinct) // the first chain, in order, that failed
	)
	slots := make(chan struct{}, at)
	for k, ch := range distinct {
		slots <- struct{}{}
		mu.Lock()
		stop := failed < k
		cctx, cancel := context.WithCancel(ctx)
		cancels[k] = cancel
		mu.Unlock()
		if stop || ctx.Err() != nil {
			cancel()
			break
		}
		wg.Go(func() {
			defer func() { <-slots }()
			defer cancel()
			cs := co
			cs.Shard, cs.Runs = sh, shared
			// Each distinct chain's outage run is made by one shard, in turn.
			results[k], errs[k] = verdict.CheckStackShard(cctx, ch, cs, opts, sh.Count <= 1 || k%sh.Count == sh.Index)
			mu.Lock()
			defer mu.Unlock()
			if errs[k] != nil {
				failed = min(failed, k)
				for _, c := range cancels[k+1:] {
					if c != nil {
						c()
					}
				}
				return
			}
			if at > 1 && progress != nil {
				done++
				progress(done, len(distinct))
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return results, ctx.Err()
}

func chainName(ch []verdict.StackLayer) string {
	var names []string
	for _, l := range ch {
		names = append(names, l.Name)
	}
	return strings.Join(names, " → ")
}
