package verdict

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/experiment"
	"github.com/retrystorm/retrystorm/report/document"

	"github.com/retrystorm/retrystorm/internal/race"
	"github.com/retrystorm/retrystorm/report"
	"github.com/retrystorm/retrystorm/scenario"
)

func stormScenario(t testing.TB) *scenario.Scenario {
	t.Helper()
	sc, err := experiment.DefaultScenario("storm")
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// TestCheckStorm is the test: check flags the storm's naive fleet
// (3 retries, no budget) as collapsing in the storm's dip, and passes the
// guarded one (a budget and a breaker).
func TestCheckStorm(t *testing.T) {
	sc := stormScenario(t)
	in := []CheckInput{{Fleet: sc.Fleets[0], Origin: "storm.yaml"}, {Fleet: sc.Fleets[1], Origin: "storm.yaml"}}
	r, err := Check(context.Background(), in, CheckOptions{Base: sc}, experiment.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := r.Render(&out, report.Style{}); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", out.String())
	if r.RealLoad != 0.833 || r.RealDip != 0.333 {
		t.Errorf("realistic region from the storm: load %v, dip %v; want 0.833 and 0.333", r.RealLoad, r.RealDip)
	}
	if r.Level(0) != Unsafe {
		t.Errorf("naive (3 retries, no budget): %v, want UNSAFE", r.judge(0, 0).summary())
	}
	if r.Level(1) != Safe {
		t.Errorf("guarded (budget and breaker): %v, want SAFE", r.judge(1, 0).summary())
	}
	if report.AllHold(r.Claims) {
		t.Error("every claim holds though naive collapses")
	}
	if _, err := json.Marshal(r); err != nil {
		t.Fatal(err)
	}
	html, err := document.HTML(report.Page{Title: "check", Sections: []report.Section{r.Section()}})
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(html, []byte("<svg")); n < 2 {
		t.Errorf("the HTML report has %d maps, want one per fleet", n)
	}
}

// TestCheckAdviseAgree: check and advise run the user's fleet on the same
// cells with the same seeds and clients, and must see the same runs, cell
// by cell (issue 22: check said "safe" where advise showed the same cell
// never recovering). Check's default stops its collapsed runs once every
// intent left is lost: their recovery and intents lost must agree with
// advise's too.
func TestCheckAdviseAgree(t *testing.T) {
	sc := stormScenario(t)
	user := sc.Fleets[0]
	cr, err := Check(context.Background(), []CheckInput{{Fleet: user}}, CheckOptions{Base: sc, Seeds: 2, CountCollapsed: true}, experiment.Options{})
	if err != nil {
		t.Fatal(err)
	}
	fast, err := Check(context.Background(), []CheckInput{{Fleet: user}}, CheckOptions{Base: sc, Seeds: 2}, experiment.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ar, err := Advise(context.Background(), CheckInput{Fleet: user}, AdviseOptions{Base: sc, Seeds: 2, Space: []scenario.Fleet{}}, experiment.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cr.Fleets[0].Runs[0], ar.Candidates[0].Cells) {
		t.Fatalf("check and advise disagree on the user's cells")
	}
	stopped := 0
	for s, seed := range fast.Fleets[0].Runs[0] {
		for fi, row := range seed {
			for li, c := range row {
				a := ar.Candidates[0].Cells[s][fi][li]
				if c.EndedEarly != nil {
					stopped++
				}
				if c.Recovered != a.Recovered || c.RecoveryTicks != a.RecoveryTicks || c.Intents != a.Intents || c.IntentsLost != a.IntentsLost {
					t.Errorf("seed %d cell %d/%d: check recovered %v (+%d ticks), lost %d of %d; advise %v (+%d), %d of %d",
						s, fi, li, c.Recovered, c.RecoveryTicks, c.IntentsLost, c.Intents, a.Recovered, a.RecoveryTicks, a.IntentsLost, a.Intents)
				}
			}
		}
	}
	if stopped == 0 {
		t.Error("no collapsed run of check's stopped: the comparison above proves nothing of them")
	}
	ev := ar.evidence(1)
	if !reflect.DeepEqual(ev.Fleets[0].Cells, cr.Fleets[0].Cells) || !reflect.DeepEqual(ev.Fleets[0].Collapsing, cr.Fleets[0].Collapsing) {
		t.Errorf("advise's evidence map differs from check's map")
	}
	// The verdict is the worst seed's: a cell that collapses in one seed
	// of two counts.
	for fi, row := range cr.Fleets[0].Collapsing {
		for li, n := range row {
			if n > 0 && cr.Fleets[0].Cells[fi][li].Recovered {
				t.Errorf("cell %d/%d: %d seeds never recover but the map shows a recovery", fi, li, n)
			}
		}
	}
}

// TestCheckAmplification: an Istio route with attempts: 40 that retries
// only rejections recovers (nothing exercised its retries when the
// origin's queue was unbounded) but floods a bounded queue; check must not
// call it safe. The storm's guarded fleet stays safe.
func TestCheckAmplification(t *testing.T) {
	sc := stormScenario(t)
	forty := scenario.Fleet{Name: "attempts 40", Timeout: time.Second,
		Retry:  scenario.Retry{MaxRetries: 39, On: []string{scenario.RetryOnRejection}, Backoff: scenario.Backoff{Use: "exponential", Base: 25 * time.Millisecond, Cap: 250 * time.Millisecond, Multiplier: 2, Jitter: "full"}},
		Budget: scenario.Budget{Use: scenario.BudgetNone}, Breaker: scenario.Breaker{Use: scenario.BreakerNone}}
	r, err := Check(context.Background(), []CheckInput{{Fleet: forty}, {Fleet: sc.Fleets[1]}}, CheckOptions{Base: sc, Seeds: 1}, experiment.Options{})
	if err != nil {
		t.Fatal(err)
	}
	j := r.judge(0, 0)
	if r.Level(0) == Safe || !slices.ContainsFunc(j.Findings, func(f Finding) bool { return f.What == findInstant }) {
		t.Errorf("attempts 40 on rejections: %v, want AT RISK or worse for amplification", j.summary())
	}
	if r.Level(1) != Safe {
		t.Errorf("guarded: %v, want SAFE", r.judge(1, 0).summary())
	}
	if report.AllHold(r.Claims) {
		t.Error("every claim holds though attempts 40 floods the origin")
	}
}

// TestCheckBlame: a setting the user's file does not set (an AWS file's
// timeout, taken from the base scenario) is not blamed, and the verdict
// says where it came from.
func TestCheckBlame(t *testing.T) {
	sc := stormScenario(t)
	f := sc.Fleets[0]
	r, err := Check(context.Background(), []CheckInput{{Fleet: f}, {Fleet: f, FromBase: []string{"timeout"}}}, CheckOptions{Base: sc, Seeds: 1}, experiment.Options{})
	if err != nil {
		t.Fatal(err)
	}
	has := func(ls []string, s string) bool {
		return slices.ContainsFunc(ls, func(l string) bool { return strings.Contains(l, s) })
	}
	if !has(r.Fleets[0].Risks, "against a queue") {
		t.Errorf("the user's own timeout is not blamed: %q", r.Fleets[0].Risks)
	}
	if has(r.Fleets[1].Risks, "against a queue") {
		t.Errorf("a timeout from the base scenario is blamed: %q", r.Fleets[1].Risks)
	}
	if v := r.Verdicts()[1]; !has(v, "not from your file") {
		t.Errorf("the verdict does not say what came from the base:\n%s", strings.Join(v, "\n"))
	}
}

// TestCheckClients: check runs the realistic cells at a quarter and four
// times the client count and prints the verdict at each beside the count
// it rests on.
func TestCheckClients(t *testing.T) {
	sc := stormScenario(t)
	r, err := Check(context.Background(), []CheckInput{{Fleet: sc.Fleets[1]}}, CheckOptions{Base: sc, Seeds: 1, Clients: 8}, experiment.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r.Clients, []int{8, 2, 32}) || r.ClientsFrom != "--clients" {
		t.Fatalf("clients %v from %q, want [8 2 32] from --clients", r.Clients, r.ClientsFrom)
	}
	v := strings.Join(r.Verdicts()[0], "\n")
	for _, want := range []string{"at 8 clients (--clients)", "8, 2, 32 client instances"} {
		if !strings.Contains(v, want) {
			t.Errorf("the verdict does not say %q:\n%s", want, v)
		}
	}
}

// A calibrated origin states its service time's scale (a lognormal median,
// empirical buckets), which must agree with workers / capacity. check,
// advise and sweep move the capacity cell by cell: the service time moves
// with it, or every cell was refused ("contradicts origin.capacity"), as
// the calibrate helper found with an empirical fit.
func TestCellsScaleAStatedServiceTime(t *testing.T) {
	for _, st := range []scenario.ServiceTime{
		{Dist: scenario.DistEmpirical, Buckets: []scenario.Bucket{{Le: 50 * time.Millisecond, Fraction: 0.4}, {Le: 100 * time.Millisecond, Fraction: 0.8}, {Le: 500 * time.Millisecond, Fraction: 1}}},
		{Dist: scenario.DistLognormal, Sigma: 0.5, Median: time.Duration(float64(100*time.Millisecond) / math.Exp(0.125))},
		{Dist: scenario.DistExponential, Mean: 100 * time.Millisecond},
	} {
		base := stormScenario(t)
		base.Origin.Workers = int(base.Origin.Capacity / 10) // a mean of 100ms
		base.Origin.ServiceTime = st
		if err := base.Validate(); err != nil {
			t.Fatalf("%s: the base: %v", st.Dist, err)
		}
		for _, load := range []float64{0.3, 0.6, 0.9} {
			sc := envelopeCell(base, load, checkFault{Name: "dip", Kind: scenario.TriggerCapacity, Dip: 0.5, For: 10}, 20*time.Second)
			sc.Fleets = base.Fleets[:1]
			if err := sc.Validate(); err != nil {
				t.Errorf("%s at load %g: %v", st.Dist, load, err)
			}
		}
	}
}

// TestCheckModelKeepsTheVerdict: check --model lets the analytic model
// answer cells outside the realistic region that it places far from the
// boundary, and nothing else: every realistic run, at every client
// count, is the simulator's and the same as without --model, so the
// verdicts and claims are the same; every cell the model answered has
// the simulator's recovered/never verdict; and the model answered some
// (issue 29).
func TestCheckModelKeepsTheVerdict(t *testing.T) {
	if race.Enabled {
		t.Skip("simulator runs compared: numbers, not concurrency; the plain pass runs it")
	}
	sc := stormScenario(t)
	in := []CheckInput{{Fleet: sc.Fleets[0]}, {Fleet: sc.Fleets[1]}}
	sim, err := Check(context.Background(), in, CheckOptions{Base: sc, Seeds: 2}, experiment.Options{})
	if err != nil {
		t.Fatal(err)
	}
	mod, err := Check(context.Background(), in, CheckOptions{Base: sc, Seeds: 2, Model: true}, experiment.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(sim.Claims, mod.Claims) {
		t.Errorf("claims differ:\n%v\n%v", sim.Claims, mod.Claims)
	}
	answered := 0
	for i := range sim.Fleets {
		for k := range sim.Clients {
			if a, b := sim.judge(i, k), mod.judge(i, k); !reflect.DeepEqual(a, b) {
				t.Errorf("%s at %d clients: %v with --model, %v without", sim.Fleets[i].Name, sim.Clients[k], b, a)
			}
		}
		for k, seeds := range mod.Fleets[i].Runs {
			for s, cells := range seeds {
				for fi, row := range cells {
					for li, c := range row {
						want := sim.Fleets[i].Runs[k][s][fi][li]
						switch {
						case c.Source != sourceModel:
							if !reflect.DeepEqual(c, want) {
								t.Errorf("%s: run %d/%d/%d/%d differs without the model", sim.Fleets[i].Name, k, s, fi, li)
							}
						case mod.realistic(fi, li):
							t.Errorf("%s: realistic cell %d/%d answered by the model", sim.Fleets[i].Name, fi, li)
						default:
							answered++
							if c.Recovered != sim.Fleets[i].Cells[fi][li].Recovered {
								t.Errorf("%s: cell %d/%d: the model says recovered %v, the simulator's worst seed %v", sim.Fleets[i].Name, fi, li, c.Recovered, !c.Recovered)
							}
						}
					}
				}
			}
		}
	}
	if answered == 0 {
		t.Error("the model answered no cell")
	}
	t.Logf("%d runs answered by the model", answered)
}

// TestCheckOneBadReplica: with a fleet that ejects and an origin of three
// replicas, check adds the faults of one bad replica and judges them at
// the realistic loads: at half load ejecting saves the retries, at 70% it
// overloads the two replicas left, and only the ejecting fleet collapses.
func TestCheckOneBadReplica(t *testing.T) {
	if testing.Short() {
		// Two fleets over 40 cells: a second in the plain pass, half a
		// minute under the race detector, which CI runs with -short.
		t.Skip("a full check: without -short")
	}
	base, retries, ejects := oneBadReplicaFleets(t)
	r, err := Check(context.Background(), []CheckInput{{Fleet: retries}, {Fleet: ejects}}, CheckOptions{Base: base, Seeds: 1}, experiment.Options{})
	if err != nil {
		t.Fatal(err)
	}
	errs := slices.IndexFunc(r.Faults, func(f checkFault) bool { return f.Replica != nil && f.Kind == scenario.TriggerErrors })
	if errs < 0 {
		t.Fatalf("faults %+v: no fault of one replica", r.Faults)
	}
	li := slices.Index(r.Loads, r.RealLoad)
	if !r.realistic(errs, li) {
		t.Errorf("one erroring replica at the realistic load is not a realistic cell")
	}
	// At half load the two healthy replicas carry it all: ejecting the
	// bad one saves the retries.
	a, e := r.Fleets[0].Cells[errs][0], r.Fleets[1].Cells[errs][0]
	if !a.Ran || !e.Ran || e.Attempts >= a.Attempts {
		t.Errorf("ejecting sent %d attempts, not ejecting %d: want fewer", e.Attempts, a.Attempts)
	}
	// At 70% they cannot: ejecting one of three puts 105% of their
	// capacity on the other two, which is what check must see.
	l7 := slices.Index(r.Loads, 0.7)
	if a, e := r.Fleets[0].Cells[errs][l7], r.Fleets[1].Cells[errs][l7]; !a.Recovered || e.Recovered {
		t.Errorf("at 70%% load: without ejection %+v, with %+v; want only the ejecting fleet to collapse", a, e)
	}
	for _, n := range r.Notes {
		if !strings.Contains(n, "docs/early-exit.md") { // how many runs stopped early: said, and harmless
			t.Errorf("note %q", n)
		}
	}
	if v := strings.Join(r.Verdicts()[1], "\n"); !strings.Contains(v, "and one bad replica") {
		t.Errorf("the verdict does not name the faults of one replica in its region:\n%s", v)
	}
}

// oneBadReplicaFleets returns the storm's scenario with three origin
// replicas, its naive fleet (3 retries, no budget), and the same with
// Envoy's outlier detection allowed to eject half the replicas.
func oneBadReplicaFleets(t *testing.T) (base *scenario.Scenario, retries, ejects scenario.Fleet) {
	t.Helper()
	base = stormScenario(t)
	base.Origin.Replicas = 3
	retries = base.Fleets[0]
	ejects = retries
	ejects.Name = "ejects"
	ejects.OutlierDetection = ejectHalf(t)
	return base, retries, ejects
}

// ejectHalf is Envoy's outlier detection with max_ejection_percent 50, as
// a scenario file gives it (its defaults filled in).
func ejectHalf(t *testing.T) scenario.OutlierDetection {
	t.Helper()
	od, err := scenario.Parse("od.yaml", []byte("duration: 10s\ntraffic: {rate: 10}\norigin: {model: capacity, capacity: 100, replicas: 3}\n"+
		"fleets:\n  - {name: od, timeout: 1s, budget: {use: none}, outlier_detection: {use: envoy, settings: {max_ejection_percent: 50}}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	return od.Fleets[0].OutlierDetection
}

// TestCheckReplicaFaultsWhen: check adds the faults of one replica when a
// fleet, or a tier it calls through, balances or ejects and the origin has
// replicas; says why in a note when a fleet balances over one replica;
// and runs a stack's cells with every balancer and detector as configured
// (before, cellThrough dropped the fleet's without a word). No simulation.
func TestCheckReplicaFaultsWhen(t *testing.T) {
	base, retries, ejects := oneBadReplicaFleets(t)
	edge := func(od scenario.OutlierDetection) []scenario.Tier {
		return []scenario.Tier{{Name: "edge", Server: scenario.Origin{Model: scenario.ModelCapacity, Capacity: 1e4, Latency: time.Millisecond, Replicas: 2},
			Client: scenario.Client{Timeout: time.Second, Retry: base.Fleets[0].Retry, Budget: scenario.Budget{Use: scenario.BudgetNone}, OutlierDetection: od}}}
	}
	for _, c := range []struct {
		name   string
		in     []CheckInput
		base   func(*scenario.Scenario)
		judges bool
		notes  int
	}{
		{"no fleet balances", []CheckInput{{Fleet: retries}}, nil, false, 0},
		{"one replica", []CheckInput{{Fleet: ejects}}, func(sc *scenario.Scenario) { sc.Origin.Replicas = 1 }, false, 1},
		{"through tiers, the fleet ejects", []CheckInput{{Fleet: ejects, Tiers: edge(scenario.OutlierDetection{})}}, nil, true, 0},
		{"through tiers, a tier ejects", []CheckInput{{Fleet: retries, Tiers: edge(ejects.OutlierDetection)}}, nil, true, 0},
		{"through the base's tiers, a tier ejects", []CheckInput{{Fleet: retries}}, func(sc *scenario.Scenario) { sc.Tiers = edge(ejects.OutlierDetection) }, true, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := base.Clone()
			if c.base != nil {
				c.base(b)
			}
			if judgesReplicas(b, c.in) != c.judges {
				t.Errorf("adds the faults of one replica: %v, want %v", !c.judges, c.judges)
			}
			if n := balancingNotes(b, c.in); len(n) != c.notes {
				t.Errorf("notes %q, want %d", n, c.notes)
			}
		})
	}

	// Through tiers, check runs the fleet's balancer and detector and the
	// tiers' as configured: nothing is stripped.
	env, err := newEnvelope(base, 0, 0, 1, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := env.cellThrough(ejects, edge(ejects.OutlierDetection), 0, 0, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !sc.Fleets[0].OutlierDetection.Detects() || !sc.Tiers[0].Client.OutlierDetection.Detects() {
		t.Errorf("a stack's cell dropped outlier detection: fleet %+v, tier %+v", sc.Fleets[0].OutlierDetection, sc.Tiers[0].Client.OutlierDetection)
	}
}

// TestCheckStackEjects: through a tier, the tier's outlier detection is
// what meets one bad origin replica: at half load, the stack whose edge
// ejects sends the origin fewer attempts in that fault than the same
// stack without it.
func TestCheckStackEjects(t *testing.T) {
	if testing.Short() {
		t.Skip("two stacks over 40 cells: without -short (45 s under the race detector)")
	}
	base, _, _ := oneBadReplicaFleets(t)
	edge := func(od scenario.OutlierDetection) []scenario.Tier {
		return []scenario.Tier{{Name: "edge", Server: scenario.Origin{Model: scenario.ModelCapacity, Capacity: 1e4, Latency: time.Millisecond, Replicas: 2},
			Client: scenario.Client{Timeout: time.Second, Retry: base.Fleets[0].Retry, Budget: scenario.Budget{Use: scenario.BudgetNone}, OutlierDetection: od}}}
	}
	f := base.Fleets[1]
	r, err := Check(context.Background(), []CheckInput{{Fleet: f, Tiers: edge(scenario.OutlierDetection{})}, {Fleet: f, Tiers: edge(ejectHalf(t))}},
		CheckOptions{Base: base, Seeds: 1}, experiment.Options{})
	if err != nil {
		t.Fatal(err)
	}
	errs := slices.IndexFunc(r.Faults, func(f checkFault) bool { return f.Replica != nil && f.Kind == scenario.TriggerErrors })
	if errs < 0 {
		t.Fatalf("faults %+v: no fault of one replica", r.Faults)
	}
	a, e := r.Fleets[0].Cells[errs][0], r.Fleets[1].Cells[errs][0]
	if !a.Ran || !e.Ran || e.Attempts >= a.Attempts {
		t.Errorf("at the origin, the ejecting edge sent %d attempts, the other %d: want fewer", e.Attempts, a.Attempts)
	}
}

// TestCheckNeverHealthy: a fleet whose timeout (50ms) is shorter than the
// origin's service time (the storm's queue: 12 workers at 120/s, 100ms)
// fails at every load before any fault. It used to pass every cell: it
// "recovered" to the baseline it failed at. It is unsafe now, and a note
// says why at each load; the storm's guarded fleet gets no such note.
func TestCheckNeverHealthy(t *testing.T) {
	sc := stormScenario(t)
	short := sc.Fleets[1]
	short.Name, short.Timeout = "short timeout", 50*time.Millisecond
	r, err := Check(context.Background(), []CheckInput{{Fleet: short}, {Fleet: sc.Fleets[1]}}, CheckOptions{Base: sc, Seeds: 1}, experiment.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Level(0) != Unsafe {
		t.Errorf("a fleet that never works: %v, want UNSAFE", r.judge(0, 0).summary())
	}
	if r.Level(1) != Safe {
		t.Errorf("guarded: %v, want SAFE", r.judge(1, 0).summary())
	}
	var notes []string
	for _, n := range r.Notes {
		if strings.Contains(n, "never healthy") {
			notes = append(notes, n)
		}
	}
	if len(notes) != 1 || !strings.Contains(notes[0], `"short timeout"`) {
		t.Fatalf("never-healthy notes %q: want one, for the short timeout", notes)
	}
	for _, l := range r.Loads {
		if !strings.Contains(notes[0], report.Percent(l, 0)) {
			t.Errorf("the note %q does not name load %s", notes[0], report.Percent(l, 0))
		}
	}
}
