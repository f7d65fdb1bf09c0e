package configcmd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"runtime"
	"testing"

	"github.com/retrystorm/retrystorm/experiment"
	"github.com/retrystorm/retrystorm/grid"
	"github.com/retrystorm/retrystorm/report"
	"github.com/retrystorm/retrystorm/report/document"
	"github.com/retrystorm/retrystorm/scenario"
	"github.com/retrystorm/retrystorm/verdict"
)

// shardSeeds returns the two shards (1/2, 2/2) of a small sweep, check and
// advise, as their commands write them.
func shardSeeds(f *testing.F) [][2][]byte {
	ctx := context.Background()
	e, _ := experiment.Lookup("storm")
	sc, err := scenario.Parse("storm.yaml", e.Config)
	if err != nil {
		f.Fatal(err)
	}
	var out [][2][]byte
	for _, kind := range []string{"sweep", "check", "advise"} {
		var pair [2][]byte
		for i := range 2 {
			sh := grid.Shard{Index: i, Count: 2}
			var v any
			switch kind {
			case "sweep":
				o, err := experiment.Sweep.Run(ctx, experiment.Options{Grid: 2, Shard: sh, Workers: 1})
				if err != nil {
					f.Fatal(err)
				}
				v = o.JSON
			case "check":
				v, err = verdict.Check(ctx, []verdict.CheckInput{{Fleet: sc.Fleets[0], Origin: "storm"}}, verdict.CheckOptions{Base: sc, Shard: sh}, experiment.Options{Workers: 1})
			case "advise":
				v, err = verdict.Advise(ctx, verdict.CheckInput{Fleet: sc.Fleets[0]}, verdict.AdviseOptions{Base: sc, Seeds: 1, Space: sc.Fleets[1:2], Shard: sh}, experiment.Options{Workers: 1})
			}
			if err != nil {
				f.Fatal(err)
			}
			if pair[i], err = json.MarshalIndent(v, "", "  "); err != nil {
				f.Fatal(err)
			}
		}
		out = append(out, pair)
	}
	return out
}

// FuzzMerge is merge end to end (issue 27): the bytes of two shard files
// in, through the command as retrystorm merge runs it (reading, checking,
// merging, printing the tables, the recommendation in every format, the
// HTML report), out an exit status: 0, 1 (unsafe) or 2 (a usage error
// naming the file), never a panic, and memory bounded by a small
// multiple of the input.
func FuzzMerge(f *testing.F) {
	for _, pair := range shardSeeds(f) {
		f.Add(pair[0], pair[1])
		f.Add(pair[0], pair[0])
		f.Add(pair[1], []byte("{}"))
	}
	// The shards of a check --stack (on the cheaper storm: a seed).
	var stack [2][]byte
	for i := range 2 {
		var b bytes.Buffer
		ci := CI{Stack: []string{stackdata("app-grpc.json"), stackdata("mesh.yaml")}}
		if err := RunCheck(context.Background(), nil, CheckOptions{Seeds: 1, Base: stackdata("short-base.yaml"), JSON: true, Shard: fmt.Sprintf("%d/2", i+1), CI: ci}, IO{Stdout: &b, Stderr: new(bytes.Buffer)}); err != nil {
			f.Fatal(err)
		}
		stack[i] = b.Bytes()
	}
	f.Add(stack[0], stack[1])
	f.Add(stack[1], stack[1])
	f.Add([]byte(`{"stack_shard":"1/2","source":"x","chains":[{"chain":"a","distinct":3,"layers":[]}],"distinct":[null]}`), stack[1])
	f.Add([]byte(`{"load":[],"dip":[],"policies":[],"shard":{"part":"1/1"}}`), []byte(`{}`))
	f.Add([]byte(`{"loads":[],"faults":[],"fleets":[]}`), []byte(`{"candidates":[],"seeds":[]}`))
	out := f.TempDir()
	f.Fuzz(func(t *testing.T, a, b []byte) {
		files := map[string][]byte{"a.json": a, "b.json": b}
		o := IO{Stdout: new(bytes.Buffer), Stderr: new(bytes.Buffer), ReadFile: func(name string) ([]byte, error) {
			if d, ok := files[name]; ok {
				return d, nil
			}
			return nil, fs.ErrNotExist
		}}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		sweep, _, err := RunMerge(context.Background(), []string{"a.json", "b.json"}, MergeOptions{Out: out}, o)
		if err == nil && sweep != nil {
			// The command prints a sweep as the sweep prints.
			for _, tb := range sweep.Section.Tables {
				err = errors.Join(err, tb.Render(o.Stdout, report.Style{}))
			}
			_, herr := document.HTML(report.Page{Title: "merge", Sections: []report.Section{sweep.Section}})
			err = errors.Join(err, herr)
		}
		runtime.ReadMemStats(&after)
		var ue *UsageError
		if err != nil && !errors.As(err, &ue) && !errors.Is(err, ErrUnsafe) {
			t.Fatalf("merge: %v: want exit status 0, 1 (unsafe) or 2 (a usage error)", err)
		}
		// Merging, printing and the report take what the cells take, a few
		// hundred bytes each, and the input a small multiple: never what
		// the shards claim their axes hold.
		in := uint64(len(a) + len(b))
		if got, limit := after.TotalAlloc-before.TotalAlloc, 256<<20+200*in; got > limit {
			t.Errorf("merge of %d bytes allocated %s, more than %s", in, fmt.Sprint(got), fmt.Sprint(limit))
		}
	})
}
