package verdict

import (
	"bytes"
	"context"
	"encoding/json"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/retrystorm/retrystorm/experiment"
	"github.com/retrystorm/retrystorm/grid"

	"github.com/retrystorm/retrystorm/report"
	"github.com/retrystorm/retrystorm/scenario"
)

// smallShards returns two shards (1/2 and 2/2) of a small sweep, check
// and advise, as JSON: what the merge tests and FuzzMerge start from.
var smallShards = sync.OnceValues(func() (map[string][2][]byte, error) {
	ctx := context.Background()
	sc, err := experiment.DefaultScenario("storm")
	if err != nil {
		return nil, err
	}
	out := map[string][2][]byte{}
	for i := range 2 {
		sh := grid.Shard{Index: i, Count: 2}
		o, err := experiment.Sweep.Run(ctx, experiment.Options{Grid: 2, Shard: sh, Workers: 1})
		if err != nil {
			return nil, err
		}
		c, err := Check(ctx, []CheckInput{{Fleet: sc.Fleets[0], Origin: "storm"}}, CheckOptions{Base: sc, Shard: sh, Seeds: 1}, experiment.Options{Workers: 1})
		if err != nil {
			return nil, err
		}
		a, err := Advise(ctx, CheckInput{Fleet: sc.Fleets[0]}, AdviseOptions{Base: sc, Seeds: 1, Space: []scenario.Fleet{sc.Fleets[1]}, Shard: sh}, experiment.Options{Workers: 1})
		if err != nil {
			return nil, err
		}
		for k, v := range map[string]any{"sweep": o.JSON, "check": c, "advise": a} {
			b, err := json.Marshal(v)
			if err != nil {
				return nil, err
			}
			p := out[k]
			p[i] = b
			out[k] = p
		}
	}
	return out, nil
})

func shardsOf(t testing.TB, kind string) [2][]byte {
	t.Helper()
	all, err := smallShards()
	if err != nil {
		t.Fatal(err)
	}
	return all[kind]
}

