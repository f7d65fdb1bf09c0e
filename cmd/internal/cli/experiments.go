package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/retrystorm/retrystorm/internal/outfile"
	"github.com/retrystorm/retrystorm/report/document"

	"github.com/retrystorm/retrystorm/experiment"
	"github.com/retrystorm/retrystorm/grid"
	"github.com/retrystorm/retrystorm/internal/safetext"
	"github.com/retrystorm/retrystorm/report"
	"github.com/retrystorm/retrystorm/scenario"
)

// experimentCommand is the table's entry for experiment e: the flags
// every experiment takes, and those it declares.
func experimentCommand(e *experiment.Experiment) command {
	flags := groups(outputFlags, configFlags, costFlags)
	if e.Grid {
		flags = append(flags, gridFlag)
	}
	if e.Shard {
		flags = append(flags, shardFlags)
	}
	if e.Name == "sweep" {
		flags = append(flags, engineFlag)
	}
	return command{Name: e.Name, Summary: e.Summary, Flags: flags, Run: runExperiment(e)}
}

func runExperiment(e *experiment.Experiment) RunFunc {
	return func(ctx context.Context, inv *Invocation) error {
		if err := inv.NoArgs(); err != nil {
			return err
		}
		if inv.PrintConfig {
			if e.Config == nil {
				return Usagef("%s has no scenario file: it is configured by its flags", e.Name)
			}
			_, err := inv.Stdout.Write(e.Config)
			return err
		}
		if inv.Config != "" && e.Config == nil {
			return Usagef("%s does not run a scenario file", e.Name)
		}
		opts, err := inv.options()
		if err != nil {
			return err
		}
		bar := inv.newProgress(e.Name)
		opts.Progress = bar.update
		out, err := e.Run(ctx, opts)
		bar.clear()
		if err != nil {
			return err
		}
		return inv.Emit([]*experiment.Outcome{out}, out.JSON, e.Title)
	}
}

// options turns the flags into experiment options, loading --config.
func (inv *Invocation) options() (experiment.Options, error) {
	opts := experiment.Options{Seed: inv.Seed, Grid: inv.Grid, Limits: inv.Limits(), Workers: inv.Configs.Workers, Engine: inv.Engine}
	if inv.Configs.Shard != "" {
		if !inv.JSON {
			return opts, Usagef("--shard writes one part of the result for retrystorm merge: give --json too")
		}
		sh, err := grid.ParseShard(inv.Configs.Shard)
		if err != nil {
			return opts, Usagef("%v", err)
		}
		opts.Shard = sh
	}
	if inv.Config != "" {
		sc, err := scenario.Load(inv.Config)
		if err != nil {
			return opts, err
		}
		if err := inv.Admit(sc); err != nil {
			return opts, err
		}
		opts.Scenario = sc
	}
	return opts, nil
}

// Scenario is the scenario a command runs: --config's, or def (named file
// in errors) when --config is not given, with --seed applied.
func (inv *Invocation) Scenario(file string, def []byte) (*scenario.Scenario, error) {
	var sc *scenario.Scenario
	var err error
	if inv.Config != "" {
		sc, err = scenario.Load(inv.Config)
	} else {
		sc, err = scenario.Parse(file, def)
	}
	if err != nil {
		return nil, err
	}
	if inv.Seed != nil {
		sc.Seed = *inv.Seed
	}
	return sc, nil
}

func runDemo(ctx context.Context, inv *Invocation) error {
	if err := inv.NoArgs(); err != nil {
		return err
	}
	opts := experiment.Options{Seed: inv.Seed}
	var outs []*experiment.Outcome
	js := map[string]any{}
	for _, name := range []string{"storm", "fleets"} {
		e, _ := experiment.Lookup(name)
		o, err := e.Run(ctx, opts)
		if err != nil {
			return err
		}
		outs = append(outs, o)
		js[name] = o.JSON
	}
	return inv.Emit(outs, js, "retrystorm: a retry storm, and what each defence costs")
}

// runFile runs a scenario file as it is: every fleet, a table, charts and
// the run's JSON. It checks no claims: a file states no expectations.
func runFile(ctx context.Context, inv *Invocation) error {
	if len(inv.Args) != 1 {
		return Usagef("run takes one scenario file: retrystorm run FILE.yaml")
	}
	sc, err := scenario.Load(inv.Args[0])
	if err != nil {
		return err
	}
	if inv.Seed != nil {
		sc.Seed = *inv.Seed
	}
	if err := inv.Admit(sc); err != nil {
		return err
	}
	bar := inv.newProgress("run")
	out, err := experiment.RunScenarioWith(ctx, sc, experiment.Options{Limits: inv.Limits(), Progress: bar.update})
	bar.clear()
	if err != nil {
		return err
	}
	return inv.Emit([]*experiment.Outcome{out}, out.JSON, "retrystorm run "+safetext.Name(inv.Args[0]))
}

