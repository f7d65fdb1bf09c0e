package experiment

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/retrystorm/retrystorm/report"
	"github.com/retrystorm/retrystorm/resil/budget"
	"github.com/retrystorm/retrystorm/scenario"
	"github.com/retrystorm/retrystorm/sim"
)

const layersTitle = "Layers: retries at every layer multiply"

// Layers puts the same retry policies at every layer of a chain of tiers
// and shows where the storm forms: amplification at the origin in a total
// outage against the closed form, retries at one layer only, a budget at
// every layer, deadline propagation, and which chains recover from a dip.
var Layers = register(&Experiment{
	Name:    "layers",
	Title:   layersTitle,
	Summary: "retries in a chain of tiers: amplification, one layer, budgets, deadlines, a dip",
	Order:   70,
	Page: Page{
		Knobs: []string{"rate", "capacity", "dip", "dip_for"},
		Heavy: true,
		Cost:  1400,
		Fixed: "The chains and their policies are the experiment's own: three tiers, retrying three times each, one layer only, budgets, deadlines; the knobs set the traffic and the origin's dip.",
	},
	Run: runLayers,
})

// layersRetries are the retries each retrying layer makes in the
// experiment's chains, and layersRatio the budget's share.
const (
	layersRetries  = 3
	layersRatio    = 0.1
	layersFloor    = 10
	layersAmpError = 0.05 // measured against the closed form: within 5%
	// layersRecovery is what "recovers" means in the dip for a budget:
	// within this many ticks of its end; layersAtOnce for a chain that
	// sheds what cannot finish in time.
	layersRecovery = 30
	layersAtOnce   = 5
)

// layerLoad is the load that reached one layer of a chain, per intent.
type layerLoad struct {
	Layer         string  `json:"layer"`
	Attempts      int64   `json:"attempts"`
	Amplification float64 `json:"amplification"`
}

// layersOutageRow is one chain in a total outage of the origin.
type layersOutageRow struct {
	Config string `json:"config"`
	// Retries is each tier's max_retries, outermost first.
	Retries []int `json:"retries"`
	// ClosedForm is the attempts at the origin per intent the policies
	// allow when every attempt fails: the product over the tiers of
	// (1 + retries), or of (1 + ratio) for budgets, whose floors come on
	// top.
	ClosedForm float64 `json:"closed_form"`
	// Amplification is the attempts that reached the origin per intent.
	Amplification float64     `json:"amplification"`
	Intents       int64       `json:"intents"`
	Layers        []layerLoad `json:"layers"`
	// WastedWork is the answers the tiers gave after their callers had
	// left, over every tier.
	WastedWork int64 `json:"wasted_work"`
}

// layersDip is one chain through a dip in the origin's capacity.
type layersDip struct {
	Config        string      `json:"config"`
	Recovered     bool        `json:"recovered"`
	RecoveryTicks *int        `json:"recovery_ticks"`
	Intents       int64       `json:"intents"`
	IntentsLost   int64       `json:"intents_lost"`
	Failures      int64       `json:"failures"`
	AfterClear    int64       `json:"failures_after_clear"`
	PeakOffered   int64       `json:"peak_offered_at_origin"`
	Amplification float64     `json:"amplification"`
	Layers        []layerLoad `json:"layers"`
	WastedWork    int64       `json:"wasted_work"`
}

type layersJSON struct {
	Scenario string            `json:"scenario"`
	Seed     uint64            `json:"seed"`
	Outage   []layersOutageRow `json:"outage"`
	Dip      []layersDip       `json:"dip"`
	Claims   []report.Claim    `json:"claims"`
}

// layersVariant is one chain the experiment builds from the scenario's:
// which tiers it keeps (the innermost n), and what it changes in them.
type layersVariant struct {
	name  string
	tiers int // the innermost this many; 0 means all
	// change sets tier l's client, of n tiers.
	change func(l, n int, c *scenario.Client)
	// retries reports tier l's retries, for the closed form.
	closed func(l, n int, c scenario.Client) float64
	// origin, when set, changes the origin.
	origin func(o *scenario.Origin)
}

