package replay

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/retrystorm/retrystorm/calibrate"
	"github.com/retrystorm/retrystorm/experiment"
	"github.com/retrystorm/retrystorm/internal/safetext"
	"github.com/retrystorm/retrystorm/resil"
	"github.com/retrystorm/retrystorm/resil/budget"
	"github.com/retrystorm/retrystorm/scenario"
	"github.com/retrystorm/retrystorm/sim"
	"github.com/retrystorm/retrystorm/verdict"
)

// Options say how to replay.
type Options struct {
	// Source names the product whose metrics the window holds; nil:
	// detected, as calibrate does.
	Source *calibrate.Source
	// Advise runs advise's search on the calibrated origin (check's
	// envelope: two minutes of one-second ticks, one seed) and replays
	// its recommendation: seconds, more on a long window.
	Advise bool
	// AdviseSpace, when set, is the policies advise tries instead of its
	// own search space (tests).
	AdviseSpace []scenario.Fleet
	// Seed seeds the simulator; zero means 1.
	Seed uint64
	// Config, when set, is the user's own retry policy (replay
	// --config): the replay runs it in place of calibrate's defaults,
	// cross-checked with the whole window.
	Config *calibrate.Config
}

// Calibration is the origin and traffic fitted from the steps before the
// incident, each with where it came from.
type Calibration struct {
	Window   string  `json:"window"`
	Rate     float64 `json:"rate"`
	Capacity float64 `json:"capacity"`
	Workers  int     `json:"workers"`
	Service  float64 `json:"service_seconds"` // mean
	Dist     string  `json:"service_dist"`
	Clients  int     `json:"clients"`
	// ClientsKnown says whether the metrics showed the client instances
	// (calibrate's default otherwise: ClientsNote says why).
	ClientsKnown bool    `json:"clients_known"`
	ClientsNote  string  `json:"clients_note"`
	RetryShare   float64 `json:"retries_per_intent"`
	Timeout      float64 `json:"timeout_seconds"`
	MaxRetries   int     `json:"max_retries"`
	Budget       bool    `json:"budget"`
	Breaker      bool    `json:"breaker"`
	CapacityNte  string  `json:"capacity_note"`
	TimeoutNte   string  `json:"timeout_note"`
}

// Verdict is an incident's end, measured or replayed: recovered, and how
// many seconds after the trigger ended (nil when it never did).
type Verdict struct {
	Recovered bool     `json:"recovered"`
	Seconds   *float64 `json:"recovery_seconds"`
	// Baseline is the error share before the trigger.
	Baseline float64 `json:"baseline_error_rate"`
	// NeverHealthy: the baseline is past sim.UnhealthyBaseline, so there
	// was no health to recover to (the simulator's rule); left out of the
	// JSON when false.
	NeverHealthy bool `json:"never_healthy,omitempty"`
}

func (v Verdict) String() string {
	if v.NeverHealthy {
		return "never healthy"
	}
	if !v.Recovered {
		return "never"
	}
	return fmt.Sprintf("after %gs", *v.Seconds)
}

// Loop is what the window shows, after the trigger ended, of the loop
// that sustains a metastable failure, at one layer.
type Loop struct {
	Layer string `json:"layer"`
	// Sustained: the failure outlived its trigger.
	Sustained bool `json:"sustained"`
	// Amplification is attempts per intent before the trigger and after
	// it ended.
	AmplificationBefore float64 `json:"amplification_before"`
	AmplificationAfter  float64 `json:"amplification_after"`
	// Retries: the attempts per intent after the trigger rose by a
	// quarter or more (retry amplification).
	Retries bool `json:"retry_amplification"`
	// Wasted: after the trigger, the origin worked for callers that had
	// left (its count of such work, or latencies past the timeout).
	Wasted      bool    `json:"work_for_callers_gone"`
	WastedShare float64 `json:"wasted_share"`
	Evidence    string  `json:"evidence"`
	// Where the window has layers: the layer's own verdict, its mean
	// queue (its proxy's pending requests) before the trigger and after
	// it ended, and whether the loop lives here (where retries amplify).
	Verdict       *Verdict `json:"verdict,omitempty"`
	BacklogBefore float64  `json:"backlog_before,omitempty"`
	BacklogAfter  float64  `json:"backlog_after,omitempty"`
	Lives         bool     `json:"loop_lives_here,omitempty"`
}

