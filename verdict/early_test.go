package verdict_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/experiment"
	"github.com/retrystorm/retrystorm/importer"
	"github.com/retrystorm/retrystorm/internal/race"
	"github.com/retrystorm/retrystorm/report"
	"github.com/retrystorm/retrystorm/scenario"
	"github.com/retrystorm/retrystorm/userconfig"
	"github.com/retrystorm/retrystorm/verdict"
)

// TestEarlyExitKeepsTheVerdict checks configs with every run played to
// its end (CheckOptions.FullRuns) and with the runs that may end early
// doing so, and requires the same result: the verdicts at every client
// count, the findings with their values, the worst cell of each map, the
// margins, every run whole (the first client count's, retries off) cell
// for cell, and the printed report but the note that says how many runs
// stopped; a stopped run keeps its recovery (none) and NeverHealthy. It
// also requires some run to have stopped, so that it cannot pass by never
// stopping. A config check refuses must be refused the same way both
// ways. The configs: the storm's two fleets, a generated two-layer stack,
// the storm at the edge and issue 40's stack (two Istio routes of
// attempts: 10) on a small storm by default; VERDICT_EARLY=files adds the
// project's examples (verdict/testdata/examples, importer/testdata, the
// stack testdata of cmd/internal/configcmd, issue 40's stack on the
// storm), VERDICT_EARLY=N that many generated configs.
func TestEarlyExitKeepsTheVerdict(t *testing.T) {
	if testing.Short() || race.Enabled {
		t.Skip("whole checks, twice each: numbers, not concurrency")
	}
	base := earlyBase(t)
	cases := []earlyCheck{
		{name: "storm", in: []verdict.CheckInput{{Fleet: base.Fleets[0], Origin: "storm"}, {Fleet: base.Fleets[1], Origin: "storm"}}, base: base, seeds: 2},
		generatedStack(rand.New(rand.NewPCG(40, 2)), base, 0),
		// Realistic up to 97.5% load and a dip of 90%: retries off
		// collapse too, so the runs that stop are run again to their end.
		{name: "storm at the edge", in: []verdict.CheckInput{{Fleet: base.Fleets[0], Origin: "storm"}}, base: base, seeds: 1, load: 0.975, dip: 0.9},
		// Two Istio routes of attempts: 10 (363 attempts per intent at
		// the origin), on a small storm (testdata/early) so that the full runs stay
		// cheap.
		istio10(t, filepath.Join("testdata", "early", "small-base.yaml"), 1),
	}
	switch v := os.Getenv("VERDICT_EARLY"); {
	case v == "files":
		cases = append(cases, earlyFiles(t)...)
	case v != "":
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("VERDICT_EARLY=%q: want files or a number", v)
		}
		rng := rand.New(rand.NewPCG(40, 3))
		for i := range n {
			if i%3 == 2 {
				cases = append(cases, generatedStack(rng, base, i))
			} else {
				cases = append(cases, generatedFleet(rng, base, i))
			}
		}
	}
	stopped, lost := 0, 0
	for _, c := range cases {
		start := time.Now() // for the log only
		fullAll, full, fullText, fullErr := c.run(t, runFull)
		earlyAll, early, earlyText, earlyErr := c.run(t, runCounted)
		_, fast, fastText, fastErr := c.run(t, runDefault)
		if fullErr != nil || earlyErr != nil || fastErr != nil {
			// A config check refuses (a hedge as long as the timeout)
			// must be refused the same way every way.
			if fullErr == nil || earlyErr == nil || fastErr == nil || fullErr.Error() != earlyErr.Error() || fullErr.Error() != fastErr.Error() {
				t.Errorf("%s: full runs: %v; early exit: %v; collapsed runs stopped: %v", c.name, fullErr, earlyErr, fastErr)
			}
			t.Logf("%s: refused every way: %v", c.name, fullErr)
			continue
		}
		l := sameLost(t, c, early, fast, earlyText, fastText)
		lost += l
		n := sameCheck(t, c.name, full, early)
		if a, b := jsonText(t, fullAll), jsonText(t, earlyAll); a != b {
			t.Errorf("%s: the results differ:\nfull runs:\n%s\nearly exit:\n%s", c.name, a, b)
		}
		stopped += n
		if fullText != withoutEarlyNote(earlyText) {
			t.Errorf("%s: the reports differ beyond the note:\nfull runs:\n%s\nearly exit:\n%s", c.name, fullText, earlyText)
		}
		t.Logf("%s: %s, %d runs stopped early, %d collapsed runs at the verdict's count (%.1fs every way)", c.name, early.Fleets[0].Verdict, n, l, time.Since(start).Seconds())
	}
	if stopped == 0 || lost == 0 {
		t.Errorf("%d runs stopped early, %d at the verdict's client count: the test proves nothing of what did not", stopped, lost)
	}
}

