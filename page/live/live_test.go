package live

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/retrystorm/retrystorm/experiment"
	"github.com/retrystorm/retrystorm/scenario"
)

func panelsByName(t *testing.T) map[string]Panel {
	t.Helper()
	ps, err := Panels()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]Panel{}
	for _, p := range ps {
		out[p.Name] = p
	}
	return out
}

func TestPanels(t *testing.T) {
	ps, err := Panels()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range ps {
		names = append(names, p.Name)
	}
	var want []string
	for _, e := range experiment.All() {
		want = append(want, e.Name)
	}
	if !slices.Equal(names, want) {
		t.Fatalf("panels %v, want every experiment in order: %v", names, want)
	}
	keys := func(p Panel) []string {
		var out []string
		for _, k := range p.Knobs {
			out = append(out, k.Key)
		}
		return out
	}
	by := panelsByName(t)
	scenarioKnobs := []string{"rate", "model", "capacity", "dip", "dip_for", "drop_expired", "max_retries", "jitter", "budget_ratio", "budget_floor", "breaker_threshold"}
	for name, want := range map[string][]string{
		"storm":   scenarioKnobs,
		"fleets":  scenarioKnobs,
		"jitter":  nil,
		"breaker": nil,
		"outage":  {"max_retries", "budget_ratio", "budget_floor"},
		"hedge":   {"rate", "budget_ratio"},
		"layers":  {"rate", "capacity", "dip", "dip_for"},
		"sweep":   {EngineKnob, GridKnob, "dip_for", "max_retries", "jitter", "budget_ratio", "budget_floor", "breaker_threshold"},
		"shed":    {"rate", "capacity", "dip", "dip_for", "max_retries", "budget_ratio", "breaker_threshold", "limit", "throttle_k"},
	} {
		if got := keys(by[name]); !slices.Equal(got, want) {
			t.Errorf("%s's knobs are %v, want %v", name, got, want)
		}
	}
	for _, p := range ps {
		if (p.Config != "") != (p.Name != "jitter") {
			t.Errorf("%s: config %q", p.Name, p.Config)
		}
		for _, k := range p.Knobs {
			switch k.Kind {
			case "range":
				v, err := strconv.ParseFloat(k.Value, 64)
				if err != nil || v < k.Min || v > k.Max || k.Step <= 0 {
					t.Errorf("%s.%s: value %q outside [%g, %g] step %g", p.Name, k.Key, k.Value, k.Min, k.Max, k.Step)
				}
			case "select":
				if !slices.Contains(k.Options, k.Value) {
					t.Errorf("%s.%s: value %q not among %v", p.Name, k.Key, k.Value, k.Options)
				}
			case "check":
				if k.Value != "true" && k.Value != "false" {
					t.Errorf("%s.%s: value %q", p.Name, k.Key, k.Value)
				}
			default:
				t.Errorf("%s.%s: kind %q", p.Name, k.Key, k.Kind)
			}
			for _, i := range append(slices.Clone(k.Changes), k.Controls...) {
				if i < 0 || i >= len(p.Fleets) {
					t.Errorf("%s.%s: fleet %d of %d", p.Name, k.Key, i, len(p.Fleets))
				}
			}
		}
	}
}

// TestEachPolicyBesideItsControl: a knob of a policy changes the fleets
// that have it and leaves their control alone.
func TestEachPolicyBesideItsControl(t *testing.T) {
	by := panelsByName(t)
	knob := func(panel, key string) Knob {
		for _, k := range by[panel].Knobs {
			if k.Key == key {
				return k
			}
		}
		t.Fatalf("%s has no knob %s", panel, key)
		return Knob{}
	}
	names := func(p string, idx []int) []string {
		var out []string
		for _, i := range idx {
			out = append(out, by[p].Fleets[i])
		}
		return out
	}
	for _, c := range []struct {
		panel, key        string
		changes, controls []string
	}{
		{"storm", "budget_ratio", []string{"guarded"}, []string{"naive"}},
		{"storm", "jitter", []string{"guarded"}, []string{"naive"}},
		{"fleets", "jitter", []string{"no budget", "budget 0.10", "budget + breaker"}, []string{"no budget, no jitter"}},
		{"fleets", "breaker_threshold", []string{"budget + breaker"}, []string{"no budget", "no budget, no jitter", "budget 0.10"}},
		{"outage", "budget_floor", []string{"token bucket"}, []string{"no budget", "count-only", "grpc", "aws"}},
		{"hedge", "budget_ratio", []string{"hedge + budget 0.30"}, []string{"no hedge", "hedge, no budget"}},
	} {
		k := knob(c.panel, c.key)
		if got := names(c.panel, k.Changes); !slices.Equal(got, c.changes) {
			t.Errorf("%s.%s changes %q, want %q", c.panel, c.key, got, c.changes)
		}
		if got := names(c.panel, k.Controls); !slices.Equal(got, c.controls) {
			t.Errorf("%s.%s leaves %q as controls, want %q", c.panel, c.key, got, c.controls)
		}
		if len(k.Controls) > 0 && k.Control == "" {
			t.Errorf("%s.%s does not say what its controls have", c.panel, c.key)
		}
	}
}

