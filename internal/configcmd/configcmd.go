// Package configcmd is the command line of the commands that read the
// retry settings people run: import, check and advise. They link the
// importers (Envoy's and Istio's generated protobuf code), so they belong
// to the companion binary for heavy commands, not the light demo: the
// command table registers these functions there. Every input and output is
// passed in.
package configcmd

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/retrystorm/retrystorm/experiment"
	"github.com/retrystorm/retrystorm/importer"
	"github.com/retrystorm/retrystorm/internal/boundedfile"
	"github.com/retrystorm/retrystorm/internal/safetext"
	"github.com/retrystorm/retrystorm/report"
	"github.com/retrystorm/retrystorm/scenario"
	"github.com/retrystorm/retrystorm/sim"
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
	// ReadFile reads an input file; nil means boundedfile.Read with the
	// limit for that kind of file.
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
var ErrUnsafe = errors.New("a fleet stays collapsed, or amplifies the load past the thresholds, in the realistic region")

// The most a command reads of one file: a config to import or check (the
// importers' own limit, importer/yamljson.go's maxFileBytes; a scenario
// given with --base has the loader's) and a shard's JSON (an advise shard
// of 100 seeds holds 130,000 cells, about 35 MB of indented JSON).
const (
	maxConfigSize = 4 << 20
	maxShardSize  = 64 << 20
)

// read reads the file name of at most limit bytes: a regular file only
// (a named pipe would block the command, deaf to Ctrl-C; /dev/zero never
// ends). Its error names the file and is a usage error.
func (o IO) read(name string, limit int64) ([]byte, error) {
	var data []byte
	var err error
	if o.ReadFile != nil {
		data, err = o.ReadFile(name)
	} else {
		data, err = boundedfile.Read(name, limit)
	}
	if err != nil {
		return nil, usagef("%s: %v", safetext.Name(name), err)
	}
	return data, nil
}

