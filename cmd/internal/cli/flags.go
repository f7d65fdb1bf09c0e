package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/retrystorm/retrystorm/experiment"
	"github.com/retrystorm/retrystorm/grid"
	"github.com/retrystorm/retrystorm/internal/suggest"
)

// Invocation is a parsed command line: the command, its arguments and
// flags, and where to print. Run functions get it.
type Invocation struct {
	// Name is the command; "demo" when none was typed.
	Name string
	// Args are the positional arguments, wherever they stood among the
	// flags.
	Args           []string
	Stdout, Stderr io.Writer

	// outputFlags
	JSON bool
	Seed *uint64
	Out  string
	// configFlags
	Config      string
	PrintConfig bool
	// gridFlag: the sweep's cells per axis; 0 means the default.
	Grid int
	// Engine is sweep --engine: sim, model or both.
	Engine string
	// findingsFlag: also write the findings to this Markdown file.
	Findings string
	// pageFlags: the page's file.
	Output string
	// labFlags
	Lab LabFlags
	// costFlags
	cost costValues
	// shardFlags, importFlags, checkFlags, adviseFlags, mergeFlags
	Configs ConfigFlags
	// windowFlags, calibrateFlags, replayFlags
	Calibrate CalibrateFlags
	// replayFlags: replay leaves out advise's pick.
	ReplayNoAdvise bool

	typed bool     // the command's name was typed (not the default demo)
	argv  []string // the arguments as given, for the companion
	flags *flag.FlagSet
	table []command
}

// LabFlags are the lab's own flags.
type LabFlags struct {
	// Tick is the wall-clock length of one scenario tick.
	Tick time.Duration
	// Duration, when not zero, replaces the scenario's duration.
	Duration time.Duration
	// Port is the live view's port on 127.0.0.1; 0 picks a free one.
	Port int
	// Protocol is what the lab's servers speak: "http" or "grpc".
	Protocol string
	// Target, when not empty, is the URL of a real service to play the
	// scenario against, through a fault proxy; AllowRemote lets it be off
	// this machine. Impose makes the service behave as the scenario's
	// origin. Probe measures the service instead, and writes a scenario.
	Target                     string
	AllowRemote, Impose, Probe bool
	// AutoTick reruns an inconclusive run at the tick it suggests, up to
	// twice.
	AutoTick bool
	// Shard, when not empty, is "i/n": run shard i of a run against
	// --target split over n load processes, for merge.
	Shard string
}

// A flagGroup defines flags that several commands share on fs, storing
// their values in inv. Usage strings name the value in backquotes.
type flagGroup func(fs *flag.FlagSet, inv *Invocation)

// outputFlags are every experiment's: what to print and where to write.
func outputFlags(fs *flag.FlagSet, inv *Invocation) {
	fs.BoolVar(&inv.JSON, "json", false, `print machine-readable JSON on stdout instead of tables; it carries "claims". No report is written unless --out is given`)
	funcVar(fs, "seed", "replace the scenario's seed with `N`, an unsigned integer", func(s string) error {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return fmt.Errorf("want an unsigned integer")
		}
		inv.Seed = &n
		return nil
	})
	fs.StringVar(&inv.Out, "out", "", "write the HTML report to the directory `DIR` (default "+defaultReportDir(inv.Name)+"; none with --json)")
}

// configFlags are for the commands that run an embedded scenario file.
func configFlags(fs *flag.FlagSet, inv *Invocation) {
	fileVar(fs, &inv.Config, "config", "run the scenario `FILE` instead of the embedded default", " (leave --config out to run the embedded default)")
	fs.BoolVar(&inv.PrintConfig, "print-config", false, "print the embedded default scenario, to copy and edit")
}

// The sweep's grid. At 2 cells per axis the map cannot show the boundary
// its claims are about, and at 3 or 4 it fails them for some seeds
// (seed 5 at 4); from 5 on they held for seeds 1 to 21. minGrid keeps a
// cell of margin; TestSweepSmallestGrid runs it.
const (
	minGrid = 6
	maxGrid = 200
)

