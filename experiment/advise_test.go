package experiment

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/retrystorm/retrystorm/report"
	"github.com/retrystorm/retrystorm/scenario"
)

// TestAdviseStorm is the test: advise on the storm, from its
// naive fleet, recommends a policy that recovers in every cell of the
// envelope over every seed.
func TestAdviseStorm(t *testing.T) {
	if testing.Short() {
		t.Skip("advise searches thousands of runs; skipped with -short")
	}
	sc := stormScenario(t)
	r, err := Advise(context.Background(), CheckInput{Fleet: sc.Fleets[0]}, AdviseOptions{Base: sc}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := r.Render(&out, report.Style{}, 5); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", out.String())
	best := r.Best()
	if best.Never != 0 {
		t.Errorf("the recommendation %q never recovered in %d cells", best.Name, best.Never)
	}
	if r.Ranking[0] == 0 {
		t.Error("the naive fleet was recommended")
	}
	if !report.AllHold(r.Claims) {
		t.Error("a claim does not hold")
	}
}

func TestAdviseBound(t *testing.T) {
	sc := stormScenario(t)
	_, err := Advise(context.Background(), CheckInput{Fleet: sc.Fleets[0]}, AdviseOptions{Base: sc, MaxRuns: 100}, Options{})
	if !errors.Is(err, ErrTooBig) {
		t.Fatalf("err = %v, want ErrTooBig", err)
	}
	t.Log(err)
}

var _ = scenario.BudgetNone
