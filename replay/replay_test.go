package replay_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/calibrate"
	"github.com/retrystorm/retrystorm/importer"
	"github.com/retrystorm/retrystorm/replay"
	"github.com/retrystorm/retrystorm/report"
	"github.com/retrystorm/retrystorm/resil/budget"
	"github.com/retrystorm/retrystorm/scenario"
	"github.com/retrystorm/retrystorm/userconfig"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func readWindow(t *testing.T, file string) *calibrate.Window {
	t.Helper()
	w, err := calibrate.ReadAnswers([]string{file}, calibrate.Selector{})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// TestGolden replays saved windows: storm.json, captured from a real
// Prometheus scraping the lab's storm (TestRealPrometheus -capture: the
// capacity dipped from 100/s to 30/s for 5 s and the naive fleet, 3
// retries and no budget, never recovered, as the lab measured), and
// calibrate's envoy.json (a load spike that recovered) and haproxy.json,
// a steady window without an incident. Each
// checks what the window is, then the JSON and the tables byte for byte.
func TestGolden(t *testing.T) {
	for _, c := range []struct {
		name, file string
		check      func(t *testing.T, r *replay.Result)
	}{
		{"storm", "testdata/storm.json", func(t *testing.T, r *replay.Result) {
			if !r.Incident || r.Trigger.Kind != scenario.TriggerCapacity || r.Trigger.Confidence != "high" {
				t.Fatalf("trigger %+v, want a capacity drop, high confidence", r.Trigger)
			}
			if r.Trigger.Size < 25 || r.Trigger.Size > 40 || r.Trigger.For < 4 || r.Trigger.For > 7 {
				t.Errorf("the dip: to %.4g/s for %gs; the lab's was to 30/s for 5s", r.Trigger.Size, r.Trigger.For)
			}
			if c := r.Calibration.Capacity; c < 90 || c > 110 {
				t.Errorf("calibrated capacity %.4g, the lab's 100", c)
			}
			if r.Verdict.Recovered || r.AsIs.Verdict.Recovered || !r.Agrees {
				t.Errorf("the window %s, the replay %s: the lab's never recovered", r.Verdict, r.AsIs.Verdict)
			}
			if l := r.Loops[0]; !l.Sustained || !l.Retries || !l.Wasted {
				t.Errorf("loop %+v: want retries and work for callers gone", l)
			}
			if r.Prevents == "" {
				t.Errorf("no change prevents it: %s", r.Conclusion)
			}
		}},
		{"spike", "../calibrate/testdata/envoy.json", func(t *testing.T, r *replay.Result) {
			// calibrate's Envoy model: a minute at 1,000 intents/s on an
			// origin of about 880/s whose clients never time out; the
			// queue drains after it.
			if !r.Incident || r.Trigger.Kind != scenario.TriggerLoad || r.Trigger.For != 60 {
				t.Fatalf("trigger %+v, want a load spike of 60s", r.Trigger)
			}
			if !r.Verdict.Recovered || !r.AsIs.Verdict.Recovered || !r.Agrees {
				t.Errorf("the window %s, the replay %s: both should recover", r.Verdict, r.AsIs.Verdict)
			}
			if r.Calibration.Timeout < 5 {
				t.Errorf("timeout %gs: the window's callers waited 5.7s on average in one step", r.Calibration.Timeout)
			}
		}},
		{"layers", "testdata/layers.json", func(t *testing.T, r *replay.Result) {
			// A two-layer incident from a simulator run (gen_test.go,
			// layersYAML): the origin's capacity dipped from 100/s to
			// 30/s for 15s; the front proxy (front-envoy, cluster api)
			// does not retry, api's sidecar (api-sidecar, cluster db)
			// retries three times on a 1s timeout, and the loop lives
			// there.
			if !r.Incident || r.Trigger.Kind != scenario.TriggerCapacity || r.Layer != "api-sidecar/db" {
				t.Fatalf("trigger %+v at layer %q, want a capacity drop inferred at api-sidecar/db", r.Trigger, r.Layer)
			}
			if r.Trigger.Size < 25 || r.Trigger.Size > 40 || r.Trigger.For < 10 || r.Trigger.For > 20 {
				t.Errorf("the dip: to %.4g/s for %gs; the simulator's was to 30/s for 15s", r.Trigger.Size, r.Trigger.For)
			}
			if len(r.Loops) != 2 || r.LoopLayer != "api-sidecar/db" {
				t.Fatalf("loops %+v, loop layer %q: want two layers, the loop in api-sidecar/db", r.Loops, r.LoopLayer)
			}
			for _, l := range r.Loops {
				if !l.Sustained {
					t.Errorf("layer %s recovered: %s", l.Layer, l.Evidence)
				}
				if amp := l.Layer == "api-sidecar/db"; l.Retries != amp || l.Lives != amp {
					t.Errorf("layer %s: retry amplification %v (%.3g attempts/intent after, %.3g before), loop here %v", l.Layer, l.Retries, l.AmplificationAfter, l.AmplificationBefore, l.Lives)
				}
			}
		}},
		{"steady", "../calibrate/testdata/haproxy.json", func(t *testing.T, r *replay.Result) {
			if r.Incident || !strings.Contains(r.Message, "no incident") {
				t.Errorf("incident %v, message %q: want none", r.Incident, r.Message)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, err := replay.Replay(context.Background(), readWindow(t, c.file), replay.Options{})
			if err != nil {
				t.Fatal(err)
			}
			c.check(t, r)
			js, err := json.MarshalIndent(r, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			o := r.Outcome()
			var text bytes.Buffer
			st := report.Style{Width: 80}
			text.WriteString(strings.Join(o.Section.Intro, "\n") + "\n")
			for _, tb := range o.Section.Tables {
				if err := tb.Render(&text, st); err != nil {
					t.Fatal(err)
				}
			}
			if err := report.RenderClaims(&text, o.Claims, st); err != nil {
				t.Fatal(err)
			}
			for _, ch := range o.Section.Charts {
				if len(ch.X) == 0 || !strings.HasPrefix(ch.SVG(), "<svg") {
					t.Errorf("chart %q: empty", ch.Title)
				}
			}
			golden(t, "testdata/"+c.name+".golden.json", append(js, '\n'))
			golden(t, "testdata/"+c.name+".golden.txt", text.Bytes())
		})
	}
}

func golden(t *testing.T, file string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(file, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		out := filepath.Join(t.TempDir(), filepath.Base(file))
		_ = os.WriteFile(out, got, 0o644)
		t.Errorf("%s differs (got %s); go test ./replay -run TestGolden -update if the change is meant", file, out)
	}
}

// TestBadInput: windows that cannot be replayed are ErrInput (exit 2),
// naming the file, never a made-up incident.
func TestBadInput(t *testing.T) {
	storm := readWindow(t, "testdata/storm.json")
	for _, c := range []struct {
		name string
		w    *calibrate.Window
		want string
	}{
		{"too short", readWindow(t, "../calibrate/testdata/lab.json"), "at least 20"},
		{"starts in the incident", storm.Sub(storm.Start.Add(8*time.Second), storm.End), "steps before it"},
		{"no traffic", storm.Sub(storm.Start, storm.Start), "counted no attempt"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := replay.Replay(context.Background(), c.w, replay.Options{})
			if !errors.Is(err, replay.ErrInput) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want ErrInput saying %q", err, c.want)
			}
			// Issue 37: the errors did not say which file.
			if !strings.Contains(err.Error(), "saved answers ") || !strings.Contains(err.Error(), ".json") {
				t.Errorf("error %v does not name the file", err)
			}
		})
	}
}

// TestAdvise replays advise's pick: here from a space of one budgeted
// policy, as advise's own search is minutes long.
func TestAdvise(t *testing.T) {
	w := readWindow(t, "testdata/storm.json")
	f := scenario.Fleet{Name: "budgeted", Timeout: time.Second,
		Retry:  scenario.Retry{MaxRetries: 2, Backoff: scenario.Backoff{Use: "exponential", Base: 25 * time.Millisecond, Cap: 250 * time.Millisecond, Multiplier: 2, Jitter: "full"}},
		Budget: scenario.Budget{Use: scenario.BudgetTokenBucket, TokenBucket: budget.TokenBucketSettings{Ratio: 0.1, Funding: budget.FundedBySuccess, MinTokens: 10, MaxTokens: 100, RetryCost: 1, TimeoutCost: 1}}}
	r, err := replay.Replay(context.Background(), w, replay.Options{Advise: true, AdviseSpace: []scenario.Fleet{f}})
	if err != nil {
		t.Fatal(err)
	}
	var got *replay.Run
	for _, o := range r.Others {
		if o.Name == "advise" {
			got = o
		}
	}
	if got == nil {
		t.Fatalf("no advise run: %s", r.AdviseNote)
	}
	t.Logf("%s: %s, %d lost", got.Change, got.Verdict, got.IntentsLost)
}

// TestConfig replays the captured storm with the policy of a config
// (replay --config), read as calibrate --config reads it: the scenario
// file that made the storm gives the as-is fleet whole, and the replay
// still agrees with the window; one that allows a single retry disagrees
// with the window's retries per intent (a warning, the config's policy
// replayed); an Envoy config cannot describe the lab's layer (ErrInput).
func TestConfig(t *testing.T) {
	w := readWindow(t, "testdata/storm.json")
	read := func(file string) *calibrate.Config {
		p, err := userconfig.Reader{}.Policy([]string{file}, "", importer.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return &calibrate.Config{Fleet: p.Fleet, Sources: p.Sources}
	}
	naive := read("../calibrate/testdata/config/lab-naive.yaml")
	r, err := replay.Replay(context.Background(), w, replay.Options{Config: naive})
	if err != nil {
		t.Fatal(err)
	}
	want := naive.Fleet.Fleet
	want.Name = "as-is"
	if g, _, _ := importer.Export(r.AsIs.Fleet, importer.ScenarioFleet); g != mustExport(t, want) {
		t.Errorf("the as-is fleet is not the config's:\n%s", g)
	}
	if !r.Agrees || r.Calibration.Timeout != 1 || r.Calibration.MaxRetries != 3 || len(r.Disagreements) != 0 || r.Config != naive.Fleet.Origin {
		t.Errorf("agrees %v, calibration %+v, disagreements %+v, config %q", r.Agrees, r.Calibration, r.Disagreements, r.Config)
	}

	one := read("../calibrate/testdata/config/lab-one-retry.yaml")
	r, err = replay.Replay(context.Background(), w, replay.Options{Config: one})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Disagreements) != 1 || r.Disagreements[0].Setting != "retry" || r.Calibration.MaxRetries != 1 {
		t.Errorf("disagreements %+v, max_retries %d: want one on retry, and the config's 1 replayed", r.Disagreements, r.Calibration.MaxRetries)
	}

	// A window without an incident replays nothing, but its config is
	// still compared with it: resil's budget refused retries.
	r, err = replay.Replay(context.Background(), readWindow(t, "../calibrate/testdata/resil.json"), replay.Options{Config: read("../calibrate/testdata/config/resil-no-budget.yaml")})
	if err != nil {
		t.Fatal(err)
	}
	if r.Incident || len(r.Disagreements) == 0 || r.Disagreements[0].Setting != "budget" {
		t.Errorf("a quiet window: incident %v, disagreements %+v; want none and one on the budget", r.Incident, r.Disagreements)
	}

	_, err = replay.Replay(context.Background(), w, replay.Options{Config: read("../importer/testdata/envoy/route.yaml")})
	if !errors.Is(err, replay.ErrInput) || !strings.Contains(err.Error(), "cannot describe the layer lab's metrics count") {
		t.Errorf("an Envoy config for the lab's metrics: error %v, want ErrInput", err)
	}
}

func mustExport(t *testing.T, f scenario.Fleet) string {
	t.Helper()
	s, _, err := importer.Export(f, importer.ScenarioFleet)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
