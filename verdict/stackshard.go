package verdict

import (
	"fmt"
	"slices"

	"github.com/retrystorm/retrystorm/grid"

	"github.com/retrystorm/retrystorm/internal/safetext"
	"github.com/retrystorm/retrystorm/scenario"
)

// StackShard is one shard of check --stack or --manifests (--shard i/n
// --json), for merge: every chain found, named layer by layer with its
// blame at its own files, and each distinct chain's part (its share of
// check's cells; one shard also makes its outage run). A merged one has
// every cell, and the verdicts.
type StackShard struct {
	Shard  string `json:"stack_shard"` // "i/n"; "1/1" once merged
	Source string `json:"source"`      // "--stack a,b,c" or "--manifests DIR": the same in every shard
	// Chains are every chain, in order; Distinct indexes Results.
	Chains    []StackShardChain `json:"chains"`
	Results   []*StackResult    `json:"distinct"`
	Unmatched []string          `json:"unmatched"`
}

// StackShardChain is one chain of a stack shard: its layers as named in
// its own files (with every setting that would be blamed, kept if the
// merged verdict is unsafe), and which distinct chain it runs as.
type StackShardChain struct {
	Chain    string             `json:"chain"`
	Distinct int                `json:"distinct"`
	Layers   []StackLayerResult `json:"layers"`
}

// Bounds of a stack shard, checked before anything is made of it.
const (
	maxStackChains = 100_000
	maxStackLayers = scenario.MaxTiers + 1
	maxStackBlame  = 64 // settings to blame per layer
	maxUnmatched   = 100_000
)

// checkStackShard checks shard r against its schema and, after the
// first, against the first shard.
func (s checker) stack(r, first *StackShard) {
	s.Shard("stack_shard", r.Shard, first.Shard)
	if !s.Count("chains", len(r.Chains), 1, maxStackChains) || !s.Count("distinct", len(r.Results), 1, len(r.Chains)) ||
		!s.Count("unmatched", len(r.Unmatched), 0, maxUnmatched) {
		return
	}
	r.Source = safetext.Name(r.Source)
	for i := range r.Unmatched {
		r.Unmatched[i] = safetext.Escape(r.Unmatched[i])
	}
	for i := range r.Chains {
		ch := &r.Chains[i]
		at := fmt.Sprintf("chains[%d]", i)
		if ch.Distinct < 0 || ch.Distinct >= len(r.Results) {
			s.Failf(at+".distinct", "%d: want 0 to %d", ch.Distinct, len(r.Results)-1)
			return
		}
		if !s.Count(at+".layers", len(ch.Layers), 2, maxStackLayers) {
			return
		}
		ch.Chain = safetext.Name(ch.Chain)
		for k := range ch.Layers {
			s.stackLayer(fmt.Sprintf("%s.layers[%d]", at, k), &ch.Layers[k])
		}
	}
	for i, d := range r.Results {
		at := fmt.Sprintf("distinct[%d]", i)
		if d == nil || d.Check == nil {
			s.Failf(at, "no result")
			return
		}
		if !s.Count(at+".layers", len(d.Layers), 2, maxStackLayers) {
			return
		}
		for k := range d.Layers {
			s.stackLayer(fmt.Sprintf("%s.layers[%d]", at, k), &d.Layers[k])
		}
		if d.Check.Shard != r.Shard {
			s.Failf(at+".check.shard", "%q, not the shard's %q", d.Check.Shard, r.Shard)
		}
		var fc *CheckResult
		if i < len(first.Results) && first.Results[i] != nil {
			fc = first.Results[i].Check
		}
		if r == first || fc == nil {
			fc = d.Check
		}
		s.check(d.Check, fc)
		if s.Err() == nil && len(d.Check.Fleets) != 1 {
			s.Failf(at+".check.fleets", "%d fleets: a chain is one", len(d.Check.Fleets))
		}
	}
	for _, ch := range r.Chains {
		if s.Err() == nil && len(ch.Layers) != len(r.Results[ch.Distinct].Layers) {
			s.Failf("chains", "chain %q has %d layers, its distinct chain %d", ch.Chain, len(ch.Layers), len(r.Results[ch.Distinct].Layers))
		}
	}
	if s.Err() != nil || r == first {
		return
	}
	s.Same("source", r.Source == first.Source)
	s.Same("chains", slices.EqualFunc(r.Chains, first.Chains, func(a, b StackShardChain) bool {
		return a.Chain == b.Chain && a.Distinct == b.Distinct && len(a.Layers) == len(b.Layers)
	}))
	s.Same("distinct", len(r.Results) == len(first.Results))
}

