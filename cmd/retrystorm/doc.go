/*
Retrystorm shows a retry storm, measures what each defence costs, and
checks its own claims on the numbers it computes.

Usage:

	retrystorm [flags]                 the demo: storm and fleets
	retrystorm COMMAND [flags]
	retrystorm help [COMMAND]

With no command, retrystorm runs the demo on its embedded scenarios:
the storm and fleets experiments, their tables on the terminal, and an HTML
report with plots in retrystorm-report/index.html. It says where.

# Commands

	storm     one blip, a naive fleet and a guarded one, against a queueing
	          origin; and the naive fleet against an origin that drops
	          expired requests
	fleets    four fleets through the same capacity dip: ceiling, failures,
	          failures after the cause cleared, recovery, intents lost
	jitter    a herd of clients that failed together against spare
	          capacity, and contention for one resource, per jitter kind
	breaker   false trips against background errors, and what a breaker
	          sheds under partial failure
	outage    retries each policy permits in a total outage; amplification
	          against failure probability
	hedge     hedged requests against one slow replica and against broad
	          slowness, with and without a budget
	layers    retries in a chain of tiers: amplification in an outage
	          against the closed form (4, 16, 64), one layer only,
	          budgets, deadline propagation, and who recovers from a dip
	sweep     a vulnerability map: base load × trigger size, per policy
	shed      deadline shedding and an adaptive concurrency limit at the
	          origin against the naive fleet; the adaptive throttle
	          against the breaker, in the storm and under partial failure
	eject     one bad replica of 3, 5 and 10: outlier detection, retries,
	          both, a budget, a breaker; the panic threshold; Envoy's max
	          ejection rule before and after its 2023 fix; a slow replica
	          under four pickers, with and without hedging
	run FILE  run a scenario file as it is
	all       every experiment, the full report and FINDINGS.md
	lab       the storm over real HTTP on loopback (an origin, a gateway
	          on resilhttp, an open-loop load generator) in scaled time,
	          beside the simulator, with a live view; --protocol grpc
	          runs it over gRPC (resilgrpc); docs/lab.md
	import    Envoy, Istio, Linkerd, gRPC and AWS SDK retry settings to a
	          scenario file, with where each setting came from;
	          docs/import.md
	check     is this config safe? each fleet through capacity dips, an
	          error blip, a stall and outages at several loads and seeds;
	          exit 1 when one stays collapsed, or amplifies the load past
	          the documented thresholds, where you call realistic
	advise    search for a better retry policy and write it back in your
	          config's format, as resil Go code and as a scenario fleet
	calibrate a scenario fitted to your Prometheus metrics (Envoy,
	          gRPC, HAProxy, resil, the lab), live or from saved
	          query_range answers, each value with its query and fit;
	          docs/calibrate.md
	merge     put the --shard results of sweep, check or advise together;
	          docs/check.md
	page      one self-contained HTML page that reruns the experiments in
	          the browser (the simulator compiled to WebAssembly)
	version   the module version and the revision of this binary
	help      the list of commands, or one command's flags

retrystorm help lists them with the flags of the experiments; retrystorm
help COMMAND (or COMMAND --help) gives one command's. An unknown command or
flag gets a "did you mean".

# The companion, retrystorm-full

The commands with heavy dependencies (lab, which links Prometheus and
protobuf; import, check, advise and merge, which link Envoy's and Istio's
protobufs; calibrate, which links Prometheus's API client) run in a second binary, retrystorm-full, so that retrystorm
itself links only the standard library and a YAML parser, and its first go
run compiles little beyond the standard library. retrystorm parses the
command line, then runs retrystorm-full with the same arguments: the one
beside its own executable, or, when it was built from a working tree (go
run) and runs in a checkout of the repository, one it builds there with
the go command (the first build compiles the lab's dependencies: about
half a minute), or the one on the PATH. Without any, it says how to
install both:

	go install github.com/retrystorm/retrystorm/cmd/...@latest

retrystorm-full takes every command retrystorm does and can be run
directly.

# Flags

Every experiment takes:

	--json          print JSON on stdout instead of tables; the JSON carries
	                "claims": [{"text", "holds", "measured"}]. No report is
	                written unless --out is given.
	--seed N        replace the scenario's seed
	--out DIR       write the HTML report to DIR (default retrystorm-report
	                for the demo, retrystorm-report/COMMAND for any other
	                command, so that none overwrites another's report)
	--config FILE   run this scenario file instead of the embedded default
	--print-config  print the embedded default scenario, to copy and edit
	--max-memory N  refuse a scenario estimated to need more memory than N
	                (default 2GiB; KiB, MiB, GiB, TiB)
	--long          run a scenario estimated to take long (more than about
	                two hundred million simulated attempts) even when
	                standard error is not a terminal
	--progress      show progress on standard error, a line every few
	                seconds, even when it is not a terminal or with --json

Before it runs a scenario file, retrystorm estimates what the run will
cost: memory (fleets × ticks × series, clients × their budgets and
breakers, attempts in flight and queued) and work (simulated attempts).
Over --max-memory it refuses with the estimate and the limit (exit 2). A
long run goes ahead on a terminal, showing the time left; elsewhere it is
refused (exit 2) unless --long is given.

run takes --json, --seed, --out, --max-memory, --long and --progress. sweep and all take --grid N (cells per
axis of the map, 6 to 200, default 40: below 6 the map is too coarse for
the sweep's claims); all takes --findings FILE (also write the findings as
Markdown). lab takes --tick D (the wall-clock length of a tick, default
100ms), --duration D (run this much scenario time, at least to the end of
the last trigger and 10 ticks more) and --port N (the live view's port on
127.0.0.1). The lab refuses a tick at which it could not keep the
scenario's own claims: one that scales a fleet's timeout below 50ms of
wall time, or its peak load above 5,000 attempts per second, or the whole
run beyond an hour; the message gives the range for the scenario. lab
--target URL plays the scenario against a service of your own instead of
the lab's origin, through a fault proxy on 127.0.0.1 that applies the
triggers, fleet after fleet with a pause until the service settles; the
service must be on this machine unless --allow-remote; --impose makes it
behave as the scenario's origin; --probe measures its capacity and latency
with a short ramp and prints a scenario file for it (docs/lab.md). A
target is an HTTP service: --target with --protocol grpc is refused. page
takes -o FILE (default retrystorm.html).

import takes --format F, --base FILE (the scenario whose traffic, origin and
triggers the fleets run in; the storm's by default), -o FILE and --timeout
D. check and advise take --json, --seed, --out, --format, --base, --load
SHARE and --dip SHARE (the region you call realistic), --seeds N,
--clients N, --shard I/N and --workers N; check also --model and
--full-runs (play the collapsed runs to their end, to print their
amplification); advise also --max-runs N, --top N,
--as FORMATS, --route NAME, --conditions, --long and --progress.
sweep takes --shard I/N and --workers N too; merge takes --json, --out and
--top. docs/check.md describes them.

calibrate takes --prometheus URL or --file FILE (repeated, or a
directory of saved query_range answers), --from T and --to T (RFC 3339,
Unix seconds or a duration ago; the last hour by default), --step D,
--selector '{job="x"}', --source envoy|grpc|haproxy|resil|lab|auto,
-o FILE (and the rate series beside it when the rate varied) and --timeout
D. It refuses a window of more than 11,000 steps and a selector matching
more than 500 series of a metric; a window it cannot fit (an unreachable
server, no samples, missing metrics, absurd values) is exit 2. With
--config FILE (repeated; --route NAME picks one fleet of several) the
client's retry policy is taken from your Envoy, Istio or gRPC config, or a
scenario file, as check reads it, each value commented with its file and
line; where the metrics disagree with it, a warning says both. replay
takes the same window flags, --config and --route.

Where a command will write (--out, --findings, -o) is checked before it
runs: a file where a directory is wanted, a dangling symbolic link, a
place that cannot be written, or an empty --config is a usage error.

# Output

Tables fit 80 columns, aligned by display width (a CJK character takes two
columns); text (claims, notes, help, messages) is wrapped to the
terminal's width, at most 100 columns, and to 80 when the output is not a
terminal. Colour only on a terminal, and never with NO_COLOR set. Long
runs show a progress bar and the time left on a terminal's standard error,
and nothing when it is not a terminal or with --json, unless --progress is
given. File names and values from outside are printed with their control
characters escaped. The same seed gives the same output, byte for byte,
except in the lab, which measures real time.

# Exit status

0 when every claim holds; 1 when one does not (after everything has been
printed and written), when a run fails, or when it crashes (out of memory,
say: retrystorm runs each command in a child process of itself, so that
the Go runtime's status 2 for a crash never reads as a usage error); 2 for
a usage error or an invalid scenario file, with a message naming the file,
line and field; 3 when a lab run could not measure (its load generator or
servers ran late, or it used its cores up): inconclusive, no claim judged.

# Environment

GOGC and GOMEMLIMIT set Go's garbage collector as usual; with neither
set, the process that runs the command sets GOGC=400 under a soft limit
of 4 GiB, since the simulator's heap is small and short-lived
(BENCHMARKS.md). A run whose --max-memory is raised past the default
collects often as its heap nears the limit: GOMEMLIMIT=off lifts it. The
lab runs its storms at GOGC=400 whatever is set (docs/lab.md).

# Files

Scenario files are strict YAML; the format is documented in
docs/scenario.md. The HTML report is one file that fetches nothing.
*/
package main
