package verdict

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/experiment"
	"github.com/retrystorm/retrystorm/resil/budget"

	"github.com/retrystorm/retrystorm/internal/race"
	"github.com/retrystorm/retrystorm/scenario"
)

func TestAdviseBound(t *testing.T) {
	sc := stormScenario(t)
	_, err := Advise(context.Background(), CheckInput{Fleet: sc.Fleets[0]}, AdviseOptions{Base: sc, MaxRuns: 100}, experiment.Options{})
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
		Budget: scenario.Budget{Use: scenario.BudgetConcurrency, Concurrency: budget.ConcurrencySettings{MinConcurrency: 3}}}
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

// TestAdviseScreenKeepsTheWinner: the screen (the model, or one seed of
// the simulator) decides what advise simulates at every seed, never what
// it recommends: on the storm's naive fleet (which the model describes)
// and on a fleet with a deadline no intent reaches, the screened search
// recommends what the exhaustive one does, ranks its top in the same
// order, with fewer runs, and says where each candidate's numbers came
// from (issue 29).
func TestAdviseScreenKeepsTheWinner(t *testing.T) {
	if testing.Short() {
		t.Skip("two full searches")
	}
	sc := stormScenario(t)
	deadline := sc.Fleets[0]
	deadline.Name, deadline.Deadline = "with a deadline", 30*time.Second
	for _, user := range []scenario.Fleet{sc.Fleets[0], deadline} {
		t.Run(user.Name, func(t *testing.T) {
			ao := AdviseOptions{Base: sc, Seeds: 2}
			screened, err := Advise(context.Background(), CheckInput{Fleet: user}, ao, experiment.Options{})
			if err != nil {
				t.Fatal(err)
			}
			ao.Exhaustive = true
			all, err := Advise(context.Background(), CheckInput{Fleet: user}, ao, experiment.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if got, want := screened.Best().Name, all.Best().Name; got != want {
				t.Errorf("screened search recommends %q, the exhaustive one %q", got, want)
			}
			var model, sim int
			for pos, i := range screened.Ranking {
				c := screened.Candidates[i]
				if !c.simulated() {
					break
				}
				if want := all.Candidates[all.Ranking[pos]].Name; pos < 3 && c.Name != want {
					t.Errorf("screened #%d is %q, exhaustive #%d %q", pos+1, c.Name, pos+1, want)
				}
			}
			for _, c := range screened.Candidates {
				switch c.Source {
				case sourceSimulator:
					sim++
				case sourceModel, sourceMixed:
					// The envelope's bursts and stalls are beyond the
					// model: it screens the dips, one seed the rest.
					model++
				case sourceScreen:
				default:
					t.Errorf("%s: source %q", c.Name, c.Source)
				}
			}
			if model == 0 {
				t.Error("the model screened out no candidate")
			}
			if screened.Runs >= all.Runs || all.Runs != all.Exhaustive {
				t.Errorf("screened %d runs, exhaustive %d (of %d)", screened.Runs, all.Runs, all.Exhaustive)
			}
			t.Logf("%d simulated at every seed, %d screened out by the model; %d runs of %d", sim, model, screened.Runs, all.Runs)
		})
	}
}

// TestAdviseScreenFallsBack: when the best candidate the screen let
// through still fails somewhere, a candidate it left out could rank
// above it, so every candidate runs at every seed and the search is the
// exhaustive one.
func TestAdviseScreenFallsBack(t *testing.T) {
	if race.Enabled {
		t.Skip("simulator runs compared: numbers, not concurrency; the plain pass runs it")
	}
	sc := stormScenario(t)
	var space []scenario.Fleet
	for n := range 6 {
		f := sc.Fleets[0] // naive: no budget, no breaker; collapses at this load
		f.Name, f.Retry.MaxRetries = fmt.Sprintf("naive, %d retries", n+2), n+2
		space = append(space, f)
	}
	ao := AdviseOptions{Base: sc, Seeds: 1, Space: space, Load: 0.95, Dip: 0.9}
	r, err := Advise(context.Background(), CheckInput{Fleet: sc.Fleets[0]}, ao, experiment.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if b := r.Best(); b.Level == Safe {
		t.Fatalf("%s recovers everywhere: the test needs a space that fails", b.Name)
	}
	for _, c := range r.Candidates {
		// The model screens every cell it describes; the burst of
		// rejections it does not, and one seed of the simulator does.
		if c.Source != sourceSimulator || c.ScreenSource != sourceMixed {
			t.Errorf("%s: source %q, screened by %q; want every candidate simulated after the model's screen (and one seed's where it does not apply)", c.Name, c.Source, c.ScreenSource)
		}
	}
	// Every run the exhaustive search makes, and again each of the
	// screen's that stopped once its collapse was certain (its retries
	// are counted to its end at every seed).
	again := 0
	for _, c := range r.Candidates {
		for _, row := range c.Screen {
			for _, cell := range row {
				if cell.Source == sourceSimulator && cell.EndedEarly != nil {
					again++
				}
			}
		}
	}
	if r.Runs != r.Exhaustive+again {
		t.Errorf("%d runs of %d, and %d again", r.Runs, r.Exhaustive, again)
	}
	ao.Exhaustive = true
	all, err := Advise(context.Background(), CheckInput{Fleet: sc.Fleets[0]}, ao, experiment.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r.Ranking, all.Ranking) {
		t.Errorf("ranking %v, exhaustive %v", r.Ranking, all.Ranking)
	}
}