func gridFlag(fs *flag.FlagSet, inv *Invocation) {
	funcVar(fs, "grid", fmt.Sprintf("`N` cells per axis of the sweep's map, %d to %d (default 40)", minGrid, maxGrid), func(s string) error {
		n, err := strconv.Atoi(s)
		if err != nil || n < minGrid || n > maxGrid {
			return fmt.Errorf("want a whole number of cells per axis from %d to %d (below %d the map is too coarse to show the boundary the sweep's claims are about)", minGrid, maxGrid, minGrid)
		}
		inv.Grid = n
		return nil
	})
}

// engineFlag is sweep's --engine.
func engineFlag(fs *flag.FlagSet, inv *Invocation) {
	funcVar(fs, "engine", "what answers the map's cells, `ENGINE`: sim (the simulator, every cell), model (the analytic model where it describes the policy, the simulator elsewhere) or both (the model's map, and the simulator in the cells near its boundary) (default sim)", func(s string) error {
		switch s {
		case experiment.EngineSim, experiment.EngineModel, experiment.EngineBoth:
			inv.Engine = s
			return nil
		}
		return fmt.Errorf("want sim, model or both")
	})
}

func findingsFlag(fs *flag.FlagSet, inv *Invocation) {
	fileVar(fs, &inv.Findings, "findings", "also write the findings as Markdown to `FILE`", "")
}

func pageFlags(fs *flag.FlagSet, inv *Invocation) {
	inv.Output = "retrystorm.html"
	fileVar(fs, &inv.Output, "o", "write the page to `FILE` (default retrystorm.html)", "")
}

// defaultLabTick is lab.DefaultTick, which this package cannot import
// without linking the lab; a test in package full checks they agree.
const defaultLabTick = 100 * time.Millisecond

func labFlags(fs *flag.FlagSet, inv *Invocation) {
	inv.Lab.Tick = defaultLabTick
	funcVar(fs, "tick", "the wall-clock length `D` of one tick of the scenario (default 100ms; time is scaled by D / the scenario's tick)", func(s string) error {
		d, err := parseDuration(s)
		inv.Lab.Tick = d
		return err
	})
	funcVar(fs, "duration", "run `D` of scenario time instead of the scenario's duration (a whole number of ticks)", func(s string) error {
		d, err := parseDuration(s)
		inv.Lab.Duration = d
		return err
	})
	inv.Lab.Protocol = "http"
	funcVar(fs, "protocol", "what the origin, the gateway and the load generator speak: `P`, http or grpc (default http)", func(s string) error {
		if s != "http" && s != "grpc" {
			return fmt.Errorf("want http or grpc")
		}
		inv.Lab.Protocol = s
		return nil
	})
	funcVar(fs, "port", "serve the live view on port `N` of 127.0.0.1 (default: a free port)", func(s string) error {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 || n > 65535 {
			return fmt.Errorf("want a port from 0 to 65535")
		}
		inv.Lab.Port = n
		return nil
	})
	funcVar(fs, "target", "play the scenario against the service at `URL` (http or https), through a fault proxy that applies its triggers, instead of the lab's origin", func(s string) error {
		u, err := url.Parse(s)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("want an http:// or https:// URL with a host")
		}
		inv.Lab.Target = s
		return nil
	})
	fs.BoolVar(&inv.Lab.AllowRemote, "allow-remote", false, "let --target name a service off this machine (a storm is a load test: point it only at a service of your own)")
	fs.BoolVar(&inv.Lab.Impose, "impose", false, "with --target, make the service behave as the scenario's origin: its capacity as a concurrency limit with a queue, and its service rate")
	fs.BoolVar(&inv.Lab.AutoTick, "auto-tick", false, "when the run is inconclusive (the lab ran late or used its cores up), run it again at the longer tick it suggests, at most twice")
	funcVar(fs, "shard", "with --target, run shard `I/N` of the load (the clients c with c mod N = I-1) from the next 15 s of the clock, and print it with --json for retrystorm merge; job/N takes I from a Kubernetes Indexed Job's JOB_COMPLETION_INDEX (+1)", func(s string) error {
		if n, ok := strings.CutPrefix(s, "job/"); ok {
			// A Kubernetes Indexed Job's pod: no shell in the image to
			// do the arithmetic.
			i, err := strconv.Atoi(os.Getenv("JOB_COMPLETION_INDEX"))
			if err != nil {
				return errors.New("job/N takes I from JOB_COMPLETION_INDEX, which is not a number here: it is for the pods of a Kubernetes Indexed Job")
			}
			s = strconv.Itoa(i+1) + "/" + n
		}
		if _, err := grid.ParseShard(s); err != nil {
			return errors.New(strings.TrimPrefix(err.Error(), fmt.Sprintf("--shard %q: ", s)))
		}
		inv.Lab.Shard = s
		return nil
	})
	fs.BoolVar(&inv.Lab.Probe, "probe", false, "with --target, measure the service's capacity and latency with a short, bounded ramp, and print a scenario file for it")
}