// TestDefaults: with no knob moved, a panel runs the experiment's own
// default scenario.
func TestDefaults(t *testing.T) {
	for _, e := range experiment.All() {
		sc, _, err := Scenario(e.Name, Request{})
		if err != nil {
			t.Fatalf("%s: %v", e.Name, err)
		}
		if e.Config == nil {
			if sc != nil {
				t.Errorf("%s runs no scenario file, got one", e.Name)
			}
			continue
		}
		def, err := scenario.Parse(e.Name+".yaml", e.Config)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(scenario.Marshal(sc), scenario.Marshal(def)) {
			t.Errorf("%s: the page's default differs from the experiment's", e.Name)
		}
	}
}

// TestEveryKnobPosition moves each knob to each end of its range and to
// every option: the scenario stays valid, and the YAML the page shows
// reads back as the same scenario.
func TestEveryKnobPosition(t *testing.T) {
	ps, err := Panels()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		for _, k := range p.Knobs {
			if k.Key == GridKnob {
				continue
			}
			var values []string
			switch k.Kind {
			case "range":
				values = []string{num(k.Min), num(k.Max)}
			case "select":
				values = k.Options
			case "check":
				values = []string{"true", "false"}
			}
			for _, v := range values {
				req := Request{Values: map[string]string{k.Key: v}}
				sc, _, err := Scenario(p.Name, req)
				if err != nil {
					t.Errorf("%s: %s = %s: %v", p.Name, k.Key, v, err)
					continue
				}
				yaml := scenario.Marshal(sc)
				back, err := scenario.Parse(p.Config, yaml)
				if err != nil {
					t.Errorf("%s: %s = %s: the YAML does not parse: %v\n%s", p.Name, k.Key, v, err, yaml)
					continue
				}
				if !bytes.Equal(scenario.Marshal(back), yaml) {
					t.Errorf("%s: %s = %s: the YAML does not read back as the same scenario", p.Name, k.Key, v)
				}
			}
		}
	}
}

func TestKnobEffects(t *testing.T) {
	seed := uint64(7)
	sc, inactive, err := Scenario("fleets", Request{Seed: &seed, Values: map[string]string{
		"rate": "105", "capacity": "150", "dip": "30", "dip_for": "12", "max_retries": "5",
		"jitter": "decorrelated", "budget_ratio": "0.25", "budget_floor": "3", "breaker_threshold": "8",
	}})
	if err != nil {
		t.Fatal(err)
	}
	if sc.Seed != 7 || sc.Traffic.Rate != 105 || sc.Origin.Capacity != 150 || sc.Triggers[0].Capacity != 30 || sc.Triggers[0].For.Seconds() != 12 {
		t.Errorf("seed %d, rate %g, capacity %g, dip %g for %s", sc.Seed, sc.Traffic.Rate, sc.Origin.Capacity, sc.Triggers[0].Capacity, sc.Triggers[0].For)
	}
	if !slices.Equal(inactive, []string{"drop_expired"}) {
		t.Errorf("inactive %v: drop_expired does nothing to a capacity origin", inactive)
	}
	f := sc.Fleets
	if f[2].Name != "budget 0.25" || f[2].Budget.Ratio() != 0.25 || f[2].Budget.TokenBucket.MinTokens != 3 {
		t.Errorf("the budget fleet is %q, ratio %g, floor %g", f[2].Name, f[2].Budget.Ratio(), f[2].Budget.TokenBucket.MinTokens)
	}
	if f[1].Retry.Backoff.Jitter != "none" || f[0].Retry.Backoff.Jitter != "decorrelated" {
		t.Errorf("jitter: control %q, first %q", f[1].Retry.Backoff.Jitter, f[0].Retry.Backoff.Jitter)
	}
	if f[3].Breaker.Threshold != 8 || f[0].Retry.MaxRetries != 5 || f[0].Budget.Use != scenario.BudgetNone {
		t.Errorf("threshold %d, retries %d, control budget %q", f[3].Breaker.Threshold, f[0].Retry.MaxRetries, f[0].Budget.Use)
	}

	// A queue origin for the fleets, with the server fix.
	sc, inactive, err = Scenario("fleets", Request{Values: map[string]string{"model": "queue", "drop_expired": "true"}})
	if err != nil {
		t.Fatal(err)
	}
	if sc.Origin.Model != scenario.ModelQueue || !sc.Origin.DropExpired || sc.Origin.Workers < 1 || len(inactive) != 0 {
		t.Errorf("origin %+v, inactive %v", sc.Origin, inactive)
	}
	// And a capacity origin for the storm.
	sc, inactive, err = Scenario("storm", Request{Values: map[string]string{"model": "capacity", "drop_expired": "true"}})
	if err != nil {
		t.Fatal(err)
	}
	if sc.Origin.Model != scenario.ModelCapacity || sc.Origin.DropExpired || !slices.Equal(inactive, []string{"drop_expired"}) {
		t.Errorf("origin %+v, inactive %v", sc.Origin, inactive)
	}
}