// Run is one replay of the incident: as it was, or with one change.
type Run struct {
	Name    string  `json:"name"`
	Change  string  `json:"change"`
	Verdict Verdict `json:"verdict"`
	// IntentsLost never succeeded; Failures are failed attempts and
	// local refusals, FailuresAfterClear those after the trigger.
	IntentsLost        int64 `json:"intents_lost"`
	Failures           int64 `json:"failures"`
	FailuresAfterClear int64 `json:"failures_after_clear"`
	// Attempts/s and error share per tick, for the plots.
	Offered   []float64 `json:"offered"`
	ErrorRate []float64 `json:"error_rate"`
	// Fleet is the client policy replayed.
	Fleet scenario.Fleet `json:"-"`
}

// Result is a replayed incident.
type Result struct {
	Window   string `json:"window"`
	Source   string `json:"source"`
	Incident bool   `json:"incident"`
	// Message says, without an incident, why none was found.
	Message     string       `json:"message,omitempty"`
	Calibration *Calibration `json:"calibration,omitempty"`
	Trigger     *Trigger     `json:"trigger,omitempty"`
	Measured    *Measured    `json:"measured"`
	Verdict     *Verdict     `json:"measured_verdict,omitempty"`
	// Loops are the loop at each layer, one where the metrics give no
	// layers. With layers, Layer is the one the trigger was inferred at
	// and replayed (the origin's callers), LoopLayer the one the loop
	// lives in (empty: none).
	Loops     []Loop `json:"loops,omitempty"`
	Layer     string `json:"layer,omitempty"`
	LoopLayer string `json:"loop_layer,omitempty"`
	// AsIs is the incident replayed as it was; Agrees whether its verdict
	// is the window's (both never, or both recovered, within ±20% or a
	// tick of each other).
	AsIs   *Run   `json:"as_is,omitempty"`
	Agrees bool   `json:"agrees"`
	Others []*Run `json:"counterfactuals,omitempty"`
	// Prevents names the change that would have prevented the incident
	// (recovered, fewest intents lost); empty when none would.
	Prevents   string `json:"prevents"`
	Conclusion string `json:"conclusion"`
	AdviseNote string `json:"advise_note,omitempty"`
	// Config names the config the client policy came from (--config);
	// Disagreements are where it and the window differ (warnings).
	Config        string                   `json:"config,omitempty"`
	Disagreements []calibrate.Disagreement `json:"config_disagreements,omitempty"`
	// Scenario is the replay's scenario (its fleets replaced per run).
	Scenario *scenario.Scenario `json:"-"`
	// Notes say what the replay left out or could not measure (a layer
	// without enough traffic, a layer's steps before the trigger).
	Notes []string `json:"notes,omitempty"`
}

// Replay reconstructs the incident in w and replays it. An error that
// says the window cannot be replayed wraps ErrInput and names where the
// window came from (its files, or the server).
func Replay(ctx context.Context, w *calibrate.Window, opts Options) (*Result, error) {
	r, err := replayWindow(ctx, w, opts)
	if errors.Is(err, ErrInput) {
		return nil, calibrate.NameWindow(err, ErrInput, w)
	}
	return r, err
}

