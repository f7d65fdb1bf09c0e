package experiment

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/retrystorm/retrystorm/internal/golden"
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
		golden.Check(t, filepath.Join("..", "docs", "img", name), []byte(c.StandaloneSVG()), "go test ./experiment -run TestReadmePlots -update")
	}
	if found != len(want) {
		t.Fatalf("found %d of the README's %d charts", found, len(want))
	}
}