// stackLayer checks one layer's numbers and quotes its names.
func (s checker) stackLayer(at string, l *StackLayerResult) {
	s.Number(at+".closed_form", l.ClosedForm, 0, 1e12)
	s.Number(at+".simulated", l.Simulated, 0, 1e12)
	s.Number(at+".max_retries", float64(l.MaxRetries), -1, 1e6)
	s.Number(at+".line", float64(l.Line), 0, 1<<31)
	s.Number(at+".instances", float64(l.Instances), 0, maxTierReplicas)
	if !s.Count(at+".blame", len(l.Blame), 0, maxStackBlame) {
		return
	}
	l.Name, l.File, l.Origin, l.Via = safetext.Name(l.Name), safetext.Name(l.File), safetext.Name(l.Origin), safetext.Escape(l.Via)
	for k := range l.Blame {
		b := &l.Blame[k]
		s.Number(fmt.Sprintf("%s.blame[%d].line", at, k), float64(b.Line), 0, 1<<31)
		b.Layer, b.Setting, b.File, b.Why = safetext.Name(b.Layer), safetext.Escape(b.Setting), safetext.Name(b.File), safetext.Escape(b.Why)
	}
}

// MergeStack puts the shards of one check --stack or --manifests
// together: each distinct chain's cells from every shard (as MergeCheck),
// its layers' amplification from the one shard that made its outage run,
// then each chain's verdict. The shards must have been checked
// (MergeFiles does) and be of the same run.
func MergeStack(parts []*StackShard) (*StackShard, error) {
	first := parts[0]
	m := &StackShard{Shard: grid.Shard{}.String(), Source: first.Source, Chains: first.Chains, Unmatched: first.Unmatched}
	for k := range first.Results {
		var checks []*CheckResult
		var outage *StackResult
		for _, p := range parts {
			d := p.Results[k]
			checks = append(checks, d.Check)
			if d.Outage {
				if outage != nil {
					return nil, fmt.Errorf("merge: distinct chain %d: two shards made its outage run (shard %s and %s)", k, outage.Check.Shard, d.Check.Shard)
				}
				outage = d
			}
		}
		if outage == nil {
			return nil, fmt.Errorf("merge: distinct chain %d: no shard made its outage run: give every shard's result", k)
		}
		c, err := MergeCheck(checks)
		if err != nil {
			return nil, err
		}
		r := &StackResult{Chain: outage.Chain, Layers: slices.Clone(outage.Layers), Check: c}
		r.finish()
		m.Results = append(m.Results, r)
	}
	return m, nil
}

// StackRun is one chain of a merged stack shard as check prints it: the
// distinct chain's result under this chain's names, with its blame when
// the verdict is unsafe.
func (m *StackShard) StackRun(i int) *StackResult {
	ch := m.Chains[i]
	r := m.Results[ch.Distinct]
	own := *r
	own.Chain = ch.Chain
	own.Layers = slices.Clone(r.Layers)
	for k, l := range ch.Layers {
		own.Layers[k].Name, own.Layers[k].File, own.Layers[k].Line, own.Layers[k].Via = l.Name, l.File, l.Line, l.Via
		own.Layers[k].Origin, own.Layers[k].Instances = l.Origin, l.Instances
		own.Layers[k].Blame = nil
		if r.Level != Safe {
			own.Layers[k].Blame = l.Blame
		}
	}
	return &own
}
