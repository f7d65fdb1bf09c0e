package scenario

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// TestDocsExamples parses every complete scenario in docs/scenario.md (the
// YAML blocks that start with "name:"), so the page cannot drift from the
// loader.
func TestDocsExamples(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "scenario.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```yaml\n(name:.*?)```").FindAllSubmatch(doc, -1)
	if len(blocks) < 2 {
		t.Fatalf("found %d complete examples in docs/scenario.md, want at least 2", len(blocks))
	}
	for _, b := range blocks {
		if _, err := Parse("docs/scenario.md", b[1]); err != nil {
			t.Errorf("%v\n%s", err, b[1])
		}
	}
}