// retrying sets every tier (or only those keep says) to retry
// layersRetries times without a budget, the others not at all.
func retrying(keep func(l, n int) bool) func(l, n int, c *scenario.Client) {
	return func(l, n int, c *scenario.Client) {
		c.Budget = scenario.Budget{Use: scenario.BudgetNone}
		c.Retry.MaxRetries = 0
		if keep(l, n) {
			c.Retry.MaxRetries = layersRetries
		}
	}
}

func every(int, int) bool     { return true }
func outermost(l, _ int) bool { return l == 0 }
func innermost(l, n int) bool { return l == n-1 }

// budgeted gives every tier a token bucket of layersRatio, funded by the
// requests (so that it allows its share in an outage too, and the closed
// form is (1 + ratio) per tier), with a floor.
func budgeted(l, n int, c *scenario.Client) {
	retrying(every)(l, n, c)
	c.Budget = scenario.Budget{Use: scenario.BudgetTokenBucket, TokenBucket: budget.TokenBucketSettings{Ratio: layersRatio, Funding: budget.FundedByRequest, MinTokens: layersFloor, MaxTokens: 100, RetryCost: 1, TimeoutCost: 1}}
}

// propagating is every tier retrying, with deadline propagation.
func propagating(l, n int, c *scenario.Client) {
	retrying(every)(l, n, c)
	c.PropagateDeadline = true
}

// dropExpired makes the origin skip the requests whose caller will not
// wait for the answer: those it knows the deadline of, and those whose
// caller has left.
func dropExpired(o *scenario.Origin) { o.DropExpired = true }

func closedRetries(_, _ int, c scenario.Client) float64 { return float64(1 + c.Retry.MaxRetries) }
func closedBudget(_, _ int, c scenario.Client) float64  { return 1 + c.Budget.Ratio() }

func runLayers(ctx context.Context, opts Options) (*Outcome, error) {
	sc, err := scenarioFor("layers", opts)
	if err != nil {
		return nil, err
	}
	if len(sc.Tiers) < 3 {
		return nil, fmt.Errorf("layers: the scenario needs a chain of at least three tiers; %s has %d", sc.Name, len(sc.Tiers))
	}
	js := layersJSON{Scenario: sc.Name, Seed: sc.Seed}
	total := len(layersOutages) + 2 + 5
	done := 0
	progress := func() {
		done++
		if opts.Progress != nil {
			opts.Progress(done, total)
		}
	}
	if js.Outage, err = layersOutageRuns(ctx, sc, opts, progress); err != nil {
		return nil, err
	}
	var dipRes *sim.Result
	if js.Dip, dipRes, err = layersDipRuns(ctx, sc, opts, progress); err != nil {
		return nil, err
	}
	js.Claims = layersClaims(js)
	sec := report.Section{
		ID:    "layers",
		Title: layersTitle,
		Intro: []string{
			fmt.Sprintf("%s: %s sent once each by %d clients through %s to a %s origin (capacity %g/s); each tier retries %d times unless said otherwise, with timeouts that nest (%s).",
				sc.Name, describeRate(sc), sc.Traffic.Clients, tierNames(sc), sc.Origin.Model, sc.Origin.Capacity, layersRetries, tierTimeouts(sc)),
			"First a total outage of the origin: every attempt fails, and each layer's attempts become calls of the layer below, which retries them too. Then the same chains through a dip in the origin's capacity: which recover, which stay collapsed, and how many intents each loses.",
		},
		Tables: layersTables(js),
		Claims: js.Claims,
		Charts: layersCharts(js, dipRes),
		Notes: []string{
			"Amplification is the attempts that reached a layer per intent. The closed form for retries is the product over the tiers of (1 + max_retries): four attempts per call at each of three layers is 4³ = 64 at the bottom. A budget funded by requests allows (1 + ratio) per layer, so 1.1³ ≈ 1.33 at the bottom, plus its floors (min_tokens per tier replica).",
			"Deadline propagation: a tier passes the time its caller has left to its call (resil's Resil-Timeout header), stops retrying when it runs out, and cancels its call when its caller gives up. Without it, the inner tiers of a chain whose timeouts do not nest go on working for callers that already left: wasted work.",
		},
	}
	return &Outcome{Name: "layers", Claims: js.Claims, Section: sec, Findings: layersFindings(js), JSON: js}, nil
}

