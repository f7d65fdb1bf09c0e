package experiment

import (
	"context"
	"fmt"
	"time"

	"github.com/retrystorm/retrystorm/report"
	"github.com/retrystorm/retrystorm/scenario"
	"github.com/retrystorm/retrystorm/sim"
)

const poolTitle = "Pool: connection-pool exhaustion and the GC death spiral"

// Pool is issue 39's two loops that are not a cache's: a connection pool
// that a slow database drains and retries keep dry, and a server whose
// latency grows with its load (the GC death spiral), which a burst tips
// over and which stays there without a single retry. Each runs as written
// and with the defences that do and do not get it out.
var Pool = register(&Experiment{
	Name:    "pool",
	Title:   poolTitle,
	Summary: "a connection pool a slow database drains, a server that slows as it fills, and what gets each out",
	Order:   96,
	Page: Page{
		Knobs: []string{"rate", "max_retries", "pool_size"},
		Cost:  60,
		Fixed: "The experiment adds each defence itself; the GC death spiral runs a scenario of its own (pool_gc.yaml).",
	},
	Run: runPool,
})

// lateGoodputTicks is the stretch at the end of a run whose goodput the
// claims compare with the intents.
const lateGoodputTicks = 20

// PoolRun is one run of the pool experiment.
type PoolRun struct {
	Name          string `json:"name"`
	Defence       string `json:"defence"`
	Recovered     bool   `json:"recovered"`
	RecoveryTicks *int   `json:"recovery_ticks"`
	Failures      int64  `json:"failures"`
	IntentsLost   int64  `json:"intents_lost"`
	Attempts      int64  `json:"attempts"`
	// LateGoodputShare is the answers in time per intent over the last
	// lateGoodputTicks ticks: 1 for a healthy system, 0 for a dead one.
	LateGoodputShare float64 `json:"late_goodput_share"`
	// The pool (first part): its wait timeouts and rejections, and the
	// fewest connections in use and the most waiting in the late ticks.
	WaitTimeouts int64 `json:"wait_timeouts,omitempty"`
	PoolRejected int64 `json:"pool_rejected,omitempty"`
	LateInUse    int64 `json:"late_in_use,omitempty"`
	LateWaiting  int64 `json:"late_waiting,omitempty"`
	// WastedWork is what the last layer did for callers that had left.
	WastedWork int64 `json:"wasted_work"`

	fleet sim.FleetResult
	queue []int64 // the last layer's queue, per tick
}

// poolJSON is the experiment's JSON.
type poolJSON struct {
	Scenario string         `json:"scenario"`
	Spiral   string         `json:"spiral_scenario"`
	Seed     uint64         `json:"seed"`
	Pool     []PoolRun      `json:"pool"`
	GC       []PoolRun      `json:"gc"`
	Claims   []report.Claim `json:"claims"`
}

var poolVariants = []variant{
	{"naive", "as written", nil},
	{"pool wait timeout", "the pool gives up on a call after 100ms: the app fails it at once", onPool(func(p *scenario.Pool) { p.WaitTimeout = 100 * time.Millisecond })},
	{"bounded wait queue", "at most 10 calls wait for a connection; the pool refuses the rest at once", onPool(func(p *scenario.Pool) { p.QueueLimit = 10 })},
	{"propagate deadlines", "the app cancels a call, and frees its place in the pool, when its caller gives up",
		func(sc *scenario.Scenario) { sc.Tiers[sc.PoolTier()].Client.PropagateDeadline = true }},
	{"pool of 50", "a pool five times larger: the database takes the slowdown's load", onPool(func(p *scenario.Pool) { p.Size *= 5 })},
	{"retry budget", "the users' retries paid from a token bucket of ratio 0.1 (floor 5)", func(sc *scenario.Scenario) { sc.Fleets[0].Budget = tokenBucket(0.1, 5) }},
}

