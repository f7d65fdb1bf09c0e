package verdict

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/retrystorm/retrystorm/experiment"
	"github.com/retrystorm/retrystorm/grid"
	"github.com/retrystorm/retrystorm/report/document"

	"github.com/retrystorm/retrystorm/report"
	"github.com/retrystorm/retrystorm/scenario"
)

func jsonOf(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func sameBytes(t *testing.T, what string, one, merged []byte) {
	t.Helper()
	if !bytes.Equal(one, merged) {
		t.Errorf("%s: the merged shards differ from one run:\none run:\n%s\nmerged:\n%s", what, one, merged)
	}
}

// TestMergeCheck: a check split into three shards, each written as JSON,
// merges into the same JSON and the same printed report as one run, byte
// for byte.
func TestMergeCheck(t *testing.T) {
	sc := stormScenario(t)
	in := []CheckInput{{Fleet: sc.Fleets[0], Origin: "storm"}, {Fleet: sc.Fleets[1], Origin: "storm"}}
	// One seed: sharding is what is tested, and each seed is one more
	// full check under the race detector.
	one, err := Check(context.Background(), in, CheckOptions{Base: sc, Seeds: 1}, experiment.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var parts [][]byte
	for i := range 3 {
		r, err := Check(context.Background(), in, CheckOptions{Base: sc, Shard: grid.Shard{Index: i, Count: 3}, Seeds: 1}, experiment.Options{Workers: 1})
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, jsonOf(t, r))
	}
	m, err := Merge(parts)
	if err != nil {
		t.Fatal(err)
	}
	sameBytes(t, "check JSON", jsonOf(t, one), jsonOf(t, m.Check))
	var a, b bytes.Buffer
	_ = one.Render(&a, report.Style{})
	_ = m.Check.Render(&b, report.Style{})
	sameBytes(t, "check report", a.Bytes(), b.Bytes())
	if _, err := Merge(parts[:2]); err == nil {
		t.Error("two shards of three merged without a word")
	}
	if _, err := Merge(append(parts, parts[0])); err == nil {
		t.Error("a shard given twice merged without a word")
	}
}

// TestMergeSweep does the same for a small sweep.
func TestMergeSweep(t *testing.T) {
	one, err := experiment.Sweep.Run(context.Background(), experiment.Options{Grid: 4})
	if err != nil {
		t.Fatal(err)
	}
	var parts [][]byte
	for i := range 4 {
		o, err := experiment.Sweep.Run(context.Background(), experiment.Options{Grid: 4, Shard: grid.Shard{Index: i, Count: 4}})
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, jsonOf(t, o.JSON))
	}
	m, err := Merge(parts)
	if err != nil {
		t.Fatal(err)
	}
	sameBytes(t, "sweep JSON", jsonOf(t, one.JSON), jsonOf(t, m.Sweep.JSON))
	var a, b bytes.Buffer
	for _, tb := range one.Section.Tables {
		_ = tb.Render(&a, report.Style{})
	}
	for _, tb := range m.Sweep.Section.Tables {
		_ = tb.Render(&b, report.Style{})
	}
	sameBytes(t, "sweep table", a.Bytes(), b.Bytes())
	if !bytes.Equal([]byte(one.Section.Figures[0]), []byte(m.Sweep.Section.Figures[0])) {
		t.Error("sweep map: the merged heatmap differs from one run's")
	}
}

// TestMergeAdvise does the same for a small search: the same ranking,
// recommendation and evidence.
func TestMergeAdvise(t *testing.T) {
	sc := stormScenario(t)
	space := []scenario.Fleet{sc.Fleets[1]}
	budget := sc.Fleets[1]
	budget.Name, budget.Breaker = "budget only", scenario.Breaker{Use: scenario.BreakerNone}
	space = append(space, budget)
	ao := AdviseOptions{Base: sc, Seeds: 1, Space: space}
	one, err := Advise(context.Background(), CheckInput{Fleet: sc.Fleets[0]}, ao, experiment.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var parts [][]byte
	for i := range 3 {
		ao.Shard = grid.Shard{Index: i, Count: 3}
		r, err := Advise(context.Background(), CheckInput{Fleet: sc.Fleets[0]}, ao, experiment.Options{Workers: 1})
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, jsonOf(t, r))
	}
	m, err := Merge(parts)
	if err != nil {
		t.Fatal(err)
	}
	sameBytes(t, "advise JSON", jsonOf(t, one), jsonOf(t, m.Advise))
	var a, b bytes.Buffer
	_ = one.Render(&a, report.Style{}, 3)
	_ = m.Advise.Render(&b, report.Style{}, 3)
	sameBytes(t, "advise report", a.Bytes(), b.Bytes())
	if one.Best().Name == "yours: naive" {
		t.Error("the naive fleet was recommended")
	}
	html, err := document.HTML(report.Page{Title: "advise", Sections: []report.Section{m.Advise.Section(3)}})
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(html, []byte("<svg")); n < 3 {
		t.Errorf("the HTML report has %d maps, want yours and the candidates'", n)
	}
}

// TestMergeRefusesModelCells: a shard is always the simulator's (check
// --model and advise's screen do not shard), so a shard whose cell or
// candidate says it came from the model is refused, naming the field.
func TestMergeRefusesModelCells(t *testing.T) {
	sc := stormScenario(t)
	r, err := Check(context.Background(), []CheckInput{{Fleet: sc.Fleets[1]}}, CheckOptions{Base: sc, Seeds: 1, Shard: grid.Shard{Index: 0, Count: 2}}, experiment.Options{})
	if err != nil {
		t.Fatal(err)
	}
	part := jsonOf(t, r)
	bad := bytes.Replace(part, []byte(`"source": "simulator"`), []byte(`"source": "model"`), 1)
	if bytes.Equal(bad, part) {
		t.Fatal("no cell says its source")
	}
	_, err = Merge([][]byte{bad})
	if err == nil || !strings.Contains(err.Error(), ".source") {
		t.Errorf("err = %v, want one naming the source", err)
	}
}
