package experiment

import (
	"fmt"
	"math"
	"time"

	"github.com/retrystorm/retrystorm/report"
	"github.com/retrystorm/retrystorm/scenario"
	"github.com/retrystorm/retrystorm/sim"
)

// toleranceRow is how closely the lab's measurements must agree with the
// simulator's for the same scenario: a difference is within tolerance when
// it is at most Rel of the simulator's value or Abs, whichever is larger.
// docs/lab.md explains where the figures come from.
type toleranceRow struct {
	Rel float64 `json:"rel"`
	Abs float64 `json:"abs"`
}

// Allows reports whether lab agrees with sim, and the difference allowed.
func (t toleranceRow) Allows(sim, lab float64) (bool, float64) {
	allowed := math.Max(t.Rel*math.Abs(sim), t.Abs)
	return math.Abs(lab-sim) <= allowed, allowed
}

// LabTolerances are the tolerances the lab is held to: offered load as the
// mean per tick over a phase of the run, tighter in the steady states
// before and after the trigger than during it (the transition, where a tick
// more or less before a queue fills or a breaker opens moves the mean), and
// retries/requests over the run.
var LabTolerances = struct {
	Offered           toleranceRow `json:"offered"`
	OfferedDuring     toleranceRow `json:"offered_during"`
	RetriesPerRequest toleranceRow `json:"retries_per_request"`
}{
	Offered:           toleranceRow{Rel: 0.10, Abs: 5},
	OfferedDuring:     toleranceRow{Rel: 0.20, Abs: 5},
	RetriesPerRequest: toleranceRow{Rel: 0.15, Abs: 0.05},
}

// agreementRow is one comparison of the lab with the simulator.
type agreementRow struct {
	Fleet  string  `json:"fleet"`
	Metric string  `json:"metric"`
	Sim    float64 `json:"sim"`
	Lab    float64 `json:"lab"`
	// Allowed is the largest difference that agrees.
	Allowed float64 `json:"allowed"`
	Agrees  bool    `json:"agrees"`
}

// LabOptions describe a lab run to LabOutcome.
type LabOptions struct {
	// WallTick is the wall-clock length of one tick in the lab.
	WallTick time.Duration
	// Storm checks the storm experiment's own claims on the lab's numbers
	// too (for the default scenario, whose fleets are the storm's).
	Storm bool
	// CounterfactualName is the name of the counterfactual's fleet (the
	// naive fleet against a shedding origin) in both results, or "" when
	// it was not run.
	CounterfactualName string
	// Target, when not empty, says the lab played against a real service,
	// and which: the tolerances of offered load and retries/requests are
	// then reported, not claimed (the scenario's origin is a model of the
	// service, not the service); who recovers still is.
	Target string
	// Info is what only the lab measured, for the JSON.
	Info any
	// Notes are added to the section.
	Notes []string
	// Protocol is what the lab's servers spoke: "" or "http", or "grpc".
	Protocol string
}

// labWire says what the lab's servers spoke, and what guarded the
// gateway's calls, in the report's words.
func labWire(protocol string) (name, gateway string) {
	if protocol == "grpc" {
		return "gRPC", "a gateway whose client interceptors are resilgrpc's, with one Guard per client"
	}
	return "HTTP", "a gateway whose transport is resilhttp with one Guard per client"
}

// labJSON is the JSON of `retrystorm lab`: the lab's run as DESIGN.md
// specifies a run, the simulator's beside it, and how they compare.
type labJSON struct {
	*sim.Result
	Simulator *sim.Result    `json:"simulator"`
	Agreement []agreementRow `json:"agreement"`
	Tolerance any            `json:"tolerance"`
	Lab       any            `json:"lab,omitempty"`
	Claims    []report.Claim `json:"claims"`
	Notes     []string       `json:"notes,omitempty"`
}