// runAll runs every experiment and writes the full report, with the
// findings, and FINDINGS.md beside it.
func runAll(ctx context.Context, inv *Invocation) error {
	if err := inv.NoArgs(); err != nil {
		return err
	}
	var outs []*experiment.Outcome
	js := map[string]any{}
	for _, e := range experiment.All() {
		bar := inv.newProgress(e.Name)
		out, err := e.Run(ctx, experiment.Options{Seed: inv.Seed, Grid: inv.Grid, Progress: bar.update, Limits: inv.Limits()})
		bar.clear()
		if err != nil {
			return fmt.Errorf("%s: %w", e.Name, err)
		}
		outs = append(outs, out)
		js[e.Name] = out.JSON
	}
	seed, grid := uint64(0), inv.Grid
	if inv.Seed != nil {
		seed = *inv.Seed
	}
	if grid == 0 {
		grid = experiment.DefaultGrid
	}
	md := findingsMarkdown(outs, seed, grid)
	if dir := inv.ReportDir(); dir != "" {
		if err := report.WriteFileAtomicMkdir(filepath.Join(dir, "FINDINGS.md"), md); err != nil {
			return err
		}
	}
	if inv.Findings != "" {
		if err := outfile.Write(inv.Findings, outfile.Findings, md, inv.Inputs()); err != nil {
			return Usagef("--findings %v", err)
		}
	}
	return inv.Emit(outs, js, "retrystorm: every experiment")
}

// ReportDir is where the HTML report goes, or "" for none.
func (inv *Invocation) ReportDir() string {
	switch {
	case inv.Out != "":
		return inv.Out
	case inv.JSON:
		return ""
	}
	return defaultReportDir(inv.Name)
}

// defaultReportDir is where a command writes its report without --out:
// the demo in retrystorm-report, every other command in a directory of
// its own under it (retrystorm-report/check), so that no command
// overwrites another's report, the demo's least of all. An empty name
// (the list of every command's flags) gets the pattern.
func defaultReportDir(command string) string {
	switch command {
	case "demo":
		return "retrystorm-report"
	case "":
		return filepath.Join("retrystorm-report", "COMMAND") + ", the demo's retrystorm-report"
	}
	return filepath.Join("retrystorm-report", command)
}

// Style is how to draw on stdout: colour on a terminal, and its width.
func (inv *Invocation) Style() report.Style {
	return report.Style{Color: useColor(inv.Stdout), Width: textWidth(inv.Stdout)}
}

// Emit prints outcomes (tables or JSON), writes the report, and returns
// ErrClaims when a claim does not hold.
func (inv *Invocation) Emit(outs []*experiment.Outcome, js any, title string) error {
	if inv.JSON {
		enc := json.NewEncoder(inv.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(js); err != nil {
			return err
		}
	} else {
		for i, o := range outs {
			if i > 0 {
				fmt.Fprintln(inv.Stdout)
			}
			if err := printSection(inv.Stdout, o, inv.Style()); err != nil {
				return err
			}
		}
	}
	if dir := inv.ReportDir(); dir != "" {
		page := report.Page{
			Title:    title,
			Subtitle: "Retries turn a short blip into an outage that outlives its cause. These are the numbers.",
			Command:  inv.commandText(),
		}
		for _, o := range outs {
			page.Sections = append(page.Sections, o.Section)
			page.Findings = append(page.Findings, o.Findings...)
		}
		path, err := document.Write(dir, page)
		if err != nil {
			return err
		}
		if !inv.JSON {
			fmt.Fprintf(inv.Stdout, "\nreport: %s\n", safetext.Name(path))
		}
	}
	for _, o := range outs {
		if !report.AllHold(o.Claims) {
			return ErrClaims
		}
	}
	return nil
}

// commandText is the command line as given, for the report.
func (inv *Invocation) commandText() string {
	words := []string{"retrystorm"}
	if inv.typed {
		words = append(words, inv.Name)
	}
	inv.flags.Visit(func(f *flag.Flag) {
		if f.Value.String() == "true" {
			words = append(words, dash(f.Name))
		} else {
			words = append(words, dash(f.Name), f.Value.String())
		}
	})
	return strings.Join(append(words, inv.Args...), " ")
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
