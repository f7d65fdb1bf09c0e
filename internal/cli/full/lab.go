package full

import (
	"context"
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
	storm, _ := experiment.Lookup("storm")
	if inv.PrintConfig {
		_, err := inv.Stdout.Write(storm.Config)
		return err
	}
	sc, err := inv.Scenario("storm.yaml", storm.Config)
	if err != nil {
		return err
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
