package lab

import (
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/retrystorm/retrystorm/experiment"
	"github.com/retrystorm/retrystorm/grid"
	"github.com/retrystorm/retrystorm/resil"
	"github.com/retrystorm/retrystorm/scenario"
	"github.com/retrystorm/retrystorm/sim"
)

// ExperimentOptions configure Measure.
type ExperimentOptions struct {
	// Tick is the wall-clock length of one scenario tick; zero means
	// DefaultTick.
	Tick time.Duration
	// Port is the live view's port on 127.0.0.1; zero picks a free one.
	Port int
	// Storm says sc is the storm experiment's scenario, whose claims are
	// checked on the lab's numbers too.
	Storm bool
	// Log, when set, is told where the live view and the servers are.
	Log io.Writer
	// Protocol is what the lab's servers speak: ProtocolHTTP (the
	// default) or ProtocolGRPC.
	Protocol Protocol
	// Target, if set, is a real service to play sc against instead of the
	// lab's origin, over HTTP, through a fault proxy; each fleet's load
	// then stops at the end of the scenario (plus one attempt's timeout),
	// what is still out counted as unfinished. The storm's drop_expired
	// counterfactual runs only when it imposes the origin: drop_expired is
	// the origin's.
	Target *Target
	// Shard, when its Count is more than 1, runs one shard of a run
	// split over load processes (its share of the clients, through a
	// proxy with its share of the origin), from StartAt (see ShardStart),
	// against Target; its JSON says which, for merge. The
	// storm's counterfactual is not run.
	Shard   grid.Shard
	StartAt time.Time
	// FleetsOnly plays the scenario's fleets and not the counterfactual
	// of deadline shedding: for a caller that watches the servers of one
	// run (a scraper, a test), to whom a second run is only wall time.
	FleetsOnly bool
	// Ready, if set, is called as each fleet's servers come up, before its
	// first tick, with the HTTP addresses of its origin (or fault proxy)
	// and gateway: to point a scraper at their /metrics.
	Ready func(fleet string, origin, gateway *url.URL)
	// ReadyTiers, if set, is called beside Ready when the scenario has a
	// chain, with the HTTP addresses of its tiers, outermost first: each
	// serves /metrics (its resil Guard's under the tier's name).
	ReadyTiers func(fleet string, tiers []*url.URL)
}

// Measurement is a lab experiment's outcome and whether it measured.
type Measurement struct {
	// Outcome is the report. When the run is inconclusive it carries no
	// claims: they are listed as not judged, with why.
	Outcome *experiment.Outcome
	// Inconclusive, when set, says why the lab judged nothing (its load
	// generator or its servers ran late, or it used its cores up), and
	// what tick would let it.
	Inconclusive *Inconclusive
	// Result is the lab's run.
	Result *Result
}

// Measure runs sc in the simulator and then in the lab, fleet after
// fleet, with the counterfactual of deadline shedding when sc has one
// and opts do not leave it out (the first fleet against the origin
// behind resilhttp.Shed: see experiment.ShedCounterfactual), sets the two
// side by side
// (experiment.LabOutcome): tables, charts, how they agree and the claims,
// and says whether the lab measured. A live view serves the run on
// 127.0.0.1 while it lasts.
func Measure(ctx context.Context, sc *scenario.Scenario, opts ExperimentOptions) (*Measurement, error) {
	if err := Check(sc); err != nil {
		return nil, err
	}
	if opts.Tick <= 0 {
		opts.Tick = DefaultTick
	}
	log := opts.Log
	if log == nil {
		log = io.Discard
	}
	// Refused before anything runs: the simulator, the live view, or the
	// target's latency at rest.
	if err := refuse(sc, opts.Protocol, opts.Target); err != nil {
		return nil, err
	}
	simRes, cf, cfName, err := simulate(ctx, sc, opts)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, f := range simRes.Fleets {
		names = append(names, f.Name)
	}

	live := NewLive(sc, names, opts.Tick, simRes)
	defer live.Close()
	view, err := Listen(net.JoinHostPort("127.0.0.1", strconv.Itoa(opts.Port)), live.Handler())
	if err != nil {
		return nil, fmt.Errorf("lab: the live view: %w", err)
	}
	defer view.Close()
	per := time.Duration(float64(opts.Tick) * sc.Duration.Seconds() / sc.Tick.Seconds())
	fmt.Fprintf(log, "lab: %d fleets, %s of wall time each; live view at %s/\n", len(names), per.Round(100*time.Millisecond), view.URL())

	run, target, err := labRun(log, sc, opts, live, len(names))
	if err != nil {
		return nil, err
	}
	played := sc
	if opts.Shard.Count > 1 {
		played = shardOf(sc, opts.Shard)
		run.Shard, run.StartAt = opts.Shard, opts.StartAt
		fmt.Fprintf(log, "lab: shard %s: the clients c with c mod %d = %d, through a proxy with 1/%d of the origin; the first fleet starts at %s\n",
			opts.Shard, opts.Shard.Count, opts.Shard.Index, opts.Shard.Count, opts.StartAt.Format(time.TimeOnly))
	}
	res, err := runFleets(ctx, played, run)
	if err != nil {
		return nil, err
	}
	if cf != nil {
		var settle time.Duration
		if opts.Target != nil {
			if settle, err = opts.Target.pause(ctx, cfName); err != nil {
				return nil, err
			}
		}
		f, info, err := runFleet(ctx, cf, 0, run)
		if err != nil {
			return nil, err
		}
		info.SettleSeconds = settle.Seconds()
		res.Fleets = append(res.Fleets, f)
		res.Lab.Fleets = append(res.Lab.Fleets, info)
		res.judge(sc, opts.Tick)
	}
	live.Close()
	out, err := labOutcome(sc, simRes, res, opts, cfName, target)
	if err != nil {
		return nil, err
	}
	return &Measurement{Outcome: out, Inconclusive: res.Lab.Inconclusive, Result: res}, nil
}

