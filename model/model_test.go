package model

import (
	"errors"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/resil"
	"github.com/retrystorm/retrystorm/resil/budget"
	"github.com/retrystorm/retrystorm/scenario"
)

// TestUnsupported: a scenario with a feature the model does not describe
// gets an *UnsupportedError naming the feature, never an answer.
func TestUnsupported(t *testing.T) {
	for _, c := range []struct {
		feature string
		change  func(sc *scenario.Scenario, f *scenario.Fleet)
	}{
		{"tiers[0] (mid): server.model: queue", func(sc *scenario.Scenario, f *scenario.Fleet) {
			sc.Tiers = []scenario.Tier{tier()}
			sc.Tiers[0].Server = scenario.Origin{Model: scenario.ModelQueue, Capacity: 100, Workers: 10}
		}},
		{"tiers[0] (mid): server.per_inflight", func(sc *scenario.Scenario, f *scenario.Fleet) {
			sc.Tiers = []scenario.Tier{tier()}
			sc.Tiers[0].Server.PerInflight = time.Millisecond
		}},
		{"tiers[0] (mid): server.replicas", func(sc *scenario.Scenario, f *scenario.Fleet) {
			sc.Tiers = []scenario.Tier{tier()}
			sc.Tiers[0].Server.Replicas = 2
		}},
		{"tiers[1] (mid): client.propagate_deadline", func(sc *scenario.Scenario, f *scenario.Fleet) {
			sc.Tiers = []scenario.Tier{tier(), tier()}
			sc.Tiers[1].Client.PropagateDeadline = true
		}},
		{"tiers[0] (mid): client.deadline", func(sc *scenario.Scenario, f *scenario.Fleet) {
			sc.Tiers = []scenario.Tier{tier()}
			sc.Tiers[0].Client.Deadline = 2 * time.Second
		}},
		{"tiers[0] (mid): client.budget: token_bucket", func(sc *scenario.Scenario, f *scenario.Fleet) {
			sc.Tiers = []scenario.Tier{tier()}
			sc.Tiers[0].Client.Budget = scenario.Budget{Use: scenario.BudgetTokenBucket, TokenBucket: budget.TokenBucketSettings{Ratio: 0.1}}
		}},
		{"tiers[0] (mid): client.breaker: consecutive", func(sc *scenario.Scenario, f *scenario.Fleet) {
			sc.Tiers = []scenario.Tier{tier()}
			sc.Tiers[0].Client.Breaker = scenario.Breaker{Use: scenario.BreakerConsecutive, Threshold: 5}
		}},
		{"tiers[0] (mid): client.hedge", func(sc *scenario.Scenario, f *scenario.Fleet) {
			sc.Tiers = []scenario.Tier{tier()}
			sc.Tiers[0].Client.Hedge.Delay = 50 * time.Millisecond
		}},
		{"breaker (with tiers)", func(sc *scenario.Scenario, f *scenario.Fleet) {
			sc.Tiers = []scenario.Tier{tier()}
			f.Breaker = scenario.Breaker{Use: scenario.BreakerConsecutive, Threshold: 5}
		}},
		{"triggers: a stall of the concurrency model", func(sc *scenario.Scenario, f *scenario.Fleet) {
			sc.Origin = scenario.Origin{Model: scenario.ModelConcurrency, Base: time.Millisecond, Replicas: 1}
			sc.Triggers = []scenario.Trigger{{Kind: scenario.TriggerOutage, Mode: scenario.OutageStall, At: time.Second, For: time.Second}}
		}},
		{"origin.replicas", func(sc *scenario.Scenario, f *scenario.Fleet) { sc.Origin.Replicas = 3 }},
		{"origin.discipline: lifo", func(sc *scenario.Scenario, f *scenario.Fleet) { sc.Origin.Discipline = "lifo" }},
		{"origin.limit: gradient", func(sc *scenario.Scenario, f *scenario.Fleet) { sc.Origin.Limit.Use = scenario.LimitGradient }},
		{"origin.broken", func(sc *scenario.Scenario, f *scenario.Fleet) { sc.Origin.Broken = 0.1 }},
		{"hedge", func(sc *scenario.Scenario, f *scenario.Fleet) { f.Hedge.Delay = 50 * time.Millisecond }},
		{"deadline", func(sc *scenario.Scenario, f *scenario.Fleet) { f.Deadline = 5 * time.Second }},
		{"budget: window", func(sc *scenario.Scenario, f *scenario.Fleet) {
			f.Budget = scenario.Budget{Use: scenario.BudgetWindow, Window: budget.WindowSettings{Ratio: 0.1}}
		}},
		{"backoff.jitter: decorrelated", func(sc *scenario.Scenario, f *scenario.Fleet) { f.Retry.Backoff.Jitter = "decorrelated" }},
		{"origin.replicas.faults", func(sc *scenario.Scenario, f *scenario.Fleet) {
			sc.Origin.Faults = []scenario.Fault{{Replica: 0, Kind: scenario.FaultErrors, ErrorRate: 1}}
		}},
		{"origin.service_time: exponential", func(sc *scenario.Scenario, f *scenario.Fleet) {
			sc.Origin.ServiceTime = scenario.ServiceTime{Dist: scenario.DistExponential}
		}},
		{"outlier_detection: envoy", func(sc *scenario.Scenario, f *scenario.Fleet) { f.OutlierDetection.Use = scenario.OutlierEnvoy }},
		{"triggers: errors on one replica", func(sc *scenario.Scenario, f *scenario.Fleet) {
			r := 0
			sc.Triggers = append(sc.Triggers, scenario.Trigger{Kind: scenario.TriggerErrors, For: time.Second, ErrorRate: 0.5, Replica: &r})
		}},
		{"triggers: latency on some replicas", func(sc *scenario.Scenario, f *scenario.Fleet) {
			sc.Triggers = append(sc.Triggers, scenario.Trigger{Kind: scenario.TriggerLatency, For: time.Second, Factor: 2, Replicas: 1})
		}},
	} {
		t.Run(c.feature, func(t *testing.T) {
			sc := sweepScenario(t)
			f := sc.Fleets[0]
			c.change(sc, &f)
			_, err := New(sc, f)
			var u *UnsupportedError
			if !errors.As(err, &u) || !errors.Is(err, ErrUnsupported) {
				t.Fatalf("got %v, want an *UnsupportedError", err)
			}
			if u.Feature != c.feature || u.Reason == "" || !strings.Contains(err.Error(), "unsupported: "+c.feature) {
				t.Errorf("got feature %q reason %q, want %q and a reason", u.Feature, u.Reason, c.feature)
			}
		})
	}
}