// ConfigFlags are the flags of the commands that read the retry settings
// people run (import, check, advise) and of merge; --shard and --workers
// are sweep's too.
type ConfigFlags struct {
	Format  string        // --format: the files' format; empty means detect it
	Base    string        // --base: the scenario the fleets run in
	Output  string        // import -o: the scenario file to write
	Timeout time.Duration // import --timeout
	Load    float64       // --load: the highest realistic base load
	Dip     float64       // --dip: the largest realistic capacity dip
	Shard   string        // --shard i/n
	Workers int           // --workers
	Seeds   int           // check and advise --seeds
	Clients int           // check and advise --clients: client instances
	Route   string        // advise --route: the fleet to start from
	// Conditions is advise --conditions: search what is retried too.
	Conditions bool
	// Model is check --model: the analytic model answers the cells far
	// from the boundary outside the realistic region.
	Model bool
	// FullRuns is check --full-runs: every run plays to its end.
	FullRuns bool
	// Exhaustive is advise --exhaustive: simulate every candidate at
	// every seed, with no screen by the model.
	Exhaustive bool
	MaxRuns    int    // advise and check --max-runs
	Top        int    // advise and merge --top
	As         string // advise --as: the formats to write the recommendation in

	// Protocol and Istio are import's --protocol and --istio: what the
	// services speak, and the Istio release, where the configs do not say.
	Protocol, Istio string

	// Stack is check --stack, each value as given (files separated by
	// commas, outermost first); SARIF, JUnit and Baseline are check's CI
	// outputs and baseline (docs/stack.md).
	Stack                  []string
	SARIF, JUnit, Baseline string
	Manifests              string // check --manifests DIR
	// FailOnUnsafe is check --fail-on unsafe: exit 1 on UNSAFE only, AT
	// RISK is 0 (the default fails on at-risk too).
	FailOnUnsafe bool
	// EmitWorst is check --emit-worst FILE: the worst cell as a scenario.
	EmitWorst string
	// Write and InPlace are advise --write DIR and --in-place: where the
	// edited files go.
	Write   string
	InPlace bool
	// Instances is check --instances: each --stack layer's instances
	// (replicas), outermost first; 0 for one per client instance.
	Instances []int
}

func formatFlag(fs *flag.FlagSet, inv *Invocation, also string) {
	funcVar(fs, "format", "read every file as `FORMAT`: envoy, istio, linkerd, grpc or aws"+also+" (default: detected from each file's content)", func(s string) error {
		switch s {
		case "envoy", "istio", "linkerd", "grpc", "aws":
		case "scenario":
			if also == "" {
				return errors.New("want envoy, istio, linkerd, grpc or aws")
			}
		default:
			return errors.New("want envoy, istio, linkerd, grpc or aws" + also)
		}
		inv.Configs.Format = s
		return nil
	})
	fileVar(fs, &inv.Configs.Base, "base", "run the fleets in the traffic, origin and triggers of the scenario `FILE` (default: a scenario file given, or the storm's)", "")
}

// shardFlags split a grid over machines, for merge.
func shardFlags(fs *flag.FlagSet, inv *Invocation) {
	funcVar(fs, "shard", "run only shard `I/N` of the cells (I from 1 to N), and print them with --json for retrystorm merge", func(s string) error {
		if _, err := grid.ParseShard(s); err != nil {
			return errors.New(strings.TrimPrefix(err.Error(), fmt.Sprintf("--shard %q: ", s)))
		}
		inv.Configs.Shard = s
		return nil
	})
	funcVar(fs, "workers", "run at most `N` simulations at once (default: one per core)", func(s string) error {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 1024 {
			return errors.New("want a whole number from 1 to 1024")
		}
		inv.Configs.Workers = n
		return nil
	})
}