func replayWindow(ctx context.Context, w *calibrate.Window, opts Options) (*Result, error) {
	src := opts.Source
	if src == nil {
		var err error
		if src, err = calibrate.Detect(w); err != nil {
			return nil, inputf("%v", err)
		}
	}
	if opts.Config != nil {
		if err := opts.Config.Describes(src); err != nil {
			return nil, inputf("%v", err)
		}
	}
	whole := w
	ls, at, d, notes, err := diagnoseLayers(w, src, opts.Config)
	if err != nil {
		return nil, err
	}
	if at != nil {
		w = at.w
	}
	m, b, fit := d.m, d.b, d.fit
	res := &Result{Window: whole.Describe(), Source: src.Name, Measured: m, Notes: append(slices.Clone(whole.Notes), notes...)}
	gap := ""
	if m.Unknown > 0 {
		gap = fmt.Sprintf("%d of the window's %d steps (%.0f%%) have no value: a metric replay reads has no sample there or in the step before (failed scrapes, which an overloaded target produces, or a gap in the saved answers); they are unknown, never a rate nor a sign of an incident",
			m.Unknown, m.n(), 100*m.MissingShare())
		res.Notes = append(res.Notes, gap+"; the replay runs them at the intent rate interpolated between the known steps around them.")
	}
	if at != nil {
		res.Layer = at.name
	}
	if m.Replayed != nil {
		res.Notes = append(res.Notes, fmt.Sprintf("%s: from %gs in, once calls failed, the requests are not the intents, which are taken to have stayed at the rate before the incident (%.4g/s) for the replay and for the attempts per intent.", m.retriesUnseen, m.T[m.ReplayedFrom]-m.Step, fit.Rate.V))
	}
	if opts.Config != nil {
		res.Config = safetext.Name(opts.Config.Fleet.Origin)
		if fit != nil {
			res.Disagreements = fit.Disagreements
		}
	}
	if d.on < 0 {
		res.noIncident(b, gap, w, src, opts.Config)
		return res, nil
	}
	res.Incident = true
	trig := d.trig
	res.Trigger = &trig
	res.Calibration = calibrationOf(fit, d.pre)

	// The measured verdict, judged as the simulator judges a run.
	v := judgeWindow(m, trig)
	res.Verdict = &v
	res.Loops = []Loop{loopOf(m, trig, v, fit, src)}
	if ls != nil {
		var more []string
		res.Loops, res.LoopLayer, more = layerLoops(ls, trig, m, fit, src)
		res.Notes = append(res.Notes, more...)
	}

	sc, err := build(fit, m, trig, opts.Seed)
	if err != nil {
		return nil, err
	}
	res.Scenario = sc
	if err := res.replay(ctx, sc, opts); err != nil {
		return nil, err
	}
	res.Agrees = Agree(v, res.AsIs.Verdict, m.Step)
	res.conclude()
	return res, nil
}

// diagnoseLayers diagnoses w: at the layer to replay (at, among the
// measurable layers ls, with notes on those left out) when src sees
// layers, or else as one.
func diagnoseLayers(w *calibrate.Window, src *calibrate.Source, cfg *calibrate.Config) (ls []*layer, at *layer, d *diagnosis, notes []string, err error) {
	ls, notes = measurable(layersOf(w, src), src)
	if ls == nil {
		d, err = diagnose(w, src, cfg)
		return nil, nil, d, notes, err
	}
	order(ls)
	var more []string
	if at, more, err = pick(ls, src, cfg); err != nil {
		return nil, nil, nil, nil, err
	}
	return ls, at, at.d, append(notes, more...), nil
}

// noIncident concludes a replay of a window without an incident (b its
// baseline, gap what its unknown steps are): nothing is replayed, but a
// config (cfg) is still compared with the window, as calibrate --config
// compares it.
func (res *Result) noIncident(b baseline, gap string, w *calibrate.Window, src *calibrate.Source, cfg *calibrate.Config) {
	lat := "no latency in the window's metrics"
	if b.latency > 0 {
		lat = fmt.Sprintf("no mean latency rose past %.3gs (%.0f%% above the baseline's, or %g times its spread)", b.latHi, 100*(LatencyJump-1), Noise)
	}
	res.Message = fmt.Sprintf("no incident in the window: no step's error share passed %.1f%% (the baseline's %.1f%% by %.0f points, or %g times its spread), %s, answers never stopped and the intents never rose past %.4g/s (%.0f%% above the base rate %.4g/s)",
		100*b.errHi, 100*b.errShare, 100*ErrorJump, Noise, lat, b.rateHi, 100*(LoadJump-1), b.rate)
	if gap != "" {
		res.Message += " in its known steps; " + gap
	}
	res.Conclusion = res.Message + "."
	if cfg != nil {
		if fit, err := calibrate.Fit(w, src); err == nil && fit.UseConfig(cfg, w) == nil {
			res.Disagreements = fit.Disagreements
		}
	}
}