// labRun is how the fleets run: at opts' tick, into the live view, each
// announcing its servers on log; with a target, through a fault proxy in
// front of it (target describes it) for the fleets.
func labRun(log io.Writer, sc *scenario.Scenario, opts ExperimentOptions, live *Live, fleets int) (runOptions, string, error) {
	token := newToken() // /admin/faults needs it: a web page cannot guess it
	run := runOptions{Tick: opts.Tick, Live: live, AdminToken: token, Protocol: opts.Protocol, Target: opts.Target,
		Ready: func(fleet string, origin, gateway *url.URL) {
			fmt.Fprintf(log, "lab: %s: origin %s, gateway %s (metrics at /metrics; faults at %s/admin/faults?token=%s)\n", fleet, origin, gateway, origin, token)
			if opts.Ready != nil {
				opts.Ready(fleet, origin, gateway)
			}
		},
		ReadyTiers: func(fleet string, tiers []*url.URL) {
			for i, u := range tiers {
				fmt.Fprintf(log, "lab: %s: tier %s %s (metrics at /metrics)\n", fleet, sc.Tiers[i].Name, u)
			}
			if opts.ReadyTiers != nil {
				opts.ReadyTiers(fleet, tiers)
			}
		},
		ReadyGRPC: func(fleet, origin, gateway string) {
			fmt.Fprintf(log, "lab: %s: gRPC origin %s, gRPC gateway %s (grpc.testing.TestService/UnaryCall)\n", fleet, origin, gateway)
		},
	}
	var target string
	if t := opts.Target; t != nil {
		target = t.describe()
		if t.Log == nil {
			t.Log = log
		}
		if err := announceTarget(log, t, sc, opts.Tick, fleets); err != nil {
			return runOptions{}, "", err
		}
		run.Ready = func(fleet string, proxy, gateway *url.URL) {
			fmt.Fprintf(log, "lab: %s: fault proxy %s in front of %s, gateway %s (metrics at /metrics of both)\n", fleet, proxy, t.URL.Redacted(), gateway)
			if opts.Ready != nil {
				opts.Ready(fleet, proxy, gateway)
			}
		}
	}
	return run, target, nil
}

