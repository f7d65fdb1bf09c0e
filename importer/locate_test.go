package importer

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSettingsAtTheirLines: every format's provenance reads back to the
// file and line the setting is written at, for a CI annotation.
func TestSettingsAtTheirLines(t *testing.T) {
	for _, tc := range []struct {
		files   []string
		format  Format
		setting string
		line    string // the text on the line the setting must point at
	}{
		{[]string{"istio/naive.yaml"}, "", "retry.max_retries", "attempts: 3"},
		{[]string{"istio/budget.yaml"}, "", "budget.budget_percent", "percent: 20"},
		{[]string{"envoy/front-proxy.yaml"}, "", "retry.max_retries", "num_retries"},
		{[]string{"envoy/front-proxy.yaml"}, "", "budget.min_retry_concurrency", "min_retry_concurrency"},
		{[]string{"grpc/service-config.json"}, "", "retry.max_retries", "maxAttempts"},
		{[]string{"linkerd/books.yaml"}, "", "budget.budget_ratio", "retryRatio"},
		{[]string{"aws/config"}, AWS, "retry.max_retries", "max_attempts"},
	} {
		t.Run(tc.files[0]+" "+tc.setting, func(t *testing.T) {
			var srcs []Source
			for _, f := range tc.files {
				name := filepath.Join("testdata", f)
				data, err := os.ReadFile(name)
				if err != nil {
					t.Fatal(err)
				}
				srcs = append(srcs, Source{Name: name, Data: data})
			}
			fl, err := Import(srcs, Options{Format: tc.format, Timeout: 1e9})
			if err != nil {
				t.Fatal(err)
			}
			var got *Setting
			for _, s := range Settings(srcs, fl[0]) {
				if s.Name == tc.setting {
					got = &s
					break
				}
			}
			if got == nil {
				t.Fatalf("no %s in %v", tc.setting, fl[0].From)
			}
			lines := strings.Split(string(srcs[0].Data), "\n")
			if got.File != srcs[0].Name || got.Line < 1 || got.Line > len(lines) || !strings.Contains(lines[got.Line-1], tc.line) {
				t.Errorf("%s at %s:%d, want the line with %q", tc.setting, got.File, got.Line, tc.line)
			}
		})
	}
	// A default has no file.
	if f, l := Locate([]Source{{Name: "a.yaml"}}, Provenance{Default: true, Path: "retry_back_off.max_interval", Rule: "Envoy: 10 times the base"}); f != "" || l != 0 {
		t.Errorf("a default located at %s:%d", f, l)
	}
}

// TestCoveredSettings: a fleet that stands for identical objects has its
// settings read at each object's own line.
func TestCoveredSettings(t *testing.T) {
	var b strings.Builder
	for i := range 3 {
		if i > 0 {
			b.WriteString("---\n")
		}
		b.WriteString("apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: s" + string(rune('a'+i)) + "}\nspec:\n  hosts: [s]\n  http:\n  - route:\n    - destination: {host: s}\n    retries: {attempts: 3, perTryTimeout: 1s}\n")
	}
	srcs := []Source{{Name: "vs.yaml", Data: []byte(b.String())}}
	fl, err := Import(srcs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(fl) != 1 || len(fl[0].Covers) != 2 {
		t.Fatalf("%d fleets, covers %v", len(fl), fl[0].Covers)
	}
	lines := []int{}
	for _, set := range append([][]Setting{Settings(srcs, fl[0])}, CoveredSettings(srcs, fl[0])...) {
		for _, s := range set {
			if s.Name == "retry.max_retries" {
				lines = append(lines, s.Line)
			}
		}
	}
	if len(lines) != 3 || lines[0] != 9 || lines[1] != 19 || lines[2] != 29 {
		t.Errorf("retry.max_retries at lines %v, want [9 19 29]", lines)
	}
}
