package configcmd

import (
	"context"
	"fmt"
	"time"

	"github.com/retrystorm/retrystorm/internal/outfile"

	"github.com/retrystorm/retrystorm/cmd/internal/cli"
	"github.com/retrystorm/retrystorm/importer"
	"github.com/retrystorm/retrystorm/userconfig"
)

// Import is `retrystorm import`, run by retrystorm-full (full.Heavy).
func Import(ctx context.Context, inv *cli.Invocation) error {
	io, clear := configIO(inv, "import")
	defer clear()
	c := inv.Configs
	return configErr(RunImport(ctx, inv.Args, ImportOptions{Format: c.Format, Base: c.Base, Output: c.Output, Timeout: c.Timeout, Protocol: c.Protocol, Istio: c.Istio}, io))
}

// ImportOptions are import's flags, as internal/cli parsed them.
type ImportOptions struct {
	Format  string        // --format: the files' format; "" detects it
	Base    string        // --base: the scenario to run the fleets in; "" is the storm
	Output  string        // -o: the file to write; "" is stdout
	Timeout time.Duration // --timeout: for configs that set none
	// Protocol (--protocol) and Istio (--istio) say what the configs do
	// not: what the services speak, and the Istio release.
	Protocol, Istio string
}

// RunImport imports files and writes the scenario.
func RunImport(ctx context.Context, files []string, in ImportOptions, o IO) error {
	if len(files) == 0 {
		return usagef("import takes one or more config files: retrystorm import FILE...")
	}
	b, err := o.reader().Base(in.Base)
	if err != nil {
		return err
	}
	opts := importer.Options{Timeout: in.Timeout, Protocol: in.Protocol, IstioVersion: in.Istio}
	if in.Format != "" {
		if opts.Format, err = importer.ParseFormat(in.Format); err != nil {
			return usagef("--format: %v", err)
		}
	}
	var srcs []importer.Source
	for _, f := range files {
		data, err := o.read(f, maxConfigSize)
		if err != nil {
			return err
		}
		srcs = append(srcs, userconfig.Source(f, data))
	}
	fl, err := importer.Import(srcs, opts)
	if err != nil {
		return usagef("%v", err)
	}
	text, err := importer.Write(fl, b)
	if err != nil {
		return err
	}
	if in.Output == "" || in.Output == "-" {
		_, err := o.Stdout.Write(text)
		return err
	}
	if err := outfile.Write(in.Output, outfile.Scenario, text, files); err != nil {
		return usagef("-o %v", err)
	}
	fmt.Fprintf(o.Stderr, "wrote %d fleet%s to %s\n", len(fl), plural(len(fl)), in.Output)
	return nil
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
