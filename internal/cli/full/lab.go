package full

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"time"

	"github.com/retrystorm/retrystorm/experiment"
	"github.com/retrystorm/retrystorm/internal/cli"
	"github.com/retrystorm/retrystorm/lab"
	"github.com/retrystorm/retrystorm/sim"
)

// runLab runs the scenario (the storm's by default) in the simulator and
// the lab and prints them side by side.
func runLab(ctx context.Context, inv *cli.Invocation) error {
	if err := inv.NoArgs(); err != nil {
		return err
	}
	target, err := labTarget(inv)
	if err != nil {
		return err
	}
	if inv.Lab.Probe {
		return probe(ctx, inv, target)
	}
	storm, _ := experiment.Lookup("storm")
	if inv.PrintConfig {
		_, err := inv.Stdout.Write(storm.Config)
		return err
	}
	sc, err := inv.Scenario("storm.yaml", storm.Config)
	if err != nil {
		return err
	}
	if target != nil {
		if sc.Origin.Replicas > 1 {
			return cli.Usagef("--target: %s's origin has %d replicas; the fault proxy stands for one", sc.Name, sc.Origin.Replicas)
		}
		if n := len(sc.Tiers); n > 0 {
			return cli.Usagef("--target: %s has tiers (a chain of %d): the lab runs a chain against its own origin only; drop --target, or the scenario's tiers", sc.Name, n)
		}
		target.Log = inv.Log()
	}
	if d := inv.Lab.Duration; d != 0 {
		sc.Duration = d
		if err := sc.Validate(); err != nil {
			return cli.Usagef("--duration %s: %v", lab.Short(d), err)
		}
		// A run that ends before recovery can be seen cannot bear out a
		// claim about recovery.
		_, end := sim.TriggerTicks(sc)
		if need := time.Duration(end+sim.RecoveryTail) * sc.Tick; d < need {
			return cli.Usagef("--duration %s: %s needs at least %s: the end of its last trigger, and %d ticks to see whether it recovers", lab.Short(d), sc.Name, lab.Short(need), sim.RecoveryTail)
		}
	}
	if err := inv.Admit(sc); err != nil { // the simulator runs it first
		return err
	}
	b, err := lab.Bounds(sc)
	if err != nil {
		return cli.Usagef("%v", err)
	}
	switch tick := inv.Lab.Tick; {
	case b.Min > b.Max:
		return cli.Usagef("%s cannot run in the lab at any tick: below %s %s, and above %s %s. Give a shorter --duration", sc.Name, lab.Short(b.Min), b.MinWhy, lab.Short(b.Max), b.MaxWhy)
	case tick < b.Min:
		return cli.Usagef("--tick %s: %s needs a tick from %s to %s in the lab: below %s, %s", lab.Short(tick), sc.Name, lab.Short(b.Min), lab.Short(b.Max), lab.Short(b.Min), b.MinWhy)
	case tick > b.Max:
		return cli.Usagef("--tick %s: %s needs a tick from %s to %s in the lab: above %s, %s", lab.Short(tick), sc.Name, lab.Short(b.Min), lab.Short(b.Max), lab.Short(b.Max), b.MaxWhy)
	}
	protocol, err := lab.ParseProtocol(inv.Lab.Protocol)
	if err != nil {
		return cli.Usagef("--protocol %s: want http or grpc", inv.Lab.Protocol)
	}
	out, err := lab.Experiment(ctx, sc, lab.ExperimentOptions{
		Tick:     inv.Lab.Tick,
		Port:     inv.Lab.Port,
		Storm:    inv.Config == "",
		Log:      inv.Log(),
		Protocol: protocol,
		Target:   target,
	})
	if err != nil {
		return err
	}
	wire := "HTTP"
	if protocol == lab.ProtocolGRPC {
		wire = "gRPC"
	}
	return inv.Emit([]*experiment.Outcome{out}, out.JSON, "retrystorm lab: the storm over real "+wire+", beside the simulator")
}

// labTarget is the service --target names, checked, or nil without it.
func labTarget(inv *cli.Invocation) (*lab.Target, error) {
	f := inv.Lab
	if f.Target == "" {
		for _, x := range []struct {
			set  bool
			name string
		}{{f.Probe, "--probe"}, {f.Impose, "--impose"}, {f.AllowRemote, "--allow-remote"}} {
			if x.set {
				return nil, cli.Usagef("%s needs --target URL", x.name)
			}
		}
		return nil, nil
	}
	if f.Protocol == "grpc" {
		// The fault proxy, the probe and the settle check speak HTTP, and
		// the lab's gRPC gateway calls one method of the lab's own origin:
		// a gRPC service of yours would need both to learn its method.
		return nil, cli.Usagef("--target with --protocol grpc: the lab plays a scenario against an HTTP service only; drop --protocol grpc (the fault proxy, --probe and the pauses speak HTTP)")
	}
	u, err := url.Parse(f.Target)
	if err != nil {
		return nil, cli.Usagef("--target: %v", err)
	}
	if err := lab.CheckTarget(u, f.AllowRemote); err != nil {
		return nil, cli.Usagef("--target: %v", err)
	}
	return &lab.Target{URL: u, Impose: f.Impose}, nil
}

// probe measures the target and prints a scenario for it (or, with
// --json, what it measured).
func probe(ctx context.Context, inv *cli.Invocation, target *lab.Target) error {
	if err := inv.NoArgs(); err != nil {
		return err
	}
	if inv.Config != "" || inv.Lab.Impose || inv.Lab.Duration != 0 {
		return cli.Usagef("--probe measures the target: it takes no --config, --impose or --duration")
	}
	if inv.Lab.Tick < lab.MinTick {
		return cli.Usagef("--tick %s: the probe writes a scenario for a lab tick of at least %s", lab.Short(inv.Lab.Tick), lab.Short(lab.MinTick))
	}
	log := inv.Log()
	fmt.Fprintf(log, "lab: probing %s: open-loop steps of 1 s from a rate it serves easily, 1.5 times more each step, up to %.0f requests/s and %d steps, until it falls behind; Ctrl-C stops at once\n",
		target.URL.Redacted(), lab.MaxAttemptRate, lab.ProbeMaxSteps)
	target.Log = log
	r, err := lab.Probe(ctx, target, lab.ProbeOptions{Tick: inv.Lab.Tick, Log: log})
	if err != nil {
		return err
	}
	if inv.JSON {
		enc := json.NewEncoder(inv.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	_, err = inv.Stdout.Write(r.Scenario())
	return err
}
