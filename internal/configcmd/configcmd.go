// Package configcmd is the command line of the commands that read the
// retry settings people run: import, check and advise. They link the
// importers (Envoy's and Istio's generated protobuf code), so they belong
// to the companion binary for heavy commands, not the light demo: the
// command table registers these functions there. Every input and output is
// passed in.
package configcmd

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/retrystorm/retrystorm/experiment"
	"github.com/retrystorm/retrystorm/importer"
	"github.com/retrystorm/retrystorm/report"
	"github.com/retrystorm/retrystorm/scenario"
)

// IO is what a command reads and writes.
type IO struct {
	Stdout, Stderr io.Writer
	// Style draws the tables (colour on a terminal).
	Style report.Style
	// Progress, if set, is told how far a long run has come; the caller
	// draws it on a terminal and sets nothing when output is piped or
	// JSON.
	Progress func(done, total int)
	// ReadFile reads an input file; nil means os.ReadFile.
	ReadFile func(name string) ([]byte, error)
}

// UsageError is a mistake in the command line or its input files: exit
// status 2.
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

func usagef(format string, args ...any) error { return &UsageError{fmt.Sprintf(format, args...)} }

// ErrUnsafe is returned by Check when a fleet stays collapsed in the
// region the user calls realistic: exit status 1, after everything is
// printed.
var ErrUnsafe = errors.New("a fleet stays collapsed in the realistic region")

func (o IO) read(name string) ([]byte, error) {
	if o.ReadFile != nil {
		return o.ReadFile(name)
	}
	return os.ReadFile(name)
}

// base returns the scenario given with --base, or the embedded storm.
func base(o IO, file string) (*scenario.Scenario, error) {
	if file != "" {
		data, err := o.read(file)
		if err != nil {
			return nil, usagef("--base: %v", err)
		}
		return scenario.Parse(file, data)
	}
	e, ok := experiment.Lookup("storm")
	if !ok || e.Config == nil {
		return nil, errors.New("the embedded storm scenario is missing")
	}
	return scenario.Parse("storm.yaml", e.Config)
}

// inputs reads the files to check or advise on: scenario files give their
// fleets (and the first one is the base, unless --base says otherwise);
// config files are imported.
func inputs(o IO, files []string, format, baseFile string) ([]experiment.CheckInput, *scenario.Scenario, importer.Format, error) {
	var in []experiment.CheckInput
	var srcs []importer.Source
	var from *scenario.Scenario
	for _, f := range files {
		data, err := o.read(f)
		if err != nil {
			return nil, nil, "", usagef("%v", err)
		}
		if format == "" || format == string(importer.ScenarioFleet) {
			sc, err := scenario.Parse(f, data)
			if err == nil {
				for _, fl := range sc.Fleets {
					in = append(in, experiment.CheckInput{Fleet: fl, Origin: f})
				}
				if from == nil {
					from = sc
				}
				continue
			}
			// A scenario file with a mistake gets the loader's error, not
			// the importer's "not a config".
			if _, derr := importer.Detect(f, data); format != "" || (derr != nil && looksLikeScenario(data)) {
				return nil, nil, "", err
			}
		}
		srcs = append(srcs, importer.Source{Name: f, Data: data})
	}
	b := from
	if baseFile != "" || b == nil {
		var err error
		if b, err = base(o, baseFile); err != nil {
			return nil, nil, "", err
		}
	}
	var fmtIn importer.Format = importer.ScenarioFleet
	if len(srcs) > 0 {
		opts := importer.Options{}
		if format != "" {
			f, err := importer.ParseFormat(format)
			if err != nil {
				return nil, nil, "", usagef("--format: %v", err)
			}
			opts.Format = f
		}
		if len(b.Fleets) > 0 {
			opts.Timeout = b.Fleets[0].Timeout
		}
		fl, err := importer.Import(srcs, opts)
		if err != nil {
			return nil, nil, "", usagef("%v", err)
		}
		for _, f := range fl {
			in = append(in, experiment.CheckInput{Fleet: f.Fleet, Origin: f.Origin})
		}
		fmtIn = fl[0].Format
	}
	return in, b, fmtIn, nil
}