// sameLost checks what check's default (the collapsed runs at the
// verdict's client count stop once every intent left is lost: fast)
// promises against the same check with them counted to their end
// (early): the verdict at every client count, the collapses found, the
// margins, the worst cell, the runs with retries off and every run that
// did not stop, whole; a stopped run's recovery (none), NeverHealthy,
// intents and intents lost; amplification findings only where early has
// them, and only from runs that did not stop (so never worse); the
// printed verdict, margin, intents lost and blame. It returns how many
// of fast's runs at the verdict's client count stopped.
func sameLost(t *testing.T, c earlyCheck, early, fast *verdict.CheckResult, earlyText, fastText string) int {
	t.Helper()
	stopped := 0
	for i := range min(len(early.Fleets), len(fast.Fleets)) {
		e, f := &early.Fleets[i], &fast.Fleets[i]
		at := fmt.Sprintf("%s/%s", c.name, e.Name)
		if e.Verdict != f.Verdict || !reflect.DeepEqual(e.ByClients, f.ByClients) || !reflect.DeepEqual(e.Margin, f.Margin) || !reflect.DeepEqual(e.Bare, f.Bare) {
			t.Errorf("%s: verdict %v by clients %v margin %+v; counted: %v %v %+v (or the runs with retries off differ)", at, f.Verdict, f.ByClients, f.Margin, e.Verdict, e.ByClients, e.Margin)
		}
		hasStop := map[[2]int]bool{}
		for s := range e.Runs[0] {
			for fi := range e.Runs[0][s] {
				for li := range e.Runs[0][s][fi] {
					x, y := e.Runs[0][s][fi][li], f.Runs[0][s][fi][li]
					if y.EndedEarly == nil {
						if !reflect.DeepEqual(x, y) {
							t.Errorf("%s: seed %d cell %d/%d did not stop and differs: %+v; counted %+v", at, s, fi, li, y, x)
						}
						continue
					}
					stopped++
					hasStop[[2]int{fi, li}] = true
					if !y.EndedEarly.AllLost || y.Recovered || x.Recovered || x.NeverHealthy != y.NeverHealthy ||
						x.Intents != y.Intents || x.IntentsLost != y.IntentsLost || x.FaultIntents != y.FaultIntents {
						t.Errorf("%s: seed %d cell %d/%d stopped (%+v): %+v; counted %+v", at, s, fi, li, *y.EndedEarly, y, x)
					}
				}
			}
		}
		var kept []verdict.Finding
		for _, x := range e.Findings {
			switch x.What {
			case "work", "load", "instant", "herd":
				if hasStop[[2]int{x.Fault, x.Load}] {
					continue // judged again below, from the runs that did not stop
				}
			}
			kept = append(kept, x)
		}
		var fk []verdict.Finding
		for _, x := range f.Findings {
			if hasStop[[2]int{x.Fault, x.Load}] && x.What != "collapse" && x.What != "collapse_outside" && x.What != "never_healthy" && x.What != "collapse_anyway" {
				if !slices.ContainsFunc(e.Findings, func(y verdict.Finding) bool {
					return y.What == x.What && y.Fault == x.Fault && y.Load == x.Load && x.Seeds <= y.Seeds && x.Value <= y.Value
				}) {
					t.Errorf("%s: finding %+v, which the counted runs do not give or give smaller", at, x)
				}
				continue
			}
			fk = append(fk, x)
		}
		if !reflect.DeepEqual(kept, fk) {
			t.Errorf("%s: findings %+v; counted %+v", at, fk, kept)
		}
	}
	if c.in != nil {
		ew, _, eok, eerr := early.WorstScenario(c.in, c.base)
		fw, _, fok, ferr := fast.WorstScenario(c.in, c.base)
		if eok != fok || (eerr == nil) != (ferr == nil) || !reflect.DeepEqual(ew, fw) {
			t.Errorf("%s: the worst cell differs: %+v; counted %+v", c.name, fw, ew)
		}
	}
	if a, b := printedVerdict(earlyText), printedVerdict(fastText); a != b {
		t.Errorf("%s: the printed verdicts differ:\n%s\ncounted:\n%s", c.name, b, a)
	}
	return stopped
}

