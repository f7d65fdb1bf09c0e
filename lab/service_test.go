package lab

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestTargetVerdictsAreAboutTheService: against a fast service, without
// --impose, no claim rests on the scenario's modelled origin (issue 26: a
// plain --target run against a fast server failed claims about the
// model): the claims are what the target did, the comparison with the
// model is a labelled section of notes, and the JSON has it apart.
func TestTargetVerdictsAreAboutTheService(t *testing.T) {
	if testing.Short() {
		t.Skip("a storm against a service takes a few seconds: skipped with -short")
	}
	fast := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok\n")
	}))
	u, err := url.Parse(fast)
	if err != nil {
		t.Fatal(err)
	}
	sc := tinyScenario(t)
	m, err := Measure(context.Background(), sc, ExperimentOptions{Tick: 50 * time.Millisecond, Storm: true, Target: &Target{URL: u}})
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(m.Outcome.JSON)
	if err != nil {
		t.Fatal(err)
	}
	var js struct {
		Claims    []struct{ Text string } `json:"claims"`
		NotJudged []struct{ Text string } `json:"claims_not_judged"`
		Model     []struct{ Text string } `json:"model_comparison"`
	}
	if err := json.Unmarshal(data, &js); err != nil {
		t.Fatal(err)
	}
	claims := append(js.Claims, js.NotJudged...)
	var texts []string
	for _, c := range claims {
		texts = append(texts, c.Text)
	}
	all := strings.Join(texts, "\n")
	for _, want := range []string{"naive sent the target at most 4.00 attempts per intent", "guarded (guarded) recovers at the target"} {
		if !strings.Contains(all, want) {
			t.Errorf("claims lack %q:\n%s", want, all)
		}
	}
	if strings.Contains(all, "simulator") || strings.Contains(all, "collapses") {
		t.Errorf("a claim rests on the modelled origin:\n%s", all)
	}
	if len(js.Model) == 0 {
		t.Errorf("the JSON has no model comparison: %s", data)
	}
	if tb := m.Outcome.Section.Tables[0].Title; tb != "at the target: what the service did" {
		t.Errorf("first table %q", tb)
	}
	notes := strings.Join(m.Outcome.Section.Notes, "\n")
	if !strings.Contains(notes, "Model comparison, not claimed") {
		t.Errorf("the notes do not label the model comparison:\n%s", notes)
	}
}
