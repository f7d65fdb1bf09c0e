package full

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/retrystorm/retrystorm/internal/race"
)

// TestReplayCommand: the captured lab storm replays (exit 0: the replay
// agrees with the window), its JSON carries the verdicts; a steady window
// says there is no incident and exits 0; what cannot be replayed is exit
// 2 with a message.
func TestReplayCommand(t *testing.T) {
	// The storm's replay runs every counterfactual and advise's search:
	// simulations, numbers not concurrency, that the race detector makes
	// a minute long. The plain pass runs it; the race pass keeps the rest.
	if !race.Enabled {
		replayStorm(t)
	}
	r := runCLI(t, "replay", "--file", "../../../../calibrate/testdata/haproxy.json", "--out", t.TempDir())
	if r.code != 0 || !strings.Contains(r.stdout, "no incident in the window") {
		t.Errorf("a steady window: exit %d, %q", r.code, r.stdout)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"replay"}, "replay needs --prometheus URL or --file FILE"},
		{[]string{"replay", "x.json"}, "takes no arguments"},
		{[]string{"replay", "--prometheus", "http://127.0.0.1:1", "--timeout", "2s"}, "cannot read from Prometheus at http://127.0.0.1:1"},
		{[]string{"replay", "--file", "../../../../calibrate/testdata/lab.json"}, "at least 20 are needed"},
	} {
		r := runCLI(t, c.args...)
		msg := strings.Join(strings.Fields(r.stderr), " ")
		if r.code != 2 || !strings.Contains(msg, c.want) || r.stdout != "" {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit 2 saying %q", strings.Join(c.args, " "), r.code, r.stdout, r.stderr, c.want)
		}
	}
}

// replayStorm replays the captured lab storm: exit 0, and JSON with the
// incident, its trigger, the agreement and the change that prevents it.
func replayStorm(t *testing.T) {
	t.Helper()
	r := runCLI(t, "replay", "--file", "../../../../replay/testdata/storm.json", "--json")
	if r.code != 0 {
		t.Fatalf("replay: exit %d\n%s", r.code, r.stderr)
	}
	var got struct {
		Incident bool `json:"incident"`
		Trigger  struct {
			Kind string `json:"kind"`
		} `json:"trigger"`
		Agrees   bool   `json:"agrees"`
		Prevents string `json:"prevents"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatal(err)
	}
	if !got.Incident || got.Trigger.Kind != "capacity" || !got.Agrees || got.Prevents == "" {
		t.Errorf("replay JSON %+v", got)
	}
}

// TestReplayConfig: replay --config replays the captured storm with the
// policy of the scenario file that made it (its naive fleet: 1s, three
// retries, no budget) instead of calibrate's defaults, and still agrees
// with the window; a config of another layer is exit 2.
func TestReplayConfig(t *testing.T) {
	const naive = "../../../../calibrate/testdata/config/lab-naive.yaml"
	r := runCLI(t, "replay", "--file", "../../../../replay/testdata/storm.json", "--config", naive, "--no-advise", "--json")
	if r.code != 0 {
		t.Fatalf("replay --config: exit %d\n%s", r.code, r.stderr)
	}
	var got struct {
		Config      string `json:"config"`
		Agrees      bool   `json:"agrees"`
		Calibration struct {
			Timeout    float64 `json:"timeout_seconds"`
			MaxRetries int     `json:"max_retries"`
			Budget     bool    `json:"budget"`
			TimeoutNte string  `json:"timeout_note"`
		} `json:"calibration"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatal(err)
	}
	c := got.Calibration
	if !got.Agrees || !strings.HasPrefix(got.Config, naive+": fleets[0]") || c.Timeout != 1 || c.MaxRetries != 3 || c.Budget ||
		!strings.Contains(c.TimeoutNte, "from "+naive+":12") {
		t.Errorf("replay --config: %+v", got)
	}
	r = runCLI(t, "replay", "--file", "../../../../replay/testdata/storm.json", "--config", "../../../../importer/testdata/envoy/route.yaml", "--no-advise")
	msg := strings.Join(strings.Fields(r.stderr), " ")
	if r.code != 2 || !strings.Contains(msg, "is an envoy config, which cannot describe the layer lab's metrics count") {
		t.Errorf("replay with an Envoy config for the lab's metrics: exit %d, %q", r.code, msg)
	}
}
