package full

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"runtime/debug"
	"strings"
	"time"

	"github.com/retrystorm/retrystorm/cmd/internal/cli"
	"github.com/retrystorm/retrystorm/experiment"
	"github.com/retrystorm/retrystorm/grid"
	"github.com/retrystorm/retrystorm/lab"
	"github.com/retrystorm/retrystorm/scenario"
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
	if err := lab.Check(sc); err != nil { // what the lab cannot run at all
		return cli.Usagef("%v", err)
	}
	if err := labDuration(ctx, inv, sc); err != nil {
		return err
	}
	if err := inv.Admit(sc); err != nil { // the simulator runs it first
		return err
	}
	b, err := lab.Bounds(sc)
	if err != nil {
		return cli.Usagef("%v", err)
	}
	if err := checkTick(sc, b, inv.Lab.Tick); err != nil {
		return err
	}
	protocol, err := lab.ParseProtocol(inv.Lab.Protocol)
	if err != nil {
		return cli.Usagef("--protocol %s: want http or grpc", inv.Lab.Protocol)
	}
	if err := lab.Refuse(sc, protocol, target); err != nil {
		return cli.Usagef("%v", err)
	}
	wire := "HTTP"
	if protocol == lab.ProtocolGRPC {
		wire = "gRPC"
	}
	var shard grid.Shard
	var startAt time.Time
	if inv.Lab.Shard != "" {
		if target == nil || inv.Lab.AutoTick {
			return cli.Usagef("--shard %s: a run split over load processes plays against --target, at one tick (no --auto-tick)", inv.Lab.Shard)
		}
		shard, _ = grid.ParseShard(inv.Lab.Shard) // checked by the flag
		startAt = lab.ShardStart(time.Now())
	}
	// The lab's heap is small and churns fast: it runs at its own GC
	// target, the process's setting, which is the command's to make.
	defer debug.SetGCPercent(debug.SetGCPercent(lab.GCPercent))
	opts := lab.ExperimentOptions{Port: inv.Lab.Port, Storm: inv.Config == "", Log: inv.Log(), Protocol: protocol, Target: target, Shard: shard, StartAt: startAt}
	return measureLab(ctx, inv, sc, opts, b.Max, wire)
}

// labDuration checks the run's duration (--duration, or the scenario's
// own): a run that ends before recovery can be seen cannot bear out a
// claim about recovery; the rule is lab.MinDuration's.
func labDuration(ctx context.Context, inv *cli.Invocation, sc *scenario.Scenario) error {
	need, why, err := lab.MinDuration(ctx, sc)
	if err != nil {
		return err
	}
	if d := inv.Lab.Duration; d != 0 {
		sc.Duration = d
		if err := sc.Validate(); err != nil {
			return cli.Usagef("--duration %s: %v", lab.Short(d), err)
		}
		if d < need {
			return cli.Usagef("--duration %s: %s needs at least %s: %s", lab.Short(d), sc.Name, lab.Short(need), why)
		}
	} else if _, end := sim.TriggerTicks(sc); sc.Duration < need && time.Duration(end)*sc.Tick < sc.Duration {
		// (A trigger that lasts the whole run shows no recovery, and
		// claims none.)
		return cli.Usagef("%s lasts %s: its claims about recovery need at least %s: %s; lengthen its duration", sc.Name, lab.Short(sc.Duration), lab.Short(need), why)
	}
	return nil
}