func TestBadRequests(t *testing.T) {
	for _, c := range []struct {
		panel  string
		values map[string]string
		want   string
	}{
		{"nosuch", nil, `no panel "nosuch"`},
		{"storm", map[string]string{"grid": "8"}, `storm takes no knob "grid"`},
		{"jitter", map[string]string{"rate": "10"}, `jitter takes no knob "rate"`},
		{"storm", map[string]string{"rate": "lots"}, `intent rate: want a number, got "lots"`},
		{"storm", map[string]string{"rate": "NaN"}, "want a number"},
		{"storm", map[string]string{"rate": "-5"}, "traffic.rate"},
		{"storm", map[string]string{"model": "concurrency"}, "capacity and queue models"},
		{"storm", map[string]string{"jitter": "factor"}, "want none, full, equal or decorrelated"},
		{"storm", map[string]string{"max_retries": "1.5"}, "want a whole number"},
		{"storm", map[string]string{"dip_for": "1000"}, "triggers[0].for"},
		{"sweep", map[string]string{"grid": "many"}, "grid: want a whole number"},
		{"sweep", map[string]string{"grid": "1"}, "grid 1 out of"},
	} {
		v := Run(context.Background(), c.panel, Request{Values: c.values}, nil)
		if !strings.Contains(v.Error, c.want) {
			t.Errorf("%s %v: error %q, want %q", c.panel, c.values, v.Error, c.want)
		}
		if len(v.Claims) > 0 || len(v.Charts) > 0 {
			t.Errorf("%s %v: a failed panel still has results", c.panel, c.values)
		}
	}
}

// TestRun computes every panel on its defaults, as the page does first:
// every claim holds, and the view carries what the page draws.
func TestRun(t *testing.T) {
	for _, e := range experiment.All() {
		if testing.Short() && (e.Name == "breaker" || e.Name == "sweep") {
			continue // seconds each under the race detector; the browser test runs them
		}
		t.Run(e.Name, func(t *testing.T) {
			var progressed atomic.Bool // the sweep reports from each of its goroutines
			v := Run(context.Background(), e.Name, Request{}, func(done, total int) { progressed.Store(true) })
			if v.Error != "" {
				t.Fatal(v.Error)
			}
			if len(v.Claims) == 0 || len(v.Tables) == 0 || len(v.Charts) == 0 {
				t.Fatalf("%d claims, %d tables, %d charts", len(v.Claims), len(v.Tables), len(v.Charts))
			}
			for _, c := range v.Claims {
				if !c.Holds {
					t.Errorf("%s does not hold (%s)", c.Text, c.Detail)
				}
			}
			for _, svg := range v.Charts {
				if !strings.HasPrefix(svg, "<svg") || !strings.Contains(svg, `class="hover"`) {
					t.Errorf("a chart is not the report's SVG: %.80s", svg)
				}
			}
			if e.Name == "sweep" && (!progressed.Load() || len(v.Figures) != 6) {
				t.Errorf("the sweep reported progress %v and %d maps", progressed.Load(), len(v.Figures))
			}
			if (v.YAML != "") != (e.Config != nil) {
				t.Errorf("YAML %q", v.YAML)
			}
			if _, err := json.Marshal(v); err != nil {
				t.Errorf("the view does not travel as JSON: %v", err)
			}
		})
	}
}

