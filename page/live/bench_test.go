package live

import (
	"context"
	"encoding/json"
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
