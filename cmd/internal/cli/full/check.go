package full

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/retrystorm/retrystorm/calibrate"
	"github.com/retrystorm/retrystorm/cmd/internal/cli"
	"github.com/retrystorm/retrystorm/cmd/internal/configcmd"
	"github.com/retrystorm/retrystorm/importer"
)

// runCheck is retrystorm check. With --prometheus URL or --file (saved
// answers) it calibrates the base first, as calibrate does, with the
// retry policy of the files checked (as calibrate --config FILE... takes
// it), writes it as calibrate -o would (to --calibrated FILE, or to a
// directory of its own, removed after), and checks the files against it
// as check --base FILE would: the same verdict, by construction, with the
// same exit statuses. A window that cannot be fitted is exit 2 naming
// what it lacks.
func runCheck(ctx context.Context, inv *cli.Invocation) error {
	c := inv.Calibrate
	if c.Prometheus == "" && len(c.Files) == 0 {
		if err := windowFlagsAlone(inv); err != nil {
			return err
		}
		return configcmd.Check(ctx, inv)
	}
	switch {
	case inv.Configs.Base != "":
		return cli.Usagef("give --base FILE or --prometheus/--file (which calibrate the base from your metrics), not both")
	case len(inv.Configs.Stack) > 0 || inv.Configs.Manifests != "":
		return cli.Usagef("--prometheus and --file calibrate the base of a check of FILEs, with their retry policy; for --stack or --manifests, calibrate it first (retrystorm calibrate ... -o base.yaml) and give --base base.yaml")
	case inv.Configs.Shard != "" && c.Prometheus != "":
		return cli.Usagef("--shard with --prometheus would calibrate again on each machine, from a window that may have moved: calibrate once (--calibrated FILE, or retrystorm calibrate -o FILE) and give each shard --base FILE")
	case len(inv.Args) == 0:
		return cli.Usagef("check --prometheus and --file check your config files against your calibrated system: retrystorm check --prometheus URL FILE...")
	}
	r, err := calibrateWindow(ctx, inv, inv.Args, importer.Options{Protocol: inv.Configs.Protocol, IstioVersion: inv.Configs.Istio})
	if err != nil {
		return err
	}
	file := c.Calibrated
	if file == "" {
		dir, err := os.MkdirTemp("", "retrystorm-base-*")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		file = filepath.Join(dir, "calibrated.yaml")
	}
	if err := writeCalibrated(inv, r, file, "--calibrated", c.Calibrated == ""); err != nil {
		return err
	}
	fmt.Fprintf(inv.Stderr, "%s: the base is calibrated from %s: %s\n", inv.Name, r.Window.Describe(), baseSummary(r, c.Calibrated))
	inv.Configs.Base = file
	return configcmd.Check(ctx, inv)
}

// baseSummary is what a calibrated base holds, in a line, and where its
// file with every value's origin is (or how to keep it).
func baseSummary(r *calibrate.Result, kept string) string {
	rate := fmt.Sprintf("%.4g intents/s", r.Rate.V)
	if !r.Steady {
		rate += fmt.Sprintf(" (the median; %s)", rateRange(r))
	}
	s := fmt.Sprintf("%s, capacity %.4g/s with %.0f workers, %.0f client instances", rate, r.Capacity.V, r.Workers.V, r.Clients.V)
	if kept != "" {
		return s + "; " + kept + " says where each value came from"
	}
	return s + "; --calibrated FILE keeps it, with where each value came from"
}

// windowFlagsAlone refuses the flags that only mean something with
// --prometheus or --file, given without either.
func windowFlagsAlone(inv *cli.Invocation) error {
	c := inv.Calibrate
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"--calibrated", c.Calibrated != ""}, {"--route", c.Route != ""}, {"--from", !c.From.IsZero()}, {"--to", !c.To.IsZero()},
		{"--step", c.Step != 0}, {"--selector", c.Selector != ""}, {"--source", c.Source != "auto"}, {"--timeout", c.Timeout != 0},
		{"--bearer-token-file", c.Access.BearerTokenFile != ""}, {"--basic-auth", c.Access.BasicAuth != ""},
		{"--basic-auth-password-file", c.Access.PasswordFile != ""}, {"--header", len(c.Access.Headers) > 0},
		{"--ca-file", c.Access.CAFile != ""}, {"--http-config", c.Access.HTTPConfig != ""},
	} {
		if f.set {
			return cli.Usagef("%s is for a base calibrated from your metrics: give --prometheus URL (or --file, saved answers) too", f.name)
		}
	}
	return nil
}