// printedVerdict is the lines of a check's report that say its verdict,
// margin, intents lost and blame.
func printedVerdict(text string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		for _, p := range []string{"  verdict:", "  margin:", "  intents lost:", "  to blame:", "  the same at", "Verdict"} {
			if strings.HasPrefix(l, p) {
				out = append(out, l)
			}
		}
	}
	return strings.Join(out, "\n")
}

// TestEarlyExitSettles checks the storm at the edge with early exit, for
// the race detector above all (TestEarlyExitKeepsTheVerdict is too slow
// under it): the runs that stop are settled by runs with retries off,
// which the grid's workers report at once (settleStopped). It requires
// some run to have stopped, so that settling ran.
func TestEarlyExitSettles(t *testing.T) {
	if testing.Short() {
		t.Skip("a whole check")
	}
	base := earlyBase(t)
	c := earlyCheck{name: "storm at the edge", in: []verdict.CheckInput{{Fleet: base.Fleets[0], Origin: "storm"}}, base: base, seeds: 1, load: 0.975, dip: 0.9}
	_, r, _, err := c.run(t, runDefault)
	if err != nil {
		t.Fatal(err)
	}
	stopped := 0
	for _, k := range r.Fleets[0].Runs[1:] {
		stopped += countStopped(k)
	}
	if stopped == 0 {
		t.Error("no run stopped early: nothing was settled")
	}
}

// earlyCheck is one check of the test: fleets on a base, or a stack.
type earlyCheck struct {
	name   string
	in     []verdict.CheckInput
	layers []verdict.StackLayer
	base   *scenario.Scenario
	seeds  int
	// load and dip are the realistic region's (zero: the base's).
	load, dip float64
	// runs, when set, is the check's RunCache (CheckOptions.Runs).
	runs *verdict.RunCache
}

// runWay is how far a check of the test lets its runs end early.
type runWay int

const (
	runDefault runWay = iota // check's default: every rule
	runCounted               // the collapsed runs at the verdict's client count played to their end (CountCollapsed)
	runFull                  // every run to its end (FullRuns)
)

// run checks c, with every run to its end or not, and returns the result
// (a stack's check in it) and its report, or the error check refused c
// with.
func (c earlyCheck) run(t testing.TB, how runWay) (any, *verdict.CheckResult, string, error) {
	t.Helper()
	co := verdict.CheckOptions{Base: c.base, Seeds: c.seeds, Load: c.load, Dip: c.dip, FullRuns: how == runFull, CountCollapsed: how == runCounted, Runs: c.runs}
	var text bytes.Buffer
	if c.layers != nil {
		s, err := verdict.CheckStack(context.Background(), c.layers, co, experiment.Options{})
		if err != nil {
			return nil, nil, "", err
		}
		if err := s.Render(&text, report.Style{}); err != nil {
			t.Fatal(err)
		}
		return s, s.Check, text.String(), nil
	}
	r, err := verdict.Check(context.Background(), c.in, co, experiment.Options{})
	if err != nil {
		return nil, nil, "", err
	}
	if err := r.Render(&text, report.Style{}); err != nil {
		t.Fatal(err)
	}
	return r, r, text.String(), nil
}

// istio10 is the stack of issue 40, two Istio routes of attempts: 10
// (testdata/early), checked on the base scenario in baseFile (empty:
// check's default, the storm) with seeds seeds (0: check's default).
func istio10(t testing.TB, baseFile string, seeds int) earlyCheck {
	t.Helper()
	var layers []verdict.StackLayer
	var base *scenario.Scenario
	for _, f := range []string{"istio10-a.yaml", "istio10-b.yaml"} {
		in, b, _, _, err := userconfig.Reader{}.Files([]string{filepath.Join("testdata", "early", f)}, "", baseFile, importer.Options{})
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if base == nil {
			base = b
		}
		layers = append(layers, verdict.StackLayer{Name: f, File: f, Input: in[0]})
	}
	return earlyCheck{name: "istio10 on " + base.Name, layers: layers, base: base, seeds: seeds}
}