// tier is a tier the model describes: no queue, retries and a timeout.
func tier() scenario.Tier {
	return scenario.Tier{
		Name:   "mid",
		Server: scenario.Origin{Model: scenario.ModelConcurrency, Base: time.Millisecond},
		Client: scenario.Client{Timeout: time.Second, Retry: scenario.Retry{MaxRetries: 2}, Budget: scenario.Budget{Use: scenario.BudgetNone}},
	}
}

// TestStuckClosedForm checks the equilibria against their closed form for
// a fleet with no budget, breaker or throttle against an unbounded FIFO
// queue without drop_expired: once every answer is late every attempt
// fails, so the stuck state sends λ(1 + M) a second, and it holds exactly
// when that is at least the capacity C (the backlog then never drains).
// Its goodput is zero; the healthy state's is λ.
func TestStuckClosedForm(t *testing.T) {
	for _, c := range []struct {
		retries  int
		capacity float64
		stuck    bool
	}{
		{3, 120, true},  // 400 >= 120
		{0, 120, false}, // 100 < 120: nothing to sustain a backlog
		{1, 190, true},  // 200 >= 190
		{1, 250, false}, // 200 < 250: the backlog drains at 50/s
		{2, 290, true},  // 300 >= 290
		{2, 320, false}, // 300 < 320
	} {
		sc := sweepScenario(t)
		sc.Origin.Capacity = c.capacity
		f := sc.Fleets[0]
		f.Retry.MaxRetries = c.retries
		m, err := New(sc, f)
		if err != nil {
			t.Fatal(err)
		}
		healthy, stuck := m.Equilibria()
		rate := sc.Traffic.Rate
		if d := healthy.Goodput - rate; d > 0.01*rate || d < -0.01*rate {
			t.Errorf("M=%d C=%g: healthy goodput %.1f, want %g", c.retries, c.capacity, healthy.Goodput, rate)
		}
		if (stuck != nil) != c.stuck {
			t.Errorf("M=%d C=%g: stuck state %+v, want one: %v", c.retries, c.capacity, stuck, c.stuck)
			continue
		}
		if stuck == nil {
			continue
		}
		want := rate * float64(1+c.retries)
		if d := stuck.Offered - want; d > 0.02*want || d < -0.02*want || stuck.Goodput > 0.01*rate || !stuck.Growing {
			t.Errorf("M=%d C=%g: stuck %+v, want %.0f/s offered, no goodput, a growing backlog", c.retries, c.capacity, stuck, want)
		}
	}
}

