package importer

import (
	"errors"
	"strings"
	"testing"

	"github.com/retrystorm/retrystorm/scenario"
)

// TestValidateEditedRefuses: each product's parser refuses what the
// product refuses, and only what an edit added counts. Controls: the
// same files unedited pass.
func TestValidateEditedRefuses(t *testing.T) {
	for _, tc := range []struct {
		name   string
		format Format
		file   string
		from   string
		to     string
		says   string
	}{
		// validateHTTPRetry (istio/istio 1.30.3).
		{"istio attempts 0", Istio, "istio/reviews.yaml", "attempts: 3", "attempts: 0", "attempts are set to 0"},
		{"istio retryOn", Istio, "istio/reviews.yaml", "retryOn: 5xx", "retryOn: 5xx,sometimes", `"sometimes" is not a valid retryOn policy`},
		{"istio perTryTimeout", Istio, "istio/reviews.yaml", "perTryTimeout: 2s", "perTryTimeout: 1500us", "ms precision"},
		// istio.io/api read strictly: an unknown field.
		{"istio unknown field", Istio, "istio/reviews.yaml", "perTryTimeout: 2s", "perTryTimeout: 2s\n      perTryTimout: 2s", "perTryTimout"},
		// gRFC A6, in grpc-go's parser: maxAttempts of 2 or more.
		{"grpc maxAttempts 1", GRPC, "grpc/service-config.json", `"maxAttempts": 4`, `"maxAttempts": 1`, "grpc-go"},
		// go-control-plane's Validate: RetryBackOff.base_interval > 0.
		{"envoy base_interval", Envoy, "envoy/front-proxy.yaml", "base_interval: 0.1s", "base_interval: 0s", "base_interval"},
		// Linkerd: RetryRatio must be non-negative.
		{"linkerd ratio", Linkerd, "linkerd/books.yaml", "retryRatio: 0.2", "retryRatio: -0.2", "non-negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := readSources(t, tc.file)[0]
			if !strings.Contains(string(src.Data), tc.from) {
				t.Fatalf("%s does not say %q", tc.file, tc.from)
			}
			if err := ValidateEdited(tc.format, []Edited{{Name: src.Name, Before: src.Data, After: src.Data}}); err != nil {
				t.Fatalf("the control, %s as it is: %v", tc.file, err)
			}
			bad := []byte(strings.Replace(string(src.Data), tc.from, tc.to, 1))
			err := ValidateEdited(tc.format, []Edited{{Name: src.Name, Before: src.Data, After: bad}})
			if !errors.Is(err, ErrNotAccepted) || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("got %v, want ErrNotAccepted saying %q", err, tc.says)
			}
			// What the file already had is not the edit's doing.
			if err := ValidateEdited(tc.format, []Edited{{Name: src.Name, Before: bad, After: bad}}); err != nil {
				t.Errorf("an error the file had before the edit: %v", err)
			}
		})
	}
}

// TestReadBackIsAnError: edited files that import as something else than
// the recommendation are an error wrapping ErrReadBack, not a note.
func TestReadBackIsAnError(t *testing.T) {
	srcs := readSources(t, "grpc/service-config.json")
	fl, err := Import(srcs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := fl[0].Fleet
	if _, err := checkEdit(srcs, nil, fl[0], want, Options{}); err != nil {
		t.Fatalf("the control, the files as they are: %v", err)
	}
	want.Retry.MaxRetries = 2 // the files say 3
	_, err = checkEdit(srcs, nil, fl[0], want, Options{})
	if !errors.Is(err, ErrReadBack) || !strings.Contains(err.Error(), "max_retries 3, not 2") {
		t.Errorf("got %v, want ErrReadBack naming the retries", err)
	}
	// A recommendation without a budget keeps the user's limit: the
	// edit reads back as that, not as no budget.
	rec := fl[0].Fleet
	rec.Budget = scenario.Budget{Use: scenario.BudgetNone}
	if got := asWritten(fl[0], rec); !got.Budget.Equal(fl[0].Fleet.Budget) {
		t.Errorf("asWritten dropped the user's limit: %+v", got.Budget)
	}
}
