package full

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/retrystorm/retrystorm/calibrate"
	"github.com/retrystorm/retrystorm/cmd/internal/cli"
	"github.com/retrystorm/retrystorm/importer"
	"github.com/retrystorm/retrystorm/userconfig"
)

// runCalibrate is retrystorm calibrate: a window of metrics, live or
// saved, to a scenario file. Every failure to read or fit is bad input
// (exit 2): calibrate writes no number it could not fit or say is a
// default.
func runCalibrate(ctx context.Context, inv *cli.Invocation) error {
	c := inv.Calibrate
	if len(inv.Args) > 0 {
		return cli.Usagef("calibrate takes no arguments (saved answers are --file FILE), got %q", inv.Args[0])
	}
	cfg, err := readConfig(inv)
	if err != nil {
		return err
	}
	w, src, err := readWindow(ctx, inv)
	if err != nil {
		return err
	}
	r, err := calibrate.Fit(w, src)
	if err != nil {
		return cli.Usagef("%v", err)
	}
	if cfg != nil {
		if err := r.UseConfig(cfg, nil); err != nil {
			return cli.Usagef("%v", err)
		}
		warn(inv, cfg, r.Disagreements)
	}
	out, err := calibrate.Write(r, c.Out)
	if err != nil {
		return cli.Usagef("%v", err)
	}
	if c.Out == "" {
		_, err = inv.Stdout.Write(out.YAML)
		return err
	}
	if out.CSV != nil {
		csv := filepath.Join(filepath.Dir(c.Out), out.SeriesFile)
		if err := os.WriteFile(csv, out.CSV, 0o644); err != nil {
			return err
		}
		fmt.Fprintf(inv.Stderr, "wrote %s (the rate series)\n", csv)
	}
	if err := os.WriteFile(c.Out, out.YAML, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(inv.Stderr, "wrote %s: check it with retrystorm check %s\n", c.Out, c.Out)
	return nil
}

// readWindow reads the window the flags name (windowFlags), live or
// saved, for calibrate and replay; every failure is a usage error (exit
// 2) but a cancellation.
func readWindow(ctx context.Context, inv *cli.Invocation) (*calibrate.Window, *calibrate.Source, error) {
	c := inv.Calibrate
	name := inv.Name
	switch {
	case c.Prometheus == "" && len(c.Files) == 0:
		return nil, nil, cli.Usagef("%s needs --prometheus URL or --file FILE (a saved query_range answer)", name)
	case c.Prometheus != "" && len(c.Files) > 0:
		return nil, nil, cli.Usagef("give --prometheus or --file, not both")
	}
	sel, err := calibrate.ParseSelector(c.Selector)
	if err != nil {
		return nil, nil, cli.Usagef("--selector %v", err)
	}
	var src *calibrate.Source
	if c.Source != "auto" {
		if src, err = calibrate.SourceNamed(c.Source); err != nil {
			return nil, nil, cli.Usagef("--source: %v", err)
		}
	}
	var w *calibrate.Window
	if c.Prometheus != "" {
		to := c.To
		if to.IsZero() {
			to = time.Now()
		}
		from := c.From
		if from.IsZero() {
			from = to.Add(-time.Hour)
		}
		step := c.Step
		if step == 0 {
			step = max(time.Second, (to.Sub(from) / 240).Round(time.Second))
		}
		w, err = calibrate.Fetch(ctx, calibrate.Live{URL: c.Prometheus, Start: from, End: to, Step: step, Selector: sel, Source: src, Timeout: c.Timeout})
	} else {
		if !c.From.IsZero() || !c.To.IsZero() || c.Step != 0 {
			return nil, nil, cli.Usagef("--from, --to and --step are for --prometheus: saved answers carry their own window")
		}
		w, err = calibrate.ReadAnswers(c.Files, sel)
	}
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return nil, nil, err
		}
		return nil, nil, cli.Usagef("%v", err)
	}
	return w, src, nil
}

// readConfig reads --config (nil without it) as check and advise read
// their files, and picks the fleet --route names: every mistake is a
// usage error naming the file.
func readConfig(inv *cli.Invocation) (*calibrate.Config, error) {
	c := inv.Calibrate
	if len(c.Configs) == 0 {
		if c.Route != "" {
			return nil, cli.Usagef("--route picks a fleet of --config FILE: give --config too")
		}
		return nil, nil
	}
	p, err := userconfig.Reader{}.Policy(c.Configs, c.Route, importer.Options{})
	if ue, ok := errors.AsType[*userconfig.Error](err); ok {
		return nil, cli.Usagef("%s", ue.Msg)
	}
	if err != nil {
		return nil, err
	}
	return &calibrate.Config{Fleet: p.Fleet, Sources: p.Sources}, nil
}

// warn prints each disagreement between the config and the metrics on
// standard error: a warning, not an error (the written file says them
// too).
func warn(inv *cli.Invocation, cfg *calibrate.Config, ds []calibrate.Disagreement) {
	for _, d := range ds {
		fmt.Fprintf(inv.Stderr, "%s: warning: %s and the metrics disagree on %s: %s\n", inv.Name, cfg.Fleet.Origin, d.Setting, d.Text)
	}
}
