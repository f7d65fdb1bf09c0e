package configcmd

import (
	"cmp"
	"context"
	"fmt"
	"strings"

	"github.com/retrystorm/retrystorm/cmd/internal/cli"
	"github.com/retrystorm/retrystorm/experiment"
	"github.com/retrystorm/retrystorm/importer"
	"github.com/retrystorm/retrystorm/internal/safetext"
	"github.com/retrystorm/retrystorm/verdict"
)

// Merge is `retrystorm merge`, run by retrystorm-full (full.Heavy).
func Merge(ctx context.Context, inv *cli.Invocation) error {
	io, clear := configIO(inv, "merge")
	defer clear()
	sweep, _, err := RunMerge(ctx, inv.Args, MergeOptions{JSON: inv.JSON, Out: inv.ReportDir(), Top: inv.Configs.Top}, io)
	if err != nil || sweep == nil {
		return configErr(err)
	}
	// A sweep's shards merged print as the sweep prints; a lab run's as
	// the lab's.
	title := experiment.Sweep.Title
	if sweep.Name == "lab" {
		title = "retrystorm lab: the shards of one run, merged"
	}
	if err := inv.Emit([]*experiment.Outcome{sweep}, sweep.JSON, title); err != nil {
		return err
	}
	if j, ok := sweep.JSON.(*experiment.MergedLabJSON); ok && j.Inconclusive() {
		return cli.ErrInconclusive
	}
	return nil
}

// MergeOptions are merge's flags, as internal/cli parsed them.
type MergeOptions struct {
	JSON bool   // --json
	Out  string // --out
	Top  int    // --top, for advise
}

// RunMerge is `retrystorm merge`: it puts the shard results in files (of
// one sweep, check, advise or lab run) together and prints what one run
// prints. A sweep's or a lab run's merge is printed by the caller (it is
// an experiment Outcome): the returned Outcome is non-nil then.
func RunMerge(ctx context.Context, files []string, m MergeOptions, o IO) (*experiment.Outcome, bool, error) {
	m.Top = cmp.Or(m.Top, 5) // zero means the flag's default
	if len(files) == 0 {
		return nil, false, usagef("merge takes the JSON of every shard: retrystorm merge FILE...")
	}
	if len(files) > verdict.MaxShards {
		return nil, false, usagef("%d files: merge takes at most %d shards", len(files), verdict.MaxShards)
	}
	var parts [][]byte
	total := 0
	for _, f := range files {
		data, err := o.read(f, maxShardSize)
		if err != nil {
			return nil, false, err
		}
		if total += len(data); total > verdict.MaxMergeBytes {
			return nil, false, usagef("%s: the shards are too large together (at most %d bytes)", safetext.Name(f), verdict.MaxMergeBytes)
		}
		parts = append(parts, data)
	}
	merged, err := verdict.MergeFiles(files, parts)
	if err != nil {
		// The command's name already heads the message.
		return nil, false, usagef("%s", strings.TrimPrefix(err.Error(), "merge: "))
	}
	command := "retrystorm merge " + strings.Join(files, " ")
	switch {
	case merged.Sweep != nil:
		return merged.Sweep, m.JSON, nil
	case merged.Lab != nil:
		return merged.Lab, m.JSON, nil
	case merged.Check != nil:
		return nil, false, printCheck(o, merged.Check, m.JSON, m.Out, command, verdict.AtRisk)
	case merged.Stack != nil:
		// A --stack is one chain, printed as a stack; manifests chain by
		// chain. The verdicts gate as check's do (exit 1 when unsafe).
		c := CheckOptions{JSON: m.JSON, Out: m.Out}
		single := strings.HasPrefix(merged.Stack.Source, "--stack ")
		if !single && !m.JSON {
			fmt.Fprintf(o.Stdout, "%s: %d chains, %d distinct, merged.\n", merged.Stack.Source, len(merged.Stack.Chains), len(merged.Stack.Results))
			for _, u := range merged.Stack.Unmatched {
				fmt.Fprintf(o.Stdout, "  not matched: %s\n", u)
			}
			fmt.Fprintln(o.Stdout)
		}
		return nil, false, c.printChains(o, merged.Stack, single)
	}
	if m.JSON {
		return nil, false, writeJSON(o.Stdout, merged.Advise)
	}
	return nil, false, printAdvise(o, merged.Advise, []importer.Format{importer.GoCode, importer.ScenarioFleet}, m.Top, m.Out, command, nil)
}
