package cli

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"time"

	"github.com/retrystorm/retrystorm/experiment"
	"github.com/retrystorm/retrystorm/lab"
	"github.com/retrystorm/retrystorm/scenario"
	"github.com/retrystorm/retrystorm/sim"
)

// labFlags are the lab's own flags.
type labFlags struct {
	tick     time.Duration
	duration time.Duration
	port     int
}

func init() {
	extraCommands = append(extraCommands, command{
		name:    "lab",
		summary: "the storm over real HTTP on loopback, beside the simulator (about a minute)",
		run:     runLab,
	})
	extraFlags["lab"] = func(cl *commandLine) {
		cl.flags.DurationVar(&cl.lab.tick, "tick", lab.DefaultTick, "wall-clock length of one tick of the scenario (time is scaled by tick / the scenario's tick)")
		cl.flags.DurationVar(&cl.lab.duration, "duration", 0, "run this much scenario time instead of the scenario's duration (a whole number of ticks)")
		cl.flags.IntVar(&cl.lab.port, "port", 0, "serve the live view on this port of 127.0.0.1 (default: a free port)")
	}
}

// runLab runs the scenario (the storm's by default) in the simulator and
// then in the lab, fleet after fleet, with the drop_expired counterfactual
// when the storm has one; prints both tables and how they agree; writes
// the report.
func runLab(ctx context.Context, cl *commandLine) error {
	if err := cl.noArgs(); err != nil {
		return err
	}
	storm, _ := experiment.Lookup("storm")
	if cl.printConfig {
		_, err := cl.stdout.Write(storm.Config)
		return err
	}
	sc, err := cl.labScenario(storm.Config)
	if err != nil {
		return err
	}
	if err := lab.Check(sc); err != nil {
		return usagef("%v", err)
	}
	if err := cl.admit(sc); err != nil { // the simulator runs it first
		return err
	}
	tick := cl.lab.tick
	if tick < time.Millisecond {
		return usagef("lab: --tick must be at least 1ms, got %s", tick)
	}
	if cl.lab.port < 0 || cl.lab.port > 65535 {
		return usagef("lab: --port must be in [0, 65535], got %d", cl.lab.port)
	}

	simRes, err := sim.Run(ctx, sc)
	if err != nil {
		return err
	}
	cf, cfName := experiment.StormCounterfactual(sc)
	if cf != nil {
		cf.Fleets[0].Name = cfName
		cfRes, err := sim.Run(ctx, cf)
		if err != nil {
			return err
		}
		simRes.Fleets = append(simRes.Fleets, cfRes.Fleets...)
	}
	var names []string
	for _, f := range simRes.Fleets {
		names = append(names, f.Name)
	}

	log := cl.stderr
	if cl.json {
		log = io.Discard
	}
	live := lab.NewLive(sc, names, tick, simRes)
	page, err := lab.Listen(net.JoinHostPort("127.0.0.1", strconv.Itoa(cl.lab.port)), live.Handler())
	if err != nil {
		return fmt.Errorf("lab: the live view: %w", err)
	}
	defer page.Close()
	defer live.Close()
	per := time.Duration(float64(tick) * sc.Duration.Seconds() / sc.Tick.Seconds())
	fmt.Fprintf(log, "lab: %d fleets, %s of wall time each; live view at %s/\n", len(names), per.Round(100*time.Millisecond), page.URL())

	token := lab.NewToken() // /admin/faults needs it: a web page cannot guess it
	opts := lab.Options{Tick: tick, Live: live, AdminToken: token, Ready: func(fleet string, origin, gateway *url.URL) {
		fmt.Fprintf(log, "lab: %s: origin %s, gateway %s (metrics at /metrics; faults at %s/admin/faults?token=%s)\n", fleet, origin, gateway, origin, token)
	}}
	res, err := lab.Run(ctx, sc, opts)
	if err != nil {
		return err
	}
	if cf != nil {
		f, info, err := lab.RunFleet(ctx, cf, 0, opts)
		if err != nil {
			return err
		}
		res.Fleets = append(res.Fleets, f)
		res.Lab.Fleets = append(res.Lab.Fleets, info)
	}
	live.Close()

	out := experiment.LabOutcome(sc, simRes, res.Result, experiment.LabOptions{
		WallTick:           tick,
		Storm:              cl.config == "",
		CounterfactualName: cfName,
		Info:               res.Lab,
		Notes:              labNotes(res),
	})
	return cl.emit([]*experiment.Outcome{out}, out.JSON, "retrystorm lab: the storm over real HTTP, beside the simulator")
}

// labScenario is the scenario the lab runs: --config's or the storm's,
// with --seed and --duration applied.
func (cl *commandLine) labScenario(def []byte) (*scenario.Scenario, error) {
	var sc *scenario.Scenario
	var err error
	if cl.config != "" {
		sc, err = scenario.Load(cl.config)
	} else {
		sc, err = scenario.Parse("storm.yaml", def)
	}
	if err != nil {
		return nil, err
	}
	if cl.seed != nil {
		sc.Seed = *cl.seed
	}
	if d := cl.lab.duration; d != 0 {
		sc.Duration = d
		if err := sc.Validate(); err != nil {
			return nil, usagef("lab: --duration %s: %v", d, err)
		}
	}
	return sc, nil
}

// labNotes says what the lab's own instruments saw: how long each fleet
// took, whether the load generator kept its schedule, and what the origin
// counted that the simulator has no word for.
func labNotes(res *lab.Result) []string {
	var notes []string
	for _, f := range res.Lab.Fleets {
		l, o := f.Load, f.Origin
		n := fmt.Sprintf("%s: %.1f s of wall time; %d intents sent on schedule (%d shed), sent at most %.0f ms late (p99 %.1f ms); the origin served %d requests for clients that had left",
			f.Name, f.WallSeconds, l.Sent, l.Shed, 1000*l.LateMax, 1000*l.LateP99, o.Wasted)
		if o.Dropped > 0 {
			n += fmt.Sprintf(" and dropped %d it could not answer in time", o.Dropped)
		}
		if o.Executions > 0 {
			n += fmt.Sprintf("; %d POST executions, %d of them duplicates, %d retries answered from the idempotency keys", o.Executions, o.Duplicates, o.Replayed)
		}
		notes = append(notes, n+".")
	}
	return notes
}
