package configcmd

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/retrystorm/retrystorm/experiment"
	"github.com/retrystorm/retrystorm/importer"
	"github.com/retrystorm/retrystorm/report"
)

// stackCandidate is one way to place the retries of a stack: as it is,
// or at one layer only (the others make one attempt).
type stackCandidate struct {
	Name string `json:"name"`
	// At is the layer that keeps its retries; -1: every layer keeps its
	// own (the stack as it is).
	At          int                     `json:"retrying_layer"`
	Unsafe      bool                    `json:"unsafe"`
	UnsafeCells int                     `json:"unsafe_cells"`
	IntentsLost int64                   `json:"intents_lost"`
	Origin      float64                 `json:"attempts_per_intent_at_origin_in_outage"`
	Result      *experiment.StackResult `json:"-"`
}

// RunAdviseStack is advise --stack: it says at which layer of the chain
// to retry, and which layers should not, by checking the stack as it is
// and with the retries at one layer only, each through check's envelope;
// then it writes each layer's change into that layer's own file, as a
// diff (importer.Edit's rules: only what changes, in place).
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
	co := experiment.CheckOptions{Base: st.base, Load: c.Load, Dip: c.Dip, Seeds: c.Seeds, Clients: c.Clients}
	var cands []stackCandidate
	for at := -1; at < len(st.files); at++ {
		name := "as it is"
		if at >= 0 {
			if st.files[at].layer.Input.Fleet.Retry.MaxRetries == 0 {
				continue // a layer that does not retry cannot be the one that does
			}
			name = "retry at " + st.files[at].layer.Name + " only"
		}
		var layers []experiment.StackLayer
		for i, f := range st.files {
			l := f.layer
			if at >= 0 && i != at {
				l.Input.Fleet.Retry.MaxRetries = 0
			}
			layers = append(layers, l)
		}
		r, err := experiment.CheckStack(ctx, layers, co, st.opts)
		if err != nil {
			return costly(err)
		}
		cand := stackCandidate{Name: name, At: at, Unsafe: r.Unsafe, UnsafeCells: r.Check.UnsafeCells(0), Result: r,
			Origin: r.Layers[len(r.Layers)-1].Simulated}
		for _, row := range r.Check.Fleets[0].Cells {
			for _, cell := range row {
				cand.IntentsLost += cell.IntentsLost
			}
		}
		cands = append(cands, cand)
	}
	// The fewest unsafe cells, then the fewest intents lost, then the
	// least amplification; ties keep the stack as it is first.
	ranked := slices.Clone(cands)
	slices.SortStableFunc(ranked, func(a, b stackCandidate) int {
		return cmp.Or(cmp.Compare(a.UnsafeCells, b.UnsafeCells), cmp.Compare(a.IntentsLost, b.IntentsLost), cmp.Compare(a.Origin, b.Origin))
	})
	best := ranked[0]
	if c.JSON {
		return writeJSON(o.Stdout, struct {
			Chain       string           `json:"chain"`
			Candidates  []stackCandidate `json:"candidates"`
			Recommended string           `json:"recommended"`
		}{chain, ranked, best.Name})
	}
	t := report.Table{Title: fmt.Sprintf("Where to retry in %s (check's faults, loads and seeds; ranked)", chain),
		Columns: []report.Column{{Name: "retries"}, {Name: "verdict"}, {Name: "unsafe realistic cells", Align: report.Right}, {Name: "intents lost", Align: report.Right}, {Name: "attempts per intent at the origin, total outage", Align: report.Right}}}
	for _, cd := range ranked {
		v := "safe"
		if cd.Unsafe {
			v = "UNSAFE"
		}
		t.Rows = append(t.Rows, []string{cd.Name, v, fmt.Sprint(cd.UnsafeCells), report.Int(cd.IntentsLost), fmt.Sprintf("%.3g", cd.Origin)})
	}
	if err := t.Render(o.Stdout, o.Style); err != nil {
		return err
	}
	fmt.Fprintf(o.Stdout, "\nRecommendation: %s.\n", best.Name)
	if best.At < 0 {
		fmt.Fprintln(o.Stdout, "Keep every layer's retries as they are: no single retrying layer does better here.")
		return nil
	}
	for i, f := range st.files {
		if i == best.At {
			fmt.Fprintf(o.Stdout, "\n%s keeps its retries (%d).\n", f.layer.Name, f.layer.Input.Fleet.Retry.MaxRetries)
			continue
		}
		if f.layer.Input.Fleet.Retry.MaxRetries == 0 {
			fmt.Fprintf(o.Stdout, "\n%s does not retry: unchanged.\n", f.layer.Name)
			continue
		}
		rec := f.from.Fleet
		rec.Retry.MaxRetries = 0
		fmt.Fprintf(o.Stdout, "\n%s should not retry: its change, in its own file:\n", f.layer.Name)
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
