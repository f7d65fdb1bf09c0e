package cli

import (
	"context"

	"github.com/retrystorm/retrystorm/experiment"
)

// The command table: every command retrystorm has, in the order help
// lists them. The experiments come from package experiment's registry (to
// add one, see CONTRIBUTING.md); to add another command, add its entry
// here: its name, a one-line summary, its flag groups (flags.go) and its
// run function. A command whose
// dependencies are heavy (the lab's Prometheus, gRPC, the importers'
// protobufs) is marked Heavy and takes its run function from the Heavy
// struct, which only cmd/retrystorm-full fills (package full); the light
// cmd/retrystorm lists it, parses its flags and hands the command line to
// retrystorm-full (companion.go).
func table(h Heavy) []command {
	cmds := []command{{
		Name:    "demo",
		Summary: "the default: storm and fleets, tables and an HTML report",
		Flags:   groups(outputFlags, costFlags),
		Run:     runDemo,
	}}
	// Then every experiment, in its order: each declares itself in its
	// own file of package experiment.
	for _, e := range experiment.All() {
		cmds = append(cmds, experimentCommand(e))
	}
	cmds = append(cmds, fileCommands()...)
	cmds = append(cmds, heavyCommands(h)...)
	return append(cmds, toolCommands()...)
}

// fileCommands run a scenario file, or every experiment.
func fileCommands() []command {
	return []command{
		{
			Name:    "run",
			Args:    "FILE.yaml",
			Summary: "run a scenario file as it is: every fleet, a table, charts and JSON",
			Flags:   groups(outputFlags, costFlags),
			Run:     runFile,
		},
		{
			Name:    "boundary",
			Args:    "[FILE]",
			Summary: "where the system tips, from the analytic model: load × dip, per policy",
			About:   boundaryAbout,
			Flags:   groups(outputFlags, gridFlag),
			Run:     runBoundary,
		},
		{
			Name:    "all",
			Summary: "every experiment: the full report and FINDINGS.md",
			Flags:   groups(outputFlags, costFlags, gridFlag, findingsFlag),
			Run:     runAll,
		},
	}
}

// heavyCommands run in the companion binary (Heavy): the lab, and the
// commands that read a user's configs or metrics.
func heavyCommands(h Heavy) []command {
	return []command{
		{
			Name:    "lab",
			Summary: "the storm over real HTTP or gRPC on loopback, beside the simulator (about a minute)",
			About:   labAbout,
			Flags:   groups(outputFlags, configFlags, costFlags, labFlags),
			Run:     h.Lab,
			Heavy:   true,
		},
		{
			Name:    "import",
			Args:    "FILE...",
			Summary: "turn Envoy, Istio, Linkerd, gRPC and AWS SDK retry settings into a scenario file",
			About:   importAbout,
			Flags:   groups(importFlags),
			Run:     h.Import,
			Heavy:   true,
		},
		{
			Name:    "check",
			Args:    "FILE...",
			Summary: "is this config safe? each fleet through dips, an error blip, a stall and an outage",
			About:   checkAbout,
			Flags:   groups(outputFlags, checkFlags, stackFlags, gateFlags, shardFlags, checkRunsFlags, checkModelFlags, checkWindowFlags),
			Run:     h.Check,
			Heavy:   true,
		},
		{
			Name:    "advise",
			Args:    "[FILE...]",
			Summary: "search for a better retry policy, and write it back in your config's format",
			About:   adviseAbout,
			Flags:   groups(outputFlags, checkFlags, stackFlags, adviseWriteFlags, shardFlags, adviseFlags, costFlags),
			Run:     h.Advise,
			Heavy:   true,
		},
		{
			Name:    "calibrate",
			Summary: "fit a scenario to your Prometheus metrics (Envoy, gRPC, HAProxy, resil, the lab)",
			About:   calibrateAbout,
			Flags:   groups(calibrateFlags),
			Run:     h.Calibrate,
			Heavy:   true,
		},
		{
			Name:    "replay",
			Summary: "replay an incident from its metrics: its trigger, and what would have prevented it",
			About:   replayAbout,
			Flags:   groups(outputFlags, windowFlags, replayFlags),
			Run:     h.Replay,
			Heavy:   true,
		},
		{
			Name:    "merge",
			Args:    "FILE...",
			Summary: "put the --shard results of a sweep, check or advise together",
			About:   mergeAbout,
			Flags:   groups(outputFlags, mergeFlags),
			Run:     h.Merge,
			Heavy:   true,
		},
	}
}