// TestMovedSliderYAMLRuns: after a slider moves, the YAML the panel shows
// runs unchanged in `retrystorm run`, and gives the numbers the panel
// shows.
func TestMovedSliderYAMLRuns(t *testing.T) {
	v := Run(context.Background(), "fleets", Request{Values: map[string]string{"rate": "105", "budget_ratio": "0.2"}}, nil)
	if v.Error != "" {
		t.Fatal(v.Error)
	}
	sc, err := scenario.Parse("fleets.yaml", []byte(v.YAML))
	if err != nil {
		t.Fatalf("%v\n%s", err, v.YAML)
	}
	if sc.Traffic.Rate != 105 || sc.Fleets[2].Budget.Ratio() != 0.2 || sc.Fleets[2].Name != "budget 0.20" {
		t.Errorf("rate %g, ratio %g, name %q", sc.Traffic.Rate, sc.Fleets[2].Budget.Ratio(), sc.Fleets[2].Name)
	}
	if !slices.Equal(v.Fleets, []string{"no budget", "no budget, no jitter", "budget 0.20", "budget + breaker"}) {
		t.Errorf("fleets %q", v.Fleets)
	}
	out, err := experiment.RunScenario(context.Background(), sc)
	if err != nil {
		t.Fatal(err)
	}
	// The fleets' failures column, in both tables.
	if got, want := column(out.Section.Tables[0].Rows, 3), column(v.Tables[0].Rows, 2); !slices.Equal(got, want) {
		t.Errorf("retrystorm run gives failures %v, the page %v", got, want)
	}
}

func column(rows [][]string, i int) []string {
	var out []string
	for _, r := range rows {
		out = append(out, r[i])
	}
	return out
}

// TestDeterministic: the page shows the same numbers for the same
// settings, every time.
func TestDeterministic(t *testing.T) {
	req := Request{Values: map[string]string{"rate": "90"}}
	a, _ := json.Marshal(Run(context.Background(), "fleets", req, nil))
	b, _ := json.Marshal(Run(context.Background(), "fleets", req, nil))
	if !bytes.Equal(a, b) {
		t.Error("two runs of the same settings differ")
	}
}

// TestSweepEngine: the sweep panel takes an engine, as sweep --engine,
// from Request.Engine or the engine knob: the model's map says where it
// came from, and its claims hold as the simulator's do; another panel
// refuses an engine, and the sweep a made-up one (issue 29).
func TestSweepEngine(t *testing.T) {
	sim := Run(context.Background(), "sweep", Request{Engine: experiment.EngineSim}, nil)
	if sim.Error != "" || sim.Engine != "simulator" {
		t.Fatalf("the simulator's sweep: engine %q, error %q", sim.Engine, sim.Error)
	}
	for _, req := range []Request{
		{Engine: experiment.EngineModel},
		{Engine: experiment.EngineBoth},
		{Values: map[string]string{EngineKnob: experiment.EngineModel}},
		{}, // DefaultEngine
	} {
		v := Run(context.Background(), "sweep", req, nil)
		engine := cmp.Or(req.Engine, req.Values[EngineKnob], "default")
		if v.Error != "" {
			t.Fatalf("%s: %s", engine, v.Error)
		}
		if len(v.Figures) != len(sim.Figures) || len(v.Claims) != len(sim.Claims) {
			t.Fatalf("%s: %d maps and %d claims, the simulator's %d and %d", engine, len(v.Figures), len(v.Claims), len(sim.Figures), len(sim.Claims))
		}
		for i, c := range v.Claims {
			if c.Text != sim.Claims[i].Text || c.Holds != sim.Claims[i].Holds {
				t.Errorf("%s: claim %q holds %v, with the simulator %q %v", engine, c.Text, c.Holds, sim.Claims[i].Text, sim.Claims[i].Holds)
			}
		}
		if !strings.Contains(strings.Join(v.Notes, " "), "analytic model") {
			t.Errorf("%s: the notes do not say the model answered: %q", engine, v.Notes)
		}
		if v.Engine != "model + simulator" {
			t.Errorf("%s: the panel says it was answered by %q", engine, v.Engine)
		}
	}
	for _, c := range []struct {
		panel string
		req   Request
		want  string
	}{
		{"storm", Request{Engine: experiment.EngineModel}, "storm takes no engine"},
		{"storm", Request{Values: map[string]string{EngineKnob: experiment.EngineModel}}, `storm takes no knob "engine"`},
		{"sweep", Request{Engine: "guess"}, `engine "guess"`},
		{"sweep", Request{Values: map[string]string{EngineKnob: "guess"}}, `engine "guess"`},
	} {
		if v := Run(context.Background(), c.panel, c.req, nil); !strings.Contains(v.Error, c.want) {
			t.Errorf("%s %+v: error %q, want %q", c.panel, c.req, v.Error, c.want)
		}
	}
}