// edit returns data with one change made to its JSON tree.
func edit(t *testing.T, data []byte, change func(m map[string]any)) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	change(m)
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func list(n int, v any) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// Issue 27, items 3 and 4: merge panicked (index out of range, exit 1) on
// valid JSON that no shard writes, and allocated what the shards' axes
// asked for (a 1 MB sweep shard with 100,000-entry axes, a 2 MB check
// shard of 30,000 × 30,000 cells). Every shard is checked against its
// schema first: an error naming the file and the field, never a panic,
// and no allocation beyond a small multiple of the input.
func TestMergeRefusesBadShards(t *testing.T) {
	first := func(m map[string]any, key string) map[string]any { return m[key].([]any)[0].(map[string]any) }
	for _, c := range []struct {
		name, kind string
		change     func(m map[string]any)
		want       string
	}{
		{"sweep: a recovery row longer than load", "sweep", func(m map[string]any) {
			row := first(m, "policies")["recovery_ticks"].([]any)
			row[0] = append(row[0].([]any), 1.0)
		}, "a.json: policies[0].recovery_ticks[0]: 3 entries: want 2 to 2"},
		{"sweep: empty load", "sweep", func(m map[string]any) { m["load"] = []any{} }, "a.json: load: 0 entries"},
		{"sweep: empty dip", "sweep", func(m map[string]any) { m["dip"] = []any{} }, "a.json: dip: 0 entries"},
		{"sweep: 100,000-entry axes", "sweep", func(m map[string]any) {
			m["load"], m["dip"] = list(100000, 0.5), list(100000, 0.5)
		}, "a.json: load: 100000 entries: want 2 to 200"},
		{"sweep: no shard", "sweep", func(m map[string]any) { m["shard"] = nil }, "a.json: shard: missing"},
		{"sweep: a policy missing", "sweep", func(m map[string]any) { m["policies"] = m["policies"].([]any)[:5] }, "a.json: policies: 5 entries: want 6 to 6"},
		{"sweep: a cell below -2", "sweep", func(m map[string]any) {
			first(m, "policies")["recovery_ticks"].([]any)[1].([]any)[0] = -7.0
		}, "a.json: policies[0].recovery_ticks[1][0]: -7"},
		{"check: empty loads", "check", func(m map[string]any) { m["loads"] = []any{} }, "a.json: loads: 0 entries"},
		{"check: empty faults", "check", func(m map[string]any) { m["faults"] = []any{} }, "a.json: faults: 0 entries"},
		{"check: 30,000 × 30,000 cells", "check", func(m map[string]any) {
			m["loads"], m["faults"] = list(30000, 0.5), list(30000, map[string]any{"name": "f", "kind": "outage", "for_seconds": 10.0})
		}, "a.json: loads: 30000 entries: want 1 to 16"},
		{"check: a row short of the loads", "check", func(m map[string]any) {
			cells := first(m, "fleets")["runs"].([]any)[0].([]any)[0].([]any)
			cells[2] = cells[2].([]any)[:1]
		}, "a.json: fleets[0].runs[0][0][2]: 1 entries"},
		{"check: NaN-free but absurd rate", "check", func(m map[string]any) { m["rate"] = -1.0 }, "a.json: rate: -1"},
		{"check: a bad shard", "check", func(m map[string]any) { m["shard"] = "3/2" }, `a.json: shard: "3/2"`},
		{"check: a fault of no kind", "check", func(m map[string]any) { first(m, "faults")["kind"] = "\x1b[2J" }, `a.json: faults[0].kind: "\x1b[2J"`},
		{"check: more lost than intents", "check", func(m map[string]any) {
			for _, row := range first(m, "fleets")["runs"].([]any)[0].([]any)[0].([]any) {
				for _, c := range row.([]any) {
					if c := c.(map[string]any); c["ran"] == true {
						c["intents_lost"] = c["intents"].(float64) + 1
						return
					}
				}
			}
		}, ".intents_lost:"},
		{"check: a fault of a negative replica", "check", func(m map[string]any) { first(m, "faults")["replica"] = -1.0 }, "a.json: faults[0].replica: -1: want 0 to 9999"},
		{"check: a fault of an absurd factor", "check", func(m map[string]any) { first(m, "faults")["factor"] = 1e9 }, "a.json: faults[0].factor: 1e+09"},
		{"check: more notes than fleets", "check", func(m map[string]any) { m["notes"] = list(9, "n") }, "a.json: notes: 9 entries"},
		{"check: a string for a number", "check", func(m map[string]any) { m["seed"] = "one" }, "a.json: seed: want a JSON uint64, got string"},
		{"advise: no candidates", "advise", func(m map[string]any) { m["candidates"] = []any{} }, "a.json: candidates: 0 entries"},
		{"advise: no seeds", "advise", func(m map[string]any) { m["seeds"] = []any{} }, "a.json: seeds: 0 entries"},
		{"advise: a fleet the scenario format refuses", "advise", func(m map[string]any) {
			first(m, "candidates")["fleet"].(map[string]any)["timeout"] = -1.0
		}, "a.json: candidates[0].fleet:"},
		{"advise: cells of another seed count", "advise", func(m map[string]any) {
			c := first(m, "candidates")
			c["cells"] = append(c["cells"].([]any), c["cells"].([]any)[0])
		}, "a.json: candidates[0].cells: 2 entries: want 1 to 1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := shardsOf(t, c.kind)
			parts := [][]byte{edit(t, p[0], c.change), p[1]}
			var err error
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("merge panicked: %v", r)
					}
				}()
				_, err = MergeFiles([]string{"a.json", "b.json"}, parts)
			}()
			runtime.ReadMemStats(&after)
			// Decoding costs a small multiple of the input; nothing is
			// made from what the axes claim.
			in := uint64(len(parts[0]) + len(parts[1]))
			if got := after.TotalAlloc - before.TotalAlloc; got > 32*in+16<<20 {
				t.Errorf("merge of %d bytes allocated %d", in, got)
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("merge = %v, want an error saying %q", err, c.want)
			}
		})
	}
	// The second shard is checked against the first.
	p := shardsOf(t, "check")
	other := edit(t, p[1], func(m map[string]any) { m["seed"] = 99.0 })
	if _, err := MergeFiles([]string{"a.json", "b.json"}, [][]byte{p[0], other}); err == nil || !strings.Contains(err.Error(), "b.json: seed: differs from the first result's") {
		t.Errorf("shards of two seeds: %v", err)
	}
	// A fault of one replica is the same fault in both shards (its
	// replica compared by number, not by address), and of another
	// replica a different one.
	withReplica := func(r float64) func(m map[string]any) {
		return func(m map[string]any) { first(m, "faults")["replica"] = r }
	}
	a, b := edit(t, p[0], withReplica(0)), edit(t, p[1], withReplica(0))
	if _, err := MergeFiles([]string{"a.json", "b.json"}, [][]byte{a, b}); err != nil {
		t.Errorf("shards of the same replica fault: %v", err)
	}
	b = edit(t, p[1], withReplica(1))
	if _, err := MergeFiles([]string{"a.json", "b.json"}, [][]byte{a, b}); err == nil || !strings.Contains(err.Error(), "b.json: faults: differs from the first result's") {
		t.Errorf("shards of two replica faults: %v", err)
	}
}

