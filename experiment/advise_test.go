package experiment

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/scenario"
)

func TestAdviseBound(t *testing.T) {
	sc := stormScenario(t)
	_, err := Advise(context.Background(), CheckInput{Fleet: sc.Fleets[0]}, AdviseOptions{Base: sc, MaxRuns: 100}, Options{})
	if !errors.Is(err, ErrTooBig) {
		t.Fatalf("err = %v, want ErrTooBig", err)
	}
	t.Log(err)
}

// TestAdviseCandidatesKeepTheUsers: without --conditions every candidate
// retries what the user's fleet retries (a gRPC config retrying
// UNAVAILABLE once gained INTERNAL), and a user with a limit on retries
// gets no candidate without one (an Envoy cluster's max_retries once
// became 4294967295, "no limit").
func TestAdviseCandidatesKeepTheUsers(t *testing.T) {
	user := scenario.Fleet{Name: "u", Timeout: time.Second,
		Retry:  scenario.Retry{MaxRetries: 3, On: []string{scenario.RetryOnRejection}},
		Budget: scenario.Budget{Use: scenario.BudgetConcurrency, MinConcurrency: 3}}
	for _, c := range adviseCandidates(user, false) {
		if !slices.Equal(c.Fleet.Retry.On, user.Retry.On) {
			t.Errorf("%s retries %v, not the user's %v", c.Name, c.Fleet.Retry.On, user.Retry.On)
		}
		if c.Fleet.Budget.Use == scenario.BudgetNone {
			t.Errorf("%s has no budget: it removes the user's limit", c.Name)
		}
	}
	changed := false
	for _, c := range adviseCandidates(user, true) {
		changed = changed || !slices.Equal(c.Fleet.Retry.On, user.Retry.On)
	}
	if !changed {
		t.Error("with --conditions no candidate changes what is retried")
	}
}