// TestSweepPanelDefaultEngine: the page's sweep panel, on its defaults,
// answers from the analytic model every policy the model describes, and
// from the simulator the one it does not (the adaptive limit); its verdicts, cell by cell, are the
// simulator's in at least 95% of the cells of every policy (issue 29's
// agreement), and every other panel says the simulator answered it.
func TestSweepPanelDefaultEngine(t *testing.T) {
	if DefaultEngine == experiment.EngineSim {
		t.Fatal("the sweep panel's default engine is the simulator: the page would not use the model")
	}
	v := Run(context.Background(), "sweep", Request{}, nil)
	if v.Error != "" {
		t.Fatal(v.Error)
	}
	want := map[string]string{
		"naive": "model", "budget": "model", "budget + breaker": "model",
		"naive, drop_expired": "model", "naive, adaptive limit": "simulator", "budget + throttle": "model",
	}
	if len(v.Sources) != len(want) {
		t.Fatalf("sources %+v, want one per policy: %v", v.Sources, want)
	}
	for _, s := range v.Sources {
		if s.Engine != want[s.Policy] || s.Simulated != 0 {
			t.Errorf("%s was answered by %q (%d cells simulated), want %q", s.Policy, s.Engine, s.Simulated, want[s.Policy])
		}
	}
	if v.Engine != "model + simulator" {
		t.Errorf("the sweep panel says it was answered by %q", v.Engine)
	}
	both := Run(context.Background(), "sweep", Request{Values: map[string]string{EngineKnob: experiment.EngineBoth}}, nil)
	simulated := 0
	for _, s := range both.Sources {
		simulated += s.Simulated
	}
	if simulated == 0 {
		t.Errorf("with both, the simulator ran no cell near the model's boundary: %+v", both.Sources)
	}

	// The verdicts, cell by cell, against the simulator's in every cell.
	verdicts := func(engine string) map[string][][]bool {
		t.Helper()
		e, _ := experiment.Lookup("sweep")
		sc, _, err := Scenario("sweep", Request{})
		if err != nil {
			t.Fatal(err)
		}
		out, err := e.Run(context.Background(), experiment.Options{Scenario: sc, Grid: DefaultGrid, Engine: engine})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(out.JSON)
		var m struct {
			Policies []experiment.SweepPolicy `json:"policies"`
		}
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		got := map[string][][]bool{}
		for _, p := range m.Policies {
			for _, row := range p.Recovery {
				var r []bool
				for _, ticks := range row {
					r = append(r, ticks >= 0)
				}
				got[p.Policy] = append(got[p.Policy], r)
			}
		}
		return got
	}
	page, simulator := verdicts(DefaultEngine), verdicts(experiment.EngineSim)
	for policy, rows := range simulator {
		agree, cells := 0, 0
		for y, row := range rows {
			for x, recovered := range row {
				cells++
				if page[policy][y][x] == recovered {
					agree++
				}
			}
		}
		if agree*100 < 95*cells {
			t.Errorf("%s: the page's verdict is the simulator's in %d of %d cells, want at least 95%%", policy, agree, cells)
		}
	}

	for _, name := range []string{"fleets", "storm"} {
		if v := Run(context.Background(), name, Request{}, nil); v.Engine != "simulator" || v.Sources != nil {
			t.Errorf("%s says it was answered by %q (%v), want the simulator", name, v.Engine, v.Sources)
		}
	}
}