// TestReadsResilDefaults: the model's budget, breaker and throttle
// settings are resil's, defaults included (a zero max_tokens is resil's
// 100, a zero retry cost 1, a zero cooldown 5s), not copies.
func TestReadsResilDefaults(t *testing.T) {
	sc := sweepScenario(t)
	f := sc.Fleets[1]
	f.Budget = scenario.Budget{Use: scenario.BudgetTokenBucket, TokenBucket: budget.TokenBucketSettings{Ratio: 0.2, MinTokens: 3, Funding: budget.FundedBySuccess}}
	f.Breaker = scenario.Breaker{Use: scenario.BreakerConsecutive, Threshold: 4}
	f.Throttle = scenario.Throttle{Use: scenario.ThrottleAdaptive}
	m, err := New(sc, f)
	if err != nil {
		t.Fatal(err)
	}
	if m.maxTok != 100 || m.minTok != 3 || m.cost != 1 || m.costTO != 1 || m.ratio != 0.2 {
		t.Errorf("budget: max %g min %g cost %g timeout cost %g ratio %g", m.maxTok, m.minTok, m.cost, m.costTO, m.ratio)
	}
	if m.brk.Cooldown != 5*time.Second || m.brk.Threshold != 4 {
		t.Errorf("breaker: %+v", m.brk)
	}
	if m.thr.K != 2 || m.thr.Window != 2*time.Minute || m.thr.Padding != 1 || m.thr.MaxProbability != 1 {
		t.Errorf("throttle: %+v", m.thr)
	}
	// The backoff: exponential from 100ms with full jitter draws retry
	// r's delay uniformly from [0, 100ms × 2^(r-1)]: its mean is half that.
	for r, want := range []float64{0.05, 0.1, 0.2} {
		mean := 0.0
		for _, p := range m.delay[r] {
			mean += float64(p.steps) * m.h * p.weight
		}
		if d := mean - want; d > m.h/2 || d < -m.h/2 {
			t.Errorf("retry %d: mean delay %.3fs, want %.3fs", r+1, mean, want)
		}
	}
}

// TestVerdicts: the model's verdicts where the answer is plain.
func TestVerdicts(t *testing.T) {
	for _, c := range []struct {
		name      string
		fleet     int
		load, dip float64
		drop      bool
		recovered bool
	}{
		{"no trigger to speak of", 0, 0.5, 0.01, false, true},
		{"naive, a deep dip", 0, 0.8, 0.8, false, false},
		{"naive, the server fix", 0, 0.8, 0.8, true, true},
		{"budget and breaker", 1, 0.8, 0.8, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			sc := sweepScenario(t)
			sc.Origin.DropExpired = c.drop
			f := sc.Fleets[c.fleet]
			m, err := New(cell(sc, f, c.load, c.dip), f)
			if err != nil {
				t.Fatal(err)
			}
			if v := m.Verdict(); v.Recovered != c.recovered || (v.RecoveryTicks < 0) == v.Recovered {
				t.Errorf("got %+v, want recovered %v", v, c.recovered)
			}
		})
	}
}

