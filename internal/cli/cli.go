// Package cli is the retrystorm command: flag parsing, dispatch to the
// experiments, and output, with every input and output passed in so the
// tests drive it as a user would.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/retrystorm/retrystorm/experiment"
	"github.com/retrystorm/retrystorm/internal/safetext"
	"github.com/retrystorm/retrystorm/report"
	"github.com/retrystorm/retrystorm/scenario"
)

// Exit codes.
const (
	exitOK     = 0
	exitFailed = 1 // a claim does not hold, or the run failed
	exitUsage  = 2 // bad flags, arguments or input files
)

// usageError is a mistake in the command line or its input files.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{fmt.Sprintf(format, args...)} }

// errClaims means at least one claim did not hold; everything has been
// printed already.
var errClaims = errors.New("a claim does not hold")

// Main runs the command with args (without the program name) and returns
// the exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	err := run(ctx, args, stdout, stderr)
	if err != nil {
		// Messages quote file names and values from outside: none of
		// their control characters may reach the terminal raw.
		err = escapedError{err}
	}
	var ue *usageError
	var se *scenario.Error
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.Is(err, errClaims):
		fmt.Fprintln(stderr, "retrystorm: at least one claim does not hold (see above)")
		return exitFailed
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "retrystorm: %v\nRun 'retrystorm help' for usage.\n", err)
		return exitUsage
	case errors.As(err, &se):
		fmt.Fprintf(stderr, "retrystorm: %v\n", err)
		return exitUsage
	case errors.Is(err, context.Canceled):
		fmt.Fprintln(stderr, "retrystorm: interrupted")
		return exitFailed
	}
	fmt.Fprintf(stderr, "retrystorm: %v\n", err)
	return exitFailed
}

// escapedError prints its error with control and invisible characters
// escaped; errors.Is and errors.As see through it.
type escapedError struct{ err error }

func (e escapedError) Error() string { return safetext.Escape(e.err.Error()) }
func (e escapedError) Unwrap() error { return e.err }

// command is one subcommand.
type command struct {
	name    string
	summary string
	// about, when set, is a longer description for its --help.
	about string
	// own means the command takes only the flags extraFlags gives it,
	// none of the experiments' (--json, --seed, --out, --config).
	own bool
	run func(ctx context.Context, c *commandLine) error
}

// commandLine is what a subcommand gets: its flags and the I/O.
type commandLine struct {
	name           string
	flags          *flag.FlagSet
	args           []string
	stdout, stderr io.Writer

	json        bool
	seed        *uint64
	out         string
	config      string
	printConfig bool
	grid        int    // sweep and all
	findings    string // all only
	output      string // page only
	lab         labFlags
	cost        costFlags
}

func commands() []command {
	cs := []command{{name: "demo", summary: "the default: storm and fleets, tables and an HTML report", run: runDemo}}
	for _, e := range experiment.All() {
		cs = append(cs, command{name: e.Name, summary: e.Summary, run: experimentCommand(e)})
	}
	cs = append(cs, command{name: "run", summary: "run a scenario file: retrystorm run FILE.yaml", run: runFile})
	return append(cs, extraCommands...)
}

// extraCommands are subcommands registered by other files of this package
// (the lab, the page).
var extraCommands []command

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	name := "demo"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		name, args = args[0], args[1:]
	}
	if name == "help" {
		return help(stdout, args)
	}
	for _, c := range commands() {
		if c.name == name {
			cl, err := parse(c, args, stdout, stderr)
			if err != nil {
				return err
			}
			return c.run(ctx, cl)
		}
	}
	return usagef("unknown command %q", name)
}

// parse reads the common flags. Flags may come before or after the
// positional arguments (retrystorm run storm.yaml --json).
func parse(c command, args []string, stdout, stderr io.Writer) (*commandLine, error) {
	cl := &commandLine{name: c.name, stdout: stdout, stderr: stderr}
	fs := flag.NewFlagSet("retrystorm "+c.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	if !c.own {
		fs.BoolVar(&cl.json, "json", false, "print machine-readable JSON instead of tables")
		fs.Func("seed", "replace the scenario's seed (an unsigned integer)", func(s string) error {
			n, err := strconv.ParseUint(s, 10, 64)
			if err != nil {
				return fmt.Errorf("want an unsigned integer, got %q", s)
			}
			cl.seed = &n
			return nil
		})
		fs.StringVar(&cl.out, "out", "", "write the HTML report to this directory (default retrystorm-report, none with --json)")
		if c.name != "run" && c.name != "demo" {
			fs.StringVar(&cl.config, "config", "", "run this scenario file instead of the embedded default")
			fs.BoolVar(&cl.printConfig, "print-config", false, "print the embedded default scenario, to copy and edit")
		}
		addCostFlags(fs, &cl.cost)
	}
	cl.flags = fs
	if extra, ok := extraFlags[c.name]; ok {
		extra(cl)
	}
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				commandHelp(stdout, c, fs)
				return nil, flag.ErrHelp
			}
			return nil, usagef("%s: %v", c.name, err)
		}
		args = fs.Args()
		if len(args) == 0 {
			break
		}
		cl.args = append(cl.args, args[0])
		args = args[1:]
	}
	return cl, nil
}