func importFlags(fs *flag.FlagSet, inv *Invocation) {
	formatFlag(fs, inv, "")
	fileVar(fs, &inv.Configs.Output, "o", "write the scenario to `FILE` instead of standard output", "")
	funcVar(fs, "timeout", "the attempt timeout `D` of configs that set none (AWS SDK settings; default: the base scenario's first fleet's)", func(s string) error {
		d, err := parseDuration(s)
		inv.Configs.Timeout = d
		return err
	})
	assumeFlags(fs, inv)
}

// assumeFlags are what import, check and advise tell the importer the
// configs do not say: the services' protocol and the Istio release.
func assumeFlags(fs *flag.FlagSet, inv *Invocation) {
	funcVar(fs, "protocol", "the protocol `P` the services speak, http or grpc, where the configs do not say (default: http, noted in each fleet)", func(s string) error {
		if s != "http" && s != "grpc" {
			return errors.New("want http or grpc")
		}
		inv.Configs.Protocol = s
		return nil
	})
	funcVar(fs, "istio", "the Istio release `V` whose defaults apply, such as 1.23 (default: the current)", func(s string) error {
		inv.Configs.Istio = s
		return nil
	})
}

// minLoad is the lowest --load check and advise take (configcmd.minLoad):
// a load sets the origin's capacity to the rate over it, so a load such as
// 1e-300 made a capacity past any a scenario takes, and the check blamed
// origin.capacity, a field the user never wrote.
const minLoad = 0.01

func checkFlags(fs *flag.FlagSet, inv *Invocation) {
	formatFlag(fs, inv, " or scenario")
	share := func(name, usage string, p *float64, lo, hi float64) {
		funcVar(fs, name, usage, func(s string) error {
			f, err := strconv.ParseFloat(s, 64)
			if err != nil || !(f > lo && f <= hi || f == lo && lo > 0) {
				if lo > 0 {
					return fmt.Errorf("want a share in [%g, %g]", lo, hi)
				}
				return fmt.Errorf("want a share in (0, %g]", hi)
			}
			*p = f
			return nil
		})
	}
	share("load", "the highest base load you call realistic, `SHARE` of the origin's capacity, such as 0.8 (default: the base scenario's)", &inv.Configs.Load, minLoad, 0.975)
	share("dip", "the largest capacity dip you call realistic, `SHARE` of the capacity, such as 0.33 (default: the base scenario's first dip)", &inv.Configs.Dip, 0, 1)
	whole(fs, "seeds", "run each cell with `N` seeds (default 3); the verdict is the worst", &inv.Configs.Seeds, 1, 100)
	whole(fs, "clients", "judge at `N` client instances, each with its own budget (default: the scenario's)", &inv.Configs.Clients, 1, 100_000)
	memoryFlag(fs, inv)
	assumeFlags(fs, inv)
}

// stackFlags are check's and advise's flags for a stack of files and for
// the chains of Kubernetes manifests (docs/stack.md).
func stackFlags(fs *flag.FlagSet, inv *Invocation) {
	funcVar(fs, "stack", "check `FILES` (comma-separated, outermost first; or the flag repeated) as one call chain, each file a layer in its own format", func(s string) error {
		if strings.TrimSpace(s) == "" {
			return errors.New("needs files separated by commas, outermost first")
		}
		inv.Configs.Stack = append(inv.Configs.Stack, s)
		return nil
	})
	funcVar(fs, "instances", "give each --stack layer `N,N,...` instances (a gateway's few replicas, a sidecar per pod), outermost first; 0 for one per client instance (the default)", func(s string) error {
		inv.Configs.Instances = inv.Configs.Instances[:0]
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 0 || n > 10_000 {
				return fmt.Errorf("%q: want whole numbers from 0 to 10000, separated by commas", f)
			}
			inv.Configs.Instances = append(inv.Configs.Instances, n)
		}
		return nil
	})
	fileVar(fs, &inv.Configs.Manifests, "manifests", "find the call chains in the Kubernetes manifests under `DIR` (routes, the Services they call, the client configs their pods mount) and check each", "")
}