// Names from a shard (policies, fleets, candidates, faults) are quoted
// when they hold anything a terminal acts on, as run quotes a file name:
// "\x1b]52;c;...\x07" asks the terminal to write the clipboard.
func TestMergeQuotesNames(t *testing.T) {
	const evil = "\x1b]52;c;aGk=\x07\x1b[2Jp"
	rename := func(kind string, m map[string]any) {
		switch kind {
		case "sweep":
			m["policies"].([]any)[0].(map[string]any)["policy"] = evil
		case "check":
			m["fleets"].([]any)[0].(map[string]any)["name"] = evil
			m["faults"].([]any)[0].(map[string]any)["name"] = evil
		case "advise":
			m["candidates"].([]any)[1].(map[string]any)["name"] = evil
		}
		m["scenario"] = evil
	}
	for _, kind := range []string{"sweep", "check", "advise"} {
		p := shardsOf(t, kind)
		var parts [][]byte
		for _, d := range p {
			parts = append(parts, edit(t, d, func(m map[string]any) { rename(kind, m) }))
		}
		m, err := Merge(parts)
		if err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		var out bytes.Buffer
		switch kind {
		case "sweep":
			for _, tb := range m.Sweep.Section.Tables {
				_ = tb.Render(&out, report.Style{})
			}
			out.WriteString(strings.Join(m.Sweep.Findings, "\n"))
			for _, c := range m.Sweep.Claims {
				out.WriteString(c.Text)
			}
		case "check":
			_ = m.Check.Render(&out, report.Style{})
		case "advise":
			_ = m.Advise.Render(&out, report.Style{}, 5)
		}
		if bytes.ContainsAny(out.Bytes(), "\x1b\x07") || !strings.Contains(out.String(), `\x1b]52;c;aGk=\a\x1b[2Jp`) {
			t.Errorf("%s: the name reaches the terminal raw, or not at all:\n%q", kind, out.String())
		}
	}
}

// A shard given twice is named by its files.
func TestMergeSameShardTwice(t *testing.T) {
	for _, kind := range []string{"sweep", "check", "advise"} {
		p := shardsOf(t, kind)
		_, err := MergeFiles([]string{"a.json", "b.json", "c.json"}, [][]byte{p[0], p[1], p[0]})
		if err == nil || !strings.Contains(err.Error(), `c.json: shard: "1/2" again: a.json is that shard too`) {
			t.Errorf("%s: %v", kind, err)
		}
	}
}
