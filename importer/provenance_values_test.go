package importer

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/retrystorm/retrystorm/scenario"
)

// TestProvenanceSaysTheValue: every setting a fleet's provenance names
// has, in the note, the value the fleet holds (issue 37, item 11: the
// Linkerd import's note said retry.on [error, rejection] beside a fleet
// retrying gateway answers too, and the AWS one a budget.use the fleet did
// not have). The note and the value must come from one place.
func TestProvenanceSaysTheValue(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*", "*"))
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, file := range files {
		if strings.Contains(file, "golden") || strings.Contains(file, "fuzz") {
			continue
		}
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		fl, err := Import([]Source{{Name: file, Data: data}}, Options{Timeout: time.Second})
		if err != nil {
			continue // a file that needs another beside it, or is refused on purpose
		}
		for _, f := range fl {
			held := fleetValues(t, f.Fleet)
			for _, v := range f.From {
				for _, s := range v.Settings {
					got, ok := held[s]
					if !ok || v.Value == "" || v.Value == AsWritten {
						continue
					}
					if strings.HasPrefix(got, "map[") {
						continue // a group of keys (retry.backoff), which the note describes in words
					}
					checked++
					if !same(s, got, v.Value) {
						t.Errorf("%s: fleet %q: the note says %s: %s, the fleet holds %s", file, f.Fleet.Name, s, v.Value, got)
					}
				}
			}
		}
	}
	if checked < 50 {
		t.Fatalf("only %d settings compared: the test reads too little to mean anything", checked)
	}
}

// fleetValues are f's settings as its scenario file writes them, by key
// ("retry.on", "budget.budget_ratio" for budget.settings.budget_ratio).
func fleetValues(t *testing.T, f scenario.Fleet) map[string]string {
	t.Helper()
	sc := &scenario.Scenario{Fleets: []scenario.Fleet{f}}
	var doc struct {
		Fleets []map[string]any `yaml:"fleets"`
	}
	if err := yaml.Unmarshal(scenario.Marshal(sc), &doc); err != nil || len(doc.Fleets) != 1 {
		t.Fatalf("fleet %q: %v", f.Name, err)
	}
	out := map[string]string{}
	for k, v := range doc.Fleets[0] {
		m, ok := v.(map[string]any)
		if !ok {
			out[k] = fmt.Sprint(v)
			continue
		}
		for k2, v2 := range m {
			if k2 == "settings" {
				if s, ok := v2.(map[string]any); ok {
					for k3, v3 := range s {
						out[k+"."+k3] = fmt.Sprint(v3)
					}
				}
				continue
			}
			out[k+"."+k2] = fmt.Sprint(v2)
		}
	}
	return out
}

// same reports whether a note's value says what the fleet holds: lists
// alike with or without commas, and "none" for no timeout (24h, the
// longest the simulator takes) or no deadline (0s).
func same(setting, held, said string) bool {
	norm := func(s string) string { return strings.NewReplacer(",", "", " ", "").Replace(s) }
	switch {
	case said == "none" && setting == "timeout":
		return held == "24h"
	case said == "none" && setting == "deadline":
		return held == "0s"
	}
	return norm(held) == norm(said)
}
