package importer

import (
	"strings"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/resil/budget"
	"github.com/retrystorm/retrystorm/scenario"
)

// The three edits issue 35 found wrong, each as a user met it. Each test
// fails on the code before the fix: the gRPC edit added a second spelling
// (grpc-go would keep the old values), the Istio edit wrote attempts: 0
// beside perTryTimeout and retryOn (which Istio refuses), and a host with
// a DestinationRule alone could not be edited at all ("is not there").

// editOne imports files, edits the first fleet (or the one whose origin
// holds at) with rec built from it, and returns the edit and the fleet
// the edited files import as.
func editOne(t *testing.T, at string, rec func(scenario.Fleet) scenario.Fleet, files ...string) ([]Edited, []string, Fleet) {
	t.Helper()
	srcs := readSources(t, files...)
	fl, err := Import(srcs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	from := fl[0]
	for _, f := range fl {
		if strings.Contains(f.Origin, at) {
			from = f
		}
	}
	edited, notes, err := Edit(srcs, from, rec(from.Fleet))
	if err != nil {
		t.Fatalf("Edit: %v", err)
	}
	fl2, err := Import(applyEdits(srcs, edited), Options{})
	if err != nil {
		t.Fatalf("the edited files do not import: %v\n%s", err, diffs(edited))
	}
	for _, f := range fl2 {
		if f.Origin == from.Origin || !strings.Contains(from.Origin, "VirtualService") {
			return edited, notes, f
		}
	}
	return edited, notes, fl2[0]
}

// withRetries is a recommendation of n retries, the rest as the user's.
func withRetries(n int) func(scenario.Fleet) scenario.Fleet {
	return func(u scenario.Fleet) scenario.Fleet {
		u.Retry.MaxRetries = n
		return u
	}
}

func diffs(edited []Edited) string {
	var b strings.Builder
	for _, e := range edited {
		b.WriteString(e.Diff)
	}
	return b.String()
}

// TestEditFollowsTheFilesSpelling: grpc-go's examples write a retry
// policy's keys capitalised (examples/features/retry: "MaxAttempts",
// "InitialBackoff"), which grpc-go reads because encoding/json matches
// keys without regard to case. An edit changes those keys where they are
// and adds none beside them.
func TestEditFollowsTheFilesSpelling(t *testing.T) {
	edited, _, got := editOne(t, "", func(u scenario.Fleet) scenario.Fleet {
		r := u
		r.Retry.MaxRetries = 1
		r.Retry.Backoff.Base, r.Retry.Backoff.Cap = 100*time.Millisecond, time.Second
		r.Budget = scenario.Budget{Use: scenario.BudgetGRPC, GRPC: budget.GRPCThrottleSettings{MaxTokens: 10, TokenRatio: 0.1}}
		return r
	}, "grpc/capitalised.json")
	if len(edited) != 1 {
		t.Fatalf("%d files edited", len(edited))
	}
	after := string(edited[0].After)
	for _, k := range []string{"maxAttempts", "initialBackoff", "maxBackoff"} {
		if strings.Contains(after, `"`+k+`"`) {
			t.Errorf("%q added beside its capitalised spelling:\n%s", k, edited[0].Diff)
		}
	}
	for _, k := range []string{`"MaxAttempts": 2`, `"InitialBackoff": "0.1s"`, `"MaxBackoff": "1s"`, `"retryThrottling": {"maxTokens": 10, "tokenRatio": 0.1}` /* the top level is camelCase */} {
		if !strings.Contains(after, k) {
			t.Errorf("the edit does not say %s:\n%s", k, edited[0].Diff)
		}
	}
	if got.Fleet.Retry.MaxRetries != 1 || got.Fleet.Retry.Backoff.Base != 100*time.Millisecond || got.Fleet.Budget.Use != scenario.BudgetGRPC {
		t.Errorf("read back: %d retries, backoff %v, budget %s", got.Fleet.Retry.MaxRetries, got.Fleet.Retry.Backoff.Base, got.Fleet.Budget.Use)
	}
}

// TestEditIstioNoRetries: Istio refuses attempts: 0 beside perTryTimeout
// or retryOn (validateHTTPRetry, istio/istio 1.30.3
// pkg/config/validation/validation.go): an edit to no retries removes
// them.
func TestEditIstioNoRetries(t *testing.T) {
	edited, notes, got := editOne(t, "", withRetries(0), "istio/reviews.yaml")
	if len(edited) != 1 {
		t.Fatalf("%d files edited", len(edited))
	}
	after := string(edited[0].After)
	if !strings.Contains(after, "attempts: 0") || strings.Contains(after, "perTryTimeout") || strings.Contains(after, "retryOn") {
		t.Errorf("not a retries block Istio takes:\n%s", edited[0].Diff)
	}
	if !strings.Contains(after, "consecutive5xxErrors: 7") {
		t.Errorf("the DestinationRule changed:\n%s", edited[0].Diff)
	}
	if got.Fleet.Retry.MaxRetries != 0 {
		t.Errorf("read back with %d retries", got.Fleet.Retry.MaxRetries)
	}
	if !strings.Contains(strings.Join(notes, "\n"), "perTryTimeout and retryOn removed") {
		t.Errorf("the notes do not say what was removed: %q", notes)
	}
}

// TestEditIstioDefaultRoute: a DestinationRule alone (bookinfo's) leaves
// its host on Istio's default route and retries; the edit adds a
// VirtualService document, a new file beside it, that says the retries.
func TestEditIstioDefaultRoute(t *testing.T) {
	edited, notes, got := editOne(t, "", withRetries(1), "istio/destination-rule-reviews.yaml")
	if len(edited) != 1 || edited[0].Before != nil || !strings.HasSuffix(edited[0].Name, ".yaml") || edited[0].Name == "istio/destination-rule-reviews.yaml" {
		t.Fatalf("want one new file; got %d: %s", len(edited), diffs(edited))
	}
	if !strings.HasPrefix(edited[0].Diff, "--- /dev/null\n") || !strings.Contains(edited[0].Diff, "@@ -0,0 +1,") {
		t.Errorf("the diff of a new file:\n%s", edited[0].Diff)
	}
	if got.Fleet.Retry.MaxRetries != 1 || !strings.Contains(got.Origin, "VirtualService") {
		t.Errorf("read back: %s with %d retries", got.Origin, got.Fleet.Retry.MaxRetries)
	}
	if !strings.Contains(strings.Join(notes, "\n"), "apply it beside DestinationRule reviews") {
		t.Errorf("the notes do not say where the new file goes: %q", notes)
	}
}