// toolCommands are the page, version and help.
func toolCommands() []command {
	return []command{
		{
			Name:    "page",
			Summary: "write a self-contained HTML page that reruns the experiments in a browser",
			About:   pageAbout,
			Flags:   groups(pageFlags),
			Run:     runPage,
		},
		{
			Name:    "version",
			Summary: "print the module version and the revision this binary was built from",
			Run:     runVersion,
		},
		{
			Name:    "help",
			Args:    "[COMMAND]",
			Summary: "list the commands, or show one command's flags",
			Run:     runHelp,
		},
	}
}

// RunFunc runs a command once its flags are parsed.
type RunFunc func(ctx context.Context, inv *Invocation) error

// Heavy holds the run functions of the commands marked Heavy in the table.
// cmd/retrystorm passes the zero Heavy: it links none of their
// dependencies, and runs them in the companion binary retrystorm-full,
// which passes full.Heavy with every field set.
type Heavy struct {
	Lab RunFunc
	// Import, Check, Advise and Merge read users' configs (Envoy's and
	// Istio's protobufs) and write them back.
	Import, Check, Advise, Merge RunFunc
	// Calibrate and Replay read Prometheus (client_golang's API client).
	Calibrate, Replay RunFunc
}

// command is one entry of the table.
type command struct {
	Name string
	// Args names the positional arguments in the usage line ("FILE.yaml");
	// empty when the command takes none.
	Args    string
	Summary string // one line, for the list of commands
	// About, when set, is a longer description for the command's help, in
	// paragraphs separated by blank lines.
	About string
	Flags []flagGroup
	// Run is nil for a heavy command in the light binary.
	Run RunFunc
	// Heavy means Run comes from Heavy and lives in retrystorm-full.
	Heavy bool
}

func groups(g ...flagGroup) []flagGroup { return g }

const importAbout = `Reads the retry settings of each FILE (an Envoy route and cluster, an Istio VirtualService and DestinationRule, a Linkerd ServiceProfile, a gRPC service config, an AWS SDK config file or environment lines; the format is detected from the content) and writes a scenario file whose fleets behave as those configs do, each with a comment saying where every setting came from and what could not be represented. docs/import.md documents every mapping and default.`

const checkAbout = `Imports each FILE (or reads a scenario file's fleets) and runs every fleet through a standard set of faults (capacity dips with the base's queue and a bounded one, an error blip, a stall, outages that refuse and that never answer) at several base loads, with several seeds (--seeds). It says per fleet the worst amplification, where it stays collapsed and in how many seeds, the intents lost, the verdict at the number of client instances (--clients, or the scenario's) and at a quarter and four times as many, and the settings of your file to blame. It exits with status 1 when a fleet stays collapsed, or amplifies the load past the documented thresholds, in some seed of the region you call realistic (--load, --dip, or the base scenario's own). With --prometheus URL (and --from, --to) or --file (saved answers), the base is your system's: calibrated from its metrics first, as calibrate does (with your FILEs' retry policy, as calibrate --config takes it), and checked as check --base would check the file calibrate writes; --calibrated FILE keeps that file. docs/check.md has the details.`

const adviseAbout = `Starts from one fleet of the FILEs (a config, in as many files as it spans, or a scenario file; the storm's naive fleet without one): the route --route names, else the first that retries and searches retry policies (retry counts, budgets of every kind, a breaker, jittered backoff) across check's faults and loads with several seeds, on every core. It prints the recommendation, the runner-ups and each one's map beside yours, then writes the recommendation in your format, as resil Go code and as a scenario fleet (or the formats --as lists), saying what each cannot express. It counts its runs first and refuses a search larger than --max-runs, or one estimated to take long when nobody watches unless --long is given. It writes the recommendation into your own file as a diff, changing only what the recommendation changes; it keeps your retry conditions unless --conditions.`