// looksLikeScenario reports whether a file has a scenario's top-level
// fleets list.
func looksLikeScenario(data []byte) bool {
	for _, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(l, "fleets:") {
			return true
		}
	}
	return false
}

func newFlags(name string, o IO) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(o.Stderr)
	return fs
}

// parse parses flags that may come after the file arguments too.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var files []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, usagef("%v", err)
		}
		if fs.NArg() == 0 {
			return files, nil
		}
		files = append(files, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// Import is `retrystorm import [--format F] [--base FILE] [-o FILE] FILE...`.
func Import(ctx context.Context, args []string, o IO) error {
	fs := newFlags("import", o)
	format := fs.String("format", "", "the files' format: envoy, istio, linkerd, grpc or aws (default: detected)")
	baseFile := fs.String("base", "", "the scenario whose traffic, origin and triggers the fleets run in (default: the storm)")
	out := fs.String("o", "", "write the scenario here instead of stdout")
	timeout := fs.Duration("timeout", 0, "the attempt timeout for configs that set none (AWS SDK settings); default: the base scenario's first fleet's")
	files, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return usagef("import takes one or more config files: retrystorm import FILE...")
	}
	b, err := base(o, *baseFile)
	if err != nil {
		return err
	}
	opts := importer.Options{Timeout: *timeout}
	if *format != "" {
		if opts.Format, err = importer.ParseFormat(*format); err != nil {
			return usagef("--format: %v", err)
		}
	}
	if opts.Timeout == 0 && len(b.Fleets) > 0 {
		opts.Timeout = b.Fleets[0].Timeout
	}
	var srcs []importer.Source
	for _, f := range files {
		data, err := o.read(f)
		if err != nil {
			return usagef("%v", err)
		}
		srcs = append(srcs, importer.Source{Name: f, Data: data})
	}
	fl, err := importer.Import(srcs, opts)
	if err != nil {
		return usagef("%v", err)
	}
	text, err := importer.Write(fl, b)
	if err != nil {
		return err
	}
	if *out == "" {
		_, err := o.Stdout.Write(text)
		return err
	}
	if err := report.WriteFileAtomicMkdir(*out, text); err != nil {
		return err
	}
	fmt.Fprintf(o.Stderr, "wrote %d fleet%s to %s\n", len(fl), plural(len(fl)), *out)
	return nil
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// common are the flags check and advise share.
type common struct {
	format, base, out string
	load, dip         float64
	json              bool
	shard             string
	workers           int
}

func (c *common) add(fs *flag.FlagSet) {
	fs.StringVar(&c.format, "format", "", "the files' format: envoy, istio, linkerd, grpc, aws or scenario (default: detected)")
	fs.StringVar(&c.base, "base", "", "the scenario whose traffic and origin the fleets run against (default: a scenario file given, or the storm)")
	fs.Float64Var(&c.load, "load", 0, "the highest base load you call realistic, as a share of capacity (default: the base scenario's)")
	fs.Float64Var(&c.dip, "dip", 0, "the largest capacity dip you call realistic, as a share (default: the base scenario's)")
	fs.BoolVar(&c.json, "json", false, "print JSON (for merge, with --shard)")
	fs.StringVar(&c.out, "out", "", "write an HTML report into this directory")
	fs.StringVar(&c.shard, "shard", "", "run only shard i of n (i/n), for retrystorm merge")
	fs.IntVar(&c.workers, "workers", 0, "parallel runs (default: every core)")
}

func (c *common) options(o IO) (experiment.Options, experiment.Shard, error) {
	var sh experiment.Shard
	if c.shard != "" {
		var err error
		if sh, err = experiment.ParseShard(c.shard); err != nil {
			return experiment.Options{}, sh, usagef("%v", err)
		}
		if !c.json {
			return experiment.Options{}, sh, usagef("--shard writes a part of the result for retrystorm merge: give --json too")
		}
	}
	if c.workers < 0 || c.workers > 1024 {
		return experiment.Options{}, sh, usagef("--workers %d: want 0 (every core) to 1024", c.workers)
	}
	if c.load < 0 || c.load > 0.975 || c.dip < 0 || c.dip > 1 {
		return experiment.Options{}, sh, usagef("--load must be in (0, 0.975] and --dip in (0, 1]")
	}
	opts := experiment.Options{Workers: c.workers}
	if !c.json {
		opts.Progress = o.Progress
	}
	return opts, sh, nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func writeReport(o IO, dir string, sec report.Section, command string) error {
	if dir == "" {
		return nil
	}
	path, err := report.Write(dir, report.Page{Title: "retrystorm", Subtitle: sec.Title, Command: command, Sections: []report.Section{sec}})
	if err != nil {
		return err
	}
	fmt.Fprintf(o.Stderr, "report: %s\n", filepath.Clean(path))
	return nil
}

// Check is `retrystorm check [flags] FILE...`.
func Check(ctx context.Context, args []string, o IO) error {
	fs := newFlags("check", o)
	var c common
	c.add(fs)
	files, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return usagef("check takes one or more config or scenario files: retrystorm check FILE...")
	}
	opts, sh, err := c.options(o)
	if err != nil {
		return err
	}
	in, b, _, err := inputs(o, files, c.format, c.base)
	if err != nil {
		return err
	}
	r, err := experiment.Check(ctx, in, experiment.CheckOptions{Base: b, Load: c.load, Dip: c.dip, Shard: sh}, opts)
	if err != nil {
		return err
	}
	return printCheck(o, r, c.json, c.out, "retrystorm check "+strings.Join(args, " "))
}

func printCheck(o IO, r *experiment.CheckResult, asJSON bool, out, command string) error {
	if asJSON {
		if err := writeJSON(o.Stdout, r); err != nil {
			return err
		}
	} else {
		if err := r.Render(o.Stdout, o.Style); err != nil {
			return err
		}
		if err := writeReport(o, out, r.Section(), command); err != nil {
			return err
		}
	}
	if r.Shard != (experiment.Shard{}).String() {
		return nil // a shard's verdict waits for merge
	}
	for i := range r.Fleets {
		if r.Collapsed(i) {
			return ErrUnsafe
		}
	}
	return nil
}

// Advise is `retrystorm advise [flags] [FILE]`.
func Advise(ctx context.Context, args []string, o IO) error {
	fs := newFlags("advise", o)
	var c common
	c.add(fs)
	seeds := fs.Int("seeds", 3, "seeds each cell runs with")
	maxRuns := fs.Int("max-runs", 20000, "refuse a search that would make more runs")
	top := fs.Int("top", 5, "runner-ups to show")
	as := fs.String("as", "", "write the recommendation in these formats, comma-separated: envoy, istio, linkerd, grpc, aws, go, scenario (default: your files' format, go and scenario)")
	files, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(files) > 1 {
		return usagef("advise starts from one config or scenario file (or none: the storm's first fleet)")
	}
	opts, sh, err := c.options(o)
	if err != nil {
		return err
	}
	if *seeds < 1 || *seeds > 100 || *top < 1 || *top > 100 || *maxRuns < 1 {
		return usagef("--seeds must be in [1, 100], --top in [1, 100], --max-runs at least 1")
	}
	var in []experiment.CheckInput
	var b *scenario.Scenario
	var fmtIn importer.Format = importer.ScenarioFleet
	if len(files) == 0 {
		if b, err = base(o, c.base); err != nil {
			return err
		}
		in = []experiment.CheckInput{{Fleet: b.Fleets[0], Origin: b.Name}}
	} else if in, b, fmtIn, err = inputs(o, files, c.format, c.base); err != nil {
		return err
	}
	if len(in) > 1 {
		fmt.Fprintf(o.Stderr, "advise: starting from the first fleet, %q, of the %d given\n", in[0].Fleet.Name, len(in))
	}
	formats := []importer.Format{fmtIn, importer.GoCode, importer.ScenarioFleet}
	if *as != "" {
		formats = nil
		for _, f := range strings.Split(*as, ",") {
			f = strings.TrimSpace(f)
			switch f {
			case string(importer.GoCode), string(importer.ScenarioFleet):
				formats = append(formats, importer.Format(f))
			default:
				pf, err := importer.ParseFormat(f)
				if err != nil {
					return usagef("--as: %v", err)
				}
				formats = append(formats, pf)
			}
		}
	}
	formats = slices.Compact(formats)
	r, err := experiment.Advise(ctx, in[0], experiment.AdviseOptions{Base: b, Load: c.load, Dip: c.dip, Seeds: *seeds, MaxRuns: *maxRuns, Shard: sh}, opts)
	if errors.Is(err, experiment.ErrTooBig) {
		return usagef("%v", err)
	}
	if err != nil {
		return err
	}
	if c.json {
		return writeJSON(o.Stdout, r)
	}
	return printAdvise(o, r, formats, *top, c.out, "retrystorm advise "+strings.Join(args, " "))
}

func printAdvise(o IO, r *experiment.AdviseResult, formats []importer.Format, top int, out, command string) error {
	if err := r.Render(o.Stdout, o.Style, top); err != nil {
		return err
	}
	best := r.Best()
	fmt.Fprintf(o.Stdout, "\nThe recommendation, %s:\n  %s\n", best.Name, experiment.Describe(best.Fleet))
	cells := len(r.Seeds) * len(r.Faults) * len(r.Loads)
	for _, f := range formats {
		text, cannot, err := importer.Export(best.Fleet, f)
		if err != nil {
			return err
		}
		fmt.Fprintf(o.Stdout, "\nAs %s:\n\n%s", formatName(f), text)
		if !strings.HasSuffix(text, "\n") {
			fmt.Fprintln(o.Stdout)
		}
		for _, c := range cannot {
			fmt.Fprintf(o.Stdout, "# cannot express: %s\n", c)
		}
		if !importer.Expressible(best.Fleet, f) {
			// Say what the best policy this format can write whole does.
			for _, i := range r.Ranking {
				c := r.Candidates[i]
				if importer.Expressible(c.Fleet, f) {
					alt, _, err := importer.Export(c.Fleet, f)
					if err != nil {
						return err
					}
					fmt.Fprintf(o.Stdout, "\nThe best policy %s can express whole, %s: it recovered in %d of %d cells and lost %s intents (the recommendation: %d, %s):\n\n%s",
						formatName(f), c.Name, cells-c.Never, cells, report.Int(c.IntentsLost), cells-best.Never, report.Int(best.IntentsLost), alt)
					break
				}
			}
		}
	}
	return writeReport(o, out, r.Section(top), command)
}

func formatName(f importer.Format) string {
	switch f {
	case importer.Envoy:
		return "an Envoy route and cluster"
	case importer.Istio:
		return "an Istio VirtualService and DestinationRule"
	case importer.Linkerd:
		return "a Linkerd ServiceProfile"
	case importer.GRPC:
		return "a gRPC service config"
	case importer.AWS:
		return "AWS SDK settings"
	case importer.GoCode:
		return "resil Go code"
	}
	return "a scenario fleet"
}

// Merge is `retrystorm merge [--json] [--out DIR] FILE...`: the shards of
// one sweep, check or advise put together. It prints what one run prints.
// A sweep's merge is printed by the caller (it is an experiment Outcome):
// the returned Outcome is non-nil then.
func Merge(ctx context.Context, args []string, o IO) (*experiment.Outcome, bool, error) {
	fs := newFlags("merge", o)
	asJSON := fs.Bool("json", false, "print JSON")
	out := fs.String("out", "", "write an HTML report into this directory")
	top := fs.Int("top", 5, "advise: runner-ups to show")
	files, err := parse(fs, args)
	if err != nil {
		return nil, false, err
	}
	if len(files) == 0 {
		return nil, false, usagef("merge takes the JSON of every shard: retrystorm merge FILE...")
	}
	var parts [][]byte
	for _, f := range files {
		data, err := o.read(f)
		if err != nil {
			return nil, false, usagef("%v", err)
		}
		parts = append(parts, data)
	}
	m, err := experiment.Merge(parts)
	if err != nil {
		return nil, false, usagef("%v", err)
	}
	command := "retrystorm merge " + strings.Join(args, " ")
	switch {
	case m.Sweep != nil:
		return m.Sweep, *asJSON, nil
	case m.Check != nil:
		return nil, false, printCheck(o, m.Check, *asJSON, *out, command)
	}
	if *asJSON {
		return nil, false, writeJSON(o.Stdout, m.Advise)
	}
	return nil, false, printAdvise(o, m.Advise, []importer.Format{importer.GoCode, importer.ScenarioFleet}, *top, *out, command)
}