// calibrationOf is what the replay calibrated, from the fit of the
// window pre before the trigger.
func calibrationOf(fit *calibrate.Result, pre *calibrate.Window) *Calibration {
	c := &Calibration{Window: pre.Describe(), Rate: fit.Rate.V, Capacity: fit.Capacity.V, Workers: int(fit.Workers.V),
		Service: fit.Scale, Dist: fit.ServiceTime.Dist, Clients: int(fit.Clients.V), ClientsKnown: fit.Clients.Known, ClientsNote: fit.Clients.Note, RetryShare: fit.RetryShare.V,
		Timeout: fit.Timeout.V, MaxRetries: int(fit.MaxRetries.V), Budget: fit.HasBudget, Breaker: fit.Breaker,
		CapacityNte: fit.Capacity.Note, TimeoutNte: fit.Timeout.Note}
	if c.Dist == "" {
		c.Dist = scenario.DistFixed
	}
	return c
}

// replay runs the incident sc as it was, with each change (and advise's
// recommendation, with opts.Advise), and with an origin that drops
// expired requests, into res.AsIs and res.Others.
func (res *Result) replay(ctx context.Context, sc *scenario.Scenario, opts Options) error {
	asIs := sc.Fleets[0]
	asIs.Name = "as-is"
	runs := []*Run{{Name: "as-is", Change: "none: the incident as it was", Fleet: asIs}}
	for _, c := range changes(asIs) {
		runs = append(runs, &Run{Name: c.name, Change: c.change, Fleet: c.fleet})
	}
	if opts.Advise {
		f, note, err := advise(ctx, sc, asIs, opts.AdviseSpace)
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err != nil:
			res.AdviseNote = "advise was not replayed: " + err.Error()
		default:
			runs = append(runs, &Run{Name: "advise", Change: "advise's recommendation: " + note, Fleet: f})
		}
	}
	// One simulation for the fleets (each fleet runs the incident on its
	// own), one for the origin that drops expired requests.
	fsc := *sc
	fsc.Fleets = nil
	for _, r := range runs {
		f := r.Fleet
		f.Name = r.Name
		fsc.Fleets = append(fsc.Fleets, f)
	}
	out, err := sim.Run(ctx, &fsc)
	if err != nil {
		return tooCostly(err, "replaying")
	}
	for i, r := range runs {
		r.fill(out.Fleets[i], sc.Tick)
	}
	dsc := *sc
	dsc.Origin.DropExpired = true
	dsc.Fleets = []scenario.Fleet{asIs}
	dout, err := sim.Run(ctx, &dsc)
	if err != nil {
		return tooCostly(err, "replaying with drop_expired")
	}
	drop := &Run{Name: "drop expired", Change: "the origin dropping requests whose caller has left, origin.drop_expired", Fleet: asIs}
	drop.fill(dout.Fleets[0], sc.Tick)
	res.AsIs = runs[0]
	res.Others = append(runs[1:2:2], drop)
	res.Others = append(res.Others, runs[2:]...)
	return nil
}