// layersOutages are the chains run in a total outage: the chain's tiers
// as the scenario has them, timeouts that nest, and variants of their
// retries.
var layersOutages = []layersVariant{
	{name: "1 tier", tiers: 1, change: retrying(every), closed: closedRetries},
	{name: "2 tiers", tiers: 2, change: retrying(every), closed: closedRetries},
	{name: "3 tiers", tiers: 3, change: retrying(every), closed: closedRetries},
	{name: "outermost only", tiers: 3, change: retrying(outermost), closed: closedRetries},
	{name: "innermost only", tiers: 3, change: retrying(innermost), closed: closedRetries},
	{name: "10% budget each", tiers: 3, change: budgeted, closed: closedBudget},
}

// layersFlat are the chains run in a total outage with flat timeouts:
// every layer gives up after the same second, so the layers above leave
// before the retries below are over.
var layersFlat = []layersVariant{
	{name: "flat timeouts", tiers: 3, change: retrying(every), closed: closedRetries},
	{name: "flat, propagated", tiers: 3, change: propagating, closed: closedRetries},
}

// layersDips are the chains run through the scenario's dip.
var layersDips = []layersVariant{
	{name: "every tier", change: retrying(every)},
	{name: "outermost only", change: retrying(outermost)},
	{name: "innermost only", change: retrying(innermost)},
	{name: "10% budget each", change: budgeted},
	{name: "propagated", change: propagating},
	{name: "origin drops", change: retrying(every), origin: dropExpired},
	{name: "propagated + drops", change: propagating, origin: dropExpired},
}

// layersOutageRuns runs each chain of layersOutages, then of layersFlat,
// in a total outage, calling progress after each.
func layersOutageRuns(ctx context.Context, sc *scenario.Scenario, opts Options, progress func()) ([]layersOutageRow, error) {
	var rows []layersOutageRow
	for _, v := range layersOutages {
		row, err := layersOutage(ctx, sc, v, false, opts)
		if err != nil {
			return nil, err
		}
		rows = append(rows, row)
		progress()
	}
	for _, v := range layersFlat {
		row, err := layersOutage(ctx, sc, v, true, opts)
		if err != nil {
			return nil, err
		}
		rows = append(rows, row)
		progress()
	}
	return rows, nil
}

// layersDipRuns runs each chain of layersDips through the scenario's
// trigger, calling progress after each. It returns their rows and the
// last run's result with every chain's fleet in it, named after its
// chain, for the charts.
func layersDipRuns(ctx context.Context, sc *scenario.Scenario, opts Options, progress func()) ([]layersDip, *sim.Result, error) {
	var rows []layersDip
	var dipRuns []sim.FleetResult
	var dipRes *sim.Result
	for _, v := range layersDips {
		c := layersChain(sc, v)
		res, err := opts.run(ctx, c)
		if err != nil {
			return nil, nil, err
		}
		f := res.Fleets[0]
		f.Name = v.name
		dipRuns = append(dipRuns, f)
		dipRes = res
		rows = append(rows, layersDipRow(v.name, f))
		progress()
	}
	dipRes.Fleets = dipRuns
	return rows, dipRes, nil
}

// layersChain is sc with the variant's tiers (the innermost v.tiers, or
// all) and their clients changed.
func layersChain(sc *scenario.Scenario, v layersVariant) *scenario.Scenario {
	c := sc.Clone()
	c.Tiers = slices.Clone(sc.Tiers)
	if v.tiers > 0 {
		c.Tiers = c.Tiers[len(c.Tiers)-v.tiers:]
	}
	c.Fleets = c.Fleets[:1]
	for l := range c.Tiers {
		v.change(l, len(c.Tiers), &c.Tiers[l].Client)
	}
	if v.origin != nil {
		v.origin(&c.Origin)
	}
	return c
}