// base returns the scenario given with --base, or the embedded storm.
func base(o IO, file string) (*scenario.Scenario, error) {
	if file != "" {
		if o.ReadFile == nil {
			return scenario.Load(file) // as run reads it, with its limit
		}
		data, err := o.read(file, maxConfigSize)
		if err != nil {
			return nil, usagef("--base %v", err)
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
// userFiles are the config files read and the fleets imported from them,
// for advise to write its recommendation back into.
type userFiles struct {
	srcs   []importer.Source
	fleets []importer.Fleet
}

// imported returns the imported fleet a check input came from, if any.
func (u *userFiles) imported(in experiment.CheckInput) (importer.Fleet, bool) {
	if u == nil {
		return importer.Fleet{}, false
	}
	for _, f := range u.fleets {
		if f.Origin == in.Origin && f.Fleet.Name == in.Fleet.Name {
			return f, true
		}
	}
	return importer.Fleet{}, false
}

func inputs(o IO, files []string, format, baseFile string, assume importer.Options) ([]experiment.CheckInput, *scenario.Scenario, importer.Format, error) {
	in, b, f, _, err := inputFiles(o, files, format, baseFile, assume)
	return in, b, f, err
}

// inputFiles reads the fleets of files: scenario files as they are,
// configs through the importer, with what assume says the configs do not
// (the services' protocol, the Istio release: check's and advise's
// --protocol and --istio).
func inputFiles(o IO, files []string, format, baseFile string, assume importer.Options) ([]experiment.CheckInput, *scenario.Scenario, importer.Format, *userFiles, error) {
	var in []experiment.CheckInput
	var srcs []importer.Source
	var from *scenario.Scenario
	for _, f := range files {
		data, err := o.read(f, maxConfigSize)
		if err != nil {
			return nil, nil, "", nil, err
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
				return nil, nil, "", nil, err
			}
		}
		srcs = append(srcs, source(f, data))
	}
	b := from
	if baseFile != "" || b == nil {
		var err error
		if b, err = base(o, baseFile); err != nil {
			return nil, nil, "", nil, err
		}
	}
	var fmtIn importer.Format = importer.ScenarioFleet
	if len(srcs) > 0 {
		opts := importer.Options{Protocol: assume.Protocol, IstioVersion: assume.IstioVersion}
		if format != "" {
			f, err := importer.ParseFormat(format)
			if err != nil {
				return nil, nil, "", nil, usagef("--format: %v", err)
			}
			opts.Format = f
		}
		if len(b.Fleets) > 0 {
			opts.Timeout = b.Fleets[0].Timeout
		}
		fl, err := importer.Import(srcs, opts)
		if err != nil {
			return nil, nil, "", nil, usagef("%v", err)
		}
		for _, f := range fl {
			in = append(in, experiment.CheckInput{Fleet: f.Fleet, Origin: f.Origin, FromBase: fromBase(f.From)})
		}
		fmtIn = fl[0].Format
		return in, b, fmtIn, &userFiles{srcs: srcs, fleets: fl}, nil
	}
	return in, b, fmtIn, nil, nil
}

// fromBase lists the settings an imported fleet did not take from its
// file, from its provenance lines ("setting: value  <- where"): those
// from a documented default or from the base scenario.
func fromBase(from []string) []string {
	var out []string
	for _, l := range from {
		setting, _, ok := strings.Cut(l, ": ")
		_, where, _ := strings.Cut(l, "  <- ")
		if !ok || !(strings.HasPrefix(where, "default") || strings.Contains(where, "the base scenario's")) {
			continue
		}
		for _, s := range strings.Split(setting, " and ") {
			if s = strings.TrimSpace(s); s != "" && !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
	}
	return out
}

// source is a config file to import, named as every message and comment
// will quote it: a name that is not printable UTF-8 (a file name on Unix
// may be any bytes) escaped, so that it neither reaches a terminal raw nor
// breaks the YAML written with it in its comments.
func source(name string, data []byte) importer.Source {
	return importer.Source{Name: safetext.Escape(name), Data: data}
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

// ImportOptions are import's flags.
type ImportOptions struct {
	Format  string        // --format: the files' format; "" detects it
	Base    string        // --base: the scenario to run the fleets in; "" is the storm
	Output  string        // -o: the file to write; "" is stdout
	Timeout time.Duration // --timeout: for configs that set none
	// Protocol (--protocol) and Istio (--istio) say what the configs do
	// not: what the services speak, and the Istio release.
	Protocol, Istio string
}

// Import is `retrystorm import [--format F] [--base FILE] [-o FILE] FILE...`.
func Import(ctx context.Context, args []string, o IO) error {
	fs := newFlags("import", o)
	var in ImportOptions
	fs.StringVar(&in.Format, "format", "", "the files' format: envoy, istio, linkerd, grpc or aws (default: detected)")
	fs.StringVar(&in.Base, "base", "", "the scenario whose traffic, origin and triggers the fleets run in (default: the storm)")
	fs.StringVar(&in.Output, "o", "", "write the scenario here instead of stdout")
	fs.DurationVar(&in.Timeout, "timeout", 0, "the attempt timeout for configs that set none (AWS SDK settings); default: the base scenario's first fleet's")
	fs.StringVar(&in.Protocol, "protocol", "", "what the services speak where the config does not say: http or grpc (default: http)")
	fs.StringVar(&in.Istio, "istio", "", "the Istio release whose defaults apply, such as 1.23 (default: the current)")
	files, err := parse(fs, args)
	if err != nil {
		return err
	}
	return RunImport(ctx, files, in, o)
}

// RunImport imports files and writes the scenario.
func RunImport(ctx context.Context, files []string, in ImportOptions, o IO) error {
	format, baseFile, out, timeout := &in.Format, &in.Base, &in.Output, &in.Timeout
	if len(files) == 0 {
		return usagef("import takes one or more config files: retrystorm import FILE...")
	}
	b, err := base(o, *baseFile)
	if err != nil {
		return err
	}
	opts := importer.Options{Timeout: *timeout, Protocol: in.Protocol, IstioVersion: in.Istio}
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
		data, err := o.read(f, maxConfigSize)
		if err != nil {
			return err
		}
		srcs = append(srcs, source(f, data))
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

// CheckOptions are the flags check and advise share.
type CheckOptions struct {
	Format  string  // --format: the files' format; "" detects it
	Base    string  // --base: the scenario to run against
	Out     string  // --out: the HTML report's directory
	Load    float64 // --load: the realistic load
	Dip     float64 // --dip: the realistic dip
	JSON    bool    // --json
	Shard   string  // --shard i/n
	Workers int     // --workers
	Seed    *uint64 // --seed: replaces the base scenario's
	Seeds   int     // --seeds: seeds per cell; 0 means 3
	Clients int     // --clients: client instances; 0 means the base scenario's
	// Protocol (--protocol) and Istio (--istio) say what the configs do
	// not, as import's do: what the services speak, the Istio release.
	Protocol, Istio string
	// MaxMemory is --max-memory: the most memory one run of the envelope
	// may need (sim.Estimate); zero means sim.DefaultLimits'.
	MaxMemory int64

	// CI are check's outputs for a CI gate and its layers: --stack,
	// --sarif, --junit, --baseline (stack.go, ci.go).
	CI
}

// minLoad is the lowest --load (internal/cli's minLoad): a load sets the
// origin's capacity to the rate over it, and one such as 1e-300 made a
// capacity past any a scenario takes.
const minLoad = 0.01

// costly turns a run refused for its cost (sim.CostError: one cell of the
// envelope would need more memory than --max-memory, or more work than a
// run may take) into a usage error, exit status 2 as run and sweep give:
// 1 means unsafe here.
func costly(err error) error {
	if ce, ok := errors.AsType[*sim.CostError](err); ok {
		if ce.Memory {
			return usagef("%v (--max-memory sets the limit)", err)
		}
		return usagef("%v", err)
	}
	return err
}

// assume is what the importer is told the configs do not say.
func (c *CheckOptions) assume() importer.Options {
	return importer.Options{Protocol: c.Protocol, IstioVersion: c.Istio}
}

// common is CheckOptions as the flag parsing fills it.
type common = CheckOptions

func (c *common) add(fs *flag.FlagSet) {
	fs.StringVar(&c.Format, "format", "", "the files' format: envoy, istio, linkerd, grpc, aws or scenario (default: detected)")
	fs.StringVar(&c.Base, "base", "", "the scenario whose traffic and origin the fleets run against (default: a scenario file given, or the storm)")
	fs.Float64Var(&c.Load, "load", 0, "the highest base load you call realistic, as a share of capacity (default: the base scenario's)")
	fs.Float64Var(&c.Dip, "dip", 0, "the largest capacity dip you call realistic, as a share (default: the base scenario's)")
	fs.BoolVar(&c.JSON, "json", false, "print JSON (for merge, with --shard)")
	fs.StringVar(&c.Out, "out", "", "write an HTML report into this directory")
	fs.StringVar(&c.Shard, "shard", "", "run only shard i of n (i/n), for retrystorm merge")
	fs.IntVar(&c.Workers, "workers", 0, "parallel runs (default: every core)")
	fs.IntVar(&c.Seeds, "seeds", 3, "seeds each cell runs with; the verdict is the worst")
	fs.IntVar(&c.Clients, "clients", 0, "client instances, each with its own budget (default: the scenario's)")
	fs.StringVar(&c.Protocol, "protocol", "", "what the services speak where the config does not say: http or grpc (default: http)")
	fs.StringVar(&c.Istio, "istio", "", "the Istio release whose defaults apply, such as 1.23 (default: the current)")
}

func (c *common) options(o IO) (experiment.Options, experiment.Shard, error) {
	var sh experiment.Shard
	if c.Shard != "" {
		var err error
		if sh, err = experiment.ParseShard(c.Shard); err != nil {
			return experiment.Options{}, sh, usagef("%v", err)
		}
		if !c.JSON {
			return experiment.Options{}, sh, usagef("--shard writes a part of the result for retrystorm merge: give --json too")
		}
	}
	if c.Workers < 0 || c.Workers > 1024 {
		return experiment.Options{}, sh, usagef("--workers %d: want 0 (every core) to 1024", c.Workers)
	}
	if c.Seeds < 0 || c.Seeds > 100 || c.Clients < 0 || c.Clients > 100_000 {
		return experiment.Options{}, sh, usagef("--seeds must be in [1, 100] and --clients in [1, 100000]")
	}
	if !(c.Load == 0 || c.Load >= minLoad && c.Load <= 0.975) {
		return experiment.Options{}, sh, usagef("--load %g: want a share in [%g, 0.975]", c.Load, minLoad)
	}
	if !(c.Dip >= 0 && c.Dip <= 1) {
		return experiment.Options{}, sh, usagef("--dip %g: want a share in (0, 1]", c.Dip)
	}
	if c.MaxMemory < 0 {
		return experiment.Options{}, sh, usagef("--max-memory %d: want a size", c.MaxMemory)
	}
	opts := experiment.Options{Workers: c.Workers, Limits: sim.Limits{Memory: c.MaxMemory}}
	if !c.JSON {
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
	return RunCheck(ctx, files, c, o)
}

// RunCheck checks the fleets of files; it returns ErrUnsafe when one
// stays collapsed in the realistic region.
func RunCheck(ctx context.Context, files []string, c CheckOptions, o IO) error {
	if c.Manifests != "" {
		return RunManifests(ctx, files, c, o) // manifests.go
	}
	if len(c.Stack) > 0 {
		return RunStack(ctx, files, c, o) // stack.go
	}
	if len(files) == 0 {
		return usagef("check takes one or more config or scenario files: retrystorm check FILE...")
	}
	opts, sh, err := c.options(o)
	if err != nil {
		return err
	}
	in, b, _, u, err := inputFiles(o, files, c.Format, c.Base, c.assume())
	if err != nil {
		return err
	}
	if c.Seed != nil {
		b.Seed = *c.Seed
	}
	r, err := experiment.Check(ctx, in, experiment.CheckOptions{Base: b, Load: c.Load, Dip: c.Dip, Shard: sh, Seeds: c.Seeds, Clients: c.Clients}, opts)
	if err != nil {
		return costly(err)
	}
	err = printCheck(o, r, c.JSON, c.Out, "retrystorm check "+strings.Join(files, " "))
	if c.gated() && r.Shard == (experiment.Shard{}).String() && (err == nil || errors.Is(err, ErrUnsafe)) {
		return c.gate(o, checkVerdicts(r, in, u)) // ci.go: SARIF, JUnit, --baseline
	}
	return err
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
		if r.Unsafe(i) {
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
	a := AdviseOptions{}
	fs.StringVar(&a.Route, "route", "", "start from the route or fleet NAME (default: the first that retries)")
	fs.BoolVar(&a.Conditions, "conditions", false, "search the retry conditions too")
	fs.IntVar(&a.MaxRuns, "max-runs", 20000, "refuse a search that would make more runs")
	fs.IntVar(&a.Top, "top", 5, "runner-ups to show")
	fs.StringVar(&a.As, "as", "", "write the recommendation in these formats, comma-separated: envoy, istio, linkerd, grpc, aws, go, scenario (default: your files' format, go and scenario)")
	files, err := parse(fs, args)
	if err != nil {
		return err
	}
	a.CheckOptions = c
	a.Seeds = c.Seeds
	return RunAdvise(ctx, files, a, o)
}

// AdviseOptions are advise's flags.
type AdviseOptions struct {
	CheckOptions
	Seeds   int    // --seeds
	MaxRuns int    // --max-runs
	Top     int    // --top
	As      string // --as: the formats to write the recommendation in
	Route   string // --route: the route or fleet to start from
	// Conditions is --conditions: the search may change what is retried.
	Conditions bool
	// Admit, if set, may refuse the search from its estimate (the
	// command line's --long rule) before it runs.
	Admit func(experiment.AdviseEstimate) error
}

// RunAdvise searches for a better policy than the fleet of files (or the
// storm's first) and writes it back.
func RunAdvise(ctx context.Context, files []string, a AdviseOptions, o IO) error {
	c := a.CheckOptions
	// Zero means the flag's default, for callers that fill the struct.
	a.Seeds, a.MaxRuns, a.Top = cmp.Or(a.Seeds, 3), cmp.Or(a.MaxRuns, 20000), cmp.Or(a.Top, 5)
	seeds, maxRuns, top, as := &a.Seeds, &a.MaxRuns, &a.Top, &a.As
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
	var uf *userFiles
	if len(files) == 0 {
		if b, err = base(o, c.Base); err != nil {
			return err
		}
		in = []experiment.CheckInput{{Fleet: b.Fleets[0], Origin: b.Name}}
	} else if in, b, fmtIn, uf, err = inputFiles(o, files, c.Format, c.Base, c.assume()); err != nil {
		return err
	}
	if c.Seed != nil {
		b.Seed = *c.Seed
	}
	start, err := pickFleet(in, a.Route)
	if err != nil {
		return err
	}
	if len(in) > 1 {
		fmt.Fprintf(o.Stderr, "advise: starting from %q (%s), of the %d fleets given; --route names another\n", start.Fleet.Name, start.Origin, len(in))
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
	r, err := experiment.Advise(ctx, start, experiment.AdviseOptions{Base: b, Load: c.Load, Dip: c.Dip, Seeds: *seeds, MaxRuns: *maxRuns, Shard: sh,
		Clients: c.Clients, Conditions: a.Conditions, Admit: a.Admit}, opts)
	if errors.Is(err, experiment.ErrTooBig) {
		return usagef("%v", err)
	}
	if err != nil {
		return costly(err)
	}
	if c.JSON {
		return writeJSON(o.Stdout, r)
	}
	var edit *editTarget
	if from, ok := uf.imported(start); ok {
		edit = &editTarget{srcs: uf.srcs, from: from}
	}
	return printAdvise(o, r, formats, *top, c.Out, "retrystorm advise "+strings.Join(files, " "), edit)
}

// pickFleet is the fleet advise starts from: the one route names (by
// fleet name, or a part of where it came from), else the first that
// retries, else the first.
func pickFleet(in []experiment.CheckInput, route string) (experiment.CheckInput, error) {
	if route != "" {
		var names []string
		for _, f := range in {
			if f.Fleet.Name == route {
				return f, nil
			}
			names = append(names, strconv.Quote(f.Fleet.Name))
		}
		for _, f := range in {
			if strings.Contains(f.Origin, route) {
				return f, nil
			}
		}
		return experiment.CheckInput{}, usagef("--route %q: no fleet of that name; the files give %s", route, strings.Join(names, ", "))
	}
	for _, f := range in {
		if f.Fleet.Retry.MaxRetries != 0 {
			return f, nil
		}
	}
	return in[0], nil
}

// editTarget is the user's config advise writes its recommendation into.
type editTarget struct {
	srcs []importer.Source
	from importer.Fleet
}

func printAdvise(o IO, r *experiment.AdviseResult, formats []importer.Format, top int, out, command string, edit *editTarget) error {
	if err := r.Render(o.Stdout, o.Style, top); err != nil {
		return err
	}
	best := r.Best()
	fmt.Fprintf(o.Stdout, "\nThe recommendation, %s:\n  %s\n", best.Name, experiment.Describe(best.Fleet))
	if r.Conditions {
		fmt.Fprintln(o.Stdout, "  The retry conditions were part of the search (--conditions).")
	} else {
		fmt.Fprintln(o.Stdout, "  The retry conditions are yours: every candidate retries what your config retries (--conditions searches them too).")
	}
	cells := len(r.Seeds) * len(r.Faults) * len(r.Loads)
	// best expressible is the best candidate format can write whole.
	bestIn := func(f importer.Format) (experiment.AdviseCandidate, bool) {
		for _, i := range r.Ranking {
			if c := r.Candidates[i]; importer.Expressible(c.Fleet, f) {
				return c, true
			}
		}
		return experiment.AdviseCandidate{}, false
	}
	if edit != nil {
		f := edit.from.Format
		c, ok := bestIn(f)
		if !ok {
			c = best
		}
		if c.Name != best.Name {
			fmt.Fprintf(o.Stdout, "\n%s cannot express the recommendation whole; the best policy it can, %s, recovered in %d of %d cells and lost %s intents (the recommendation: %d, %s).\n",
				formatName(f), c.Name, cells-c.Never, cells, report.Int(c.IntentsLost), cells-best.Never, report.Int(best.IntentsLost))
		}
		edited, notes, err := importer.Edit(edit.srcs, edit.from, c.Fleet)
		if err != nil {
			return err
		}
		fmt.Fprintf(o.Stdout, "\nYour file, edited for %s (only what the recommendation changes; the rest is as you wrote it):\n\n", c.Name)
		if len(edited) == 0 {
			fmt.Fprintln(o.Stdout, "  (no change: your file already says it)")
		}
		for _, e := range edited {
			fmt.Fprint(o.Stdout, e.Diff)
		}
		for _, n := range notes {
			fmt.Fprintf(o.Stdout, "# note: %s\n", n)
		}
	}
	for _, f := range formats {
		if edit != nil && f == edit.from.Format {
			continue // written into the user's file above
		}
		text, cannot, err := importer.Export(best.Fleet, f)
		if err != nil {
			return err
		}
		how := "a translation of the recommendation; what it cannot express is listed below"
		if importer.Expressible(best.Fleet, f) {
			how = "the recommendation whole"
		}
		fmt.Fprintf(o.Stdout, "\nAs %s (%s):\n\n%s", formatName(f), how, text)
		if !strings.HasSuffix(text, "\n") {
			fmt.Fprintln(o.Stdout)
		}
		for _, c := range cannot {
			fmt.Fprintf(o.Stdout, "# cannot express: %s\n", c)
		}
		if !importer.Expressible(best.Fleet, f) {
			// Say what the best policy this format can write whole does.
			if c, ok := bestIn(f); ok {
				alt, _, err := importer.Export(c.Fleet, f)
				if err != nil {
					return err
				}
				fmt.Fprintf(o.Stdout, "\nThe best policy %s can express whole, %s: it recovered in %d of %d cells and lost %s intents (the recommendation: %d, %s):\n\n%s",
					formatName(f), c.Name, cells-c.Never, cells, report.Int(c.IntentsLost), cells-best.Never, report.Int(best.IntentsLost), alt)
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
	var m MergeOptions
	fs.BoolVar(&m.JSON, "json", false, "print JSON")
	fs.StringVar(&m.Out, "out", "", "write an HTML report into this directory")
	fs.IntVar(&m.Top, "top", 5, "advise: runner-ups to show")
	files, err := parse(fs, args)
	if err != nil {
		return nil, false, err
	}
	return RunMerge(ctx, files, m, o)
}

// MergeOptions are merge's flags.
type MergeOptions struct {
	JSON bool   // --json
	Out  string // --out
	Top  int    // --top, for advise
}

// RunMerge puts the shard results in files together (see Merge).
func RunMerge(ctx context.Context, files []string, m MergeOptions, o IO) (*experiment.Outcome, bool, error) {
	asJSON, out, top := &m.JSON, &m.Out, &m.Top
	if *top == 0 {
		*top = 5
	}
	if len(files) == 0 {
		return nil, false, usagef("merge takes the JSON of every shard: retrystorm merge FILE...")
	}
	if len(files) > experiment.MaxShards {
		return nil, false, usagef("%d files: merge takes at most %d shards", len(files), experiment.MaxShards)
	}
	var parts [][]byte
	total := 0
	for _, f := range files {
		data, err := o.read(f, maxShardSize)
		if err != nil {
			return nil, false, err
		}
		if total += len(data); total > experiment.MaxMergeBytes {
			return nil, false, usagef("%s: the shards are too large together (at most %d bytes)", safetext.Name(f), experiment.MaxMergeBytes)
		}
		parts = append(parts, data)
	}
	merged, err := experiment.MergeFiles(files, parts)
	if err != nil {
		// The command's name already heads the message.
		return nil, false, usagef("%s", strings.TrimPrefix(err.Error(), "merge: "))
	}
	command := "retrystorm merge " + strings.Join(files, " ")
	switch {
	case merged.Sweep != nil:
		return merged.Sweep, *asJSON, nil
	case merged.Lab != nil:
		return merged.Lab, *asJSON, nil
	case merged.Check != nil:
		return nil, false, printCheck(o, merged.Check, *asJSON, *out, command)
	}
	if *asJSON {
		return nil, false, writeJSON(o.Stdout, merged.Advise)
	}
	return nil, false, printAdvise(o, merged.Advise, []importer.Format{importer.GoCode, importer.ScenarioFleet}, *top, *out, command, nil)
}