var gcVariants = []variant{
	{"naive", "as written", nil},
	{"no retries", "the users never retry", func(sc *scenario.Scenario) { sc.Fleets[0].Retry = scenario.Retry{} }},
	{"retry budget", "the users' retries paid from a token bucket of ratio 0.1 (floor 5)", func(sc *scenario.Scenario) { sc.Fleets[0].Budget = tokenBucket(0.1, 5) }},
	{"deadline shedding", "the server refuses at once what it cannot answer in time",
		func(sc *scenario.Scenario) {
			sc.Origin.Shed, sc.Origin.DropExpired = scenario.Shed{Deadline: true}, false
		}},
	{"limit of 5", "at most 5 requests held at once, half the workers: under the tipping point",
		func(sc *scenario.Scenario) { sc.Origin.Limit = scenario.Limit{Use: scenario.LimitFixed, Limit: 5} }},
	{"adaptive limit", "a Vegas limit, learnt from the latency", func(sc *scenario.Scenario) { sc.Origin.Limit = scenario.DefaultLimit(scenario.LimitVegas) }},
	{"flat server", "the same server, whose latency does not grow with its load", func(sc *scenario.Scenario) { sc.Origin.LoadLatency = scenario.LoadLatency{} }},
}

// onPool makes a variant's change to the first pool of the scenario's
// tiers.
func onPool(f func(p *scenario.Pool)) func(sc *scenario.Scenario) {
	return func(sc *scenario.Scenario) { f(&sc.Tiers[sc.PoolTier()].Client.Pool) }
}

func runPool(ctx context.Context, opts Options) (*Outcome, error) {
	sc, err := scenarioFor("pool", opts)
	if err != nil {
		return nil, err
	}
	if sc.PoolTier() < 0 || len(sc.Fleets) != 1 || sc.Shared {
		return nil, fmt.Errorf("pool: scenario %s needs one fleet and a tier whose client has a pool", sc.Name)
	}
	gc, err := scenarioFor("pool_gc", Options{Seed: opts.Seed})
	if err != nil {
		return nil, err
	}
	pr, err := runVariants(ctx, opts, sc, poolVariants, poolRun)
	if err != nil {
		return nil, err
	}
	gr, err := runVariants(ctx, opts, gc, gcVariants, poolRun)
	if err != nil {
		return nil, err
	}
	size := int64(sc.Tiers[sc.PoolTier()].Client.Pool.Size)
	claims := append(poolClaims(pr, size), gcClaims(gr)...)
	sec := report.Section{
		ID:    "pool",
		Title: poolTitle,
		Intro: []string{
			fmt.Sprintf("%s: %s over %d clients; the app's calls to the database take a connection of a pool of %d; %s.",
				sc.Name, describeRate(sc), sc.Traffic.Clients, size, describeTriggers(sc)),
			"A slow database holds every connection longer; the app's requests wait for one while they hold their own workers, the users time out and retry, and the pool serves calls whose callers have left: it stays dry after the database is fast again.",
			fmt.Sprintf("%s: a server whose every request is e^(%g u) times slower when a share u of its workers is busy; %s.",
				gc.Name, gc.Origin.LoadLatency.Factor, describeTriggers(gc)),
		},
		Tables: []report.Table{poolTable("Connection-pool exhaustion", pr), poolTable("The GC death spiral", gr)},
		Claims: claims,
		Charts: poolCharts(pr, gr, sc.Tick.Seconds()),
		Notes: []string{fmt.Sprintf("late goodput is the answers in time per intent over the last %d ticks: 100%% is a healthy system.", lateGoodputTicks),
			"For a server that slows as it fills, shedding what is late or retrying less does not lower the load enough: the server stays at the full load where it is slowest. A cap on what it holds, under its tipping point, does."},
	}
	return &Outcome{
		Name: "pool", Claims: claims, Section: sec, Findings: poolFindings(pr, gr),
		JSON: poolJSON{Scenario: sc.Name, Spiral: gc.Name, Seed: sc.Seed, Pool: pr, GC: gr, Claims: claims},
	}, nil
}

