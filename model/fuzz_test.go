package model

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/scenario"
)

// FuzzModel: whatever scenario file parses, the model answers or refuses
// with an error, and never panics.
//
//	go test ./model -run '^$' -fuzz FuzzModel -fuzztime 30s
func FuzzModel(f *testing.F) {
	for _, glob := range []string{"../scenario/testdata/*.yaml", "../experiment/scenarios/*.yaml"} {
		files, _ := filepath.Glob(glob)
		for _, file := range files {
			data, err := os.ReadFile(file)
			if err == nil {
				f.Add(data)
			}
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		start := time.Now()
		defer func() {
			if d := time.Since(start); d > 2*time.Second {
				t.Fatalf("took %v", d)
			}
		}()
		sc, err := scenario.Parse("fuzz.yaml", data)
		if err != nil || sc.Duration > 10*time.Minute || sc.Tick < time.Millisecond {
			return // what the parser refuses, or a run too long for a fuzz step
		}
		for _, fl := range sc.Fleets {
			m, err := New(sc, fl)
			if err != nil {
				continue
			}
			if m.steps > 200_000 {
				continue
			}
			r := m.Run()
			if r.Recovered != (r.RecoveryTicks >= 0) {
				t.Fatalf("recovered %v at %d", r.Recovered, r.RecoveryTicks)
			}
		}
	})
}
