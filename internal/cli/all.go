package cli

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/retrystorm/retrystorm/experiment"
	"github.com/retrystorm/retrystorm/report"
)

func init() {
	extraCommands = append(extraCommands, command{
		name:    "all",
		summary: "every experiment: the full report and FINDINGS.md",
		run:     runAll,
	})
	extraFlags["all"] = func(cl *commandLine) {
		cl.flags.StringVar(&cl.findings, "findings", "", "also write the findings to this Markdown file")
		cl.flags.IntVar(&cl.grid, "grid", 0, "cells per axis of the sweep's map (default 40)")
	}
}

// runAll runs every experiment and writes the full report, with the
// findings, and FINDINGS.md beside it.
func runAll(ctx context.Context, cl *commandLine) error {
	if err := cl.noArgs(); err != nil {
		return err
	}
	if _, err := cl.options(); err != nil {
		return err
	}
	var outs []*experiment.Outcome
	js := map[string]any{}
	for _, e := range experiment.All() {
		bar := cl.newProgress(e.Name)
		out, err := e.Run(ctx, experiment.Options{Seed: cl.seed, Grid: cl.grid, Progress: bar.update, Limits: cl.limits()})
		bar.clear()
		if err != nil {
			return fmt.Errorf("%s: %w", e.Name, err)
		}
		outs = append(outs, out)
		js[e.Name] = out.JSON
	}
	seed, grid := uint64(0), cl.grid
	if cl.seed != nil {
		seed = *cl.seed
	}
	if grid == 0 {
		grid = experiment.DefaultGrid
	}
	md := findingsMarkdown(outs, seed, grid)
	if dir := cl.reportDir(); dir != "" {
		if err := report.WriteFileAtomicMkdir(filepath.Join(dir, "FINDINGS.md"), md); err != nil {
			return err
		}
	}
	if cl.findings != "" {
		if err := report.WriteFileAtomic(cl.findings, md); err != nil {
			return err
		}
	}
	return cl.emit(outs, js, "retrystorm: every experiment")
}

// commandText is the command line as given, for the report.
func (cl *commandLine) commandText() string {
	return strings.Join(append([]string{"retrystorm", cl.name}, cl.flagsAsText()...), " ")
}

// findingsMarkdown is FINDINGS.md: each experiment's findings, one
// sentence each, and whether its claims held. Every number in it comes
// from the run; nothing is typed by hand.
func findingsMarkdown(outs []*experiment.Outcome, seed uint64, grid int) []byte {
	var b strings.Builder
	b.WriteString("# Findings\n\n")
	b.WriteString("Written by `retrystorm all`; do not edit by hand: `go run ./cmd/retrystorm all --findings FINDINGS.md` rewrites it, ")
	b.WriteString("and a test fails when it is out of date. Every sentence is the tool's, from the numbers it just computed on the default scenarios")
	if seed != 0 {
		fmt.Fprintf(&b, " with seed %d", seed)
	}
	fmt.Fprintf(&b, " (the sweep on a %d × %d grid).\n", grid, grid)
	for _, o := range outs {
		fmt.Fprintf(&b, "\n## %s\n\n", o.Section.Title)
		for _, f := range o.Findings {
			fmt.Fprintf(&b, "- %s\n", f)
		}
		held := 0
		for _, c := range o.Claims {
			if c.Holds {
				held++
			}
		}
		fmt.Fprintf(&b, "\nClaims: %d of %d hold.\n", held, len(o.Claims))
		for _, c := range o.Claims {
			mark := "holds"
			if !c.Holds {
				mark = "**fails**"
			}
			fmt.Fprintf(&b, "- %s: %s (%s)\n", mark, c.Text, c.Detail)
		}
	}
	return []byte(b.String())
}