// tooCostly says what a replay the simulator refused for its cost can do
// (bad input, ErrInput): replay has no flag that raises the simulator's
// limit (the commands that run a user's scenario have --max-memory), so
// the way out is a window of fewer ticks or a lower rate. Other errors
// are returned as they are, after what.
func tooCostly(err error, what string) error {
	ce, ok := errors.AsType[*sim.CostError](err)
	if !ok {
		return fmt.Errorf("%s: %w", what, err)
	}
	if ce.Memory {
		return inputf("%s would need about %s of memory, more than the simulator's limit of %s, which replay has no flag to raise: replay a shorter window (--from and --to, or fewer saved steps), at a longer --step (fewer ticks), or a narrower --selector (fewer intents a second)",
			what, sim.Bytes(ce.Cost.Memory), sim.Bytes(ce.Limits.Memory))
	}
	return inputf("%s would simulate up to %.3g attempts, more than the simulator's limit: replay a shorter window or a narrower --selector", what, ce.Cost.Attempts)
}

// diagnosis is the part of a replay that reads the window: its series,
// baseline and onset and, where there is an incident, the origin fitted
// from the steps before it (pre) and the trigger inferred.
type diagnosis struct {
	m    *Measured
	b    baseline
	on   int
	pre  *calibrate.Window
	fit  *calibrate.Result
	trig Trigger
}

// diagnose reads w as src's metrics; without an incident, on is -1 and
// only m and b are set. With cfg, the fit takes the config's policy,
// cross-checked with the whole window: the incident is where retries and
// refusals show the policy best.
func diagnose(w *calibrate.Window, src *calibrate.Source, cfg *calibrate.Config) (*diagnosis, error) {
	m, err := measure(w, src)
	if err != nil {
		return nil, err
	}
	return diagnoseMeasured(w, m, src, cfg)
}

// diagnoseMeasured is diagnose with w's series already measured (m).
func diagnoseMeasured(w *calibrate.Window, m *Measured, src *calibrate.Source, cfg *calibrate.Config) (*diagnosis, error) {
	d := &diagnosis{m: m, b: baselineOf(m)}
	d.on = onset(m, d.b)
	if d.on < 0 {
		return d, nil
	}
	on := d.on
	if on < MinBefore {
		return nil, inputf("the incident begins %d step(s) into the window (at %s): calibrating the origin needs %d steps before it; start the window earlier", on, m.time(on).Format(time.RFC3339), MinBefore)
	}
	pre := w.Sub(m.start.Add(-w.Step), m.time(on-1))
	fit, err := calibrate.Fit(pre, src)
	if err != nil {
		return nil, inputf("calibrating the origin from the %d steps before the incident: %v", on, err)
	}
	if !fit.Workers.Known {
		// Before an incident an origin is rarely saturated, so its
		// workers show only as a lower bound; the incident saturates it,
		// and the whole window shows them.
		if full, err := calibrate.Fit(w, src); err == nil && full.Workers.Known {
			fit.Workers = full.Workers
			fit.Workers.Note = "from the whole window (the steps before the incident never saturated the origin): " + full.Workers.Note
			fit.Capacity = calibrate.Value{V: fit.Workers.V / fit.Scale, Known: true,
				Note: fmt.Sprintf("requests/s = workers / the mean service time (%.0f / %.4gs); the service time from before the incident", fit.Workers.V, fit.Scale)}
		}
	}
	if cfg != nil {
		if err := fit.UseConfig(cfg, w); err != nil {
			return nil, inputf("%v", err)
		}
	}
	if !fit.Timeout.Known {
		waited(m, fit)
	}
	d.pre, d.fit = pre, fit
	d.trig = infer(m, d.b, on, fit.Capacity.V)
	if m.retriesUnseen != "" {
		from := d.trig.start
		if d.trig.Kind == scenario.TriggerLoad {
			from = d.trig.end
		}
		m.assume(from, fit.Rate.V)
	}
	return d, nil
}

// Agree reports whether a replayed verdict agrees with a measured one
// (the window's, or the lab's): both never recovered, or both did within
// ±20% of the measured time or one step (step seconds, the resolution
// both are measured at), whichever is more.
func Agree(measured, replayed Verdict, step float64) bool {
	if measured.Recovered != replayed.Recovered {
		return false
	}
	if !measured.Recovered {
		return true
	}
	a, b := *measured.Seconds, *replayed.Seconds
	return math.Abs(a-b) <= max(step, 0.2*a)
}

