package cli

import (
	"bytes"
	"context"
	"fmt"

	"github.com/retrystorm/retrystorm/page"
	"github.com/retrystorm/retrystorm/report"
)

func init() {
	extraCommands = append(extraCommands, command{
		name:    "page",
		summary: "write a self-contained HTML page that reruns the experiments in a browser",
		about: `The page holds the simulator and the experiments compiled to WebAssembly,
and computes every panel in the browser: move a knob and the tables, the
charts and the claims follow. It fetches nothing: open it from disk or put it
on any static host. Each panel shows the scenario file of its settings, which
'retrystorm run' takes unchanged.

The module comes from the binary when 'go generate ./page' embedded one;
otherwise it is built on the spot with the go command, which needs a checkout
of the repository (go run ./cmd/retrystorm page does).`,
		own: true,
		run: runPage,
	})
	extraFlags["page"] = func(cl *commandLine) {
		cl.flags.StringVar(&cl.output, "o", "retrystorm.html", "write the page to this `file`")
	}
}

func runPage(ctx context.Context, cl *commandLine) error {
	if err := cl.noArgs(); err != nil {
		return err
	}
	if cl.output == "" {
		return usagef("page: -o needs a file name")
	}
	var doc bytes.Buffer
	if err := page.Write(ctx, &doc, page.Options{Log: cl.stderr}); err != nil {
		return err
	}
	if err := report.WriteFileAtomic(cl.output, doc.Bytes()); err != nil {
		return err
	}
	fmt.Fprintf(cl.stdout, "page: %s (%.1f MB); open it in a browser, it needs no network\n", cl.output, float64(doc.Len())/(1<<20))
	return nil
}