// TestEdge: the bisection finds the model's edge where the verdict
// changes, and says so when there is none.
func TestEdge(t *testing.T) {
	sc := sweepScenario(t)
	f := sc.Fleets[0]
	at := func(dip float64) (*Model, error) { return New(cell(sc, f, 0.8, dip), f) }
	e, ok, err := Edge(0, 1, 0.001, at)
	if err != nil || !ok || e <= 0 || e >= 1 {
		t.Fatalf("edge %v %v %v", e, ok, err)
	}
	below, _ := at(e - 0.002)
	above, _ := at(e)
	if !below.Verdict().Recovered || above.Verdict().Recovered {
		t.Errorf("edge %.3f: not where the verdict changes", e)
	}
	g := sc.Fleets[1]
	if _, ok, err := Edge(0, 1, 0.001, func(dip float64) (*Model, error) { return New(cell(sc, g, 0.8, dip), g) }); ok || err != nil {
		t.Errorf("budget and breaker: an edge (%v, %v), want none", ok, err)
	}
}

// TestEveryScenarioFile: the model on every scenario file of the
// repository, each fleet, answers or refuses with an error, and never
// panics; an answer's series have one entry per tick.
func TestEveryScenarioFile(t *testing.T) {
	var files []string
	for _, glob := range []string{"../scenario/testdata/*.yaml", "../experiment/scenarios/*.yaml"} {
		m, err := filepath.Glob(glob)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) < 10 {
		t.Fatalf("found %d scenario files", len(files))
	}
	answered := 0
	for _, file := range files {
		sc, err := scenario.Load(file)
		if err != nil {
			t.Logf("%s: %v", file, err) // not every test file is a valid scenario
			continue
		}
		for _, f := range sc.Fleets {
			m, err := New(sc, f)
			if err != nil {
				if !errors.Is(err, ErrUnsupported) {
					t.Errorf("%s, %s: %v", file, f.Name, err)
				}
				continue
			}
			r := m.Run()
			ticks := int((sc.Duration + sc.Tick - 1) / sc.Tick)
			if len(r.Series.Offered) != ticks || (r.Recovered != (r.RecoveryTicks >= 0)) {
				t.Errorf("%s, %s: %d ticks of series, want %d; recovered %v at %d", file, f.Name, len(r.Series.Offered), ticks, r.Recovered, r.RecoveryTicks)
			}
			answered++
		}
	}
	t.Logf("answered for %d fleets", answered)
}

