package cli

import (
	"bytes"
	"context"
	"fmt"

	"github.com/retrystorm/retrystorm/internal/outfile"
	"github.com/retrystorm/retrystorm/page"
)

const pageAbout = `The page holds the simulator and the experiments compiled to WebAssembly, and computes every panel in the browser: move a knob and the tables, the charts and the claims follow. It fetches nothing: open it from disk or put it on any static host. Each panel shows the scenario file of its settings, which 'retrystorm run' takes unchanged.

The module is embedded in this binary; 'go generate ./page' rebuilds it after a change to the simulator, and a test fails while it is stale.`

func runPage(_ context.Context, inv *Invocation) error {
	if err := inv.NoArgs(); err != nil {
		return err
	}
	var doc bytes.Buffer
	if err := page.Write(&doc); err != nil {
		return err
	}
	if inv.Output == "-" {
		_, err := inv.Stdout.Write(doc.Bytes())
		return err
	}
	if err := outfile.Write(inv.Output, outfile.Page, doc.Bytes(), inv.Inputs()); err != nil {
		return Usagef("-o %v", err)
	}
	fmt.Fprintf(inv.Stdout, "page: %s (%.1f MB); open it in a browser, it needs no network\n", inv.Output, float64(doc.Len())/(1<<20))
	return nil
}