// layersOutage runs the chain v in a total outage of the origin (every
// request vanishes), intents arriving for the first 10 s and the run long
// enough for every retry of every layer to fall within it. flat gives
// every layer, the users' too, a 1 s timeout.
func layersOutage(ctx context.Context, base *scenario.Scenario, v layersVariant, flat bool, opts Options) (layersOutageRow, error) {
	sc := layersChain(base, v)
	longest := sc.Fleets[0].Timeout
	if flat {
		for l := range sc.Tiers {
			sc.Tiers[l].Client.Timeout = time.Second
		}
		sc.Fleets[0].Timeout, longest = time.Second, 4*time.Second
	}
	sc.Duration = 10*time.Second + longest.Truncate(time.Second) + 10*time.Second
	sc.Traffic.Series = nil
	sc.Traffic.Arrivals = "constant"
	sc.Triggers = []scenario.Trigger{
		{Kind: scenario.TriggerOutage, At: 0, For: sc.Duration},
		{Kind: scenario.TriggerLoad, At: 10 * time.Second, For: sc.Duration - 10*time.Second, Rate: 0},
	}
	res, err := opts.run(ctx, sc)
	if err != nil {
		return layersOutageRow{}, err
	}
	f := res.Fleets[0]
	row := layersOutageRow{Config: v.name, ClosedForm: 1, Intents: f.Summary.Intents}
	for l, t := range sc.Tiers {
		row.Retries = append(row.Retries, t.Client.Retry.MaxRetries)
		row.ClosedForm *= v.closed(l, len(sc.Tiers), t.Client)
	}
	row.ClosedForm = round3(row.ClosedForm)
	row.Layers = layerLoads(f)
	row.Amplification = row.Layers[len(row.Layers)-1].Amplification
	row.WastedWork = tierWaste(f)
	return row, nil
}

func layerLoads(f sim.FleetResult) []layerLoad {
	out := make([]layerLoad, len(f.Tiers))
	for i, t := range f.Tiers {
		out[i] = layerLoad{Layer: t.Name, Attempts: t.Summary.Attempts, Amplification: round3(t.Amplification)}
	}
	return out
}

// tierWaste is the answers the tiers (not the origin) gave after their
// callers had left.
func tierWaste(f sim.FleetResult) int64 {
	var w int64
	for _, t := range f.Tiers[:len(f.Tiers)-1] {
		w += t.Summary.WastedWork
	}
	return w
}

func layersDipRow(name string, f sim.FleetResult) layersDip {
	s := f.Summary
	org := f.Tiers[len(f.Tiers)-1]
	return layersDip{
		Config: name, Recovered: s.Recovered, RecoveryTicks: s.RecoveryTicks,
		Intents: s.Intents, IntentsLost: s.IntentsLost, Failures: s.Failures, AfterClear: s.FailuresAfterClear,
		PeakOffered: org.Summary.PeakOffered, Amplification: round3(org.Amplification),
		Layers: layerLoads(f), WastedWork: tierWaste(f),
	}
}

func tierNames(sc *scenario.Scenario) string {
	var ns []string
	for _, t := range sc.Tiers {
		ns = append(ns, t.Name)
	}
	return strings.Join(ns, ", ")
}

func tierTimeouts(sc *scenario.Scenario) string {
	var ts []string
	for _, t := range sc.Tiers {
		ts = append(ts, fmt.Sprintf("%s %s", t.Name, t.Client.Timeout))
	}
	return strings.Join(ts, ", ")
}