// LabOutcome sets the lab's run of sc beside the simulator's: both tables,
// the charts in pairs on the same scale, how they agree, and the claims
// (they agree on who recovers; offered load and retries/requests agree
// within LabTolerances; with opts.Storm, the storm's claims on the lab's
// numbers). Fleets are matched by name.
func LabOutcome(sc *scenario.Scenario, simRes, labRes *sim.Result, opts LabOptions) *Outcome {
	agreements, claims := compareLab(sc, simRes, labRes)
	wire, gateway := labWire(opts.Protocol)
	intro := fmt.Sprintf("%s: %s over %d clients against a %s origin; %s. The lab ran it with real servers and sockets on 127.0.0.1: an origin with finite capacity, %s, and an open-loop load generator.",
		sc.Name, describeRate(sc), sc.Traffic.Clients, sc.Origin.Model, describeTriggers(sc), gateway)
	var notes []string
	if opts.Target != "" {
		intro = fmt.Sprintf("%s: %s over %d clients; %s. The lab ran it against %s, with %s and an open-loop load generator; the simulator ran the scenario's %s origin, the model of that service.",
			sc.Name, describeRate(sc), sc.Traffic.Clients, describeTriggers(sc), opts.Target, gateway, sc.Origin.Model)
		// The service is not the model: how close the numbers come is
		// for reading, not a claim; who recovers is.
		for _, c := range claims[len(claims)-2:] {
			notes = append(notes, fmt.Sprintf("Against a real service, not claimed: %s (%s).", c.Text, c.Detail))
		}
		claims = claims[:len(claims)-2]
	}
	if opts.Storm && len(labRes.Fleets) >= 2 {
		claims = append(stormClaims(sc, labRes, opts.CounterfactualName), claims...)
	}
	wall := fmt.Sprintf("%g ms", float64(opts.WallTick)/float64(time.Millisecond))
	sec := report.Section{
		ID:    "lab",
		Title: "Lab: the same scenario over real " + wire + " on loopback",
		Intro: []string{
			intro,
			fmt.Sprintf("Time is scaled: one tick of %s of scenario time took %s of wall time, every duration shrunk and every rate grown by the same factor, so counts per tick are the scenario's. Everything below is in scenario time.", sc.Tick, wall),
		},
		Tables: append(append(append([]report.Table{
			titled(stormTable(labRes), "lab (real "+wire+", one tick = "+wall+")"),
			titled(stormTable(simRes), "simulator"),
		}, prefixed(chainTables(labRes), "lab: ")...), prefixed(chainTables(simRes), "simulator: ")...),
			append(append(prefixed(replicaTables(labRes), "lab: "), prefixed(replicaTables(simRes), "simulator: ")...),
				agreementTable(agreements))...),
		Claims: claims,
		Charts: pairCharts(sc, simRes, labRes, opts.CounterfactualName),
		Notes: append([]string{
			fmt.Sprintf("Offered load is the mean per tick before, during and after the trigger, measured where it arrives (in a chain, at each layer); it agrees when within %.0f%% of the simulator's (%.0f%% during the trigger) or %g attempts per tick. Retries/requests is over the run; it agrees within %.0f%% or %g. Why these bounds: docs/lab.md.",
				100*LabTolerances.Offered.Rel, 100*LabTolerances.OfferedDuring.Rel, LabTolerances.Offered.Abs, 100*LabTolerances.RetriesPerRequest.Rel, LabTolerances.RetriesPerRequest.Abs),
		}, append(notes, opts.Notes...)...),
	}
	return &Outcome{
		Name:    "lab",
		Claims:  claims,
		Section: sec,
		JSON: labJSON{
			Result: labRes, Simulator: simRes, Agreement: agreements, Tolerance: LabTolerances,
			Lab: opts.Info, Claims: claims, Notes: sec.Notes,
		},
	}
}

// prefixed puts p before each table's title.
func prefixed(ts []report.Table, p string) []report.Table {
	for i := range ts {
		ts[i].Title = p + ts[i].Title
	}
	return ts
}

func titled(t report.Table, title string) report.Table {
	t.Title = title
	return t
}

// phases splits a run's ticks at the trigger: before, during, after.
func phases(res *sim.Result, n int) [3][2]int {
	if res.Trigger == nil {
		return [3][2]int{{0, n}, {n, n}, {n, n}}
	}
	start := min(int(res.Trigger.Start/res.TickSeconds+1e-9), n)
	end := min(triggerEndTick(res), n)
	return [3][2]int{{0, start}, {start, end}, {end, n}}
}

var phaseNames = [3]string{"before", "during", "after"}

