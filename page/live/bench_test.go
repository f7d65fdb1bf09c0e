package live

import (
	"context"
	"encoding/json"

	"github.com/retrystorm/retrystorm/experiment"
	"github.com/retrystorm/retrystorm/scenario"
	"testing"
)

// BenchmarkPanel computes each panel with its default knobs, natively, as
// the page's worker does after a knob moves (the experiment, its claims,
// tables and SVG charts), then encodes the view to JSON as the worker
// does: what a slider step costs before WebAssembly's own factor.
//
//	go test -run '^$' -bench Panel -benchmem ./page/live
func BenchmarkPanel(b *testing.B) {
	panels, err := Panels()
	if err != nil {
		b.Fatal(err)
	}
	for _, p := range panels {
		b.Run(p.Name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				v := Run(context.Background(), p.Name, Request{}, nil)
				if v.Error != "" {
					b.Fatal(v.Error)
				}
				if _, err := json.Marshal(v); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkPanelParts splits a slider step of the cheap panels into its
// parts: the experiment alone (the simulator, its tables and claims), its
// SVG charts, the YAML of its scenario, the whole view (all of these), and
// the JSON the worker hands the page. Run it natively, or in WebAssembly under Node, which is
// V8 as in the browser:
//
//	go test -run '^$' -bench PanelParts ./page/live
//	GOOS=js GOARCH=wasm go test -exec "$(go env GOROOT)/lib/wasm/go_js_wasm_exec" -run '^$' -bench PanelParts ./page/live
func BenchmarkPanelParts(b *testing.B) {
	for _, name := range []string{"fleets", "storm", "jitter"} {
		e, err := lookup(name)
		if err != nil {
			b.Fatal(err)
		}
		sc, _, err := Scenario(name, Request{})
		if err != nil {
			b.Fatal(err)
		}
		b.Run(name+"/experiment", func(b *testing.B) {
			for b.Loop() {
				if _, err := e.Run(context.Background(), experiment.Options{Scenario: sc}); err != nil {
					b.Fatal(err)
				}
			}
		})
		out, err := e.Run(context.Background(), experiment.Options{Scenario: sc})
		if err != nil {
			b.Fatal(err)
		}
		b.Run(name+"/charts", func(b *testing.B) {
			for b.Loop() {
				for _, c := range out.Section.Charts {
					_ = c.SVG()
				}
			}
		})
		if sc != nil {
			b.Run(name+"/yaml", func(b *testing.B) {
				for b.Loop() {
					_ = scenario.Marshal(sc)
				}
			})
		}
		b.Run(name+"/view", func(b *testing.B) {
			for b.Loop() {
				Run(context.Background(), name, Request{}, nil)
			}
		})
		v := Run(context.Background(), name, Request{}, nil)
		b.Run(name+"/json", func(b *testing.B) {
			for b.Loop() {
				if _, err := json.Marshal(v); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSweepEngine is the sweep panel by engine (issue 29): the
// simulator in every cell, the model's map, and the model refined by the
// simulator near its boundary.
//
//	go test -run '^$' -bench SweepEngine -cpu 1 ./page/live
func BenchmarkSweepEngine(b *testing.B) {
	for _, engine := range []string{experiment.EngineSim, experiment.EngineModel, experiment.EngineBoth} {
		b.Run(engine, func(b *testing.B) {
			for b.Loop() {
				if v := Run(context.Background(), "sweep", Request{Engine: engine}, nil); v.Error != "" {
					b.Fatal(v.Error)
				}
			}
		})
	}
}
