package experiment

import (
	"context"
	"strings"
	"testing"

	"github.com/retrystorm/retrystorm/scenario"
)

// TestRunDrawsReplicas: a run whose fleets balance and eject draws each
// replica's attempts and failed share, and the replicas ejected; a run
// without replicas draws none of it.
func TestRunDrawsReplicas(t *testing.T) {
	const replicas = `duration: 40s
traffic: {rate: 200, clients: 2}
origin:
  model: capacity
  capacity: 400
  replicas:
    count: 3
    faults:
      - {replica: 0, kind: errors, error_rate: 1}
fleets:
  - name: ejects
    timeout: 1s
    budget: {use: none}
    outlier_detection: {use: envoy, settings: {max_ejection_percent: 50}}
`
	cases := []struct {
		name, yaml string
		want       []string // chart titles
	}{
		{"replicas", replicas, []string{"ejects: attempts at each replica", "ejects: failed share of each replica's attempts", "ejects: replicas ejected by outlier detection"}},
		{"tiers", `duration: 40s
traffic: {rate: 200, clients: 2}
origin:
  model: capacity
  capacity: 400
  replicas:
    count: 3
    faults:
      - {replica: 0, kind: errors, error_rate: 1}
tiers:
  - name: edge
    server: {model: capacity, capacity: 10000, latency: 1ms, replicas: 2}
    client: {timeout: 1s, budget: {use: none}, outlier_detection: {use: envoy, settings: {max_ejection_percent: 50}}}
fleets:
  - {name: users, timeout: 2s, budget: {use: none}}
`, []string{"users → origin: attempts at each replica", "users → origin: failed share of each replica's attempts", "users → origin: replicas ejected by outlier detection"}},
		{"none", "duration: 20s\ntraffic: {rate: 50}\norigin: {model: capacity, capacity: 100, replicas: 3}\nfleets:\n  - {name: a, timeout: 1s, budget: {use: none}}\n", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sc, err := scenario.Parse(c.name+".yaml", []byte(c.yaml))
			if err != nil {
				t.Fatal(err)
			}
			out, err := RunScenario(context.Background(), sc)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, ch := range out.Section.Charts {
				if strings.Contains(ch.Title, "replica") {
					got = append(got, ch.Title)
					if len(ch.Lines) == 0 {
						t.Errorf("%q: no lines", ch.Title)
					}
					if strings.Contains(ch.Title, "ejected") && maxOf(ch.Lines[0].Y) != 1 {
						t.Errorf("%q: at most %v replicas ejected, want the bad one", ch.Title, maxOf(ch.Lines[0].Y))
					}
				}
			}
			if strings.Join(got, "|") != strings.Join(c.want, "|") {
				t.Errorf("replica charts %q, want %q", got, c.want)
			}
			tables := 0
			for _, tb := range out.Section.Tables {
				if strings.HasSuffix(tb.Title, "replica by replica") {
					tables++
				}
			}
			if want := min(len(c.want), 1); tables != want {
				t.Errorf("%d tables of replicas, want %d", tables, want)
			}
		})
	}
}