// compareLab compares every fleet the two runs share.
func compareLab(sc *scenario.Scenario, simRes, labRes *sim.Result) ([]agreementRow, []report.Claim) {
	var (
		out                      []agreementRow
		claims                   []report.Claim
		offeredOK, rprOK         = true, true
		worstOffered, worstRetry float64
	)
	for _, lf := range labRes.Fleets {
		sf, ok := fleetNamed(simRes, lf.Name)
		if !ok {
			continue
		}
		s, l := sf.Summary, lf.Summary
		what := "never recovers"
		if s.Recovered {
			what = "recovers"
		}
		if !s.Recovered && sc.Origin.Model == scenario.ModelQueue {
			what = "collapses and never recovers"
		}
		claims = append(claims, report.Check(
			fmt.Sprintf("%s %s in both the simulator and the lab", lf.Name, what),
			s.Recovered == l.Recovered,
			map[string]any{"sim": map[string]any{"recovered": s.Recovered, "recovery_ticks": s.RecoveryTicks}, "lab": map[string]any{"recovered": l.Recovered, "recovery_ticks": l.RecoveryTicks}},
			"simulator %s, lab %s", recoveryText(s), recoveryText(l)))

		n := min(len(sf.Series.Offered), len(lf.Series.Offered))
		for i, p := range phases(simRes, n) {
			if p[1] <= p[0] {
				continue
			}
			tol := LabTolerances.Offered
			if i == 1 {
				tol = LabTolerances.OfferedDuring
			}
			a := agree(lf.Name, "offered per tick, "+phaseNames[i], mean(sf.Series.Offered, p[0], p[1]), mean(lf.Series.Offered, p[0], p[1]), tol)
			offeredOK = offeredOK && a.Agrees
			worstOffered = max(worstOffered, relDiff(a))
			out = append(out, a)
		}
		a := agree(lf.Name, "retries/requests", s.RetriesPerRequest, l.RetriesPerRequest, LabTolerances.RetriesPerRequest)
		rprOK = rprOK && a.Agrees
		worstRetry = max(worstRetry, math.Abs(a.Lab-a.Sim))
		out = append(out, a)
		// A chain: every layer past the first (the fleet's own, above),
		// by its offered load and its callers' retries/requests.
		for i := 1; i < min(len(sf.Tiers), len(lf.Tiers)); i++ {
			st, lt := sf.Tiers[i], lf.Tiers[i]
			name := lf.Name + " → " + lt.Name
			for j, p := range phases(simRes, n) {
				if p[1] <= p[0] {
					continue
				}
				tol := LabTolerances.Offered
				if j == 1 {
					tol = LabTolerances.OfferedDuring
				}
				a := agree(name, "offered per tick, "+phaseNames[j], mean(st.Series.Offered, p[0], p[1]), mean(lt.Series.Offered, p[0], p[1]), tol)
				offeredOK = offeredOK && a.Agrees
				worstOffered = max(worstOffered, relDiff(a))
				out = append(out, a)
			}
			a := agree(name, "retries/requests", st.Summary.RetriesPerRequest, lt.Summary.RetriesPerRequest, LabTolerances.RetriesPerRequest)
			rprOK = rprOK && a.Agrees
			worstRetry = max(worstRetry, math.Abs(a.Lab-a.Sim))
			out = append(out, a)
		}
	}
	claims = append(claims,
		report.Check(fmt.Sprintf("offered load agrees within %.0f%% before and after the trigger, %.0f%% during it (or %g per tick)",
			100*LabTolerances.Offered.Rel, 100*LabTolerances.OfferedDuring.Rel, LabTolerances.Offered.Abs),
			offeredOK, map[string]any{"worst_relative_difference": round3(worstOffered)},
			"the largest difference is %.1f%%", 100*worstOffered),
		report.Check(fmt.Sprintf("retries/requests agrees within %.0f%% (or %g)", 100*LabTolerances.RetriesPerRequest.Rel, LabTolerances.RetriesPerRequest.Abs),
			rprOK, map[string]any{"worst_difference": round3(worstRetry)},
			"the largest difference is %.3f", worstRetry),
	)
	return out, claims
}

func agree(fleet, metric string, s, l float64, t toleranceRow) agreementRow {
	ok, allowed := t.Allows(s, l)
	return agreementRow{Fleet: fleet, Metric: metric, Sim: round3(s), Lab: round3(l), Allowed: round3(allowed), Agrees: ok}
}

func relDiff(a agreementRow) float64 {
	if a.Sim == 0 {
		return 0
	}
	return math.Abs(a.Lab-a.Sim) / math.Abs(a.Sim)
}

func fleetNamed(res *sim.Result, name string) (sim.FleetResult, bool) {
	for _, f := range res.Fleets {
		if f.Name == name {
			return f, true
		}
	}
	return sim.FleetResult{}, false
}

func agreementTable(as []agreementRow) report.Table {
	t := report.Table{
		Title: "lab against simulator",
		Columns: []report.Column{
			{Name: "fleet"}, {Name: "measure"}, {Name: "sim", Align: report.Right},
			{Name: "lab", Align: report.Right}, {Name: "agrees", Align: report.Right},
		},
		Emphasis: map[[2]int]bool{},
	}
	for i, a := range as {
		digits := 1
		if a.Metric == "retries/requests" {
			digits = 3
		}
		verdict := "yes"
		if !a.Agrees {
			verdict = "NO"
			t.Emphasis[[2]int{i, 4}] = true
		}
		t.Rows = append(t.Rows, []string{a.Fleet, a.Metric, report.Float(a.Sim, digits), report.Float(a.Lab, digits), verdict})
	}
	return t
}

// pairCharts draws each standard chart twice, simulator then lab, on the
// same scale.
func pairCharts(sc *scenario.Scenario, simRes, labRes *sim.Result, cfName string) []report.Chart {
	dashed := map[string]bool{cfName: true}
	if len(simRes.Fleets) > 0 {
		dashed[simRes.Fleets[0].Name] = true
	}
	sc1, lc := runCharts(simRes, sc, dashed), runCharts(labRes, sc, dashed)
	var out []report.Chart
	for i := range min(len(sc1), len(lc)) {
		s, l := sc1[i], lc[i]
		if s.YMax == 0 {
			top := 0.0
			for _, c := range []report.Chart{s, l} {
				for _, ln := range c.Lines {
					top = max(top, maxOf(ln.Y))
				}
			}
			s.YMax, l.YMax = top, top
		}
		s.Title += ": simulator"
		l.Title += ": lab"
		out = append(out, s, l)
	}
	return out
}
