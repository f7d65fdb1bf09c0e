package live

import (
	"context"
	"strings"
	"testing"

	"github.com/retrystorm/retrystorm/experiment"
)

const editorYAML = `name: mine
duration: 20s
traffic: {rate: 20, clients: 2}
origin: {model: queue, capacity: 30, workers: 3}
triggers:
  - {kind: capacity, at: 5s, for: 3s, capacity: 5}
fleets:
  - name: naive
    timeout: 1s
    retry: {max_retries: 2}
    budget: {use: none}
  - name: guarded
    timeout: 1s
    retry: {max_retries: 2}
    budget: {use: token_bucket, settings: {budget_ratio: 0.1}}
`

func TestCheckYAML(t *testing.T) {
	c := CheckYAML(editorYAML, RunAs)
	if !c.OK || c.Name != "mine" || len(c.Fleets) != 2 || !c.Auto || c.Seconds <= 0 {
		t.Errorf("a small scenario: %+v", c)
	}
	if c := CheckYAML(editorYAML, "storm"); !c.OK || c.As != "storm" || !c.Auto {
		t.Errorf("as the storm: %+v", c)
	}
	for _, tt := range []struct {
		name, yaml, as, want string
		line                 int
	}{
		{"an unknown key", strings.Replace(editorYAML, "rate: 20", "rat: 20", 1), RunAs, `unknown key "rat"`, 3},
		{"too large", editorYAML + "#" + strings.Repeat("x", MaxYAML), RunAs, "at most 65536", 0},
		{"not UTF-8", editorYAML + "# \xff\n", RunAs, "not UTF-8", 0},
		{"no such experiment", editorYAML, "nope", `no panel "nope"`, 0},
		{"an experiment without a file", editorYAML, "jitter", "runs no scenario file", 0},
		{"too much memory", strings.Replace(editorYAML, "clients: 2", "clients: 1000000", 1), RunAs, "more than the limit of 512 MiB", 0},
	} {
		c := CheckYAML(tt.yaml, tt.as)
		if c.OK || !strings.Contains(c.Error, tt.want) || c.Line != tt.line {
			t.Errorf("%s: %+v, want an error with %q at line %d", tt.name, c, tt.want, tt.line)
		}
	}
	// A long run is checked, not run at once.
	if c := CheckYAML(strings.Replace(editorYAML, "duration: 20s", "duration: 6h", 1), RunAs); !c.OK || c.Auto || c.Seconds < AutoRun {
		t.Errorf("six hours: %+v", c)
	}
}

// TestRunYAML: the editor's scenario runs as `retrystorm run` (tables and
// charts, no claims) and as an experiment's --config (its claims).
func TestRunYAML(t *testing.T) {
	v := Run(context.Background(), RunAs, Request{YAML: editorYAML}, nil)
	if v.Error != "" || len(v.Tables) == 0 || len(v.Charts) == 0 || len(v.Claims) != 0 || !strings.Contains(v.YAML, "name: mine") {
		t.Errorf("run: error %q, %d tables, %d charts, %d claims", v.Error, len(v.Tables), len(v.Charts), len(v.Claims))
	}
	v = Run(context.Background(), "storm", Request{YAML: editorYAML}, nil)
	if v.Error != "" || len(v.Claims) == 0 || v.Title != experiment.Storm.Title {
		t.Errorf("as the storm: error %q, %d claims", v.Error, len(v.Claims))
	}
	if v := Run(context.Background(), RunAs, Request{YAML: "duration: x"}, nil); v.Error == "" {
		t.Error("a bad scenario ran")
	}
}

// TestExamples: the menu holds every experiment's scenario and the peer's
// eight, each valid and run as what it says.
func TestExamples(t *testing.T) {
	var ours, peer int
	for _, x := range Examples() {
		if c := CheckYAML(x.YAML, x.As); !c.OK {
			t.Errorf("%s: %s", x.Name, c.Error)
		}
		if x.As == RunAs {
			peer++
		} else {
			ours++
		}
	}
	if peer != 8 || ours < 10 {
		t.Errorf("%d of the peer's examples, %d experiments", peer, ours)
	}
}
