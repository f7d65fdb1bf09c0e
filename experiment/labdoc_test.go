package experiment

import (
	"os"
	"regexp"
	"testing"
)

// docs/lab.md names the lab's third fleet as the lab's output does: it
// called it "naive, drop_expired" where the tables say "naive, deadline
// shedding" (issue 27).
func TestLabDocNamesTheCounterfactual(t *testing.T) {
	storm, err := DefaultScenario("storm")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("../docs/lab.md")
	if err != nil {
		t.Fatal(err)
	}
	_, name := ShedCounterfactual(storm)
	if name == "" {
		t.Fatal("the storm has no counterfactual for the lab")
	}
	quoted := regexp.MustCompile("`naive,\\s+([^`]+)`").FindAllSubmatch(doc, -1)
	if len(quoted) == 0 {
		t.Fatal("docs/lab.md names no counterfactual fleet")
	}
	for _, q := range quoted {
		if got := "naive, " + regexp.MustCompile(`\s+`).ReplaceAllString(string(q[1]), " "); got != name {
			t.Errorf("docs/lab.md calls a fleet %q; the lab calls it %q", got, name)
		}
	}
}