// labOutcome is the outcome of the lab's run res beside the simulator's
// simRes: the claims judged on it (withheld when it is inconclusive),
// about the service with a target it does not impose faults on, as a
// shard's with opts.Shard.
func labOutcome(sc *scenario.Scenario, simRes *sim.Result, res *Result, opts ExperimentOptions, cfName, target string) (*experiment.Outcome, error) {
	out := experiment.LabOutcome(sc, simRes, res.Result, experiment.LabOptions{
		WallTick:           opts.Tick,
		Storm:              opts.Storm && (opts.Target == nil || opts.Target.Impose),
		CounterfactualName: cfName,
		Target:             target,
		Info:               res.Lab,
		Notes:              labNotes(res),
		Protocol:           string(opts.Protocol),
	})
	if t := opts.Target; t != nil && !t.Impose {
		if err := experiment.LabAboutService(out, sc, res.Result); err != nil {
			return nil, err
		}
	}
	if in := res.Lab.Inconclusive; in != nil {
		if err := withhold(out, in); err != nil {
			return nil, err
		}
	}
	if opts.Shard.Count > 1 {
		if err := asShard(out, sc, opts, res); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// announceTarget tells log, before a run of sc against t at a wall-clock
// tick of tick, the most it will send and for how long: its peak rates,
// its longest fleet and its pauses between its fleets.
func announceTarget(log io.Writer, t *Target, sc *scenario.Scenario, tick time.Duration, fleets int) error {
	peak, err := peakAttemptRate(sc, tick)
	if err != nil {
		return err
	}
	wall := Scale(sc, tick.Seconds()/sc.Tick.Seconds())
	var longest time.Duration
	for i := range wall.Fleets {
		longest = max(longest, wallCutoff(wall, i))
	}
	bound := t.Settle
	if bound <= 0 {
		bound = DefaultSettle
	}
	fmt.Fprintf(log, "lab: target %s: at most %.0f intents/s and %.0f attempts/s, for at most %s per fleet (%d fleets, with pauses of at most %s between them for the target to settle); Ctrl-C stops at once\n",
		t.URL.Redacted(), peakIntentRate(wall), peak, Short(longest.Round(time.Millisecond)), fleets, Short(bound))
	return nil
}

// simulate runs sc in the simulator, and the storm's drop_expired
// counterfactual (cf, named cfName) after it when the lab plays it too:
// not against a target it does not impose the origin on, nor in a shard.
func simulate(ctx context.Context, sc *scenario.Scenario, opts ExperimentOptions) (res *sim.Result, cf *scenario.Scenario, cfName string, err error) {
	res, err = sim.Run(ctx, sc)
	if err != nil {
		return nil, nil, "", err
	}
	cf, cfName = experiment.ShedCounterfactual(sc)
	if t := opts.Target; (t != nil && !t.Impose) || opts.Shard.Count > 1 || opts.FleetsOnly {
		cf, cfName = nil, ""
	}
	if cf != nil {
		cf.Fleets[0].Name = cfName
		cfRes, err := sim.Run(ctx, cf)
		if err != nil {
			return nil, nil, "", err
		}
		res.Fleets = append(res.Fleets, cfRes.Fleets...)
	}
	return res, cf, cfName, nil
}

// asShard makes out the report of one shard of a run (opts.Shard) of sc:
// a shard's share is no run, so its claims are judged once merged (unless
// it is inconclusive, and says why), and its JSON says which shard of
// which run it is, for merge.
func asShard(out *experiment.Outcome, sc *scenario.Scenario, opts ExperimentOptions, res *Result) error {
	if res.Lab.Inconclusive == nil {
		out.Claims, out.Section.Claims = nil, nil
		out.Section.Notes = append(out.Section.Notes, fmt.Sprintf("Shard %s of a run: its claims are judged on the merged shards (retrystorm merge).", opts.Shard))
		if err := experiment.SetJSON(out, map[string]any{"claims": []struct{}{}}); err != nil {
			return err
		}
	}
	target := ""
	if opts.Target != nil {
		target = opts.Target.describe()
	}
	return experiment.SetJSON(out, map[string]any{"lab_shard": experiment.LabShard{
		Index: opts.Shard.Index + 1, Count: opts.Shard.Count,
		Run:       runID(sc, opts.Tick, target, opts.Shard.Count, opts.StartAt),
		StartUnix: opts.StartAt.Unix(), Scenario: string(scenario.Marshal(sc)), Target: target,
		Impose:          opts.Target != nil && opts.Target.Impose,
		WallTickSeconds: opts.Tick.Seconds(), Protocol: string(opts.Protocol),
		Schema: experiment.LabShardSchema, Latency: latencies(res),
	}})
}

// withhold turns out into an inconclusive report: the claims are not
// judged (an overloaded lab's verdicts are about its machine), but listed,
// with their numbers, below why; the JSON says the same, its "claims"
// empty, "verdict": "inconclusive" and the claims under
// "claims_not_judged".
func withhold(out *experiment.Outcome, in *Inconclusive) error {
	claims := out.Claims
	out.Claims, out.Section.Claims = nil, nil
	why := "INCONCLUSIVE: the lab was not measuring the service but its own machine, so no claim is judged. " +
		strings.Join(in.Reasons, ". ") + ". Suggested: " + in.Suggestion + "."
	out.Section.Intro = append([]string{why}, out.Section.Intro...)
	var notes []string
	for _, c := range claims {
		notes = append(notes, fmt.Sprintf("Not judged: %s (%s).", c.Text, c.Detail))
	}
	out.Section.Notes = append(notes, out.Section.Notes...)
	return experiment.SetJSON(out, map[string]any{
		"claims_not_judged": claims, "claims": []struct{}{}, "verdict": "inconclusive", "inconclusive": in,
	})
}

// labNotes say what the lab's own instruments saw: how long each fleet took,
// whether the load generator kept its schedule, and what the origin
// counted that the simulator has no word for.
func labNotes(res *Result) []string {
	var out []string
	who := "the origin served"
	if res.Lab.Target != "" {
		who = "the fault proxy forwarded (or served out, imposing the origin)"
		out = append(out, fmt.Sprintf("The target answered in %.2f ms at rest before the first fleet (the median of %d requests). Each fleet's load stopped at the end of the scenario plus one attempt's timeout: the intents still out then count as unfinished.", 1000*res.Lab.RestSeconds, restProbes))
	}
	for _, f := range res.Lab.Fleets {
		l, o := f.Load, f.Origin
		n := fmt.Sprintf("%s: %.1f s of wall time; %d intents sent on schedule (%d shed), sent at most %.0f ms late (p99 %.1f ms); %s %d requests for clients that had left",
			f.Name, f.WallSeconds, l.Sent, l.Shed, 1000*l.LateMax, 1000*l.LateP99, who, o.Wasted)
		if f.SettleSeconds > 0 {
			n = fmt.Sprintf("%s (after a pause of %.1f s for the target to settle)", n, f.SettleSeconds)
		}
		if o.Dropped > 0 {
			n += fmt.Sprintf(" and dropped %d it could not answer in time", o.Dropped)
		}
		if o.Executions > 0 {
			n += fmt.Sprintf("; %d POST executions, %d of them duplicates, %d retries answered from the idempotency keys", o.Executions, o.Duplicates, o.Replayed)
		}
		for _, t := range f.Tiers {
			n += fmt.Sprintf("; tier %s answered %d requests after their caller left", t.Name, t.Wasted)
			if t.Dropped > 0 {
				n += fmt.Sprintf(" and dropped %d", t.Dropped)
			}
		}
		out = append(out, n+".")
	}
	return out
}

// The limits of the lab's time scale (see TickBounds).
const (
	// MinTick is the shortest wall-clock tick: below it the per-tick
	// accounting is at the mercy of timer wake-ups.
	MinTick = 10 * time.Millisecond
	// MinScaledTimeout is the shortest attempt timeout, in wall-clock
	// time, the lab measures honestly: a loopback hop, a timer wake-up
	// and a garbage-collection pause take a few milliseconds under load.
	MinScaledTimeout = 50 * time.Millisecond
	// MaxAttemptRate is the most attempts per wall-clock second the lab
	// plans for: the gateway serves about 6,300 per second on two cores
	// at saturation (BENCHMARKS.md), and the full storm at 100 ms per
	// tick peaks at 4,000.
	MaxAttemptRate = 5000.0
	// MaxWall is the longest a lab run may take on the wall clock.
	MaxWall = time.Hour
)

// TickBounds is the range of wall-clock ticks at which the lab can run a
// scenario and measure what the simulator does, and why each end is
// where it is.
type TickBounds struct {
	Min, Max       time.Duration
	MinWhy, MaxWhy string
}

// Bounds returns the range of ticks the lab accepts for sc: a tick so
// short that the fleets' timeouts shrink below MinScaledTimeout or their
// peak load passes MaxAttemptRate (a policy's ceiling, as resil computes
// it, at the highest intent rate of the scenario) fails the scenario's own
// claims by construction, and one so long that the run (every fleet, and
// the storm's counterfactual) passes MaxWall is refused. Min > Max when no
// tick will do.
func Bounds(sc *scenario.Scenario) (TickBounds, error) {
	b := TickBounds{Min: MinTick, MinWhy: "the ticks would be at the mercy of timer wake-ups"}
	if err := Check(sc); err != nil {
		return b, err
	}
	per := sc.Tick.Seconds() // scenario seconds per tick
	rate := peakIntentRate(sc)
	raise := func(d time.Duration, why string) {
		if d > b.Min {
			// Up to the millisecond, so that the bound printed is one
			// the lab takes.
			b.Min, b.MinWhy = (d + time.Millisecond - 1).Truncate(time.Millisecond), why
		}
	}
	// A chain's tiers: their timeouts are scaled too, and every hop's
	// attempts are served by the same two cores.
	var tiers []resil.Policy
	for _, t := range sc.Tiers {
		if t.Client.Timeout > 0 {
			raise(time.Duration(float64(MinScaledTimeout)*per/t.Client.Timeout.Seconds()),
				fmt.Sprintf("tier %s's %s timeout would last less than %s of wall time", t.Name, Short(t.Client.Timeout), Short(MinScaledTimeout)))
		}
		p, err := t.NewPolicy()
		if err != nil {
			return b, err
		}
		tiers = append(tiers, p)
	}
	for _, f := range sc.Fleets {
		if f.Timeout > 0 {
			raise(time.Duration(float64(MinScaledTimeout)*per/f.Timeout.Seconds()),
				fmt.Sprintf("fleet %s's %s timeout would last less than %s of wall time", f.Name, Short(f.Timeout), Short(MinScaledTimeout)))
		}
		p, err := f.NewPolicy()
		if err != nil {
			return b, err
		}
		// The attempts of every hop: each layer's become the calls of the
		// tier it reaches.
		c, total := p.Ceiling(rate), 0.0
		total += c
		for _, tp := range tiers {
			c = tp.Ceiling(c)
			total += c
		}
		if !math.IsInf(total, 0) {
			hops := ""
			if len(tiers) > 0 {
				hops = " (over every hop of the chain)"
			}
			raise(time.Duration(float64(time.Second)*per*total/MaxAttemptRate),
				fmt.Sprintf("fleet %s's %.0f attempts per scenario second%s would pass %.0f per second of wall time, more than the lab serves on two cores", f.Name, total, hops, MaxAttemptRate))
		}
	}
	fleets := len(sc.Fleets)
	if cf, _ := experiment.ShedCounterfactual(sc); cf != nil {
		fleets++
	}
	ticks := int((sc.Duration + sc.Tick - 1) / sc.Tick)
	b.Max = time.Duration(float64(MaxWall) / float64(fleets*ticks)).Truncate(time.Millisecond)
	b.MaxWhy = fmt.Sprintf("its %d fleets of %d ticks would take more than %s", fleets, ticks, Short(MaxWall))
	return b, nil
}

// Short writes d as it would be typed: 1h, 1m30s, 50ms, not 1h0m0s.
func Short(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

// MinDuration is the shortest run of sc whose claims about recovery can
// be borne out: to the end of its last trigger, then twice the longest
// recovery the simulator sees in a fleet that recovers (the storm's
// counterfactual included; twice, because the lab recovers a tick or two
// later than the model on a loaded machine), then sim.RecoveryTail ticks,
// the least run left after recovery for it to count. why says it in
// words. The simulator runs sc as it is (its whole duration).
func MinDuration(ctx context.Context, sc *scenario.Scenario) (need time.Duration, why string, err error) {
	_, end := sim.TriggerTicks(sc)
	res, err := sim.Run(ctx, sc)
	if err != nil {
		return 0, "", err
	}
	if cf, name := experiment.ShedCounterfactual(sc); cf != nil {
		cf.Fleets[0].Name = name
		cfRes, err := sim.Run(ctx, cf)
		if err != nil {
			return 0, "", err
		}
		res.Fleets = append(res.Fleets, cfRes.Fleets...)
	}
	longest, who := 0, ""
	for _, f := range res.Fleets {
		if s := f.Summary; s.Recovered && s.RecoveryTicks != nil && *s.RecoveryTicks >= longest {
			longest, who = *s.RecoveryTicks, f.Name
		}
	}
	ticks := end + 2*longest + sim.RecoveryTail
	why = fmt.Sprintf("the end of its last trigger (tick %d)", end)
	if who != "" {
		why += fmt.Sprintf(", twice the longest recovery the simulator sees (%s, +%d ticks)", who, longest)
	}
	why += fmt.Sprintf(" and %d ticks for a recovery to count", sim.RecoveryTail)
	return time.Duration(ticks) * sc.Tick, why, nil
}

// latencies is every fleet's latency histogram, in the result's order.
func latencies(res *Result) []*sim.Histogram {
	out := make([]*sim.Histogram, len(res.Lab.Fleets))
	for i, f := range res.Lab.Fleets {
		out[i] = f.Latency
		if out[i] == nil {
			out[i] = new(sim.Histogram)
		}
	}
	return out
}
