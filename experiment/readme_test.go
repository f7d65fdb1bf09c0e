package experiment

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
)

// TestReadmePlots keeps the plots the README shows in step with the demo:
// they are drawn from the storm's default run. Run with -update to redraw.
func TestReadmePlots(t *testing.T) {
	out, err := Storm.Run(context.Background(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"Offered load: attempts reaching the origin":   "storm-offered.svg",
		"Goodput: successes whose caller still waited": "storm-goodput.svg",
	}
	found := 0
	for _, c := range out.Section.Charts {
		name, ok := want[c.Title]
		if !ok {
			continue
		}
		found++
		path := filepath.Join("..", "docs", "img", name)
		got := []byte(c.StandaloneSVG())
		if *update {
			if err := os.WriteFile(path, got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		old, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run go test ./experiment -run TestReadmePlots -update)", err)
		}
		if !bytes.Equal(old, got) {
			t.Errorf("%s is out of date with the storm's default run; rerun with -update", path)
		}
	}
	if found != len(want) {
		t.Fatalf("found %d of the README's %d charts", found, len(want))
	}
}
