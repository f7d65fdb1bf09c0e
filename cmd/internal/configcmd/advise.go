package configcmd

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/retrystorm/retrystorm/cmd/internal/cli"
	"github.com/retrystorm/retrystorm/importer"
	"github.com/retrystorm/retrystorm/report"
	"github.com/retrystorm/retrystorm/scenario"
	"github.com/retrystorm/retrystorm/userconfig"
	"github.com/retrystorm/retrystorm/verdict"
)

// Advise is `retrystorm advise`, run by retrystorm-full (full.Heavy).
func Advise(ctx context.Context, inv *cli.Invocation) error {
	io, clear := configIO(inv, "advise")
	c := inv.Configs
	if len(c.Stack) > 0 || c.Manifests != "" {
		err := RunAdviseChains(ctx, inv.Args, AdviseOptions{CheckOptions: checkOptions(inv), Write: c.Write, InPlace: c.InPlace}, io)
		clear()
		return configErr(err)
	}
	// A search too long to run unwatched is refused as run refuses a
	// scenario: --long lets it go ahead.
	admit := func(e verdict.AdviseEstimate) error {
		return inv.AdmitSearch(fmt.Sprintf("the search (%d runs)", e.Runs), e.Attempts)
	}
	err := RunAdvise(ctx, inv.Args, AdviseOptions{CheckOptions: checkOptions(inv), MaxRuns: c.MaxRuns, Top: c.Top, As: c.As,
		Route: c.Route, Conditions: c.Conditions, Exhaustive: c.Exhaustive, Admit: admit, Write: c.Write, InPlace: c.InPlace}, io)
	clear()
	return configErr(err)
}

// AdviseOptions are advise's flags, as internal/cli parsed them.
type AdviseOptions struct {
	CheckOptions
	MaxRuns int    // --max-runs
	Top     int    // --top
	As      string // --as: the formats to write the recommendation in
	Route   string // --route: the route or fleet to start from
	// Conditions is --conditions: the search may change what is retried.
	Conditions bool
	// Exhaustive is --exhaustive: no screen, every candidate at every
	// seed in the simulator.
	Exhaustive bool
	// Admit, if set, may refuse the search from its estimate (the
	// command line's --long rule) before it runs.
	Admit func(verdict.AdviseEstimate) error
	// Write is --write DIR: each edited file is written into DIR under its
	// own name; InPlace is --in-place: the user's files are edited.
	Write   string
	InPlace bool
}

// RunAdvise searches for a better policy than the fleet of files (or the
// storm's first) and writes it back.
func RunAdvise(ctx context.Context, files []string, a AdviseOptions, o IO) error {
	c := a.CheckOptions
	// Zero means the flag's default, for callers that fill the struct.
	a.Seeds, a.MaxRuns, a.Top = cmp.Or(a.Seeds, 3), cmp.Or(a.MaxRuns, 20000), cmp.Or(a.Top, 5)
	opts, sh, err := c.options(o)
	if err != nil {
		return err
	}
	var in []verdict.CheckInput
	var b *scenario.Scenario
	var fmtIn importer.Format = importer.ScenarioFleet
	var uf *userconfig.Files
	if len(files) == 0 {
		if b, err = o.reader().Base(c.Base); err != nil {
			return err
		}
		in = []verdict.CheckInput{{Fleet: b.Fleets[0], Origin: b.Name}}
	} else if in, b, fmtIn, uf, err = o.reader().Files(files, c.Format, c.Base, c.assume()); err != nil {
		return err
	}
	if c.Seed != nil {
		b.Seed = *c.Seed
	}
	start, err := userconfig.Pick(in, a.Route)
	if err != nil {
		return err
	}
	if len(in) > 1 {
		fmt.Fprintf(o.Stderr, "advise: starting from %q (%s), of the %d fleets given; --route names another\n", start.Fleet.Name, start.Origin, len(in))
	}
	formats := []importer.Format{fmtIn, importer.GoCode, importer.ScenarioFleet}
	if a.As != "" {
		formats = nil
		for _, f := range strings.Split(a.As, ",") {
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
	var edit *editTarget
	if from, ok := uf.Imported(start); ok {
		edit = &editTarget{srcs: uf.Sources, from: from}
		if err := edit.search(a.Conditions, c.assume(), o); err != nil {
			return err
		}
	}
	if (a.Write != "" || a.InPlace || c.SARIF != "") && edit == nil {
		return usagef("advise --write, --in-place and --sarif edit the configs it was given: give an Envoy, Istio, Linkerd, gRPC or AWS file (a scenario file is written back with --as scenario)")
	}
	ao := verdict.AdviseOptions{Base: b, Load: c.Load, Dip: c.Dip, Seeds: a.Seeds, MaxRuns: a.MaxRuns, Shard: sh,
		Clients: c.Clients, Conditions: a.Conditions, Exhaustive: a.Exhaustive, Admit: a.Admit}
	var r *verdict.AdviseResult
	if edit != nil && len(edit.cands) > 1 {
		r, err = writableSearch(ctx, start, edit, ao, opts, a.Exhaustive)
	} else {
		r, err = verdict.Advise(ctx, start, ao, opts)
	}
	if errors.Is(err, verdict.ErrTooBig) {
		return usagef("%v", err)
	}
	if err != nil {
		return costly(err)
	}
	if c.JSON {
		return writeJSON(o.Stdout, r)
	}
	err = printAdvise(o, r, formats, a.Top, c.Out, "retrystorm advise "+strings.Join(files, " "), edit)
	if err != nil {
		return err
	}
	if edit != nil {
		if err := edit.apply(o, r, a, files); err != nil {
			return err
		}
	}
	if !report.AllHold(r.Claims) {
		return cli.ErrClaims // after everything is printed
	}
	return nil
}

func printAdvise(o IO, r *verdict.AdviseResult, formats []importer.Format, top int, out, command string, edit *editTarget) error {
	if err := r.Render(o.Stdout, o.Style, top); err != nil {
		return err
	}
	best := r.Best()
	what := "The best policy of all"
	if edit == nil || edit.cands == nil {
		what = "The recommendation"
	}
	fmt.Fprintf(o.Stdout, "\n%s, %s:\n  %s\n  %s\n", what, best.Name, verdict.Describe(best.Fleet), standing(best))
	if r.Conditions {
		fmt.Fprintln(o.Stdout, "  The retry conditions were part of the search (--conditions).")
	} else {
		fmt.Fprintln(o.Stdout, "  The retry conditions are yours: every candidate retries what your config retries (--conditions searches them too).")
	}
	cells := len(r.Seeds) * len(r.Faults) * len(r.Loads)
	// best expressible is the best candidate format can write whole.
	bestIn := func(f importer.Format) (verdict.AdviseCandidate, bool) {
		for _, i := range r.Ranking {
			if c := r.Candidates[i]; importer.Expressible(c.Fleet, f) {
				return c, true
			}
		}
		return verdict.AdviseCandidate{}, false
	}
	if edit != nil {
		if err := edit.explain(o, r); err != nil {
			return err
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
				fmt.Fprintf(o.Stdout, "\nThe best policy %s can express whole, %s: %s over %d cells (the recommendation: %s):\n\n%s",
					formatName(f), c.Name, standing(c), cells, standing(best), alt)
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
	case importer.NGINX:
		return "an nginx location and upstream"
	case importer.HAProxy:
		return "an HAProxy backend"
	case importer.GoCode:
		return "resil Go code"
	}
	return "a scenario fleet"
}
