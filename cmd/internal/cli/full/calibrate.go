package full

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"time"

	"github.com/retrystorm/retrystorm/calibrate"
	"github.com/retrystorm/retrystorm/cmd/internal/cli"
	"github.com/retrystorm/retrystorm/importer"
	"github.com/retrystorm/retrystorm/internal/outfile"
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
	r, err := calibrateWindow(ctx, inv, c.Configs, importer.Options{})
	if err != nil {
		return err
	}
	if c.Out != "" && c.Out != "-" {
		return writeCalibrated(inv, r, c.Out, "-o", false)
	}
	if c.Out == "-" && !r.Steady {
		// -o names where the file goes; its series would have to go
		// beside it, and standard output has no beside.
		return cli.Usagef("-o -: the rate varied over the window (%s), and its series is written to a file beside the scenario, which standard output cannot hold: give -o FILE (or leave -o out for the median rate only)", rateRange(r))
	}
	out, err := calibrate.Write(r, "")
	if err != nil {
		return cli.Usagef("%v", err)
	}
	_, err = inv.Stdout.Write(out.YAML)
	return err
}

// calibrateWindow reads the window the flags name and fits it, with the
// retry policy of configs if any (calibrate --config, the files of check
// --prometheus), read with assume; a disagreement of the config with the
// metrics is a warning on standard error.
func calibrateWindow(ctx context.Context, inv *cli.Invocation, configs []string, assume importer.Options) (*calibrate.Result, error) {
	cfg, err := readConfig(inv, configs, assume)
	if err != nil {
		return nil, err
	}
	w, src, err := readWindow(ctx, inv)
	if err != nil {
		return nil, err
	}
	r, err := calibrate.Fit(w, src)
	if err != nil {
		return nil, cli.Usagef("%v", err)
	}
	if cfg != nil {
		if err := r.UseConfig(cfg, nil); err != nil {
			return nil, cli.Usagef("%v", err)
		}
		warn(inv, cfg, r.Disagreements)
	}
	return r, nil
}

// writeCalibrated writes r to file, and its rate series beside it when
// the rate varied, through outfile: never over one of the command's
// inputs, never through a link, over an existing file only if calibrate
// wrote it (the scenario, or the series). Both paths are checked before
// either is written. quiet says nothing of it (check's file of its own).
func writeCalibrated(inv *cli.Invocation, r *calibrate.Result, file, flag string, quiet bool) error {
	out, err := calibrate.Write(r, file)
	if err != nil {
		return cli.Usagef("%v", err)
	}
	inputs := inv.Inputs()
	var csv string
	if out.CSV != nil {
		csv = filepath.Join(filepath.Dir(file), out.SeriesFile)
		if err := outfile.Check(csv, outfile.Series, inputs); err != nil {
			return cli.Usagef("%s %s: its rate series %s %v", flag, file, csv, err)
		}
	}
	if err := outfile.Check(file, cli.Calibrated, inputs); err != nil {
		return cli.Usagef("%s %s %v", flag, file, err)
	}
	if csv != "" {
		if err := outfile.Write(csv, outfile.Series, out.CSV, inputs); err != nil {
			return cli.Usagef("%s: %v", flag, err)
		}
		if !quiet {
			fmt.Fprintf(inv.Stderr, "wrote %s (the rate series)\n", csv)
		}
	}
	if err := outfile.Write(file, cli.Calibrated, out.YAML, inputs); err != nil {
		return cli.Usagef("%s %v", flag, err)
	}
	if !quiet {
		fmt.Fprintf(inv.Stderr, "wrote %s: check it with retrystorm check %s\n", file, file)
	}
	return nil
}

// rateRange is the range of r's rate over its window, in words.
func rateRange(r *calibrate.Result) string {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range r.RateSeries {
		lo, hi = min(lo, s.V), max(hi, s.V)
	}
	return fmt.Sprintf("from %.4g to %.4g intents/s", lo, hi)
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
	access, err := accessOf(inv)
	if err != nil {
		return nil, nil, err
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
		w, err = calibrate.Fetch(ctx, calibrate.Live{URL: c.Prometheus, Start: from, End: to, Step: step, Selector: sel, Source: src, Timeout: c.Timeout, Access: access})
	} else {
		if !c.From.IsZero() || !c.To.IsZero() || c.Step != 0 {
			return nil, nil, cli.Usagef("--from, --to and --step are for --prometheus: saved answers carry their own window")
		}
		if access.Given() {
			return nil, nil, cli.Usagef("--bearer-token-file, --basic-auth, --header, --ca-file and --http-config are for --prometheus: saved answers are read from files")
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

// readConfig reads the config files (--config; nil without any) as check
// and advise read them, and picks the fleet --route names: every mistake
// is a usage error naming the file.
func readConfig(inv *cli.Invocation, files []string, assume importer.Options) (*calibrate.Config, error) {
	c := inv.Calibrate
	if len(files) == 0 {
		if c.Route != "" {
			return nil, cli.Usagef("--route picks a fleet of --config FILE: give --config too")
		}
		return nil, nil
	}
	p, err := userconfig.Reader{}.Policy(files, c.Route, assume)
	if ue, ok := errors.AsType[*userconfig.Error](err); ok {
		msg := ue.Msg
		if inv.Name == "check" {
			// check's files are its arguments, not --config.
			msg = strings.TrimPrefix(msg, "--config ")
		}
		return nil, cli.Usagef("%s", msg)
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

// accessOf is the credentials and CA the flags give for Prometheus
// (calibrate.Access), checked: a mistake is a usage error naming the flag
// or the file, never a secret.
func accessOf(inv *cli.Invocation) (calibrate.Access, error) {
	f := inv.Calibrate.Access
	a := calibrate.Access{ConfigFile: f.HTTPConfig, BearerTokenFile: f.BearerTokenFile, BasicAuthUser: f.BasicAuth,
		BasicAuthPasswordFile: f.PasswordFile, Headers: f.Headers, CAFile: f.CAFile}
	if a.Given() {
		if _, err := a.HTTPConfig(); err != nil {
			return a, cli.Usagef("%s", strings.TrimPrefix(err.Error(), calibrate.ErrAccess.Error()+": "))
		}
	}
	return a, nil
}