func layersTables(js layersJSON) []report.Table {
	out := report.Table{
		Title: "A total outage of the origin: attempts per intent at each layer",
		Columns: []report.Column{{Name: "chain"}, {Name: "closed form", Align: report.Right}, {Name: "origin", Align: report.Right},
			{Name: "per layer", Align: report.Right}, {Name: "wasted", Align: report.Right}},
	}
	for _, r := range js.Outage {
		var ls []string
		for _, l := range r.Layers {
			ls = append(ls, report.Float(l.Amplification, 2))
		}
		out.Rows = append(out.Rows, []string{r.Config, report.Float(r.ClosedForm, 2), report.Float(r.Amplification, 2),
			strings.Join(ls, " · "), report.Int(r.WastedWork)})
	}
	dip := report.Table{
		Title: "A dip in the origin's capacity: who recovers",
		Columns: []report.Column{{Name: "chain"}, {Name: "recovery", Align: report.Right}, {Name: "lost", Align: report.Right},
			{Name: "failures", Align: report.Right}, {Name: "after", Align: report.Right}, {Name: "per layer", Align: report.Right}},
		Emphasis: map[[2]int]bool{},
	}
	for i, r := range js.Dip {
		rec := "never"
		if r.Recovered {
			rec = recoveryText(sim.Summary{Recovered: true, RecoveryTicks: r.RecoveryTicks})
		} else {
			dip.Emphasis[[2]int{i, 1}] = true
		}
		var ls []string
		for _, l := range r.Layers {
			ls = append(ls, report.Float(l.Amplification, 1))
		}
		dip.Rows = append(dip.Rows, []string{r.Config, rec, report.Int(r.IntentsLost), report.Int(r.Failures), report.Int(r.AfterClear),
			strings.Join(ls, " · ")})
	}
	notes := report.Table{
		Title:   "The chains",
		Columns: []report.Column{{Name: "chain"}, {Name: "what it is"}},
	}
	for _, c := range layersChains {
		notes.Rows = append(notes.Rows, c[:])
	}
	return []report.Table{out, dip, notes}
}

// layersChains says what each chain of the tables is.
var layersChains = [][2]string{
	{"N tiers", "the innermost N tiers, each retrying 3 times"},
	{"outermost only", "the outermost tier retries 3 times, the others not"},
	{"innermost only", "the innermost tier retries 3 times, the others not"},
	{"10% budget each", "every tier retries from a 10% token bucket (min_tokens 10)"},
	{"flat timeouts", "every layer, the users too, gives up after 1s"},
	{"flat, propagated", "the same, every tier propagating deadlines"},
	{"every tier", "every tier retries 3 times, timeouts nested"},
	{"propagated", "the same, every tier propagating deadlines"},
	{"origin drops", "every tier retries; the origin drops expired requests"},
	{"propagated + drops", "both: the origin knows each request's deadline"},
}

func layersCharts(js layersJSON, dip *sim.Result) []report.Chart {
	var charts []report.Chart
	// Amplification against the number of tiers, measured and closed form.
	x := []float64{1, 2, 3}
	var meas, closed []float64
	for _, r := range js.Outage[:3] {
		meas = append(meas, r.Amplification)
		closed = append(closed, r.ClosedForm)
	}
	charts = append(charts, report.Chart{
		Title: "A total outage: attempts at the origin per intent, by tiers retrying 3 times", XLabel: "tiers", YLabel: "attempts per intent", X: x,
		Lines: []report.Line{{Name: "closed form, 4^tiers", Y: closed, Dashed: true}, {Name: "measured", Y: meas}},
	})
	if dip == nil || len(dip.Fleets) == 0 {
		return charts
	}
	n := len(dip.Fleets[0].Series.Tick)
	tx := make([]float64, n)
	for i := range tx {
		tx[i] = float64(i) * dip.TickSeconds
	}
	// The storm forming through the layers: every tier retrying.
	f := dip.Fleets[0]
	layers := report.Chart{Title: "The dip, " + f.Name + ": offered load at each layer", XLabel: "time (s)", YLabel: "attempts / tick", X: tx, Shade: shade(dip)}
	for _, t := range f.Tiers {
		layers.Lines = append(layers.Lines, report.Line{Name: t.Name, Y: floats(t.Series.Offered)})
	}
	origin := report.Chart{Title: "The dip: offered load at the origin, each chain", XLabel: "time (s)", YLabel: "attempts / tick", X: tx, Shade: shade(dip)}
	goodput := report.Chart{Title: "The dip: goodput, each chain", XLabel: "time (s)", YLabel: "answers in time / tick", X: tx, Shade: shade(dip)}
	for _, f := range dip.Fleets {
		org := f.Tiers[len(f.Tiers)-1]
		origin.Lines = append(origin.Lines, report.Line{Name: f.Name, Y: floats(org.Series.Offered)})
		goodput.Lines = append(goodput.Lines, report.Line{Name: f.Name, Y: floats(f.Series.Goodput)})
	}
	return append(charts, layers, origin, goodput)
}

