package experiment

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/retrystorm/retrystorm/report"
	"github.com/retrystorm/retrystorm/scenario"
)

func stormScenario(t testing.TB) *scenario.Scenario {
	t.Helper()
	sc, err := scenarioFor("storm", Options{})
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// TestCheckStorm is the test: check flags the storm's naive fleet
// (3 retries, no budget) as collapsing in the storm's dip, and passes the
// guarded one (a budget and a breaker).
func TestCheckStorm(t *testing.T) {
	sc := stormScenario(t)
	in := []CheckInput{{Fleet: sc.Fleets[0], Origin: "storm.yaml"}, {Fleet: sc.Fleets[1], Origin: "storm.yaml"}}
	r, err := Check(context.Background(), in, CheckOptions{Base: sc}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := r.Render(&out, report.Style{}); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", out.String())
	if r.RealLoad != 0.833 || r.RealDip != 0.333 {
		t.Errorf("realistic region from the storm: load %v, dip %v; want 0.833 and 0.333", r.RealLoad, r.RealDip)
	}
	if !r.Collapsed(0) {
		t.Errorf("naive (3 retries, no budget) passes the check")
	}
	if r.Collapsed(1) {
		t.Errorf("guarded (budget and breaker) fails the check")
	}
	if report.AllHold(r.Claims) {
		t.Error("every claim holds though naive collapses")
	}
	if _, err := json.Marshal(r); err != nil {
		t.Fatal(err)
	}
	html, err := report.Page{Title: "check", Sections: []report.Section{r.Section()}}.HTML()
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(html, []byte("<svg")); n < 2 {
		t.Errorf("the HTML report has %d maps, want one per fleet", n)
	}
}
