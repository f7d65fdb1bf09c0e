package cli

import (
	"flag"
	"fmt"
	"io"
	"strings"
)

const intro = `retrystorm: see a retry storm, measure what each defence costs.

Usage:
  retrystorm [flags]                 the demo: storm and fleets, tables, HTML report
  retrystorm <command> [flags]
  retrystorm help <command>

Commands:
`

const outro = `
Flags (every experiment):
  --json             machine-readable JSON on stdout (with "claims"); no report unless --out
  --seed N           replace the scenario's seed
  --out DIR          write the HTML report to DIR (default retrystorm-report)
  --config FILE      run an edited scenario file instead of the embedded default
  --print-config     print the embedded default scenario, to copy and edit

Exit status: 0 when every claim holds, 1 when one does not (after printing
everything) or the run failed, 2 for a usage error or an invalid scenario.
`

func help(w io.Writer, args []string) error {
	if len(args) > 0 {
		for _, c := range commands() {
			if c.name == args[0] {
				cl, err := parse(c, []string{"-h"}, w, io.Discard)
				_ = cl
				if err == flag.ErrHelp {
					return nil
				}
				return err
			}
		}
		return usagef("help: unknown command %q", args[0])
	}
	var b strings.Builder
	b.WriteString(intro)
	for _, c := range commands() {
		fmt.Fprintf(&b, "  %-10s %s\n", c.name, c.summary)
	}
	b.WriteString(outro)
	_, err := io.WriteString(w, b.String())
	return err
}

func commandHelp(w io.Writer, c command, fs *flag.FlagSet) {
	usage := "retrystorm " + c.name + " [flags]"
	if c.name == "run" {
		usage = "retrystorm run FILE.yaml [flags]"
	}
	fmt.Fprintf(w, "Usage: %s\n\n%s\n", usage, c.summary)
	if c.about != "" {
		fmt.Fprintf(w, "\n%s\n", c.about)
	}
	fmt.Fprintf(w, "\nFlags:\n")
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
}