const mergeAbout = `Reads the JSON that sweep, check or advise print with --shard I/N --json, one FILE per shard, and prints the table, map and recommendation one run on one machine would, byte for byte. deploy/kubernetes has an Indexed Job that runs the shards.`

const labAbout = `The lab runs a scenario (the storm's by default) with real servers and sockets on 127.0.0.1: an origin with finite capacity, a gateway whose transport is resilhttp with one Guard per client, and an open-loop load generator, in scaled time, fleet after fleet; then it sets the result beside the simulator's and checks that they agree. A live view shows it as it runs. With --protocol grpc they speak gRPC instead: the origin serves grpc.testing.TestService/UnaryCall, the gateway's clients are resilgrpc's interceptors, and the origin also exports OpenTelemetry metrics. With --target URL it plays the scenario against an HTTP service of your own instead, through a fault proxy on 127.0.0.1 that applies the triggers (--impose: and makes it behave as the scenario's origin), pausing between fleets until the service settles; --probe measures the service first and prints a scenario for it. --target is HTTP only: with --protocol grpc it is refused. The lab watches its own lateness and CPU: past its bounds it judges nothing and exits 3 (inconclusive), with the reasons and a longer tick to try (--auto-tick tries it). --shard I/N splits a --target run over load processes, for merge. docs/lab.md has the details.`

const replayAbout = `Reconstructs an incident from a window of metrics, read as calibrate reads them (--prometheus URL with --from and --to, or saved query_range answers with --file): the traffic as it was (the intents per step), the origin as calibrated from the steps before the incident, and the trigger inferred from the window (a capacity drop, an error blip, added latency, a stall or a load spike: when, how large, how confident, and from what). It says whether the window shows the loop that sustains a metastable failure (retry amplification, work for callers that had left), then replays the incident in the simulator as it was (its verdict must agree with the window's, or the command exits 1) and with a retry budget, a breaker, the throttle, an origin that drops expired requests, and advise's recommendation (--no-advise leaves it out): for each, whether and when it recovers and the intents it loses. It prints tables, writes a report with the measured series beside the replayed ones, and --json. A window without an incident is not an error: it says so and exits 0. With --config FILE (and --route NAME), the incident is replayed with your own retry policy instead of calibrate's defaults, cross-checked with the whole window as calibrate --config does. docs/replay.md says how each trigger is inferred.`

const calibrateAbout = `Reads a window of the metrics your proxies, gRPC libraries, load balancers or resil already export, from a Prometheus server (--prometheus URL, through its HTTP API) or from saved query_range answers (--file, a file or a directory of them), and writes a scenario file that run, check, advise and lab accept: the base intent rate (or a rate series when it varied), the service time fitted to the latency histogram, the workers and so the capacity (from what was busy while requests queued), the client instances, the retries per intent, and what the metrics show of the retry policy. It writes the scenario to standard output, or to -o FILE (with the rate series beside it). Every value carries a comment: the query it came from, the window and how good the fit is; what the metrics cannot show is said, with the default used. It reads at most 11,000 steps and 500 series a metric, and refuses more. With --config FILE (repeat it for a route and its cluster in two files; --route NAME picks one of several), the client's retry policy is your config's, read as check reads it, each value with its file and line, and cross-checked with the metrics: a disagreement (more retries per intent than max_retries allows, refused retries without a budget, attempts longer than the timeout) is a warning, on standard error and in the file; a config of another layer than the metrics' (a gRPC service config for Envoy's) is exit 2. A Prometheus that asks for credentials is reached as Prometheus itself reaches one: --bearer-token-file, --basic-auth with --basic-auth-password-file, --header, --ca-file, or --http-config FILE in Prometheus's http_config format; no secret is ever printed. docs/calibrate.md lists each source's metrics.`