// poolRun reads one run of the pool experiment.
func poolRun(v variant, res *sim.Result) PoolRun {
	f := res.Fleets[0]
	s := f.Summary
	r := PoolRun{Name: v.name, Defence: v.does, fleet: f, Recovered: s.Recovered, RecoveryTicks: s.RecoveryTicks,
		Failures: s.Failures, IntentsLost: s.IntentsLost, Attempts: s.Attempts}
	n := len(f.Series.Tick)
	from := max(n-lateGoodputTicks, 0)
	r.LateGoodputShare = round3(ratioOf(sumInts(f.Series.Goodput[from:]), sumInts(f.Series.Intents[from:])))
	last := f.Series
	if len(f.Tiers) > 0 {
		t := f.Tiers[len(f.Tiers)-1]
		last, r.WastedWork = t.Series, t.Summary.WastedWork
		if p := t.Pool; p != nil {
			r.WaitTimeouts, r.PoolRejected = p.WaitTimeouts, p.Rejected
			r.LateInUse, r.LateWaiting = minInt(p.Series.InUse[from:]), maxInt(p.Series.Waiting[from:])
		}
	} else {
		r.WastedWork = s.WastedWork
	}
	r.queue = last.Queue
	return r
}

func sumInts(v []int64) int64 {
	var s int64
	for _, x := range v {
		s += x
	}
	return s
}

func minInt(v []int64) int64 {
	if len(v) == 0 {
		return 0
	}
	m := v[0]
	for _, x := range v {
		m = min(m, x)
	}
	return m
}

func poolClaims(runs []PoolRun, size int64) []report.Claim {
	naive, wait, queue := namedPool(runs, "naive"), namedPool(runs, "pool wait timeout"), namedPool(runs, "bounded wait queue")
	big, budget := namedPool(runs, "pool of 50"), namedPool(runs, "retry budget")
	rec := func(r PoolRun) map[string]any {
		return map[string]any{"recovered": r.Recovered, "recovery_ticks": r.RecoveryTicks}
	}
	return []report.Claim{
		report.Check("after the database's slowdown the naive users' goodput stays near zero",
			naive.LateGoodputShare < 0.1, map[string]any{"late_goodput_share": naive.LateGoodputShare},
			"%s of the intents answered in the last %d ticks", report.Percent(naive.LateGoodputShare, 0), lateGoodputTicks),
		report.Check("the pool stays dry: every connection in use and calls waiting, to the end",
			naive.LateInUse == size && naive.LateWaiting > 0, map[string]any{"late_in_use": naive.LateInUse, "size": size, "late_waiting": naive.LateWaiting},
			"at least %d of %d connections in use, up to %d calls waiting, in the last %d ticks", naive.LateInUse, size, naive.LateWaiting, lateGoodputTicks),
		report.Check("a pool wait timeout recovers it, failing calls fast instead",
			wait.Recovered && wait.WaitTimeouts > 0, map[string]any{"recovered": wait.Recovered, "recovery_ticks": wait.RecoveryTicks, "wait_timeouts": wait.WaitTimeouts},
			"%s; %s calls given up after 100ms", recoveryText(wait.fleet.Summary), report.Int(wait.WaitTimeouts)),
		report.Check("a bounded wait queue at the pool recovers it", queue.Recovered, rec(queue), "%s; %s calls refused", recoveryText(queue.fleet.Summary), report.Int(queue.PoolRejected)),
		report.Check("a pool sized for the slowdown rides it out", big.Recovered, rec(big), "%s", recoveryText(big.fleet.Summary)),
		report.Check("a retry budget at the users recovers it", budget.Recovered, rec(budget), "%s", recoveryText(budget.fleet.Summary)),
	}
}