func (r *Run) fill(f sim.FleetResult, tick time.Duration) {
	s := f.Summary
	r.Verdict = Verdict{Recovered: s.Recovered, Baseline: s.BaselineErrorRate, NeverHealthy: s.NeverHealthy}
	if s.Recovered && s.RecoveryTicks != nil {
		sec := float64(*s.RecoveryTicks) * tick.Seconds()
		r.Verdict.Seconds = &sec
	}
	r.IntentsLost, r.Failures, r.FailuresAfterClear = s.IntentsLost, s.Failures, s.FailuresAfterClear
	for i := range f.Series.Tick {
		r.Offered = append(r.Offered, float64(f.Series.Offered[i])/tick.Seconds())
		r.ErrorRate = append(r.ErrorRate, f.Series.ErrorRate[i])
	}
}

// loopOf reads, after the trigger ended, the loop that sustains a
// metastable failure: attempts per intent well above their level before
// (retries feeding the overload), and work done for callers that had
// left (a backlog that makes every answer late).
func loopOf(m *Measured, t Trigger, v Verdict, fit *calibrate.Result, src *calibrate.Source) Loop {
	l := Loop{Layer: src.Name + " (the origin as " + src.Name + "'s metrics show it)"}
	amp := func(from, to int) float64 {
		var a, in float64
		for i := from; i < to; i++ {
			a += m.Attempts[i]
			in += m.intents()[i]
		}
		if in <= 0 {
			return 0
		}
		return a / in
	}
	l.AmplificationBefore = amp(0, t.start)
	if !t.Ended {
		l.Evidence = "the window ends before the trigger does: what followed it is not in the window"
		return l
	}
	l.Sustained = !v.Recovered
	n := m.n()
	l.AmplificationAfter = amp(t.end, n)
	l.Retries = l.AmplificationAfter >= 1.25*l.AmplificationBefore && l.AmplificationAfter > 1.05
	var served, late int
	var ws, ss float64
	for i := t.end; i < n; i++ {
		if m.Wasted != nil {
			ws += m.Wasted[i]
		}
		ss += m.Served[i]
		if m.Latency[i] > 0 {
			served++
			if m.Latency[i] > fit.Timeout.V {
				late++
			}
		}
	}
	if m.Wasted != nil {
		l.WastedShare = share(ws, ss)
		l.Wasted = l.WastedShare > 0.1
	} else if served > 0 {
		l.WastedShare = float64(late) / float64(served)
		l.Wasted = l.WastedShare > 0.5
	}
	switch {
	case !l.Sustained:
		l.Evidence = fmt.Sprintf("no sustaining loop: the error share came back to its baseline %s after the trigger ended", v)
	case l.Retries && l.Wasted:
		l.Evidence = fmt.Sprintf("metastable: after the trigger, %.3g attempts per intent (%.3g before) kept the origin full, and %.0f%% of its work was for callers that had left", l.AmplificationAfter, l.AmplificationBefore, 100*l.WastedShare)
	case l.Retries:
		l.Evidence = fmt.Sprintf("metastable: after the trigger, %.3g attempts per intent (%.3g before): retries sustained the overload", l.AmplificationAfter, l.AmplificationBefore)
	case l.Wasted:
		l.Evidence = fmt.Sprintf("metastable: after the trigger, %.0f%% of the origin's work was for callers that had left (a backlog longer than the timeout)", 100*l.WastedShare)
	default:
		l.Evidence = "the failure outlived its trigger, but the metrics show neither retry amplification nor work for callers that had left"
	}
	if m.Wasted == nil && l.Sustained {
		l.Evidence += fmt.Sprintf("; %s does not count work for callers that left: inferred from mean latencies past the assumed timeout (%gs)", src.Name, fit.Timeout.V)
	}
	return l
}