// measureLab runs the lab with opts at --tick, and again at a longer
// tick (up to maxTick) while it is inconclusive, with --auto-tick; and
// emits the outcome of the storm over wire.
func measureLab(ctx context.Context, inv *cli.Invocation, sc *scenario.Scenario, opts lab.ExperimentOptions, maxTick time.Duration, wire string) error {
	tick := inv.Lab.Tick
	var tried []string // the ticks that were inconclusive, and why
	for {
		opts.Tick = tick
		m, err := lab.Measure(ctx, sc, opts)
		if err != nil {
			return targetError(err)
		}
		in := m.Inconclusive
		next := time.Duration(0)
		if in != nil {
			// At most maxAutoGrowth times longer at once: one freak
			// pause must not make the next run hours long.
			next = min(in.SuggestedTick(), maxAutoGrowth*tick)
		}
		if in != nil && inv.Lab.AutoTick && len(tried) < maxAutoTicks && next > tick && next <= maxTick {
			fmt.Fprintf(inv.Log(), "lab: inconclusive at --tick %s (%s); --auto-tick: running it again at --tick %s\n", lab.Short(tick), in.Reasons[0], lab.Short(next))
			tried = append(tried, fmt.Sprintf("--tick %s was inconclusive: %s.", lab.Short(tick), strings.Join(in.Reasons, "; ")))
			tick = next
			continue
		}
		if len(tried) > 0 {
			m.Outcome.Section.Notes = append(m.Outcome.Section.Notes, "--auto-tick: "+strings.Join(tried, " ")+" This run's tick: "+lab.Short(tick)+".")
		}
		if err := inv.Emit([]*experiment.Outcome{m.Outcome}, m.Outcome.JSON, "retrystorm lab: the storm over real "+wire+", beside the simulator"); err != nil {
			return err
		}
		if in != nil {
			return cli.ErrInconclusive
		}
		return nil
	}
}

// --auto-tick runs a scenario again at most maxAutoTicks times, each at a
// tick at most maxAutoGrowth times longer than the last.
const (
	maxAutoTicks  = 2
	maxAutoGrowth = 4
)

// checkTick refuses a tick outside the bounds b of sc.
func checkTick(sc *scenario.Scenario, b lab.TickBounds, tick time.Duration) error {
	switch {
	case b.Min > b.Max:
		return cli.Usagef("%s cannot run in the lab at any tick: below %s %s, and above %s %s. Give a shorter --duration", sc.Name, lab.Short(b.Min), b.MinWhy, lab.Short(b.Max), b.MaxWhy)
	case tick < b.Min:
		return cli.Usagef("--tick %s: %s needs a tick from %s to %s in the lab: below %s, %s", lab.Short(tick), sc.Name, lab.Short(b.Min), lab.Short(b.Max), lab.Short(b.Min), b.MinWhy)
	case tick > b.Max:
		return cli.Usagef("--tick %s: %s needs a tick from %s to %s in the lab: above %s, %s", lab.Short(tick), sc.Name, lab.Short(b.Min), lab.Short(b.Max), lab.Short(b.Max), b.MaxWhy)
	}
	return nil
}

// targetError makes a target the lab cannot use (it does not answer, or
// answers garbage) a usage error: exit 2, with what went wrong.
func targetError(err error) error {
	var te *lab.TargetError
	if errors.As(err, &te) {
		return cli.Usagef("--target: %v", te)
	}
	return err
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
		return targetError(err)
	}
	if r.Inconclusive {
		fmt.Fprintf(log, "lab: probe: inconclusive: %s; no scenario written: probe it again on a quieter machine\n", r.Why)
		if inv.JSON {
			enc := json.NewEncoder(inv.Stdout)
			enc.SetIndent("", "  ")
			if err := enc.Encode(r); err != nil {
				return err
			}
		}
		return cli.ErrInconclusive
	}
	fmt.Fprintf(log, "lab: probe: capacity %.0f requests/s, the knee at %.0f/s, %.1f requests in the service there (Little's law); %s\n",
		r.Capacity, r.Steps[r.Knee].Rate, r.Concurrency, r.Why)
	if r.CeilingBy != lab.CeilingService {
		fmt.Fprintf(log, "lab: probe: the ceiling found is the probe's own (%s), not the service's: the service serves at least %.0f requests/s\n", r.CeilingBy, r.Capacity)
	}
	fmt.Fprintf(log, "lab: probe: replay it with: %s\n", r.Replay)
	if inv.JSON {
		enc := json.NewEncoder(inv.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	_, err = inv.Stdout.Write(r.Scenario())
	return err
}