// layersClaims are the experiment's claims: the outage's, then the dip's.
func layersClaims(js layersJSON) []report.Claim {
	return append(layersOutageClaims(js), layersDipClaims(js)...)
}

// layersOutageClaims are the claims of the total outage: the measured
// amplification against the closed form, one tier retrying, budgets,
// and deadlines with flat timeouts.
func layersOutageClaims(js layersJSON) []report.Claim {
	var cs []report.Claim
	row := func(name string) layersOutageRow {
		for _, r := range js.Outage {
			if r.Config == name {
				return r
			}
		}
		return layersOutageRow{}
	}
	for _, r := range js.Outage[:3] {
		err := math.Abs(r.Amplification-r.ClosedForm) / r.ClosedForm
		cs = append(cs, report.Check(fmt.Sprintf("%s retrying %d times each: %g× at the origin, the closed form, within %.0f%%", r.Config, layersRetries, r.ClosedForm, 100*layersAmpError),
			err <= layersAmpError, map[string]any{"amplification": r.Amplification, "closed_form": r.ClosedForm}, "%.2f attempts per intent", r.Amplification))
	}
	outer, inner := row("outermost only"), row("innermost only")
	if len(outer.Layers) == 4 && len(inner.Layers) == 4 {
		cs = append(cs, report.Check("retries at one tier only, outermost or innermost, send 4× to the origin, not 64×",
			math.Abs(outer.Amplification-4) <= 4*layersAmpError && math.Abs(inner.Amplification-4) <= 4*layersAmpError,
			map[string]any{"outermost": outer.Amplification, "innermost": inner.Amplification}, "%.2f and %.2f", outer.Amplification, inner.Amplification),
			report.Check("retrying at the outermost tier multiplies the load on every tier below it; at the innermost, on the origin alone",
				outer.Layers[2].Amplification >= 4*(1-layersAmpError) && inner.Layers[2].Amplification <= 1+layersAmpError,
				map[string]any{"db_proxy_outermost": outer.Layers[2].Amplification, "db_proxy_innermost": inner.Layers[2].Amplification},
				"%.2f against %.2f attempts per intent at the innermost tier", outer.Layers[2].Amplification, inner.Layers[2].Amplification))
	}
	if b := row("10% budget each"); b.Intents > 0 {
		// Each tier's calls are the attempts above; it adds its share of
		// them and its floor, which the tiers below multiply in turn.
		n := float64(b.Intents)
		above := n
		for range b.Retries {
			above = above*(1+layersRatio) + layersFloor
		}
		bound := above / n
		cs = append(cs, report.Check(fmt.Sprintf("a 10%% budget at every tier keeps the origin's load near 1.1³ = %.2f per intent (at most that with the floors, %.3f)", math.Pow(1+layersRatio, 3), bound),
			b.Amplification <= round3(bound), map[string]any{"amplification": b.Amplification, "bound": round3(bound)}, "%.3f attempts per intent", b.Amplification))
	}
	no, yes := row("flat timeouts"), row("flat, propagated")
	if no.Intents > 0 && yes.Intents > 0 {
		cs = append(cs,
			report.Check("with timeouts that do not nest and no propagation, the inner tiers work on for callers that left: still 64× at the origin, and wasted work",
				no.Amplification >= 64*(1-layersAmpError) && no.WastedWork > 0,
				map[string]any{"amplification": no.Amplification, "wasted_work": no.WastedWork}, "%.2f attempts per intent, %d answers nobody waited for", no.Amplification, no.WastedWork),
			report.Check("with deadline propagation the inner tiers stop when their caller leaves: about 1 attempt per intent at the origin, no wasted work at the tiers",
				yes.Amplification <= 1+layersAmpError && yes.WastedWork == 0,
				map[string]any{"amplification": yes.Amplification, "wasted_work": yes.WastedWork}, "%.2f attempts per intent, %d wasted", yes.Amplification, yes.WastedWork))
	}
	return cs
}