// build makes the replay's scenario: calibrate's own scenario from the
// steps before the incident (so a replay and a calibration agree), run
// over the window's steps with the measured intents per step as a rate
// series and the inferred trigger.
func build(fit *calibrate.Result, m *Measured, t Trigger, seed uint64) (*scenario.Scenario, error) {
	out, err := calibrate.Write(fit, "")
	if err != nil {
		return nil, inputf("%v", err)
	}
	sc, err := scenario.Parse("calibrated.yaml", out.YAML)
	if err != nil {
		return nil, inputf("the calibrated scenario: %v", err)
	}
	tick := time.Duration(m.Step * float64(time.Second)).Round(time.Millisecond)
	sc.Name = "replay"
	if seed != 0 {
		sc.Seed = seed
	}
	sc.Tick = tick
	sc.Duration = time.Duration(m.n()) * tick
	pts := make([]scenario.Point, m.n())
	for i, r := range m.filled(m.intents()) {
		pts[i] = scenario.Point{At: time.Duration(i) * tick, Rate: r}
	}
	sc.Traffic.Series = &scenario.Series{Scale: 1, Points: pts}
	sc.Traffic.Rate = sc.Traffic.Series.Peak()
	tr := scenario.Trigger{Kind: t.Kind, At: time.Duration(t.start) * tick, For: time.Duration(t.end-t.start) * tick}
	switch t.Kind {
	case scenario.TriggerCapacity:
		tr.Capacity = t.Size
	case scenario.TriggerErrors:
		tr.ErrorRate = t.Size
	case scenario.TriggerLatency:
		tr.Factor = max(1, t.Size)
	case scenario.TriggerOutage:
		tr.Mode = t.Mode
	case scenario.TriggerLoad:
		tr.Rate = t.Size
	}
	sc.Triggers = []scenario.Trigger{tr}
	if err := sc.Validate(); err != nil {
		return nil, inputf("the replay's scenario: %v", err)
	}
	return sc, nil
}

type change struct {
	name, change string
	fleet        scenario.Fleet
}

// changes are the counterfactual client policies, each the as-is fleet
// with one change, set as advise sets its candidates.
func changes(f scenario.Fleet) []change {
	bucket := f
	bucket.Budget = scenario.Budget{Use: scenario.BudgetTokenBucket, TokenBucket: budget.TokenBucketSettings{Ratio: 0.1, Funding: budget.FundedBySuccess, MinTokens: 10, MaxTokens: 100, RetryCost: 1, TimeoutCost: 1}}
	breaker := f
	breaker.Breaker = scenario.Breaker{Use: scenario.BreakerConsecutive, Threshold: 5, Cooldown: 5 * time.Second, Probes: 1, Scope: "all"}
	throttle := f
	throttle.Throttle = scenario.Throttle{Use: scenario.ThrottleAdaptive, ThrottlerSettings: resil.ThrottlerSettings{K: 2, Window: 2 * time.Minute, Padding: 1, MaxProbability: 1}}
	return []change{
		{"retry budget", "a token-bucket retry budget of 10%, min 10 and max 100 tokens", bucket},
		{"breaker", "a consecutive-failure breaker: 5 failures, 5s cooldown", breaker},
		{"throttle", "adaptive client-side throttling: K = 2, a 2m window", throttle},
	}
}

// advise searches, as retrystorm advise does, for a better policy on the
// calibrated origin (one seed: the replay is its test) and returns it.
func advise(ctx context.Context, sc *scenario.Scenario, user scenario.Fleet, space []scenario.Fleet) (scenario.Fleet, string, error) {
	b := *sc
	b.Traffic.Series = nil
	b.Traffic.Rate = sc.Traffic.Series.Points[0].Rate
	if len(sc.Traffic.Series.Points) > 0 {
		var rs []float64
		for _, p := range sc.Traffic.Series.Points {
			rs = append(rs, p.Rate)
		}
		b.Traffic.Rate = median(rs)
	}
	b.Triggers = nil
	if t := sc.Triggers[0]; t.Kind == scenario.TriggerCapacity {
		b.Triggers = []scenario.Trigger{t}
	}
	// Advise's envelope is check's: two minutes of one-second ticks, its
	// faults from 30s on, whatever the window's length and step.
	b.Tick, b.Duration = time.Second, 2*time.Minute
	r, err := verdict.Advise(ctx, verdict.CheckInput{Fleet: user, Origin: "the replay's calibrated origin"}, verdict.AdviseOptions{Base: &b, Seeds: 1, Space: space}, experiment.Options{})
	if err != nil {
		if errors.Is(err, verdict.ErrInput) {
			return scenario.Fleet{}, "", fmt.Errorf("advise refused the calibrated base: %v", err)
		}
		return scenario.Fleet{}, "", err
	}
	best := r.Best()
	return best.Fleet, best.Name, nil
}