// TestExtremes: settings at the edges of what a scenario allows run
// without a panic and give a verdict: a capacity of zero in the dip, a
// service time longer than the timeout, unlimited retries, a tick shorter
// than the step, a throttle window of a day.
func TestExtremes(t *testing.T) {
	for _, c := range []struct {
		name   string
		change func(sc *scenario.Scenario, f *scenario.Fleet)
	}{
		{"zero capacity in the dip", func(sc *scenario.Scenario, f *scenario.Fleet) { sc.Triggers[0].Capacity = 0 }},
		{"service longer than the timeout", func(sc *scenario.Scenario, f *scenario.Fleet) { sc.Origin.Workers = 1000 }},
		{"unlimited retries", func(sc *scenario.Scenario, f *scenario.Fleet) { f.Retry.MaxRetries = -1 }},
		{"a 10ms tick", func(sc *scenario.Scenario, f *scenario.Fleet) {
			sc.Tick = 10 * time.Millisecond
			sc.Duration = 5 * time.Second
		}},
		{"a day's throttle window", func(sc *scenario.Scenario, f *scenario.Fleet) {
			f.Throttle = scenario.Throttle{Use: scenario.ThrottleAdaptive, ThrottlerSettings: resil.ThrottlerSettings{Window: 24 * time.Hour}}
		}},
		{"a bounded queue", func(sc *scenario.Scenario, f *scenario.Fleet) { sc.Origin.QueueLimit = 5 }},
		{"a stall", func(sc *scenario.Scenario, f *scenario.Fleet) {
			sc.Triggers[0] = scenario.Trigger{Kind: scenario.TriggerOutage, Mode: scenario.OutageStall, At: 20 * time.Second, For: 5 * time.Second}
		}},
		{"a refusing outage", func(sc *scenario.Scenario, f *scenario.Fleet) {
			sc.Triggers[0] = scenario.Trigger{Kind: scenario.TriggerOutage, Mode: scenario.OutageRefuse, At: 20 * time.Second, For: 5 * time.Second}
		}},
		{"an error blip", func(sc *scenario.Scenario, f *scenario.Fleet) {
			sc.Triggers[0] = scenario.Trigger{Kind: scenario.TriggerErrors, ErrorRate: 1, At: 20 * time.Second, For: 5 * time.Second}
		}},
		{"a load spike", func(sc *scenario.Scenario, f *scenario.Fleet) {
			sc.Triggers[0] = scenario.Trigger{Kind: scenario.TriggerLoad, Rate: 300, At: 20 * time.Second, For: 5 * time.Second}
		}},
		// Steps that send nothing leave empty cohorts in the queue: the
		// server walked over them forever (0/0) before.
		{"no traffic for a while", func(sc *scenario.Scenario, f *scenario.Fleet) {
			sc.Triggers[0] = scenario.Trigger{Kind: scenario.TriggerLoad, Rate: 0, At: 20 * time.Second, For: 5 * time.Second}
		}},
		{"a latency trigger", func(sc *scenario.Scenario, f *scenario.Fleet) {
			sc.Triggers[0] = scenario.Trigger{Kind: scenario.TriggerLatency, Factor: 20, At: 20 * time.Second, For: 5 * time.Second}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			sc := sweepScenario(t)
			f := sc.Fleets[1]
			c.change(sc, &f)
			m, err := New(sc, f)
			if err != nil {
				t.Fatal(err)
			}
			r := m.Run()
			if r.Recovered != (r.RecoveryTicks >= 0) {
				t.Errorf("recovered %v at %d", r.Recovered, r.RecoveryTicks)
			}
			for k, v := range r.Series.Offered {
				if math.IsNaN(v) || v < -1e-9 || math.IsNaN(r.Series.FailedAttempts[k]) {
					t.Fatalf("tick %d: offered %v, failed %v", k, v, r.Series.FailedAttempts[k])
				}
			}
		})
	}
}

// TestTooCostly: a run the model cannot hold is refused with an error
// that says why, not attempted.
func TestTooCostly(t *testing.T) {
	sc := sweepScenario(t)
	sc.Duration = 24 * time.Hour
	sc.Tick = time.Millisecond
	f := sc.Fleets[0]
	f.Retry.MaxRetries = -1
	_, err := New(sc, f)
	if err == nil || !strings.Contains(err.Error(), "more than the model holds") {
		t.Fatalf("got %v", err)
	}
}

// TestLongDelays: delays far longer than the run (an uncapped backoff of
// thirty retries, an hour's cooldown and timeout) cost no more memory
// than the run: they are clamped to its end.
func TestLongDelays(t *testing.T) {
	sc := sweepScenario(t)
	f := sc.Fleets[1]
	f.Retry.MaxRetries = 30
	f.Retry.Backoff.Cap = 0
	f.Breaker.Cooldown = time.Hour
	f.Timeout = time.Hour
	m, err := New(sc, f)
	if err != nil {
		t.Fatal(err)
	}
	var st state
	m.run(&st)
	if n := len(st.lv[0].ev); n > 3*m.steps*nKinds*(m.maxRetries+1) {
		t.Errorf("%d outcome slots for %d steps", n, m.steps)
	}
}