// gateFlags are check's flags for a CI gate: its outputs, its baseline
// and the level it fails on (docs/stack.md).
func gateFlags(fs *flag.FlagSet, inv *Invocation) {
	fileVar(fs, &inv.Configs.SARIF, "sarif", "write the verdicts as SARIF 2.1.0 to `FILE`: a result at the file and line of each setting to blame", "")
	fileVar(fs, &inv.Configs.JUnit, "junit", "write the verdicts as JUnit XML to `FILE`: a test case per fleet or chain", "")
	fileVar(fs, &inv.Configs.Baseline, "baseline", "compare with `FILE`, a previous check --json, and fail only on what got worse", "")
	fileVar(fs, &inv.Configs.EmitWorst, "emit-worst", "write the worst cell of a verdict that is not SAFE to `FILE` as a scenario that run and lab reproduce", "")
	funcVar(fs, "fail-on", "exit 1 on verdicts of `LEVEL` or worse: at-risk (the default) or unsafe (AT RISK exits 0)", func(s string) error {
		switch s {
		case "at-risk":
			inv.Configs.FailOnUnsafe = false
		case "unsafe":
			inv.Configs.FailOnUnsafe = true
		default:
			return errors.New("want at-risk or unsafe")
		}
		return nil
	})
}

// adviseWriteFlags are advise's: where its edits go (docs/check.md,
// "advise").
func adviseWriteFlags(fs *flag.FlagSet, inv *Invocation) {
	fileVar(fs, &inv.Configs.Write, "write", "write each edited file into `DIR` under its own name (DIR is made if missing; never one of the inputs)", "")
	fs.BoolVar(&inv.Configs.InPlace, "in-place", false, "edit your files themselves (refused for a file that changed since it was read)")
	fileVar(fs, &inv.Configs.SARIF, "sarif", "write each edit as a SARIF 2.1.0 fix, on the result it answers, to `FILE`", "")
}

// whole defines a flag taking a whole number from lo to hi.
func whole(fs *flag.FlagSet, name, usage string, p *int, lo, hi int) {
	funcVar(fs, name, usage, func(s string) error {
		n, err := strconv.Atoi(s)
		if err != nil || n < lo || n > hi {
			return fmt.Errorf("want a whole number from %d to %d", lo, hi)
		}
		*p = n
		return nil
	})
}

// checkRunsFlags bound check's simulations for a stack or manifests.
func checkRunsFlags(fs *flag.FlagSet, inv *Invocation) {
	whole(fs, "max-runs", "refuse a --stack or --manifests check of more than `N` simulations, counted first (default 20000)", &inv.Configs.MaxRuns, 1, 10_000_000)
}

// checkModelFlags is check's own: --model, --full-runs.
func checkModelFlags(fs *flag.FlagSet, inv *Invocation) {
	fs.BoolVar(&inv.Configs.Model, "model", false, "let the analytic model answer the cells outside the realistic region that it places far from the boundary; the realistic cells, and so the verdict, still rest on the simulator (docs/model.md)")
	fs.BoolVar(&inv.Configs.FullRuns, "full-runs", false, "play every run to its end, so that the collapsed cells' amplification is counted too (slower; the verdict is the same; docs/early-exit.md)")
}

func adviseFlags(fs *flag.FlagSet, inv *Invocation) {
	whole(fs, "max-runs", "refuse a search of more than `N` simulations (default 20000)", &inv.Configs.MaxRuns, 1, 10_000_000)
	whole(fs, "top", "show the `N` best policies (default 5)", &inv.Configs.Top, 1, 100)
	fs.StringVar(&inv.Configs.Route, "route", "", "start from the route or fleet `NAME` (default: the first that retries)")
	fs.BoolVar(&inv.Configs.Conditions, "conditions", false, "search what is retried (retry conditions) too; without it they stay yours")
	fs.BoolVar(&inv.Configs.Exhaustive, "exhaustive", false, "simulate every candidate at every seed (default: screen them with the analytic model, or one seed where it does not apply, and simulate at every seed those that can still win)")
	funcVar(fs, "as", "write the recommendation as each of `FORMATS`, comma-separated: envoy, istio, linkerd, grpc, aws, go, scenario (default: your files' format, go and scenario)", func(s string) error {
		for _, f := range strings.Split(s, ",") {
			switch strings.TrimSpace(f) {
			case "envoy", "istio", "linkerd", "grpc", "aws", "go", "scenario":
			default:
				return fmt.Errorf("unknown format %q: want envoy, istio, linkerd, grpc, aws, go or scenario", strings.TrimSpace(f))
			}
		}
		inv.Configs.As = s
		return nil
	})
}