// conclude picks the change that prevents the incident and says plainly
// what happened.
func (r *Result) conclude() {
	var best *Run
	for _, o := range r.Others {
		if !o.Verdict.Recovered {
			continue
		}
		if best == nil || o.IntentsLost < best.IntentsLost {
			best = o
		}
	}
	what := "The incident: " + r.Trigger.Describe() + ", inferred because " + r.Trigger.How + "."
	var ended string
	switch {
	case !r.Trigger.Ended:
		ended = " The window ends before the trigger does."
	case r.Verdict.Recovered:
		ended = fmt.Sprintf(" The service recovered %gs after the trigger ended.", *r.Verdict.Seconds)
	default:
		ended = " The service never recovered after the trigger ended: " + r.Loops[0].Evidence + "."
		if len(r.Loops) > 1 {
			ended = " The service never recovered after the trigger ended." + layerNote(r.Loops, r.LoopLayer)
		}
	}
	rep := fmt.Sprintf(" Replayed as it was, the simulator's verdict is %s (the window's: %s)", r.AsIs.Verdict, r.Verdict)
	if r.Agrees {
		rep += ", which agrees."
	} else {
		rep += ": they disagree, so the counterfactuals below rest on a replay that does not reproduce the incident; check the calibration's defaults (timeout, retries)."
	}
	var fix string
	switch {
	case best == nil:
		fix = " None of the changes replayed would have prevented it."
		r.Prevents = ""
	case r.AsIs.Verdict.Recovered:
		r.Prevents = best.Name
		fix = fmt.Sprintf(" It ended by itself; of the changes, %s (%s) recovers %s and loses %d intents, against %d as it was.", best.Name, best.Change, best.Verdict, best.IntentsLost, r.AsIs.IntentsLost)
	default:
		r.Prevents = best.Name
		fix = fmt.Sprintf(" The change that would have prevented it: %s (%s): it recovers %s and loses %d intents, against %d as it was.", best.Name, best.Change, best.Verdict, best.IntentsLost, r.AsIs.IntentsLost)
	}
	r.Conclusion = what + ended + rep + fix
}

// waited raises calibrate's default timeout to what the window shows the
// callers waited: a step whose mean latency was L while its error share
// stayed within a point of the baseline had callers waiting past L (its
// slower answers longer: the step's tail is not in its mean), so the
// timeout is taken as 1.5 L, rounded up to 100ms: with L alone, the
// Envoy window of calibrate's testdata, whose clients never timed out,
// replays as a storm. No
// product exports its timeout, and a replay with one shorter than the
// callers' would time out answers they got (and find a storm where the
// window shows none).
func waited(m *Measured, fit *calibrate.Result) {
	base := errorBaseline(m, m.n())
	longest := 0.0
	for i, l := range m.Latency {
		if m.ErrorRate[i] <= base+Tolerance {
			longest = max(longest, l)
		}
	}
	if to := math.Ceil(15*longest) / 10; to > fit.Timeout.V {
		fit.Timeout = calibrate.Value{V: to, Note: fmt.Sprintf("no metric shows the timeout; calibrate's default (%gs) raised to 1.5 times the longest mean latency of a step without extra errors (%.3gs): the callers waited that long at least, and their slower answers longer", fit.Timeout.V, longest)}
	}
}