// extraFlags lets a subcommand add its own flags.
var extraFlags = map[string]func(*commandLine){}

func (cl *commandLine) style() report.Style { return report.Style{Color: useColor(cl.stdout)} }

// reportDir is where the HTML report goes, or "" for none.
func (cl *commandLine) reportDir() string {
	switch {
	case cl.out != "":
		return cl.out
	case cl.json:
		return ""
	}
	return "retrystorm-report"
}

func (cl *commandLine) noArgs() error {
	if len(cl.args) > 0 {
		return usagef("%s takes no arguments, got %q", cl.name, strings.Join(cl.args, " "))
	}
	return nil
}

// options turns the flags into experiment options, loading --config.
func (cl *commandLine) options() (experiment.Options, error) {
	if cl.grid != 0 && (cl.grid < 2 || cl.grid > 200) {
		return experiment.Options{}, usagef("%s: --grid %d: want 2 to 200 cells per axis", cl.name, cl.grid)
	}
	opts := experiment.Options{Seed: cl.seed, Grid: cl.grid, Limits: cl.limits()}
	if cl.config != "" {
		sc, err := scenario.Load(cl.config)
		if err != nil {
			return opts, err
		}
		if err := cl.admit(sc); err != nil {
			return opts, err
		}
		opts.Scenario = sc
	}
	return opts, nil
}

func experimentCommand(e *experiment.Experiment) func(context.Context, *commandLine) error {
	return func(ctx context.Context, cl *commandLine) error {
		if err := cl.noArgs(); err != nil {
			return err
		}
		if cl.printConfig {
			if e.Config == nil {
				return usagef("%s has no scenario file: it is configured by its flags", e.Name)
			}
			_, err := cl.stdout.Write(e.Config)
			return err
		}
		opts, err := cl.options()
		if err != nil {
			return err
		}
		if cl.config != "" && e.Config == nil {
			return usagef("%s does not run a scenario file", e.Name)
		}
		bar := cl.newProgress(e.Name)
		opts.Progress = bar.update
		out, err := e.Run(ctx, opts)
		bar.clear()
		if err != nil {
			return err
		}
		return cl.emit([]*experiment.Outcome{out}, out.JSON, e.Title)
	}
}

// emit prints outcomes (tables or JSON), writes the report, and turns a
// claim that does not hold into errClaims.
func (cl *commandLine) emit(outs []*experiment.Outcome, js any, title string) error {
	if cl.json {
		enc := json.NewEncoder(cl.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(js); err != nil {
			return err
		}
	} else {
		for i, o := range outs {
			if i > 0 {
				fmt.Fprintln(cl.stdout)
			}
			if err := printSection(cl.stdout, o, cl.style()); err != nil {
				return err
			}
		}
	}
	if dir := cl.reportDir(); dir != "" {
		page := report.Page{
			Title:    title,
			Subtitle: "Retries turn a short blip into an outage that outlives its cause. These are the numbers.",
			Command:  cl.commandText(),
		}
		if cl.name == "demo" {
			page.Command = "retrystorm"
		}
		for _, o := range outs {
			page.Sections = append(page.Sections, o.Section)
			page.Findings = append(page.Findings, o.Findings...)
		}
		path, err := report.Write(dir, page)
		if err != nil {
			return err
		}
		if !cl.json {
			fmt.Fprintf(cl.stdout, "\nreport: %s\n", safetext.Name(path))
		}
	}
	for _, o := range outs {
		if !report.AllHold(o.Claims) {
			return errClaims
		}
	}
	return nil
}

// flagsAsText lists the flags that were set, for the report's command line.
func (cl *commandLine) flagsAsText() []string {
	var out []string
	cl.flags.Visit(func(f *flag.Flag) {
		if f.Value.String() == "true" {
			out = append(out, "--"+f.Name)
		} else {
			out = append(out, "--"+f.Name+" "+f.Value.String())
		}
	})
	return append(out, cl.args...)
}

func runDemo(ctx context.Context, cl *commandLine) error {
	if err := cl.noArgs(); err != nil {
		return err
	}
	opts := experiment.Options{Seed: cl.seed}
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
	return cl.emit(outs, js, "retrystorm: a retry storm, and what each defence costs")
}