func gcClaims(runs []PoolRun) []report.Claim {
	late := func(r PoolRun) map[string]any { return map[string]any{"late_goodput_share": r.LateGoodputShare} }
	dead := func(name, text string) report.Claim {
		r := namedPool(runs, name)
		return report.Check(text, r.LateGoodputShare < 0.1, late(r), "%s of the intents answered in the last %d ticks", report.Percent(r.LateGoodputShare, 0), lateGoodputTicks)
	}
	alive := func(name, text string) report.Claim {
		r := namedPool(runs, name)
		return report.Check(text, r.LateGoodputShare > 0.9, late(r), "%s of the intents answered in the last %d ticks", report.Percent(r.LateGoodputShare, 0), lateGoodputTicks)
	}
	flat := namedPool(runs, "flat server")
	return []report.Claim{
		dead("naive", "a burst tips a server that slows as it fills, and it stays tipped"),
		dead("no retries", "without a single retry it stays tipped: its slowdown alone sustains the overload"),
		dead("retry budget", "a retry budget does not get it out"),
		dead("deadline shedding", "deadline shedding does not get it out: the server stays full, where it is slowest"),
		alive("limit of 5", "a concurrency limit under the tipping point gets it out"),
		alive("adaptive limit", "an adaptive (Vegas) limit gets it out too"),
		report.Check("the same burst against a server whose latency does not grow is shrugged off", flat.Recovered,
			map[string]any{"recovered": flat.Recovered, "recovery_ticks": flat.RecoveryTicks}, "%s", recoveryText(flat.fleet.Summary)),
	}
}

// namedPool returns the run called name.
func namedPool(runs []PoolRun, name string) PoolRun {
	for _, r := range runs {
		if r.Name == name {
			return r
		}
	}
	panic("pool: no run " + name)
}

func poolTable(title string, runs []PoolRun) report.Table {
	t := report.Table{
		Title: title,
		Columns: []report.Column{
			{Name: "defence"}, {Name: "recovery", Align: report.Right}, {Name: "late goodput", Align: report.Right},
			{Name: "failures", Align: report.Right}, {Name: "lost", Align: report.Right}, {Name: "wasted", Align: report.Right},
		},
		Emphasis: map[[2]int]bool{},
	}
	for i, r := range runs {
		t.Rows = append(t.Rows, []string{r.Name, recoveryText(r.fleet.Summary), report.Percent(r.LateGoodputShare, 0),
			report.Int(r.Failures), report.Int(r.IntentsLost), report.Int(r.WastedWork)})
		if r.LateGoodputShare < 0.5 {
			t.Emphasis[[2]int{i, 2}] = true
		}
	}
	return t
}

// poolCharts draws each part's goodput and the queue of its last layer.
func poolCharts(pool, gc []PoolRun, tick float64) []report.Chart {
	var charts []report.Chart
	for _, part := range []struct {
		what, queue string
		runs        []PoolRun
	}{{"Pool", "requests waiting at the database", pool}, {"GC death spiral", "requests waiting at the server", gc}} {
		n := len(part.runs[0].fleet.Series.Tick)
		x := make([]float64, n)
		for i := range x {
			x[i] = float64(i) * tick
		}
		good := report.Chart{Title: part.what + ": goodput", XLabel: "time (s)", YLabel: "answers / tick", X: x}
		queue := report.Chart{Title: part.what + ": " + part.queue, XLabel: "time (s)", YLabel: "requests", X: x}
		for _, r := range part.runs {
			good.Lines = append(good.Lines, report.Line{Name: r.Name, Y: floats(r.fleet.Series.Goodput), Dashed: r.Name == "naive"})
			queue.Lines = append(queue.Lines, report.Line{Name: r.Name, Y: floats(r.queue), Dashed: r.Name == "naive"})
		}
		charts = append(charts, good, queue)
	}
	return charts
}

func poolFindings(pool, gc []PoolRun) []string {
	naive, wait := namedPool(pool, "naive"), namedPool(pool, "pool wait timeout")
	gn, lim := namedPool(gc, "naive"), namedPool(gc, "limit of 5")
	return []string{
		fmt.Sprintf("Pool: after five seconds of a slow database, the naive users' pool stays dry (goodput %s of the intents at the end); a pool wait timeout of 100ms %s, failing %s calls fast; a bounded wait queue, a larger pool or a retry budget recover it too.",
			report.Percent(naive.LateGoodputShare, 0), recoveredPhrase(wait.fleet.Summary), report.Int(wait.WaitTimeouts)),
		fmt.Sprintf("GC death spiral: a burst tips a server that slows as it fills (goodput %s at the end), and it stays tipped without a single retry; neither a retry budget nor deadline shedding gets it out, a concurrency limit under the tipping point does (%s).",
			report.Percent(gn.LateGoodputShare, 0), report.Percent(lim.LateGoodputShare, 0)),
	}
}