// layersDipClaims are the claims of the dip: which chains stay collapsed
// and which recover, and how fast.
func layersDipClaims(js layersJSON) []report.Claim {
	var cs []report.Claim
	dip := func(name string) layersDip {
		for _, r := range js.Dip {
			if r.Config == name {
				return r
			}
		}
		return layersDip{}
	}
	every, budget := dip("every tier"), dip("10% budget each")
	outerDip, innerDip := dip("outermost only"), dip("innermost only")
	prop, drop, both := dip("propagated"), dip("origin drops"), dip("propagated + drops")
	rec := func(r layersDip) string {
		return recoveryText(sim.Summary{Recovered: r.Recovered, RecoveryTicks: r.RecoveryTicks})
	}
	cs = append(cs,
		report.Check("through the dip, the chain that retries at every tier stays collapsed after the cause cleared (metastable)",
			every.Intents > 0 && !every.Recovered, map[string]any{"recovered": every.Recovered, "amplification": every.Amplification},
			"recovered: %v; %.1f attempts per intent at the origin", every.Recovered, every.Amplification),
		report.Check("retrying at one tier only, outermost or innermost, still keeps the origin collapsed: one layer of 4× is enough",
			outerDip.Intents > 0 && !outerDip.Recovered && innerDip.Intents > 0 && !innerDip.Recovered,
			map[string]any{"outermost_recovered": outerDip.Recovered, "innermost_recovered": innerDip.Recovered}, "%s and %s", rec(outerDip), rec(innerDip)),
		report.Check(fmt.Sprintf("with a 10%% budget at every tier the chain recovers within %d ticks, and loses fewer intents", layersRecovery),
			budget.Recovered && *budget.RecoveryTicks <= layersRecovery && budget.IntentsLost < every.IntentsLost,
			map[string]any{"recovered": budget.Recovered, "recovery_ticks": budget.RecoveryTicks, "intents_lost": budget.IntentsLost, "every_lost": every.IntentsLost},
			"%s; %d intents lost against %d", rec(budget), budget.IntentsLost, every.IntentsLost),
		report.Check("neither deadline propagation alone nor an origin that drops expired requests alone saves the chain: without the deadline the origin serves what is about to expire",
			prop.Intents > 0 && !prop.Recovered && drop.Intents > 0 && !drop.Recovered,
			map[string]any{"propagated_recovered": prop.Recovered, "drop_recovered": drop.Recovered}, "%s and %s", rec(prop), rec(drop)),
		report.Check(fmt.Sprintf("with both, the origin skips what cannot finish in time: the chain recovers within %d ticks and loses under 1%% of its intents", layersAtOnce),
			both.Recovered && *both.RecoveryTicks <= layersAtOnce && both.IntentsLost*100 < both.Intents,
			map[string]any{"recovered": both.Recovered, "recovery_ticks": both.RecoveryTicks, "intents_lost": both.IntentsLost, "intents": both.Intents},
			"%s; %d of %d intents lost", rec(both), both.IntentsLost, both.Intents))
	return cs
}

func layersFindings(js layersJSON) []string {
	var out []string
	var amps []string
	for _, r := range js.Outage[:3] {
		amps = append(amps, fmt.Sprintf("%.2f", r.Amplification))
	}
	out = append(out, fmt.Sprintf("Layers: in a total outage, 1, 2 and 3 tiers each retrying %d times sent %s attempts per intent to the origin (closed form 4, 16, 64).",
		layersRetries, strings.Join(amps, ", ")))
	for _, r := range js.Outage[3:] {
		out = append(out, fmt.Sprintf("Layers: %s sent %.2f attempts per intent to the origin in the outage (closed form %.2f); the tiers answered %s requests nobody waited for.",
			r.Config, r.Amplification, r.ClosedForm, report.Int(r.WastedWork)))
	}
	for _, r := range js.Dip {
		rec := "never recovered"
		if r.Recovered {
			rec = "recovered " + recoveryText(sim.Summary{Recovered: true, RecoveryTicks: r.RecoveryTicks})
		}
		out = append(out, fmt.Sprintf("Layers: through the dip, %s %s, lost %s of %s intents and peaked at %s attempts per tick at the origin.",
			r.Config, rec, report.Int(r.IntentsLost), report.Int(r.Intents), report.Int(r.PeakOffered)))
	}
	return out
}
