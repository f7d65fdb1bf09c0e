package cli

import "context"

// The command table: every command retrystorm has, in the order help
// lists them. To add a command, add its entry here: its name, a one-line
// summary, its flag groups (flags.go) and its run function. A command whose
// dependencies are heavy (the lab's Prometheus, gRPC, the importers'
// protobufs) is marked Heavy and takes its run function from the Heavy
// struct, which only cmd/retrystorm-full fills (package full); the light
// cmd/retrystorm lists it, parses its flags and hands the command line to
// retrystorm-full (companion.go).
func table(h Heavy) []command {
	return []command{
		{
			Name:    "demo",
			Summary: "the default: storm and fleets, tables and an HTML report",
			Flags:   groups(outputFlags, costFlags),
			Run:     runDemo,
		},
		experimentCommand("storm", outputFlags, configFlags, costFlags),
		experimentCommand("fleets", outputFlags, configFlags, costFlags),
		experimentCommand("jitter", outputFlags, configFlags, costFlags),
		experimentCommand("breaker", outputFlags, configFlags, costFlags),
		experimentCommand("outage", outputFlags, configFlags, costFlags),
		experimentCommand("hedge", outputFlags, configFlags, costFlags),
		experimentCommand("sweep", outputFlags, configFlags, costFlags, gridFlag),
		{
			Name:    "run",
			Args:    "FILE.yaml",
			Summary: "run a scenario file as it is: every fleet, a table, charts and JSON",
			Flags:   groups(outputFlags, costFlags),
			Run:     runFile,
		},
		{
			Name:    "all",
			Summary: "every experiment: the full report and FINDINGS.md",
			Flags:   groups(outputFlags, costFlags, gridFlag, findingsFlag),
			Run:     runAll,
		},
		{
			Name:    "lab",
			Summary: "the storm over real HTTP on loopback, beside the simulator (about a minute)",
			About:   labAbout,
			Flags:   groups(outputFlags, configFlags, costFlags, labFlags),
			Run:     h.Lab,
			Heavy:   true,
		},
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

const labAbout = `The lab runs a scenario (the storm's by default) with real servers and sockets on 127.0.0.1: an origin with finite capacity, a gateway whose transport is resilhttp with one Guard per client, and an open-loop load generator, in scaled time, fleet after fleet; then it sets the result beside the simulator's and checks that they agree. A live view shows it as it runs. docs/lab.md has the details.`