// TestInvalid: a scenario that skipped Validate gets an error, not a
// panic or a division by zero.
func TestInvalid(t *testing.T) {
	for name, change := range map[string]func(sc *scenario.Scenario, f *scenario.Fleet){
		"no duration": func(sc *scenario.Scenario, f *scenario.Fleet) { sc.Duration = 0 },
		"no tick":     func(sc *scenario.Scenario, f *scenario.Fleet) { sc.Tick = 0 },
		"no timeout":  func(sc *scenario.Scenario, f *scenario.Fleet) { f.Timeout = 0 },
		"NaN rate":    func(sc *scenario.Scenario, f *scenario.Fleet) { sc.Traffic.Rate = math.NaN() },
	} {
		sc := sweepScenario(t)
		f := sc.Fleets[0]
		change(sc, &f)
		if _, err := New(sc, f); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// TestZeroModel: a Model New did not make answers nothing good: its run
// is empty and says not recovered, and it does not panic.
func TestZeroModel(t *testing.T) {
	var m Model
	if v := m.Verdict(); v.Recovered || v.RecoveryTicks != -1 {
		t.Errorf("zero model: %+v", v)
	}
	if h, s := m.Equilibria(); h != (Equilibrium{}) || s != nil {
		t.Errorf("zero model: equilibria %+v and %+v", h, s)
	}
}

// TestTiers: a tier that does not retry, works for no time to speak of and
// waits longer than the fleet is transparent (the fleet's verdict and
// goodput are the one-hop model's); a tier that retries multiplies the
// origin's load, so a dip the one-hop fleet survives tips the chain.
func TestTiers(t *testing.T) {
	sc := sweepScenario(t)
	f := sc.Fleets[0] // naive
	through := func(c *scenario.Scenario, retries int) *scenario.Scenario {
		c.Tiers = []scenario.Tier{tier()}
		c.Tiers[0].Client.Timeout = 2 * f.Timeout
		c.Tiers[0].Client.Retry.MaxRetries = retries
		return c
	}
	for _, c := range []struct{ load, dip float64 }{{0.5, 0.2}, {0.5, 0.7}, {0.8, 0.1}, {0.8, 0.5}} {
		one, err := New(cell(sc, f, c.load, c.dip), f)
		if err != nil {
			t.Fatal(err)
		}
		chain, err := New(through(cell(sc, f, c.load, c.dip), 0), f)
		if err != nil {
			t.Fatal(err)
		}
		a, b := one.Run(), chain.Run()
		if a.Recovered != b.Recovered || abs(a.RecoveryTicks-b.RecoveryTicks) > 2 {
			t.Errorf("load %g, dip %g: one hop recovered %v in %d, through a transparent tier %v in %d", c.load, c.dip, a.Recovered, a.RecoveryTicks, b.Recovered, b.RecoveryTicks)
		}
		if sa, sb := sum(a.Series.Successes), sum(b.Series.Successes); math.Abs(sa-sb) > 0.02*sa {
			t.Errorf("load %g, dip %g: successes %.0f one hop, %.0f through a transparent tier", c.load, c.dip, sa, sb)
		}
	}
	// A dip the fleet survives alone, which the tier's retries (each of
	// the fleet's attempts up to three times at the origin) tip.
	const load, dip = 0.6, 0.45 // the dip leaves 55% of the capacity: a queue builds (the simulator agrees on both, seeds 1-3)
	if v := must(New(cell(sc, f, load, dip), f)).Verdict(); !v.Recovered {
		t.Fatalf("one hop: %+v, want recovered", v)
	}
	tiered := through(cell(sc, f, load, dip), 2)
	tiered.Tiers[0].Client.Timeout = f.Timeout / 4
	if v := must(New(tiered, f)).Verdict(); v.Recovered {
		t.Errorf("through a tier that retries twice on a quarter of the fleet's timeout: %+v, want never", v)
	}
}

func abs(x int) int { return max(x, -x) }

func sum(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s
}

func must(m *Model, err error) *Model {
	if err != nil {
		panic(err)
	}
	return m
}