// BenchmarkCheckStackIstio10 is check --stack of issue 40's stack, two
// Istio routes of attempts: 10, on the storm with three seeds, with early
// exit (early: check's default), with the collapsed runs at the
// verdict's client count played to their end (counted) and every run to
// its end (full).
func BenchmarkCheckStackIstio10(b *testing.B) {
	c := istio10(b, "", 0)
	for _, how := range []runWay{runDefault, runCounted, runFull} {
		b.Run([]string{"early", "counted", "full"}[how], func(b *testing.B) {
			cpu := cpuTime()
			for b.Loop() {
				if _, _, _, err := c.run(b, how); err != nil {
					b.Fatal(err)
				}
			}
			// CPU time says more than wall time on a shared machine.
			b.ReportMetric(float64(cpuTime()-cpu)/1e9/float64(b.N), "cpu-s/op")
		})
	}
}

// sameCheck reports where early differs from full in what early exit
// promises, and returns how many of early's runs stopped.
func sameCheck(t *testing.T, name string, full, early *verdict.CheckResult) int {
	t.Helper()
	stopped := 0
	// The runs that stopped keep the whole run's recovery: the rest of
	// their figures are replaced by full's, and then the two must be
	// the same, cell for cell and verdict for verdict.
	keep := func(f, e *verdict.CheckCell) {
		if e.EndedEarly == nil {
			return
		}
		stopped++
		if e.Recovered || e.Recovered != f.Recovered || e.NeverHealthy != f.NeverHealthy || e.RecoveryTicks != f.RecoveryTicks {
			t.Errorf("%s: a run stopped at %gs (%s) recovered %v, never healthy %v; to its end: %v, %v", name, e.EndedEarly.At, e.EndedEarly.Rule, e.Recovered, e.NeverHealthy, f.Recovered, f.NeverHealthy)
		}
		*e = *f
	}
	each := func(f, e [][][]verdict.CheckCell) {
		for s := range min(len(f), len(e)) {
			for fi := range f[s] {
				for li := range f[s][fi] {
					keep(&f[s][fi][li], &e[s][fi][li])
				}
			}
		}
	}
	for i := range min(len(full.Fleets), len(early.Fleets)) {
		f, e := &full.Fleets[i], &early.Fleets[i]
		for k := range min(len(f.Runs), len(e.Runs)) {
			if k == 0 {
				if n := countStopped(e.Runs[0]); n > 0 {
					t.Errorf("%s: %d runs of the first client count stopped early: their figures are printed", name, n)
				}
			}
			each(f.Runs[k], e.Runs[k])
		}
		if f.Assumed != nil && e.Assumed != nil {
			each(f.Assumed.Runs, e.Assumed.Runs)
		}
	}
	early.Notes = slicesWithout(early.Notes, "stopped once their collapse was certain")
	return stopped
}

func countStopped(seeds [][][]verdict.CheckCell) int {
	n := 0
	for _, s := range seeds {
		for _, row := range s {
			for _, c := range row {
				if c.EndedEarly != nil {
					n++
				}
			}
		}
	}
	return n
}