func mergeFlags(fs *flag.FlagSet, inv *Invocation) {
	funcVar(fs, "top", "advise: show the `N` best policies (default 5)", func(s string) error {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 100 {
			return errors.New("want a whole number from 1 to 100")
		}
		inv.Configs.Top = n
		return nil
	})
}

// parseDuration reads a positive duration.
func parseDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("want a positive duration such as 100ms, 2s or 1m30s")
	}
	return d, nil
}

// fileVar defines a flag naming a file, stored in p; an empty name is
// refused, with hint after the reason.
func fileVar(fs *flag.FlagSet, p *string, name, usage, hint string) {
	funcVar(fs, name, usage, func(s string) error {
		if s == "" {
			return errors.New("needs a file name" + hint)
		}
		*p = s
		return nil
	})
}

// funcVar is flag.Func, but the flag remembers the text it was given, for
// the command line the report shows.
func funcVar(fs *flag.FlagSet, name, usage string, set func(string) error) {
	fs.Var(&textValue{set: set}, name, usage)
}

// shownVar is funcVar for a flag whose text may hold a secret: the
// command line shows show(text).
func shownVar(fs *flag.FlagSet, name, usage string, set func(string) error, show func(string) string) {
	fs.Var(&textValue{set: set, show: show}, name, usage)
}

type textValue struct {
	set  func(string) error
	show func(string) string
	text string
}

func (v *textValue) String() string {
	if v.show != nil && v.text != "" {
		return v.show(v.text)
	}
	return v.text
}
func (v *textValue) Set(s string) error {
	v.text = s
	return v.set(s)
}

// parse reads c's flags from args. Flags may come before or after the
// positional arguments (retrystorm run storm.yaml --json).
func parse(c command, args []string, inv *Invocation) error {
	fs := flag.NewFlagSet("retrystorm "+c.Name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	for _, g := range c.Flags {
		g(fs, inv)
	}
	inv.flags = fs
	for {
		if err := fs.Parse(args); err != nil {
			if err == flag.ErrHelp {
				return err
			}
			return &usageError{cmd: inv.cmdName(), msg: flagError(fs, err)}
		}
		args = fs.Args()
		if len(args) == 0 {
			return nil
		}
		inv.Args = append(inv.Args, args[0])
		args = args[1:]
	}
}

// dash writes a flag as the README does: -o, --json.
func dash(name string) string {
	if len([]rune(name)) == 1 {
		return "-" + name
	}
	return "--" + name
}

var (
	undefinedFlag = regexp.MustCompile(`^flag provided but not defined: -+(.*)$`)
	invalidValue  = regexp.MustCompile(`^invalid (?:boolean )?value (".*") for (?:flag )?-+([^:]+): (.*)$`)
	flagInText    = regexp.MustCompile(`(^|[ :])-+([A-Za-z][A-Za-z0-9_-]*)`)
)

// flagError rewords the flag package's errors: flags as --flag, and a
// "did you mean" for an unknown one.
func flagError(fs *flag.FlagSet, err error) string {
	msg := err.Error()
	if m := undefinedFlag.FindStringSubmatch(msg); m != nil {
		var names []string
		fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
		text := "unknown flag " + dash(m[1])
		if s := suggest.Closest(m[1], names); s != "" {
			return text + "; did you mean " + dash(s) + "?"
		}
		if len(names) == 0 {
			return text + " (it takes no flags)"
		}
		slices.Sort(names)
		for i, n := range names {
			names[i] = dash(n)
		}
		return text + " (it takes " + suggest.OneOf(names) + ")"
	}
	if m := invalidValue.FindStringSubmatch(msg); m != nil {
		value, _ := strconv.Unquote(m[1])
		if value == "" {
			value = `""`
		}
		// The flag package wraps a Func's error as "parse error" for
		// durations and numbers; say what was wrong in words.
		why := strings.TrimPrefix(m[3], "parse error")
		if why == "" {
			why = "not a valid value"
		}
		return dash(m[2]) + " " + value + ": " + why
	}
	return flagInText.ReplaceAllStringFunc(msg, func(s string) string {
		m := flagInText.FindStringSubmatch(s)
		return m[1] + dash(m[2])
	})
}