func jsonText(t *testing.T, v any) string {
	t.Helper()
	b, err := json.MarshalIndent(v, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func slicesWithout(notes []string, part string) []string {
	var out []string
	for _, n := range notes {
		if !strings.Contains(n, part) {
			out = append(out, n)
		}
	}
	return out
}

// withoutEarlyNote is a report without the note of the runs that stopped.
func withoutEarlyNote(s string) string {
	var out []string
	lines := strings.Split(s, "\n")
	for i := 0; i < len(lines); i++ {
		if strings.HasPrefix(lines[i], "Note: ") && strings.Contains(lines[i], "stopped once their collapse was certain") {
			i++ // and the blank line after it
			continue
		}
		out = append(out, lines[i])
	}
	return strings.Join(out, "\n")
}

// earlyBase is check's default base scenario, the storm.
func earlyBase(t *testing.T) *scenario.Scenario {
	t.Helper()
	sc, err := scenario.Load(filepath.Join("..", "sim", "testdata", "storm.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// earlyFiles are the project's example configs, each read as check reads
// it, and the stacks of cmd/internal/configcmd's testdata.
func earlyFiles(t *testing.T) []earlyCheck {
	t.Helper()
	var files []string
	for _, g := range []string{"testdata/examples/*", "../importer/testdata/*/*"} {
		m, _ := filepath.Glob(g)
		files = append(files, m...)
	}
	var out []earlyCheck
	for _, f := range files {
		if strings.Contains(f, "fuzz") || strings.Contains(f, "golden") {
			continue
		}
		in, base, _, _, err := userconfig.Reader{}.Files([]string{f}, "", "", importer.Options{})
		if err != nil {
			t.Logf("%s: not a config check reads (%v)", f, err)
			continue
		}
		out = append(out, earlyCheck{name: f, in: in, base: base})
	}
	stack := "../cmd/internal/configcmd/testdata/stack/"
	for _, s := range [][]string{{"app-grpc.json", "mesh.yaml"}, {"mesh.yaml", "gateway.yaml"}, {"app-grpc.json", "mesh.yaml", "gateway.yaml"}, {"mesh.yaml", "mesh.yaml"}} {
		var layers []verdict.StackLayer
		var base *scenario.Scenario
		for _, f := range s {
			in, b, _, _, err := userconfig.Reader{}.Files([]string{stack + f}, "", "", importer.Options{})
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if base == nil {
				base = b
			}
			layers = append(layers, verdict.StackLayer{Name: f, File: f, Input: in[0]})
		}
		out = append(out, earlyCheck{name: strings.Join(s, ","), layers: layers, base: base})
	}
	return append(out, istio10(t, "", 0))
}

// cpuTime is the process's user and system CPU time, in nanoseconds.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// generatedFleet is a random retry policy checked on the storm's base
// with two seeds.
func generatedFleet(rng *rand.Rand, base *scenario.Scenario, i int) earlyCheck {
	f := randomFleet(rng, fmt.Sprintf("fleet%d", i))
	return earlyCheck{name: f.Name, in: []verdict.CheckInput{{Fleet: f, Origin: "generated"}}, base: base, seeds: 2}
}

// generatedStack is two or three layers of random retry policies, as
// proxies (Envoy's give-up answers, sometimes Istio's sidecar beside the
// origin), checked as a stack on the storm's base with two seeds.
func generatedStack(rng *rand.Rand, base *scenario.Scenario, i int) earlyCheck {
	var layers []verdict.StackLayer
	for l := range 2 + rng.IntN(2) {
		f := randomFleet(rng, fmt.Sprintf("stack%d-layer%d", i, l))
		f.Product = "envoy"
		if rng.IntN(2) == 0 {
			f.Inbound = scenario.Inbound{Product: "envoy", Retries: 2}
		}
		layers = append(layers, verdict.StackLayer{Name: f.Name, File: f.Name + ".yaml", Input: verdict.CheckInput{Fleet: f, Origin: f.Name}})
	}
	return earlyCheck{name: fmt.Sprintf("stack%d", i), layers: layers, base: base, seeds: 2}
}

// randomFleet is a fleet of random retries (on random failures), backoff,
// budget, breaker, timeout and deadline, from the storm's naive fleet.
func randomFleet(rng *rand.Rand, name string) scenario.Fleet {
	y := fmt.Sprintf("name: x\nduration: 1s\ntraffic: {rate: 1}\norigin: {model: queue, capacity: 1, workers: 1}\nfleets:\n  - name: %s\n    timeout: %dms\n", name, 200+rng.IntN(2800))
	if r := []int{0, 1, 2, 3, 5, 10}[rng.IntN(6)]; r > 0 {
		y += fmt.Sprintf("    retry: {max_retries: %d, on: [%s], backoff: {use: exponential, base: %dms, cap: %ds, jitter: %s}}\n",
			r, []string{"error, rejection, timeout, refused, gateway", "timeout", "error, refused", "rejection, refused"}[rng.IntN(4)],
			10+rng.IntN(200), 1+rng.IntN(5), []string{"none", "full", "equal"}[rng.IntN(3)])
	}
	if rng.IntN(3) == 0 {
		y += fmt.Sprintf("    budget: {use: token_bucket, settings: {budget_ratio: %.2f}}\n", 0.1+0.4*rng.Float64())
	} else {
		y += "    budget: {use: none}\n"
	}
	if rng.IntN(3) == 0 {
		y += "    breaker: {use: consecutive, settings: {threshold: 5}}\n"
	}
	if rng.IntN(5) == 0 {
		y += fmt.Sprintf("    deadline: %v\n", time.Duration(2+rng.IntN(8))*time.Second)
	}
	sc, err := scenario.Parse(name+".yaml", []byte(y))
	if err != nil {
		panic(fmt.Sprintf("%v\n%s", err, y))
	}
	return sc.Fleets[0]
}
